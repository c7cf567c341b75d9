// How a communicator (a list of GPUs) sits on the cluster: how many NVLink domains it spans and how
// many of its ranks share a domain. The collective cost model needs exactly this to pick the links
// a ring crosses: NVLink between ranks of one domain, the NICs between domains. An NVLink domain is
// a node, or several nodes joined by NVSwitch (GB200 NVL72: 18 trays of 4 GPUs); a torus is one
// domain (its ICI links reach every chip).
#pragma once

#include <cstdint>
#include <span>

#include "topology/cluster_spec.h"

namespace clustersim::topology {

struct CommunicatorSpan {
  std::uint32_t ranks = 0;
  std::uint32_t nodes = 0;               // distinct NVLink domains holding at least one rank
  std::uint32_t min_ranks_per_node = 0;  // over the domains it spans
  std::uint32_t max_ranks_per_node = 0;
};

// The NVLink domain of a GPU: its node's index over the nodes per domain; a torus is one ICI domain.
std::uint32_t domain_of(const ClusterSpec& cluster, std::uint32_t gpu);

// gpus: global GPU indices (0 .. cluster.gpu_count()-1), distinct.
CommunicatorSpan span_of(const ClusterSpec& cluster, std::span<const std::uint32_t> gpus);

}  // namespace clustersim::topology
