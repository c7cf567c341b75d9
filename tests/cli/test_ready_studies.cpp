// The ready studies of scenarios/gpt3-175b-1024-a100/ and scenarios/llama3-h100/: every file loads, its layout
// is the one its README states (GPU count, degrees, the batch identity), and the GPT-3 175B study predicts a
// throughput near the published one.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cli/scenario_loader.h"
#include "workloads/iteration_result.h"

namespace {

using clustersim::cli::load_scenario_file;
using clustersim::workloads::Fidelity;
using clustersim::workloads::Scenario;

std::string source_path(const std::string& relative) { return std::string(CLUSTERSIM_SOURCE_DIR) + "/" + relative; }

struct Expected {
  const char* file;
  std::uint32_t gpus, tp, pp, vp, cp, dp;
  std::uint64_t global_batch;       // sequences
  std::uint32_t micro_batch, grad_accum;
  std::uint32_t seq_len, layers;
};

// Each row's derived columns:
//   dp = GPUs / (tp x pp x cp);  grad_accum (micro-batches per step) = global batch / (micro-batch x dp).
const std::vector<Expected> kStudies = {
    // 1024 / (8 x 16 x 1) = 8;  1536 / (1 x 8) = 192.  96 layers = 16 stages x 2 chunks x 3 layers.
    {"scenarios/gpt3-175b-1024-a100/gpt3-175b-1024-a100.textproto", 1024, 8, 16, 2, 1, 8, 1536, 1, 192, 2048, 96},
    // Llama 3 70B, tp 8 pp 4 vp 5: 1024 / 32 = 32, 2048 / 32 = 64;  8192 / 32 = 256, 2048 / 256 = 8;
    // 16384 / 32 = 512, 2048 / 512 = 4.  80 layers = 4 stages x 5 chunks x 4 layers.
    {"scenarios/llama3-h100/70b-1k.textproto", 1024, 8, 4, 5, 1, 32, 2048, 1, 64, 8192, 80},
    {"scenarios/llama3-h100/70b-8k.textproto", 8192, 8, 4, 5, 1, 256, 2048, 1, 8, 8192, 80},
    {"scenarios/llama3-h100/70b-16k.textproto", 16384, 8, 4, 5, 1, 512, 2048, 1, 4, 8192, 80},
    // Llama 3 405B (given 128 layers), tp 8 pp 16 vp 4: 1024 / 128 = 8, 2048 / 8 = 256;
    // 8192 / 128 = 64, 2048 / 64 = 32;  16384 / 128 = 128, 2048 / 128 = 16.  128 = 16 x 4 x 2.
    {"scenarios/llama3-h100/405b-1k.textproto", 1024, 8, 16, 4, 1, 8, 2048, 1, 256, 8192, 128},
    {"scenarios/llama3-h100/405b-8k.textproto", 8192, 8, 16, 4, 1, 64, 2048, 1, 32, 8192, 128},
    {"scenarios/llama3-h100/405b-16k.textproto", 16384, 8, 16, 4, 1, 128, 2048, 1, 16, 8192, 128},
};

}  // namespace

TEST_CASE("ready studies: every scenario loads with the layout its README states") {
  for (const Expected& e : kStudies) {
    CAPTURE(e.file);
    const Scenario sc = load_scenario_file(source_path(e.file));
    REQUIRE(sc.jobs.size() == 1);
    const auto& job = sc.jobs[0];
    const auto& p = job.parallel;
    CHECK(job.gpus.size() == e.gpus);
    CHECK(p.tp == e.tp);
    CHECK(p.pp == e.pp);
    CHECK(p.vp == e.vp);
    CHECK(p.cp == e.cp);
    CHECK(p.dp == e.dp);
    // dp = GPUs / (tp x pp x cp), as the row's comment derives it.
    CHECK(p.dp == e.gpus / (e.tp * e.pp * e.cp));
    CHECK(p.dp * p.tp * p.pp * p.cp == job.gpus.size());
    CHECK(job.training.global_batch == e.global_batch);
    CHECK(p.micro_batch == e.micro_batch);
    // micro-batches per step = global batch / (micro-batch x dp).
    CHECK(p.grad_accum == e.grad_accum);
    CHECK(static_cast<std::uint64_t>(p.grad_accum) * p.micro_batch * p.dp == job.training.global_batch);
    CHECK(job.model.seq_len == e.seq_len);
    CHECK(job.model.layers == e.layers);
    CHECK(job.model.layers % (p.pp * p.vp) == 0);
  }
}

TEST_CASE("ready studies: Llama 3 runs keep 16M tokens per step at 1K, 8K and 16K GPUs") {
  // 2048 sequences x 8192 tokens = 16,777,216 tokens per optimizer step, whatever the GPU count.
  for (const char* f : {"70b-1k", "70b-8k", "70b-16k", "405b-1k", "405b-8k", "405b-16k"}) {
    CAPTURE(f);
    const Scenario sc = load_scenario_file(source_path(std::string("scenarios/llama3-h100/") + f + ".textproto"));
    const auto& job = sc.jobs[0];
    CHECK(job.training.global_batch * job.model.seq_len == 16777216u);
  }
}

TEST_CASE("ready studies: GPT-3 175B on 1,024 A100 within 15 % of the paper's 140 TFLOP/s per GPU") {
  // Narayanan et al. 2021 (SC21) §5.1: "On n=1024 A100 GPUs using batch size 1536, we achieve X=140
  // teraFLOP/s per GPU" (shared/validation/training row 25). Their FLOP count (Eq. 3) includes the
  // recomputed forward: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) = 96 x 1536 x 2048 x 96 x 12288^2 x
  // (1 + 2048/73728 + 51200/18874368) = 4.511e18 per step, which is the simulator's hardware FLOPs.
  // 140 TFLOP/s then means 4.511e18 / (140e12 x 1024) = 31.47 s per step. The full FLOW run takes ~30 s and
  // 6.7 GB; the ANALYTICAL fast path (one data-parallel replica, mirrored) keeps this test at a few seconds.
  // It predicts 27.856 s per step (the study's README), 4.511e18 / (27.856 x 1024) = 158.1 TFLOP/s, +13 %: the
  // bound is 15 %, the study's error with a little room, so that a change that moves it further fails here.
  Scenario sc = load_scenario_file(source_path("scenarios/gpt3-175b-1024-a100/gpt3-175b-1024-a100.textproto"));
  sc.fidelity = Fidelity::kAnalytical;
  const auto r = clustersim::workloads::simulate_scenario(sc);
  REQUIRE(r.jobs.size() == 1);
  const auto& j = r.jobs[0];
  CHECK(r.symmetry_reduced);
  // Eq. 3's FLOPs, computed here independently of the simulator: within 0.5 %.
  const double B = 1536, s = 2048, l = 96, h = 12288, V = 51200;
  const double eq3 = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  CHECK(j.hardware_flops_per_step.raw() == doctest::Approx(eq3).epsilon(0.005));
  const double tflops_per_gpu = j.hardware_flops_per_step.raw() / j.iteration_time.raw() / 1024 / 1e12;
  CHECK(tflops_per_gpu == doctest::Approx(140).epsilon(0.15));
}
