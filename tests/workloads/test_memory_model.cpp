// Memory model: Korthikanti et al.'s activation rows for GPT-3 175B, bytes per parameter of ZeRO and
// Megatron's (distributed) optimizer, in-flight micro-batches of the pipeline schedules, per-rank
// parameters of a stage (checked against the per-op gradients), the report and its OOM verdict.
#include <doctest/doctest.h>

#include <algorithm>
#include <tuple>

#include "workloads/memory_model.h"
#include "workloads/pipeline_schedule.h"
#include "workloads/transformer_ops.h"

using namespace clustersim;
using namespace clustersim::workloads;

namespace {

ModelSpec gpt3_175b() { return ModelSpec{"gpt3-175b", 96, 12288, 96, 49152, 51200, 2048}; }

MemoryConfig plan(std::uint32_t t, bool sp, Recompute r) {
  MemoryConfig c;
  c.tp = t;
  c.sequence_parallel = sp;
  c.recompute = r;
  return c;
}

double layer_gib(const MemoryConfig& c) { return to_GiB(layer_activation_bytes(gpt3_175b(), 0, c)); }

const MemoryPart& part(const MemoryEstimate& e, const std::string& prefix) {
  for (const MemoryPart& p : e.parts)
    if (p.name.rfind(prefix, 0) == 0) return p;
  FAIL("no part " << prefix);
  return e.parts.front();
}

}  // namespace

TEST_CASE("activations per layer: Korthikanti et al.'s GPT-3 175B rows (s=2048, b=1, h=12288, a=96, t=8)") {
  // s·b·h = 25,165,824; 5·a·s/h = 80. Bytes per layer and GiB (2^30):
  //   no parallelism     sbh·(34 + 80)              = 2,868,903,936 = 2.672 GiB  (paper: 2.67)
  //   TP                 sbh·(10 + 24/8 + 80/8)     =   578,813,952 = 0.539 GiB  (0.54)
  //   TP + SP            sbh·(34 + 80)/8            =   358,612,992 = 0.334 GiB  (0.33)
  //   TP + selective     sbh·(10 + 24/8)            =   327,155,712 = 0.305 GiB  (0.30)
  //   TP + SP + sel.     sbh·34/8                   =   106,954,752 = 0.0996 GiB (0.10)
  //   full recompute     2·sbh                      =    50,331,648 = 0.0469 GiB (0.047)
  const double sbh = 2048.0 * 12288;
  CHECK(layer_activation_bytes(gpt3_175b(), 0, plan(1, false, Recompute::kNone)).raw() == 114 * sbh);
  CHECK(layer_activation_bytes(gpt3_175b(), 0, plan(8, false, Recompute::kNone)).raw() == 23 * sbh);
  CHECK(layer_activation_bytes(gpt3_175b(), 0, plan(8, true, Recompute::kNone)).raw() == 14.25 * sbh);
  CHECK(layer_activation_bytes(gpt3_175b(), 0, plan(8, false, Recompute::kSelective)).raw() == 13 * sbh);
  CHECK(layer_activation_bytes(gpt3_175b(), 0, plan(8, true, Recompute::kSelective)).raw() == 4.25 * sbh);
  CHECK(layer_activation_bytes(gpt3_175b(), 0, plan(8, false, Recompute::kFull)).raw() == 2 * sbh);
  // The same layer as an fp32 model under torch.autocast (MemoryConfig::autocast): the norm inputs are fp32
  // (2·2 sbh more: 38 sbh) and the attention keeps the fp32 softmax output, the mask and ·V's 16-bit copy,
  // (4 + 1 + 2)·a·s²·b = 7·a·s²·b = sbh·7·a·s/h = 112 sbh against 80: sbh·(38 + 112) = 150 sbh. Without dropout
  // (no masks: 32 sbh whole and split, 38 − 2 = 36 with the fp32 norm inputs) softmax output 4 + copy 2:
  // 6·a·s²·b = 96 sbh, against Korthikanti's 2·a·s²·b = 32 sbh. Full recompute keeps the fp32 layer input: 4 sbh.
  MemoryConfig autocast = plan(1, false, Recompute::kNone);
  autocast.autocast = true;
  CHECK(layer_activation_bytes(gpt3_175b(), 0, autocast).raw() == 150 * sbh);
  ModelSpec no_dropout = gpt3_175b();
  no_dropout.dropout = false;
  CHECK(layer_activation_bytes(no_dropout, 0, plan(1, false, Recompute::kNone)).raw() == (32 + 32) * sbh);
  CHECK(layer_activation_bytes(no_dropout, 0, autocast).raw() == (36 + 96) * sbh);
  autocast.recompute = Recompute::kFull;
  CHECK(layer_activation_bytes(gpt3_175b(), 0, autocast).raw() == 4 * sbh);
  // The paper's two-digit values, at the precision it prints them.
  CHECK(layer_gib(plan(1, false, Recompute::kNone)) == doctest::Approx(2.67).epsilon(0.005));
  CHECK(layer_gib(plan(8, false, Recompute::kNone)) == doctest::Approx(0.54).epsilon(0.01));
  CHECK(layer_gib(plan(8, true, Recompute::kNone)) == doctest::Approx(0.33).epsilon(0.015));
  CHECK(layer_gib(plan(8, false, Recompute::kSelective)) == doctest::Approx(0.30).epsilon(0.02));
  CHECK(layer_gib(plan(8, true, Recompute::kSelective)) == doctest::Approx(0.10).epsilon(0.005));
  CHECK(layer_gib(plan(8, false, Recompute::kFull)) == doctest::Approx(0.047).epsilon(0.005));
  // FlashAttention drops the 5·a·s²·b/t attention matrices and keeps fp32 row statistics
  // 4·a·s·b/t: TP + SP + flash = 4.25·sbh + 4·96·2048/8.
  MemoryConfig flash = plan(8, true, Recompute::kNone);
  flash.attention = AttentionKernel::kFlash;
  CHECK(layer_activation_bytes(gpt3_175b(), 0, flash).raw() == 4.25 * sbh + 4.0 * 96 * 2048 / 8);
}

