// FP8 training (Precision::kFP8, Transformer Engine's recipe): which ops run at the FP8 peak, the casts it
// adds, and what stays BF16. Expected numbers derived in the comments.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "workloads/compute_model.h"
#include "workloads/transformer_ops.h"

using namespace clustersim;
using namespace clustersim::workloads;

namespace {

// H100-like, no quantisation and no table: BF16 989.4, FP8 1,978.9 TFLOP/s dense; HBM 3,350 GB/s x 0.8;
// GEMM efficiency 0.7; no launch overhead, so op times are the roofline alone.
calibrate::GpuPerformance hopper() {
  calibrate::GpuPerformance g{"H", TFLOPps(989.4), TFLOPps(989.4), TFLOPps(494.7), TFLOPps(66.9), GBps(3350),
                              GiB(80), 0.7, 0.8, seconds(0)};
  g.peak_fp8 = TFLOPps(1978.9);
  return g;
}

OpConfig config(Precision p) {
  OpConfig c;
  c.micro_batch = 4;
  c.precision = p;
  c.attention = AttentionKernel::kFlash;
  return c;
}

// GPT with h = 4096, a = 32, f = 4h, V = 51,200, s = 2,048, one layer: T = 4 x 2,048 = 8,192 tokens.
ModelSpec gpt() { return ModelSpec{"gpt", 1, 4096, 32, 16384, 51200, 2048}; }

const Op& find(const std::vector<Op>& ops, const std::string& name) {
  const auto it = std::find_if(ops.begin(), ops.end(), [&](const Op& op) { return op.name == name; });
  REQUIRE(it != ops.end());
  return *it;
}

}  // namespace

TEST_CASE("FP8: the linear layers' GEMMs at the FP8 peak, attention and LM head in BF16") {
  const calibrate::GpuPerformance g = hopper();
  const std::vector<Op> f8 = forward_ops(gpt(), config(Precision::kFP8));
  const std::vector<Op> b16 = forward_ops(gpt(), config(Precision::kBF16));
  // fc1.fwd: 8,192 x 4,096 by 4,096 x 16,384: 2·8192·4096·16384 = 1.0995e12 FLOPs.
  //   BF16: 1.0995e12 / (989.4e12 · 0.7) = 1.5875 ms; bytes 2·(8192·4096 + 4096·16384 + 8192·16384) = 469.8 MB
  //         / 2.68e12 B/s = 0.175 ms: compute-bound.
  //   FP8:  1.0995e12 / (1978.9e12 · 0.7) = 0.793739 ms: half. Bytes 1·(8192·4096 + 4096·16384) + 2·8192·16384
  //         = 33,554,432 + 67,108,864 + 268,435,456 = 369,098,752 B.
  const Op& fc1_8 = find(f8, "L0.fc1.fwd");
  const Op& fc1_16 = find(b16, "L0.fc1.fwd");
  CHECK(fc1_8.fp8);
  CHECK_FALSE(fc1_16.fp8);
  CHECK(fc1_8.flops.raw() == fc1_16.flops.raw());
  CHECK(fc1_8.bytes.raw() == 369098752.0);
  const double fc1_flops = 2.0 * 8192 * 4096 * 16384;
  CHECK(to_us(op_time(fc1_16, g, Precision::kBF16)) == doctest::Approx(fc1_flops / (989.4e12 * 0.7) * 1e6));
  CHECK(to_us(op_time(fc1_8, g, Precision::kFP8)) == doctest::Approx(fc1_flops / (1978.9e12 * 0.7) * 1e6));
  CHECK(to_us(op_time(fc1_8, g, Precision::kFP8)) == doctest::Approx(793.739).epsilon(1e-6));
  // The same four linear layers are FP8: qkv, proj, fc1, fc2 (forward and both backward GEMMs).
  const std::vector<Op> b8 = backward_ops(gpt(), config(Precision::kFP8));
  for (const char* n : {"qkv", "proj", "fc1", "fc2"}) {
    CHECK(find(f8, std::string("L0.") + n + ".fwd").fp8);
    CHECK(find(b8, std::string("L0.") + n + ".dgrad").fp8);
    CHECK(find(b8, std::string("L0.") + n + ".wgrad").fp8);
  }
  // Attention core and LM head stay BF16: same time under FP8 as under BF16.
  for (const char* n : {"L0.flash_attn.fwd", "lm_head.fwd"}) {
    const Op& op = find(f8, n);
    CHECK_FALSE(op.fp8);
    CHECK(op_time(op, g, Precision::kFP8).raw() == op_time(find(b16, n), g, Precision::kBF16).raw());
  }
  CHECK_FALSE(find(b8, "lm_head.dgrad").fp8);
}

