#include "workloads/memory_model.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>

namespace clustersim::workloads {

const char* to_string(Optimizer o) {
  switch (o) {
    case Optimizer::kSgd: return "SGD";
    case Optimizer::kSgdMomentum: return "SGD with momentum";
    case Optimizer::kAdam: return "Adam";
  }
  return "?";
}

const char* to_string(GradientDtype g) {
  switch (g) {
    case GradientDtype::kFp32: return "fp32";
    case GradientDtype::k16Bit: return "16-bit";
    case GradientDtype::k16BitFp32Copy: return "16-bit with an fp32 copy";
  }
  return "?";
}

const char* to_string(Sharding s) {
  switch (s) {
    case Sharding::kNone: return "none";
    case Sharding::kOptimizer: return "optimizer state (ZeRO-1 / distributed optimizer)";
    case Sharding::kOptimizerGradients: return "optimizer state and gradients (ZeRO-2)";
    case Sharding::kAll: return "optimizer state, gradients and weights (ZeRO-3)";
  }
  return "?";
}

MemoryEstimate memory_verdict(std::vector<MemoryPart> parts, Bytes capacity) {
  MemoryEstimate est;
  est.parts = std::move(parts);
  est.capacity = capacity;
  Bytes largest;
  for (const MemoryPart& p : est.parts) {
    est.peak += p.size;
    if (p.size > largest) {
      largest = p.size;
      est.largest_part = p.name;
    }
    if (est.breaking_part.empty() && est.peak > capacity) est.breaking_part = p.name;
  }
  est.oom = est.peak > est.capacity;
  return est;
}

MemoryEstimate estimate_ddp_memory(const Job& job, const calibrate::GpuPerformance& gpu) {
  const ModelSpec& m = job.model;
  const double psi = m.parameter_count();
  const bool mixed = sixteen_bit(job.training.precision);
  const double s = m.seq_len, b = job.parallel.micro_batch, h = m.hidden, V = m.vocab;
  const double e = element_bytes(job.training.precision);
  // Korthikanti's byte counts assume 16-bit activations and 1-byte masks; the 16-bit parts scale by
  // e/2 for fp32 training. Per layer this is layer_activation_bytes() on one GPU (for a GPT:
  // s·b·h·((34 − 2)·e/2 + 2) + a·s²·b·(2·e + 1); under autocast s·b·h·38 + 7·a·s²·b); the embedding and output
  // terms scale as a whole, and under autocast the final norm's input is fp32 (2·s·b·h more).
  const double scale = e / 2.0;
  MemoryConfig one_gpu;
  one_gpu.micro_batch = job.parallel.micro_batch;
  one_gpu.precision = job.training.precision;
  one_gpu.autocast = eager_autocast(job.training.precision);  // as the DDP path's ops (eager_forward_ops)
  one_gpu.attention = job.parallel.attention;  // F.scaled_dot_product_attention's flash kernel: no s² term
  Bytes layers;
  for (std::uint32_t l = 0; l < m.layers; ++l) layers += layer_activation_bytes(m, l, one_gpu);
  const double embedding_mask = m.dropout ? s * b * h * scale : 0.0;  // the embedding's dropout mask
  const double final_norm = one_gpu.autocast ? 2 * s * b * h : 0.0;   // its fp32 input beyond the 16-bit count
  const double activations = layers.raw() + embedding_mask + 4 * s * b * h * (1 + V / h) * scale + final_norm;

  // The optimizer's own state beside the fp32 weights (formulas.md 2.6): Adam m and v 8 B, momentum 4 B, plain
  // SGD none: model_state_bytes of fp32 training, unsharded (the fp32 weights are the master copy: autocast
  // only casts them, so no second fp32 copy is added).
  const Optimizer optimizer = job.training.optimizer;
  const double moments =
      model_state_bytes(optimizer, Precision::kFP32, GradientDtype::kFp32, Sharding::kNone, 1).optimizer;
  std::vector<MemoryPart> parts = {
      {"weights (fp32)", bytes(4 * psi)},
      {"gradients (fp32)", bytes(4 * psi)},
      {std::string("optimizer state (") +
           (optimizer == Optimizer::kAdam          ? "Adam m, v fp32"
            : optimizer == Optimizer::kSgdMomentum ? "SGD momentum fp32"
                                                   : "SGD: none") +
           ")",
       bytes(moments * psi)},
  };
  // DDP copies the gradients into its buckets only where there is something to all-reduce (the graph skips the
  // copies at dp 1, and so does the memory).
  if (job.parallel.dp > 1) parts.push_back({"DDP gradient buckets (fp32 copy)", bytes(4 * psi)});
  if (mixed) parts.push_back({"autocast weight copies (16-bit)", bytes(2 * psi)});
  parts.push_back({"activations (one micro-batch)", bytes(activations)});
  // The same allowance as the Megatron and ZeRO paths, so that their headroom and OOM verdicts compare.
  parts.push_back({"framework overhead (runtime context, library workspaces, collective buffers, fragmentation)",
                   MemoryConfig{}.framework_overhead});
  return memory_verdict(std::move(parts), gpu.memory_capacity);
}

ModelStateBytes model_state_bytes(Optimizer optimizer, Precision weights, GradientDtype gradients, Sharding sharding,
                                  double shards) {
  assert(shards >= 1 && "at least one rank shares the states");
  const bool half = sixteen_bit(weights);
  ModelStateBytes out;
  out.weights = half ? 2 : 4;
  out.gradients = (half && gradients != GradientDtype::kFp32) ? 2 : 4;
  double moments = 0;
  switch (optimizer) {
    case Optimizer::kSgd: moments = 0; break;
    case Optimizer::kSgdMomentum: moments = 4; break;
    case Optimizer::kAdam: moments = 8; break;
  }
  out.optimizer = (half ? 4 : 0) + moments + (half && gradients == GradientDtype::k16BitFp32Copy ? 4 : 0);
  if (sharding != Sharding::kNone) out.optimizer /= shards;
  if (sharding == Sharding::kOptimizerGradients || sharding == Sharding::kAll) out.gradients /= shards;
  if (sharding == Sharding::kAll) out.weights /= shards;
  return out;
}

double in_flight_micro_batches(PipelineSchedule schedule, std::uint32_t pp, std::uint32_t stage,
                               std::uint32_t micro_batches, std::uint32_t virtual_stages) {
  assert(stage < pp && "stage index within the pipeline");
  const double p = pp, i = stage, m = micro_batches, v = virtual_stages;
  switch (schedule) {
    case PipelineSchedule::kGPipe:
      return m;
    case PipelineSchedule::kInterleaved:
      if (virtual_stages >= 2) {
        // Megatron's warm-up forward passes of chunks, plus the one of the first steady 1F1B step.
        const double chunk_passes = 2 * (p - i - 1) + (v - 1) * p + 1;
        return std::min(chunk_passes, m * v) / v;
      }
      [[fallthrough]];
    case PipelineSchedule::kOneFOneB:
      return std::min(p - i, m);
  }
  return m;
}

double chunk_in_flight_micro_batches(PipelineSchedule schedule, std::uint32_t pp, std::uint32_t stage,
                                     std::uint32_t micro_batches, std::uint32_t virtual_stages, std::uint32_t chunk) {
  if (schedule != PipelineSchedule::kInterleaved || virtual_stages < 2)
    return in_flight_micro_batches(schedule, pp, stage, micro_batches, virtual_stages);
  assert(chunk < virtual_stages && "chunk index within the stage's chunks");
  const std::uint64_t p = pp, v = virtual_stages, passes = std::uint64_t(micro_batches) * v;
  const auto in_flight = static_cast<std::uint64_t>(
      std::llround(in_flight_micro_batches(schedule, pp, stage, micro_batches, virtual_stages) * double(v)));
  const std::uint64_t warmup = std::min(passes, in_flight > 0 ? in_flight - 1 : 0);
  auto forward_chunk = [&](std::uint64_t k) { return (k % (p * v)) / p; };
  auto backward_chunk = [&](std::uint64_t k) { return v - 1 - (k % (p * v)) / p; };
  std::uint64_t held = 0, most = 0;
  for (std::uint64_t k = 0; k < warmup; ++k) held += forward_chunk(k) == chunk ? 1 : 0;
  most = held;
  for (std::uint64_t k = 0; k + warmup < passes; ++k) {
    held += forward_chunk(k + warmup) == chunk ? 1 : 0;
    most = std::max(most, held);
    held -= backward_chunk(k) == chunk ? 1 : 0;
  }
  return double(most);
}

std::vector<std::uint32_t> stage_layers(const ModelSpec& model, std::uint32_t pp, std::uint32_t stage,
                                        std::uint32_t virtual_stages) {
  const std::uint32_t v = std::max(virtual_stages, 1u), chunks = pp * v;
  const std::uint32_t base = model.layers / chunks, extra = model.layers % chunks;
  std::vector<std::uint32_t> out;
  for (std::uint32_t j = 0; j < v; ++j) {
    const std::uint32_t c = j * pp + stage;
    const std::uint32_t start = c * base + std::min(c, extra), size = base + (c < extra ? 1 : 0);
    for (std::uint32_t l = start; l < start + size; ++l) out.push_back(l);
  }
  return out;
}

namespace {

std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// One rank's share of an MLP of full width f: column-parallel fc1 (gate+up), row-parallel fc2
// whose bias every rank keeps.
double mlp_rank_parameters(const ModelSpec& m, double f, double t) {
  const double h = m.hidden, b = m.biases ? 1 : 0, g = m.gated_mlp ? 2 : 1;
  return (h + b) * g * f / t + f * h / t + b * h;
}

}  // namespace

StageParameters stage_parameters(const ModelSpec& m, const MemoryConfig& c) {
  const double t = c.tp, h = m.hidden, b = m.biases ? 1 : 0;
  const double q = double(m.heads) * m.d_head(), kv = double(m.n_kv()) * m.d_head();
  const double attention = (h + b) * (q + 2 * kv) / t + q * h / t + b * h;
  StageParameters out;
  for (std::uint32_t l : stage_layers(m, c.pp, c.stage, c.virtual_stages)) {
    out.dense += attention + 2 * m.norm_parameters();
    if (m.is_moe_layer(l)) {
      out.dense += m.router_parameters();
      if (m.shared_experts > 0) out.dense += mlp_rank_parameters(m, double(m.shared_experts) * m.expert_ffn(), t);
      out.expert += double(m.experts) / c.ep * mlp_rank_parameters(m, m.expert_ffn(), t);
    } else {
      out.dense += mlp_rank_parameters(m, m.ffn_hidden, t);
    }
  }
  const double word = double(m.vocab) * h / t;
  if (c.stage == 0) out.dense += word + (m.position == Position::kLearned ? double(m.seq_len) * h : 0.0);
  if (c.stage + 1 == c.pp) out.dense += m.norm_parameters() + ((!m.tied_embeddings || c.pp > 1) ? word : 0.0);
  return out;
}

Bytes layer_activation_bytes(const ModelSpec& m, std::uint32_t layer, const MemoryConfig& c) {
  const double e = element_bytes(c.precision), t = c.tp, sp = c.sequence_parallel ? t : 1;
  const double cp = std::max(c.cp, 1u);
  const double T = double(c.micro_batch) * m.seq_len / cp, s = m.seq_len / cp, b = c.micro_batch, h = m.hidden;
  const double a = m.heads;
  const double q = a * m.d_head(), kv = double(m.n_kv()) * m.d_head(), g = m.gated_mlp ? 3 : 2;
  const double mask = m.dropout ? 1 : 0;  // ModelSpec::dropout: the masks exist only when trained with it
  const double residual = c.autocast ? 4 : e;  // the residual stream's element: fp32 under autocast
  if (c.recompute == Recompute::kFull) return bytes(residual * T * h / sp);
  // Kept whole unless sequence-parallel: norm inputs, QKV and MLP inputs, dropout masks.
  double whole = 2 * residual * T * h + e * T * h + e * T * h + 2 * mask * T * h;
  // Inside the tensor-parallel regions: Q, K, V, output-projection input, MLP internals. Explicit attention over
  // grouped K/V expands them to every query head first (Megatron-Core's DotProductAttention repeat_interleave,
  // Hugging Face's repeat_kv), and its matmuls keep the expanded copies; fused kernels and a recomputed core keep
  // the grouped ones.
  const bool expanded = c.attention != AttentionKernel::kFlash && cp == 1 && c.recompute != Recompute::kSelective;
  double split = e * T * (q + 2 * (expanded ? q : kv)) + e * T * q;
  double gathered = 0;  // whole on every TP rank, with or without sequence parallelism
  if (m.is_moe_layer(layer)) {
    const double routed = T * m.top_k * c.expert_load;
    whole += 4 * T * m.experts;
    gathered = e * routed * h;
    split += e * routed * m.expert_ffn() * g + e * T * double(m.shared_experts) * m.expert_ffn() * g;
  } else {
    split += e * T * m.ffn_hidden * g;
  }
  double attention = 0;
  if (c.attention == AttentionKernel::kFlash || cp > 1) {
    attention = 4 * a * s * b;  // fp32 softmax statistics per row (of the rank's s/cp rows)
  } else if (c.recompute != Recompute::kSelective) {
    // Softmax output, dropout mask, dropout output (·V's input; without dropout ·V reads the softmax output).
    // Under autocast softmax writes fp32, and ·V keeps the 16-bit copy autocast casts its input to.
    attention = (c.autocast ? 4 + mask + e : e + mask + mask * e) * a * s * s * b;
  }
  return bytes(whole / sp + gathered + split / t + attention / t);
}

MemoryConfig megatron_memory_config(const ModelSpec& model, const ParallelPlan& p, const TrainingJob& training,
                                    std::uint32_t stage) {
  MemoryConfig mc;
  mc.expert_load = expert_load(model, p.ep, p.moe_capacity_factor, p.moe_token_skew).busiest_rank;
  mc.tp = p.tp;
  mc.pp = p.pp;
  mc.stage = stage;
  mc.dp = p.dp;
  mc.cp = p.cp;
  mc.ep = p.ep;
  mc.sequence_parallel = p.sequence_parallel;
  mc.schedule = p.schedule;
  mc.micro_batch = p.micro_batch;
  mc.micro_batches = p.grad_accum;
  mc.virtual_stages = p.vp;
  mc.precision = training.precision;
  mc.recompute = p.recompute;
  mc.attention = p.attention;
  mc.optimizer = training.optimizer;
  // Megatron's float16 optimizer steps on fp32 gradients: with 16-bit main_grad buffers it makes an fp32 copy of them
  // (Float16OptimizerWithFloat16Params._copy_model_grads_to_main_grads, `main_grad.float()`; the distributed
  // optimizer per shard), the 20 B (4 + 16/d) of dist_optimizer.md's "fp16 param, fp16 grads" row.
  mc.gradients = training.gradients == GradientDtype::k16Bit ? GradientDtype::k16BitFp32Copy : training.gradients;
  mc.sharding = p.distributed_optimizer ? Sharding::kOptimizer : Sharding::kNone;
  return mc;
}

MemoryEstimate estimate_memory(const ModelSpec& m, const MemoryConfig& c, Bytes capacity) {
  assert(c.tp >= 1 && c.pp >= 1 && c.dp >= 1 && c.ep >= 1 && c.stage < c.pp && "a valid plan");
  const StageParameters params = stage_parameters(m, c);
  const double cp = std::max(c.cp, 1u);
  const double expert_shards = std::max(1.0, double(c.dp) / c.ep) * cp;
  const ModelStateBytes dense = model_state_bytes(c.optimizer, c.precision, c.gradients, c.sharding, c.dp * cp);
  const ModelStateBytes expert = model_state_bytes(c.optimizer, c.precision, c.gradients, c.sharding, expert_shards);
  const bool half = sixteen_bit(c.precision);

  std::vector<MemoryPart> parts;
  parts.push_back({std::string("weights (") + (half ? "16-bit" : "fp32") + ")",
                   bytes(params.dense * dense.weights + params.expert * expert.weights)});
  parts.push_back({std::string("gradients (") + to_string(c.gradients) + ")",
                   bytes(params.dense * dense.gradients + params.expert * expert.gradients)});
  parts.push_back({std::string("optimizer state (") + to_string(c.optimizer) + ", sharding: " + to_string(c.sharding) +
                       ")",
                   bytes(params.dense * dense.optimizer + params.expert * expert.optimizer)});
  if (c.ddp_bucket_copy) {
    parts.push_back({"communication buckets (DDP gradient copy)",
                     bytes(params.dense * dense.gradients + params.expert * expert.gradients)});
  }

  const std::vector<std::uint32_t> layers = stage_layers(m, c.pp, c.stage, c.virtual_stages);
  const double in_flight = in_flight_micro_batches(c.schedule, c.pp, c.stage, c.micro_batches, c.virtual_stages);
  Bytes one_pass;
  for (std::uint32_t l : layers) one_pass += layer_activation_bytes(m, l, c);
  parts.push_back({"activations (" + std::to_string(layers.size()) + " layers x " + short_number(in_flight) +
                       " micro-batches in flight" + (c.pp > 1 ? std::string(", ") + to_string(c.schedule) : "") + ")",
                   one_pass * in_flight});
  if (c.recompute == Recompute::kFull && !layers.empty()) {
    MemoryConfig whole = c;
    whole.recompute = Recompute::kNone;
    Bytes worst;
    for (std::uint32_t l : layers) worst = std::max(worst, layer_activation_bytes(m, l, whole));
    parts.push_back({"activations of the layer being recomputed", worst});
  }
  const double T = double(c.micro_batch) * m.seq_len / cp, sp = c.sequence_parallel ? double(c.tp) : 1.0;
  const std::uint32_t chunks = std::max(c.virtual_stages, 1u);
  if (c.stage == 0 && m.dropout) {
    const double first = chunk_in_flight_micro_batches(c.schedule, c.pp, c.stage, c.micro_batches, chunks, 0);
    parts.push_back({"embedding dropout masks", bytes(first * T * m.hidden / sp)});
  }
  if (c.stage + 1 == c.pp) {
    const double last =
        chunk_in_flight_micro_batches(c.schedule, c.pp, c.stage, c.micro_batches, chunks, chunks - 1);
    const double e = element_bytes(c.precision);
    parts.push_back({"output layer and loss (fp32 logits)",
                     bytes(last * (2 * e * T * m.hidden / sp + 4 * T * m.vocab / c.tp))});
  }
  parts.push_back({"framework overhead (runtime context, library workspaces, collective buffers, fragmentation)",
                   c.framework_overhead});
  return memory_verdict(std::move(parts), capacity);
}

}  // namespace clustersim::workloads
