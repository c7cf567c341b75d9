#include <doctest/doctest.h>

#include "workloads/input_pipeline.h"
#include "tests/test_profiles.h"
#include "workloads/iteration_result.h"

using namespace clustersim;
using namespace clustersim::workloads;

namespace {

// l=2, h=1024, a=16, f=4h, V=51200, s=1024, micro-batch 4, on `nodes` nodes × 1 GPU (200 Gbit/s NIC).
Scenario small_ddp(std::uint32_t nodes, std::uint32_t grad_accum, Bytes bucket_cap) {
  Scenario sc = clustersim::testing::a100_like_cluster("ddp-test", nodes, 1);
  Job job;
  job.name = "ddp-test";
  for (std::uint32_t g = 0; g < nodes; ++g) job.gpus.push_back(g);
  job.model = clustersim::testing::small_gpt();
  job.parallel = ParallelPlan{nodes, 4, grad_accum, bucket_cap};
  job.training = TrainingJob{1000, 1, std::uint64_t(4) * grad_accum * nodes, Precision::kBF16};
  sc.jobs.push_back(job);
  return sc;
}

}  // namespace

TEST_CASE("DDP buckets: first bucket capped at 1 MiB, then the configured cap, in backward order") {
  // Backward produces, in order: final_ln (2h = 2,048 params), L1.fc2 (f·h + h = 4,195,328), ...
  // First bucket closes once it holds >= 1 MiB: 8,192 B after final_ln, then 16,789,504 B → closed
  // with 4,197,376 params. With a 10,000 MiB cap everything else forms bucket 1:
  // P = 2·(12h² + 13h) + (V + s)·h + 2h = 25,192,448 + 53,477,376 + 2,048 = 78,671,872;
  // bucket 1 = 78,671,872 − 4,197,376 = 74,474,496 params = 297,897,984 B (fp32 gradients).
  const Scenario sc = small_ddp(2, 1, MiB(10000));
  const auto buckets = ddp_buckets(backward_ops(sc.jobs[0].model, 4, Precision::kBF16), bytes(4), MiB(1), MiB(10000));
  REQUIRE(buckets.size() == 2);
  CHECK(sc.jobs[0].model.parameter_count() == doctest::Approx(78671872));
  CHECK(buckets[0].parameters == doctest::Approx(4197376));
  CHECK(buckets[0].first_op == "final_ln.bwd");
  CHECK(buckets[0].last_op == "L1.fc2.wgrad");
  CHECK(buckets[1].size.raw() == doctest::Approx(297897984));
  CHECK(buckets[1].last_op == "embed.bwd");
}

TEST_CASE("DDP: exposed communication equals the last bucket's AllReduce") {
  // 2 nodes × 1 GPU: ring of 2 ranks, 2 steps, both across nodes: α = 8.4 + 2·14 = 36.4 µs;
  // B = 25 GB/s · 0.8 = 20 GB/s; last bucket 297,897,984 B: 2·1/2 · 297,897,984 / 20e9 = 14.8948992 ms
  // → 14.9312992 ms. Bucket 0 (16.8 MB, 0.88 ms) finishes while backward still runs (≈2 ms of layers
  // left), so only the last bucket — released by the embedding backward, the last op — is exposed:
  // the optimizer step waits for it on an otherwise idle GPU.
  const ScenarioResult all = simulate_scenario(small_ddp(2, 1, MiB(10000)));
  const IterationResult& r = all.jobs[0];
  REQUIRE(r.buckets.size() == 2);
  CHECK(r.breakdown.exposed_comm.raw() == doctest::Approx(14.9312992e-3).epsilon(1e-9));
  CHECK(r.breakdown.idle.raw() == doctest::Approx(0).epsilon(1e-12));
  // The first micro-batch's tokens reach the GPU before its first kernel: b·(s + 1)·8 B over the default
  // 24 GB/s host link is an input stall; the later copy is hidden behind compute.
  const Scenario sc = small_ddp(2, 1, MiB(10000));
  const Job& job = sc.jobs[0];
  const double h2d_s = micro_batch_input_bytes(job.model, job.parallel.micro_batch).raw() / 24e9;
  CHECK(r.breakdown.exposed_input.raw() == doctest::Approx(h2d_s).epsilon(1e-6));
  CHECK((r.breakdown.compute + r.breakdown.exposed_comm + r.breakdown.exposed_input).raw() ==
        doctest::Approx(r.iteration_time.raw()).epsilon(1e-12));
  // Both GPUs are identical replicas.
  CHECK(r.per_gpu[0].compute == r.per_gpu[1].compute);
}

