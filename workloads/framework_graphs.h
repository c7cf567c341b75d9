// The task graphs of one optimizer step under two older data-parallel frameworks: torch.nn.DataParallel
// and Horovod (with PyTorch). Same replicas and ops as the DDP graph (ddp_graph.h); what differs is who
// moves which bytes when.
//
// torch.nn.DataParallel (torch/nn/parallel/data_parallel.py, comm.py, torch/csrc/cuda/comm.cpp): ONE
// Python process drives the n GPUs of one node; GPU 0 (device_ids[0]) holds the module and is also replica 0.
// Per micro-batch (b samples per GPU, so the module sees b·n):
//   1. the loader's b·n samples are copied host-to-device to GPU 0 (input_pipeline.h with one reader);
//   2. scatter: GPU 0 sends GPU i its b samples, b·(s + 1)·8 B of int64 tokens (Send/Recv 0 → i);
//   3. replicate: every forward broadcasts the module from GPU 0 (comm.broadcast_coalesced, NCCL broadcast
//      per chunk of ≤ 10 MiB; a tensor larger than the chunk goes alone — _take_tensors). Under autocast the
//      parameters stay fp32, so P·4 B leave GPU 0 (clustersim's BF16/FP16 precision is autocast, as on the
//      DDP path; ddp_gradient_bytes);
//   4. parallel_apply: the replicas' forwards, launched from one Python thread per replica that share the
//      GIL: per op the n replicas' launches of its kernels are serialised, so a forward op of k kernels takes
//      max(op time, n · k · t_launch);
//      backward runs in autograd's per-device C++ threads, without the GIL;
//   5. gather: each replica's output — the logits b·s·V at the activation width e (the common pattern
//      computes the loss outside the module, on GPU 0) — is copied to GPU 0 (Send/Recv i → 0);
//   6. the loss over the gathered n·b·s·V logits on GPU 0 (the loss ops of micro-batch n·b), its backward,
//      and the scatter of the logits' gradient back (Send/Recv 0 → i, b·s·V·e B each);
//   7. the replicas' backward; the Broadcast's backward (ReduceAddCoalesced, one autograd node) runs after
//      every replica's backward ends and reduces the fp32 gradients onto GPU 0 (NCCL reduce, root 0, per
//      chunk of ≤ 10 MiB): P·4 B into GPU 0;
//   8. after the last micro-batch, the optimizer on GPU 0 alone.
// Memory (estimate_data_parallel_memory, GPU 0): DDP's parts without its bucket copy, plus the gathered logits
// and the loss's fp32 log-softmax, the replicas' fp32 gradients waiting in BroadcastBackward's input buffer (P·4)
// and, under gradient accumulation, the reduced copy on GPU 0 before it is added to .grad (P·4).
// All of it is issued on each GPU's current stream, so it serialises there; the transfers are placed on the
// "dp-comm" streams (that compute waits for) so that the report shows them as exposed communication.
// GPU 0's traffic per micro-batch: out (n−1)·b·(s+1)·8 + P·4 + (n−1)·b·s·V·e, in (n−1)·b·s·V·e + P·4 bytes.
// Not modelled: the copy of GPU 0's own share inside the gather, the buffers' broadcast (none in a GPT).
//
// Horovod (horovod/common/operations.cc RunLoopOnce, controller.cc FuseResponses, ops/nccl_operations.cc):
// hvd.DistributedOptimizer hooks every parameter's gradient; gradients become ready in backward order (the
// order DDP's buckets use). A background thread wakes every cycle time c (HOROVOD_CYCLE_TIME), the
// coordinator collects the tensors ready on every rank and fuses them, in ready order, into responses of at
// most the fusion threshold F (HOROVOD_FUSION_THRESHOLD; greedy: a tensor that would overflow the buffer
// starts the next response; a tensor larger than F goes alone). Ticks fall at k·c, k ≥ 1, from the start of
// the (last micro-batch's) backward on rank 0; a tensor ready at t is in the response of tick ⌈t / c⌉.
// A fused response of more than one tensor is copied into the fusion buffer and back out (each a
// device-to-device copy that reads and writes its bytes: 2·S of HBM traffic, timed as an element-wise op)
// around its NCCL AllReduce; a single tensor is reduced in place. The AllReduce is ncclAllReduce with
// NCCL's own algorithm choice (the scenario's nccl.algorithm forces one, as NCCL_ALGO would), like DDP's.
// HOROVOD_HIERARCHICAL_ALLREDUCE (horovod_hierarchical): NCCL ReduceScatter of S within each node, the
// cross-node AllReduce of the node-local shard S/g between GPUs of the same local rank (Horovod does it with
// MPI on host memory: a device-to-host copy, MPI_Allreduce, a host-to-device copy; the copies are timed at
// training.host_to_device, the MPI allreduce as NCCL's over the same NICs), and an NCCL AllGather of S
// within each node. Ready times for the grouping are the backward ops' durations (in the executor's integer
// picoseconds) on the slowest rank; a rank that starts its backward late only delays the collectives.
// The optimizer waits for every response; with gradient accumulation (backward_passes_per_step) only the
// last micro-batch's backward communicates.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/sim_time.h"
#include "workloads/ddp_graph.h"
#include "workloads/memory_model.h"

