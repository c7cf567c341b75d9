// ClusterSpec: the validated value form of a scenario's cluster (topology/cluster.proto).
//
// A cluster is `nodes` nodes of `gpus_per_node` GPUs. Inside a node GPUs talk over NVLink
// (through NVSwitch), across nodes over one NIC per GPU (rail-style, as DGX/HGX systems are built).
// Bandwidths are per GPU and per direction. GPU g lives on node g / gpus_per_node.
#pragma once

#include <cstdint>
#include <string>

#include "sim/units.h"

namespace clustersim::topology {

struct ClusterSpec {
  std::uint32_t nodes = 1;
  std::uint32_t gpus_per_node = 1;
  std::string gpu;                                 // GPU type, e.g. "A100-SXM4-80GB"
  BytesPerSecond nvlink_per_direction = GBps(300); // per GPU
  BytesPerSecond nic_per_direction = Gbitps(200);  // per GPU
  Seconds nvlink_hop_latency = seconds(0);
  Seconds network_hop_latency = seconds(0);

  std::uint32_t gpu_count() const { return nodes * gpus_per_node; }
  std::uint32_t node_of(std::uint32_t gpu_index) const { return gpu_index / gpus_per_node; }
};

}  // namespace clustersim::topology
