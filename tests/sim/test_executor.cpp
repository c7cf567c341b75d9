// Tests of the task-graph executor (sim/executor.h): stream order, concurrency between streams,
// dependencies within and across GPUs, collectives that wait for their slowest member, zero
// durations, and deadlock reports (dependency cycles, collectives reached in incompatible orders).
// A randomized test compares start times against an insertion-order oracle.
//
// Durations are given in microseconds; 1 us = 1'000'000 ps (kUs below), so every expected time
// is an exact integer number of picoseconds.
#include "sim/executor.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "sim/simulation.h"
#include "sim/task_graph.h"
#include "sim/trace.h"

namespace clustersim::sim {
namespace {

constexpr SimTime kUs = 1'000'000;  // picoseconds per microsecond

TaskSpec task(std::string name, std::vector<StreamId> lanes, double duration_us, std::vector<TaskId> deps = {}) {
  TaskSpec spec;
  spec.name = std::move(name);
  spec.category = "compute";
  spec.lanes = std::move(lanes);
  spec.duration = microseconds(duration_us);
  spec.deps = std::move(deps);
  return spec;
}

struct Recorded {
  TaskId task;
  std::string name;
  std::uint32_t gpu;
  std::string stream;
  SimTime start;
  SimTime end;
};

class RecordingSink : public TraceSink {
 public:
  void on_task(const TaskRecord& r) override {
    records.push_back(Recorded{r.task, std::string(r.name), r.gpu, std::string(r.stream), r.start, r.end});
  }
  std::vector<Recorded> records;
};

// Runs the graph from t=0 to the end and checks that it completed.
void run_to_end(Simulation& sim, Executor& ex) {
  ex.start();
  sim.run();
  ex.finish();  // throws DeadlockError if anything is left
}

std::string deadlock_message(const TaskGraph& g) {
  Simulation sim;
  Executor ex(sim, g);
  ex.start();
  sim.run();
  try {
    ex.finish();
  } catch (const DeadlockError& e) {
    return e.what();
  }
  return "";  // no deadlock
}

TEST_CASE("executor: a chain on one stream adds up") {
  TaskGraph g;
  const StreamId s = g.add_stream(0, "compute");
  // Stream order alone serialises a, b, c; c also names b as a dependency (redundant).
  const TaskId a = g.add(task("a", {s}, 1));
  const TaskId b = g.add(task("b", {s}, 2));
  const TaskId c = g.add(task("c", {s}, 3, {b}));
  Simulation sim;
  Executor ex(sim, g);
  run_to_end(sim, ex);
  // a: [0, 1] us; b: [1, 1+2=3] us; c: [3, 3+3=6] us.
  CHECK(ex.start_time(a) == 0);
  CHECK(ex.end_time(a) == 1 * kUs);
  CHECK(ex.start_time(b) == 1 * kUs);
  CHECK(ex.end_time(b) == 3 * kUs);
  CHECK(ex.start_time(c) == 3 * kUs);
  CHECK(ex.end_time(c) == 6 * kUs);
  CHECK(ex.makespan() == 6 * kUs);
  CHECK(ex.completed() == 3);
  CHECK(ex.done(c));
  CHECK(sim.now() == 6 * kUs);
}

TEST_CASE("executor: start() at a later time offsets the whole schedule") {
  TaskGraph g;
  const StreamId s = g.add_stream(0, "compute");
  const TaskId a = g.add(task("a", {s}, 1));
  const TaskId b = g.add(task("b", {s}, 2));
  Simulation sim;
  Executor ex(sim, g);
  sim.schedule_at(5 * kUs, [&] { ex.start(); });
  sim.run();
  ex.finish();
  // a: [5, 6] us; b: [6, 8] us.
  CHECK(ex.start_time(a) == 5 * kUs);
  CHECK(ex.start_time(b) == 6 * kUs);
  CHECK(ex.makespan() == 8 * kUs);
}

TEST_CASE("executor: two streams of one GPU run concurrently") {
  TaskGraph g;
  const StreamId compute = g.add_stream(0, "compute");
  const StreamId comm = g.add_stream(0, "dp-comm");
  const TaskId k = g.add(task("gemm", {compute}, 5));
  const TaskId m = g.add(task("allreduce", {comm}, 3));
  const TaskId k2 = g.add(task("gemm2", {compute}, 1));
  Simulation sim;
  Executor ex(sim, g);
  run_to_end(sim, ex);
  // Both streams start at 0: gemm [0, 5], allreduce [0, 3] (overlapped), gemm2 [5, 6].
  CHECK(ex.start_time(k) == 0);
  CHECK(ex.start_time(m) == 0);
  CHECK(ex.end_time(m) == 3 * kUs);
  CHECK(ex.start_time(k2) == 5 * kUs);
  CHECK(ex.makespan() == 6 * kUs);  // max(5 + 1, 3), not the serial sum 9
}

TEST_CASE("executor: a stream runs its tasks in insertion order even if a later one is ready first") {
  TaskGraph g;
  const StreamId s0 = g.add_stream(0, "compute");
  const StreamId s1 = g.add_stream(0, "comm");
  const TaskId slow = g.add(task("slow", {s1}, 10));
  const TaskId x = g.add(task("x", {s0}, 2, {slow}));  // waits for slow: ready at 10
  const TaskId y = g.add(task("y", {s0}, 1));          // ready at 0, but queued behind x
  Simulation sim;
  Executor ex(sim, g);
  run_to_end(sim, ex);
  // x: [10, 12]; y cannot overtake x on s0: [12, 13].
  CHECK(ex.start_time(x) == 10 * kUs);
  CHECK(ex.end_time(x) == 12 * kUs);
  CHECK(ex.start_time(y) == 12 * kUs);
  CHECK(ex.end_time(y) == 13 * kUs);
}

TEST_CASE("executor: dependencies across GPUs") {
  TaskGraph g;
  const StreamId g0 = g.add_stream(0, "compute");
  const StreamId g1 = g.add_stream(1, "compute");
  const StreamId g2 = g.add_stream(2, "compute");
  const TaskId a = g.add(task("stage0", {g0}, 4));
  const TaskId w = g.add(task("warmup", {g1}, 1));
  const TaskId b = g.add(task("stage1", {g1}, 3, {a}));      // pipeline: after stage0 on GPU 0
  const TaskId c = g.add(task("stage2", {g2}, 2, {a, b}));  // after both
  Simulation sim;
  Executor ex(sim, g);
  run_to_end(sim, ex);
  // warmup [0, 1]; stage0 [0, 4]; stage1 starts at max(end stage0 = 4, end warmup = 1) = 4,
  // ends 4 + 3 = 7; stage2 starts at max(4, 7) = 7, ends 9.
  CHECK(ex.end_time(w) == 1 * kUs);
  CHECK(ex.start_time(b) == 4 * kUs);
  CHECK(ex.end_time(b) == 7 * kUs);
  CHECK(ex.start_time(c) == 7 * kUs);
  CHECK(ex.end_time(c) == 9 * kUs);
  CHECK(ex.makespan() == 9 * kUs);
  (void)a;
}

TEST_CASE("executor: a collective starts when its slowest member arrives") {
  TaskGraph g;
  std::vector<StreamId> compute, comm;
  for (std::uint32_t gpu = 0; gpu < 3; ++gpu) {
    compute.push_back(g.add_stream(gpu, "compute"));
    comm.push_back(g.add_stream(gpu, "comm"));
  }
  // Each GPU's comm stream first runs a send of a different length, so the members reach the
  // all-reduce at 3, 7 and 5 us. The compute streams run in parallel and are not members.
  const TaskId p0 = g.add(task("send0", {comm[0]}, 3));
  const TaskId p1 = g.add(task("send1", {comm[1]}, 7));
  const TaskId p2 = g.add(task("send2", {comm[2]}, 5));
  const TaskId k0 = g.add(task("gemm0", {compute[0]}, 20));
  TaskSpec ar = task("allreduce", {comm[0], comm[1], comm[2]}, 2);
  ar.category = "dp_comm";
  const TaskId r = g.add(ar);
  const TaskId after0 = g.add(task("after0", {comm[0]}, 1));
  const TaskId after2 = g.add(task("after2", {comm[2]}, 4));
  Simulation sim;
  RecordingSink sink;
  sim.add_sink(&sink);
  Executor ex(sim, g);
  run_to_end(sim, ex);
  // The all-reduce starts at max(3, 7, 5) = 7 us (GPU 1 is the slowest) and ends 7 + 2 = 9 us;
  // GPUs 0 and 2 idle on their comm streams from 3 and 5 us until 7 us.
  CHECK(ex.end_time(p0) == 3 * kUs);
  CHECK(ex.end_time(p1) == 7 * kUs);
  CHECK(ex.end_time(p2) == 5 * kUs);
  CHECK(ex.start_time(r) == 7 * kUs);
  CHECK(ex.end_time(r) == 9 * kUs);
  // Every lane is occupied until 9: after0 [9, 10], after2 [9, 13].
  CHECK(ex.start_time(after0) == 9 * kUs);
  CHECK(ex.start_time(after2) == 9 * kUs);
  CHECK(ex.end_time(after2) == 13 * kUs);
  // The compute stream of GPU 0 is not a member: gemm0 [0, 20] runs regardless.
  CHECK(ex.start_time(k0) == 0);
  CHECK(ex.makespan() == 20 * kUs);

  // One trace record per lane, all with the collective's start and end.
  std::vector<Recorded> lanes;
  for (const Recorded& rec : sink.records)
    if (rec.task == r) lanes.push_back(rec);
  REQUIRE(lanes.size() == 3);
  std::sort(lanes.begin(), lanes.end(), [](const Recorded& a, const Recorded& b) { return a.gpu < b.gpu; });
  for (std::uint32_t gpu = 0; gpu < 3; ++gpu) {
    CHECK(lanes[gpu].gpu == gpu);
    CHECK(lanes[gpu].stream == "comm");
    CHECK(lanes[gpu].name == "allreduce");
    CHECK(lanes[gpu].start == 7 * kUs);
    CHECK(lanes[gpu].end == 9 * kUs);
  }
  // 6 single-lane tasks (send0..2, gemm0, after0, after2) + 3 lanes of the all-reduce = 9.
  CHECK(sink.records.size() == 9);
}

TEST_CASE("executor: a collective also waits for its dependencies") {
  TaskGraph g;
  const StreamId c0 = g.add_stream(0, "comm");
  const StreamId c1 = g.add_stream(1, "comm");
  const StreamId k1 = g.add_stream(1, "compute");
  const TaskId grad = g.add(task("backward", {k1}, 8));
  const TaskId pre = g.add(task("pre", {c0}, 2));
  const TaskId ar = g.add(task("allreduce", {c0, c1}, 3, {grad}));
  Simulation sim;
  Executor ex(sim, g);
  run_to_end(sim, ex);
  // Members arrive at 2 (GPU 0, after pre) and 0 (GPU 1); the dependency ends at 8:
  // start = max(2, 0, 8) = 8, end = 11.
  CHECK(ex.end_time(pre) == 2 * kUs);
  CHECK(ex.start_time(ar) == 8 * kUs);
  CHECK(ex.end_time(ar) == 11 * kUs);
  (void)grad;
}

TEST_CASE("executor: zero-duration tasks") {
  TaskGraph g;
  const StreamId s0 = g.add_stream(0, "compute");
  const StreamId s1 = g.add_stream(1, "compute");
  const TaskId a = g.add(task("a", {s0}, 0));
  const TaskId b = g.add(task("b", {s0}, 0, {a}));
  const TaskId c = g.add(task("c", {s0}, 1, {b}));
  const TaskId d = g.add(task("d", {s1}, 0, {c}));
  const TaskId e = g.add(task("barrier", {s0, s1}, 0));
  const TaskId f = g.add(task("f", {s1}, 0, {e}));
  Simulation sim;
  Executor ex(sim, g);
  run_to_end(sim, ex);
  // a, b: [0, 0]; c: [0, 1]; d: [1, 1]; barrier: both lanes free at 1 -> [1, 1]; f: [1, 1].
  CHECK(ex.start_time(a) == 0);
  CHECK(ex.end_time(a) == 0);
  CHECK(ex.start_time(b) == 0);
  CHECK(ex.end_time(b) == 0);
  CHECK(ex.done(b));
  CHECK(ex.start_time(c) == 0);
  CHECK(ex.end_time(c) == 1 * kUs);
  CHECK(ex.start_time(d) == 1 * kUs);
  CHECK(ex.end_time(d) == 1 * kUs);
  CHECK(ex.start_time(e) == 1 * kUs);
  CHECK(ex.end_time(f) == 1 * kUs);
  CHECK(ex.completed() == 6);
  CHECK(ex.makespan() == 1 * kUs);

  SUBCASE("a graph of only zero-duration tasks has makespan 0") {
    TaskGraph z;
    const StreamId s = z.add_stream(0, "compute");
    for (int i = 0; i < 5; ++i) z.add(task("z" + std::to_string(i), {s}, 0));
    Simulation zsim;
    Executor zex(zsim, z);
    run_to_end(zsim, zex);
    CHECK(zex.completed() == 5);
    CHECK(zex.makespan() == 0);
  }
  SUBCASE("an empty graph finishes at once") {
    TaskGraph empty;
    empty.add_stream(0, "compute");  // a stream with no tasks
    Simulation esim;
    Executor eex(esim, empty);
    run_to_end(esim, eex);
    CHECK(eex.completed() == 0);
    CHECK(eex.makespan() == 0);
  }
}

TEST_CASE("executor: sub-picosecond durations are rounded once per task") {
  TaskGraph g;
  const StreamId s = g.add_stream(0, "compute");
  // 2.6 ps rounds to 3 ps; three in a row: 0 -> 3 -> 6 -> 9 ps (not round(7.8) = 8).
  const TaskId a = g.add(task("a", {s}, 2.6e-6));
  g.add(task("b", {s}, 2.6e-6));
  const TaskId c = g.add(task("c", {s}, 2.6e-6));
  Simulation sim;
  Executor ex(sim, g);
  run_to_end(sim, ex);
  CHECK(ex.end_time(a) == 3);
  CHECK(ex.end_time(c) == 9);
}

TEST_CASE("executor: a dependency cycle is a DeadlockError naming the stuck tasks") {
  TaskGraph g;
  const StreamId s0 = g.add_stream(0, "compute");
  const StreamId s1 = g.add_stream(1, "compute");
  const StreamId s2 = g.add_stream(2, "compute");
  const TaskId a = g.add(task("fwd_a", {s0}, 1));
  const TaskId b = g.add(task("fwd_b", {s1}, 1));
  g.add(task("behind_a", {s0}, 1));   // waits behind fwd_a on its stream
  const TaskId free_task = g.add(task("independent", {s2}, 4));
  g.add_dependency(a, b);  // a waits for b ...
  g.add_dependency(b, a);  // ... and b for a: a cycle
  Simulation sim;
  Executor ex(sim, g);
  ex.start();
  sim.run();  // the queue drains: no hang
  CHECK(ex.done(free_task));
  CHECK(ex.completed() == 1);
  CHECK_FALSE(ex.done(a));
  CHECK_THROWS_AS(ex.finish(), DeadlockError);

  const std::string msg = deadlock_message(g);
  INFO(msg);
  CHECK(msg.find("3 unfinished task(s)") != std::string::npos);
  CHECK(msg.find("'fwd_a' (task 0) waits for 'fwd_b'") != std::string::npos);
  CHECK(msg.find("'fwd_b' (task 1) waits for 'fwd_a'") != std::string::npos);
  // behind_a waits only for its stream, not a root cause: it is not listed by name.
  CHECK(msg.find("'behind_a' (task") == std::string::npos);
  CHECK(msg.find("independent") == std::string::npos);
}

TEST_CASE("executor: a self-dependency is a deadlock, not a hang") {
  TaskGraph g;
  const StreamId s = g.add_stream(0, "compute");
  const TaskId a = g.add(task("loop", {s}, 1));
  g.add_dependency(a, a);
  const std::string msg = deadlock_message(g);
  INFO(msg);
  CHECK(msg.find("'loop' (task 0) waits for 'loop'") != std::string::npos);
}

TEST_CASE("executor: a collective reached in incompatible orders is a DeadlockError") {
  // GPU 0 issues all-reduce A, then all-reduce B on one comm stream. GPU 1 issues B first and
  // A after it: A's lane on GPU 1 waits for B (a cross-stream wait, as a CUDA event would).
  // TaskGraph streams are in insertion order, so "B before A" on GPU 1 can only be expressed
  // by such a forward dependency (add_dependency): with backward dependencies only, the oldest
  // unfinished task is always runnable and no deadlock is possible.
  TaskGraph g;
  const StreamId g0 = g.add_stream(0, "comm");
  const StreamId g1a = g.add_stream(1, "comm_a");
  const StreamId g1b = g.add_stream(1, "comm_b");
  const StreamId k0 = g.add_stream(0, "compute");
  const TaskId warm = g.add(task("gemm", {k0}, 2));
  const TaskId a = g.add(task("A", {g0, g1a}, 1));
  const TaskId b = g.add(task("B", {g0, g1b}, 1));
  g.add_dependency(a, b);
  Simulation sim;
  Executor ex(sim, g);
  ex.start();
  sim.run();
  CHECK(ex.done(warm));
  CHECK_FALSE(ex.done(a));
  CHECK_FALSE(ex.done(b));
  CHECK(sim.now() == 2 * kUs);
  CHECK_THROWS_AS(ex.finish(), DeadlockError);

  const std::string msg = deadlock_message(g);
  INFO(msg);
  CHECK(msg.find("2 unfinished task(s)") != std::string::npos);
  CHECK(msg.find("'A' (task 1) waits for 'B'") != std::string::npos);
  // B has reached GPU 1's stream but not GPU 0's, which is busy with A.
  CHECK(msg.find("'B' (task 2) has 1/2 members; missing gpu0/comm (busy with 'A')") != std::string::npos);
}

TEST_CASE("executor: finish() lists at most eight stuck tasks") {
  TaskGraph g;
  std::vector<TaskId> ids;
  for (std::uint32_t i = 0; i < 12; ++i) {
    const StreamId s = g.add_stream(i, "compute");
    ids.push_back(g.add(task("t" + std::to_string(i), {s}, 1)));
  }
  for (std::size_t i = 0; i < ids.size(); ++i) g.add_dependency(ids[i], ids[(i + 1) % ids.size()]);
  const std::string msg = deadlock_message(g);
  INFO(msg);
  CHECK(msg.find("12 unfinished task(s)") != std::string::npos);
  CHECK(msg.find("'t7' (task 7)") != std::string::npos);
  CHECK(msg.find("'t8' (task 8)") == std::string::npos);
  CHECK(msg.find("; ...") != std::string::npos);
}

// Randomized: tasks on random streams with random backward dependencies. Because dependencies
// point to earlier tasks and every stream runs its tasks in insertion order, one pass in
// insertion order computes each task's start as
//   start(t) = max( max_{d in deps(t)} end(d),  max_{s in lanes(t)} end of the previous task on s )
// and end(t) = start(t) + round(duration(t) in ps). (For a collective the max over its lanes is
// its slowest member's arrival.)
void randomized_dag(std::uint64_t seed, bool with_collectives) {
  std::mt19937_64 rng(seed);
  constexpr std::uint32_t kGpus = 4;
  constexpr std::uint32_t kStreamsPerGpu = 3;
  constexpr std::size_t kTasks = 3'000;
  TaskGraph g;
  std::vector<std::vector<StreamId>> streams_of(kGpus);
  for (std::uint32_t gpu = 0; gpu < kGpus; ++gpu)
    for (std::uint32_t k = 0; k < kStreamsPerGpu; ++k)
      streams_of[gpu].push_back(g.add_stream(gpu, "s" + std::to_string(k)));

  std::uniform_int_distribution<std::uint32_t> pick_stream(0, kStreamsPerGpu - 1);
  std::uniform_int_distribution<int> percent(0, 99);
  std::uniform_int_distribution<int> dur_ps(1, 5'000);
  std::size_t lanes_total = 0;
  for (std::size_t i = 0; i < kTasks; ++i) {
    TaskSpec spec;
    spec.name = "t" + std::to_string(i);
    // One lane, or (20%) a collective over 2..4 distinct GPUs, one random stream on each.
    std::uint32_t members = 1;
    if (with_collectives && percent(rng) < 20) members = std::uniform_int_distribution<std::uint32_t>(2, kGpus)(rng);
    std::vector<std::uint32_t> gpus(kGpus);
    for (std::uint32_t k = 0; k < kGpus; ++k) gpus[k] = k;
    std::shuffle(gpus.begin(), gpus.end(), rng);
    for (std::uint32_t m = 0; m < members; ++m) spec.lanes.push_back(streams_of[gpus[m]][pick_stream(rng)]);
    lanes_total += spec.lanes.size();
    // 10% zero durations; the rest 1..5000 ps, as whole picoseconds (exact in to_sim_time).
    spec.duration = percent(rng) < 10 ? seconds(0) : seconds(dur_ps(rng) * 1e-12);
    if (i > 0) {
      const int n_deps = std::uniform_int_distribution<int>(0, 3)(rng);
      // Mostly recent tasks, so dependencies actually bind.
      const std::size_t lo = i > 50 ? i - 50 : 0;
      std::uniform_int_distribution<std::size_t> pick_dep(lo, i - 1);
      for (int k = 0; k < n_deps; ++k) spec.deps.push_back(static_cast<TaskId>(pick_dep(rng)));
    }
    g.add(std::move(spec));
  }

  // Oracle.
  std::vector<SimTime> stream_end(g.stream_count(), 0);
  std::vector<SimTime> want_start(kTasks), want_end(kTasks);
  SimTime want_makespan = 0;
  for (TaskId t = 0; t < kTasks; ++t) {
    SimTime s = 0;
    for (TaskId d : g.deps(t)) s = std::max(s, want_end[d]);
    for (StreamId l : g.lanes(t)) s = std::max(s, stream_end[l]);
    want_start[t] = s;
    want_end[t] = s + to_sim_time(g.duration(t));
    for (StreamId l : g.lanes(t)) stream_end[l] = want_end[t];
    want_makespan = std::max(want_makespan, want_end[t]);
  }

  Simulation sim;
  RecordingSink sink;
  sim.add_sink(&sink);
  Executor ex(sim, g);
  run_to_end(sim, ex);
  int mismatches = 0;
  for (TaskId t = 0; t < kTasks; ++t) {
    if (ex.start_time(t) != want_start[t] || ex.end_time(t) != want_end[t]) {
      if (++mismatches <= 5) {
        INFO("task " << t << ": start " << ex.start_time(t) << " want " << want_start[t] << ", end "
                     << ex.end_time(t) << " want " << want_end[t]);
        CHECK(ex.start_time(t) == want_start[t]);
      }
    }
  }
  CHECK(mismatches == 0);
  CHECK(ex.completed() == kTasks);
  CHECK(ex.makespan() == want_makespan);
  // One record per lane, carrying the task's start and end.
  CHECK(sink.records.size() == lanes_total);
  int record_mismatches = 0;
  for (const Recorded& r : sink.records)
    if (r.start != want_start[r.task] || r.end != want_end[r.task]) ++record_mismatches;
  CHECK(record_mismatches == 0);
}

TEST_CASE("executor: randomized DAG of single-lane tasks matches the insertion-order oracle") {
  for (std::uint64_t seed : {1u, 2u, 3u, 42u, 2024u}) {
    CAPTURE(seed);
    randomized_dag(seed, false);
  }
}

TEST_CASE("executor: randomized DAG with collectives matches the insertion-order oracle") {
  for (std::uint64_t seed : {7u, 8u, 9u, 1234u}) {
    CAPTURE(seed);
    randomized_dag(seed, true);
  }
}

TEST_CASE("executor: a started task that never finishes is named first in the deadlock report") {
  // A dynamic task whose runner drops its `done` (a runner bug): it starts at t = 2 us, after the 2 us task
  // before it on the same stream, and everything behind it waits. The report names it, with its start.
  struct Forgetful : TaskRunner {
    void run(TaskId, std::function<void()>) override {}
  } runner;
  TaskGraph g;
  const StreamId s = g.add_stream(0, "compute");
  g.add(task("before", {s}, 2));
  const StreamId lane[] = {s};
  const TaskId lost = g.add_dynamic(g.add_label({"send.lost", "pp_comm", {}}), lane);
  g.add(task("after", {s}, 1));
  Simulation sim;
  Executor ex(sim, g, &runner);
  ex.start();
  sim.run();
  std::string msg;
  try {
    ex.finish();
  } catch (const DeadlockError& e) {
    msg = e.what();
  }
  INFO(msg);
  CHECK(msg.find("2 unfinished task(s); stuck: 'send.lost' (task " + std::to_string(lost) +
                 ") started at 2.000000 us and never finished") != std::string::npos);
}

}  // namespace
}  // namespace clustersim::sim

TEST_CASE("Executor::start() twice does not count stream arrivals twice") {
  // Stream b runs 'pre' (5 µs), then collective 'ar' over streams a and b: 'ar' starts at 5 µs.
  using namespace clustersim;
  sim::TaskGraph g;
  const sim::StreamId a = g.add_stream(0, "a"), b = g.add_stream(1, "b");
  g.add({"pre", "compute", {b}, microseconds(5), {}, {}});
  const sim::TaskId ar = g.add({"ar", "comm", {a, b}, microseconds(1), {}, {}});
  sim::Simulation s;
  sim::Executor ex(s, g);
  ex.start();
  ex.start();
  s.run();
  ex.finish();
  CHECK(ex.start_time(ar) == 5'000'000);
}

namespace {
// Finishes each dynamic task after a delay chosen per task, as a flow-driven collective would.
class DelayRunner : public clustersim::sim::TaskRunner {
 public:
  DelayRunner(clustersim::sim::Simulation& s, clustersim::sim::SimTime delay) : sim_(s), delay_(delay) {}
  void run(clustersim::sim::TaskId, std::function<void()> done) override {
    ++runs;
    sim_.schedule_after(delay_, std::move(done));
  }
  int runs = 0;

