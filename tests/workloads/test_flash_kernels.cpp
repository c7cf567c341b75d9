// FlashAttention implementations (parallel.flash_kernel): the fused kernel of FA2, FA3 or FlashAttention in
// Triton at the profile's published rate over the FLOPs it executes, against the unnamed kernel timed as a GEMM.
// Expected numbers derived in the comments from the built-in profiles' rates (calibrate/profiles/*.textproto).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "calibrate/hardware_profile.h"
#include "cli/scenario_loader.h"
#include "tests/test_support.h"
#include "workloads/compute_model.h"
#include "workloads/iteration_result.h"
#include "workloads/transformer_ops.h"

using namespace clustersim;
using namespace clustersim::workloads;

namespace {

// One layer, h = 4096, a = 32 heads of d = 128, s = 8,192, one sequence: B·a = 32 and the forward kernel's
// FLOPs 4·B·a·s²·d = 4 · 32 · 2^26 · 2^7 = 2^40 = 1,099,511,627,776 (the backward's twice that, 2^41).
ModelSpec model() { return ModelSpec{"m", 1, 4096, 32, 16384, 51200, 8192}; }

std::vector<Op> ops(FlashKernel k, bool forward, std::uint32_t cp = 1) {
  OpConfig c;
  c.micro_batch = 1;
  c.attention = AttentionKernel::kFlash;
  c.flash_kernel = k;
  c.cp = cp;
  return forward ? forward_ops(model(), c) : backward_ops(model(), c);
}

Op find(const std::vector<Op>& list, const std::string& name) {
  const auto it = std::find_if(list.begin(), list.end(), [&](const Op& op) { return op.name == name; });
  REQUIRE(it != list.end());
  return *it;
}

double us(const Op& op, const calibrate::GpuPerformance& gpu) { return to_us(op_time(op, gpu, Precision::kBF16)); }

}  // namespace

