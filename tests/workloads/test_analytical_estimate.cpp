// The analytical fast path (workloads/analytical_estimate.h) against the event-driven simulation on
// contention-free runs (ANALYTICAL fidelity: every collective takes its closed-form time, as the fast path
// assumes). A sample of layouts of small models — DDP, TP with and without SP, 1F1B, interleaved, recompute,
// FlashAttention, distributed optimizer — must agree within 5 %; the table is printed for the record.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/scenario_loader.h"
#include "workloads/analytical_estimate.h"
#include "workloads/iteration_result.h"

using namespace clustersim;
using namespace clustersim::workloads;

namespace {

Scenario scenario(std::uint32_t nodes, const std::string& model, const std::string& parallel) {
  return cli::load_scenario_text(
      "cluster { nodes: " + std::to_string(nodes) +
          " gpus_per_node: 8 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300"
          " nic_gbits_per_s_per_direction: 200 }\n"
          "profile: \"a100-sxm4-80gb\"\nfidelity: ANALYTICAL\nmodel { preset: \"" +
          model + "\" }\nparallel { " + parallel + " }\ntraining { samples: 1000 }\n",
      "analytical.textproto", false, "");
}

struct Case {
  std::uint32_t nodes;
  const char* model;
  const char* parallel;
};

}  // namespace

TEST_CASE("analytical estimate agrees with the event-driven simulation within 5% on contention-free layouts") {
  const std::vector<Case> cases = {
      {1, "gpt-1p7b", "dp: 8 micro_batch: 2 grad_accum: 4"},                                      // DDP
      {1, "gpt-1p7b", "dp: 4 tp: 2 micro_batch: 2 grad_accum: 4"},                                // TP
      {2, "gpt-1p7b", "dp: 2 tp: 4 pp: 2 micro_batch: 1 grad_accum: 8 sequence_parallel: true"},  // TP+SP, 1F1B
      {2, "gpt-1p7b", "dp: 4 pp: 4 micro_batch: 4 grad_accum: 4"},                                // PP only
      {1, "gpt-3p6b", "dp: 2 tp: 2 pp: 2 micro_batch: 1 grad_accum: 8 recompute: SELECTIVE"},
      {4, "gpt-3p6b", "dp: 2 tp: 8 pp: 2 micro_batch: 1 grad_accum: 16 sequence_parallel: true recompute: FULL"},
      {4, "gpt-7p5b", "dp: 2 tp: 4 pp: 4 vp: 3 micro_batch: 1 grad_accum: 8"},                    // interleaved
      {8, "gpt-7p5b", "dp: 2 tp: 8 pp: 4 micro_batch: 2 grad_accum: 8 distributed_optimizer: true"},
      {2, "llama2-7b", "dp: 4 tp: 2 pp: 2 micro_batch: 1 grad_accum: 4 flash_attention: true"},
      {8, "gpt-7p5b", "dp: 2 tp: 8 pp: 4 micro_batch: 1 grad_accum: 16 schedule: GPIPE recompute: FULL"},
      {6, "gpt-7p5b", "dp: 1 tp: 4 pp: 12 micro_batch: 2 grad_accum: 8"},  // deep pipeline, m < p
  };
  std::printf("%-10s %-82s %12s %12s %8s\n", "model", "layout", "simulated s", "analytical s", "error");
  for (const Case& c : cases) {
    const Scenario sc = scenario(c.nodes, c.model, c.parallel);
    const double simulated = simulate_scenario(sc).jobs[0].iteration_time.raw();
    const double estimated = analytical_estimate(sc, sc.jobs[0]).iteration_time.raw();
    const double error = (estimated - simulated) / simulated;
    std::printf("%-10s %-82s %12.4f %12.4f %+7.2f%%\n", c.model, c.parallel, simulated, estimated, 100 * error);
    CAPTURE(c.model);
    CAPTURE(c.parallel);
    CHECK(std::abs(error) < 0.05);
  }
}

TEST_CASE("analytical estimate: memory is the simulation's report, throughput follows from the time") {
  // The same memory model and stage selection as simulate_scenario (dense model: stage 0 or the last);
  // tokens/s = global batch · s / T = (1 · 8 · 2) · 2048 / T.
  const Scenario sc = scenario(2, "gpt-1p7b", "dp: 2 tp: 4 pp: 2 micro_batch: 1 grad_accum: 8 sequence_parallel: true");
  const IterationResult sim = simulate_scenario(sc).jobs[0];
  const AnalyticalEstimate est = analytical_estimate(sc, sc.jobs[0]);
  CHECK(est.peak_memory.raw() == doctest::Approx(sim.memory.peak.raw()).epsilon(1e-12));
  CHECK(est.oom == sim.memory.oom);
  CHECK(est.tokens_per_s == doctest::Approx(16.0 * 2048 / est.iteration_time.raw()).epsilon(1e-12));
  // The parts add up to the iteration time (bubble is the remainder, never negative).
  CHECK(est.bubble.raw() >= 0);
  CHECK((est.compute + est.tp_comm + est.pp_comm + est.dp_comm + est.bubble).raw() ==
        doctest::Approx(est.iteration_time.raw()).epsilon(1e-9));
}
