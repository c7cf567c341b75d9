// Analytical estimate of one optimizer step: the iteration time of a parallel layout in closed form,
// without building the task graph — the fast path `clustersim sweep` scores thousands of layouts with,
// before it re-simulates the best ones with the event-driven model (iteration_result.h).
//
// It mirrors what the graphs (megatron_graph.h, ddp_graph.h, zero_graph.h) simulate, term by term:
//  * Stage time. Per virtual stage vs and micro-batch: F_vs = Σ op_time of the chunk's forward ops, B_vs the
//    same over its backward ops (recomputed forward ops included), plus the tensor-parallel collectives on the
//    compute stream after the same ops as in the graph (2 AllReduce of b·(s/cp)·h·e bytes per layer forward
//    and 2 backward, or ReduceScatter + AllGather each with sequence parallelism), timed by
//    CollectiveModel::plan. Device s holds chunks s, s + p, …; t_s = Σ_chunks (F + B). Op costs are computed
//    once per (tp, sp, cp, ep, micro-batch, recompute, attention) for one dense layer, one MoE layer, the
//    embedding and the head, and reused for every stage and layout.
//  * Context parallelism (ring attention, megatron_graph.cpp): a layer's attention core is cp steps of C each
//    (C_f forward or recomputed, C_b backward); the K/V for step j ≥ 1 arrive j·X after step 0 starts (X the
//    Send/Recv time of ring_kv_bytes on a ring edge, the transfers forwarded hop by hop), so step j starts at
//    max(end of step j − 1, start_0 + j·X): the forward ring takes C_f + (cp − 1)·max(C_f, X). Backward, the
//    dK/dV of step j − 1 leave when it ends and after the previous dK/dV hop, d_j = max(e_{j−1}, d_{j−1}) + X,
//    and the QKV backward waits for the last, d_{cp−1} (the own chunk comes last: no hop after the last
//    step): C_b + (cp − 1)·max(C_b, X). Exposed per layer: 0 when compute-bound (C ≥ X), 2X − C_f − C_b at
//    cp = 2 when transfer-bound (the graph's test).
//    Every per-token op runs on s/cp tokens (transformer_ops.h). With equal edges this closed form is exact.
//    Rings whose hops alternate between NVLink and the NIC desynchronise (the member behind a NIC edge waits
//    longest, the others run ahead and their next layer's K/V leave early): there the fast path keeps one
//    clock per ring member and one per edge — transfer j on edge r ends at max(payload on r, previous transfer
//    on the edge) + X_r, member r's step j starts at max(its clock, transfer j into r) — through the chunk's
//    layers, forward then backward (a max-plus recursion over cp members; 0.5–1.9 % above the graph in the
//    tests where the single-edge bound was 7–15 % above).
//  * Expert parallelism: every MoE layer adds its dispatch and combine AlltoAll on the EP group after the same
//    ops as the graph (2 forward, 2 backward, 2 more in a fully recomputed forward), each A = AlltoAll time of
//    moe_alltoall_bytes at the busiest receiver's load. The all-to-alls synchronise the EP group, so every
//    rank runs at the pace of the rank holding the busiest expert: its ops (expert_load().busiest_rank) are
//    the stage's ops.
//  * Pipeline. c = the Send/Recv time of a pipeline message (b·(s/cp)·h·e, 1/tp with SP or scatter/gather).
//    p = 1: T = m·t_0.
//    GPipe: T = ΣF + (m−1)·max(F_max, c) + ΣB + (m−1)·max(B_max, c) + 2(p−1)·c.
//    1F1B: T = Σ_s t_s + 2(p−1)·c + (m−1)·t_last + (m−2)·(P − t_last), P = max(t_max, max_{s<p−1} t_s + 2c):
//      in the steady state a stage's next forward waits for its neighbour's backward and forward and two
//      sends; for equal stages this is (m + p − 1)·t + 2(m + p − 3)·c.
//    Interleaved 1F1B (v chunks): T = m·t_max + (Σ_s t_s − t_max)/v + 2(pv − 1)·c (the bubble is (p − 1)/v
//      stage times).
//    Stage s ends its last backward Σ_{s'<s} (B_s' + c) before stage 0 does (the drain).
//  * Data parallelism. Dense gradients are reduced over the dp·cp ranks of the data-and-context group; with
//    expert parallelism the routed experts' gradients over their (dp/ep)·cp replicas, in their own buckets.
//    Without overlap_grad_reduce (Megatron-LM's default) each chunk's gradient buffers are reduced in one call
//    each after the rank's backward: fully exposed. With it, DDP-sized buckets of the last micro-batch's
//    backward go as they fill (ready times from the same op costs), dense and expert buckets in the order
//    they fill, on one stream. The distributed optimizer reduce-scatters, steps dense/(dp·cp) +
//    experts/((dp/ep)·cp) parameters and all-gathers them after the step. Tied embeddings with a pipeline:
//    the first and last stage all-reduce the word-embedding gradients before their optimizer step.
//    PyTorch DDP (ddp_graph.h) also runs, per micro-batch, autocast's weight casts and the gradients' casts
//    (and from the second micro-batch their accumulation), and copies the gradients into the buckets and back:
//    each is added to the compute stream whole, and the part inside the last backward delays each bucket by
//    its share of the parameters produced up to it (the graph runs each after the op producing its gradient;
//    these costs are proportional to the parameters, except the per-op launch floors).
//  * Optimizer: op_time(optimizer_op(rank parameters)) after the reduction; the step ends at the latest rank.
//  * ZeRO / FSDP (zero_graph.h), data parallelism on d_s-rank shard groups (all ranks, or one node's with
//    hybrid sharding). Units: the root (embedding; final norm, head, loss) and one per block, forward times
//    f_u, backward times b_u, all-gather times A_u of their 16-bit parameters, reduce-scatter times R_u (plus
//    the replicas' all-reduce of the 1/d_s shard with hybrid sharding). Three streams — compute (cursor c),
//    all-gather (a), reduce-scatter (r) — advance by the graph's dependencies, per micro-batch:
//      forward (stages 3 and FSDP 2): G_0 = a + A_0, G_1 = G_0 + A_1, G_u = max(a, end of f_{u−2}) + A_u
//        (at most two all-gathers ahead); unit u starts at max(c, G_u);
//      backward (stage 3): blocks in reverse, the k-th block's all-gather at max(a, end of the (k−2)-th
//        block's backward, or the forward's end for k < 2) (one block of prefetch); after each unit's backward
//        r = max(r, c) + R_u (every micro-batch; FSDP and stage 3);
//      DeepSpeed stages 1–2: T = m·(F + B) + Σ_buckets R + opt + Σ_buckets A (5e8-element buckets after
//        the backward, the parameters all-gathered after the step).
//    T = max(c, r) + opt over the 1/d_s shard. The per-micro-batch recursion is max-plus linear: once two
//    successive micro-batches advance (c, a, r) by the same amounts the rest is extrapolated.
//  * Host dispatch (host_dispatch.h; when the job sets host_dispatch_per_kernel): host and GPU as two stages in
//    series over a stretch without synchronisation, the max-plus recursion over segments (embedding, layers,
//    head; host_gpu_segments: Σ GPU + max_j (host − GPU before segment j + its own excursion)). With pp > 1 a
//    step that receives starts a stretch (the host synchronised on the receive); the first virtual stage's
//    forward and the last one's backward continue the stretch of the step before them (1F1B's steady state).
//    With pp = 1 the whole step sequence is one stretch over m micro-batches. ZeRO/FSDP: a host cursor h
//    advances by each unit's dispatches (and one per collective) and the unit ends at max(c + its GPU time, h);
//    DeepSpeed stages 1–2: max(m·F+B + first dispatch, m·host).
// Collectives are timed contention-free (the ANALYTICAL fidelity's closed form); the event-driven model at
// FLOW fidelity adds contention. Slow GPUs stretch every kernel by the job's largest slowdown factor.
// Data loader and host-to-device copy (input_pipeline.h): the graph's loader, copy and refill tasks on the
// busiest node are replayed against micro-batches one per-micro-batch time apart; the step ends after the last
// micro-batch's tail and after the loader refilled its queue, and the excess over the estimate is
// `input_stall`. Without a loader rate every micro-batch is ready at the step's start and only the copies
// (b·(s + 1)·8 bytes each at host_to_device) are replayed: micro-batch 0's copy, or all of them on a host link
// slower than the GPU. Exact for pp = 1; with a pipeline a lower bound.
//
// Memory: estimate_memory() of stage 0 and stage p − 1 (for dense models no other stage can exceed both:
// same layers, no embedding, fewer micro-batches in flight; every stage for MoE models), estimate_ddp_memory()
// on the DDP path, estimate_zero_memory() for FSDP and DeepSpeed, as simulate_scenario() reports.
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
                           // (ZeRO/FSDP: every exposed all-gather and reduce-scatter)
  Seconds cp_comm;         // busiest stage: exposed ring-attention K/V and dK/dV transfers per step
  Seconds ep_comm;         // busiest stage: MoE dispatch/combine all-to-alls per step
  Seconds exposed_host;    // the GPU waiting for the host thread to issue kernels (host_dispatch.h)
  Seconds bubble;          // pipeline fill and drain (and steady-state waiting) on the critical path
  Seconds input_stall;     // the step's wait for the data loader and the input copies beyond the rest
  double tokens_per_s = 0;
  double mfu = 0;
  Bytes peak_memory;       // of the most loaded stage
  Bytes memory_capacity;
  bool oom = false;
  std::string oom_part;  // when OOM: the largest memory part (the one to shrink first), as run names it
};

// Estimates layouts of one job of a scenario. Not thread-safe (it caches per-op costs); use one per thread.
// The scenario and job must outlive it. Layouts must be valid for the job's model and GPU count
// (plan.gpus() == job.gpus.size(), tp | heads, pp·vp | layers, interleaving needs m a multiple of pp, 2·cp | s,
// ep | dp and ep | experts). Frameworks: Megatron, PyTorch DDP, FSDP and DeepSpeed (not DataParallel, Horovod).
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