TEST_CASE("activations without dropout: the masks and the attention dropout output go") {
  // GPT-3 175B, t = 8, no SP or recompute, trained with dropout 0 (model.dropout: false): whole part
  // 10·sbh − 2·sbh masks = 8·sbh, split 24·sbh/8 = 3·sbh, attention 5·a·s²·b/8 − (1 + 2)·a·s²·b/8 (mask and
  // dropout output) = 2·96·2048²·1/8 = 100,663,296 B = 4·sbh (a·s/h = 16). Total 15·sbh = 377,487,360 B,
  // against 23·sbh with dropout.
  ModelSpec m = gpt3_175b();
  m.dropout = false;
  const double sbh = 2048.0 * 12288;
  CHECK(layer_activation_bytes(m, 0, plan(8, false, Recompute::kNone)).raw() == 15 * sbh);
  // With SP the whole part is split too: (8 + 24 + 2·16)·sbh/8 = 8·sbh; flash: (8 + 24)/8·sbh + 4·a·s·b/8.
  CHECK(layer_activation_bytes(m, 0, plan(8, true, Recompute::kNone)).raw() == 8 * sbh);
  MemoryConfig flash = plan(8, true, Recompute::kNone);
  flash.attention = AttentionKernel::kFlash;
  CHECK(layer_activation_bytes(m, 0, flash).raw() == 4 * sbh + 4.0 * 96 * 2048 / 8);
  // The first stage's embedding dropout mask (T·h/t per micro-batch in flight) is gone as a part.
  MemoryConfig c = plan(8, true, Recompute::kNone);
  c.pp = 8;
  c.micro_batches = 64;
  c.stage = 0;
  bool has_mask = false;
  for (const MemoryPart& p : estimate_memory(m, c, GiB(80)).parts)
    has_mask = has_mask || p.name.rfind("embedding dropout", 0) == 0;
  CHECK(!has_mask);
  bool has_mask_with_dropout = false;
  for (const MemoryPart& p : estimate_memory(gpt3_175b(), c, GiB(80)).parts)
    has_mask_with_dropout = has_mask_with_dropout || p.name.rfind("embedding dropout", 0) == 0;
  CHECK(has_mask_with_dropout);
}

