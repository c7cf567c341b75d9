// `clustersim plan SCENARIO --tokens T (--deadline-days D | --gpus N) [--price-per-gpu-hour P]
//  [--gpu-power-w W] [--node-power-w W] [--pue P] [--failure-rate-per-gpu-hour R] [--checkpoint-write-s S]
//  [--restart-s S] [--top K]`:
// capacity planning for a token budget with the sweep's best layout (sweep_command.h).
//
//  * Training time on N GPUs: optimizer_steps = ⌈T / (global_batch · s)⌉, time = steps · iteration time of
//    the best layout (analytical ranking; --top K re-simulates the best K and takes the simulated best).
//    GPU-hours = time · N / 3600 s; cost = GPU-hours · P; energy = N · W · time (GPU board power only);
//    with --node-power-w or --pue, the facility's energy = (N · W + nodes · W_node) · PUE · time, nodes =
//    ⌈N / GPUs per node⌉ (a node draws its CPUs, memory, NICs, switches and fans however few of its GPUs a job
//    uses; W_node default 0) and PUE (power usage effectiveness, The Green Grid: facility energy over IT
//    energy, >= 1; default 1).
//  * Failures: each GPU fails at rate λ per hour, so the job is interrupted at MTBF = 1 / (N · λ). Default λ
//    from the Llama 3 405B report (Dubey et al. 2024, §3.3.4): 419 unexpected interruptions in 54 days on
//    16,384 GPUs, λ = 419 / (54 · 24 · 16,384) = 1.973e-5 per GPU-hour.
//    Checkpoints every τ, each costing δ (write) — Young's optimum τ = √(2·δ·MTBF) (Young 1974; the first
//    order of Daly 2006). Expected waste per unit of wall time: δ/τ (writing) + τ/(2·MTBF) (work lost
//    since the last checkpoint, half an interval on average) + R/MTBF (restart R per interruption);
//    effective training time ratio = 1 − waste, wall time = training time / ratio.
//    Defaults δ = 60 s and R = 600 s are allowances, not measurements: set them from the real system.
//  * --deadline-days D: the smallest GPU count in whole NVLink domains (nodes; a rack such as GB200 NVL72
//    where a domain spans several nodes, the unit one buys) whose wall time (with failures) meets D; the search
//    starts at the compute bound N ≥ 6·P·T' / (peak · D), T' the tokens of the whole optimizer steps, and goes
//    up a domain at a time to --max-gpus.
//  * GPU power (--gpu-power-w): the profile has no power figure; the default is the board's maximum power
//    from NVIDIA's datasheets for the profile's GPU: A100 SXM 400 W (A100 PCIe 300 W), H100 SXM 700 W
//    (H100 PCIe 350 W), H200 SXM 700 W; GB200 (a Blackwell GPU of GB200 NVL72) 1,200 W, the power limit nvidia-smi
//    reports for it and NVIDIA's Blackwell brief states for the GB200 GPU (the NVL72 datasheet gives no per-GPU
//    figure). Other GPUs report no energy unless the option is given.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "cli/sweep_command.h"
#include "workloads/scenario.h"

namespace clustersim::cli {

inline constexpr double kLlama3FailuresPerGpuHour = 419.0 / (54.0 * 24.0 * 16384.0);

struct Goodput {
  double mtbf_h = 0;            // hours between interruptions of the whole job
  double interval_h = 0;        // Young's checkpoint interval
  double waste_fraction = 0;    // checkpoint writes + lost work + restarts, per unit of wall time
  double effective_ratio = 1;   // 1 − waste (0 when the job never progresses)
};

// The formulas of the header; rate per GPU-hour, costs in seconds.
Goodput goodput(std::uint32_t gpus, double failures_per_gpu_hour, Seconds checkpoint_write, Seconds restart);

// Board power of the profile's GPU (see the header); nullopt when unknown.
std::optional<double> default_gpu_power_w(const std::string& gpu);

struct PlanOptions {
  double tokens = 0;
  std::optional<double> deadline_days;
  std::optional<std::uint32_t> gpus;
  std::optional<double> price_per_gpu_hour;
  std::optional<double> gpu_power_w;
  std::optional<double> node_power_w;  // the rest of a node (CPUs, memory, NICs, fans), W per node
  std::optional<double> pue;           // facility energy / IT energy, >= 1
  double failures_per_gpu_hour = kLlama3FailuresPerGpuHour;
  Seconds checkpoint_write = seconds(60);
  Seconds restart = seconds(600);
  std::uint32_t top = 0;
  std::uint32_t jobs = 1;
  std::uint32_t max_gpus = 131072;
};

struct PlanPoint {
  std::uint32_t gpus = 0;
  std::string layout;
  bool simulated = false;       // the iteration time comes from the event-driven model
  Seconds iteration_time;
  double mfu = 0;
  std::uint64_t optimizer_steps = 0;
  Seconds train_time;           // without failures
  double gpu_hours = 0;         // GPUs x training time without failures
  Goodput goodput;
  Seconds wall_time;            // with failures (infinite when the waste is 100 % or more)
  double held_gpu_hours = 0;    // GPUs x wall time: what a reservation of the GPUs for the whole run costs
  std::optional<double> energy_kwh;  // the GPUs' board power over the training time without failures
  // With node power or a PUE given: (GPUs' + nodes' power) x PUE over the same time.
  std::optional<double> facility_energy_kwh;
  std::optional<double> cost;        // gpu_hours x price
  std::optional<double> held_cost;   // held_gpu_hours x price
};

// The best layout on `gpus` GPUs and the training time, or nullopt when no layout fits.
std::optional<PlanPoint> plan_for_gpus(const workloads::Scenario& scenario, std::uint32_t gpus,
                                       const PlanOptions& options);

struct PlanResult {
  std::optional<PlanPoint> point;   // the answer (the smallest meeting the deadline, or the given N)
  std::uint32_t searched = 0;       // GPU counts tried
  std::uint32_t search_from = 0;    // the compute bound the search started at
  std::uint32_t search_limit = 0;   // --max-gpus rounded down to whole search steps
  double compute_bound = 0;         // GPUs that would train at the dense peak in time (unrounded, uncapped)
  std::uint32_t fabric_limit = 0;   // when the scenario's fabric holds fewer GPUs than --max-gpus: the most it holds
  bool fixed_size = false;          // a torus or explicit cluster: only its own GPU count was tried
  // With no answer to a deadline search: of the counts tried, the one with the shortest wall time (ties: the
  // fewest GPUs), so the user sees how far the deadline is; empty when no layout ran on any of them.
  std::optional<PlanPoint> closest;
};
PlanResult run_plan(const workloads::Scenario& scenario, const PlanOptions& options);
std::string plan_text(const workloads::Scenario& scenario, const PlanOptions& options, const PlanResult& result);
// The same as a report document (cli/html_report.h): HTML with a wall-time chart, or Markdown.
enum class ReportFormat;
std::string plan_report(const workloads::Scenario& scenario, const PlanOptions& options, const PlanResult& result,
                        ReportFormat format);

int plan_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace clustersim::cli