TEST_CASE("flash kernels: FA2, FA3 and Triton at their published rates over the FLOPs they execute") {
  const calibrate::HardwareProfile h100 = calibrate::load_profile("h100-sxm5-80gb");
  const calibrate::GpuPerformance& g = h100.gpu;
  const Op fwd = find(ops(FlashKernel::kFa2, true), "L0.flash_attn.fwd");
  const Op bwd = find(ops(FlashKernel::kFa2, false), "L0.flash_attn.bwd");
  CHECK(fwd.flops.raw() == 1099511627776.0);
  CHECK(bwd.flops.raw() == 2199023255552.0);
  CHECK(fwd.fused_attention);
  CHECK(bwd.attention_backward);
  // The forward reads Q, K, V and writes O: 2 B x 4 x 8,192 x 4,096 = 268,435,456 B, plus the fp32 row
  // statistics 4 x 32 x 8,192 = 1,048,576 B: 269.5 MB / (3,350 GB/s x 0.8) = 100.6 us, far under the math.
  // FA2 on H100, 0.339 of 989.4 TFLOP/s = 335.41 TFLOP/s both ways; causal: half the square.
  //   forward:  2^40 / 2 / 335.4066e12 = 1,639.073 us, + 2 us launch = 1,641.073 us
  //   backward: 2^41 x 1.25 / 2 / 335.4066e12 = 4,097.682 us, + 2 = 4,099.682 us (2.5 x the forward's FLOPs)
  CHECK(us(fwd, g) == doctest::Approx(1099511627776.0 / 2 / (989.4e12 * 0.339) * 1e6 + 2).epsilon(1e-9));
  CHECK(us(fwd, g) == doctest::Approx(1641.073).epsilon(1e-6));
  CHECK(us(bwd, g) == doctest::Approx(4099.682).epsilon(1e-6));
  // FA3 (0.623 forward, 0.551 backward): 2^39 / 616.3962e12 = 891.887 us; 1.25 x 2^40 / 545.1594e12 = 2,521.078 us.
  CHECK(us(find(ops(FlashKernel::kFa3, true), "L0.flash_attn.fwd"), g) == doctest::Approx(891.887 + 2).epsilon(1e-6));
  CHECK(us(find(ops(FlashKernel::kFa3, false), "L0.flash_attn.bwd"), g) == doctest::Approx(2521.078 + 2).epsilon(1e-6));
  // Triton (0.242, 0.1695): 2^39 / 239.4348e12 = 2,296.056 us; 1.25 x 2^40 / 167.7033e12 = 8,195.364 us.
  CHECK(us(find(ops(FlashKernel::kTriton, true), "L0.flash_attn.fwd"), g) ==
        doctest::Approx(2296.056 + 2).epsilon(1e-6));
  CHECK(us(find(ops(FlashKernel::kTriton, false), "L0.flash_attn.bwd"), g) ==
        doctest::Approx(8195.364 + 2).epsilon(1e-6));
  // The unnamed kernel is a GEMM of its shape (s x d x s, batch 2·B·a) over the full square: the profile's
  // gemm_efficiency 0.56 of the peak, whole waves (8,192² / (256 x 128) x 64 = 131,072 tiles over 132 SMs:
  // u = 131,072 / (993 x 132) = 0.99998): 2^40 / (989.4e12 x 0.56 x 0.99998) = 1,984.5 us, + 2 us launch —
  // slower than FA2 (which runs half the FLOPs at 0.339: 1,641.06 us) and FA3.
  const double generic = us(find(ops(FlashKernel::kGeneric, true), "L0.flash_attn.fwd"), g);
  CHECK(generic == doctest::Approx(1099511627776.0 / (989.4e12 * 0.56 * (131072.0 / (993 * 132))) * 1e6 + 2));
  CHECK(generic == doctest::Approx(1986.5).epsilon(1e-4));
  // A100 (FA2 0.615 of 312 TFLOP/s): forward 2^39 / 191.88e12 = 2,865.10 us, + 4 us launch (the A100 profile's).
  const calibrate::HardwareProfile a100 = calibrate::load_profile("a100-sxm4-80gb");
  CHECK(us(fwd, a100.gpu) ==
        doctest::Approx(549755813888.0 / (312e12 * 0.615) * 1e6 + to_us(a100.gpu.kernel_launch)).epsilon(1e-9));
}

TEST_CASE("flash kernels: a ring-attention step counts only its unmasked blocks") {
  // cp 2: two steps of a 2c x c block, c = 8,192 / 4 = 2,048: forward 2 · 4,096 · 128 · 2,048 · 2 · 32 =
  // 2^37 = 137,438,953,472 FLOPs each, already without the masked blocks (Op::causal_skipped): no halving.
  // FA2 on H100: 2^37 / 335.4066e12 = 409.77 us; backward 2 x 2^37 x 1.25 / 335.4066e12 = 1,024.42 us.
  const calibrate::HardwareProfile h100 = calibrate::load_profile("h100-sxm5-80gb");
  const Op step = find(ops(FlashKernel::kFa2, true, 2), "L0.ring_attn1.fwd");
  CHECK(step.flops.raw() == 137438953472.0);
  CHECK(step.causal_skipped);
  CHECK(us(step, h100.gpu) == doctest::Approx(409.77 + 2).epsilon(1e-5));
  CHECK(us(find(ops(FlashKernel::kFa2, false, 2), "L0.ring_attn1.bwd"), h100.gpu) ==
        doctest::Approx(1024.42 + 2).epsilon(1e-5));
}

