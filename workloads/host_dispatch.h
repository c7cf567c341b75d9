// Host dispatch: the framework's CPU thread that issues every kernel and collective of a GPU (PyTorch eager:
// Python module code, autograd, the dispatcher and the CUDA launch). Each GPU gets a "host" stream; for every
// GPU-side task a graph builder adds (compute kernels, TP/DP collectives, pipeline sends and receives) the
// host stream runs, in that GPU's program order, a dispatch task of
//     kernels(op) × host_dispatch_per_kernel
// (Op::kernels, transformer_ops.h; 1 per collective launch) and the GPU task waits for it. CUDA is
// asynchronous: the host runs ahead of the GPU and waits only at real synchronisation points. Megatron's
// pipeline p2p (p2p_communication._communicate) calls torch.cuda.synchronize() after batch_isend_irecv, so
// the host issues nothing of a step that received activations or gradients before the receive and the GPU
// work issued before it are done.
//
// A GPU op i then starts at max(end of op i − 1, end of its dispatch): host and GPU are two stages in series,
// and over a stretch without synchronisation (max-plus)
//     end = max_k (H_k + Σ_{i ≥ k} g_i),   H_k = Σ_{i ≤ k} h_i,
// which is h_1 + Σ g when the GPU is the bottleneck and Σ h + g_n when the host is. The analytical path uses
// the recursion itself over segments of ops (host_gpu_segments), or max(Σ g + h_1, Σ h + g_n) per stretch
// (host_gpu_stretch_bound; exact when every op has the same h and g).
//
// Units: seconds. With host_dispatch_per_kernel = 0 (the default) nothing is added and results are those of
// the model without host dispatch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/task_graph.h"
#include "sim/units.h"

namespace clustersim::workloads {

inline constexpr const char* kHostStream = "host";
inline constexpr const char* kCategoryHost = "host_dispatch";
// Host dispatches per collective or Send/Recv launch (one NCCL kernel).
inline constexpr double kCollectiveKernels = 1;

// The host programs of a job's ranks, recorded while a graph builder adds GPU tasks and turned into host
// streams by build(). Positions order a rank's issues: issue() appends; issue_after()/issue_before() place an
// issue right after or before another task's issue on the same rank (ties keep the order of the calls).
class HostProgram {
 public:
  HostProgram() = default;
  HostProgram(Seconds per_kernel, std::size_t ranks) : per_kernel_(per_kernel), ranks_(ranks) {}

  bool enabled() const { return per_kernel_.raw() > 0; }
  Seconds per_kernel() const { return per_kernel_; }

  // `rank`'s host issues `task` (standing for `kernels` dispatches) after everything it issued so far.
  // `device_work`: work on the rank's compute stream, which a torch.cuda.synchronize() waits for.
  void issue(std::uint32_t rank, sim::TaskId task, double kernels, bool device_work = true);
  void issue_after(std::uint32_t rank, sim::TaskId anchor, sim::TaskId task, double kernels);
  void issue_before(std::uint32_t rank, sim::TaskId anchor, sim::TaskId task, double kernels);
  // Before it issues `anchor`, `rank`'s host waits for `task` and for the compute-stream work issued before
  // `anchor` (a receive followed by torch.cuda.synchronize()).
  void synchronize_before(std::uint32_t rank, sim::TaskId anchor, sim::TaskId task);

  // Adds a host stream on GPU gpus[rank] for every rank with issues, its dispatch tasks, and the dependency
  // of every GPU task on its dispatches. Returns the host stream per rank (0 where none).
  std::vector<sim::StreamId> build(sim::TaskGraph& graph, std::span<const std::uint32_t> gpus) const;

 private:
  struct Issue {
    double position;
    sim::TaskId task;
    float kernels;
    bool device_work;
  };
  std::vector<Issue>& of(std::uint32_t rank);
  // The issue of `task` on `rank`: a rank's issues are recorded in increasing task order (each right after its
  // task is added), so a binary search finds it.
  std::size_t index_of(std::uint32_t rank, sim::TaskId task) const;
  void record(std::uint32_t rank, double position, sim::TaskId task, double kernels, bool device_work);

  Seconds per_kernel_;
  std::size_t ranks_ = 0;
  std::vector<std::vector<Issue>> issues_;                                 // per rank, in call order
  std::vector<double> next_;                                               // per rank: the next appended position
  std::vector<std::vector<std::pair<sim::TaskId, sim::TaskId>>> waits_;    // per rank: (anchor, task it waits for)
};

// Analytical form: the end of an uninterrupted stretch of ops with host times `host` and GPU times `gpu`,
// both starting at 0 (exact max-plus recursion).
double host_gpu_stretch(std::span<const double> host, std::span<const double> gpu);
// Its closed-form bound from totals: max(Σ g + h_1, Σ h + g_n).
double host_gpu_stretch_bound(double gpu_total, double host_total, double first_dispatch, double last_kernel);
// The same recursion over segments of a stretch (a layer, the embedding, the head): each with its host and GPU
// totals and its excursion X = max_i (H_i − Σ_{i' < i} g_i') over its own ops (≥ its first dispatch). With
// P_j = Σ_{j' < j} (host_j' − gpu_j'), the stretch ends at Σ gpu + max_j (P_j + X_j) — exact max-plus when the
// GPU never waits for anything but the host. Repeated `reps` times back to back (micro-batches without a
// synchronisation), the drift D = Σ host − Σ gpu per pass adds max(0, (reps − 1)·D).
struct HostSegment {
  double host = 0, gpu = 0, excursion = 0;
};
// The excursion of a list of ops with host times `host` and GPU times `gpu`.
double host_excursion(std::span<const double> host, std::span<const double> gpu);
double host_gpu_segments(std::span<const HostSegment> segments, double reps = 1);

}  // namespace clustersim::workloads
