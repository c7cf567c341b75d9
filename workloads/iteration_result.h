// Simulates one optimizer step of a scenario and derives what users read off it:
// iteration time, throughput, MFU, where the time goes, memory, and time to train.
//
// Breakdown per GPU (each a share of the iteration time, summing to it):
//   compute       time the compute stream is busy,
//   exposed_comm  time a communication stream is busy while the compute stream is idle,
//   exposed_input time the input streams (data loader, host-to-device copy; input_pipeline.h) are busy
//                 while neither compute nor communication runs: an input stall,
//   exposed_host  time the host thread is dispatching kernels (host_dispatch.h) while none of the above runs:
//                 the GPU waits for the CPU (0 unless the job sets host_dispatch_per_kernel),
//   idle          the rest (waiting on other GPUs, launch gaps).
// MFU = model FLOPs per step / (iteration time · GPUs · dense tensor peak of the precision); model
// FLOPs count every GEMM (attention scores and LM head included) forward and backward without
// recomputation and without a causal-mask discount: 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) at f = 4h
// (Korthikanti et al. 2022; PaLM App. B's MFU with the attention term).
// Training-time identity: global_batch = micro_batch · grad_accum · DP;
//   optimizer_steps = ⌈epochs · samples / global_batch⌉; micro_batch_steps = optimizer_steps · grad_accum;
//   time_to_train = optimizer_steps · iteration_time; GPU-hours = time_to_train · GPUs / 3600 s.
// Step counts are whole numbers up to kMaxTrainingSteps (scenario.h); inputs that need more are refused where
// they are read.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/trace.h"
#include "workloads/ddp_graph.h"
#include "workloads/memory_model.h"
#include "workloads/network_model.h"
#include "workloads/scenario.h"

