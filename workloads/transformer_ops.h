// The operators of one training step of a decoder-only transformer (workloads/model_spec.h: dense
// GPT, LLaMA-style GQA/SwiGLU/RMSNorm, MoE), in execution order, per GPU of a tensor-parallel group,
// with their FLOPs, HBM bytes, GEMM shapes and the parameters whose gradients they produce.
//
// FLOPs (Narayanan et al. 2021, SC'21 §5.1, generalised): per layer forward, micro-batch B, sequence
// s, hidden h, heads a, KV heads n_kv, head width d, FFN width f, T = B·s tokens:
//   QKV projection 2·T·h·(a + 2·n_kv)·d, attention scores 2·B·a·s²·d, attention over values
//   2·B·a·s²·d, output projection 2·T·a·d·h, MLP 2·T·h·f·(2, or 3 when gated), LM head 2·T·h·V.
// A GEMM Y = X·W (X: M×K, W: K×N) has, in backward, a data gradient dX = dY·Wᵀ (M×N by N×K) and a
// weight gradient dW = Xᵀ·dY (K×M by M×N) of the same FLOPs each: backward = 2 × forward.
// For a GPT with f = 4h (a·d = h, n_kv = a) fwd + bwd sums to the model-FLOP closed form
// 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) (Korthikanti et al. 2022, formulas.md §2.2).
// MoE layers: a router GEMM T×h by h×E, and `top_k` routed copies of every token through experts of
// width f_e (balanced routing: each of the E experts gets T·top_k/E tokens) plus the shared experts
// on every token (a dense MLP of width shared_experts·f_e).
//
// Attention-core FLOP convention. The ops count the full s×s score matrix, as Narayanan et al.,
// Korthikanti et al. and PaLM's MFU (6N + 12·L·H·Q·T) do: AttentionFlops::kFullSquare, the
// convention of every MFU clustersim reports. A causal mask makes half of it unnecessary, and
// Megatron-LM's current `num_floating_point_operations` counts half (kCausalHalf); model_flops()
// takes the convention so a report can state which one it used (~3 % apart for GPT-3 at s = 2048,
// dominant at 128k). The time of an explicit-attention op is that of the full square (the kernels
// compute it). A flash kernel of a named implementation (OpConfig::flash_kernel FA2, FA3, TRITON) skips
// the masked tiles: compute_model.h times it over half the square; the unnamed one (kGeneric) is timed
// over the full square. Ring attention (context parallelism, below) leaves the masked half-blocks out of
// its steps' FLOPs (see the memory-model header for what flash changes).
//
// Activation recomputation (Korthikanti et al. 2022 §5): kSelective re-runs the attention core
// (scores, softmax+dropout, ·V — or the fused flash kernel) of a layer right before its backward;
// kFull re-runs the whole layer forward. Recomputed ops carry `recomputed = true`: hardware_flops()
// (HFU) counts them, model_flops() (MFU) does not. Full recompute gives the closed form
// 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) (Narayanan et al. 2021 §5.1). Selective recompute adds the
// attention core once: 72·B·s·l·h²·(1 + 2s/(9h) + V/(12·l·h)). Korthikanti et al. print
// 72·B·s·l·h²·(1 + s/(3h) + V/(12·l·h)), i.e. 24·B·s²·h attention FLOPs per layer — more than full
// recompute's 16·B·s²·h — so clustersim counts the ops and the tests show the difference.
//
// Attention kernel: kExplicit materialises the B·a·s² score matrix (softmax reads and writes it,
// a 1-byte dropout mask is stored); kFlash (FlashAttention, Dao et al. 2022) fuses scores, softmax
// and ·V into one kernel per pass with the same FLOPs, moving only Q, K, V, O (and dO, dQ, dK, dV
// in backward) plus fp32 row statistics (4·B·a·s bytes): no s² bytes.
//
// FP8 (Precision::kFP8; NVIDIA Transformer Engine's recipe, Micikevicius et al. 2022 "FP8 Formats for Deep
// Learning"): the three GEMMs of every linear layer of a transformer layer (QKV, projection, fc1, fc2, experts;
// not the router, the attention core or the LM head) run in FP8 (Op::fp8, timed at the FP8 peak by
// compute_model.h) and read 1-byte operands. Before each, TE casts the GEMM's 16-bit input (X in forward, dY in
// backward) to FP8 with its transpose: an element-wise "<linear>_cast" op of (e + 2) bytes per element. Weights,
// activations, gradients and every collective stay 16-bit (element_bytes(kFP8) = 2), so memory and traffic are
// those of BF16 — an upper bound on activation memory, as TE keeps some GEMM inputs for backward in FP8.
//
// Tensor parallelism of degree t (Shoeybi et al. 2019; Korthikanti et al. 2022 for sequence
// parallelism): the ops of ONE rank. Column-parallel QKV and fc1 (and the expert fc1) split N by t,
// row-parallel output projection and fc2 split K by t, attention heads and KV heads a/t and n_kv/t
// (the plan's validation requires t | a and t | n_kv), the LM head and the embedding are
// vocabulary-parallel (V/t). Norms, dropout and residual adds run on all T tokens without sequence
// parallelism and on T/t with it. The GEMMs always see all T tokens (SP all-gathers before them).
// The collectives (all-reduce, or reduce-scatter/all-gather with SP) are not ops here.
// Replicated parameters (norms, row-parallel biases, positions, router) count fully on every rank.
// Expert parallelism of degree ep puts E/ep experts on a rank; with balanced routing its experts
// process T·top_k tokens in total, so per-rank FLOPs do not change with ep. Routing imbalance
// (Megatron-Core MoE, token skew s and capacity factor c; expert_load() below): the busiest expert gets
// (1 + s)× its even share T·top_k/E of the EP group's tokens, the other E − 1 share the rest evenly,
// (1 − s/(E − 1))× each; with c > 0 an expert takes at most c× its even share and drops the rest. A rank's
// expert GEMMs and activation scale by OpConfig::expert_load, the mean over its E/ep experts of their
// (capped) loads: the rank holding the busiest expert is the slowest and sets the pace at the combine
// all-to-all. The dispatch and combine all-to-alls themselves are collectives, not ops: each rank sends
// T·top_k routed token copies of h elements (moe_alltoall_bytes()).
//
// Context parallelism of degree cp (Megatron-Core with TransformerEngine's ring attention, Liu et al. 2023
// "Ring Attention"; TE `AttnFuncWithCPAndKVP2P`): a rank holds s/cp tokens of every sequence, so every
// per-token op (GEMMs, norms, MLP, LM head) runs on T = B·s/cp tokens. With causal load balancing the
// sequence is cut into 2·cp chunks of c = s/(2·cp) tokens and rank i holds chunks i and 2cp−1−i. The
// attention core becomes cp fused-attention steps (the TE kernels are fused: no s² bytes): step 0 is the
// rank's own two chunks against their own K/V under the causal mask — of the (2c)² block, chunk i attends to
// itself causally (c²/2), chunk 2cp−1−i fully to chunk i (c²) and to itself causally (c²/2): 2c²; step j ≥ 1
// uses the K/V of rank i−j mod cp: when that rank is lower both local chunks attend fully to its first chunk
// and not to its second (2c·c), when higher only the local second chunk attends, fully, to both (c·2c):
// 2c² again. So every step is a 2c×c half-block — FLOPs 2·2·(B·a/t)·2c·d·c forward, twice that backward —
// and every rank does the same work, s²/(2cp) per head and sample: exactly the causal half of its s²/cp
// share. These ops carry `causal_skipped` (model_flops() doubles them for the full-square convention) and
// `ring_step` = j; the K/V exchange between ring neighbours (ring_kv_bytes()) is a collective the
// Megatron graph adds (megatron_graph.h).
//
// Bytes: GEMMs read both operands and write the result once (e·(MK + KN + MN) per matrix of the
// batch); element-wise ops read and write their tensors. Gradients of parameters are reported as
// parameter counts (their bytes depend on the framework; workloads/memory_model.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/units.h"
#include "workloads/model_spec.h"
#include "workloads/scenario.h"

