#include <doctest/doctest.h>

#include <numeric>

#include "workloads/nccl_model.h"

using namespace clustersim;
using namespace clustersim::workloads;

namespace {
calibrate::HardwareProfile a100_constants() {
  // NCCL v2.30.7-1 tuning.cc ring/Simple: base 8.4 µs, NVLink step 3.4 µs, network step 14 µs. Without
  // NCCL's full tuning table the model has ring/Simple only, so these tests see the bare ring formula.
  calibrate::HardwareProfile p;
  p.collectives = {microseconds(8.4), microseconds(3.4), microseconds(14.0), 0.77, 0.8, {}, bytes_per_second(0)};
  return p;
}

// Ring AllReduce of `size` over `gpus`: NCCL's choice with ring/Simple the only candidate.
CollectivePlan ring(const topology::ClusterSpec& c, const std::vector<std::uint32_t>& gpus, Bytes size) {
  static const calibrate::HardwareProfile profile = a100_constants();
  return CollectiveModel(c, profile).plan(CollectiveRequest{CollectiveOp::kAllReduce, gpus, size, 0});
}
topology::ClusterSpec cluster(std::uint32_t nodes, std::uint32_t per_node) {
  topology::ClusterSpec c;
  c.nodes = nodes;
  c.gpus_per_node = per_node;
  c.nvlink_per_direction = GBps(300);
  c.nic_per_direction = Gbitps(200);
  return c;
}
std::vector<std::uint32_t> first(std::uint32_t n) {
  std::vector<std::uint32_t> v(n);
  std::iota(v.begin(), v.end(), 0u);
  return v;
}
}  // namespace

TEST_CASE("ring AllReduce inside one NVSwitch node") {
  // n = 8, S = 1 GiB: 2(n−1) = 14 NVLink steps → α = 8.4 + 14·3.4 = 56.0 µs.
  // B = 300 GB/s · 0.77 = 231 GB/s; 2·7/8 · 1,073,741,824 B / 231e9 B/s = 8.134408 ms.
  const CollectivePlan c = ring(cluster(1, 8), first(8), GiB(1));
  CHECK(c.algorithm == Algorithm::kRing);
  CHECK(c.protocol == Protocol::kSimple);
  CHECK(to_us(c.latency) == doctest::Approx(56.0).epsilon(1e-12));
  CHECK(c.bus_bandwidth.raw() == doctest::Approx(231e9).epsilon(1e-12));
  CHECK(c.time.raw() == doctest::Approx(8.134408e-3 + 56e-6).epsilon(1e-6));
}

TEST_CASE("ring AllReduce across two nodes: one ring per NIC rail") {
  // n = 16 on 2 nodes × 8: 30 steps, 2(nodes−1) = 2 cross nodes → α = 8.4 + 28·3.4 + 2·14 = 131.6 µs.
  // Inter-node hop: 8 rails × 25 GB/s × 0.8 = 160 GB/s < NVLink's 231 GB/s → B = 160 GB/s.
  // S = 100 MB: 2·15/16 · 1e8 / 160e9 = 1.171875 ms.
  const CollectivePlan c = ring(cluster(2, 8), first(16), MB(100));
  CHECK(c.channels == 8);
  CHECK(to_us(c.latency) == doctest::Approx(131.6).epsilon(1e-12));
  CHECK(c.bus_bandwidth.raw() == doctest::Approx(160e9).epsilon(1e-12));
  CHECK(c.time.raw() == doctest::Approx(1.171875e-3 + 131.6e-6).epsilon(1e-9));
}

TEST_CASE("ring AllReduce with one GPU per node is NIC-bound, and hop latency adds per step") {
  // 4 nodes × 1 GPU: 6 steps, all inter-node. α = 8.4 + 6·(14 + 2) = 104.4 µs with a 2 µs extra hop.
  // B = 25 GB/s · 0.8 = 20 GB/s; S = 8 MB: 2·3/4 · 8e6 / 20e9 = 0.6 ms.
  topology::ClusterSpec c1 = cluster(4, 1);
  c1.network_hop_latency = microseconds(2);
  const CollectivePlan c = ring(c1, first(4), MB(8));
  CHECK(to_us(c.latency) == doctest::Approx(104.4).epsilon(1e-12));
  CHECK(c.bus_bandwidth.raw() == doctest::Approx(20e9).epsilon(1e-12));
  CHECK(c.time.raw() == doctest::Approx(0.6e-3 + 104.4e-6).epsilon(1e-9));
}

TEST_CASE("a single rank exchanges nothing") {
  const CollectivePlan c = ring(cluster(1, 1), first(1), GiB(1));
  CHECK(c.time.raw() == 0);
}