TEST_CASE("FP8: one cast per linear layer and pass, (e + 2) bytes per element") {
  const std::vector<Op> f8 = forward_ops(gpt(), config(Precision::kFP8));
  const std::vector<Op> f16 = forward_ops(gpt(), config(Precision::kBF16));
  const std::vector<Op> b8 = backward_ops(gpt(), config(Precision::kFP8));
  const std::vector<Op> b16 = backward_ops(gpt(), config(Precision::kBF16));
  // Four linear layers per dense layer: four casts forward (their inputs X) and four backward (their dY).
  CHECK(f8.size() == f16.size() + 4);
  CHECK(b8.size() == b16.size() + 4);
  // Forward cast of fc2's input X: T x f = 8192 x 16384 elements; read 2 B, write 1 + 1 (row- and column-wise
  // FP8): 4 B each = 536,870,912 B; 2 FLOPs each (absolute max and scale) = 268,435,456. It precedes fc2.fwd.
  const Op& cast = find(f8, "L0.fc2_cast.fwd");
  CHECK(cast.kind == OpKind::kElementwise);
  CHECK(cast.bytes.raw() == 4.0 * 8192 * 16384);
  CHECK(cast.flops.raw() == 2.0 * 8192 * 16384);
  const auto at = [](const std::vector<Op>& ops, const std::string& n) {
    return std::find_if(ops.begin(), ops.end(), [&](const Op& op) { return op.name == n; }) - ops.begin();
  };
  CHECK(at(f8, "L0.fc2_cast.fwd") + 1 == at(f8, "L0.fc2.fwd"));
  // Backward cast of qkv's output gradient dY: T x 3h = 8192 x 12288 elements x 4 B = 402,653,184 B, before
  // qkv.dgrad. On the H100-like GPU: 402,653,184 / (3.35e12 · 0.8) = 150.25 us, memory-bound.
  const Op& cast_b = find(b8, "L0.qkv_cast.bwd");
  CHECK(cast_b.bytes.raw() == 4.0 * 8192 * 12288);
  CHECK(at(b8, "L0.qkv_cast.bwd") + 1 == at(b8, "L0.qkv.dgrad"));
  CHECK(to_us(op_time(cast_b, hopper(), Precision::kFP8)) == doctest::Approx(402653184.0 / 2.68e12 * 1e6));
  // One host kernel per cast, forward or backward.
  CHECK(dispatch_kernels("L0.qkv_cast.bwd", true) == 1);
  CHECK(dispatch_kernels("L0.fc2_cast.fwd", true) == 1);
  // Gradients come from the same ops: every parameter's gradient exactly once, as in BF16.
  double p8 = 0, p16 = 0;
  for (const Op& op : b8) p8 += op.grad_parameters;
  for (const Op& op : b16) p16 += op.grad_parameters;
  CHECK(p8 == p16);
}

TEST_CASE("FP8: BF16 tensors, the FP8 peak for MFU, and the MoE router kept in BF16") {
  CHECK(element_bytes(Precision::kFP8) == 2);
  CHECK(sixteen_bit(Precision::kFP8));
  CHECK_FALSE(sixteen_bit(Precision::kTF32));
  CHECK(tensor_peak(hopper(), Precision::kFP8).raw() == 1978.9e12);
  // A GPU without FP8 tensor cores has peak 0 (the scenario loader refuses FP8 there).
  calibrate::GpuPerformance ampere = hopper();
  ampere.peak_fp8 = TFLOPps(0);
  CHECK(tensor_peak(ampere, Precision::kFP8).raw() == 0);
  // MoE: the expert GEMMs are FP8, the router's are not.
  ModelSpec moe = gpt();
  moe.experts = 8;
  moe.top_k = 2;
  const std::vector<Op> f8 = forward_ops(moe, config(Precision::kFP8));
  const std::vector<Op> b8 = backward_ops(moe, config(Precision::kFP8));
  CHECK(find(f8, "L0.expert_fc1.fwd").fp8);
  CHECK(find(b8, "L0.expert_fc2.wgrad").fp8);
  CHECK_FALSE(find(f8, "L0.router.fwd").fp8);
  CHECK_FALSE(find(b8, "L0.router.dgrad").fp8);
  CHECK(std::none_of(b8.begin(), b8.end(), [](const Op& op) { return op.name == "L0.router_cast.bwd"; }));
}

