#include "topology/communicator_span.h"

#include <algorithm>
#include <map>

namespace clustersim::topology {

CommunicatorSpan span_of(const ClusterSpec& cluster, std::span<const std::uint32_t> gpus) {
  std::map<std::uint32_t, std::uint32_t> per_node;
  // A torus is one ICI domain: every chip reaches every other over ICI links.
  const std::uint32_t domain_nodes = cluster.node.scale_up == ScaleUp::kTorus
                                         ? cluster.nodes
                                         : std::max<std::uint32_t>(1, cluster.node.nvlink_domain_nodes);
  for (std::uint32_t g : gpus) ++per_node[cluster.node_of(g) / domain_nodes];
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
