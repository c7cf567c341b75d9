// Engine benchmarks (not tests): event-queue throughput and the wall time and peak memory of
// simulating one iteration of the default scenario scaled to many GPUs.
//   build/bench/clustersim_bench_engine [--gpus N] [--events N]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "bench/bench_args.h"
#include "cli/scenario_loader.h"
#include "sim/event_queue.h"
#include "workloads/iteration_result.h"

using namespace clustersim;

namespace {

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // Linux reports KiB
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kUsage = "clustersim_bench_engine [--gpus N] [--events N]";
  const auto options = bench::bench_options(argc, argv, kUsage, {"--gpus", "--events"});
  auto gpus = static_cast<std::uint32_t>(bench::bench_whole(options, "--gpus", 1024, kUsage));
  const std::uint64_t events = bench::bench_whole(options, "--events", 5'000'000, kUsage);

  {  // Event queue: a steady population of 10,000 pending events, each scheduling a successor.
    sim::EventQueue q;
    std::mt19937_64 rng(42);
    std::uniform_int_distribution<sim::SimTime> delay(1, 1'000'000);
    std::uint64_t scheduled = 0;
    std::function<void()> tick = [&] {
      if (scheduled < events) {
        ++scheduled;
        q.schedule_at(q.now() + delay(rng), tick);
      }
    };
    for (int i = 0; i < 10000; ++i) {
      ++scheduled;
      q.schedule_at(delay(rng), tick);
    }
    const auto t0 = std::chrono::steady_clock::now();
    while (q.run_next()) {
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("event queue: %llu events in %.3f s = %.2f M events/s\n",
                static_cast<unsigned long long>(q.executed()), wall, double(q.executed()) / wall / 1e6);
  }

  {  // One iteration of the default scenario scaled to `gpus` GPUs (8 per node, DP = GPUs).
    workloads::Scenario sc = cli::load_default_scenario();
    sc.cluster.nodes = (gpus + sc.cluster.gpus_per_node - 1) / sc.cluster.gpus_per_node;
    gpus = sc.cluster.gpu_count();
    workloads::Job& job = sc.jobs[0];
    job.gpus.resize(gpus);
    for (std::uint32_t g = 0; g < gpus; ++g) job.gpus[g] = g;
    job.parallel.dp = gpus;
    job.training.global_batch = std::uint64_t(job.parallel.micro_batch) * job.parallel.grad_accum * gpus;
    const auto t0 = std::chrono::steady_clock::now();
    const workloads::ScenarioResult r = workloads::simulate_scenario(sc);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("default scenario at %u GPUs: %zu tasks, %llu events, wall %.3f s (%.2f M events/s), "
                "simulated iteration %.6f s, peak memory %.1f MiB\n",
                gpus, r.tasks, static_cast<unsigned long long>(r.events), wall, double(r.events) / wall / 1e6,
                r.jobs[0].iteration_time.raw(), peak_rss_mib());
  }
  return 0;
}