#include "cli/command_line.h"
#include "cli/report.h"
#include "cli/scenario_loader.h"
#include "workloads/iteration_result.h"

TEST_CASE("fp8-vs-bf16: the two scenarios differ by the FP8 GEMMs and their casts, nothing else") {
  const std::string dir = std::string(CLUSTERSIM_SOURCE_DIR) + "/scenarios/fp8-vs-bf16/";
  const Scenario bf = cli::load_scenario_file(dir + "llama2-7b-bf16.textproto");
  const Scenario f8 = cli::load_scenario_file(dir + "llama2-7b-fp8.textproto");
  REQUIRE(bf.jobs.size() == 1);
  REQUIRE(f8.jobs.size() == 1);
  CHECK(bf.jobs[0].training.precision == Precision::kBF16);
  CHECK(f8.jobs[0].training.precision == Precision::kFP8);
  const ScenarioResult sb = simulate_scenario(bf), s8 = simulate_scenario(f8);
  const IterationResult& rb = sb.jobs[0];
  const IterationResult& r8 = s8.jobs[0];
  // The summary quotes the FP8 run's MFU against both peaks: same model FLOPs, so MFU(BF16 peak) = MFU x
  // 1978.9 / 989.4; the BF16 run has no such line.
  const std::string text = cli::summary_text(f8, s8);
  const std::string bf16_mfu = "MFU (BF16 peak)   " + cli::fmt("%.1f", 100 * r8.mfu * 1978.9 / 989.4) + " %";
  CHECK(text.find(bf16_mfu) != std::string::npos);
  CHECK(cli::summary_text(bf, sb).find("MFU (BF16 peak)") == std::string::npos);
  // Memory and communication are BF16's: same peak, same exposed communication.
  CHECK(r8.memory.peak.raw() == rb.memory.peak.raw());
  CHECK(r8.breakdown.exposed_comm.raw() == doctest::Approx(rb.breakdown.exposed_comm.raw()).epsilon(1e-9));
  // Compute: the linear GEMMs (compute-bound: T = 4096 tokens, K >= 4096) halve at twice the peak, with the same
  // quantisation u (same shapes); the casts add time; the rest is unchanged. So the FP8 compute is more than
  // half the BF16 compute and less than all of it.
  CHECK(r8.breakdown.compute.raw() > 0.5 * rb.breakdown.compute.raw());
  CHECK(r8.breakdown.compute.raw() < rb.breakdown.compute.raw());
  // Rebuild the split from the ops of one micro-batch, forward + backward (tp 1, pp 1, no recompute): the
  // difference of the two computes is 16 micro-batches x (linear BF16 time / 2 - cast time), per GPU.
  OpConfig c;
  c.micro_batch = 1;
  c.attention = AttentionKernel::kFlash;
  const calibrate::GpuPerformance& g = f8.profile.gpu;
  double linear_bf16 = 0, linear_fp8 = 0, casts = 0;
  for (Precision p : {Precision::kBF16, Precision::kFP8}) {
    c.precision = p;
    for (const auto& ops : {forward_ops(f8.jobs[0].model, c), backward_ops(f8.jobs[0].model, c)})
      for (const Op& op : ops) {
        if (op.fp8) linear_fp8 += op_time(op, g, p).raw();
        if (p == Precision::kBF16 && op.kind == OpKind::kGemm &&
            (op.name.find(".qkv.") != std::string::npos || op.name.find(".proj.") != std::string::npos ||
             op.name.find(".fc1.") != std::string::npos || op.name.find(".fc2.") != std::string::npos))
          linear_bf16 += op_time(op, g, p).raw();
        if (op.name.find("_cast.") != std::string::npos) casts += op_time(op, g, p).raw();
      }
  }
  // Each FP8 GEMM takes (t_bf16 - launch) x 989.4 / 1978.9 + launch: the math at the FP8 peak (the datasheet's
  // 3,958 / 2 = 1978.9, a hair above 2 x 989.4), the 2 us launch unchanged.
  const double launches = 32 * 4 * 3;  // layers x linear layers x (fwd, dgrad, wgrad)
  CHECK(linear_fp8 ==
        doctest::Approx((linear_bf16 - launches * 2e-6) * 989.4 / 1978.9 + launches * 2e-6).epsilon(1e-9));
  CHECK(rb.breakdown.compute.raw() - r8.breakdown.compute.raw() ==
        doctest::Approx(16 * (linear_bf16 - linear_fp8 - casts)).epsilon(1e-6));
}
