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
// optimizer step waits for every bucket.
#pragma once

#include <cstdint>
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
