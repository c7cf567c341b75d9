// Tests of FlowNetwork (sim/flow_network.h): completion times derived by hand (one flow; two
// flows where the survivor speeds up; a flow joining midway; a capacity change midway; zero-byte
// flows; weights and bounds; a link of capacity 0 that comes back), observability (link stats,
// the rate observer, counters: one engine event per completion, incremental solves), and
// cross-checks on 1,000 random flow sets: the incremental re-solve gives exactly the completion
// times of the full re-solve, the rates seen at random instants are max-min fair for the flows
// sharing at that instant (check_max_min), and identical runs give identical sequences.
//
// Units: capacities in bytes/s (kG = 1 GB/s = 1e9 B/s), sizes in bytes, times in integer
// picoseconds (kS = 1 s = 1e12 ps). Every hand-derived time below is an exact integer number of
// picoseconds, and the network must hit it exactly (see the rounding rule in flow_network.h).
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "sim/flow_network.h"
#include "sim/maxmin.h"
#include "sim/simulation.h"

namespace clustersim::sim {
namespace {

constexpr double kG = 1e9;                 // bytes/s in 1 GB/s
constexpr SimTime kS = 1'000'000'000'000;  // picoseconds in 1 s
constexpr SimTime kUs = 1'000'000;         // picoseconds in 1 us

struct Done {
  int label;
  SimTime time;
  friend bool operator==(const Done&, const Done&) = default;
};

struct Fixture {
  Simulation sim;
  FlowNetwork net;
  std::vector<Done> done;
  explicit Fixture(FlowNetwork::Mode mode = FlowNetwork::Mode::kIncremental) : net(sim, mode) {}
  std::function<void()> record(int label) {
    return [this, label] { done.push_back(Done{label, sim.now()}); };
  }
  FlowId start(std::vector<LinkId> path, double size, Seconds latency, int label, double weight = 1.0,
               BytesPerSecond bound = FlowNetwork::kUnbounded) {
    return net.start(path, bytes(size), latency, record(label), weight, bound);
  }
};

TEST_CASE("flow network: a flow that would end beyond the engine's range names when it would end") {
  // After a latency of 4.32e6 s (50 days), 1e15 B at 1 GB/s take 1e6 s more: it would end at 5.32e6 s
  // (61.6 days), beyond the 2^62 ps = 4.61e6 s (53 days) the engine counts. The error says 5.32e+06 s, not
  // the 1e6 s the flow had left.
  Fixture fx;
  const LinkId l = fx.net.add_link(GBps(1));
  fx.start({l}, 1e15, seconds(4.32e6), 0);
  std::string what;
  try {
    fx.sim.run();
  } catch (const TimeRangeError& e) {
    what = e.what();
  }
  // It also says what would take that long: the transfer's size and rate (1e15 B at 1e9 B/s).
  CHECK(
      what.starts_with("simulated time out of range: 5.32e+06 s (61.6 days) for a network transfer of 1e+15 B "
                       "moving at 1e+09 B/s is beyond the 53 days"));
}

TEST_CASE("flow network: a flow spread over two links carries its share on each") {
  // Links a, b of 10 GB/s. Flow 0 (2e10 B) is sprayed half on each (shares 0.5): alone it would run at 20 GB/s.
  // Flow 1 (5e9 B) crosses a only. Link a: 0.5 r0 + r1 <= 10 with r0 = r1 = 20/3 GB/s. Flow 1 ends at
  // 5e9 / (20/3 GB/s) = 0.75 s, when flow 0 has 2e10 - 5e9 = 1.5e10 B left and runs alone at 20 GB/s:
  // 0.75 s more, so it ends at 1.5 s. Link a carried 0.5 x 2e10 + 5e9 = 1.5e10 B, link b 1e10 B.
  for (auto mode : {FlowNetwork::Mode::kIncremental, FlowNetwork::Mode::kFullResolve}) {
    Fixture fx(mode);
    const LinkId a = fx.net.add_link(GBps(10));
    const LinkId b = fx.net.add_link(GBps(10));
    const std::vector<LinkId> both = {a, b};
    const std::vector<double> halves = {0.5, 0.5};
    fx.net.start(both, halves, bytes(2e10), seconds(0), fx.record(0));
    fx.start({a}, 5e9, seconds(0), 1);
    fx.sim.run();
    REQUIRE(fx.done.size() == 2);
    CHECK(fx.done[0] == Done{1, kS * 3 / 4});
    CHECK(fx.done[1] == Done{0, kS * 3 / 2});
    CHECK(fx.net.link_stats(a).bytes_carried.raw() == doctest::Approx(1.5e10).epsilon(1e-12));
    CHECK(fx.net.link_stats(b).bytes_carried.raw() == doctest::Approx(1e10).epsilon(1e-12));
  }
}

TEST_CASE("flow network: one flow takes latency + size / capacity") {
  // 1e9 B over a 10 GB/s link after 5 us: 5 us + 1e9 / 1e10 s = 5e6 ps + 1e11 ps = 100'005'000'000 ps.
  for (auto mode : {FlowNetwork::Mode::kIncremental, FlowNetwork::Mode::kFullResolve}) {
    Fixture fx(mode);
    const LinkId l = fx.net.add_link(GBps(10));
    const FlowId id = fx.start({l}, 1e9, microseconds(5), 0);
    CHECK(fx.net.active(id));
    CHECK(fx.net.rate(id) == bytes_per_second(0));  // still in its latency phase
    fx.sim.run();
    REQUIRE(fx.done.size() == 1);
    CHECK(fx.done[0].time == 5 * kUs + kS / 10);
    CHECK_FALSE(fx.net.active(id));
    const LinkStats st = fx.net.link_stats(l);
    CHECK(st.bytes_carried.raw() == doctest::Approx(1e9).epsilon(1e-12));
    CHECK(st.busy_time == kS / 10);  // busy only while sharing, not during the latency
    CHECK(st.peak_flows == 1);
    CHECK(st.active_flows == 0);
    CHECK(st.rate.raw() == 0.0);
  }
}

TEST_CASE("flow network: two flows start together, the survivor speeds up") {
  // 10 GB/s link, flows of 1e9 B and 3e9 B, no latency. Both run at 5 GB/s; the first ends at
  // 1e9 / 5e9 = 0.2 s. The second then has 3e9 - 0.2 * 5e9 = 2e9 B left at 10 GB/s: 0.2 s more,
  // ending at 0.4 s (= total bytes 4e9 / 1e10, as the link never idles).
  Fixture fx;
  const LinkId l = fx.net.add_link(GBps(10));
  std::vector<std::pair<SimTime, double>> trace;
  fx.net.set_rate_observer([&](LinkId link, SimTime t, BytesPerSecond r) {
    CHECK(link == l);
    trace.emplace_back(t, r.raw());
  });
  const FlowId a = fx.start({l}, 1e9, seconds(0), 0);
  const FlowId b = fx.start({l}, 3e9, seconds(0), 1);
  CHECK(fx.net.active_flows() == 2);
  fx.sim.schedule_at(kS / 10, [&] {
    CHECK(fx.net.rate(a).raw() == doctest::Approx(5e9).epsilon(1e-12));
    CHECK(fx.net.rate(b).raw() == doctest::Approx(5e9).epsilon(1e-12));
    // 0.1 s at 5 GB/s: 5e8 of 1e9 B delivered.
    CHECK(fx.net.remaining(a).raw() == doctest::Approx(5e8).epsilon(1e-12));
  });
  fx.sim.run();
  CHECK(fx.done == std::vector<Done>{{0, 2 * kS / 10}, {1, 4 * kS / 10}});
  // The aggregate is 10 GB/s from 0 to 0.4 s (it stays 10 GB/s when a leaves): two reports.
  REQUIRE(trace.size() == 2);
  CHECK(trace[0] == std::pair<SimTime, double>{0, 1e10});
  CHECK(trace[1] == std::pair<SimTime, double>{4 * kS / 10, 0.0});
  const LinkStats st = fx.net.link_stats(l);
  CHECK(st.bytes_carried.raw() == doctest::Approx(4e9).epsilon(1e-12));
  CHECK(st.busy_time == 4 * kS / 10);
  CHECK(st.peak_flows == 2);
  // One event at t=0 (both flows joined in one batch: one solve), one per completion; the
  // completion of a re-solves b (second solve); the last completion leaves nothing to solve.
  CHECK(fx.net.counters().events == 3);
  CHECK(fx.net.counters().solves == 2);
  CHECK(fx.net.counters().flows_completed == 2);
}

TEST_CASE("flow network: a flow joining midway slows the first one down") {
  // A: 2.5e9 B from t=0 alone at 10 GB/s. B: 1e9 B starts at 0.1 s, when A has 2.5e9 - 1e9 =
  // 1.5e9 B left. Both at 5 GB/s: B ends at 0.1 + 1e9/5e9 = 0.3 s; A then has 1.5e9 - 1e9 = 5e8 B
  // left at 10 GB/s: ends at 0.3 + 0.05 = 0.35 s.
  for (auto mode : {FlowNetwork::Mode::kIncremental, FlowNetwork::Mode::kFullResolve}) {
    Fixture fx(mode);
    const LinkId l = fx.net.add_link(GBps(10));
    fx.start({l}, 2.5e9, seconds(0), 0);
    fx.sim.schedule_at(kS / 10, [&] { fx.start({l}, 1e9, seconds(0), 1); });
    fx.sim.run();
    CHECK(fx.done == std::vector<Done>{{1, 3 * kS / 10}, {0, 35 * kS / 100}});
  }
}

TEST_CASE("flow network: flows finishing at the same picosecond complete in start order") {
  // A: 2e9 B from t=0; B: 1e9 B from 0.1 s (A has 1e9 B left). Both at 5 GB/s: both end at
  // 0.1 + 1e9/5e9 = 0.3 s, in the same event; A started first, so A's on_done runs first.
  Fixture fx;
  const LinkId l = fx.net.add_link(GBps(10));
  fx.start({l}, 2e9, seconds(0), 0);
  fx.sim.schedule_at(kS / 10, [&] { fx.start({l}, 1e9, seconds(0), 1); });
  fx.sim.run();
  CHECK(fx.done == std::vector<Done>{{0, 3 * kS / 10}, {1, 3 * kS / 10}});
}

TEST_CASE("flow network: set_capacity midway keeps the progress so far") {
  // 1e9 B on 10 GB/s from t=0. At 0.05 s (5e8 B delivered) the link degrades to 2.5 GB/s: the
  // other 5e8 B take 5e8 / 2.5e9 = 0.2 s, so the flow ends at 0.25 s.
  Fixture fx;
  const LinkId l = fx.net.add_link(GBps(10));
  fx.start({l}, 1e9, seconds(0), 0);
  fx.sim.schedule_at(5 * kS / 100, [&] { fx.net.set_capacity(l, GBps(2.5)); });
  fx.sim.run();
  CHECK(fx.done == std::vector<Done>{{0, 25 * kS / 100}});
  CHECK(fx.net.capacity(l) == GBps(2.5));
  CHECK(fx.net.link_stats(l).bytes_carried.raw() == doctest::Approx(1e9).epsilon(1e-12));
}

TEST_CASE("flow network: a link of capacity 0 stalls its flows until it comes back") {
  // 4e9 B on a 0 B/s link (a failed link): rate 0, no completion predicted. At 1 s the link is
  // repaired at 8 GB/s: 4e9 / 8e9 = 0.5 s more, so the flow ends at 1.5 s.
  Fixture fx;
  const LinkId l = fx.net.add_link(bytes_per_second(0));
  const FlowId id = fx.start({l}, 4e9, seconds(0), 0);
  fx.sim.schedule_at(kS / 2, [&] {
    CHECK(fx.net.rate(id).raw() == 0.0);
    CHECK(fx.net.remaining(id).raw() == 4e9);
  });
  fx.sim.schedule_at(kS, [&] { fx.net.set_capacity(l, GBps(8)); });
  fx.sim.run();
  CHECK(fx.done == std::vector<Done>{{0, 15 * kS / 10}});
}

TEST_CASE("flow network: zero-byte flows complete after their latency, from an event") {
  Fixture fx;
  const LinkId l = fx.net.add_link(GBps(10));
  fx.start({l}, 0, microseconds(3), 0);  // 3 us = 3e6 ps
  fx.start({l}, 0, seconds(0), 1);       // at t = 0, but not inside start()
  CHECK(fx.done.empty());
  fx.start({}, 1e6, seconds(0), 2);  // no link, no bound: delivered instantly at t = 0
  fx.sim.run();
  CHECK(fx.done == std::vector<Done>{{1, 0}, {2, 0}, {0, 3 * kUs}});
  CHECK(fx.net.link_stats(l).peak_flows == 0);  // zero-byte flows never share a link
}

TEST_CASE("flow network: weights, bounds and fatpipe links") {
  // Link 8 GB/s: A (weight 3, 6e9 B) and B (weight 1, 2e9 B): A = 3/4 * 8 = 6 GB/s, B = 2 GB/s;
  // both end at 1 s. C: 1e9 B alone on a 10 GB/s link, bounded at 1 GB/s: 1 s. D and E: 2e9 B
  // each on one 4 GB/s fatpipe link: each at 4 GB/s, 0.5 s.
  Fixture fx;
  const LinkId shared = fx.net.add_link(GBps(8));
  const LinkId wide = fx.net.add_link(GBps(10));
  const LinkId fat = fx.net.add_link(GBps(4), LinkSharing::kFatpipe);
  fx.start({shared}, 6e9, seconds(0), 0, 3.0);
  fx.start({shared}, 2e9, seconds(0), 1, 1.0);
  fx.start({wide}, 1e9, seconds(0), 2, 1.0, GBps(1));
  fx.start({fat}, 2e9, seconds(0), 3);
  fx.start({fat}, 2e9, seconds(0), 4);
  fx.sim.run();
  CHECK(fx.done == std::vector<Done>{{3, kS / 2}, {4, kS / 2}, {0, kS}, {1, kS}, {2, kS}});
  CHECK(fx.net.link_stats(fat).bytes_carried.raw() == doctest::Approx(4e9).epsilon(1e-12));
  CHECK(fx.net.link_stats(fat).peak_flows == 2);
}

TEST_CASE("flow network: one pending network event, solves only what a change touches") {
  // 100 flows on 100 separate links, sizes 1e6 * (i + 1) B at 1 GB/s: flow i ends at
  // (i + 1) * 1 ms. Events: one at t = 0 (the joins, one solve of 100 one-flow components), then
  // one per completion = 101 in all; a completion empties its own link and touches nobody else,
  // so there is no further solve. More than one pending network event would show as extra events.
  Fixture fx;
  for (int i = 0; i < 100; ++i) {
    const LinkId l = fx.net.add_link(GBps(1));
    fx.start({l}, 1e6 * (i + 1), seconds(0), i);
  }
  fx.sim.run();
  REQUIRE(fx.done.size() == 100);
  for (int i = 0; i < 100; ++i) CHECK(fx.done[i] == Done{i, (i + 1) * kS / 1000});
  CHECK(fx.net.counters().events == 101);
  CHECK(fx.net.counters().solves == 1);
  CHECK(fx.net.counters().solved_flows == 100);
  CHECK(fx.sim.events_executed() == 101);
}

TEST_CASE("flow network: on_done may start flows, they join the same picosecond's solve") {
  // A chain: each completion starts the next 1e9 B flow on the same 10 GB/s link, 5 times:
  // completions at 0.1, 0.2, ..., 0.5 s.
  Fixture fx;
  const LinkId l = fx.net.add_link(GBps(10));
  std::function<void()> next;
  int started = 0;
  next = [&] {
    fx.done.push_back(Done{started, fx.sim.now()});
    if (++started < 5) fx.net.start(std::vector<LinkId>{l}, bytes(1e9), seconds(0), next);
  };
  const FlowId first = fx.net.start(std::vector<LinkId>{l}, bytes(1e9), seconds(0), next);
  fx.sim.schedule_at(kS / 10 + 1, [&] {
    // The second flow reuses the first one's slot; the first id is stale, not the second flow.
    CHECK_FALSE(fx.net.active(first));
    CHECK(fx.net.rate(first).raw() == 0.0);
    CHECK(fx.net.remaining(first).raw() == 0.0);
    CHECK(fx.net.active_flows() == 1);
  });
  fx.sim.run();
  REQUIRE(fx.done.size() == 5);
  for (int i = 0; i < 5; ++i) CHECK(fx.done[i].time == (i + 1) * kS / 10);
  CHECK(fx.net.counters().solves == 5);
}

// ---- randomized cross-checks ----

struct RandomFlow {
  SimTime arrival;
  std::vector<LinkId> path;
  double size;
  Seconds latency;
  double weight;
  BytesPerSecond bound;
  int follow_up;  // index of a flow started by this one's on_done, or -1
};

struct RandomRun {
  std::vector<Done> done;
  FlowNetwork::Counters counters;
  int probes_checked = 0;
};

// A random flow set: 1..12 links (15% fatpipe; capacities from a small set, so that ties occur,
// or log-uniform 1e8..1e11 B/s), 1..25 flows arriving in [0, 1 ms] (30% at one of three shared
// instants), sizes 0 (10%) or log-uniform 1e3..1e7 B, latency 0 or up to 5 us, paths of 0..4
// links, weights 1 or log-uniform [0.25, 4], 20% bounded, 20% with a follow-up flow started from
// on_done, and 0..3 capacity changes (a link failing to 0 is always repaired later).
// `scale` multiplies the maximum numbers of links and flows.
RandomRun run_random(std::uint64_t seed, FlowNetwork::Mode mode, bool probe, int scale = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  auto log_uniform = [&](double lo, double hi) { return lo * std::pow(hi / lo, u01(rng)); };
  const int n_links = std::uniform_int_distribution<int>(1, 12 * scale)(rng);
  const int n_primary = std::uniform_int_distribution<int>(1, 25 * scale)(rng);
  const double caps[] = {1e9, 2.5e9, 1e10, 4e10};
  std::vector<double> capacity;
  std::vector<LinkSharing> sharing;
  for (int l = 0; l < n_links; ++l) {
    capacity.push_back(u01(rng) < 0.5 ? caps[rng() % 4] : log_uniform(1e8, 1e11));
    sharing.push_back(u01(rng) < 0.15 ? LinkSharing::kFatpipe : LinkSharing::kShared);
  }
  auto random_flow = [&](SimTime arrival) {
    RandomFlow f;
    f.arrival = arrival;
    const int len = std::uniform_int_distribution<int>(0, 4)(rng);
    for (int k = 0; k < len; ++k) f.path.push_back(LinkId{static_cast<std::uint32_t>(rng() % n_links)});
    f.size = u01(rng) < 0.1 ? 0.0 : log_uniform(1e3, 1e7);
    f.latency = u01(rng) < 0.5 ? seconds(0) : microseconds(5 * u01(rng));
    f.weight = u01(rng) < 0.5 ? 1.0 : log_uniform(0.25, 4);
    f.bound = u01(rng) < 0.2 ? bytes_per_second(log_uniform(1e8, 1e10)) : FlowNetwork::kUnbounded;
    f.follow_up = -1;
    return f;
  };
  std::vector<RandomFlow> flows;
  const SimTime shared_instants[] = {0, 1'000'000, 500'000'000};
  for (int i = 0; i < n_primary; ++i) {
    const SimTime t =
        u01(rng) < 0.3 ? shared_instants[rng() % 3] : std::uniform_int_distribution<SimTime>(0, 1'000'000'000)(rng);
    flows.push_back(random_flow(t));
  }
  for (int i = 0; i < n_primary; ++i) {
    if (u01(rng) < 0.2) {
      flows[i].follow_up = static_cast<int>(flows.size());
      flows.push_back(random_flow(-1));  // starts when flow i completes
    }
  }
  struct CapacityChange {
    SimTime time;
    std::uint32_t link;
    double capacity;
  };
  std::vector<CapacityChange> changes;
  const int n_changes = std::uniform_int_distribution<int>(0, 3)(rng);
  for (int i = 0; i < n_changes; ++i) {
    const SimTime t = std::uniform_int_distribution<SimTime>(0, 1'000'000'000)(rng);
    const auto l = static_cast<std::uint32_t>(rng() % n_links);
    if (u01(rng) < 0.3) {  // failure, then repair
      changes.push_back({t, l, 0.0});
      changes.push_back({t + std::uniform_int_distribution<SimTime>(1, 1'000'000'000)(rng), l, caps[rng() % 4]});
    } else {
      changes.push_back({t, l, log_uniform(1e8, 1e11)});
    }
  }
  std::vector<SimTime> probes;
  for (int i = 0; i < 5; ++i) probes.push_back(std::uniform_int_distribution<SimTime>(1, 2'000'000'000)(rng) * 2 + 1);

  Simulation sim;
  FlowNetwork net(sim, mode);
  RandomRun out;
  for (int l = 0; l < n_links; ++l) net.add_link(bytes_per_second(capacity[l]), sharing[l]);
  std::vector<FlowId> ids(flows.size());
  std::vector<SimTime> join_time(flows.size(), -1);
  std::function<void(int)> launch = [&](int i) {
    const RandomFlow& f = flows[i];
    join_time[i] = sim.now() + to_sim_time(f.latency);
    ids[i] = net.start(
        f.path, bytes(f.size), f.latency,
        [&, i] {
          out.done.push_back(Done{i, sim.now()});
          if (flows[i].follow_up >= 0) launch(flows[i].follow_up);
        },
        f.weight, f.bound);
  };
  for (int i = 0; i < n_primary; ++i) sim.schedule_at(flows[i].arrival, [&launch, i] { launch(i); });
  for (const CapacityChange& c : changes) {
    sim.schedule_at(c.time, [&net, c] { net.set_capacity(LinkId{c.link}, bytes_per_second(c.capacity)); });
  }
  if (probe) {
    // At an odd picosecond (no flow starts or capacity changes there), the rates of the flows that
    // are sharing must be the max-min fair allocation of the whole network at that instant.
    for (SimTime t : probes) {
      sim.schedule_at(t, [&] {
        MaxMinSolver problem;
        for (int l = 0; l < n_links; ++l) {
          problem.add_link(net.capacity(LinkId{static_cast<std::uint32_t>(l)}).raw(), sharing[l]);
        }
        std::vector<double> rates;
        std::vector<std::uint32_t> path;
        for (std::size_t i = 0; i < flows.size(); ++i) {
          if (join_time[i] < 0 || join_time[i] >= sim.now() || !net.active(ids[i]) || flows[i].size == 0) continue;
          path.clear();
          for (LinkId l : flows[i].path) path.push_back(l.index);
          problem.add_flow(path, flows[i].weight, flows[i].bound.raw());
          rates.push_back(net.rate(ids[i]).raw());
        }
        const MaxMinCheck check = check_max_min(problem, rates);
        INFO("probe at ", sim.now(), ": ", check.violation);
        CHECK(check.ok());
        ++out.probes_checked;
      });
    }
  }
  sim.run();
  CHECK(out.done.size() == flows.size());  // every flow completed (failed links were repaired)
  CHECK(net.active_flows() == 0);
  out.counters = net.counters();
  return out;
}

TEST_CASE("flow network: incremental and full re-solve give identical completions on 1,000 random sets") {
  // Exact equality (same picosecond, same order): the incremental mode re-solves only touched
  // components, whose rates are bit-for-bit those of the full solve (MaxMinSolver is
  // component-wise), and progress is re-anchored only when a rate changes, in both modes.
  std::uint64_t incremental_flows = 0, full_flows = 0;
  std::size_t completions = 0;
  int probes = 0;
  for (std::uint64_t seed = 1; seed <= 1000; ++seed) {
    const RandomRun inc = run_random(seed, FlowNetwork::Mode::kIncremental, true);
    const RandomRun full = run_random(seed, FlowNetwork::Mode::kFullResolve, false);
    INFO("seed ", seed);
    REQUIRE(inc.done == full.done);
    CHECK(inc.counters.flows_completed == full.counters.flows_completed);
    CHECK(inc.counters.events == full.counters.events);
    incremental_flows += inc.counters.solved_flows;
    full_flows += full.counters.solved_flows;
    completions += inc.done.size();
    probes += inc.probes_checked;
  }
  MESSAGE("completions ", completions, ", probes ", probes, ", flows solved: incremental ", incremental_flows,
          " vs full ", full_flows);
  CHECK(incremental_flows < full_flows);  // the point of the incremental mode
  CHECK(probes > 1000);
}

TEST_CASE("flow network: incremental and full re-solve agree on 20 larger random sets") {
  // As above with up to 120 links and 250 flows (plus follow-ups) per set.
  for (std::uint64_t seed = 5001; seed <= 5020; ++seed) {
    const RandomRun inc = run_random(seed, FlowNetwork::Mode::kIncremental, true, 10);
    const RandomRun full = run_random(seed, FlowNetwork::Mode::kFullResolve, false, 10);
    INFO("seed ", seed);
    REQUIRE(inc.done == full.done);
  }
}

TEST_CASE("flow network: identical runs give identical completion sequences") {
  for (std::uint64_t seed : {11u, 12u, 13u, 14u, 15u}) {
    const RandomRun a = run_random(seed, FlowNetwork::Mode::kIncremental, false);
    const RandomRun b = run_random(seed, FlowNetwork::Mode::kIncremental, false);
    CHECK(a.done == b.done);
    CHECK(a.counters.solves == b.counters.solves);
    CHECK(a.counters.events == b.counters.events);
  }
}

}  // namespace
}  // namespace clustersim::sim
