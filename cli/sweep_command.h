// `clustersim sweep SCENARIO [--gpus N] [--top K] [--csv FILE] [--json FILE] [--jobs J]
//  [--allow-tp-across-nodes] [--report FILE.html|FILE.md]`: every valid parallel layout of the scenario's first job,
//  scored by the
// analytical fast path (workloads/analytical_estimate.h), OOM layouts rejected with the memory part that
// breaks them, the best K re-simulated with the event-driven model, ranked, and the Pareto front of
// iteration time versus memory headroom.
//
// The layouts (Megatron-LM's dimensions; N GPUs, global batch B, the model's l layers, a heads, n_kv
// key/value heads, sequence s, E routed experts):
//   tp   divides N, a and n_kv, and fits in one NVLink domain (gpus_per_node · nvlink_domain_nodes; the
//        whole cluster on a torus) unless --allow-tp-across-nodes. The vocabulary needs no rule: the ops
//        split V/tp (Megatron pads the vocabulary to a multiple of 128·tp; clustersim does not pad).
//   cp   context parallelism (ring attention), divides N/tp and s/2 (causal load balancing: 2 chunks per rank);
//   pp   divides l and N/(tp·cp);  dp = N/(tp·cp·pp), which must divide B;
//   ep   expert parallelism, MoE models only: divides dp and E (carved out of DP);
//   mb   divides B/dp; grad_accum m = B/(mb·dp);
//   vp   with pp > 1, divides l/pp; vp > 1 runs interleaved 1F1B and needs m a multiple of pp; vp = 1
//        keeps the scenario's schedule (GPipe or 1F1B);
//   recompute none, selective, full;  sequence parallelism off, or on when tp > 1;
//   distributed optimizer off, or on when dp·cp > 1.
// Those are Megatron-LM layouts (framework MEGATRON, named "tp2 cp2 pp2 dp2 ep2 vp2 mb1 sp sel dopt", cp and
// ep shown when > 1). Pure data parallelism (tp = cp = pp = ep = 1) also runs, per micro-batch size, under
// the other frameworks: PyTorch DDP ("ddp"; with FlashAttention, F.scaled_dot_product_attention's flash kernel),
// FSDP FULL_SHARD and SHARD_GRAD_OP ("fsdp3", "fsdp2"; ZeRO 3 and 2) and, when the job spans
// more than one node, their hybrid-sharded forms ("hsdp3", "hsdp2": shard in a node, replicate across), and
// DeepSpeed ZeRO stages 1–3 ("zero1", "zero2", "zero3"). FSDP and DeepSpeed
// each without and with activation checkpointing (every block recomputed: recompute FULL, " full"), with the
// scenario's attention kernel; none of them takes Megatron's other options (SP, distributed optimizer,
// overlap_grad_reduce, pp_scatter_gather).
// FlashAttention, the rank order, DDP bucket size, overlap_grad_reduce, the MoE capacity factor and token skew
// and (where they stay valid) pp_scatter_gather, tp_comm_overlap (with SP) and overlap_param_gather (with the
// distributed optimizer) stay as the scenario sets them.
//
// Ranking: the top K by analytical time (ties by layout name) are re-simulated — each with the scenario's
// fidelity on a copy of the scenario holding just that job — and ranked by simulated time, ties by name.
// The ranking and every output byte are independent of --jobs (each thread scores a fixed slice with its
// own estimator; the results land in enumeration order).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/html_report.h"
#include "workloads/analytical_estimate.h"
#include "workloads/iteration_result.h"
#include "workloads/scenario.h"

namespace clustersim::cli {

struct SweepOptions {
  std::optional<std::uint32_t> gpus;  // default: the first job's GPU count
  std::uint32_t top = 10;
  std::uint32_t jobs = 1;
  bool allow_tp_across_nodes = false;
  bool progress = false;              // draw a progress bar on stderr once the work takes over 2 s
};

struct SweepLayout {
  workloads::ParallelPlan plan;
  std::string name;                   // "tp4 pp8 dp32 vp2 mb1 sp sel"
  workloads::AnalyticalEstimate estimate;
  std::optional<workloads::IterationResult> simulated;  // the top K
};

struct SweepResult {
  workloads::Scenario scenario;       // the swept job alone, on the swept GPU count
  std::uint32_t gpus = 0;
  std::vector<SweepLayout> layouts;   // every enumerated layout, in enumeration order
  std::vector<std::size_t> ranked;    // re-simulated layouts, fastest simulated first
  std::vector<std::size_t> pareto;    // fits in memory, not dominated in (analytical time, headroom); fastest first
  std::size_t valid = 0;
  std::map<std::string, std::size_t> rejected;  // reason → count: OOM parts and structural rules
};

// The scenario the sweep runs on: its first job alone on `gpus` GPUs (the cluster resized to whole nodes).
// The most GPUs sweep --gpus and plan (--gpus, --max-gpus) take: 2^20, 64 times the largest clusters built
// today; a layout search beyond it would run for hours without saying why.
inline constexpr std::uint32_t kMaxPlannedGpus = std::uint32_t{1} << 20;

workloads::Scenario sweep_scenario(const workloads::Scenario& scenario, std::optional<std::uint32_t> gpus);

// Every valid layout of the scenario's first job (see the header); structural rejections are counted
// into `rejected` when given.
std::vector<workloads::ParallelPlan> enumerate_layouts(const workloads::Scenario& scenario, bool allow_tp_across_nodes,
                                                       std::map<std::string, std::size_t>* rejected = nullptr);

std::string layout_name(const workloads::ParallelPlan& plan);

SweepResult run_sweep(const workloads::Scenario& scenario, const SweepOptions& options);

std::string sweep_text(const SweepResult& result);
std::string sweep_csv(const SweepResult& result);
std::string sweep_json(const SweepResult& result);
// The ranked table, rejections, Pareto table and scatter plot (cli/html_report.h): HTML or Markdown.
std::string sweep_report(const SweepResult& result, ReportFormat format);

int sweep_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace clustersim::cli