TEST_CASE("first pipeline stage with 1F1B holds p micro-batches of L/p layers: 32.1 vs 9.56 GiB") {
  // p = 8, 12 layers per stage, 8 micro-batches in flight on stage 0 = 96 layer passes:
  // 96·0.33398 = 32.06 GiB (TP+SP) and 96·0.099609 = 9.5625 GiB (TP+SP+selective)
  // (Korthikanti et al. 2022: 32.1 and 9.56 GiB).
  MemoryConfig c = plan(8, true, Recompute::kNone);
  c.pp = 8;
  c.micro_batches = 64;
  const double sbh = 2048.0 * 12288;
  const MemoryEstimate none = estimate_memory(gpt3_175b(), c, GiB(80));
  CHECK(part(none, "activations (12 layers x 8 micro-batches").size.raw() == 96 * 14.25 * sbh);
  CHECK(to_GiB(part(none, "activations (").size) == doctest::Approx(32.1).epsilon(0.002));
  c.recompute = Recompute::kSelective;
  CHECK(to_GiB(part(estimate_memory(gpt3_175b(), c, GiB(80)), "activations (").size) ==
        doctest::Approx(9.5625).epsilon(1e-12));
  // Interleaving with v = 2 multiplies stage 0's activations by 1 + (p−1)/(p·v) = 1 + 7/16.
  c.schedule = PipelineSchedule::kInterleaved;
  c.virtual_stages = 2;
  CHECK(to_GiB(part(estimate_memory(gpt3_175b(), c, GiB(80)), "activations (").size) ==
        doctest::Approx(9.5625 * (1 + 7.0 / 16)).epsilon(1e-12));
  // The first stage also stores the embedding's dropout mask, s·b·h/t bytes per micro-batch in flight:
  // 8 · 25,165,824 / 8 = 25,165,824 (Korthikanti's s·b·h·p/t).
  CHECK(part(none, "embedding dropout").size.raw() == sbh);
}

TEST_CASE("in-flight micro-batches: GPipe m, 1F1B p − i, interleaved p·(1 + (p−1)/(p·v)) on stage 0") {
  CHECK(in_flight_micro_batches(PipelineSchedule::kGPipe, 8, 0, 96, 1) == 96);
  CHECK(in_flight_micro_batches(PipelineSchedule::kOneFOneB, 8, 0, 96, 1) == 8);
  CHECK(in_flight_micro_batches(PipelineSchedule::kOneFOneB, 8, 7, 96, 1) == 1);
  CHECK(in_flight_micro_batches(PipelineSchedule::kOneFOneB, 8, 3, 96, 1) == 5);
  CHECK(in_flight_micro_batches(PipelineSchedule::kOneFOneB, 8, 0, 3, 1) == 3);  // m < p: m
  // Interleaved, Megatron's warm-up 2·(p − i − 1) + (v − 1)·p forward chunk passes + 1, over v:
  // p = 8, v = 2, stage 0: (14 + 8 + 1)/2 = 11.5 = 8·(1 + 7/16); p = 4, v = 2, stage 3: (0 + 4 + 1)/2 = 2.5.
  CHECK(in_flight_micro_batches(PipelineSchedule::kInterleaved, 8, 0, 96, 2) == 11.5);
  CHECK(in_flight_micro_batches(PipelineSchedule::kInterleaved, 4, 3, 16, 2) == 2.5);
  // Cross-check with the schedule module's own per-stage order for 1F1B.
  for (std::uint32_t i = 0; i < 8; ++i) {
    CAPTURE(i);
    CHECK(double(max_in_flight(pipeline_order(PipelineSchedule::kOneFOneB, 8, 96)[i])) ==
          in_flight_micro_batches(PipelineSchedule::kOneFOneB, 8, i, 96, 1));
  }
}