 private:
  clustersim::sim::Simulation& sim_;
  clustersim::sim::SimTime delay_;
};
}  // namespace

TEST_CASE("dynamic tasks end when their runner says so, and occupy their lanes until then") {
  // 'x' (2 µs fixed) on stream a; dynamic 'd' on a and b after it, finishing 3 µs after it starts
  // → d runs [2, 5) µs; 'y' (1 µs) behind d on stream b starts at 5 µs and ends at 6 µs.
  using namespace clustersim;
  sim::TaskGraph g;
  const sim::StreamId a = g.add_stream(0, "a"), b = g.add_stream(1, "b");
  g.add({"x", "compute", {a}, microseconds(2), {}, {}});
  const sim::LabelId dl = g.add_label({"d", "comm", {}});
  const sim::StreamId ab[] = {a, b};
  const sim::TaskId d = g.add_dynamic(dl, ab);
  const sim::TaskId y = g.add({"y", "compute", {b}, microseconds(1), {}, {}});
  sim::Simulation s;
  DelayRunner runner(s, 3'000'000);
  sim::Executor ex(s, g, &runner);
  ex.start();
  s.run();
  ex.finish();
  CHECK(runner.runs == 1);
  CHECK(ex.start_time(d) == 2'000'000);
  CHECK(ex.end_time(d) == 5'000'000);
  CHECK(ex.start_time(y) == 5'000'000);
  CHECK(ex.makespan() == 6'000'000);
}
