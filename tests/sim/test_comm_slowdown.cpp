// Tests of compute slowed by concurrent communication (sim/executor.h, Executor::set_comm_slowdown; the
// profile's gpu.compute_slowdown_during_comm): while a communication task has a lane on GPU g, compute tasks
// on g progress at 1/s of their speed, work-conserving. A compute task of duration d overlapped for a time o
// (ending before it does) ends at start + d + o·(1 − 1/s).
//
// Durations in microseconds; 1 us = 1'000'000 ps (kUs). Times that are not whole picoseconds are rounded to
// the nearest one when an end event is (re)scheduled; the expected values below say where.
#include "sim/executor.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "sim/simulation.h"
#include "sim/task_graph.h"
#include "tests/test_profiles.h"
#include "workloads/collective_engine.h"
#include "workloads/ddp_graph.h"

namespace clustersim::sim {
namespace {

constexpr SimTime kUs = 1'000'000;  // picoseconds per microsecond

TaskSpec task(std::string name, std::string category, std::vector<StreamId> lanes, double duration_us,
              std::vector<TaskId> deps = {}) {
  TaskSpec spec;
  spec.name = std::move(name);
  spec.category = std::move(category);
  spec.lanes = std::move(lanes);
  spec.duration = microseconds(duration_us);
  spec.deps = std::move(deps);
  return spec;
}

CommSlowdown slowdown(double factor) { return CommSlowdown{factor, {"compute"}, {"dp_comm", "tp_comm"}}; }

struct Run {
  std::vector<SimTime> start, end;
  std::uint64_t events = 0;
};

// Runs g from t = 0; `factor` 0 means set_comm_slowdown is not called at all.
Run run(const TaskGraph& g, double factor) {
  Simulation sim;
  Executor ex(sim, g);
  if (factor > 0) ex.set_comm_slowdown(slowdown(factor));
  ex.start();
  Run r;
  r.events = sim.run();
  ex.finish();
  for (TaskId t = 0; t < g.size(); ++t) r.start.push_back(ex.start_time(t)), r.end.push_back(ex.end_time(t));
  return r;
}

TEST_CASE("comm slowdown: a kernel overlapped for part of its run is stretched only for that part") {
  // compute 10 us from t=0 on GPU 0; on GPU 0's comm stream a 2 us non-communication task (the delay), then a
  // 4 us dp_comm task from t=2 to t=6. s = 1.5.
  // Work done: 2 us in [0, 2], 4/1.5 = 2.667 us in [2, 6], the rest 10 − 2 − 4/1.5 = 5.333 us at full speed:
  //   end = 2 + 4 + (10 − 2 − 4/1.5) = 11.333... us = 10 + 4·(1 − 1/1.5);
  //   in ps: work left at t=6 us is 8e6 − 4e6/1.5 = 5,333,333.33 → end 6e6 + 5,333,333 = 11,333,333 ps.
  TaskGraph g;
  const StreamId compute = g.add_stream(0, "compute");
  const StreamId comm = g.add_stream(0, "dp-comm");
  const TaskId k = g.add(task("gemm", "compute", {compute}, 10));
  const TaskId delay = g.add(task("wait", "input", {comm}, 2));
  const TaskId ar = g.add(task("allreduce", "dp_comm", {comm}, 4, {delay}));
  const Run r = run(g, 1.5);
  CHECK(r.start[k] == 0);
  CHECK(r.end[k] == 11'333'333);
  CHECK(r.end[k] == doctest::Approx((10.0 + 4.0 * (1 - 1 / 1.5)) * kUs).epsilon(1e-7));  // 11.333 us, within 1 ps
  // The communication itself is not slowed.
  CHECK(r.start[ar] == 2 * kUs);
  CHECK(r.end[ar] == 6 * kUs);
}

TEST_CASE("comm slowdown: no overlap on the kernel's GPU leaves it unchanged") {
  // The same graph with the comm task on GPU 1: GPU 0's kernel ends at 10 us. And a comm task on GPU 0 that
  // starts after the kernel ended (t = 12) changes nothing either.
  TaskGraph g;
  const StreamId c0 = g.add_stream(0, "compute");
  const StreamId comm1 = g.add_stream(1, "dp-comm");
  const StreamId comm0 = g.add_stream(0, "dp-comm");
  const TaskId k = g.add(task("gemm", "compute", {c0}, 10));
  const TaskId delay = g.add(task("wait", "input", {comm1}, 2));
  g.add(task("allreduce", "dp_comm", {comm1}, 4, {delay}));
  const TaskId late_delay = g.add(task("wait", "input", {comm0}, 12));
  g.add(task("allreduce.late", "dp_comm", {comm0}, 4, {late_delay}));
  const Run r = run(g, 1.5);
  CHECK(r.end[k] == 10 * kUs);
  CHECK(r.end == run(g, 0).end);
}

TEST_CASE("comm slowdown: kernels that start during communication, and overlapping collectives count once") {
  // (a) comm 0..4 us on GPU 0; a 10 us kernel starts at 1 us (after a 1 us kernel, itself slowed: it does
  //     1/1.5 us of work per us, so it ends at 1.5 us, not 1): 10 us kernel from 1.5 us, slowed until 4 us:
  //     work 2.5/1.5 = 1.667 us, remaining 8.333 us at full speed → end 4 + 8.333 = 12.333 us.
  //     ps: first kernel ends at llround(1e6·1.5) = 1,500,000; second: work left at 4e6 is
  //     1e7 − 2.5e6/1.5 = 8,333,333.33 → 4e6 + 8,333,333 = 12,333,333 ps.
  {
    TaskGraph g;
    const StreamId c = g.add_stream(0, "compute");
    const StreamId comm = g.add_stream(0, "dp-comm");
    g.add(task("allreduce", "dp_comm", {comm}, 4));
    const TaskId a = g.add(task("small", "compute", {c}, 1));
    const TaskId b = g.add(task("gemm", "compute", {c}, 10));
    const Run r = run(g, 1.5);
    CHECK(r.end[a] == 1'500'000);
    CHECK(r.start[b] == 1'500'000);
    CHECK(r.end[b] == 12'333'333);
  }
  // (b) two collectives on two streams of GPU 0, 2..6 and 4..8 us: compute is slowed from 2 to 8 us (6 us,
  //     4 us of work at s = 1.5) — not doubly slowed in 4..6 — so a 10 us kernel from 0 ends at
  //     2 + 6 + (10 − 2 − 4) = 12 us = 10 + 6·(1 − 1/1.5).
  {
    TaskGraph g;
    const StreamId c = g.add_stream(0, "compute");
    const StreamId dp = g.add_stream(0, "dp-comm");
    const StreamId tp = g.add_stream(0, "pp-comm");
    const TaskId k = g.add(task("gemm", "compute", {c}, 10));
    const TaskId d1 = g.add(task("wait", "input", {dp}, 2));
    g.add(task("allreduce", "dp_comm", {dp}, 4, {d1}));
    const TaskId d2 = g.add(task("wait", "input", {tp}, 4));
    g.add(task("allreduce.tp", "tp_comm", {tp}, 4, {d2}));
    CHECK(run(g, 1.5).end[k] == 12 * kUs);
  }
}

TEST_CASE("comm slowdown: a collective slows the compute of its member GPUs only") {
  // A 4 us collective on GPUs 0 and 1 from t=0; 10 us kernels on GPUs 1 and 2 from t=0. s = 2:
  // GPU 1's kernel does 2 us of work in the first 4 us, ends at 4 + 8 = 12 us = 10 + 4·(1 − 1/2); GPU 2's at 10.
  TaskGraph g;
  const StreamId comm0 = g.add_stream(0, "dp-comm");
  const StreamId comm1 = g.add_stream(1, "dp-comm");
  const StreamId c1 = g.add_stream(1, "compute");
  const StreamId c2 = g.add_stream(2, "compute");
  g.add(task("allreduce", "dp_comm", {comm0, comm1}, 4));
  const TaskId k1 = g.add(task("gemm", "compute", {c1}, 10));
  const TaskId k2 = g.add(task("gemm", "compute", {c2}, 10));
  const Run r = run(g, 2);
  CHECK(r.end[k1] == 12 * kUs);
  CHECK(r.end[k2] == 10 * kUs);
}

TEST_CASE("comm slowdown: factor 1 is the executor without it (random graphs, every task and the event count)") {
  std::mt19937 rng(20260511);
  for (int trial = 0; trial < 20; ++trial) {
    TaskGraph g;
    std::vector<StreamId> streams;
    for (std::uint32_t gpu = 0; gpu < 3; ++gpu)
      for (const char* name : {"compute", "dp-comm", "tp-comm"}) streams.push_back(g.add_stream(gpu, name));
    std::uniform_int_distribution<std::size_t> pick(0, streams.size() - 1);
    std::uniform_int_distribution<int> dur(0, 20);
    const char* categories[] = {"compute", "dp_comm", "tp_comm", "input"};
    for (int i = 0; i < 40; ++i) {
      std::vector<StreamId> lanes = {streams[pick(rng)]};
      if (i % 7 == 0) {  // a collective over two GPUs' same-named streams
        const StreamId other = static_cast<StreamId>((lanes[0] + 3) % streams.size());
        lanes.push_back(other);
      }
      std::vector<TaskId> deps;
      if (i > 0 && rng() % 2) deps.push_back(static_cast<TaskId>(rng() % static_cast<unsigned>(i)));
      g.add(task("t" + std::to_string(i), categories[rng() % 4], lanes, dur(rng) * 0.5, deps));
    }
    const Run without = run(g, 0), one = run(g, 1.0), slowed = run(g, 1.25);
    CHECK(one.start == without.start);
    CHECK(one.end == without.end);
    CHECK(one.events == without.events);
    // Slowing compute never makes anything earlier (every start and end is monotone in task durations).
    for (TaskId t = 0; t < g.size(); ++t) CHECK(slowed.end[t] >= without.end[t]);
  }
}

}  // namespace
}  // namespace clustersim::sim

