// Pipeline schedules run through the executor with fixed forward/backward times and free sends: the
// bubble must come out as the theory says, and a small 1F1B timeline is checked event by event.
#include <doctest/doctest.h>

#include <map>
#include <stdexcept>
#include <tuple>

#include "sim/executor.h"
#include "workloads/pipeline_schedule.h"

using namespace clustersim;
using namespace clustersim::workloads;

namespace {

struct Timeline {
  sim::SimTime makespan = 0;
  // (stage, kind, micro-batch, chunk) → (start, end) in picoseconds
  std::map<std::tuple<std::uint32_t, int, std::uint32_t, std::uint32_t>, std::pair<sim::SimTime, sim::SimTime>> steps;
};

// Forward of one chunk takes tf/v, backward tb/v (picoseconds). Virtual stage vs = chunk·p + stage; a forward
// waits for the previous virtual stage's forward of the same micro-batch, a backward for the next one's backward
// (the last virtual stage's for its own forward).
Timeline simulate(PipelineSchedule schedule, std::uint32_t p, std::uint32_t m, std::uint32_t v, double tf, double tb) {
  const auto order = pipeline_order(schedule, p, m, v);
  sim::TaskGraph g;
  std::vector<sim::StreamId> streams;
  for (std::uint32_t s = 0; s < p; ++s) streams.push_back(g.add_stream(s, "compute"));
  std::map<std::tuple<int, std::uint32_t, std::uint32_t>, sim::TaskId> task;  // (kind, mb, virtual stage)
  std::map<sim::TaskId, std::tuple<std::uint32_t, int, std::uint32_t, std::uint32_t>> key;
  for (std::uint32_t s = 0; s < p; ++s) {
    for (const PipelineStep& step : order[s]) {
      const bool fwd = step.kind == PipelineStep::Kind::kForward;
      const sim::StreamId lane[] = {streams[s]};
      const sim::LabelId label = g.add_label({fwd ? "F" : "B", "compute", {}});
      const sim::TaskId id = g.add(label, lane, Seconds::from_raw((fwd ? tf : tb) / v * 1e-12));
      task[{fwd ? 0 : 1, step.micro_batch, step.chunk * p + s}] = id;
      key[id] = {s, fwd ? 0 : 1, step.micro_batch, step.chunk};
    }
  }
  const std::uint32_t virtual_stages = p * v;
  for (std::uint32_t mb = 0; mb < m; ++mb)
    for (std::uint32_t vs = 0; vs < virtual_stages; ++vs) {
      if (vs > 0) g.add_dependency(task.at({0, mb, vs}), task.at({0, mb, vs - 1}));
      g.add_dependency(task.at({1, mb, vs}), vs + 1 < virtual_stages ? task.at({1, mb, vs + 1}) : task.at({0, mb, vs}));
    }
  sim::Simulation sim;
  sim::Executor ex(sim, g);
  ex.start();
  sim.run();
  ex.finish();
  Timeline t;
  t.makespan = ex.makespan();
  for (const auto& [id, k] : key) t.steps[k] = {ex.start_time(id), ex.end_time(id)};
  return t;
}

double bubble(const Timeline& t, std::uint32_t m, double tf, double tb) {
  const double ideal = m * (tf + tb);
  return (double(t.makespan) - ideal) / ideal;
}

}  // namespace