TEST_CASE("interleaved: the embedding and the output layer are held for their own chunk's micro-batches") {
  // p = 4, v = 2, m = 8. Stage 0 warms up with 2·3 + 4 = 10 forward micro-steps: chunk 0 for micro-steps
  // 0–3 and 8–9, chunk 1 for 4–7; then forward 10, 11 (chunk 0) come before its first backwards (chunk 1),
  // so all 8 micro-batches of chunk 0 are held at once, against (10 + 1)/2 = 5.5 passes on average per
  // chunk. Stage 3 warms up with 4 forwards of chunk 0; each later forward of chunk 1 is followed by that
  // micro-batch's backward: 1.
  CHECK(chunk_in_flight_micro_batches(PipelineSchedule::kInterleaved, 4, 0, 8, 2, 0) == 8);
  CHECK(chunk_in_flight_micro_batches(PipelineSchedule::kInterleaved, 4, 3, 8, 2, 1) == 1);
  CHECK(in_flight_micro_batches(PipelineSchedule::kInterleaved, 4, 0, 8, 2) == 5.5);
  // Without interleaving the chunk is the stage: 1F1B p − i, GPipe m.
  CHECK(chunk_in_flight_micro_batches(PipelineSchedule::kOneFOneB, 8, 7, 96, 1, 0) == 1);
  CHECK(chunk_in_flight_micro_batches(PipelineSchedule::kGPipe, 8, 7, 96, 1, 0) == 96);
  // Cross-check with the schedule module's per-stage order, chunk by chunk.
  for (const auto& [p, m, v] : {std::tuple{4u, 8u, 2u}, {4u, 16u, 4u}, {8u, 64u, 3u}, {2u, 2u, 2u}}) {
    const auto order = pipeline_order(PipelineSchedule::kInterleaved, p, m, v);
    for (std::uint32_t i = 0; i < p; ++i) {
      for (std::uint32_t chunk = 0; chunk < v; ++chunk) {
        std::uint32_t held = 0, most = 0;
        for (const PipelineStep& step : order[i]) {
          if (step.chunk != chunk) continue;
          held = step.kind == PipelineStep::Kind::kForward ? held + 1 : held - 1;
          most = std::max(most, held);
        }
        CAPTURE(p);
        CAPTURE(m);
        CAPTURE(v);
        CAPTURE(i);
        CAPTURE(chunk);
        CHECK(chunk_in_flight_micro_batches(PipelineSchedule::kInterleaved, p, i, m, v, chunk) == most);
      }
    }
  }
  // The last stage's output layer: logits of one micro-batch, 2·e·T·h/t + 4·T·V/t with T = s·b, not
  // in_flight (2.5 on stage 3 of p = 4, v = 2) times that. GPT-3 175B, t = 8, SP: 2·2·2048·12288/8 +
  // 4·2048·51200/8 = 12,582,912 + 52,428,800 = 65,011,712 B.
  MemoryConfig c = plan(8, true, Recompute::kSelective);
  c.pp = 4;
  c.stage = 3;
  c.micro_batches = 8;
  c.schedule = PipelineSchedule::kInterleaved;
  c.virtual_stages = 2;
  CHECK(part(estimate_memory(gpt3_175b(), c, GiB(80)), "output layer").size.raw() == 65011712.0);
}

TEST_CASE("model-state bytes per parameter: ZeRO's 16, Megatron's 18 / 20 and 6 + 12/d") {
  using enum Optimizer;
  // ZeRO §3.1: fp16 weights 2 + fp16 gradients 2 + fp32 master, m, v 12 = 16 (K = 12).
  CHECK(model_state_bytes(kAdam, Precision::kFP16, GradientDtype::k16Bit, Sharding::kNone, 1).total() == 16);
  // Megatron (dist_optimizer.md): bf16 weights, fp32 main_grad: 2 + 4 + 12 = 18; distributed 6 + 12/d.
  CHECK(model_state_bytes(kAdam, Precision::kBF16, GradientDtype::kFp32, Sharding::kNone, 1).total() == 18);
  CHECK(model_state_bytes(kAdam, Precision::kBF16, GradientDtype::kFp32, Sharding::kOptimizer, 64).total() ==
        6 + 12.0 / 64);
  // fp16 weights and grads with the fp32 gradient copy: 2 + 2 + 16 = 20; distributed 4 + 16/d.
  CHECK(model_state_bytes(kAdam, Precision::kFP16, GradientDtype::k16BitFp32Copy, Sharding::kNone, 1).total() == 20);
  CHECK(model_state_bytes(kAdam, Precision::kFP16, GradientDtype::k16BitFp32Copy, Sharding::kOptimizer, 8).total() ==
        4 + 16.0 / 8);
  // fp32 weights and grads: 4 + 4 + 8 = 16; distributed 8 + 8/d.
  CHECK(model_state_bytes(kAdam, Precision::kFP32, GradientDtype::kFp32, Sharding::kNone, 1).total() == 16);
  CHECK(model_state_bytes(kAdam, Precision::kFP32, GradientDtype::kFp32, Sharding::kOptimizer, 4).total() == 8 + 2);
  // SGD keeps the fp32 master only (2 + 4 + 4 = 10), momentum adds 4 (14).
  CHECK(model_state_bytes(kSgd, Precision::kBF16, GradientDtype::kFp32, Sharding::kNone, 1).total() == 10);
  CHECK(model_state_bytes(kSgdMomentum, Precision::kBF16, GradientDtype::kFp32, Sharding::kNone, 1).total() == 14);
  // ZeRO's example, Ψ = 7.5 B, N_d = 64, K = 12: 120 GB → 31.4 → 16.6 → 1.875 GB.
  const double psi = 7.5e9;
  auto gb = [&](Sharding s) {
    return psi * model_state_bytes(kAdam, Precision::kFP16, GradientDtype::k16Bit, s, 64).total() / 1e9;
  };
  CHECK(gb(Sharding::kNone) == doctest::Approx(120));
  CHECK(gb(Sharding::kOptimizer) == doctest::Approx(31.40625));            // 4Ψ + 12Ψ/64
  CHECK(gb(Sharding::kOptimizerGradients) == doctest::Approx(16.640625));  // 2Ψ + 14Ψ/64
  CHECK(gb(Sharding::kAll) == doctest::Approx(1.875));                     // 16Ψ/64
}

