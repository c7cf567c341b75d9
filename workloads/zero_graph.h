// The task graph of one optimizer step under ZeRO-style sharded data parallelism: PyTorch FSDP
// (FULL_SHARD = stage 3, SHARD_GRAD_OP = stage 2, HYBRID_SHARD) and DeepSpeed ZeRO stages 1–3
// (Rajbhandari et al. 2020), on the job's data-parallel ranks (no model parallelism).
//
// Sharding group: all d ranks, or with hybrid sharding the job's ranks of one node (d_s = GPUs of the
// job per node); replicas of a shard (ranks with the same index in other nodes) all-reduce it.
// Units: FSDP wraps each transformer block (auto_wrap_policy on the block class); the root unit holds
// the embeddings, the final norm and the output layer. Per micro-batch:
//   stage 3 — forward: all-gather each unit's 16-bit parameters before its first kernel, on an
//     "fsdp-allgather" stream, at most two units ahead (FSDP's limit_all_gathers rate limiter: a unit's
//     all-gather waits until the forward of the unit two before it ended); the root unit is gathered
//     first and kept until the backward ends (FSDP does not reshard the root after forward).
//     Backward: the non-root units, resharded after their forward, are all-gathered again in reverse
//     order (BACKWARD_PRE prefetch: one unit ahead); after each unit's backward its gradients are
//     reduce-scattered on the "dp-comm" stream (and, with hybrid sharding, the shard all-reduced across
//     nodes). Communication volume per step: 2Ψ all-gathered + Ψ reduce-scattered = 3Ψ against DDP's
//     2Ψ (Rajbhandari et al. §7).
//   stage 2 (FSDP SHARD_GRAD_OP) — the forward all-gathers, all issued at the micro-batch's start (the rate
//     limiter waits on the events of frees, and SHARD_GRAD_OP frees nothing in the forward), parameters kept
//     through the backward; reduce-scatter per unit.
//   Every micro-batch after the first starts when the previous one's reductions have ended (FSDP's
//   post-backward final callback, ZeRO-3's gradient epilogue), its all-gathers after the compute stream.
//   stages 1–2 (DeepSpeed) — parameters stay whole on every rank; after the backward (DeepSpeed's
//     overlap_comm defaults to false, so on the compute stream: the next forward waits) the gradients are
//     reduce-scattered in reduce_bucket_size buckets (5e8 elements) — stage 1 after the last micro-batch
//     only (whole gradients accumulate), stage 2 after every micro-batch (partitioned gradients cannot hold
//     a micro-batch's whole gradients; DeepSpeed's engine: "ZeRO stage >= 2 communicates during non
//     gradient accumulation boundaries as well") — and, after the optimizer, the updated 16-bit parameters
//     all-gathered (allgather_bucket_size 5e8 elements).
// Kernels: the op lists of workloads/transformer_ops.h for the whole model on one rank (OpConfig: tp 1,
// every layer, embedding and head) with the plan's recomputation and attention kernel (zero_op_config()), as
// eager PyTorch runs them in the training dtype (OpConfig::eager without autocast: FSDP and DeepSpeed wrap the
// same eager nn.Module DDP trains, so the attention's scale, mask, softmax and dropout, the dropout and residual
// add and the loss run unfused; MixedPrecision(param_dtype) and DeepSpeed's bf16/fp16 engines hold 16-bit
// parameters, so there is no fp32 residual stream and no casts).
// Activation checkpointing (llm-foundry's `activation_checkpointing: true` wraps every block in
// checkpoint_wrapper inside its FSDP unit; DeepSpeed's checkpoint_activations) is recompute FULL: each block's
// forward re-runs right before its backward — the recomputed ops keep their "L<i>." prefix, so they belong to
// block i's unit and run after the unit's backward all-gather, as the checkpointed forward does inside FSDP's
// pre-backward hook. Per micro-batch the compute grows by one forward of the blocks: 6 → 8 units of
// 2·N_block·T GEMM FLOPs (+1/3 of the blocks' fwd + bwd). FlashAttention (flash_attention: true; MPT's
// attn_impl flash/triton) fuses the attention core (no s² bytes, same FLOPs).
// Gradients and parameters travel in the training precision (FSDP MixedPrecision(param_dtype,
// reduce_dtype) = bf16; DeepSpeed communication_data_type = the model's). The optimizer steps each
// rank's 1/d_s shard of fp32 master weights, fp32 gradients and Adam states (no 16-bit copy to write).
#pragma once

#include <cstdint>
#include <string>

#include "sim/task_graph.h"
#include "workloads/ddp_graph.h"
#include "workloads/memory_model.h"
#include "workloads/scenario.h"
#include "workloads/transformer_ops.h"

namespace clustersim::workloads {

class CollectiveEngine;

inline constexpr const char* kFsdpAllGatherStream = "fsdp-allgather";

JobGraph build_zero_job(const Scenario& scenario, const Job& job, sim::TaskGraph& graph, CollectiveEngine& collectives);

// The op configuration of a rank: micro-batch, precision, the plan's recompute and attention kernel,
// tp 1, the whole model (embedding and head on).
OpConfig zero_op_config(const Job& job);

// The FSDP unit of an op: "L<i>." ops belong to block i (unit i + 1), everything else to the root unit 0.
std::uint32_t zero_unit_of(const std::string& op_name);

// Ranks sharing one shard group (all of the job, or one node's with hybrid sharding).
std::uint32_t zero_shard_ranks(const Scenario& scenario, const Job& job);

// Memory per GPU: ZeRO model states (2 + 2 + 12 B per parameter with mixed-precision Adam, sharded by
// stage over the shard group: Rajbhandari et al.'s 16Ψ, 4Ψ + 12Ψ/d, 2Ψ + 14Ψ/d, 16Ψ/d), one micro-batch
// of activations (workloads/memory_model.h with the plan's recompute and attention kernel: with full
// recompute only each block's input e·T·h plus one block's working set), for stage 3 the gathered
// parameters of the two largest units in flight, and the framework overhead.
MemoryEstimate estimate_zero_memory(const Scenario& scenario, const Job& job);

}  // namespace clustersim::workloads