TEST_CASE("1F1B with 2 stages and 2 micro-batches, event by event") {
  // t_f = 1 µs, t_b = 2 µs. Stage 0: F0 (warm-up), F1, B0, B1; stage 1: F0, B0, F1, B1.
  //   S0.F0 [0,1); S1.F0 [1,2) after S0.F0; S0.F1 [1,2); S1.B0 [2,4); S0.B0 [4,6) after S1.B0;
  //   S1.F1 [4,5) (stream free at 4); S1.B1 [5,7); S0.B1 [7,9). Makespan 9 = 2·3 + (2−1)·3.
  const double us = 1e6;  // picoseconds
  const Timeline t = simulate(PipelineSchedule::kOneFOneB, 2, 2, 1, 1 * us, 2 * us);
  auto at = [&](std::uint32_t s, int kind, std::uint32_t mb) { return t.steps.at({s, kind, mb, 0}); };
  using P = std::pair<sim::SimTime, sim::SimTime>;
  const sim::SimTime u = 1'000'000;
  CHECK(at(0, 0, 0) == P{0, 1 * u});
  CHECK(at(1, 0, 0) == P{1 * u, 2 * u});
  CHECK(at(0, 0, 1) == P{1 * u, 2 * u});
  CHECK(at(1, 1, 0) == P{2 * u, 4 * u});
  CHECK(at(0, 1, 0) == P{4 * u, 6 * u});
  CHECK(at(1, 0, 1) == P{4 * u, 5 * u});
  CHECK(at(1, 1, 1) == P{5 * u, 7 * u});
  CHECK(at(0, 1, 1) == P{7 * u, 9 * u});
  CHECK(t.makespan == 9 * u);
}

TEST_CASE("simulated bubbles equal (p−1)/m, and (p−1)/(v·m) interleaved, within 1%") {
  const double tf = 1e6, tb = 2e6;
  struct Case {
    PipelineSchedule schedule;
    std::uint32_t p, m, v;
  };
  // Narayanan et al.'s worked numbers: p=8, m=96 → 7.3 %; interleaved v=2 → 3.6 % (formulas.md §2.5).
  for (const Case c :
       {Case{PipelineSchedule::kGPipe, 4, 8, 1}, Case{PipelineSchedule::kOneFOneB, 4, 8, 1},
        Case{PipelineSchedule::kOneFOneB, 8, 96, 1}, Case{PipelineSchedule::kInterleaved, 4, 8, 2},
        Case{PipelineSchedule::kInterleaved, 8, 96, 2}, Case{PipelineSchedule::kInterleaved, 4, 16, 4}}) {
    CAPTURE(to_string(c.schedule));
    CAPTURE(c.p);
    CAPTURE(c.m);
    CAPTURE(c.v);
    const Timeline t = simulate(c.schedule, c.p, c.m, c.v, tf, tb);
    CHECK(bubble(t, c.m, tf, tb) == doctest::Approx(ideal_bubble_fraction(c.schedule, c.p, c.m, c.v)).epsilon(0.01));
  }
  CHECK(ideal_bubble_fraction(PipelineSchedule::kOneFOneB, 8, 96) == doctest::Approx(0.0729).epsilon(0.01));
  CHECK(ideal_bubble_fraction(PipelineSchedule::kInterleaved, 8, 96, 2) == doctest::Approx(0.0365).epsilon(0.01));
}

TEST_CASE("micro-batches in flight: GPipe keeps m, 1F1B keeps p − s on stage s") {
  const auto gpipe = pipeline_order(PipelineSchedule::kGPipe, 4, 8);
  const auto ofob = pipeline_order(PipelineSchedule::kOneFOneB, 4, 8);
  for (std::uint32_t s = 0; s < 4; ++s) {
    CHECK(max_in_flight(gpipe[s]) == 8);
    CHECK(max_in_flight(ofob[s]) == 4 - s);
  }
  // m < p: at most m.
  CHECK(max_in_flight(pipeline_order(PipelineSchedule::kOneFOneB, 8, 3)[0]) == 3);
}

TEST_CASE("schedules that do not exist are refused") {
  CHECK_THROWS_AS(pipeline_order(PipelineSchedule::kInterleaved, 4, 6, 2), std::invalid_argument);  // 6 % 4
  CHECK_THROWS_AS(pipeline_order(PipelineSchedule::kInterleaved, 4, 8, 1), std::invalid_argument);
  CHECK_THROWS_AS(pipeline_order(PipelineSchedule::kOneFOneB, 4, 8, 2), std::invalid_argument);
  CHECK_THROWS_AS(pipeline_order(PipelineSchedule::kGPipe, 0, 8), std::invalid_argument);
}
