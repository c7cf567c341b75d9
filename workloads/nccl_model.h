// NCCL-faithful collective cost model: which algorithm and protocol NCCL picks, and how long the
// collective really takes.
//
// Two models, as NCCL itself needs two:
//  * NCCL's tuning model (NCCL v2.30.7-1 src/graph/tuning.cc ncclTopoTuneModel / ncclTopoGetAlgoTime,
//    see ../shared/reference/nccl.md §1.2–1.6): per (algorithm, protocol) a latency from base and per-hop
//    latencies by link class, and a bus bandwidth from the channels' bandwidth with protocol factors,
//    per-channel caps and the tree correction table. NCCL takes the argmin; so does clustersim, unless the
//    scenario forces an algorithm or protocol (as NCCL_ALGO / NCCL_PROTO do). NCCL says itself that this
//    model exists to choose, not to predict (§1.1), so it is used only for the choice.
//  * The physical model that times the chosen (algorithm, protocol): the same latency structure plus a
//    launch overhead per call, and a bandwidth from the links the algorithm actually loads — NVLink per
//    GPU and the NIC rails per NVLink domain (on PCIe-only nodes the busiest PCIe or CPU link the algorithm's
//    routes load), derated by the profile's measured bus efficiencies — with the
//    protocol's wire efficiency (LL: 8 of 16 bytes are data; LL128: 120 of 128) and the NVLS rate measured
//    on H100 (§1.12); AllGather takes the profile's own NVLink efficiency for it where there is one. At ANALYTICAL
//    fidelity this is the time; at FLOW fidelity the same algorithm runs as flows on the topology (network_model.h) and
//    the bandwidth comes from max-min sharing instead.
//
// On a torus (ScaleUp::kTorus: TPU chips joined by ICI links, no NCCL) a communicator that is a box of the torus
// (topology/torus.h) runs Algorithm::kTorus, the way TPU ICI collectives are decomposed per dimension:
//   AllReduce = reduce-scatter along x, then y, then z, then all-gather along z, y, x. Along an axis with k
//   members per line, each line runs a bidirectional ring: half the data clockwise, half counter-clockwise,
//   so each ring moves (k−1)/k · S'/2 per edge on its own direction of the links, S' being what a chip holds
//   entering the reduce-scatter (S on the first axis, S/k_x on the second, S/(k_x·k_y) on the third) or
//   leaving the all-gather. Per axis: time = (k−1)·α + (k−1)/k · S' / β with β = 2·b (both directions of the
//   ring; b = one ICI link's bandwidth × the profile's nvlink_bus_efficiency; where the ring's edges share a
//   link — k = 2, or members that are not neighbours — β = 2·b / the busiest link's edge count) and
//   α = the profile's nvlink_step_latency (a step over ICI) + the ICI links' latency along one edge.
//   That keeps 2 of a chip's 6 ICI links busy at a time. The 2-D torus all-reduce of TPU pods (Ying et al.,
//   "Image Classification at Supercomputer Scale", arXiv:1811.06992, 2018) generalised: the buffer is split in
//   one part per axis of the box with more than one member (A parts), part j runs the axes in the order rotated
//   by j (x,y,z | y,z,x | z,x,y), so that in each of the A reduce-scatter stages (and the A all-gather stages,
//   each part's order reversed) every axis carries one part: on a cube the transfer drops to 1/A, all links
//   busy. A stage takes its slowest part's latency and transfer; where the axes differ the split pays
//   max_k (k−1) steps per stage instead of Σ (k−1), so the plan takes the split only when it is faster
//   (CollectivePlan::channels = the parts). Broadcast and Reduce do not split.
//   ReduceScatter and AllGather are the halves; Broadcast (Reduce) pipelines the buffer along each axis in
//   turn in two chains from (to) the root's line, half each way (≈ S / (2b) per axis); AlltoAll sends every
//   pair's S/n directly on shortest paths, bounded by the busiest axis's links; Send/Recv takes one path.
// Plus the profile's ring_base_latency once per call. FLOW runs the same phases as flows on the torus links.
// A communicator that is not a box (or a forced --algo ring) runs NCCL's ring in rank order, each edge routed in
// dimension order (topology::torus_walk): an edge between chips that are not neighbours takes several ICI links,
// and the ring runs at one link's bandwidth over the most edges any link carries (FLOW routes the same way).
//
// Sizes follow nccl-tests: `size` is the buffer nccl-tests prints — count·type for AllReduce, Broadcast,
// Reduce and Send/Recv; the total (all ranks) for AllGather, ReduceScatter and AlltoAll.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/hardware_profile.h"
#include "sim/units.h"
#include "topology/cluster_spec.h"

namespace clustersim::topology {
class Topology;
}

