// Peak memory per GPU: model states, activations, buffers and overhead, with an OOM verdict.
//
// Model states per parameter on a rank (bytes; formulas.md §2.6). Weights are 2 B (bf16/fp16) or
// 4 B (fp32/tf32). Gradients: fp32 accumulation (Megatron's main_grad, 4 B) or the weights' 16-bit
// dtype (2 B). Optimizer state: fp32 master weights when the weights are 16-bit (4 B), plus Adam's
// m and v (8 B) or SGD's momentum (4 B) or nothing (plain SGD); Megatron's float16 optimizer with
// 16-bit gradients also keeps an fp32 copy of them for the step (4 B, GradientDtype::k16BitFp32Copy).
// Hence (Adam): ZeRO's 16 = 2 + 2 + 12 (Rajbhandari et al. 2020 §3.1), Megatron's 18 = 2 + 4 + 12
// (bf16, fp32 grads), 20 = 2 + 2 + 16 (fp16 grads + fp32 copy), 16 = 4 + 4 + 8 (fp32)
// (`Megatron-LM docs/source/api-guide/dist_optimizer.md`). Sharding over the d data-parallel ranks
// (ZeRO stages; the distributed optimizer is stage 1): optimizer state /d, then gradients /d, then
// weights /d — so 6 + 12/d for Megatron's bf16 distributed optimizer, 4 + 12/d ZeRO-1,
// 2 + 14/d ZeRO-2, 16/d ZeRO-3. Expert parameters are sharded over the d/ep ranks that replicate them.
// With context parallelism of degree cp the cp ranks of a sequence hold the same weights, and Megatron
// shards over the data-and-context group: d stands for dp·cp (dense) and dp·cp/ep (experts).
//
// Parameters on a rank (tensor degree t, pipeline stage i of p, expert degree ep): the stage's layers
// (contiguous L/p, or with v virtual stages the chunks i, i+p, … of L/(p·v) layers), split as the
// per-rank ops (workloads/transformer_ops.h): column/row-parallel matrices /t, norms, row-parallel
// biases, positions and router replicated, E/ep experts; the first stage adds the vocabulary-parallel
// embedding V·h/t (+ s·h positions), the last the final norm and the output layer V·h/t (untied, or a
// tied copy when p > 1, as Megatron keeps one on the last stage).
//
// Activations per layer and micro-batch (Korthikanti et al. 2022 §4, Table 2; formulas.md §2.7),
// generalised to GQA, gated MLPs and MoE, e = bytes per activation element (2 for 16-bit), masks 1 B,
// T = s·b tokens, q = a·d, k = n_kv·d:
//   kept whole without sequence parallelism (/t with it): two norm inputs 2e·T·h, QKV input e·T·h,
//     MLP input e·T·h, two dropout masks 2·T·h                                    (= 10·sbh at e = 2)
//   split /t: Q, K, V e·T·(q + 2k), output-projection input e·T·q, MLP e·T·f·(2, or 3 gated)
//     — GeLU input and fc2 input; gate, up and their product —               (= 24·sbh for GPT)
//   split /t, attention matrices: softmax output e·a·s²·b, its dropout mask a·s²·b and output
//     e·a·s²·b                                                                     (= 5·a·s²·b)
// MoE layers replace the MLP part by the dispatched tokens e·T·top_k·h·λ, the experts' activations
// e·T·top_k·λ·f_e·(2|3)/t, the shared experts' e·T·S·f_e·(2|3)/t and fp32 router probabilities 4·T·E, λ the
// rank's routed-token load (MemoryConfig::expert_load: the busiest expert's rank sizes the peak). The
// dispatched tokens are whole on every TP rank even with sequence parallelism: the experts' TP group
// all-gathers them (megatron_graph.h).
// Selective recompute drops the s² terms (recomputed); FlashAttention stores none of them but keeps
// fp32 row statistics 4·a·s·b/t; without dropout (ModelSpec::dropout false, the scenario's model.dropout)
// the masks (2·T·h whole, a·s²·b and the embedding's) and the attention dropout output e·a·s²·b go. Full
// recompute keeps only each layer's input e·T·h (/t with SP) and, during a layer's backward, that
// one layer's activations (a part of its own here). For GPT-3 175B (s=2048, b=1, h=12288, a=96,
// t=8) this gives Korthikanti's 2.67 / 0.54 / 0.33 / 0.30 / 0.10 / 0.047 GiB per layer.
//
// Micro-batches in flight on stage i (Narayanan et al. 2021 §2.2; formulas.md §2.5): GPipe m;
// 1F1B min(p − i, m); interleaved 1F1B with v chunks Megatron's warm-up count
// (2·(p − i − 1) + (v − 1)·p + 1) chunk passes of L/(p·v) layers, i.e. p·(1 + (p − 1)/(p·v)) stage
// passes on stage 0, at most m. The first stage adds the embedding's dropout mask (T·h/t per
// micro-batch, Korthikanti's s·b·h·p/t), the last stage the output layer and loss
// 4·T·h(/t with SP) + 4·T·V/t bytes per micro-batch (fp32 logits; Korthikanti's 4·s·b·h/t·(1 + V/h)).
//
// Buffers and overhead: PyTorch DDP's gradient buckets are a second copy of the gradients
// (gradient_as_bucket_view=False) unless the gradients live in one contiguous buffer reduced in place
// (Megatron-LM DDP); `framework_overhead` stands for the CUDA context, cuBLAS/NCCL workspaces and
// communicator buffers and allocator fragmentation. Its default, 2 GiB, is an allowance, not a
// measurement: a CUDA context alone is about 0.3–0.6 GiB on A100/H100 with recent drivers, NCCL
// adds buffers per communicator (NCCL_BUFFSIZE 4 MiB per channel and peer), the caching allocator
// fragments; set it from `torch.cuda.mem_get_info` minus `memory_allocated` on the real system.
//
// Context parallelism (cp > 1): every activation term is per token and a rank holds s/cp tokens, so T =
// s·b/cp throughout; ring attention runs fused TransformerEngine kernels, so no s² term is stored, only the
// fp32 row statistics 4·a·(s/cp)·b/t (as FlashAttention): the activations shrink by cp.
//
// The report lists each part, the peak (their sum: model states and buffers live all the time,
// activations peak at the end of the warm-up), the capacity and an OOM verdict naming the part
// whose addition, in the listed order, first exceeds the capacity.
//
// estimate_ddp_memory() keeps the PyTorch-DDP-with-autocast composition of the DDP path: fp32
// weights (4), fp32 gradients (4), the optimizer's state (Adam m and v 8, SGD momentum 4, SGD 0), DDP bucket
// copy (4, where dp > 1), autocast's 16-bit weight copies (2), one micro-batch of activations (the layers as
// above on one GPU, embedding dropout s·b·h·e/2, output layer 4·s·b·h·(1 + V/h)·e/2), and the framework
// overhead of the other paths. Under autocast (16-bit precision) the activations are those of an fp32 model run
// in torch.autocast (MemoryConfig::autocast): per layer the two norm inputs are fp32 (2·2·s·b·h more than
// Korthikanti's 16-bit count) and the explicit attention keeps the fp32 softmax output and the 16-bit copy ·V
// reads ((4 + mask + 2)·a·s²·b against (2 + mask + 2·mask)); the final norm's input is fp32 too (2·s·b·h more).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workloads/pipeline_schedule.h"
#include "workloads/scenario.h"
#include "workloads/transformer_ops.h"

