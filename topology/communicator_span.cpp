#include "topology/communicator_span.h"

#include <algorithm>
#include <map>

namespace clustersim::topology {

std::uint32_t domain_of(const ClusterSpec& cluster, std::uint32_t gpu) {
  // A torus is one ICI domain: every chip reaches every other over ICI links.
  if (cluster.node.scale_up == ScaleUp::kTorus) return 0;
  return cluster.node_of(gpu) / std::max<std::uint32_t>(1, cluster.node.nvlink_domain_nodes);
}

CommunicatorSpan span_of(const ClusterSpec& cluster, std::span<const std::uint32_t> gpus) {
  std::map<std::uint32_t, std::uint32_t> per_node;
  for (std::uint32_t g : gpus) ++per_node[domain_of(cluster, g)];
  CommunicatorSpan span;
  span.ranks = static_cast<std::uint32_t>(gpus.size());
  span.nodes = static_cast<std::uint32_t>(per_node.size());
  if (!per_node.empty()) {
    span.min_ranks_per_node = per_node.begin()->second;
    for (const auto& [node, count] : per_node) {
      span.min_ranks_per_node = std::min(span.min_ranks_per_node, count);
      span.max_ranks_per_node = std::max(span.max_ranks_per_node, count);
    }
  }
  return span;
}

}  // namespace clustersim::topology
