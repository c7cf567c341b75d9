#include "workloads/collective_model.h"

#include <algorithm>
#include <cassert>
#include <limits>

#include "topology/communicator_span.h"

namespace clustersim::workloads {

RingCost ring_allreduce_cost(const topology::ClusterSpec& cluster, const calibrate::CollectiveConstants& c,
                             std::span<const std::uint32_t> gpus, Bytes size) {
  const topology::CommunicatorSpan span = topology::span_of(cluster, gpus);
  RingCost cost;
  cost.ranks = span.ranks;
  if (span.ranks <= 1) return cost;  // nothing to exchange
  const double n = span.ranks;
  cost.steps = 2 * (span.ranks - 1);
  cost.inter_steps = 2 * (span.nodes - 1);
  const std::uint32_t intra_steps = cost.steps - cost.inter_steps;
  cost.latency = c.ring_base_latency + (c.nvlink_step_latency + cluster.nvlink_hop_latency) * intra_steps +
                 (c.network_step_latency + cluster.network_hop_latency) * cost.inter_steps;

  double bus = std::numeric_limits<double>::infinity();
  if (span.max_ranks_per_node > 1)
    bus = std::min(bus, cluster.nvlink_per_direction.raw() * c.nvlink_bus_efficiency);
  if (span.nodes > 1)
    bus = std::min(bus, cluster.nic_per_direction.raw() * span.min_ranks_per_node * c.network_bus_efficiency);
  assert(bus < std::numeric_limits<double>::infinity());
  cost.bus_bandwidth = bytes_per_second(bus);
  cost.bandwidth_time = (size * (2 * (n - 1) / n)) / cost.bus_bandwidth;
  return cost;
}

}  // namespace clustersim::workloads
