// Analytical estimate of one optimizer step: the iteration time of a parallel layout in closed form,
// without building the task graph — the fast path `clustersim sweep` scores thousands of layouts with,
// before it re-simulates the best ones with the event-driven model (iteration_result.h).
//
// It mirrors what the graphs (megatron_graph.h, ddp_graph.h) simulate, term by term:
//  * Stage time. Per virtual stage vs and micro-batch: F_vs = Σ op_time of the chunk's forward ops, B_vs the
//    same over its backward ops (recomputed forward ops included), plus the tensor-parallel collectives on the
//    compute stream after the same ops as in the graph (2 AllReduce of b·s·h·e bytes per layer forward and 2
//    backward, or ReduceScatter + AllGather each with sequence parallelism), timed by CollectiveModel::plan.
//    Device s holds chunks s, s + p, …; t_s = Σ_chunks (F + B). Op costs are computed once per
//    (tp, sp, micro-batch, recompute, attention) for one dense layer, one MoE layer, the embedding and the
//    head, and reused for every stage and layout.
//  * Pipeline. c = the Send/Recv time of a pipeline message (b·s·h·e, 1/tp with SP or scatter/gather).
//    p = 1: T = m·t_0.
//    GPipe: T = ΣF + (m−1)·max(F_max, c) + ΣB + (m−1)·max(B_max, c) + 2(p−1)·c.
//    1F1B: T = Σ_s t_s + 2(p−1)·c + (m−1)·t_last + (m−2)·(P − t_last), P = max(t_max, max_{s<p−1} t_s + 2c):
//      in the steady state a stage's next forward waits for its neighbour's backward and forward and two
//      sends; for equal stages this is (m + p − 1)·t + 2(m + p − 2)·c.
//    Interleaved 1F1B (v chunks): T = m·t_max + (Σ_s t_s − t_max)/v + 2(p−1)·c·... (see the .cpp; the
//      bubble is (p − 1)/v stage times).
//    Stage s ends its last backward Σ_{s'<s} (B_s' + c) before stage 0 does (the drain).
//  * Data parallelism. Without overlap_grad_reduce (Megatron-LM's default) each chunk's gradient buffer is
//    reduced in one call after the rank's backward: fully exposed. With it, DDP-sized buckets of the last
//    micro-batch's backward go as they fill (ready times from the same op costs) on one stream. The
//    distributed optimizer reduce-scatters, steps 1/dp of the parameters and all-gathers them after the step.
//    Tied embeddings with a pipeline: the first and last stage all-reduce the word-embedding gradients
//    before their optimizer step.
//  * Optimizer: op_time(optimizer_op(rank parameters)) after the reduction; the step ends at the latest rank.
// Collectives are timed contention-free (the ANALYTICAL fidelity's closed form); the event-driven model at
// FLOW fidelity adds contention. Slow GPUs stretch every kernel by the job's largest slowdown factor.
// Not modelled here (negligible or not in the graphs either): the input copy of each micro-batch, the
// data loader (when the scenario sets a loader rate the graph can stall on it; this path does not).
//
// Memory: estimate_memory() of stage 0 and stage p − 1 (for dense models no other stage can exceed both:
// same layers, no embedding, fewer micro-batches in flight; every stage for MoE models), or
// estimate_ddp_memory() on the DDP path, as simulate_scenario() reports.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "workloads/memory_model.h"
#include "workloads/nccl_model.h"
#include "workloads/scenario.h"

namespace clustersim::workloads {

struct AnalyticalEstimate {
  Seconds iteration_time;
  Seconds compute;         // busiest stage: m · Σ compute of its micro-batch steps, optimizer included
  Seconds tp_comm;         // busiest stage: TP collectives on the compute stream per step (all micro-batches)
  Seconds pp_comm;         // pipeline sends on the critical path
  Seconds dp_comm;         // exposed data-parallel gradient (and parameter) communication of the last stage to end
  Seconds bubble;          // pipeline fill and drain (and steady-state waiting) on the critical path
  double tokens_per_s = 0;
  double mfu = 0;
  Bytes peak_memory;       // of the most loaded stage
  Bytes memory_capacity;
  bool oom = false;
  std::string oom_part;    // when OOM: the memory part whose addition first exceeds the capacity
};

// Estimates layouts of one job of a scenario. Not thread-safe (it caches per-op costs); use one per thread.
// The scenario and job must outlive it. Layouts must be valid for the job's model and GPU count
// (plan.gpus() == job.gpus.size(), tp | heads, pp·vp | layers, interleaving needs m a multiple of pp).
class AnalyticalEstimator {
 public:
  AnalyticalEstimator(const Scenario& scenario, const Job& job);
  ~AnalyticalEstimator();
  AnalyticalEstimator(const AnalyticalEstimator&) = delete;
  AnalyticalEstimator& operator=(const AnalyticalEstimator&) = delete;

  AnalyticalEstimate estimate(const ParallelPlan& plan);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One-off convenience: the first job of `scenario` with its own plan.
AnalyticalEstimate analytical_estimate(const Scenario& scenario, const Job& job);

}  // namespace clustersim::workloads