namespace clustersim::workloads {

enum class CollectiveOp { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll, kSendRecv };
// kPointToPoint is how NCCL runs AlltoAll and Send/Recv (grouped sends and receives, no tuning table).
// kTorus is the per-dimension decomposition of TPU ICI collectives (above); it is chosen on every torus box.
// kNvlsTree is NCCL's NVLS_TREE: AllReduce across NVSwitch domains, NVLS inside each, a double binary tree of the
// domains' NVLS heads between them.
enum class Algorithm { kRing, kTree, kNvls, kCollNet, kHierarchical, kPointToPoint, kTorus, kPat, kNvlsTree };
enum class Protocol { kLL, kLL128, kSimple };

const char* to_string(CollectiveOp op);  // "allreduce", "reducescatter", ...
// "ring", "tree", "nvls", "collnet", "hierarchical", "p2p", "torus", "pat", "nvlstree"
const char* to_string(Algorithm a);
const char* to_string(Protocol p);       // "LL", "LL128", "Simple"
// Accepts the names above, nccl-tests' (all_reduce, reduce_scatter, all_gather, alltoall, sendrecv) and
// NCCL_ALGO/NCCL_PROTO spellings, case-insensitively.
std::optional<CollectiveOp> parse_collective_op(std::string_view name);
std::optional<Algorithm> parse_algorithm(std::string_view name);
std::optional<Protocol> parse_protocol(std::string_view name);
// nccl-tests' name of the collective without "_perf": "all_reduce", "reduce_scatter", "all_gather", "broadcast",
// "reduce", "alltoall", "sendrecv".
const char* nccl_tests_name(CollectiveOp op);

// nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md): busbw = algbw · factor.
double busbw_factor(CollectiveOp op, std::uint32_t ranks);

// The double binary tree over D domains (Sanders, Speck & Träff 2009; NCCL 2.4, src/graph/trees.cc): tree 0 is
// NCCL's in-order binary tree over domains 0..D−1 (parent and child 2^k apart, so few edges leave a leaf switch),
// tree 1 its mirror image (D even) or its shift by one (D odd), so a domain that is interior in one tree is a
// leaf in the other. Returns the parent of domain i in `tree`, or D for the root.
std::uint32_t tree_parent(int tree, std::uint32_t i, std::uint32_t domains);
// PAT's rounds on n ranks (one per node): ceil(log2 n), each to peers at a power-of-two distance (network_model.cpp
// runs them farthest first).
std::uint32_t pat_rounds(std::uint32_t n);
// The most sends (to parent, for the reduce, and to each child, for the broadcast) any domain makes
// over both trees; each tree carries half the data, so that domain moves max_sends / 2 · S.
std::uint32_t tree_max_sends(std::uint32_t domains);

// The most any GPU of a domain with m GPUs sends over its links inside the domain during a tree AllReduce,
// in units of the buffer S: the tree runs k channels, each a chain through the domain that starts at GPU
// c mod m (the one on rail c), and each chain edge carries S/k up (reduce) and S/k down (broadcast), so an
// interior GPU of a chain sends 2S/k and its two ends S/k. One chain (k = 1) of m ≥ 3 GPUs: 2; of 2: 1;
// m = k = 8: (6·2 + 2·1)/8 = 1.75. NetworkModel lays out its tree flows this way.
double tree_chain_sends(std::uint32_t m, std::uint32_t k);

// Scenario settings that act like NCCL environment variables.
struct NcclSettings {
  std::optional<Algorithm> algorithm;  // NCCL_ALGO
  std::optional<Protocol> protocol;    // NCCL_PROTO
  Seconds launch_overhead;             // host launch cost per call; overlaps the previous call's GPU work
  // Where the forced algorithm and protocol were written (file; 1-based line:col, 0 = unknown), so that the
  // error for one that cannot run on a communicator names it.
  std::string source_file;
  int algorithm_line = 0, algorithm_column = 0;
  int protocol_line = 0, protocol_column = 0;
};

struct CollectiveRequest {
  CollectiveOp op = CollectiveOp::kAllReduce;
  std::vector<std::uint32_t> gpus;  // the communicator, global GPU indices in rank order
  Bytes size;                       // nccl-tests "size" (see above)
  std::uint32_t root = 0;           // rank of the root (Broadcast, Reduce); Send/Recv: gpus = {src, dst}
  // The communicator runs alone (a lone nccl-tests run, run_collective): where a NIC serves several GPUs, its
  // port is shared by the communicator's ranks on it only, not by all the GPUs it serves, which is what
  // ANALYTICAL assumes in training (data-parallel groups of every tensor-parallel rank run at once). FLOW
  // needs no such hint: it sees the traffic that is there.
  bool alone = false;
};

struct CollectivePlan {
  CollectiveOp op = CollectiveOp::kAllReduce;
  Algorithm algorithm = Algorithm::kRing;
  Protocol protocol = Protocol::kSimple;
  std::uint32_t channels = 1;    // rings/trees run in parallel (one per NIC rail across domains)
  Seconds latency;               // physical model: base + per-step latencies (+ hop_latency)
  Seconds hop_latency;           // the part of `latency` from the cluster's per-hop link latencies
  BytesPerSecond bus_bandwidth;  // physical model, nccl-tests busbw convention
  Seconds time;                  // max(launch overhead, latency + size · factor / bus_bandwidth)
  Seconds nccl_model_time;       // NCCL's own estimate, used for the choice
  // Bytes on the wire per byte of payload relative to the algorithm on raw links (LL sends 16 B lines
  // with 8 B of data, LL128 120 of 128; NCCL's per-channel caps and the tree correction count as extra
  // bytes): FLOW fidelity inflates its flows by it, so that contention-free FLOW equals ANALYTICAL.
  double wire_factor = 1.0;
  // Payload bytes per second the kernels move at most, whatever the links give: NCCL's per-channel ceiling where
  // it is a rate of the kernels rather than bytes on the wire (NVLSTree's perChMaxNVLSTreeBw). FLOW bounds the
  // collective's flows by it, so under contention the ceiling and the links' share do not compound. Unbounded
  // elsewhere.
  BytesPerSecond payload_rate_cap = BytesPerSecond::from_raw(std::numeric_limits<double>::infinity());
};

// One phase of a collective on a torus box (Algorithm::kTorus), in order.
enum class TorusStep { kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll, kSendRecv };
struct TorusPhase {
  TorusStep step = TorusStep::kReduceScatter;
  int axis = 0;               // 0 = x, 1 = y, 2 = z; −1 for kAllToAll and kSendRecv (all axes at once)
  std::uint32_t ranks = 1;    // k: members per line along the axis (kAllToAll, kSendRecv: the communicator)
  Bytes bytes;                // what a chip holds entering a reduce-scatter or leaving an all-gather; the
                              // buffer of a broadcast/reduce/send; a chip's whole AlltoAll send buffer
  std::uint32_t steps = 0;    // latency steps: k−1 for a ring phase, the longer chain's hops, 1 for direct sends
  Seconds step_latency;       // steps × the profile's nvlink_step_latency
  Seconds hop_latency;        // steps × the ICI links' latency along one edge (the longest route for kAllToAll)
  double max_link_load = 0;   // bytes on the busiest directed link per byte of `bytes`
  Seconds transfer;           // bytes · max_link_load / b (b: one ICI link × nvlink_bus_efficiency)
  std::uint32_t stage = 0;    // phases of one stage run at once, each part on its own axis; stages in order
  std::uint32_t part = 0;     // which part of the buffer (torus_phases' `parts`)
};
// The phases of `request` on a torus cluster, or empty when the cluster is no torus or the communicator is no
// box of it (Send/Recv: any two chips). One chip: empty. `parts` > 1 (AllReduce, ReduceScatter, AllGather on
// a box of A = torus_axis_parts() > 1 axes; parts = A): the buffer is split in A parts that run the axes in A
// rotated orders at once (part j reduce-scatters along the box's axes a_j, a_{j+1}, … and all-gathers back in
// the reverse order), so that in every stage each axis's links carry one part (see the header).
std::vector<TorusPhase> torus_phases(const topology::ClusterSpec& cluster, const calibrate::HardwareProfile& profile,
                                     const CollectiveRequest& request, std::uint32_t parts = 1);
// The parts torus_phases can split `request` into: the box's axes with more than one member for AllReduce,
// ReduceScatter and AllGather, else 1.
std::uint32_t torus_axis_parts(const topology::ClusterSpec& cluster, const CollectiveRequest& request);

class CollectiveModel {
 public:
  CollectiveModel(const topology::ClusterSpec& cluster, const calibrate::HardwareProfile& profile,
                  NcclSettings settings = {});

  // NCCL's choice (or the forced one) and its physical time. Throws InputError (path "nccl") when the
  // forced algorithm cannot run this collective on this communicator.
  CollectivePlan plan(const CollectiveRequest& request) const;
  // Every (algorithm, protocol) NCCL would consider for this request, with both times.
  std::vector<CollectivePlan> candidates(const CollectiveRequest& request) const;

 private:
  const topology::ClusterSpec& cluster_;
  const calibrate::HardwareProfile& profile_;
  NcclSettings settings_;
  // A generated cluster of PCIe-only nodes: its topology, built once, whose routes inside the nodes (the PCIe
  // switches' shared uplinks, the CPUs' interconnect) bound the closed form as FLOW's flows load them. Else null.
  std::shared_ptr<const topology::Topology> route_topology_;
};

}  // namespace clustersim::workloads
