// Host dispatch (workloads/host_dispatch.h): the framework's CPU thread issues every kernel on a "host" stream,
// the GPU task waits for its dispatch, the host runs ahead and waits only at synchronisation points (a
// pipeline receive). Chains with known answers, the p2p synchronisation, "off changes nothing", and the
// analytical path against the event-driven one on host-bound layouts.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "cli/scenario_loader.h"
#include "tests/test_support.h"
#include "sim/executor.h"
#include "sim/simulation.h"
#include "workloads/analytical_estimate.h"
#include "workloads/host_dispatch.h"
#include "workloads/iteration_result.h"

using namespace clustersim;
using namespace clustersim::workloads;

namespace {

constexpr double kUs = 1e-6;

// Runs the graph to its end and hands the executor to `inspect`.
void run_graph(const sim::TaskGraph& g, const std::function<void(const sim::Executor&)>& inspect) {
  sim::Simulation simulation;
  sim::Executor ex(simulation, g);
  ex.start();
  simulation.run();
  ex.finish();
  inspect(ex);
}

// One GPU: a chain of n kernels on its compute stream, each `gpu_us` long and one dispatch of `host_us`.
// Returns the makespan in seconds.
double chain_time(int n, double gpu_us, double host_us) {
  sim::TaskGraph g;
  const sim::StreamId compute = g.add_stream(0, "compute");
  const sim::LabelId label = g.add_label({"kernel", "compute", {}});
  HostProgram host(microseconds(host_us), 1);
  const sim::StreamId lane[] = {compute};
  for (int i = 0; i < n; ++i) host.issue(0, g.add(label, lane, microseconds(gpu_us)), 1);
  const std::uint32_t gpus[] = {0};
  host.build(g, gpus);
  double makespan = 0;
  run_graph(g, [&](const sim::Executor& ex) { makespan = sim::to_seconds(ex.makespan()).raw(); });
  return makespan;
}

Scenario scenario(std::uint32_t nodes, const std::string& model, const std::string& parallel,
                  const std::string& training) {
  return cli::load_scenario_text(clustersim::testing::a100_scenario_text(nodes, model, parallel, training),
                                 "host.textproto", false, "");
}

}  // namespace

TEST_CASE("host dispatch: a chain of tiny kernels runs at the host's pace") {
  // Kernel i (1-based) is issued at 10·i us and runs [10·i, 10·i + 1]: the last ends at N·10 + 1 us.
  const int n = 100;
  CHECK(chain_time(n, 1, 10) == doctest::Approx((n * 10 + 1) * kUs).epsilon(1e-9));
}

TEST_CASE("host dispatch: a GPU-bound chain pays only the first dispatch") {
  // Kernel 1 is issued at 10 us; the host then stays ahead (10 < 50), so the kernels run back to back:
  // 10 + N·50 us.
  const int n = 100;
  CHECK(chain_time(n, 50, 10) == doctest::Approx((10 + n * 50) * kUs).epsilon(1e-9));
  // Without host cost the chain is N·50 us.
  CHECK(chain_time(n, 50, 0) == doctest::Approx(n * 50 * kUs).epsilon(1e-9));
}

TEST_CASE("host dispatch: the host waits for a pipeline receive before issuing the step (torch.cuda.synchronize)") {
  // GPU 0: kernel A (100 us), then sends to GPU 1 (Send/Recv S, 5 us). GPU 1: receives S, then k = 5 kernels
  // C of 1 us, the first needing S's data. Host: 10 us per dispatch.
  //   host 0 issues A [0, 10], A runs [10, 110]; host 0 issues the send [10, 20]; host 1 posts the receive
  //   [0, 10]; S runs [110, 115].
  //   With the synchronisation host 1 issues C_j only after S: C_j issued at 115 + 10·j, runs to 116 + 10·j:
  //   the last ends at 115 + 50 + 1 = 166 us.
  //   Without it host 1 issued every C by 10 + 50 = 60 us and they run [115, 120]: 120 us.
  for (const bool sync : {true, false}) {
    sim::TaskGraph g;
    const sim::StreamId c0 = g.add_stream(0, "compute"), c1 = g.add_stream(1, "compute");
    const sim::StreamId send0 = g.add_stream(0, "pp-send-fwd"), recv1 = g.add_stream(1, "pp-recv-fwd");
    HostProgram host(microseconds(10), 2);
    const sim::StreamId a_lane[] = {c0};
    const sim::TaskId a = g.add(g.add_label({"A", "compute", {}}), a_lane, microseconds(100));
    host.issue(0, a, 1);
    const sim::StreamId s_lanes[] = {send0, recv1};
    const sim::TaskId deps_s[] = {a};
    const sim::TaskId s = g.add(g.add_label({"S", "pp_comm", {}}), s_lanes, microseconds(5), deps_s);
    host.issue(0, s, 1, false);
    host.issue(1, s, 1, false);
    const sim::StreamId c_lane[] = {c1};
    const sim::LabelId c_label = g.add_label({"C", "compute", {}});
    sim::TaskId first = 0, last = 0;
    for (int j = 0; j < 5; ++j) {
      const sim::TaskId dep[] = {s};
      last = g.add(c_label, c_lane, microseconds(1), j == 0 ? std::span<const sim::TaskId>(dep) : std::span<const sim::TaskId>{});
      if (j == 0) first = last;
      host.issue(1, last, 1);
    }
    if (sync) host.synchronize_before(1, first, s);
    const std::uint32_t gpus[] = {0, 1};
    host.build(g, gpus);
    CAPTURE(sync);
    run_graph(g, [&](const sim::Executor& ex) {
      CHECK(sim::to_seconds(ex.end_time(s)).raw() == doctest::Approx(115 * kUs).epsilon(1e-9));
      CHECK(sim::to_seconds(ex.end_time(last)).raw() == doctest::Approx((sync ? 166 : 120) * kUs).epsilon(1e-9));
    });
  }
}

