// Speed of `clustersim sweep` on GPT-3 175B at 1,024 GPUs (issue 8, point 2): layouts scored per second per
// core by the analytical path over the whole space (tp, cp, pp, dp, vp, micro-batch, recompute, SP,
// distributed optimizer; DDP/FSDP/DeepSpeed for pure data parallelism; ep for MoE models), the whole sweep's
// wall time with top-K re-simulation, peak RSS.
//
//   clustersim_bench_sweep [--gpu a100|h100] [--gpus N] [--top K] [--jobs J] [--fidelity flow|analytical]
//                          [--model PRESET]   (e.g. mixtral-8x7b for the expert-parallel space)
//
// Defaults: A100 (DGX A100 nodes, 8 × HDR 200 Gb/s per node), 1,024 GPUs, global batch 1,536, sequence
// 2,048 (Narayanan et al. 2021), top 20, 2 threads, the re-simulation at ANALYTICAL fidelity (FLOW on 1,024
// GPUs is much slower: pass --fidelity flow to measure it). Prints measurements, never asserts on them.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/bench_args.h"
#include "cli/scenario_loader.h"
#include "cli/sweep_command.h"
#include "workloads/analytical_estimate.h"

using namespace clustersim;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // kilobytes on Linux
}

double cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec) + double(u.ru_utime.tv_usec) * 1e-6 + double(u.ru_stime.tv_sec) +
         double(u.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

int main(int argc, char** argv) {
  std::string gpu = "a100", fidelity = "analytical", model = "gpt3-175b";
  unsigned gpus = 1024, top = 20, jobs = 2;
  constexpr const char* kUsage =
      "clustersim_bench_sweep [--gpu a100|h100] [--gpus N] [--top N] [--jobs N] [--fidelity analytical|flow] "
      "[--model PRESET]";
  const auto args =
      bench::bench_options(argc, argv, kUsage, {"--gpu", "--gpus", "--top", "--jobs", "--fidelity", "--model"});
  if (args.count("--gpu")) gpu = args.at("--gpu");
  if (args.count("--fidelity")) fidelity = args.at("--fidelity");
  if (args.count("--model")) model = args.at("--model");
  gpus = static_cast<unsigned>(bench::bench_whole(args, "--gpus", gpus, kUsage));
  top = static_cast<unsigned>(bench::bench_whole(args, "--top", top, kUsage));
  jobs = static_cast<unsigned>(bench::bench_whole(args, "--jobs", jobs, kUsage));
  if (gpu != "a100" && gpu != "h100") bench::bench_usage_error(kUsage, "--gpu: \"" + gpu + "\" is not a100 or h100");
  if (fidelity != "analytical" && fidelity != "flow")
    bench::bench_usage_error(kUsage, "--fidelity: \"" + fidelity + "\" is not analytical or flow");
  const bool h100 = gpu == "h100";
  const std::string text =
      "name: \"" + model + " sweep\"\ncluster { nodes: " + std::to_string(gpus / 8) +
      " gpus_per_node: 8 gpu: \"" + (h100 ? "H100-SXM5-80GB" : "A100-SXM4-80GB") +
      "\" nvlink_gbytes_per_s_per_direction: " + (h100 ? "450" : "300") +
      " nic_gbits_per_s_per_direction: " + (h100 ? "400" : "200") + " }\nprofile: \"" +
      (h100 ? "h100-sxm5-80gb" : "a100-sxm4-80gb") + "\"\nfidelity: " + (fidelity == "flow" ? "FLOW" : "ANALYTICAL") +
      "\nmodel { preset: \"" + model + "\" }\n"
      "parallel { tp: 8 pp: 16 dp: " + std::to_string(gpus / 128) + " micro_batch: 1 grad_accum: " +
      std::to_string(1536 / (gpus / 128)) + " flash_attention: true }\n"  // flash: context parallelism is swept too
      "training { tokens: 300000000000 global_batch: 1536 }\n";
  const workloads::Scenario sc = cli::load_scenario_text(text, "gpt3-175b-sweep.textproto", false, "");

  // 1. The analytical path alone, one thread: layouts per second per core (caches warm after the first pass).
  const workloads::Scenario swept = cli::sweep_scenario(sc, std::nullopt);
  const auto plans = cli::enumerate_layouts(swept, false);
  workloads::AnalyticalEstimator estimator(swept, swept.jobs[0]);
  double t0 = now_s();
  double checksum = 0;
  for (const auto& p : plans) checksum += estimator.estimate(p).iteration_time.raw();
  const double cold = now_s() - t0;
  const int passes = 3;
  t0 = now_s();
  for (int k = 0; k < passes; ++k)
    for (const auto& p : plans) checksum += estimator.estimate(p).iteration_time.raw();
  const double warm = (now_s() - t0) / passes;
  std::printf("%s on %u %s GPUs, global batch 1536\n", model.c_str(), gpus, h100 ? "H100" : "A100");
  std::size_t with_cp = 0, with_ep = 0, sharded = 0, ddp = 0;
  for (const auto& p : plans) {
    with_cp += p.cp > 1 ? 1 : 0;
    with_ep += p.ep > 1 ? 1 : 0;
    const workloads::Framework f = p.effective_framework();
    sharded += f == workloads::Framework::kFsdp || f == workloads::Framework::kDeepSpeed ? 1 : 0;
    ddp += f == workloads::Framework::kPytorchDdp ? 1 : 0;
  }
  std::printf("  layouts enumerated        %zu (cp > 1: %zu, ep > 1: %zu, FSDP/DeepSpeed: %zu, DDP: %zu)\n",
              plans.size(), with_cp, with_ep, sharded, ddp);
  std::printf("  analytical, first pass    %.3f s  (%.0f layouts/s on one core, per-op costs computed)\n", cold,
              double(plans.size()) / cold);
  std::printf("  analytical, cached        %.3f s  (%.0f layouts/s on one core)\n", warm, double(plans.size()) / warm);

  // 2. The whole sweep as the command runs it.
  cli::SweepOptions options;
  options.top = top;
  options.jobs = jobs;
  const double cpu0 = cpu_s();
  t0 = now_s();
  const cli::SweepResult r = cli::run_sweep(sc, options);
  const double wall = now_s() - t0, cpu = cpu_s() - cpu0;
  std::printf("  whole sweep, %u threads    %.2f s wall, %.2f s CPU: %zu fit, top %zu re-simulated (%s)\n", jobs, wall,
              cpu, r.valid, r.ranked.size(), fidelity.c_str());
  if (!r.ranked.empty()) {
    const auto& best = r.layouts[r.ranked.front()];
    std::printf("  best layout               %s: %.3f s simulated, %.3f s analytical, MFU %.1f %%\n", best.name.c_str(),
                best.simulated->iteration_time.raw(), best.estimate.iteration_time.raw(), 100 * best.simulated->mfu);
  }
  std::printf("  peak RSS                  %.0f MiB\n", peak_rss_mib());
  std::printf("  (checksum %.6g)\n", checksum);
  return 0;
}
