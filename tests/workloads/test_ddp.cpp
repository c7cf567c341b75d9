#include <doctest/doctest.h>

#include <map>
#include <string>

#include "tests/test_profiles.h"
#include "workloads/compute_model.h"
#include "workloads/ddp_graph.h"
#include "workloads/input_pipeline.h"
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

// A linear layer's forward GEMM [M x K]·[K x N] as transformer_ops builds it (the weight is K x N).
Op gemm_for_test(const std::string& name, double M, double K, double N) {
  Op op;
  op.name = name;
  op.kind = OpKind::kGemm;
  op.m = M, op.k = K, op.n = N;
  return op;
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
  // Tasks: per GPU 2×(copy + fwd + weight cast + bwd + the gradients' epilogues) + a copy into each of the 2
  // buckets + one copy out + optimizer, plus 2 AllReduce tasks shared by both GPUs. Doubling the one-micro-batch
  // graph counts twice what runs once per step: 2 optimizers, 2 copies out, 2 × 2 copies in and 2 AllReduces.
  // The first micro-batch's epilogues are the weight gradients' casts and the tied embedding's gradient sum; the
  // second's add the accumulation, also of the 5 gradients no cast precedes (2 layers × 2 LayerNorms, the final
  // LayerNorm): 5 more tasks per GPU.
  REQUIRE(one.buckets.size() == 2);
  CHECK(all_two.tasks == 2 * all_one.tasks - 2 - 2 - 2 * 2 - 2 + 2 * 5);
}