TEST_CASE("flash kernels: the scenario names one the profile has a rate for") {
  auto text = [](const std::string& profile, const std::string& extra, const std::string& precision = "BF16") {
    return "cluster { node_preset: \"" + std::string(profile == "a100-sxm4-80gb" ? "dgx-a100" : "dgx-h100") +
           "\" nodes: 1 }\nprofile: \"" + profile +
           "\"\nmodel { preset: \"llama2-7b\" }\nparallel { dp: 8 micro_batch: 1 " + extra +
           " }\ntraining { samples: 8 global_batch: 8 precision: " + precision + " }\n";
  };
  auto error = [&](const std::string& t) {
    return clustersim::testing::input_error_of([&] { cli::load_scenario_text(t, "s.textproto", false, ""); });
  };
  const workloads::Scenario ok =
      cli::load_scenario_text(text("h100-sxm5-80gb", "flash_attention: true flash_kernel: FA3"), "s", false, "");
  CHECK(ok.jobs.at(0).parallel.flash_kernel == FlashKernel::kFa3);
  CHECK(error(text("a100-sxm4-80gb", "flash_attention: true flash_kernel: FA3")) ==
        "s.textproto:4:69: parallel.flash_kernel: FA3: profile \"a100-sxm4-80gb\" (A100-SXM4-80GB) has no published "
        "rate for it (gpu.flash_attention_fa3); FlashAttention-3 runs on Hopper GPUs; name another kernel, or leave "
        "flash_kernel out to time the kernel as a GEMM of its shape");
  CHECK(error(text("h100-sxm5-80gb", "flash_kernel: FA2")).find(
            "parallel.flash_kernel: names a FlashAttention kernel, but flash_attention is not true") !=
        std::string::npos);
  CHECK(error(text("h100-sxm5-80gb", "flash_attention: true flash_kernel: TRITON", "FP32"))
            .find("parallel.flash_kernel: TRITON runs FP16/BF16 attention; precision FP32 has none") !=
        std::string::npos);
}


TEST_CASE("attention-kernels: the studies differ by the ring-attention kernels' time, nothing else") {
  // scenarios/attention-kernels/: LLaMA-3 8B at 32k on 2 DGX H100, tp 2 x cp 4 x dp 2, 4 micro-batches; the
  // files differ only in flash_kernel. GPU 0's compute differs by 4 micro-batches x the difference of its
  // ring-attention ops (forward + backward, one micro-batch, tp 2, cp 4); memory and exposed communication
  // are the same (the ring's K/V transfers overlap the steps in all of them).
  const std::string dir = std::string(CLUSTERSIM_SOURCE_DIR) + "/scenarios/";
  const Scenario generic = cli::load_scenario_file(dir + "long-context-cp.textproto");
  const ScenarioResult rg = simulate_scenario(generic);
  auto attention_s = [&](const Scenario& sc) {
    const Job& job = sc.jobs.at(0);
    OpConfig c;
    c.micro_batch = 1;
    c.tp = job.parallel.tp;
    c.cp = job.parallel.cp;
    c.sequence_parallel = job.parallel.sequence_parallel;
    c.attention = AttentionKernel::kFlash;
    c.flash_kernel = job.parallel.flash_kernel;
    double t = 0;
    for (const auto& list : {forward_ops(job.model, c), backward_ops(job.model, c)})
      for (const Op& op : list)
        if (op.fused_attention) t += op_time(op, sc.profile.gpu, Precision::kBF16).raw();
    return t;
  };
  const double generic_attention = attention_s(generic);
  double previous = 0;
  for (const char* k : {"fa3", "fa2", "triton"}) {
    CAPTURE(k);
    const Scenario sc = cli::load_scenario_file(dir + "attention-kernels/llama3-8b-32k-" + k + ".textproto");
    const ScenarioResult r = simulate_scenario(sc);
    const IterationResult& a = r.jobs.at(0);
    const IterationResult& g = rg.jobs.at(0);
    CHECK(a.memory.peak.raw() == g.memory.peak.raw());
    CHECK(a.breakdown.exposed_comm.raw() == doctest::Approx(g.breakdown.exposed_comm.raw()).epsilon(1e-9));
    CHECK(a.breakdown.compute.raw() - g.breakdown.compute.raw() ==
          doctest::Approx(4 * (attention_s(sc) - generic_attention)).epsilon(1e-6));
    // FA3, FA2, Triton: each slower than the one before (the README's table).
    CHECK(a.iteration_time.raw() > previous);
    previous = a.iteration_time.raw();
  }
}
