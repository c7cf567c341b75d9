// Tests of the weighted max-min fair solver (sim/maxmin.h): hand-derived allocations (equal split,
// weights, bounds, the parking lot, fatpipe links, flows without links, zero capacity), the checker
// (it must reject allocations that are infeasible or not max-min), component independence (a
// component's rates are bit-for-bit the same whether solved alone or with other flows), and a
// property test over 1,000 random systems: feasibility and the bottleneck condition.
//
// Capacities are in bytes/s. Expected rates are exact sums and quotients of small numbers, so
// unless stated otherwise they are checked with doctest::Approx at a relative 1e-12.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "sim/maxmin.h"

namespace clustersim::sim {
namespace {

constexpr double kG = 1e9;  // 1 GB/s in bytes/s

doctest::Approx near(double v) {
  return doctest::Approx(v).epsilon(1e-12);
}

using Path = std::vector<std::uint32_t>;

TEST_CASE("maxmin: two flows on one link split it equally") {
  // C = 10 GB/s, w = 1, 1: level = 10 / (1 + 1) = 5 GB/s each.
  MaxMinSolver s;
  const auto l = s.add_link(10 * kG);
  s.add_flow(Path{l});
  s.add_flow(Path{l});
  s.solve();
  CHECK(s.rate(0) == near(5 * kG));
  CHECK(s.rate(1) == near(5 * kG));
  CHECK(s.rounds() == 1);
  CHECK(check_max_min(s, s.rates()).ok());
}

TEST_CASE("maxmin: weights 1:3 split a link 25/75") {
  // level = C / (1 + 3) = 2.5 GB/s; rates = 1 * 2.5 = 2.5 GB/s and 3 * 2.5 = 7.5 GB/s.
  MaxMinSolver s;
  const auto l = s.add_link(10 * kG);
  s.add_flow(Path{l}, 1.0);
  s.add_flow(Path{l}, 3.0);
  s.solve();
  CHECK(s.rate(0) == near(2.5 * kG));
  CHECK(s.rate(1) == near(7.5 * kG));
  CHECK(check_max_min(s, s.rates()).ok());
}

TEST_CASE("maxmin: a flow bound frees capacity for the other") {
  // Flow 0 bound 2 GB/s: round 1 lambda = min(10/2, 2/1) = 2, flow 0 freezes at its bound;
  // round 2: flow 1 alone on the 10 - 2 = 8 GB/s left.
  MaxMinSolver s;
  const auto l = s.add_link(10 * kG);
  s.add_flow(Path{l}, 1.0, 2 * kG);
  s.add_flow(Path{l});
  s.solve();
  CHECK(s.rate(0) == 2 * kG);  // exactly its bound
  CHECK(s.rate(1) == near(8 * kG));
  CHECK(s.rounds() == 2);
  CHECK(check_max_min(s, s.rates()).ok());
}

TEST_CASE("maxmin: parking lot with equal capacities") {
  // One long flow across n = 5 links of capacity C, one short flow per link: every link has two
  // flows, so every link's level is C/2 in round 1 and all flows freeze at C/2.
  const int n = 5;
  const double c = 40 * kG;
  MaxMinSolver s;
  Path all;
  for (int i = 0; i < n; ++i) all.push_back(s.add_link(c));
  const auto longf = s.add_flow(all);
  for (int i = 0; i < n; ++i) s.add_flow(Path{all[i]});
  s.solve();
  CHECK(s.rate(longf) == near(c / 2));
  for (std::uint32_t i = 1; i <= n; ++i) CHECK(s.rate(i) == near(c / 2));
  CHECK(check_max_min(s, s.rates()).ok());
}

TEST_CASE("maxmin: parking lot with different capacities") {
  // Capacities 10, 4, 6, 8 GB/s. Round 1 levels C_l/2 = 5, 2, 3, 4: link 1 is tightest, so the
  // long flow and short flow 1 freeze at 2. Then each remaining short flow is alone on its link
  // with C_l - 2 left: 10 - 2 = 8, 6 - 2 = 4, 8 - 2 = 6. Those links are still one component
  // (joined by the long flow), so they saturate one per round, lowest first: 4 rounds in all.
  MaxMinSolver s;
  const double caps[] = {10 * kG, 4 * kG, 6 * kG, 8 * kG};
  Path all;
  for (double c : caps) all.push_back(s.add_link(c));
  const auto longf = s.add_flow(all);
  for (std::uint32_t l : all) s.add_flow(Path{l});
  s.solve();
  CHECK(s.rate(longf) == near(2 * kG));
  CHECK(s.rate(1) == near(8 * kG));
  CHECK(s.rate(2) == near(2 * kG));
  CHECK(s.rate(3) == near(4 * kG));
  CHECK(s.rate(4) == near(6 * kG));
  CHECK(s.rounds() == 4);
  CHECK(check_max_min(s, s.rates()).ok());
}

TEST_CASE("maxmin: a fatpipe link does not divide its capacity") {
  SUBCASE("three flows on a fatpipe link each get its full capacity") {
    MaxMinSolver s;
    const auto l = s.add_link(10 * kG, LinkSharing::kFatpipe);
    for (int i = 0; i < 3; ++i) s.add_flow(Path{l});
    s.solve();
    for (std::uint32_t i = 0; i < 3; ++i) CHECK(s.rate(i) == 10 * kG);
    CHECK(check_max_min(s, s.rates()).ok());
  }
  SUBCASE("a fatpipe link acts as a per-flow bound") {
    // Flows A, B, C share a 30 GB/s link; A also crosses a 4 GB/s fatpipe. Round 1:
    // lambda = min(30/3 = 10, A's fatpipe 4) = 4 -> A = 4. Round 2: (30 - 4) / 2 = 13 for B and C.
    MaxMinSolver s;
    const auto shared = s.add_link(30 * kG);
    const auto fat = s.add_link(4 * kG, LinkSharing::kFatpipe);
    s.add_flow(Path{fat, shared});
    s.add_flow(Path{shared});
    s.add_flow(Path{shared});
    s.solve();
    CHECK(s.rate(0) == 4 * kG);
    CHECK(s.rate(1) == near(13 * kG));
    CHECK(s.rate(2) == near(13 * kG));
    CHECK(check_max_min(s, s.rates()).ok());
  }
}

TEST_CASE("maxmin: flows crossing no link, zero capacity, infinite capacity") {
  MaxMinSolver s;
  const auto dead = s.add_link(0.0);
  const auto wide = s.add_link(kUnboundedRate);
  s.add_flow(Path{});                   // no link, no bound: unlimited
  s.add_flow(Path{}, 2.0, 3 * kG);      // no link: its bound
  s.add_flow(Path{dead, wide});         // a link of capacity 0: rate 0
  s.add_flow(Path{wide}, 1.0, 7 * kG);  // infinite link: its bound
  s.solve();
  CHECK(std::isinf(s.rate(0)));
  CHECK(s.rate(1) == 3 * kG);
  CHECK(s.rate(2) == 0.0);
  CHECK(s.rate(3) == 7 * kG);
  CHECK(check_max_min(s, s.rates()).ok());
}

TEST_CASE("maxmin: near-ties saturate in one round") {
  // Links a = 10 GB/s and b = 10 GB/s * (1 + 1e-13); flow 0 crosses both, flow 1 only a, flow 2
  // only b. Levels: a = 1e10/2 = 5e9, b = 5e9 * (1 + 1e-13): within kMaxMinSaturationEpsilon
  // (1e-9) of each other, so both saturate in round 1. Each flow takes its own tightest level:
  // flows 0 and 1 get 5e9, flow 2 gets b's level 5e9 * (1 + 1e-13). An unrelated flow on link c
  // is a second component, filled in one more round.
  MaxMinSolver s;
  const auto a = s.add_link(1e10);
  const auto b = s.add_link(1e10 * (1 + 1e-13));
  const auto c = s.add_link(3e9);
  s.add_flow(Path{a, b});
  s.add_flow(Path{a});
  s.add_flow(Path{b});
  s.add_flow(Path{c});
  s.solve();
  CHECK(s.components() == 2);
  CHECK(s.rounds() == 2);
  CHECK(s.rate(0) == near(5e9));
  CHECK(s.rate(1) == near(5e9));
  CHECK(s.rate(2) == doctest::Approx(5e9 * (1 + 1e-13)).epsilon(1e-15));
  CHECK(s.rate(3) == near(3e9));
  CHECK(check_max_min(s, s.rates()).ok());
}

TEST_CASE("maxmin: the checker rejects allocations that are not max-min") {
  MaxMinSolver s;
  const auto l = s.add_link(10 * kG);
  s.add_flow(Path{l});
  s.add_flow(Path{l});
  s.solve();
  const std::vector<double> over{6 * kG, 5 * kG};    // 11 > 10: infeasible
  const std::vector<double> under{4 * kG, 5 * kG};   // link not saturated: no bottleneck
  const std::vector<double> unfair{3 * kG, 7 * kG};  // saturated, but flow 0 is not maximal on it
  CHECK_FALSE(check_max_min(s, over).feasible);
  const MaxMinCheck u = check_max_min(s, under);
  CHECK(u.feasible);
  CHECK_FALSE(u.bottlenecked);
  CHECK_FALSE(u.violation.empty());
  CHECK_FALSE(check_max_min(s, unfair).bottlenecked);
  CHECK(check_max_min(s, s.rates()).ok());
}

TEST_CASE("maxmin: a flow spread over two links loads each with its share") {
  using Shares = std::vector<double>;
  SUBCASE("the spread flow and a whole flow share a link") {
    // Links 1 and 2 of 10 GB/s. Flow A: half its rate on each (share 0.5); flow B: all of it on link 1.
    // Link 1 is tight at 0.5 a + b <= 10 with a = b = lambda: lambda = 10 / 1.5 = 20/3 GB/s (link 2's level is
    // 10 / 0.5 = 20). Link 1 carries 0.5 x 20/3 + 20/3 = 10; link 2 carries 10/3.
    MaxMinSolver s;
    const auto l1 = s.add_link(10 * kG);
    const auto l2 = s.add_link(10 * kG);
    s.add_flow(Path{l1, l2}, Shares{0.5, 0.5}, 1.0, kUnboundedRate);
    s.add_flow(Path{l1});
    s.solve();
    CHECK(s.rate(0) == near(20.0 / 3 * kG));
    CHECK(s.rate(1) == near(20.0 / 3 * kG));
    CHECK(s.rounds() == 1);
    CHECK(check_max_min(s, s.rates()).ok());
    // The checker counts shares: A at 20 GB/s would put 10 on link 1 alone, 10 + 20/3 with B: infeasible.
    const std::vector<double> over = {20 * kG, 20.0 / 3 * kG};
    CHECK_FALSE(check_max_min(s, over).feasible);
  }
  SUBCASE("a flow sprayed over n links alone runs at n times a link") {
    // Four links of 10 GB/s, shares 1/4 each: lambda = 10 / 0.25 = 40 GB/s.
    MaxMinSolver s;
    Path links;
    for (int i = 0; i < 4; ++i) links.push_back(s.add_link(10 * kG));
    s.add_flow(links, Shares(4, 0.25), 1.0, kUnboundedRate);
    s.solve();
    CHECK(s.rate(0) == near(40 * kG));
    CHECK(check_max_min(s, s.rates()).ok());
  }
  SUBCASE("a fatpipe link bounds a flow at its capacity over the share") {
    // Fatpipe of 10 GB/s crossed at share 0.25: bound 10 / 0.25 = 40 GB/s; the 100 GB/s shared link does not bind.
    MaxMinSolver s;
    const auto fat = s.add_link(10 * kG, LinkSharing::kFatpipe);
    const auto wide = s.add_link(100 * kG);
    s.add_flow(Path{fat, wide}, Shares{0.25, 1.0}, 1.0, kUnboundedRate);
    s.solve();
    CHECK(s.rate(0) == near(40 * kG));
    CHECK(check_max_min(s, s.rates()).ok());
  }
}

// A random system: 1..30 links (about 20% fatpipe; capacities drawn from a small set so that
// ties happen, or log-uniform over 1e8..1e12 B/s), 1..60 flows with weights log-uniform in
// [0.1, 10] (or 1), paths of 0..6 links (a repeated link now and then), and about 25% bounded.
// With `shares`, each incidence takes a share of 1, 1/2, 1/3, 1/8 or log-uniform in [0.01, 1].
void random_system(std::mt19937_64& rng, MaxMinSolver& s, bool shares = false) {
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  s.clear();
  const int n_links = std::uniform_int_distribution<int>(1, 30)(rng);
  const int n_flows = std::uniform_int_distribution<int>(1, 60)(rng);
  const double set[] = {1e9, 2e9, 2.5e9, 1e10, 4e10};
  for (int l = 0; l < n_links; ++l) {
    const double c = u01(rng) < 0.5 ? set[rng() % 5] : std::pow(10.0, 8 + 4 * u01(rng));
    s.add_link(c, u01(rng) < 0.2 ? LinkSharing::kFatpipe : LinkSharing::kShared);
  }
  Path path;
  for (int f = 0; f < n_flows; ++f) {
    path.clear();
    const int len = std::uniform_int_distribution<int>(0, std::min(6, n_links))(rng);
    for (int k = 0; k < len; ++k) path.push_back(static_cast<std::uint32_t>(rng() % n_links));
    const double w = u01(rng) < 0.3 ? 1.0 : std::pow(10.0, -1 + 2 * u01(rng));
    const double b = u01(rng) < 0.25 ? std::pow(10.0, 8 + 3 * u01(rng)) : kUnboundedRate;
    if (!shares) {
      s.add_flow(path, w, b);
      continue;
    }
    std::vector<double> share;
    const double set_a[] = {1.0, 0.5, 1.0 / 3, 0.125};
    for (std::size_t k = 0; k < path.size(); ++k)
      share.push_back(u01(rng) < 0.6 ? set_a[rng() % 4] : std::pow(10.0, -2 * u01(rng)));
    s.add_flow(path, share, w, b);
  }
}

TEST_CASE("maxmin: property test on 1,000 random systems with shares (feasible, every flow bottlenecked)") {
  std::mt19937_64 rng(20261203);
  MaxMinSolver s;
  for (int trial = 0; trial < 1000; ++trial) {
    random_system(rng, s, true);
    s.solve();
    const MaxMinCheck check = check_max_min(s, s.rates());
    INFO("trial ", trial, ": ", check.violation);
    REQUIRE(check.ok());
  }
}

TEST_CASE("maxmin: property test on 1,000 random systems (feasible, every flow bottlenecked)") {
  std::mt19937_64 rng(20240611);
  MaxMinSolver s;  // reused: buffers are kept across problems
  for (int trial = 0; trial < 1000; ++trial) {
    random_system(rng, s);
    s.solve();
    const MaxMinCheck check = check_max_min(s, s.rates());
    INFO("trial ", trial, ": ", check.violation);
    REQUIRE(check.ok());
  }
}

TEST_CASE("maxmin: a component's rates do not depend on other components (bit for bit)") {
  // Solve random system A alone, then A's flows and links interleaved with an unrelated random
  // system B (disjoint links): A's rates must be identical doubles. FlowNetwork's incremental
  // re-solve relies on this to match a full re-solve exactly.
  std::mt19937_64 rng(7);
  MaxMinSolver a, b, both;
  for (int trial = 0; trial < 200; ++trial) {
    random_system(rng, a);
    random_system(rng, b);
    a.solve();
    both.clear();
    // Links: A's then B's (A keeps its relative order). Flows: interleaved, keeping relative order.
    for (std::uint32_t l = 0; l < a.link_count(); ++l) both.add_link(a.capacity(l), a.sharing(l));
    const auto offset = static_cast<std::uint32_t>(a.link_count());
    for (std::uint32_t l = 0; l < b.link_count(); ++l) both.add_link(b.capacity(l), b.sharing(l));
    std::vector<std::uint32_t> a_index;
    std::uint32_t ia = 0, ib = 0;
    Path path;
    while (ia < a.flow_count() || ib < b.flow_count()) {
      const bool take_a = ib >= b.flow_count() || (ia < a.flow_count() && (rng() & 1));
      if (take_a) {
        const auto links = a.links_of(ia);
        a_index.push_back(both.add_flow(links, a.weight(ia), a.bound(ia)));
        ++ia;
      } else {
        path.clear();
        for (std::uint32_t l : b.links_of(ib)) path.push_back(l + offset);
        both.add_flow(path, b.weight(ib), b.bound(ib));
        ++ib;
      }
    }
    both.solve();
    for (std::uint32_t f = 0; f < a.flow_count(); ++f) {
      INFO("trial ", trial, " flow ", f);
      REQUIRE(both.rate(a_index[f]) == a.rate(f));
    }
  }
}

}  // namespace
}  // namespace clustersim::sim