namespace clustersim::workloads {

// Kinds of communication, in the order exposed time is attributed where two run at once (CommKind).
enum class CommKind { kTp, kCp, kEp, kPp, kDp };
inline constexpr std::size_t kCommKinds = 5;
const char* to_string(CommKind k);  // "tp", "cp", "ep", "pp", "dp"
const char* label(CommKind k);      // "TP", "CP", "EP", "PP", "DP", as the summary and the reports print them

struct TimeBreakdown {
  Seconds compute;
  Seconds exposed_comm;
  // exposed_comm by kind (index CommKind): tensor-parallel collectives on the compute stream count whole; the
  // other streams' communication counts where the compute stream is idle, an instant where several kinds run going
  // to the first of TP, CP, EP, PP, DP. Horovod's negotiation cycles count as DP. The parts add up to exposed_comm.
  std::array<Seconds, kCommKinds> exposed_by_kind{};
  Seconds exposed_input;   // data loader and host-to-device copies while nothing else runs
  Seconds exposed_host;    // the host thread issuing kernels while the GPU runs nothing (host_dispatch.h)
  Seconds idle;
  // Of `compute`: PyTorch eager mixed-precision work (DDP, Horovod, DataParallel; ddp_graph.h): autocast's weight
  // and gradient casts, the accumulation into .grad, GradScaler's unscale. 0 for the other frameworks.
  Seconds compute_eager;
};

struct TrainingTime {
  std::uint64_t optimizer_steps = 0;
  std::uint64_t micro_batch_steps = 0;
  Seconds time_to_train;
  double gpu_hours = 0;
};

struct IterationResult {
  std::string job;
  Seconds iteration_time;
  double tokens_per_s = 0;
  double samples_per_s = 0;
  Flops model_flops_per_step;
  double mfu = 0;
  Flops hardware_flops_per_step;        // model FLOPs plus the recomputed forward (HFU numerator)
  double hfu = 0;                       // hardware FLOPs utilisation
  double mfu_causal = 0;                // MFU counting half of each causal attention square
  std::vector<TimeBreakdown> per_gpu;   // index = the job's rank (GPU job.gpus[rank])
  TimeBreakdown breakdown;              // of the GPU with the most exposed communication (ties: lowest index)
  std::uint32_t breakdown_gpu = 0;      // global GPU index
  std::vector<GradientBucket> buckets;
  std::vector<Seconds> bucket_allreduce;   // how long each bucket's AllReduce ran (empty at DP 1)
  MemoryEstimate memory;                   // of the GPU with the highest peak (the worst pipeline stage's)
  // Megatron with pp > 1: each pipeline stage's peak, index = stage; `memory` is stage memory_stage's.
  std::vector<Bytes> stage_peak_memory;
  std::uint32_t memory_stage = 0;
  TrainingTime training;
  // Symmetry reduction: the ranks the simulation ran (the others copy them), how many data-parallel replicas
  // and tensor ranks of each TP group they form; the job's ranks, dp and tp when it was not applied.
  std::uint32_t simulated_ranks = 0;
  std::uint32_t simulated_replicas = 0;
  std::uint32_t simulated_tensor_ranks = 0;
};

// Every job of a scenario simulated together (they share the cluster's links).
struct ScenarioResult {
  std::vector<IterationResult> jobs;     // in the scenario's order
  Seconds makespan;                      // until the last job's optimizer step ends
  std::vector<LinkUsage> links;          // FLOW fidelity: links that carried traffic, busiest first
  std::uint64_t events = 0;
  std::size_t tasks = 0;
  bool symmetry_reduced = false;         // some job simulated only part of its replicas or tensor ranks
  std::uint32_t simulated_gpus = 0;      // GPUs whose tasks were simulated, over every job
};

// Symmetry reduction (DESIGN.md §4; megatron_graph.h). kAuto applies it where it is exact: ANALYTICAL
// fidelity, one job, a Megatron layout, no slow GPUs, no link faults (symmetry_may_apply), and
// megatron_simulated_replicas() proves the replicas identical. Then only the first data-parallel replica (the
// first EP group of replicas with ep > 1) is simulated, and with tp > 2 only tensor ranks 0 and 1 of it where
// megatron_simulated_tensor_ranks() proves ranks 2 … tp − 1 run as rank 1; trace sinks see their tasks only;
// every other rank's breakdown is copied from its mirror (megatron_mirror_rank); memory, throughput and MFU
// are the whole job's. The DDP, ZeRO/FSDP, DataParallel and Horovod graphs are always simulated whole.
enum class Symmetry { kAuto, kOff };

// The scenario-wide conditions of the reduction (everything but the proof per job): where they hold, data-parallel
// replica 0 is the one simulated, so a caller choosing GPUs to show takes them from it.
bool symmetry_may_apply(const Scenario& scenario);

// Exposed time of `busy` intervals not covered by `cover` intervals; both sorted by start and
// internally non-overlapping (as the tasks of one stream are).
Seconds exposed_time(const std::vector<std::pair<sim::SimTime, sim::SimTime>>& busy,
                     const std::vector<std::pair<sim::SimTime, sim::SimTime>>& cover);
// The same in whole picoseconds, exact at any length (Seconds lose picoseconds past 2^53 ps, about 2.5 hours,
// and a breakdown built from them stopped adding up).
sim::SimTime exposed_ps(const std::vector<std::pair<sim::SimTime, sim::SimTime>>& busy,
                        const std::vector<std::pair<sim::SimTime, sim::SimTime>>& cover);

// Optimizer steps for `steps` global batches of data: a partial last batch still costs a step, so
// ceil(steps), at least 1 for any data at all. A value within 4 ulps of a whole number counts as that number, so
// 1000 / 10 does not become 101 when the division rounds up by an ulp, at any count (an absolute 1e-9 stops
// helping past 1e7 steps, and scaling by 1 − 1e-12 took whole steps off counts from 1e12 on).
std::uint64_t optimizer_steps_for(double steps);

// Optimizer steps of a run: `epochs` passes over `samples_per_epoch` in global batches of `global_batch`.
// per_epoch (a PyTorch DataLoader, which every framework but Megatron-LM reads through): each pass ends with its
// own partial batch, ⌊E⌋·⌈N/G⌉ + ⌈(E − ⌊E⌋)·N/G⌉ (2 epochs of 1005 samples in batches of 10: 2 × 101 = 202);
// otherwise Megatron-LM's sample stream runs on across epochs, ⌈E·N/G⌉ (201).
std::uint64_t run_optimizer_steps(double epochs, double samples_per_epoch, std::uint64_t global_batch, bool per_epoch);

// `per_epoch`: as run_optimizer_steps (true for every framework but Megatron-LM).
TrainingTime training_time(const TrainingJob& job, std::uint32_t grad_accum, std::uint32_t gpus, Seconds iteration_time,
                           bool per_epoch);

// Runs one iteration of every job at once. Sinks (e.g. a Chrome trace writer) receive every simulated task's
// record (with the symmetry reduction, those of the simulated replicas).
// With `link_counters` (FLOW fidelity), the throughput of the `counter_links` busiest links over time
// is added to that trace as counter tracks.
ScenarioResult simulate_scenario(const Scenario& scenario, const std::vector<sim::TraceSink*>& sinks = {},
                                 sim::ChromeTraceWriter* link_counters = nullptr, std::size_t counter_links = 8,
                                 Symmetry symmetry = Symmetry::kAuto);

}  // namespace clustersim::workloads