TEST_CASE("a stage's parameters per rank equal the gradients its per-rank backward ops produce") {
  ModelSpec llama{"llama", 8, 512, 8, 1376, 1000, 64};
  llama.kv_heads = 2;
  llama.gated_mlp = true;
  llama.activation = Activation::kSwiglu;
  llama.norm = Norm::kRmsNorm;
  llama.position = Position::kRope;
  llama.tied_embeddings = false;
  llama.biases = false;
  ModelSpec moe = llama;
  moe.experts = 8;
  moe.top_k = 2;
  moe.shared_experts = 1;
  moe.moe_ffn_hidden = 256;
  moe.first_dense_layers = 1;
  const ModelSpec tied_gpt{"gpt", 8, 512, 8, 2048, 1000, 64};
  for (const ModelSpec& m : {llama, moe, tied_gpt}) {
    for (std::uint32_t stage = 0; stage < 4; ++stage) {
      CAPTURE(m.name);
      CAPTURE(stage);
      MemoryConfig c;
      c.tp = 2;
      c.pp = 4;
      c.ep = 2;
      c.dp = 2;
      c.stage = stage;
      OpConfig o;
      o.tp = 2;
      o.ep = 2;
      o.first_layer = 2 * stage;
      o.layer_count = 2;
      o.embedding = stage == 0;
      o.head = stage == 3;
      double grads = 0;
      for (const Op& op : backward_ops(m, o)) grads += op.grad_parameters;
      CHECK(stage_parameters(m, c).total() == doctest::Approx(grads).epsilon(1e-12));
    }
  }
  // One rank, one stage: the whole model.
  MemoryConfig one;
  CHECK(stage_parameters(moe, one).total() == doctest::Approx(moe.parameter_count()).epsilon(1e-12));
  CHECK(stage_layers(llama, 4, 1, 1) == std::vector<std::uint32_t>{2, 3});
  CHECK(stage_layers(llama, 2, 1, 2) == std::vector<std::uint32_t>{2, 3, 6, 7});  // chunks 1 and 3
}