namespace clustersim::workloads {
namespace {

// l=2, h=1024, a=16, f=4h, V=51200, s=1024, micro-batch 4, DDP on 2 nodes × 1 GPU, 10,000 MiB bucket cap:
// two buckets (test_ddp.cpp): bucket 0 (16.8 MB, closed after L1.fc2.wgrad) whose AllReduce overlaps the rest
// of backward, and bucket 1 (the rest) whose AllReduce runs after backward, before the optimizer step.
Scenario small_ddp() {
  Scenario sc = clustersim::testing::a100_like_cluster("ddp-slowdown", 2, 1);
  Job job;
  job.name = "ddp";
  job.gpus = {0, 1};
  job.model = clustersim::testing::small_gpt();
  job.parallel = ParallelPlan{2, 4, 1, MiB(10000)};
  job.training = TrainingJob{1000, 1, 8, Precision::kBF16};
  sc.jobs.push_back(job);
  return sc;
}

struct DdpRun {
  sim::SimTime step_end = 0;                       // last optimizer task's end
  sim::SimTime ar0_start = 0, ar0_end = 0;         // bucket 0's AllReduce
  sim::SimTime ar1_start = 0, backward_end = 0;    // bucket 1's AllReduce start; last compute before it
};

DdpRun run_ddp(double factor) {
  const Scenario sc = small_ddp();
  sim::Simulation simulation;
  CollectiveEngine collectives(simulation, sc, nullptr);
  sim::TaskGraph graph;
  const JobGraph it = build_ddp_job(sc, sc.jobs[0], graph, collectives);
  sim::Executor ex(simulation, graph, &collectives);
  if (factor > 0)
    ex.set_comm_slowdown({factor, {kCategoryCompute, kCategoryEager}, {kCategoryDpComm}});  // as simulate_scenario
  ex.start();
  simulation.run();
  ex.finish();
  DdpRun r;
  for (sim::TaskId t : it.optimizer_task) r.step_end = std::max(r.step_end, ex.end_time(t));
  REQUIRE(it.bucket_allreduce.size() == 2);
  r.ar0_start = ex.start_time(it.bucket_allreduce[0]);
  r.ar0_end = ex.end_time(it.bucket_allreduce[0]);
  r.ar1_start = ex.start_time(it.bucket_allreduce[1]);
  for (sim::TaskId t : graph.stream_tasks(it.compute_stream[0]))
    if (ex.end_time(t) <= r.ar1_start) r.backward_end = std::max(r.backward_end, ex.end_time(t));
  return r;
}

TEST_CASE("comm slowdown in DDP: bucket AllReduces overlapping backward lengthen the step by A0·(1 − 1/s)") {
  // At ANALYTICAL fidelity a collective's time does not depend on compute, so bucket 0's AllReduce lasts A0 in
  // both runs. It overlaps backward entirely (it ends while backward still runs: checked below), so backward
  // does A0/s instead of A0 of work during it and ends A0·(1 − 1/s) later; bucket 1's AllReduce (after the
  // last backward op, the embedding's) and the optimizer after it shift by the same amount. Nothing else
  // overlaps compute: forward has no communication, bucket 1 runs on an idle compute stream. So
  //   step(s) = step(1) + A0·(1 − 1/s),   s = 1.5: + A0/3   (± 1 ps: two end events rounded to the ps).
  const DdpRun base = run_ddp(0), same = run_ddp(1.0), slow = run_ddp(1.5);
  CHECK(same.step_end == base.step_end);
  const sim::SimTime a0 = base.ar0_end - base.ar0_start;
  REQUIRE(a0 > 0);
  CHECK(slow.ar0_end - slow.ar0_start == a0);
  CHECK(slow.ar0_start == base.ar0_start);  // bucket 0 closes before any communication ran
  CHECK(slow.ar0_end < slow.backward_end);  // fully overlapped by backward
  const double expected = static_cast<double>(base.step_end) + static_cast<double>(a0) * (1 - 1 / 1.5);
  CHECK(std::abs(static_cast<double>(slow.step_end) - expected) <= 1.0);
  CHECK(std::abs(static_cast<double>(slow.backward_end - base.backward_end) - static_cast<double>(a0) / 3) <= 1.0);
  MESSAGE("DDP step " << static_cast<double>(base.step_end) / 1e6 << " us -> " << static_cast<double>(slow.step_end) / 1e6
                      << " us at s = 1.5; bucket 0 AllReduce A0 = " << static_cast<double>(a0) / 1e6 << " us");
}

}  // namespace
}  // namespace clustersim::workloads
