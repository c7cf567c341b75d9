// How a communicator (a list of GPUs) sits on the cluster: how many nodes it spans and how many
// of its ranks share a node. The collective cost model needs exactly this to pick the links a
// ring crosses: NVLink between ranks of one node, the NICs between nodes.
#pragma once

#include <cstdint>
#include <span>

#include "topology/cluster_spec.h"

namespace clustersim::topology {

struct CommunicatorSpan {
  std::uint32_t ranks = 0;
  std::uint32_t nodes = 0;               // distinct nodes holding at least one rank
  std::uint32_t min_ranks_per_node = 0;  // over the nodes it spans
  std::uint32_t max_ranks_per_node = 0;
};

// gpus: global GPU indices (0 .. cluster.gpu_count()-1), distinct.
CommunicatorSpan span_of(const ClusterSpec& cluster, std::span<const std::uint32_t> gpus);

}  // namespace clustersim::topology
