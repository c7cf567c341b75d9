// ClusterSpec: the validated value form of a scenario's cluster (topology/cluster.proto).
//
// A cluster is `nodes` nodes of `gpus_per_node` GPUs; GPU g lives on node g / gpus_per_node.
// It comes in three forms:
//  * simple (no preset): every node has one NVSwitch (when it has more than one GPU) and one NIC per GPU;
//    nodes are joined by a non-blocking rail-optimised fat tree unless `fabric` says otherwise;
//  * preset: a node layout from topology/presets/*.textproto (DGX A100, DGX/HGX H100, HGX H200, GB200 NVL72,
//    an 8-GPU PCIe server, a TPU v4 torus): PCIe switches, CPUs, NICs, the NVLink domain (which may span
//    several nodes, as the 72-GPU GB200 NVL72 rack of 18 four-GPU trays), or a 3D torus of chips;
//  * explicit: the vertices and links are listed one by one.
// Faults (links down or slowed) and slow GPUs (a compute slowdown factor) apply to every form.
//
// Units: bandwidths are BytesPerSecond per direction, latencies Seconds. `nvlink_per_direction` and
// `nic_per_direction` keep their meaning of the analytical collective model: per GPU. For a node without
// NVLink (PCIe only) nvlink_per_direction is the GPU's PCIe link; for a torus it is the sum of a chip's
// ICI links (each link carries nvlink_per_direction / links-per-chip). A node's NIC port bandwidth is
// nic_per_direction x gpus_per_node / nics_per_node (= nic_per_direction with one NIC per GPU).
// The graph built from it is topology::Topology (topology/topology.h).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/units.h"

namespace clustersim::topology {

enum class VertexKind { kGpu, kNvSwitch, kPcieSwitch, kCpu, kNic, kLeaf, kSpine, kCore };
// A switch of the network fabric between NVLink domains (leaf, spine, core).
constexpr bool is_fabric_switch(VertexKind k) {
  return k == VertexKind::kLeaf || k == VertexKind::kSpine || k == VertexKind::kCore;
}
enum class LinkKind { kNvlink, kPcie, kNetwork, kIci, kCpuInterconnect };

// How the GPUs of a node (or of a multi-node NVLink domain) reach each other.
enum class ScaleUp {
  kNvSwitch,  // all GPUs of the NVLink domain on one non-blocking NVSwitch crossbar
  kPcieOnly,  // no NVLink: GPU to GPU through PCIe switches and the CPUs' root complexes
  kTorus,     // accelerators in a 3D torus of direct links (TPU ICI); the whole cluster is one torus
};

// The hosts' CPU vendor, which NCCL's tuning reads on communicators spanning NVLink domains (cluster.proto).
enum class CpuVendor { kUnspecified, kIntel, kAmd, kArm };

enum class FabricKind { kRailOptimizedFatTree, kClosTwoLevel, kClosThreeLevel };
// How a fabric switch picks among equal-cost ports toward a destination (topology.h, Routing).
enum class FabricRouting { kDestinationModK, kEcmpHash, kAdaptive };

// Everything inside a node that the simple form leaves out. The defaults are the simple form.
struct NodeLayout {
  std::string preset;  // preset name ("dgx-a100"); "" = simple or explicit form
  ScaleUp scale_up = ScaleUp::kNvSwitch;
  std::uint32_t nvlink_domain_nodes = 1;  // nodes per NVLink domain (18 for GB200 NVL72)
  std::uint32_t nics_per_node = 1;
  std::uint32_t pcie_switches = 0;  // GPUs and NICs spread evenly over them, switches over the CPUs
  std::uint32_t cpus = 0;
  // Per x16 link (GPU, NIC or switch uplink). 0 = no PCIe figure: a GPU-NIC link gets the NIC's bandwidth.
  BytesPerSecond pcie_per_direction = bytes_per_second(0);
  BytesPerSecond cpu_interconnect_per_direction = bytes_per_second(0);  // between the CPUs; 0 = none
  BytesPerSecond c2c_per_direction = bytes_per_second(0);               // GPU-CPU NVLink-C2C per GPU; 0 = PCIe
  std::array<std::uint32_t, 3> torus{0, 0, 0};                          // x, y, z chips (ScaleUp::kTorus only)
  // Whether the torus's axes of 3 or more chips close into rings (wraparound links); false: a 3D mesh, each axis a
  // line. TPU v4 slices wrap around when every side is a multiple of 4 (cluster_loader.cpp).
  bool torus_wraps = true;
  bool nvls = true;  // the NVSwitch supports NVLink SHARP (NCCL's NVLS); false: multicast not available
  CpuVendor cpu_vendor = CpuVendor::kUnspecified;