TEST_CASE("DDP with gradient accumulation communicates only after the last micro-batch") {
  // Two micro-batches: compute doubles (except the optimizer step), the AllReduces do not.
  const ScenarioResult all_one = simulate_scenario(small_ddp(2, 1, MiB(10000)));
  const ScenarioResult all_two = simulate_scenario(small_ddp(2, 2, MiB(10000)));
  const IterationResult& one = all_one.jobs[0];
  const IterationResult& two = all_two.jobs[0];
  CHECK(two.breakdown.exposed_comm.raw() == doctest::Approx(one.breakdown.exposed_comm.raw()).epsilon(1e-9));
  // compute(two) = 2·compute(one) − optimizer step; the optimizer is < 1% of compute here.
  CHECK(two.breakdown.compute.raw() == doctest::Approx(2 * one.breakdown.compute.raw()).epsilon(0.01));
  CHECK(two.breakdown.compute.raw() < 2 * one.breakdown.compute.raw());
  // Tasks: per GPU 2×(copy + fwd + bwd) + a copy into each of the 2 buckets + one copy out + optimizer, plus 2
  // AllReduce tasks shared by both GPUs. Doubling the one-micro-batch graph counts twice what runs once per
  // step: 2 optimizers, 2 copies out, 2 × 2 copies in and 2 AllReduces.
  REQUIRE(one.buckets.size() == 2);
  CHECK(all_two.tasks == 2 * all_one.tasks - 2 - 2 - 2 * 2 - 2);
}

TEST_CASE("a single GPU has no gradient communication") {
  const ScenarioResult all = simulate_scenario(small_ddp(1, 1, MiB(25)));
  const IterationResult& r = all.jobs[0];
  CHECK(r.breakdown.exposed_comm.raw() == 0);
  CHECK((r.breakdown.compute + r.breakdown.exposed_input).raw() ==
        doctest::Approx(r.iteration_time.raw()).epsilon(1e-12));
}

TEST_CASE("exposed_time: communication hidden behind compute is not exposed") {
  using I = std::vector<std::pair<sim::SimTime, sim::SimTime>>;
  // busy [0,10) [20,30); compute covers [2,5) [8,25) → exposed [0,2) [5,8) [25,30) = 2 + 3 + 5 = 10 ps.
  CHECK(sim::to_sim_time(exposed_time(I{{0, 10}, {20, 30}}, I{{2, 5}, {8, 25}})) == 10);
  CHECK(sim::to_sim_time(exposed_time(I{{0, 10}}, I{})) == 10);
  CHECK(sim::to_sim_time(exposed_time(I{{3, 4}}, I{{0, 10}})) == 0);
}

TEST_CASE("training-time identity: 1000 samples, global batch 10, accumulation 2") {
  // optimizer steps = 1 · 1000 / 10 = 100; micro-batch steps = 100 · 2 = 200;
  // time to train = 100 · 0.5 s = 50 s; GPU-hours = 50 s · 1 GPU / 3600 = 0.013889.
  const TrainingTime t = training_time(TrainingJob{1000, 1, 10, Precision::kBF16}, 2, 1, seconds(0.5));
  CHECK(t.optimizer_steps == 100);
  CHECK(t.micro_batch_steps == 200);
  CHECK(t.time_to_train.raw() == doctest::Approx(50));
  CHECK(t.gpu_hours == doctest::Approx(50.0 / 3600));
  // Two epochs of a partial last batch: 2 · 1005 / 10 = 201 steps.
  CHECK(training_time(TrainingJob{1005, 2, 10, Precision::kBF16}, 1, 1, seconds(1)).optimizer_steps == 201);
  // Any data at all costs a step: 1e-300 epochs of 1000 samples is a sliver of one batch, 1 step (the absolute
  // epsilon of ceil(steps − 1e-9) made it 0 and the time to train 0 s).
  CHECK(training_time(TrainingJob{1000, 1e-300, 10, Precision::kBF16}, 1, 1, seconds(1)).optimizer_steps == 1);
  // The epsilon is relative: 0.1 · 3 · 1e9 steps is 300,000,000.00000006 in doubles, still 300,000,000 steps;
  // 300,000,001 whole batches stay 300,000,001.
  CHECK(workloads::optimizer_steps_for(0.1 * 3 * 1e9) == 300000000);
  CHECK(workloads::optimizer_steps_for(300000001.0) == 300000001);
  CHECK(workloads::optimizer_steps_for(300000000.5) == 300000001);
  CHECK(workloads::optimizer_steps_for(0) == 0);
}