namespace clustersim::workloads {

struct MemoryPart {
  std::string name;
  Bytes size;
};

struct MemoryEstimate {
  std::vector<MemoryPart> parts;
  Bytes peak;
  Bytes capacity;
  bool oom = false;
  std::string largest_part;   // the part that contributes most
  std::string breaking_part;  // when OOM: the part whose addition first exceeds the capacity
};

// Sums the parts and gives the verdict.
MemoryEstimate memory_verdict(std::vector<MemoryPart> parts, Bytes capacity);

MemoryEstimate estimate_ddp_memory(const Job& job, const calibrate::GpuPerformance& gpu);

enum class Sharding { kNone, kOptimizer, kOptimizerGradients, kAll };  // ZeRO 0–3; kOptimizer = distributed optimizer

const char* to_string(Sharding s);

struct ModelStateBytes {
  double weights = 0, gradients = 0, optimizer = 0;  // bytes per parameter on one rank
  double total() const { return weights + gradients + optimizer; }
};

// Bytes per parameter with `shards` ranks sharing the sharded states (d, or d/ep for experts).
ModelStateBytes model_state_bytes(Optimizer optimizer, Precision weights, GradientDtype gradients, Sharding sharding,
                                  double shards);

struct MemoryConfig {
  std::uint32_t tp = 1;
  std::uint32_t pp = 1;
  std::uint32_t stage = 0;              // pipeline stage index i, 0 = first
  std::uint32_t dp = 1;
  std::uint32_t ep = 1;                 // expert parallelism, carved out of dp (ep | dp)
  std::uint32_t cp = 1;                 // context parallelism: s/cp tokens per rank
  bool sequence_parallel = false;
  double expert_load = 1;               // MoE: the rank's routed tokens over the even share (expert_load())
  Recompute recompute = Recompute::kNone;
  AttentionKernel attention = AttentionKernel::kExplicit;
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  std::uint32_t micro_batch = 1;        // samples b
  std::uint32_t micro_batches = 1;      // m per iteration (gradient accumulation steps)
  std::uint32_t virtual_stages = 1;     // v, interleaved schedule only
  Optimizer optimizer = Optimizer::kAdam;
  Precision precision = Precision::kBF16;       // weights and activations
  GradientDtype gradients = GradientDtype::kFp32;
  Sharding sharding = Sharding::kNone;          // distributed optimizer: kOptimizer
  bool ddp_bucket_copy = false;                 // PyTorch DDP's separate bucket copy of the gradients
  // PyTorch eager autocast around fp32 parameters (the DDP path, 16-bit precision): the residual stream stays fp32
  // (the embedding's output is fp32 and a 16-bit branch added to it promotes), so each norm keeps a 4-byte input,
  // and softmax runs in fp32: its saved output is 4 B per score, and the ·V product keeps its own 16-bit copy.
  bool autocast = false;
  Bytes framework_overhead = GiB(2);            // see the header
};

// Micro-batches whose activations stage `stage` holds at its peak, in passes through the stage's
// layers (fractional with interleaving).
double in_flight_micro_batches(PipelineSchedule schedule, std::uint32_t pp, std::uint32_t stage,
                               std::uint32_t micro_batches, std::uint32_t virtual_stages);

// The most micro-batches of one model chunk (0 .. virtual_stages − 1) that stage `stage` holds at once:
// what the embedding (chunk 0 of stage 0) and the output layer (the last chunk of the last stage) keep.
// Without interleaving, the stage's in_flight_micro_batches. Interleaved, Megatron's order: the k-th
// forward pass runs chunk (k mod p·v) / p, the k-th backward pass chunk v − 1 − (k mod p·v) / p, after
// in_flight − 1 warm-up forwards one forward and one backward alternate. The last stage's last chunk
// holds 1 (each of its forwards is followed by that micro-batch's backward); stage 0's chunk 0 can hold
// every micro-batch (p = 4, v = 2, m = 8: 8, against 5.5 passes on average per chunk).
double chunk_in_flight_micro_batches(PipelineSchedule schedule, std::uint32_t pp, std::uint32_t stage,
                                     std::uint32_t micro_batches, std::uint32_t virtual_stages, std::uint32_t chunk);

// Layers (0-based indices) held by a stage.
std::vector<std::uint32_t> stage_layers(const ModelSpec& model, std::uint32_t pp, std::uint32_t stage,
                                        std::uint32_t virtual_stages);

struct StageParameters {
  double dense = 0;   // replicated over all d data-parallel ranks
  double expert = 0;  // routed experts: replicated over d/ep ranks
  double total() const { return dense + expert; }
};
StageParameters stage_parameters(const ModelSpec& model, const MemoryConfig& config);

// Activations one micro-batch leaves for the backward of `layer` on one rank.
Bytes layer_activation_bytes(const ModelSpec& model, std::uint32_t layer, const MemoryConfig& config);

// The configuration of stage `stage` of a Megatron layout `plan` trained as `training` says: the plan's
// parallel degrees, schedule, recomputation and attention kernel, the job's precision, optimizer and gradient
// dtype, the distributed optimizer's sharding, and the routed-token load of the rank holding the busiest expert
// (what the Megatron graph simulates).
MemoryConfig megatron_memory_config(const ModelSpec& model, const ParallelPlan& plan, const TrainingJob& training,
                                    std::uint32_t stage);

// The peak of one rank of stage `config.stage`, against `capacity`.
MemoryEstimate estimate_memory(const ModelSpec& model, const MemoryConfig& config, Bytes capacity);

}  // namespace clustersim::workloads
