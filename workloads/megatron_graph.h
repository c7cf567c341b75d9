// The task graph of one optimizer step of Megatron-style parallelism (Shoeybi et al. 2019; Narayanan et al.
// 2021; Korthikanti et al. 2022; Megatron-Core context and expert parallelism), for a job of tp·cp·dp·pp
// ranks placed by RankLayout.
//
// Tensor parallelism: every GEMM of a layer is split t ways (column-parallel QKV and fc1, row-parallel
// projection and fc2; attention heads, the vocabulary-parallel embedding, LM head and loss split too),
// so a rank runs 1/t of their FLOPs and bytes. LayerNorm, dropout and residual adds are replicated —
// unless sequence parallelism splits them along the sequence (1/t each). Per layer the TP group runs two
// AllReduces of the b·s·h activation in the forward pass (after the attention projection and after fc2)
// and two in the backward pass (after the QKV and fc1 data gradients); with sequence parallelism each
// becomes a ReduceScatter plus an AllGather of the same total volume. They run on the compute streams of
// the TP group: Megatron waits for them before the next kernel.
// Pipeline parallelism: the layers are split evenly over pp·vp virtual stages (virtual stage = chunk·pp
// + stage); the first holds the embedding, the last the final norm, LM head and loss. Each stage runs its
// steps in the order of the schedule (pipeline_schedule.h); activations (forward) and their gradients
// (backward), b·s·h elements each, go to the neighbouring virtual stage as Send/Recv between the ranks of
// equal tensor (and context) rank, on dedicated send/receive streams, and the receiving step waits for them.
// Context parallelism (TransformerEngine ring attention with causal load balancing; transformer_ops.h):
// a rank holds s/cp tokens, so every per-token op, TP collective and pipeline send is 1/cp of the above. The
// attention core of a layer is cp steps; before step j ≥ 1 the K/V of the ring neighbour arrive, a Send/Recv
// of 2·b·(s/cp)·(n_kv/t)·d·e bytes from context rank i to i+1 on the "cp-kv" streams, issued as soon as
// the previous transfer delivered (TE launches it before the previous step's kernel), so it overlaps step
// j − 1: with step compute C and transfer X the forward attention takes cp·C + (cp − 1)·max(0, X − C) —
// nothing is exposed when C ≥ X (step 0 works on the local K/V). The backward runs the same K/V ring plus
// a dK/dV ring ("cp-dkv" streams, same size): after step j − 1 a rank passes the accumulated dK/dV of the
// chunk it just used on, beside step j. TE's backward visits the chunks so that the rank's own comes last
// (it starts from the neighbour's K/V kept by the forward and sends the other way round; the mirror image
// of this ring, same times), so the accumulated dK/dV of the own chunk arrive during the last step, with
// no hop after it: cp − 1 K/V and cp − 1 dK/dV transfers, 2·(cp − 1) per layer backward (formulas.md
// 2.12), and the QKV backward waits for the last. Gradients are reduced over the dp·cp ranks (Megatron's
// data-parallel group with CP).
// Expert parallelism (Megatron-Core MoE, alltoall token dispatcher): an MoE layer's routed experts are
// split over the ep ranks of an EP group carved out of DP (rank_layout.h). Per MoE layer and micro-batch an
// AlltoAll over the EP group dispatches each rank's routed tokens (b·(s/cp)·top_k·h·e bytes per rank, 1/t of
// that with tp > 1, which needs sequence parallelism: a rank routes its own sequence shard; (ep − 1)/ep of it
// to other ranks) after the router and permutation, and a second combines the experts' outputs back; the
// backward runs the reverse pair; a recomputed forward repeats its pair. They run on an "ep-comm" stream and
// the next kernel waits for them (exposed unless other ranks' work hides them). With tp > 1 the TP group
// all-gathers the dispatched tokens (each rank runs its 1/t slice of every local expert's FFN on all of them)
// and reduce-scatters the experts' outputs before the combine, b·(s/cp)·top_k·h·e bytes in all
// (moe_tp_gather_bytes); backward the reverse pair. Without expert parallelism (ep 1, the all-gather
// dispatcher) the routed experts are a tensor-parallel MLP: the TP collectives of the dense MLP.
// Routing imbalance (transformer_ops.h expert_load): EP rank 0 of each group holds the busiest expert, its
// expert kernels run longer, the group waits for it at the combine; the all-to-alls carry the busiest
// receiver's bytes. Expert gradients are reduced over the (dp/ep)·cp ranks that hold the same experts, in
// buckets of their own; dense ones over dp·cp.
// Data parallelism: after the last backward of a model chunk its gradients (fp32 main gradients, 4 bytes
// per parameter, the rank's 1/t share) are reduced over the DP group on the "dp-comm" stream, after the
// backward or (overlap_grad_reduce) in DDP-sized buckets overlapping it; then the distributed optimizer's
// shard step and parameter all-gather (with overlap_param_gather: per bucket at the head of the step, each
// gating the first micro-batch's forward of its layers), or each rank's optimizer step; tied embeddings
// all-reduce between
// the first and the last stage; scatter/gather pipeline sends on request.
// Not modelled: the dK/dV reduction kernel, overlap of the all-to-alls with shared experts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/ddp_graph.h"
#include "workloads/rank_layout.h"
#include "workloads/scenario.h"