  bool operator==(const NodeLayout&) const = default;
};

// The network joining NVLink domains. Leaf ports: downlinks to NICs at the NIC port bandwidth, uplinks at
// `link_per_direction`, split so that downlink bandwidth / uplink bandwidth ~= oversubscription.
struct FabricSpec {
  FabricKind kind = FabricKind::kRailOptimizedFatTree;
  double oversubscription = 1.0;                            // leaf downlink / uplink bandwidth; 1 = non-blocking
  std::uint32_t switch_radix = 64;                          // ports per switch (NVIDIA Quantum-2 QM9700: 64 x 400 Gb/s)
  std::string switch_model;  // the node preset's fabric switch that gave switch_radix; empty when the scenario set it
  BytesPerSecond link_per_direction = bytes_per_second(0);  // switch-switch links; 0 = the NIC port speed
  Seconds switch_latency = seconds(0);                      // added to every link that enters a fabric switch
  bool in_network_reduction = false;                        // SHARP-capable switches (NCCL CollNet)
  FabricRouting routing = FabricRouting::kAdaptive;         // also the explicit form's switches

  bool operator==(const FabricSpec&) const = default;
};

struct VertexSpec {  // explicit form
  std::string name;
  VertexKind kind = VertexKind::kGpu;
  std::optional<std::uint32_t> node;  // always set for GPUs after validation
  std::optional<std::uint32_t> gpu;   // GPU index; set exactly for GPUs
  bool operator==(const VertexSpec&) const = default;
};

struct LinkSpec {  // explicit form
  std::string from;
  std::string to;
  LinkKind kind = LinkKind::kNvlink;
  BytesPerSecond bandwidth = bytes_per_second(0);  // per direction
  Seconds latency = seconds(0);
  bool duplex = true;  // also the link to -> from
  bool operator==(const LinkSpec&) const = default;
};

// Selects links by endpoints (both directions of the from-to cable) or by a glob on link names
// ('*' any run of characters, '?' one character), then takes them down or scales their bandwidth.
struct LinkFault {
  std::string from;
  std::string to;
  std::string pattern;
  bool down = false;
  double bandwidth_factor = 1.0;  // in (0, 1) when !down
  bool operator==(const LinkFault&) const = default;
};

struct SlowGpu {
  std::uint32_t gpu = 0;
  double compute_slowdown = 1.0;  // >= 1: compute takes this many times longer
  bool operator==(const SlowGpu&) const = default;
};

struct ClusterSpec {
  std::uint32_t nodes = 1;
  std::uint32_t gpus_per_node = 1;
  std::string gpu;                                  // GPU type, e.g. "A100-SXM4-80GB"
  BytesPerSecond nvlink_per_direction = GBps(300);  // per GPU
  BytesPerSecond nic_per_direction = Gbitps(200);   // per GPU
  Seconds nvlink_hop_latency = seconds(0);          // on each GPU->NVSwitch link and each ICI link
  Seconds network_hop_latency = seconds(0);         // on each NIC->switch link
  NodeLayout node;
  FabricSpec fabric;
  std::vector<VertexSpec> vertices;  // explicit form when non-empty
  std::vector<LinkSpec> links;
  std::vector<LinkFault> link_faults;
  std::vector<SlowGpu> slow_gpus;  // sorted by gpu, distinct

  std::uint32_t gpu_count() const { return nodes * gpus_per_node; }
  std::uint32_t node_of(std::uint32_t gpu_index) const { return gpu_index / gpus_per_node; }
  bool is_explicit() const { return !vertices.empty(); }
  // A generated torus of chips (TPU-style scale-up: one ICI domain), not an explicit graph.
  bool is_torus() const { return node.scale_up == ScaleUp::kTorus && !is_explicit(); }
  // Bandwidth of one NIC port (the simple form and the DGX presets have one NIC per GPU).
  BytesPerSecond nic_port_per_direction() const {
    return node.nics_per_node == 0 ? bytes_per_second(0)
                                   : nic_per_direction * gpus_per_node / static_cast<double>(node.nics_per_node);
  }
  double compute_slowdown(std::uint32_t gpu_index) const {
    const auto it = std::lower_bound(slow_gpus.begin(), slow_gpus.end(), gpu_index,
                                     [](const SlowGpu& s, std::uint32_t g) { return s.gpu < g; });
    return it != slow_gpus.end() && it->gpu == gpu_index ? it->compute_slowdown : 1.0;
  }

  bool operator==(const ClusterSpec&) const = default;
};

const char* to_string(VertexKind kind);
const char* to_string(LinkKind kind);
const char* to_string(FabricKind kind);
const char* to_string(FabricRouting routing);
const char* to_string(CpuVendor vendor);

}  // namespace clustersim::topology