TEST_CASE("report: parts, peak, capacity, and the part that breaks an 80 GiB GPU") {
  // GPT-3 175B on t = 8, one stage, one DP rank, bf16 + fp32 grads + Adam (18 B/param). Per rank and
  // layer: split (12h² + 7h)/8 (QKV, proj, fc1, fc2 and the column-parallel QKV and fc1 biases) + replicated
  // 2h (row-parallel biases) + 4h (LayerNorms); × 96 + V·h/8 + s·h + 2h = 21.855 B parameters:
  // weights 2 B each (40.7 GiB) fit, the fp32 gradients (81.4 GiB more) break it.
  MemoryConfig c = plan(8, true, Recompute::kSelective);
  const MemoryEstimate e = estimate_memory(gpt3_175b(), c, GiB(80));
  CHECK(e.oom);
  CHECK(e.breaking_part == "gradients (fp32)");
  CHECK(e.largest_part.rfind("optimizer state", 0) == 0);
  Bytes sum;
  for (const MemoryPart& p : e.parts) sum += p.size;
  CHECK(e.peak == sum);
  CHECK(e.capacity == GiB(80));
  CHECK(part(e, "framework overhead").size == GiB(2));
  // Narayanan et al.'s layout (t = 8, p = 16, d = 8) with the distributed optimizer, full recompute,
  // 1F1B: 6 layers per stage, P = 6 · ((12h² + 7h)/8 + 6h) + V·h/8 + s·h = 1,359,461,376 + 78,643,200 +
  // 25,165,824 = 1,463,270,400 parameters per rank on stage 0. Sequence-parallel, s·b·h/t = 3,145,728:
  //   weights 2 B · P = 2,926,540,800;  fp32 gradients 4 B · P = 5,853,081,600;  Adam 12/d = 1.5 B · P =
  //   2,194,905,600 (7.5 B/param, 10.22 GiB of model states);  layer inputs 2 B · 3,145,728 x 6 layers x 16
  //   micro-batches in flight (1F1B, p = 16) = 603,979,776;  the recomputed layer's activations (Korthikanti
  //   TP + SP, s·b·h·(34 + 5as/h)/t = 3,145,728 x 114) = 358,612,992;  embedding dropout masks 1 B x 3,145,728 x
  //   16 = 50,331,648;  framework overhead 2 GiB = 2,147,483,648. Peak 14,134,936,064 B = 13.164 GiB: fits.
  c.pp = 16;
  c.dp = 8;
  c.micro_batches = 192;
  c.recompute = Recompute::kFull;
  c.sharding = Sharding::kOptimizer;
  const MemoryEstimate fits = estimate_memory(gpt3_175b(), c, GiB(80));
  CHECK(!fits.oom);
  CHECK(fits.breaking_part.empty());
  CHECK(part(fits, "weights").size.raw() == 2926540800.0);
  CHECK(part(fits, "gradients").size.raw() == 5853081600.0);
  CHECK(part(fits, "optimizer state").size.raw() == 2194905600.0);
  CHECK(part(fits, "activations (6 layers x 16").size.raw() == 603979776.0);
  CHECK(part(fits, "activations of the layer being recomputed").size.raw() == 358612992.0);
  CHECK(part(fits, "embedding dropout masks").size.raw() == 50331648.0);
  CHECK(fits.peak.raw() == 14134936064.0);
}

TEST_CASE("the DDP path keeps its composition: 22 B per parameter + one micro-batch of activations") {
  // The test_ddp model (l=2, h=1024, a=16, f=4h, V=51200, s=1024, b=4), bf16: P = 78,671,872;
  // weights 4 + grads 4 + Adam 8 + DDP copy 4 (dp > 1) + autocast 2 = 22 B → 1,730,781,184 B.
  // Activations of the fp32 model run in torch.autocast (sbh = 4,194,304, a·s²·b = 67,108,864): per layer
  // sbh·38 (Korthikanti's 34 with the two norm inputs fp32: + 2·2) + 7·a·s²·b (fp32 softmax output 4, dropout mask
  // 1, the 16-bit copy ·V reads 2) = 159,383,552 + 469,762,048 = 629,145,600, × 2 layers, + embedding dropout sbh
  // 4,194,304 + output layer 4·sbh·(1 + V/h) = 855,638,016 + the final norm's fp32 input 2·sbh = 8,388,608
  // → 2,126,512,128 B (the 16-bit count, sbh·34 + 5·a·s²·b per layer and no final-norm term, was 1,816,133,632).
  // Framework overhead 2 GiB = 2,147,483,648 B, as on the Megatron and ZeRO paths.
  const double overhead = 2147483648.0;
  Job job;
  job.model = ModelSpec{"small", 2, 1024, 16, 4096, 51200, 1024};
  job.parallel.micro_batch = 4;
  job.parallel.dp = 2;
  calibrate::GpuPerformance gpu;
  gpu.memory_capacity = GiB(80);
  const MemoryEstimate e = estimate_ddp_memory(job, gpu);
  CHECK(e.peak.raw() == doctest::Approx(1730781184.0 + 2126512128.0 + overhead).epsilon(1e-12));
  CHECK(!e.oom);
  // With F.scaled_dot_product_attention's flash kernel the s² terms go: per layer sbh·38 + the fp32 row statistics
  // 4·a·s·b = 159,383,552 + 262,144 = 159,645,696, × 2 layers → 319,291,392; with the same embedding, output and
  // final-norm terms (868,220,928) → 1,187,512,320 B.
  job.parallel.attention = AttentionKernel::kFlash;
  CHECK(estimate_ddp_memory(job, gpu).peak.raw() ==
        doctest::Approx(1730781184.0 + 1187512320.0 + overhead).epsilon(1e-12));
  job.parallel.attention = AttentionKernel::kExplicit;
  // fp32 (e = 4, no autocast copies: 20 B/param = 1,573,437,440 B). Per layer sbh·(32·2 + 2) +
  // a·s²·b·(2·4 + 1) = 276,824,064 + 603,979,776 = 880,803,840, × 2; embedding 2·sbh = 8,388,608;
  // output 8·sbh·51 = 1,711,276,032 → activations 3,481,272,320 B.
  job.training.precision = Precision::kFP32;
  CHECK(estimate_ddp_memory(job, gpu).peak.raw() ==
        doctest::Approx(1573437440.0 + 3481272320.0 + overhead).epsilon(1e-12));
  // The optimizer decides its state (formulas.md 2.6): SGD with momentum 4 B, plain SGD none. fp32, dp 2:
  // 20 − 8 + 4 = 16 B → 1,258,749,952 B; 20 − 8 = 12 B → 944,062,464 B.
  job.training.optimizer = Optimizer::kSgdMomentum;
  CHECK(estimate_ddp_memory(job, gpu).peak.raw() ==
        doctest::Approx(1258749952.0 + 3481272320.0 + overhead).epsilon(1e-12));
  job.training.optimizer = Optimizer::kSgd;
  CHECK(estimate_ddp_memory(job, gpu).peak.raw() ==
        doctest::Approx(944062464.0 + 3481272320.0 + overhead).epsilon(1e-12));
  // At dp 1 there is nothing to all-reduce: no bucket copy (the graph makes none): 12 − 4 = 8 B.
  job.parallel.dp = 1;
  CHECK(estimate_ddp_memory(job, gpu).peak.raw() ==
        doctest::Approx(629374976.0 + 3481272320.0 + overhead).epsilon(1e-12));
}