namespace clustersim::workloads {

class CollectiveEngine;
class CollectiveModel;

inline constexpr const char* kCategoryTpComm = "tp_comm";
inline constexpr const char* kCategoryPpComm = "pp_comm";
inline constexpr const char* kCategoryCpComm = "cp_comm";  // ring-attention K/V and dK/dV exchanges
inline constexpr const char* kCategoryEpComm = "ep_comm";  // MoE dispatch and combine all-to-alls

// Whether a TP collective follows the op of this name (Megatron's g/f operators; with sequence parallelism a
// reduce-scatter and an all-gather of the same volume), including the embedding's forward and the output layer's
// data gradient: the graph's rule, shared by the analytical estimate.
bool tp_sync_after(const std::string& name, std::uint32_t ep);
// The message of each of the vocabulary-parallel cross-entropy's 3 all-reduces after "loss.fwd" (tp > 1): one
// fp32 value per token of the micro-batch, 4·b·s/cp bytes.
Bytes vocab_parallel_loss_bytes(std::uint32_t micro_batch, std::uint32_t seq_len, std::uint32_t cp);
// With expert and tensor parallelism: the MoE TP collective after the op of this name (moe_tp_gather_bytes):
// an all-gather after the dispatch (forward, recomputed) and after the combine's backward, a reduce-scatter
// after the experts' fc2 (forward, recomputed) and after their fc1 data gradient.
enum class ExpertTpSync { kNone, kAllGather, kReduceScatter };
ExpertTpSync expert_tp_sync_after(const std::string& name);
// With expert parallelism: whether an MoE all-to-all follows the op of this name — the dispatch after the
// permutation (forward, recomputed) and after the experts' last weight gradient, the combine after the experts'
// fc2 (forward, recomputed) and after the combine's backward.
bool ep_sync_after(const std::string& name);
// Whether the op of this name is a column-parallel layer's data gradient with a TP reduction after it (QKV, fc1,
// the output layer): the one whose reduction Megatron runs beside the weight gradient, and whose input sequence
// parallelism gathers again.
bool column_parallel_dgrad(const std::string& name, std::uint32_t ep);
// tp_comm_overlap (Transformer Engine's userbuffers, Megatron-LM's --tp-comm-overlap) with sequence parallelism:
// the sync points' all-gather is issued where its result is read, before the op of this name: kOverlapped, a
// Transformer Engine GEMM that runs it beside itself in ring-exchange chunks (forward QKV and fc1, of the
// dense, shared and tensor-parallel routed MLPs; backward the row-parallel data gradients proj and fc2, whose
// output gradient it gathers); kBlocking, a Megatron layer that gathers before it (the output layer's forward,
// the embedding's backward); kNone, an op that does not read it.
enum class TpGatherConsumer { kNone, kOverlapped, kBlocking };
// tp_comm_overlap: whether the reduce-scatter after the op of this name runs pipelined beside it (a row-parallel
// Transformer Engine GEMM: proj, fc2, and their shared and tensor-parallel routed-expert forms, forward or
// recomputed), not blocking (the embedding's) or beside the weight gradient (a column-parallel data gradient).
bool tp_reduce_pipelined(const std::string& name, std::uint32_t ep);
TpGatherConsumer tp_gather_consumer(const std::string& name, std::uint32_t ep);
// The ranks that read input (input_pipeline.h): tensor rank 0 of the first and the last stage of every context
// rank of data-parallel replicas [0, replicas).
std::vector<std::uint32_t> input_readers(const RankLayout& layout, const ParallelPlan& par, std::uint32_t replicas);

// Megatron's gradient bucket: parameters' gradients fill a bucket (in backward order) until it holds at least
// this many bytes. The scenario's ddp_bucket_mib where it gives one; otherwise Megatron-Core's default bucket
// size, max(40,000,000, 1,000,000 x dp·cp) parameters (DistributedDataParallel.__init__,
// megatron/core/distributed/distributed_data_parallel.py), of `gradient_bytes` each. Megatron has no small
// first bucket (PyTorch DDP's 1 MiB): every bucket, the first too, has this cap.
Bytes megatron_bucket_bytes(const ParallelPlan& plan, double gradient_bytes);

// Symmetry reduction (DESIGN.md §4, level 3). The dp data-parallel replicas of a job run the same steps;
// when every communicator a replica uses on its own (TP groups, pipeline Send/Recv pairs, CP ring edges,
// EP groups, tied-embedding pairs, scatter/gather all-gathers) is timed exactly like its counterpart's in
// replica 0, every GPU computes at the same speed as its counterpart, and every node's data loader serves
// as many readers as its counterpart's, replica d is a copy of replica d mod R, where R = ep (the EP groups
// of replica block 0 are kept whole: routing imbalance makes EP ranks differ) or 1. The DP and expert-DP
// reductions still run over their full groups — their CollectiveRequest names every member GPU, their
// lanes only the simulated ranks' streams — so their time is that of the full job.
// megatron_simulated_replicas() returns R, or dp where that is not proven (it checks the job only: the
// caller requires the scenario-wide conditions — ANALYTICAL fidelity, one job, no slow GPUs, no link
// faults — under which collectives are closed-form and nothing else shares the cluster). It plans every
// communicator outside DP once per replica with the graph's message sizes and compares CollectivePlan::time
// exactly; a plan that fails (a forced NCCL algorithm) means no reduction, and the full build reports it.
std::uint32_t megatron_simulated_replicas(const Scenario& scenario, const Job& job, const CollectiveModel& model);

// The same within a TP group: its tp ranks run the same kernels and meet in the same TP collectives, except
// that tensor rank 0 reads the input (Megatron's get_batch broadcasts it to the group). So with tp > 2, tensor
// ranks 0 and 1 are simulated and rank 1 stands for ranks 2 … tp − 1 — where the same proof holds with the
// mirror (tensor rank min(k, 1)) and, since their DP groups then have no simulated member, every DP group of
// tensor rank k ≥ 2 is timed as rank 1's for each gradient and parameter message of its stage. The TP
// collectives name all tp GPUs and take lanes of the simulated ranks only. Returns 2, or tp where tp ≤ 2 or
// the proof fails, for the replicas megatron_simulated_replicas() chose.
std::uint32_t megatron_simulated_tensor_ranks(const Scenario& scenario, const Job& job, const CollectiveModel& model,
                                              std::uint32_t replicas);

// The job rank whose results rank `rank` copies when replicas [0, replicas) and tensor ranks
// [0, tensor_ranks) are simulated (0: all): the one of equal context and pipeline coordinate in replica
// dp mod replicas, at tensor rank min(tp, tensor_ranks − 1).
std::uint32_t megatron_mirror_rank(const Job& job, std::uint32_t replicas, std::uint32_t rank,
                                   std::uint32_t tensor_ranks = 0);

// Adds one optimizer step of `job` (tp, pp, cp, ep > 1 allowed) to `graph`. With `replicas` (0: all; else a
// multiple of ep dividing dp, as megatron_simulated_replicas() returns) only the ranks of data-parallel
// replicas [0, replicas) get streams and tasks, and with `tensor_ranks` (0: all; else as
// megatron_simulated_tensor_ranks() returns) only those of tensor ranks [0, tensor_ranks); the JobGraph's
// per-rank entries of the others are unset (stream 0) and optimizer_task lists the simulated ranks' optimizer
// steps only.
JobGraph build_megatron_job(const Scenario& scenario, const Job& job, sim::TaskGraph& graph,
                            CollectiveEngine& collectives, std::uint32_t replicas = 0, std::uint32_t tensor_ranks = 0);

}  // namespace clustersim::workloads
