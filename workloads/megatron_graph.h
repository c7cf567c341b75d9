// The task graph of one optimizer step of Megatron-style 3D parallelism (Shoeybi et al. 2019;
// Narayanan et al. 2021; Korthikanti et al. 2022), for a job of tp·dp·pp ranks placed by RankLayout.
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
// equal tensor rank, on dedicated send/receive streams, and the receiving step waits for them.
// Data parallelism: after the last backward of a model chunk its gradients (fp32 main gradients, 4 bytes
// per parameter, the rank's 1/t share) are all-reduced over the DP group on the "dp-comm" stream in
// DDP-sized buckets, overlapping the remaining backward work; the optimizer step of each rank follows.
// Left out so far: the scatter/gather optimisation of pipeline sends, the distributed optimizer,
// recomputation, the all-reduce of tied embedding gradients between first and last stage.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/ddp_graph.h"
#include "workloads/rank_layout.h"
#include "workloads/scenario.h"

namespace clustersim::workloads {

class CollectiveEngine;

inline constexpr const char* kCategoryTpComm = "tp_comm";
inline constexpr const char* kCategoryPpComm = "pp_comm";

// Adds one optimizer step of `job` (tp, pp > 1 allowed) to `graph`.
JobGraph build_megatron_job(const Scenario& scenario, const Job& job, sim::TaskGraph& graph,
                            CollectiveEngine& collectives);

}  // namespace clustersim::workloads
