// Topology benchmark (not a test): wall time and peak memory of building a cluster's graph and of `clustersim
// topo`'s statistics (bisection max-flow, diameter) on H100 nodes (8 GPUs, 8 NICs) behind a fabric, by default a
// three-level Clos of 4,096 nodes = 32,768 GPUs. Each part is timed on its own.
//   build/bench/clustersim_bench_topo [--nodes 4096] [--fabric CLOS_THREE_LEVEL|CLOS_TWO_LEVEL|RAIL_OPTIMIZED_FAT_TREE]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "bench/bench_args.h"
#include "cli/cluster_loader.h"
#include "topology/topology.h"

using namespace clustersim;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kUsage =
      "clustersim_bench_topo [--nodes N] [--fabric CLOS_THREE_LEVEL|CLOS_TWO_LEVEL|RAIL_OPTIMIZED_FAT_TREE]";
  const auto options = bench::bench_options(argc, argv, kUsage, {"--nodes", "--fabric"});
  const auto nodes = bench::bench_whole(options, "--nodes", 4096, kUsage);
  const std::string fabric = options.count("--fabric") ? options.at("--fabric") : "CLOS_THREE_LEVEL";
  if (fabric != "CLOS_THREE_LEVEL" && fabric != "CLOS_TWO_LEVEL" && fabric != "RAIL_OPTIMIZED_FAT_TREE")
    bench::bench_usage_error(kUsage, "--fabric: \"" + fabric + "\" is not a fabric kind");
  if (nodes == 0 || nodes > 131072) bench::bench_usage_error(kUsage, "--nodes: must be in 1..131072");
  const std::string text = "nodes: " + std::to_string(nodes) +
                           " gpus_per_node: 8 gpu: \"H100-SXM5-80GB\" nvlink_gbytes_per_s_per_direction: 450 "
                           "nic_gbits_per_s_per_direction: 400 fabric { kind: " +
                           fabric + " }";
  try {
    auto t0 = std::chrono::steady_clock::now();
    const topology::Topology t(cli::load_cluster_text(text, "topo_bench"));
    const double build = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    const double bisection = to_GBps(t.bisection_bandwidth());
    const double max_flow = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    const std::uint32_t diameter = t.diameter_hops();
    const double diameter_s = seconds_since(t0);
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    std::printf(
        "%s, %llu nodes x 8 GPUs = %u GPUs, %u vertices, %u links: build %.3f s, bisection %.1f GB/s in %.3f s, "
        "diameter %u hops in %.3f s, peak RSS %.1f MiB\n",
        fabric.c_str(), static_cast<unsigned long long>(nodes), t.gpu_count(), t.vertex_count(), t.link_count(), build,
        bisection, max_flow, diameter, diameter_s, double(u.ru_maxrss) / 1024.0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