TEST_CASE(
    "Megatron with 16-bit gradients keeps the optimizer's fp32 copy, and explicit attention expands grouped K/V") {
  // HALF_GRADIENTS under Megatron: Float16OptimizerWithFloat16Params steps on main_grad.float(), an fp32 copy:
  // dist_optimizer.md's "fp16 param, fp16 grads" 20 B = 2 + 2 + 16 per parameter (4 + 16/d distributed).
  ParallelPlan p;
  p.tp = 1, p.pp = 1, p.dp = 8, p.micro_batch = 1, p.grad_accum = 1;
  TrainingJob tr;
  tr.precision = Precision::kFP16;
  tr.gradients = GradientDtype::k16Bit;
  const MemoryConfig c = megatron_memory_config(gpt3_175b(), p, tr, 0);
  CHECK(c.gradients == GradientDtype::k16BitFp32Copy);
  CHECK(model_state_bytes(c.optimizer, c.precision, c.gradients, c.sharding, 8).total() == 20);
  p.distributed_optimizer = true;
  const MemoryConfig d = megatron_memory_config(gpt3_175b(), p, tr, 0);
  CHECK(model_state_bytes(d.optimizer, d.precision, d.gradients, d.sharding, 8).total() == 4 + 16.0 / 8);
  // fp32 gradients stay 18 B.
  tr.gradients = GradientDtype::kFp32;
  CHECK(megatron_memory_config(gpt3_175b(), p, tr, 0).gradients == GradientDtype::kFp32);

  // GPT-3 175B with 8 query groups (n_kv = 8 of 96 heads, d = 128), t = 8, no SP: explicit attention expands K and
  // V to all 96 heads (repeat_interleave) and keeps them, so a layer holds what multi-head attention holds. With
  // selective recompute the core's grouped inputs are kept: e·T·2(q − kv)/t = 2·2048·2·(12288 − 1024)/8 =
  // 11,534,336 B per layer less.
  ModelSpec gqa = gpt3_175b();
  gqa.kv_heads = 8;
  const double full = layer_activation_bytes(gpt3_175b(), 0, plan(8, false, Recompute::kNone)).raw();
  const double grouped = layer_activation_bytes(gqa, 0, plan(8, false, Recompute::kNone)).raw();
  CHECK(full == grouped);  // expanded: the same K and V as multi-head attention
  const double sel_full = layer_activation_bytes(gpt3_175b(), 0, plan(8, false, Recompute::kSelective)).raw();
  const double sel_gqa = layer_activation_bytes(gqa, 0, plan(8, false, Recompute::kSelective)).raw();
  CHECK(sel_full - sel_gqa == 2.0 * 2048 * 2 * (12288 - 1024) / 8);
}
