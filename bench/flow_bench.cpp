// Flow-network benchmark (not a test): throughput of FlowNetwork under a steady churn of flows.
//   build/bench/clustersim_bench_flow [--flows N] [--links M] [--pod P] [--total T] [--full-total F] [--seed S]
// Workload: M shared links (25 GB/s; every 16th a 50 GB/s fatpipe) in pods of P links. N flows
// start at t = 0 (staggered over 10 us); each completion starts a new flow after an exponential
// gap (mean 2 us), so about N flows are in flight (Poisson-ish arrivals, closed loop) until T
// flows have completed. A flow picks a pod, then a path of 2..6 distinct links in it, a size
// log-uniform in 1..64 MB and a latency of 1..5 us. Pods bound the components, as traffic
// locality (TP within a node, a rail) does in a cluster; --pod M makes every path uniform over
// all links (one giant component, where incremental re-solve cannot help).
// The same workload then runs in Mode::kFullResolve (F flows, default T/20) for comparison.
// Peak memory is the process's ru_maxrss so far (so it includes the earlier runs).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "bench/bench_args.h"
#include "sim/flow_network.h"
#include "sim/simulation.h"

using namespace clustersim;
using namespace clustersim::sim;

namespace {

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux reports KiB
}

struct Options {
  std::uint32_t flows = 2000;
  std::uint32_t links = 4096;
  std::uint32_t pod = 32;
  std::uint64_t total = 100'000;
  std::uint64_t full_total = 0;  // 0: total / 20
  std::uint64_t seed = 1;
};

void run(const Options& opt, FlowNetwork::Mode mode, std::uint64_t total) {
  std::mt19937_64 rng(opt.seed);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  Simulation sim;
  FlowNetwork net(sim, mode);
  for (std::uint32_t l = 0; l < opt.links; ++l) {
    if (l % 16 == 15) {
      net.add_link(GBps(50), LinkSharing::kFatpipe);
    } else {
      net.add_link(GBps(25));
    }
  }
  const std::uint32_t pod = std::max<std::uint32_t>(6, std::min(opt.pod, opt.links));
  const std::uint32_t pods = std::max<std::uint32_t>(1, opt.links / pod);
  std::uint64_t started = 0;
  std::uint64_t completed = 0;
  std::vector<LinkId> path;
  std::function<void()> launch;
  std::function<void()> on_done = [&] {
    ++completed;
    if (started < total) {
      ++started;  // counted when scheduled, so that exactly `total` flows run
      const auto gap = static_cast<SimTime>(-std::log(1.0 - u01(rng)) * 2e6);  // mean 2 us
      sim.schedule_after(gap, launch);
    }
  };
  launch = [&] {
    const std::uint32_t base = static_cast<std::uint32_t>(rng() % pods) * pod;
    const std::uint32_t len = 2 + static_cast<std::uint32_t>(rng() % 5);
    path.clear();
    while (path.size() < len) {
      const LinkId l{base + static_cast<std::uint32_t>(rng() % pod)};
      if (std::find(path.begin(), path.end(), l) == path.end()) path.push_back(l);
    }
    const double size = 1e6 * std::pow(64.0, u01(rng));
    net.start(path, bytes(size), microseconds(1 + 4 * u01(rng)), on_done);
  };
  const std::uint64_t initial = std::min<std::uint64_t>(opt.flows, total);
  for (std::uint64_t i = 0; i < initial; ++i) {
    ++started;
    sim.schedule_at(static_cast<SimTime>(u01(rng) * 1e7), launch);
  }

  const auto t0 = std::chrono::steady_clock::now();
  sim.run();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const FlowNetwork::Counters& c = net.counters();
  double busiest = 0;
  net.for_each_link([&](LinkId, const LinkStats& s) { busiest = std::max(busiest, to_seconds(s.busy_time).raw()); });
  std::printf(
      "%-11s flows %llu completed, wall %.3f s, %llu solves (%.0f solves/s, %.1f flows and %.1f rounds "
      "per solve), %llu network events (%.0f events/s), %llu engine events, simulated %.6f s "
      "(busiest link busy %.6f s), peak memory %.1f MiB\n",
      mode == FlowNetwork::Mode::kIncremental ? "incremental" : "full", static_cast<unsigned long long>(completed),
      wall, static_cast<unsigned long long>(c.solves), static_cast<double>(c.solves) / wall,
      c.solves ? static_cast<double>(c.solved_flows) / static_cast<double>(c.solves) : 0.0,
      c.solves ? static_cast<double>(c.solver_rounds) / static_cast<double>(c.solves) : 0.0,
      static_cast<unsigned long long>(c.events), static_cast<double>(c.events) / wall,
      static_cast<unsigned long long>(sim.events_executed()), to_seconds(sim.now()).raw(), busiest, peak_rss_mib());
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  constexpr const char* kUsage =
      "clustersim_bench_flow [--flows N] [--links N] [--pod N] [--total N] [--full-total N] [--seed N]";
  const auto options =
      bench::bench_options(argc, argv, kUsage, {"--flows", "--links", "--pod", "--total", "--full-total", "--seed"});
  opt.flows = static_cast<std::uint32_t>(bench::bench_whole(options, "--flows", opt.flows, kUsage));
  opt.links = static_cast<std::uint32_t>(bench::bench_whole(options, "--links", opt.links, kUsage));
  opt.pod = static_cast<std::uint32_t>(bench::bench_whole(options, "--pod", opt.pod, kUsage));
  opt.total = bench::bench_whole(options, "--total", opt.total, kUsage);
  opt.full_total = bench::bench_whole(options, "--full-total", opt.full_total, kUsage);
  opt.seed = bench::bench_whole(options, "--seed", opt.seed, kUsage);
  if (opt.links < 6) {
    std::fprintf(stderr, "error: --links must be >= 6 (paths have up to 6 distinct links)\n");
    return 2;
  }
  std::printf("flow bench: ~%u concurrent flows, %u links in pods of %u, seed %llu\n", opt.flows, opt.links,
              std::min(opt.pod, opt.links), static_cast<unsigned long long>(opt.seed));
  run(opt, FlowNetwork::Mode::kIncremental, opt.total);
  run(opt, FlowNetwork::Mode::kFullResolve,
      opt.full_total ? opt.full_total : std::max<std::uint64_t>(1, opt.total / 20));
  return 0;
}
