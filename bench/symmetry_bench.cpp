// Symmetry-reduction benchmark (not a test): wall time, events/s and peak memory of one iteration of
// GPT-3 175B on 1,024 A100 (128 DGX A100, non-blocking three-level Clos as Selene's; tp 8, pp 16, dp 8, 1F1B,
// micro-batch 1, global batch 1536 = 192 micro-batches, full recomputation) at ANALYTICAL fidelity, with the
// data-parallel replicas simulated once and tensor ranks 2-7 mirrored from rank 1 (reduced: 32 GPUs) and every
// GPU simulated (full). Each run is a child process, so that its peak resident memory is its own.
//   build-sym/bench/clustersim_bench_symmetry [--mode both|reduced|full] [--pp 16 --dp 8]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/bench_args.h"
#include "cli/scenario_loader.h"
#include "workloads/iteration_result.h"

using namespace clustersim;

namespace {

workloads::Scenario gpt3_175b(std::uint32_t pp, std::uint32_t dp) {
  const std::uint32_t gpus = 8 * pp * dp;
  const std::string text =
      "name: \"GPT-3 175B on " + std::to_string(gpus) + " A100\"\n"
      "cluster { node_preset: \"dgx-a100\" nodes: " + std::to_string(gpus / 8) +
      " fabric { kind: CLOS_THREE_LEVEL oversubscription: 1.0 } }\n"
      "profile: \"a100-sxm4-80gb\"\n"
      "fidelity: ANALYTICAL\n"
      "model { preset: \"gpt3-175b\" }\n"
      "parallel { tp: 8 pp: " + std::to_string(pp) + " dp: " + std::to_string(dp) +
      " micro_batch: 1 grad_accum: " + std::to_string(1536 / dp) + " schedule: ONE_F_ONE_B recompute: FULL }\n"
      "training { global_batch: 1536 tokens: 300000000000 precision: BF16 }\n";
  return cli::load_scenario_text(text, "symmetry_bench", false, ".");
}

void run_one(const workloads::Scenario& sc, workloads::Symmetry mode) {
  const auto t0 = std::chrono::steady_clock::now();
  const workloads::ScenarioResult r = workloads::simulate_scenario(sc, {}, nullptr, 8, mode);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  std::printf("%-8s simulated %u of %zu GPUs: %zu tasks, %llu events, wall %.3f s (%.2f M events/s), "
              "iteration %.9f s, MFU %.4f, peak RSS %.1f MiB\n",
              mode == workloads::Symmetry::kAuto ? "reduced" : "full", r.simulated_gpus, sc.jobs[0].gpus.size(),
              r.tasks, static_cast<unsigned long long>(r.events), wall, double(r.events) / wall / 1e6,
              r.jobs[0].iteration_time.raw(), r.jobs[0].mfu, double(u.ru_maxrss) / 1024.0);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "both";
  std::uint32_t pp = 16, dp = 8;
  constexpr const char* kUsage = "clustersim_bench_symmetry [--mode both|reduced|full] [--pp N] [--dp N]";
  const auto options = bench::bench_options(argc, argv, kUsage, {"--mode", "--pp", "--dp"});
  if (options.count("--mode")) mode = options.at("--mode");
  if (mode != "both" && mode != "reduced" && mode != "full")
    bench::bench_usage_error(kUsage, "--mode: \"" + mode + "\" is not both, reduced or full");
  pp = static_cast<std::uint32_t>(bench::bench_whole(options, "--pp", pp, kUsage));
  dp = static_cast<std::uint32_t>(bench::bench_whole(options, "--dp", dp, kUsage));
  const workloads::Scenario sc = gpt3_175b(pp, dp);
  for (const workloads::Symmetry m : {workloads::Symmetry::kAuto, workloads::Symmetry::kOff}) {
    if (mode != "both" && mode != (m == workloads::Symmetry::kAuto ? "reduced" : "full")) continue;
    if (mode != "both") {
      run_one(sc, m);
      continue;
    }
    const pid_t child = fork();
    if (child == 0) {
      run_one(sc, m);
      std::_Exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
  }
  return 0;
}