namespace clustersim::workloads {

enum class OpKind { kGemm, kElementwise };

struct Op {
  std::string name;           // e.g. "L3.qkv.fwd", "L3.qkv.wgrad", "L3.attn_scores.recompute", "lm_head.dgrad"
  OpKind kind = OpKind::kGemm;
  Flops flops;
  Bytes bytes;                // HBM traffic
  double grad_parameters = 0; // parameters whose gradient is complete when this op ends
  // GEMM shape: `batch` independent [m x k]·[k x n] products, flops = 2·batch·m·n·k. 0 for
  // element-wise ops (and for hand-built GEMM ops without a shape: op_time then uses a cube).
  double m = 0, n = 0, k = 0, batch = 1;
  bool recomputed = false;     // forward work re-run in backward: in HFU, not in MFU
  bool attention_core = false; // scores / softmax / ·V, or the fused flash kernel
  bool fp8 = false;            // Precision::kFP8: an FP8 GEMM of a linear layer (compute_model.h); else BF16
  bool causal_skipped = false; // attention FLOPs without the causally masked blocks (ring attention)
  int ring_step = -1;          // context parallelism: the ring-attention step j (0 … cp−1), −1 otherwise
  // A fused attention kernel (flash or a ring-attention step): which implementation, and whether it is a
  // backward pass (compute_model.h times named implementations at their published rates).
  bool fused_attention = false;
  bool attention_backward = false;
  FlashKernel flash_kernel = FlashKernel::kGeneric;
  // PyTorch operations the framework's host thread dispatches for this op (CUDA kernels and the like), each
  // costing TrainingJob::host_dispatch_per_kernel of CPU time (host_dispatch.h); see dispatch_kernels().
  double kernels = 1;
};

// Routed-token load of a MoE layer's EP ranks, relative to the even share (see the header): the rank
// holding the busiest expert, and any other rank. `capacity_factor` 0 = dropless; `skew` 0 = uniform.
struct ExpertLoad {
  double busiest_rank = 1;
  double other_rank = 1;
};
ExpertLoad expert_load(const ModelSpec& model, std::uint32_t ep, double capacity_factor, double skew);

// Recompute and AttentionKernel are declared in workloads/scenario.h (the parallel plan names them).
enum class AttentionFlops { kFullSquare, kCausalHalf };

const char* to_string(Recompute r);
const char* to_string(AttentionKernel k);
const char* to_string(AttentionFlops c);

struct OpConfig {
  std::uint32_t micro_batch = 1;       // samples B
  Precision precision = Precision::kBF16;
  std::uint32_t tp = 1;                // tensor-parallel degree t: ops of one rank
  bool sequence_parallel = false;
  std::uint32_t ep = 1;                // expert-parallel degree (MoE)
  std::uint32_t cp = 1;                // context-parallel degree: s/cp tokens per rank, ring attention
  double expert_load = 1;              // this rank's routed tokens over the even share (expert_load())
  Recompute recompute = Recompute::kNone;
  AttentionKernel attention = AttentionKernel::kExplicit;
  FlashKernel flash_kernel = FlashKernel::kGeneric;  // the fused kernel's implementation (attention kFlash)
  // Pipeline stage: layers [first_layer, first_layer + layer_count); layer_count 0 = to the last.
  std::uint32_t first_layer = 0;
  std::uint32_t layer_count = 0;
  bool embedding = true;               // this stage holds the input embedding (first stage)
  bool head = true;                    // this stage holds final norm, LM head and loss (last stage)
  // PyTorch eager training of fp32 parameters under torch.autocast (the DDP, Horovod and DataParallel paths,
  // precision BF16, FP16 or FP8): the residual stream is fp32 (the embedding's output is fp32, and a 16-bit
  // branch added to it promotes), so the embedding and norms read and write 4-byte elements; each norm's output is
  // cast to 16 bits for the next linear layer by its own kernel (`ln1_cast`, `ln2_cast`, `final_ln_cast`: read 4,
  // write e; backward read e, write 4; under FP8 Transformer Engine makes the same copy before quantising). And the
  // kernels Megatron-LM fuses run unfused, with autocast's dtypes: the explicit attention's scale, mask, softmax
  // (to fp32), dropout and the cast ·V reads (FP16 29 B per score forward and 33 backward, BF16 37 and 41, against
  // 9 and 11 fused: LayerBuilder::eager_softmax_bytes in transformer_ops.cpp), the branch's dropout and the
  // promoting residual add (15 and 11 B per element against 7 and 5), and F.cross_entropy in fp32 (14 and 22 B per
  // 16-bit logit against Megatron's 38 and 14), each with its eager kernel count for the host dispatch.
  // autocast implies `eager`.
  bool autocast = false;
  // Eager PyTorch's unfused kernels without autocast (`eager` on, `autocast` off): a model trained in its own
  // dtype, as PyTorch FSDP's MixedPrecision(param_dtype) and DeepSpeed's bf16/fp16 engines run it, or in fp32
  // under DDP: the explicit attention's scale, mask, softmax and dropout as separate kernels in the activations'
  // dtype (8e + 1 B per score forward, 9e + 1 backward; 6e and 7e without dropout), dropout and residual add
  // unfused (5e + 1 forward, 2e + 1 backward: the add's gradient passes to both branches without a kernel), the
  // Hugging Face rotary embedding, and F.cross_entropy over fp32-upcast logits (Hugging Face's causal-LM loss
  // upcasts them) — no fp32 residual stream and no casts.
  bool eager = false;
};

// Kernels the host dispatches per op (Op::kernels), from the code of Megatron-LM's legacy GPT layer
// (ParallelTransformerLayer, as in Megatron-DeepSpeed; apex fused LayerNorm, TorchScript-fused bias-GeLU and
// bias-dropout-add, fused scale-mask-softmax). Forward, per op:
//   LayerNorm 1; QKV 2 (matmul, then `output + bias` in linear_with_grad_accumulation; 1 without biases);
//   attention scores 1 (baddbmm into the preallocated buffer, alpha = 1/sqrt(d)); softmax 2 (fused
//   scale-mask-softmax, attention dropout); ·V 2 (bmm, permute(2,0,1,3).contiguous()); FlashAttention 3 (the
//   kernel and the layout copies in and out); a ring-attention step 1; output projection, fc1, fc2 1 each
//   (matmul; the bias is skipped and fused into the next op); bias-dropout-add 1; bias-GeLU 1 (also SwiGLU
//   and the expert activations); router 3 (GEMM, softmax, top-k); MoE dispatch 4 (histogram, sort, gather,
//   copy), combine 3; grouped expert GEMM 1; embedding 4 (word and position lookups, add, dropout); LM
//   head 1; vocabulary-parallel cross entropy 12 (max, subtract, target mask and gather, exp, sum, log, mean
//   and their small helpers). A GPT layer forward: 1 + 2 + 1 + 2 + 2 + 1 + 1 + 1 + 1 + 1 + 1 + 1 = 15.
// Backward: autograd runs about two kernels per forward kernel (data and weight gradients of a GEMM plus the
// bias-gradient reduction and the main_grad accumulation; element-wise ops: their gradient and the
// reduction or residual add that follows), so an element-wise `.bwd` op is 2× its forward count and a
// GEMM's `.dgrad` and `.wgrad` are 1× each: a GPT layer backward is 30. A recomputed forward repeats the
// forward's kernels. Optimizer step 20 (apex multi-tensor unscale, L2 norm, Adam and copy launches over
// chunks of up to 110 tensors, the inf check and the norm's host sync). The TP and DP collectives the graphs
// add are one kernel each (host_dispatch.h).
double dispatch_kernels(const std::string& name, bool biases);

// The forward pass of one micro-batch: embedding, layers, final norm, LM head, loss (as the
// config's stage slice selects).
std::vector<Op> forward_ops(const ModelSpec& model, const OpConfig& config);
// The backward pass, in execution order (loss → LM head → layers in reverse, each preceded by its
// recomputed forward ops → embedding). A tied embedding's gradient is complete only after the
// embedding's backward; on a last stage without the embedding the LM head holds the tied copy.
std::vector<Op> backward_ops(const ModelSpec& model, const OpConfig& config);
// Whole model on one GPU, no recomputation, explicit attention.
std::vector<Op> forward_ops(const ModelSpec& model, std::uint32_t micro_batch, Precision precision);
std::vector<Op> backward_ops(const ModelSpec& model, std::uint32_t micro_batch, Precision precision);
// Whether eager PyTorch trains `precision` under torch.autocast (OpConfig::autocast): every precision whose
// activations are below fp32 (BF16, FP16, FP8).
bool eager_autocast(Precision precision);
// The same as eager PyTorch runs it (the DDP, Horovod and DataParallel paths): OpConfig::eager, and
// OpConfig::autocast where eager_autocast(precision).
// `attention` kFlash: F.scaled_dot_product_attention's fused kernel (`flash_kernel` names its implementation).
std::vector<Op> eager_forward_ops(const ModelSpec& model, std::uint32_t micro_batch, Precision precision,
                                  AttentionKernel attention = AttentionKernel::kExplicit,
                                  FlashKernel flash_kernel = FlashKernel::kGeneric);
std::vector<Op> eager_backward_ops(const ModelSpec& model, std::uint32_t micro_batch, Precision precision,
                                   AttentionKernel attention = AttentionKernel::kExplicit,
                                   FlashKernel flash_kernel = FlashKernel::kGeneric);

// Context parallelism: K and V of one rank's s/cp tokens, the message of one ring-attention step:
// 2·B·(s/cp)·(n_kv/t)·d·e bytes.
Bytes ring_kv_bytes(const ModelSpec& model, const OpConfig& config);
// Expert parallelism: one rank's send buffer of a dispatch (or combine) all-to-all, the tokens it routes:
// B·(s/cp)·top_k·h·e bytes — with sequence parallelism B·(s/cp)/t·top_k·h·e, the rank's own sequence shard
// (Megatron-Core's all-to-all dispatcher) — times `load` (the busiest receiver's expert_load()); (ep − 1)/ep
// of it leaves the rank.
Bytes moe_alltoall_bytes(const ModelSpec& model, const OpConfig& config, double load = 1);
// Expert parallelism with tensor parallelism (sequence parallelism on, as Megatron-LM requires): after the
// dispatch the TP group all-gathers the tokens its members received, so that each runs its 1/t slice of the
// experts' FFN on all of them, and reduce-scatters the experts' partial outputs before the combine (backward:
// the reverse pair). The total buffer of either: B·(s/cp)·top_k·h·e bytes, times `load`.
Bytes moe_tp_gather_bytes(const ModelSpec& model, const OpConfig& config, double load = 1);
// The fraction of routed token copies the experts compute: 1 when dropless; with a capacity factor c each
// expert takes at most c times its even share (expert_load's skewed loads, capped), the rest are dropped.
// The MFU numerator counts the expert FLOPs actually computed.
double routed_fraction_computed(const ModelSpec& model, double capacity_factor, double skew);

// Optimizer step over `parameters` (a rank's shard), memory-bound: per parameter it reads the gradient
// (`gradient_bytes`), reads and writes the fp32 master weight (8 B) and each fp32 state buffer (8 B each:
// Adam's m and v, SGD-momentum's buffer, none for plain SGD), and with 16-bit training weights writes
// their 16-bit copy (2 B). PyTorch AMP's Adam (fp32 weights and gradients): 4 + 8 + 16 = 28 B
// (torch.optim.AdamW, non-fused foreach); Megatron bf16 with fp32 main gradients: 4 + 8 + 16 + 2 = 30 B.
// FLOPs per parameter: Adam 12, SGD with momentum 4, SGD 2.
// A device-to-device copy of `size` bytes (reads and writes each byte), timed as an element-wise op.
Op copy_op(std::string name, Bytes size);

Op optimizer_op(double parameters, Optimizer optimizer = Optimizer::kAdam, double gradient_bytes = 4,
                bool half_weight_copy = false);

// GEMM FLOPs of one micro-batch, fwd + bwd, per rank of the config, without recomputation: the
// MFU numerator (PaLM App. B). `convention` says how the attention core is counted.
Flops model_flops(const ModelSpec& model, const OpConfig& config,
                  AttentionFlops convention = AttentionFlops::kFullSquare);
// The same with the recomputed forward ops: the HFU numerator.
Flops hardware_flops(const ModelSpec& model, const OpConfig& config,
                     AttentionFlops convention = AttentionFlops::kFullSquare);
// Whole model, one GPU, micro-batch B, full-square attention (the convention MFU uses here); the routed
// experts' FLOPs times `routed_fraction` (routed_fraction_computed(): what the experts compute when a
// capacity factor drops tokens).
Flops model_flops(const ModelSpec& model, std::uint32_t micro_batch, double routed_fraction = 1);

}  // namespace clustersim::workloads
