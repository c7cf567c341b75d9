// Ring AllReduce cost (analytical), as NCCL's ring runs it.
//
//   t = α_base + n_intra·α_nvlink + n_inter·α_net + 2(n−1)/n · S / B
//
// A ring AllReduce over n ranks takes 2(n−1) steps (reduce-scatter then all-gather), each moving
// S/n bytes per rank. Steps that cross nodes (2(nodes−1) of them) pay the network step latency,
// the others the NVLink one (NCCL src/graph/tuning.cc, ncclTopoTuneModel: nsteps, nInterSteps;
// constants from the profile, plus the cluster's extra hop latency). α_base is NCCL's per-call
// base latency of the ring (baseLat[RING][SIMPLE]).
// B, the ring's bus bandwidth per rank, is its slowest link: NVLink per GPU inside a node (when two
// ranks share one); across nodes, NCCL builds one ring per NIC rail, so a node's k ranks leave it over
// k NICs at once and the inter-node hop carries k·NIC per rank's worth (nccl.md §1.5, channels).
// Each link kind is derated by the profile's bus efficiency (measured busbw / link bandwidth).
#pragma once

#include <cstdint>
#include <span>

#include "calibrate/hardware_profile.h"
#include "sim/units.h"
#include "topology/cluster_spec.h"

namespace clustersim::workloads {

struct RingCost {
  std::uint32_t ranks = 0;
  std::uint32_t steps = 0;          // 2(n−1)
  std::uint32_t inter_steps = 0;    // 2(nodes−1)
  Seconds latency;                  // base + per-step latencies
  BytesPerSecond bus_bandwidth;     // B
  Seconds bandwidth_time;           // 2(n−1)/n · S / B
  Seconds total() const { return latency + bandwidth_time; }
};

RingCost ring_allreduce_cost(const topology::ClusterSpec& cluster, const calibrate::CollectiveConstants& constants,
                             std::span<const std::uint32_t> gpus, Bytes size);

}  // namespace clustersim::workloads