TEST_CASE("DDP under autocast: weight casts every forward, gradient casts, accumulation from micro-batch 2") {
  // small_gpt: l = 2, h = 1024, f = 4h, V = 51200, tied embeddings, biases. torch.autocast casts the linear
  // layers' weights (qkv h·3h, proj h·h, fc1 h·4h, fc2 4h·h: 12h² per layer) and the tied LM head's V·h:
  //   W = 2·12·1024² + 51200·1024 = 25,165,824 + 52,428,800 = 77,594,624 elements;
  // forward cast 4 B read + 2 B written = 6·W = 465,567,744 B per micro-batch; the gradients' casts back to
  // fp32 (2 B read + 4 B written) the same 465,567,744 B; the accumulation from the second micro-batch on
  // 12 B per parameter: 12 · 78,671,872 = 944,062,464 B (test "DDP buckets" derives P); and in every
  // micro-batch the sum of the tied word embedding's two gradients (head and lookup), 12 B · V·h =
  // 12 · 52,428,800 = 629,145,600 B.
  struct Tasks : sim::TraceSink {
    std::map<std::string, std::vector<std::pair<double, double>>> bytes_and_seconds;  // GPU 0, by name
    double epilogue_bytes[2] = {0, 0};                                                // GPU 0, per micro-batch
    std::map<std::string, sim::SimTime> end, start;                                   // GPU 0, last micro-batch
    double eager_seconds = 0;                                                         // GPU 0, kCategoryEager
    void on_task(const sim::TaskRecord& r) override {
      if (r.gpu != 0) return;
      double bytes = 0, mb = 0;
      for (const sim::TaskArg& a : *r.args) {
        if (a.key == "bytes") bytes = a.number;
        if (a.key == "micro_batch") mb = a.number;
      }
      const std::string name(r.name);
      bytes_and_seconds[name].push_back({bytes, sim::to_seconds(r.end - r.start).raw()});
      if (r.category == kCategoryEager) eager_seconds += sim::to_seconds(r.end - r.start).raw();
      if (name.find(".grad_") != std::string::npos) epilogue_bytes[mb > 0 ? 1 : 0] += bytes;
      if (mb == 1 || name.starts_with("allreduce")) end[name] = r.end, start[name] = r.start;
    }
  };
  Tasks t;
  const Scenario sc = small_ddp(2, 2, MiB(10000));
  const ScenarioResult result = simulate_scenario(sc, {&t});
  // The breakdown reports them as the eager part of compute: the sum of their tasks' times on the GPU.
  CHECK(t.eager_seconds > 0);
  CHECK(result.jobs[0].per_gpu[0].compute_eager.raw() == doctest::Approx(t.eager_seconds).epsilon(1e-9));
  CHECK(result.jobs[0].per_gpu[0].compute_eager < result.jobs[0].per_gpu[0].compute);
  const double W = 77594624, P = 78671872;
  REQUIRE(t.bytes_and_seconds["amp.weight_cast"].size() == 2);  // one per micro-batch
  CHECK(t.bytes_and_seconds["amp.weight_cast"][0].first == doctest::Approx(6 * W));
  // Timed as an element-wise op of those bytes: a copy of 3·W bytes reads and writes each byte.
  CHECK(t.bytes_and_seconds["amp.weight_cast"][0].second ==
        doctest::Approx(op_time(copy_op("c", bytes(3 * W)), sc.profile.gpu, Precision::kBF16).raw()));
  // Micro-batch 1: the casts and the tied sum. Micro-batch 2: casts, tied sum and accumulation.
  const double tied = 12.0 * 51200 * 1024;
  CHECK(t.epilogue_bytes[0] == doctest::Approx(6 * W + tied));
  CHECK(t.epilogue_bytes[1] == doctest::Approx(6 * W + 12 * P + tied));
  CHECK(t.bytes_and_seconds["L0.qkv.grad_cast"].size() == 1);
  CHECK(t.bytes_and_seconds["L0.qkv.grad_cast_accumulate"].size() == 1);
  // The tied head's gradient is cast after its GEMM in both; after the lookup's backward (fp32 already: the
  // lookup runs outside autocast's list) the two are summed (12 B · V·h), and in the second micro-batch also
  // accumulated with the position embedding into .grad: 12 B × (V + s)·h more.
  CHECK(t.bytes_and_seconds["lm_head.grad_cast"].size() == 2);
  CHECK(t.bytes_and_seconds["lm_head.grad_cast"][1].first == doctest::Approx(6 * 51200.0 * 1024));
  CHECK(t.bytes_and_seconds["embed.grad_accumulate"][0].first == doctest::Approx(tied));
  CHECK(t.bytes_and_seconds["embed.grad_accumulate"][1].first == doctest::Approx(tied + 12 * (51200.0 + 1024) * 1024));
  // DDP's hook sees a gradient after its epilogue: bucket 0 (final LayerNorm … L1.fc2) is copied, then reduced,
  // after L1.fc2's cast and accumulation.
  CHECK(t.end["L1.fc2.grad_cast_accumulate"] <= t.start["ddp.bucket0.copy_in"]);
  CHECK(t.end["ddp.bucket0.copy_in"] <= t.start["allreduce.bucket0"]);

  // FP32 training: nothing to cast; the tied sum in both, and the second micro-batch still accumulates 12 B per
  // parameter.
  Scenario fp32 = sc;
  fp32.jobs[0].training.precision = Precision::kFP32;
  Tasks u;
  simulate_scenario(fp32, {&u});
  std::size_t fp32_casts = 0;
  for (const auto& [name, list] : u.bytes_and_seconds)
    if (name.find("cast") != std::string::npos) fp32_casts += list.size();
  CHECK(fp32_casts == 0);
  CHECK(u.epilogue_bytes[0] == doctest::Approx(tied));
  CHECK(u.epilogue_bytes[1] == doctest::Approx(12 * P + tied));
  CHECK(u.bytes_and_seconds.count("amp.grad_unscale") == 0);  // BF16 and FP32 need no loss scaling

  // FP16: the same casts, and GradScaler's unscale of the fp32 gradients before each step: 8 B per parameter
  // (read and write), once per GPU per step, before the optimizer.
  Scenario fp16 = sc;
  fp16.jobs[0].training.precision = Precision::kFP16;
  Tasks h;
  simulate_scenario(fp16, {&h});
  CHECK(h.epilogue_bytes[0] == doctest::Approx(6 * W + tied));
  REQUIRE(h.bytes_and_seconds["amp.grad_unscale"].size() == 1);
  CHECK(h.bytes_and_seconds["amp.grad_unscale"][0].first == doctest::Approx(8 * P));

  // Transformer Engine's FP8 linear layers cast too: the fp32 weight to FP8 and its transpose each forward
  // (4 + 1 + 1 B), the bf16 weight gradient back to fp32 (2 + 4 B).
  Op fc1 = gemm_for_test("L0.fc1.fwd", 4096, 1024, 4096);
  fc1.fp8 = true;
  CHECK(autocast_weight_elements(fc1, Precision::kFP8) == doctest::Approx(1024.0 * 4096));
  CHECK(autocast_weight_elements(fc1, Precision::kFP32) == 0);
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
  const TrainingTime t = training_time(TrainingJob{1000, 1, 10, Precision::kBF16}, 2, 1, seconds(0.5), true);
  CHECK(t.optimizer_steps == 100);
  CHECK(t.micro_batch_steps == 200);
  CHECK(t.time_to_train.raw() == doctest::Approx(50));
  CHECK(t.gpu_hours == doctest::Approx(50.0 / 3600));
  // Two epochs of 1005 samples in batches of 10. A PyTorch DataLoader (DDP, FSDP, DeepSpeed, Horovod,
  // DataParallel) ends each epoch with its own partial batch of 5: 2 · ⌈100.5⌉ = 202 steps; Megatron-LM's sample
  // stream runs on across the epochs: ⌈2 · 1005 / 10⌉ = 201.
  CHECK(training_time(TrainingJob{1005, 2, 10, Precision::kBF16}, 1, 1, seconds(1), true).optimizer_steps == 202);
  CHECK(training_time(TrainingJob{1005, 2, 10, Precision::kBF16}, 1, 1, seconds(1), false).optimizer_steps == 201);
  // 2.5 epochs per epoch: 2 · 101 + ⌈0.5 · 1005 / 10⌉ = 202 + ⌈50.25⌉ = 253; as one stream ⌈251.25⌉ = 252. Half an
  // epoch is the same either way: ⌈50.25⌉ = 51. Whole batches are the same either way: 2 · 100 = 200.
  CHECK(workloads::run_optimizer_steps(2.5, 1005, 10, true) == 253);
  CHECK(workloads::run_optimizer_steps(2.5, 1005, 10, false) == 252);
  CHECK(workloads::run_optimizer_steps(0.5, 1005, 10, true) == 51);
  CHECK(workloads::run_optimizer_steps(2, 1000, 10, true) == 200);
  // Any data at all costs a step: 1e-300 epochs of 1000 samples is a sliver of one batch, 1 step (the absolute
  // epsilon of ceil(steps − 1e-9) made it 0 and the time to train 0 s).
  CHECK(training_time(TrainingJob{1000, 1e-300, 10, Precision::kBF16}, 1, 1, seconds(1), true).optimizer_steps == 1);
  // The epsilon is relative: 0.1 · 3 · 1e9 steps is 300,000,000.00000006 in doubles, still 300,000,000 steps;
  // 300,000,001 whole batches stay 300,000,001.
  CHECK(workloads::optimizer_steps_for(0.1 * 3 * 1e9) == 300000000);
  CHECK(workloads::optimizer_steps_for(300000001.0) == 300000001);
  CHECK(workloads::optimizer_steps_for(300000000.5) == 300000001);
  CHECK(workloads::optimizer_steps_for(0) == 0);
  // Whole counts stay whole past 1e12: 5e13 samples / global batch 10 = 5,000,000,000,000 steps exactly (the
  // former ceil(steps · (1 − 1e-12)) gave 4,999,999,999,995), and 2^53 − 1 steps stay 2^53 − 1.
  CHECK(training_time(TrainingJob{5e13, 1, 10, Precision::kBF16}, 1, 1, seconds(1), true).optimizer_steps ==
        5000000000000);
  CHECK(workloads::optimizer_steps_for(9007199254740991.0) == 9007199254740991ull);
}
