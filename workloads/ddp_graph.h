// The task graph of one optimizer step of PyTorch DistributedDataParallel (Li et al., "PyTorch
// Distributed", VLDB 2020; torch/nn/parallel/distributed.py).
//
// Every GPU runs the same model replica on its compute stream: grad_accum micro-batches of forward
// then backward. Gradients are grouped into buckets in the order backward produces them (DDP builds
// buckets over the parameters in reverse registration order and rebuilds them in ready order after
// the first iteration); a bucket closes once it holds at least its cap — 1 MiB for the first
// bucket (dist._DEFAULT_FIRST_BUCKET_BYTES), bucket_cap_mb (MiB) for the others. A bucket's ring
// AllReduce runs on the "dp-comm" stream of every GPU as soon as its last gradient is produced,
// overlapping the rest of backward. Under gradient accumulation only the last micro-batch's
// backward communicates (no_sync() for the others). With gradient_as_bucket_view=False (the default) the
// reducer's autograd hook copies each gradient into its bucket on the compute stream (the bucket's AllReduce
// waits for that copy) and finalize_backward copies the reduced buckets back into the gradients: one
// device-to-device copy of the bucket before its AllReduce, one of all gradients after the last. The
// optimizer step waits for every bucket. The replica's kernels are the model's as eager PyTorch runs an fp32
// model under autocast (eager_forward_ops, eager_backward_ops: an fp32 residual stream, fp32 softmax, the casts
// of the norms' outputs; transformer_ops.h OpConfig::autocast), as in Horovod and DataParallel.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/host_dispatch.h"
#include "workloads/scenario.h"
#include "workloads/transformer_ops.h"

namespace clustersim::workloads {

inline constexpr const char* kComputeStream = "compute";
inline constexpr const char* kDpCommStream = "dp-comm";
inline constexpr const char* kCategoryCompute = "compute";
inline constexpr const char* kCategoryDpComm = "dp_comm";
// PyTorch eager mixed-precision work (autocast_weights_op and below): compute, reported apart as part of it.
inline constexpr const char* kCategoryEager = "eager";

struct GradientBucket {
  Bytes size;
  double parameters = 0;
  std::size_t ready_after_op = 0;   // index into the backward ops: the op that completes it
  std::string first_op, last_op;    // which gradients it holds, for reports
};

// Assigns the gradients produced by `backward` (in order) to buckets.
std::vector<GradientBucket> ddp_buckets(const std::vector<Op>& backward, Bytes bytes_per_gradient,
                                        Bytes first_bucket_cap, Bytes bucket_cap);

// Bytes per gradient element DDP reduces: fp32 under autocast mixed precision (parameters stay
// fp32), and for FP32/TF32 training.
Bytes ddp_gradient_bytes(Precision precision);

inline constexpr Bytes kFirstBucketCap = MiB(1);  // torch.distributed._DEFAULT_FIRST_BUCKET_BYTES

// What PyTorch's eager mode adds around the model's kernels in DDP, Horovod and DataParallel, which train
// fp32 parameters (FSDP and Megatron-LM handle their 16-bit copies themselves: zero_graph.h, megatron_graph.h).
//  * torch.autocast (BF16/FP16 mixed precision; torch/csrc/autograd/autocast_mode.cpp) casts a linear layer's
//    fp32 weight to 16 bits when an op first uses it, and caches the copy until the autocast region (one
//    forward) exits: every micro-batch casts every weight again (these graphs run without recomputation). A
//    cast reads 4 B and writes 2 B per element: 6 B.
//  * autograd casts that copy's 16-bit gradient back to fp32 (the cast's backward) before AccumulateGrad:
//    read 2 B, write 4 B per element: 6 B.
//  * AccumulateGrad adds the gradient into .grad in place from the second micro-batch of a step on (read 4 +
//    4 B, write 4 B: 12 B per parameter, also in fp32 training); the first micro-batch's gradient becomes .grad
//    without a kernel. DDP's and Horovod's hooks run after AccumulateGrad, so these kernels come before a
//    bucket's AllReduce.
//  * A tied word embedding is a leaf with two uses (the lookup and the LM head): autograd adds the two
//    gradients (the head's cast back to fp32, the lookup's) before AccumulateGrad, in every micro-batch:
//    12 B per element, after the embedding's backward.
//  * FP16 (not BF16) needs GradScaler: unscale_ reads and rewrites every fp32 gradient (with its inf check)
//    before the optimizer each step: 8 B per parameter (grad_unscale_op).
// FP8 linear layers are Transformer Engine's without Megatron's hooks (no is_first_microbatch, no
// fuse_wgrad_accumulation into a main_grad): it quantises the fp32 weight to FP8 and its transpose every forward
// (read 4 B, write 1 + 1 B: 6 B per element), and its weight-gradient GEMM writes the activation dtype (bf16),
// which autograd casts to the fp32 parameter's (6 B): the same bytes as autocast's. Biases are cast with their
// weights; their 6 B per element are left out (h or f of h·f elements).
double autocast_weight_elements(const Op& op, Precision precision);  // weight elements `op`'s cast covers
// The forward's autocast weight casts as one op (bytes 0 in fp32 training or when nothing is cast).
Op autocast_weights_op(const std::vector<Op>& forward, Precision precision);
// The elements of a tied LM head's weight (the word embedding) in `backward`, 0 when the head is untied.
double tied_head_elements(const std::vector<Op>& backward);
// The work on the gradients `backward_op` produces before the framework's hook sees them: the cast back to fp32,
// the sum of a tied embedding's two gradients (`tied_elements`, at the embedding's backward) and, with
// `accumulate`, the add into .grad. Bytes 0 when there is none.
Op gradient_epilogue_op(const Op& backward_op, Precision precision, bool accumulate, double tied_elements = 0);
// GradScaler's unscale of the step's fp32 gradients before the optimizer (FP16 only; bytes 0 otherwise).
Op grad_unscale_op(double parameters, Precision precision);

// The tasks of those casts and accumulations for a replica's micro-batches, labelled once and added to a rank's
// compute stream by the frameworks' graphs. Each add_* adds nothing where the work is none (nullopt), else the
// task.
class EagerExtras {
 public:
  // accumulate = false: the replica's gradients are not accumulated where it runs (DataParallel's replicas).
  // forward_floor_per_kernel: the least time each forward cast kernel takes (DataParallel's launches under
  // the GIL).
  EagerExtras(const std::vector<Op>& forward, const std::vector<Op>& backward, Precision precision,
              std::uint32_t grad_accum, const calibrate::GpuPerformance& gpu, sim::TaskGraph& graph,
              bool accumulate = true, Seconds forward_floor_per_kernel = Seconds{});
  std::optional<sim::TaskId> add_weight_cast(sim::TaskGraph& graph, std::span<const sim::StreamId> stream,
                                             std::uint32_t mb, double slowdown, HostProgram* host,
                                             std::uint32_t rank) const {
    return add(weight_cast_.at(mb), graph, stream, slowdown, host, rank);
  }
  std::optional<sim::TaskId> add_epilogue(sim::TaskGraph& graph, std::span<const sim::StreamId> stream, std::size_t op,
                                          std::uint32_t mb, double slowdown, HostProgram* host,
                                          std::uint32_t rank) const {
    return add(epilogue_.at(mb).at(op), graph, stream, slowdown, host, rank);
  }
  // GradScaler's unscale of the step's gradients (FP16), after `deps` (the gradients' reduction).
  std::optional<sim::TaskId> add_unscale(sim::TaskGraph& graph, std::span<const sim::StreamId> stream,
                                         std::span<const sim::TaskId> deps, double slowdown, HostProgram* host,
                                         std::uint32_t rank) const {
    return add(unscale_, graph, stream, slowdown, host, rank, deps);
  }
  // The epilogue's time after backward op `op` in micro-batch `mb` (0 if none), before any slowdown.
  Seconds epilogue_time(std::size_t op, std::uint32_t mb) const;