TEST_CASE("host dispatch: cost 0 adds no tasks and changes no time") {
  for (const char* parallel : {"dp: 2 tp: 2 pp: 2 micro_batch: 1 grad_accum: 4",
                               "dp: 8 micro_batch: 2 grad_accum: 2",
                               "dp: 8 micro_batch: 1 grad_accum: 2 framework: FSDP zero_stage: 3"}) {
    const Scenario off = scenario(1, "gpt-1p7b layers: 4", parallel, "");
    const Scenario zero = scenario(1, "gpt-1p7b layers: 4", parallel, "host_dispatch_us_per_kernel: 0");
    const Scenario on = scenario(1, "gpt-1p7b layers: 4", parallel, "host_dispatch_us_per_kernel: 20");
    const ScenarioResult a = simulate_scenario(off), b = simulate_scenario(zero), c = simulate_scenario(on);
    CAPTURE(parallel);
    CHECK(a.tasks == b.tasks);
    CHECK(a.jobs[0].iteration_time.raw() == b.jobs[0].iteration_time.raw());
    CHECK(a.jobs[0].breakdown.exposed_host.raw() == 0);
    // On: one dispatch per GPU task (more tasks), never faster.
    CHECK(c.tasks > a.tasks);
    CHECK(c.jobs[0].iteration_time.raw() >= a.jobs[0].iteration_time.raw());
  }
}

TEST_CASE("host dispatch: a host-bound run reports the GPU's wait as exposed_host, and symmetry still holds") {
  // GPT 1.7B cut to 2 layers, s = 2048, one sample per micro-batch: a layer's kernels take well under 100 us
  // each on an A100 (the LM head and the fp32 loss over 51,200 logits take longer), so at 200 us per dispatch the
  // host sets the pace and much of the step is host stall.
  const Scenario sc = scenario(1, "gpt-1p7b layers: 2", "dp: 4 tp: 2 micro_batch: 1 grad_accum: 4",
                               "host_dispatch_us_per_kernel: 200");
  const ScenarioResult full = simulate_scenario(sc, {}, nullptr, 0, Symmetry::kOff);
  const ScenarioResult reduced = simulate_scenario(sc);
  const IterationResult& r = full.jobs[0];
  CHECK(r.breakdown.exposed_host.raw() > 0.3 * r.iteration_time.raw());
  const TimeBreakdown& b = r.breakdown;
  CHECK((b.compute + b.exposed_comm + b.exposed_input + b.exposed_host + b.idle).raw() ==
        doctest::Approx(r.iteration_time.raw()).epsilon(1e-9));
  CHECK(reduced.symmetry_reduced);
  CHECK(reduced.jobs[0].iteration_time.raw() == doctest::Approx(r.iteration_time.raw()).epsilon(1e-12));
}

