// The input side of a training step: the data loader and the host-to-device copy of each micro-batch.
//
// Data loader. Each node runs one loader (PyTorch DataLoader workers) producing samples at
// `training.loader_samples_per_s_per_node`; a micro-batch for the ranks of a node that read input costs
// (samples those ranks need) / rate on the node's "loader" stream. The loader's queue holds
// `training.loader_prefetch` micro-batches (PyTorch's prefetch_factor, default 2) filled while the
// previous step's backward, gradient reduction and optimizer ran, so the first that many micro-batches of
// the step are ready at its start and the rest are produced one after another from then on. A loader
// slower than the step stalls the step: a rank cannot start a micro-batch's forward before its input is
// on the GPU. In the steady state the loader also refills the queue for the next step within this one:
// min(q, m) more micro-batches, each once its slot is freed (the micro-batch q places before it copied to
// the GPU), and the step ends no earlier. So a loader-bound step takes m micro-batches' production, not the
// m − q the step waits for, and a deep queue hides the loader only when it keeps up on average. Unset rate:
// the loader is never the bottleneck (no loader tasks).
// Which ranks read input: every DDP rank; in Megatron-LM the tensor-rank-0 GPU of the first and of the
// last pipeline stage (the first needs tokens, the last the labels; `get_batch` broadcasts the batch
// to the other tensor ranks), per data-parallel replica.
//
// Host-to-device copy. Each reading rank copies the micro-batch's token tensor — b·(s + 1) int64 tokens,
// from which inputs and labels are sliced (Megatron's `get_batch`, torch's default LongTensor) — over
// its host link at `training.host_to_device` on its "h2d" stream, after the loader produced it; the
// micro-batch's first compute kernel on that rank waits for the copy.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/scenario.h"

namespace clustersim::workloads {

inline constexpr const char* kCategoryInput = "input";

// Bytes one micro-batch copies to the GPU: b·(s + 1)·8 (int64 tokens).
Bytes micro_batch_input_bytes(const ModelSpec& model, std::uint32_t micro_batch);

struct InputPipeline {
  // The H2D copy of micro-batch k on each reading rank, to be waited for by that micro-batch's first
  // kernel there. Keys are (rank, micro-batch).
  std::map<std::pair<std::uint32_t, std::uint32_t>, sim::TaskId> ready;
  // Per job rank: the input streams whose busy time, when nothing else runs, is an input stall of that
  // rank — its own "h2d" stream (readers) and its node's "loader" stream (every rank of the node).
  std::vector<std::vector<sim::StreamId>> streams;
  // Per loader: its last refill of the next step's prefetch queue; the step ends no earlier (a job graph adds
  // these to its step_end_task).
  std::vector<sim::TaskId> refill_end;
};

// `readers` are job ranks; `micro_batches` is m.
InputPipeline add_input_pipeline(const Scenario& scenario, const Job& job, sim::TaskGraph& graph,
                                 const std::vector<std::uint32_t>& readers, std::uint32_t micro_batches);

}  // namespace clustersim::workloads
