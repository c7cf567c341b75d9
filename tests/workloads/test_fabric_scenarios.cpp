// scenarios/fabric-rail-vs-oversubscribed: simulated AllReduce times against the hand derivation in
// that folder's README (max-min shares of the rings on the routed links).
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>

#include "cli/scenario_loader.h"
#include "topology/topology.h"
#include "workloads/iteration_result.h"

using namespace clustersim;

namespace {

const std::string kDir = std::string(CLUSTERSIM_SOURCE_DIR) + "/scenarios/fabric-rail-vs-oversubscribed/";

// The largest number of rings that share one leaf/spine link (at least 1), counted from the topology's routes:
// ring c crosses from node d to node d+1 from GPU c of node d to GPU c of node d+1 with flow key c. Under
// adaptive routing a ring loads each of its equal-cost paths with its share (Topology::spread), so the count
// is a sum of shares.
double max_rings_on_a_fabric_link(const topology::Topology& topo, std::uint32_t nodes, std::uint32_t k) {
  std::map<topology::LinkIndex, double> rings_on;
  for (std::uint32_t c = 0; c < k; ++c) {
    for (std::uint32_t d = 0; d < nodes; ++d) {
      const std::uint32_t src = d * k + c, dst = ((d + 1) % nodes) * k + c;
      for (const auto& [l, share] : topo.spread(src, dst, c)) {
        const auto info = topo.link(l);
        const auto from = topo.vertex(info.from).kind, to = topo.vertex(info.to).kind;
        const bool fabric = (from == topology::VertexKind::kLeaf || from == topology::VertexKind::kSpine) &&
                            (to == topology::VertexKind::kLeaf || to == topology::VertexKind::kSpine);
        if (fabric) rings_on[l] += share;
      }
    }
  }
  double m = 1;
  for (const auto& [l, count] : rings_on) m = std::max(m, count);
  return m;
}

}  // namespace

TEST_CASE("fabric scenarios: ring AllReduce times match the max-min hand derivation within 2%") {
  // README: S = 67,133,440 B; per ring edge 254/128 · S / 8 = 16,652,240 B; latency
  // (8.4 + 224·3.4 + 30·14) · 1.4 = 1,666.0 µs; a ring's rate is 42.5 GB/s (NIC 50 GB/s · 0.85) divided
  // by the number m of rings on its most shared fabric link.
  const double latency = 1666.0e-6, per_edge = 16652240.0, nic = 42.5e9;
  for (const char* file : {"rail-optimized.textproto", "clos-4to1.textproto", "clos-4to1-ecmp.textproto",
                           "clos-4to1-adaptive.textproto"}) {
    CAPTURE(file);
    const workloads::Scenario sc = cli::load_scenario_file(kDir + file);
    const topology::Topology topo(sc.cluster);
    const double m = max_rings_on_a_fabric_link(topo, 16, 8);
    const workloads::ScenarioResult r = workloads::simulate_scenario(sc);
    REQUIRE(!r.jobs[0].bucket_allreduce.empty());
    CHECK(r.jobs[0].buckets[0].size.raw() == 67133440.0);
    const double expected = latency + per_edge / (nic / m);
    CHECK(r.jobs[0].bucket_allreduce[0].raw() == doctest::Approx(expected).epsilon(0.02));
    if (std::string(file) == "clos-4to1-ecmp.textproto") {
      CHECK(m == 3);  // the README's ECMP collision
      CHECK(expected == doctest::Approx(2841.452e-6).epsilon(1e-6));
    } else {
      // Rail-optimised: rail c stays on its leaf. The Clos routed by destination: the 8 rings crossing a leaf
      // boundary go to NICs numbered b + c (b = 48, 96 or 0, multiples of the 12 uplinks), up uplinks c.
      // Adaptive: the 8 rings spread over the 12 uplinks, 8/12 of a ring on each, less than the NIC's one.
      CHECK(m == 1);
      CHECK(expected == doctest::Approx(2057.817e-6).epsilon(1e-6));
    }
  }
}