TEST_CASE("host dispatch: analytical estimate agrees with the event-driven simulation within 5% when host-bound") {
  struct Case {
    std::uint32_t nodes;
    const char* model;
    const char* parallel;
    const char* training;
  };
  // Host-bound (100–200 us per kernel on small layers), balanced (20–60 us) and GPU-bound (5 us on big ones),
  // with and without a pipeline (whose receives synchronise the host), interleaved, DDP, FSDP and DeepSpeed,
  // and a vTrain-like GPT (h 1024, 12 layers) at the Megatron-DeepSpeed value.
  const std::vector<Case> cases = {
      {1, "gpt-1p7b layers: 4 seq_len: 1024", "dp: 8 micro_batch: 1 grad_accum: 4", "host_dispatch_us_per_kernel: 100"},
      // DDP on small layers, far host-bound: autocast's weight and gradient casts (and the accumulation from the
      // second micro-batch) are dispatched like every other kernel.
      {1, "gpt-1p7b layers: 8 hidden: 512 heads: 8 ffn_hidden: 2048 seq_len: 128", "dp: 8 micro_batch: 1",
       "host_dispatch_us_per_kernel: 200"},
      {1, "gpt-1p7b layers: 8 hidden: 512 heads: 8 ffn_hidden: 2048 seq_len: 128", "dp: 8 micro_batch: 1 grad_accum: 4",
       "host_dispatch_us_per_kernel: 200"},
      {1, "gpt-1p7b layers: 4 seq_len: 1024", "dp: 4 tp: 2 micro_batch: 1 grad_accum: 4 recompute: FULL",
       "host_dispatch_us_per_kernel: 100"},
      {1, "gpt-1p7b layers: 8 seq_len: 1024", "dp: 2 tp: 2 pp: 2 micro_batch: 1 grad_accum: 8 recompute: FULL",
       "host_dispatch_us_per_kernel: 60"},
      {1, "gpt-1p7b layers: 8 seq_len: 1024", "dp: 2 pp: 4 micro_batch: 1 grad_accum: 8",
       "host_dispatch_us_per_kernel: 60"},
      {1, "gpt-1p7b layers: 8 seq_len: 1024", "dp: 2 pp: 4 micro_batch: 1 grad_accum: 8",
       "host_dispatch_us_per_kernel: 200"},
      {1, "gpt-1p7b layers: 8 seq_len: 1024", "dp: 2 pp: 4 micro_batch: 1 grad_accum: 8",
       "host_dispatch_us_per_kernel: 20"},
      {1, "gpt-1p7b layers: 8 seq_len: 1024", "dp: 2 pp: 4 micro_batch: 1 grad_accum: 8 recompute: FULL",
       "host_dispatch_us_per_kernel: 60"},
      {1, "gpt-1p7b layers: 8 seq_len: 1024", "dp: 2 pp: 4 vp: 2 micro_batch: 1 grad_accum: 8",
       "host_dispatch_us_per_kernel: 60"},
      {1, "gpt-1p7b layers: 12 hidden: 1024 heads: 16 ffn_hidden: 4096 seq_len: 1024",
       "dp: 2 tp: 2 pp: 2 micro_batch: 1 grad_accum: 8 recompute: FULL", "host_dispatch_us_per_kernel: 52"},
      {1, "gpt-3p6b", "dp: 2 tp: 2 pp: 2 micro_batch: 2 grad_accum: 8", "host_dispatch_us_per_kernel: 5"},
      {1, "gpt-1p7b layers: 8 seq_len: 1024", "dp: 8 micro_batch: 1 grad_accum: 2 framework: FSDP zero_stage: 3",
       "host_dispatch_us_per_kernel: 60"},
      {1, "gpt-1p7b layers: 8 seq_len: 1024", "dp: 8 micro_batch: 2 grad_accum: 2 framework: DEEPSPEED zero_stage: 2",
       "host_dispatch_us_per_kernel: 60"},
  };
  std::printf("%-36s %-70s %-34s %12s %12s %12s %8s\n", "model", "layout", "host", "simulated s", "host stall s",
              "analytical s", "error");
  for (const Case& c : cases) {
    const Scenario sc = scenario(c.nodes, c.model, c.parallel, c.training);
    const IterationResult sim = simulate_scenario(sc).jobs[0];
    const double estimated = analytical_estimate(sc, sc.jobs[0]).iteration_time.raw();
    const double error = (estimated - sim.iteration_time.raw()) / sim.iteration_time.raw();
    std::printf("%-36s %-70s %-34s %12.5f %12.5f %12.5f %+7.2f%%\n", c.model, c.parallel, c.training,
                sim.iteration_time.raw(), sim.breakdown.exposed_host.raw(), estimated, 100 * error);
    CAPTURE(c.model);
    CAPTURE(c.parallel);
    CAPTURE(c.training);
    CHECK(std::abs(error) < 0.05);
  }
}

TEST_CASE("host dispatch: kernels per op follow Megatron's GPT layer") {
  // Forward of a GPT layer with biases and explicit attention: 1 + 2 + 1 + 2 + 2 + 1 + 1 + 1 + 1 + 1 + 1 + 1 = 15
  // (transformer_ops.h); backward twice that; a recomputed forward the same as the forward.
  ModelSpec m{"gpt", 1, 1024, 16, 4096, 51200, 1024};
  OpConfig c;
  c.embedding = false;
  c.head = false;
  c.recompute = Recompute::kFull;
  double fwd = 0, bwd = 0, recompute = 0;
  for (const Op& op : forward_ops(m, c)) fwd += op.kernels;
  for (const Op& op : backward_ops(m, c)) (op.recomputed ? recompute : bwd) += op.kernels;
  CHECK(fwd == 15);
  CHECK(recompute == 15);
  CHECK(bwd == 30);
}