 private:
  struct Piece {
    sim::LabelId label = 0;
    Seconds time;
    double kernels = 0;
    bool present = false;
  };
  std::optional<sim::TaskId> add(const Piece& p, sim::TaskGraph& graph, std::span<const sim::StreamId> stream,
                                 double slowdown, HostProgram* host, std::uint32_t rank,
                                 std::span<const sim::TaskId> deps = {}) const;
  std::vector<Piece> weight_cast_;            // per micro-batch
  std::vector<std::vector<Piece>> epilogue_;  // per micro-batch, per backward op
  Piece unscale_;                             // once per step, labelled with the last micro-batch
};

class CollectiveEngine;

// The tasks of one job inside a (possibly shared) task graph. Index r is the job's rank r, which
// runs on GPU job.gpus[r].
struct JobGraph {
  std::vector<sim::StreamId> compute_stream;  // per rank
  std::vector<sim::StreamId> comm_stream;     // per rank: data-parallel gradient communication
  std::vector<std::vector<sim::StreamId>> other_comm_streams;  // per rank: pipeline sends and receives
  std::vector<std::vector<sim::StreamId>> input_streams;       // per rank: loader and host-to-device copies
  std::vector<GradientBucket> buckets;
  std::vector<sim::TaskId> bucket_allreduce;  // task of each bucket's AllReduce (empty if dp == 1)
  std::vector<sim::TaskId> optimizer_task;    // per rank
  std::vector<sim::TaskId> step_end_task;     // work after the optimizer the step waits for (parameter all-gathers)
  // Host dispatch (host_dispatch.h; when the job's host_dispatch_per_kernel > 0): what each rank's host thread
  // issues, recorded by the builder, and the host stream per rank that simulate_scenario() builds from it.
  HostProgram host;
  std::vector<sim::StreamId> host_stream;
};

// Adds one optimizer step of `job` to `graph`; its collectives go through `collectives`.
JobGraph build_ddp_job(const Scenario& scenario, const Job& job, sim::TaskGraph& graph,
                       CollectiveEngine& collectives);

}  // namespace clustersim::workloads