namespace clustersim::workloads {

// torch.cuda.comm broadcast_coalesced / reduce_add_coalesced buffer_size (10485760 bytes).
inline constexpr Bytes kDataParallelChunk = MiB(10);

inline constexpr const char* kHorovodCycleStream = "horovod-cycle";
inline constexpr const char* kCategoryHorovodCycle = "horovod_cycle";

// One gradient tensor (here: the gradients one backward op completes) in the order it becomes ready.
struct GradientTensor {
  std::string name;
  Bytes size;
  double parameters = 0;
  std::size_t op = 0;          // index into the backward ops
  sim::SimTime ready = 0;      // since the backward's start
};

// Consecutive tensors packed into groups of at most `limit` bytes: a tensor that would overflow the
// current group closes it; a tensor larger than `limit` forms a group of its own (torch's _take_tensors,
// Horovod's FuseResponses with one dtype). Returns, per group, the indices of its first and last tensors.
std::vector<std::pair<std::size_t, std::size_t>> pack_tensors(const std::vector<Bytes>& sizes, Bytes limit);

// The gradient tensors of `backward` (ops with parameters), sizes at `bytes_per_gradient`, ready at the end
// of their op when the ops run back to back with `op_time` each (rounded to picoseconds as the executor does).
std::vector<GradientTensor> gradient_tensors(const std::vector<Op>& backward, const std::vector<Seconds>& op_time,
                                             Bytes bytes_per_gradient);

struct FusedAllReduce {
  std::size_t first = 0, last = 0;  // tensors [first, last] of gradient_tensors(), in ready order
  Bytes size;
  double parameters = 0;
  std::uint64_t tick = 0;           // negotiated at k·cycle from the backward's start
  std::size_t ready_after_op = 0;   // the backward op that completes its last tensor
};

// Horovod's responses: tensors grouped by the first tick at or after their ready time, then packed per
// tick by pack_tensors(…, fusion). A zero cycle negotiates each tensor when it is ready (its own tick).
std::vector<FusedAllReduce> horovod_responses(const std::vector<GradientTensor>& tensors, Seconds cycle,
                                              Bytes fusion);

// The graphs. A DataParallel job must lie on one node (the loader checks it: parallel.framework).
JobGraph build_data_parallel_job(const Scenario& scenario, const Job& job, sim::TaskGraph& graph,
                                 CollectiveEngine& collectives);
JobGraph build_horovod_job(const Scenario& scenario, const Job& job, sim::TaskGraph& graph,
                           CollectiveEngine& collectives);

// Peak memory. DataParallel reports GPU 0, the peak: the DDP composition without DDP's bucket copy, plus the
// gathered logits n·b·s·V·e and the loss's fp32 log-softmax over them, n·b·s·V·4 (kept for its backward).
// Replicas on GPUs 1..n−1 hold weights, gradients, autocast copies and activations but no optimizer state.
// Horovod: the DDP composition with the fusion buffer (F bytes, allocated once) instead of DDP's bucket copy.
MemoryEstimate estimate_data_parallel_memory(const Job& job, const calibrate::GpuPerformance& gpu);
MemoryEstimate estimate_horovod_memory(const Job& job, const calibrate::GpuPerformance& gpu);

}  // namespace clustersim::workloads
