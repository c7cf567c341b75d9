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
//    GPU and the NIC rails per NVLink domain, derated by the profile's measured bus efficiencies — with the
//    protocol's wire efficiency (LL: 8 of 16 bytes are data; LL128: 120 of 128) and the NVLS rate measured
//    on H100 (§1.12). At ANALYTICAL fidelity this is the time; at FLOW fidelity the same algorithm runs as
//    flows on the topology (network_model.h) and the bandwidth comes from max-min sharing instead.
//
// Sizes follow nccl-tests: `size` is the buffer nccl-tests prints — count·type for AllReduce, Broadcast,
// Reduce and Send/Recv; the total (all ranks) for AllGather, ReduceScatter and AlltoAll.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/hardware_profile.h"
#include "sim/units.h"
#include "topology/cluster_spec.h"

namespace clustersim::workloads {

enum class CollectiveOp { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll, kSendRecv };
// kPointToPoint is how NCCL runs AlltoAll and Send/Recv (grouped sends and receives, no tuning table).
enum class Algorithm { kRing, kTree, kNvls, kCollNet, kHierarchical, kPointToPoint };
enum class Protocol { kLL, kLL128, kSimple };

const char* to_string(CollectiveOp op);  // "allreduce", "reducescatter", ...
const char* to_string(Algorithm a);      // "ring", "tree", "nvls", "collnet", "hierarchical", "p2p"
const char* to_string(Protocol p);       // "LL", "LL128", "Simple"
// Accepts the names above, nccl-tests' (all_reduce, reduce_scatter, all_gather, alltoall, sendrecv) and
// NCCL_ALGO/NCCL_PROTO spellings, case-insensitively.
std::optional<CollectiveOp> parse_collective_op(std::string_view name);
std::optional<Algorithm> parse_algorithm(std::string_view name);
std::optional<Protocol> parse_protocol(std::string_view name);

// nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md): busbw = algbw · factor.
double busbw_factor(CollectiveOp op, std::uint32_t ranks);

// The double binary tree over D domains (Sanders, Speck & Träff 2009; NCCL 2.4): tree 0 is a binary
// heap over domains 0..D−1, tree 1 its mirror image, so a domain that is interior in one tree is a
// leaf (or near one) in the other. Returns the parent of domain i in `tree`, or D for the root.
std::uint32_t tree_parent(int tree, std::uint32_t i, std::uint32_t domains);
// The most sends (to parent, for the reduce, and to each child, for the broadcast) any domain makes
// over both trees; each tree carries half the data, so that domain moves max_sends / 2 · S.
std::uint32_t tree_max_sends(std::uint32_t domains);

// Scenario settings that act like NCCL environment variables.
struct NcclSettings {
  std::optional<Algorithm> algorithm;  // NCCL_ALGO
  std::optional<Protocol> protocol;    // NCCL_PROTO
  Seconds launch_overhead;             // host launch cost per call; overlaps the previous call's GPU work
};

struct CollectiveRequest {
  CollectiveOp op = CollectiveOp::kAllReduce;
  std::vector<std::uint32_t> gpus;  // the communicator, global GPU indices in rank order
  Bytes size;                       // nccl-tests "size" (see above)
  std::uint32_t root = 0;           // rank of the root (Broadcast, Reduce); Send/Recv: gpus = {src, dst}
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
};

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
};

}  // namespace clustersim::workloads
