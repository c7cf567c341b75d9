// NCCL's tuning model (choice) and clustersim's physical model (time), against hand derivations from
// NCCL v2.30.7-1's constants (../shared/reference/nccl.md §1.3–1.5) as stored in the built-in profiles.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>
#include <tuple>

#include "calibrate/hardware_profile.h"
#include "workloads/nccl_model.h"

using namespace clustersim;
using namespace clustersim::workloads;

namespace {

topology::ClusterSpec cluster(std::uint32_t nodes, std::uint32_t per_node, double nvlink_GBps, double nic_Gbps) {
  topology::ClusterSpec c;
  c.nodes = nodes;
  c.gpus_per_node = per_node;
  c.nvlink_per_direction = GBps(nvlink_GBps);
  c.nic_per_direction = Gbitps(nic_Gbps);
  return c;
}

std::vector<std::uint32_t> first(std::uint32_t n) {
  std::vector<std::uint32_t> v(n);
  std::iota(v.begin(), v.end(), 0u);
  return v;
}

CollectivePlan plan(const topology::ClusterSpec& c, const calibrate::HardwareProfile& p, CollectiveOp op, Bytes size,
                    NcclSettings s = {}) {
  return CollectiveModel(c, p, s).plan(CollectiveRequest{op, first(c.gpu_count()), size, 0});
}

}  // namespace

TEST_CASE("nccl-tests bus-bandwidth factors per operation") {
  // doc/PERFORMANCE.md: AllReduce 2(n−1)/n; ReduceScatter, AllGather, AlltoAll (n−1)/n; the rest 1.
  CHECK(busbw_factor(CollectiveOp::kAllReduce, 8) == doctest::Approx(1.75));
  CHECK(busbw_factor(CollectiveOp::kReduceScatter, 8) == doctest::Approx(0.875));
  CHECK(busbw_factor(CollectiveOp::kAllGather, 16) == doctest::Approx(0.9375));
  CHECK(busbw_factor(CollectiveOp::kAllToAll, 4) == doctest::Approx(0.75));
  CHECK(busbw_factor(CollectiveOp::kBroadcast, 8) == 1);
  CHECK(busbw_factor(CollectiveOp::kReduce, 8) == 1);
  CHECK(busbw_factor(CollectiveOp::kSendRecv, 2) == 1);
}

TEST_CASE("ring and tree latencies: step counts times NCCL's per-step latencies") {
  const calibrate::HardwareProfile h100 = calibrate::load_profile("h100-sxm5-80gb");
  const auto node = cluster(1, 8, 450, 400);
  auto forced = [](Algorithm a, Protocol p) {
    NcclSettings s;
    s.algorithm = a;
    s.protocol = p;
    return s;
  };
  // Ring AllReduce on 8 GPUs: 2(n−1) = 14 NVLink steps. Simple 8.4 + 14·3.4 = 56.0 µs; LL 6.6 + 14·0.6 =
  // 15.0 µs; LL128 14 + 14·1.9 = 40.6 µs (nccl.md §1.11's table).
  CHECK(to_us(plan(node, h100, CollectiveOp::kAllReduce, bytes(1 * 1024.0), forced(Algorithm::kRing, Protocol::kSimple)).latency) ==
        doctest::Approx(56.0));
  CHECK(to_us(plan(node, h100, CollectiveOp::kAllReduce, bytes(1 * 1024.0), forced(Algorithm::kRing, Protocol::kLL)).latency) ==
        doctest::Approx(15.0));
  CHECK(to_us(plan(node, h100, CollectiveOp::kAllReduce, bytes(1 * 1024.0), forced(Algorithm::kRing, Protocol::kLL128)).latency) ==
        doctest::Approx(40.6));
  // AllGather: n−1 = 7 steps: 8.4 + 7·3.4 = 32.2 µs.
  CHECK(to_us(plan(node, h100, CollectiveOp::kAllGather, bytes(64 * 1024.0), forced(Algorithm::kRing, Protocol::kSimple)).latency) ==
        doctest::Approx(32.2));
  // Broadcast on one NVSwitch node: NCCL's ring graph has sameChannels 1 there, so one ring step is added to the
  // base (tuning.cc): LL 6.6 + 0.6 = 7.2 µs, Simple 8.4 + 3.4 = 11.8 µs (the ring's step, not the tree's).
  CHECK(to_us(plan(node, h100, CollectiveOp::kBroadcast, bytes(1 * 1024.0), forced(Algorithm::kRing, Protocol::kLL))
                  .latency) == doctest::Approx(7.2));
  CHECK(to_us(plan(node, h100, CollectiveOp::kBroadcast, bytes(1 * 1024.0), forced(Algorithm::kRing, Protocol::kSimple))
                  .latency) == doctest::Approx(11.8));
  CHECK(to_us(plan(node, h100, CollectiveOp::kReduce, bytes(1 * 1024.0), forced(Algorithm::kRing, Protocol::kLL))
                  .latency) == doctest::Approx(7.2));
  // Across 2 nodes the channels leave through different NICs (sameChannels 0): nsteps = n = 16 steps of the
  // network latency, Simple taking the tree's: 8.4 + 16·14 = 232.4 µs.
  const auto two = cluster(2, 8, 450, 400);
  CHECK(to_us(plan(two, h100, CollectiveOp::kBroadcast, bytes(1 * 1024.0), forced(Algorithm::kRing, Protocol::kSimple))
                  .latency) == doctest::Approx(232.4));
  // Tree on 2 nodes × 8: base + 2·((ppn−1)·intra + log2(nodes)·net) = 8.4 + 2·(7·4.0 + 1·14) = 92.4 µs.
  CHECK(to_us(plan(two, h100, CollectiveOp::kAllReduce, bytes(1 * 1024.0), forced(Algorithm::kTree, Protocol::kSimple)).latency) ==
        doctest::Approx(92.4));
}

TEST_CASE("AllGather takes the profile's own NVLink efficiency, ReduceScatter and AllReduce keep the shared one") {
  // H100 profile: nvlink_bus_efficiency 0.82, nvlink_allgather_bus_efficiency 0.80; 8 GPUs, 450 GB/s NVLink, ring
  // Simple forced, 1 GiB. Latency 8.4 + 7·3.4 = 32.2 µs for both halves. Bytes per link: 2^30·7/8 = 939,524,096.
  //   AllGather:     busbw 450·0.80 = 360 GB/s → 939,524,096 / 360e9 = 2,609.789 µs + 32.2 = 2,641.989 µs
  //   ReduceScatter: busbw 450·0.82 = 369 GB/s → 939,524,096 / 369e9 = 2,546.136 µs + 32.2 = 2,578.336 µs
  const calibrate::HardwareProfile h100 = calibrate::load_profile("h100-sxm5-80gb");
  REQUIRE(h100.collectives.nvlink_allgather_bus_efficiency == doctest::Approx(0.80));
  const auto node = cluster(1, 8, 450, 400);
  NcclSettings ring_simple;
  ring_simple.algorithm = Algorithm::kRing;
  ring_simple.protocol = Protocol::kSimple;
  const Bytes gib = bytes(1024.0 * 1024 * 1024);
  const CollectivePlan ag = plan(node, h100, CollectiveOp::kAllGather, gib, ring_simple);
  const CollectivePlan rs = plan(node, h100, CollectiveOp::kReduceScatter, gib, ring_simple);
  CHECK(to_us(ag.time) == doctest::Approx(2641.989).epsilon(1e-6));
  CHECK(to_us(rs.time) == doctest::Approx(2578.336).epsilon(1e-6));
  CHECK(ag.bus_bandwidth.raw() == doctest::Approx(360e9));
  // FLOW's links carry the shared 0.82; the plan's wire factor adds AllGather's 0.82 / 0.80 on top of them.
  CHECK(ag.wire_factor == doctest::Approx(0.82 / 0.80));
  CHECK(rs.wire_factor == doctest::Approx(1.0));
  // Without the field (0), AllGather is timed as ReduceScatter.
  calibrate::HardwareProfile shared = h100;
  shared.collectives.nvlink_allgather_bus_efficiency = 0;
  CHECK(to_us(plan(node, shared, CollectiveOp::kAllGather, gib, ring_simple).time) ==
        doctest::Approx(2578.336).epsilon(1e-6));
}

TEST_CASE("NCCL's choice on an 8-GPU A100 node: LL, then LL128, then Simple at the crossovers its model predicts") {
  // A100 (no NVLS): bus bandwidth 300 GB/s · 0.77 = 231 GB/s; ring algbw = busBw · 8/14.
  //   LL:    15.0 µs + S / (min(llMax 87.7, 231·0.5) · 8/14 = 50.114 GB/s)
  //   LL128: 40.6 µs + S / (min(231·0.92 = 212.52, 12 ch · 20 = 240) · 8/14 = 121.44 GB/s)
  //   Simple: 56.0 µs + S / (231 · 8/14 = 132.0 GB/s)
  // LL = LL128 at S = 25.6 µs / (1/50.114 − 1/121.44 µs per kB) = 2.184 MB;
  // LL128 = Simple at S = 15.4 µs / (1/121.44 − 1/132.0 µs per kB) = 23.38 MB.
  // The tree (1 node: a chain) never wins here: its LL latency 6.8 + 2·7·0.6 = 15.2 µs > 15.0 and its
  // bandwidth is lower.
  const calibrate::HardwareProfile a100 = calibrate::load_profile("a100-sxm4-80gb");
  const auto node = cluster(1, 8, 300, 200);
  auto choice = [&](double megabytes) { return plan(node, a100, CollectiveOp::kAllReduce, MB(megabytes)); };
  CHECK(choice(0.001).protocol == Protocol::kLL);
  CHECK(choice(2.0).protocol == Protocol::kLL);
  CHECK(choice(2.4).protocol == Protocol::kLL128);
  CHECK(choice(22.0).protocol == Protocol::kLL128);
  CHECK(choice(25.0).protocol == Protocol::kSimple);
  CHECK(choice(1000.0).protocol == Protocol::kSimple);
  CHECK(choice(1000.0).algorithm == Algorithm::kRing);
}

TEST_CASE("NCCL's tree refinements stack: tree LL128 gives way to tree Simple on 2 nodes at 512 MiB") {
  // tuning.cc applies `if (a == TREE && coll == AllReduce) busBw = min(busBw·.92, nCh·perChMaxTreeBw)` to every
  // protocol, then LL128's own line on top, so tree LL128 never models more bandwidth than tree Simple.
  // 2 nodes × 4 H100, 450 GB/s NVLink, one 200 Gb/s NIC per GPU (the Snellius layout of validation/nccl):
  //   egress per node 4 · 25 GB/s · 0.85 = 85 GB/s; a 2-node tree sends S once each way, so its graph
  //   carries min(450·0.82 = 369, 2·85) = 170 GB/s.
  //   Simple: busBw min(170·0.92 = 156.4, 12 ch · 41.4) = 156.4 → algbw 0.5 · 156.4 = 78.2 GB/s;
  //           latency 8.4 + 2·(3·4.0 + 1·14) = 60.4 µs.
  //   LL128:  busBw min(156.4 · 120/128 = 146.625, 12 · 36.7) → algbw 73.3125 GB/s; latency 14 + 2·(3·1.25 + 8.5)
  //           = 38.5 µs. (Read without the stacking, 170 · 120/128 = 159.4 would beat Simple at every size.)
  //   The tree correction (treeCorrectionFactor, index log2(S/64)) is Simple .9 and LL128 1.0 at 256 MiB
  //   (index 22) and 1 for both from 512 MiB (index 23, past the table).
  //   256 MiB: Simple 60.4 + 268,435,456 / (78.2e3 · .9) = 3,874.5 µs; LL128 38.5 + 268,435,456 / 73.3125e3
  //            = 3,700.0 µs → LL128.
  //   512 MiB: Simple 60.4 + 536,870,912 / 78.2e3 = 6,925.8 µs; LL128 38.5 + 536,870,912 / 73.3125e3
  //            = 7,361.6 µs → Simple. The measured run's busbw jumps between the same two sizes
  //            (118.7 → 150.7 GB/s, validation/nccl/h100x4_2node_ib_hdr_allreduce.csv).
  const calibrate::HardwareProfile h100 = calibrate::load_profile("h100-sxm5-80gb");
  const auto two = cluster(2, 4, 450, 200);
  const CollectivePlan at256 = plan(two, h100, CollectiveOp::kAllReduce, MiB(256));
  CHECK(at256.algorithm == Algorithm::kTree);
  CHECK(at256.protocol == Protocol::kLL128);
  CHECK(to_us(at256.nccl_model_time) == doctest::Approx(38.5 + 268435456.0 / 73.3125e3));
  const CollectivePlan at512 = plan(two, h100, CollectiveOp::kAllReduce, MiB(512));
  CHECK(at512.algorithm == Algorithm::kTree);
  CHECK(at512.protocol == Protocol::kSimple);
  CHECK(to_us(at512.nccl_model_time) == doctest::Approx(60.4 + 536870912.0 / 78.2e3));
  NcclSettings ll128;
  ll128.algorithm = Algorithm::kTree;
  ll128.protocol = Protocol::kLL128;
  CHECK(to_us(plan(two, h100, CollectiveOp::kAllReduce, MiB(512), ll128).nccl_model_time) ==
        doctest::Approx(38.5 + 536870912.0 / 73.3125e3));
}

TEST_CASE("on H100 NVSwitch NCCL's model moves large AllReduces to NVLS, timed at the measured NVLS rate") {
  // NCCL: NVLS busBw = 369 · 0.85 · 11/12 · 2 = 575 GB/s → algbw 575 · 8/14 = 328.6 GB/s beats ring Simple's
  // 369 · 8/14 = 210.9. Physical: algbw = 308 · 8/9 = 273.8 GB/s (nccl.md §1.12), so 1 GiB takes
  // 25 µs + 1,073,741,824 / 273.78e9 = 25 + 3,921.9 µs.
  const calibrate::HardwareProfile h100 = calibrate::load_profile("h100-sxm5-80gb");
  topology::ClusterSpec node = cluster(1, 8, 450, 400);
  const CollectivePlan p = plan(node, h100, CollectiveOp::kAllReduce, GiB(1));
  CHECK(p.algorithm == Algorithm::kNvls);
  CHECK(p.time.raw() == doctest::Approx(25e-6 + 1073741824.0 / (308e9 * 8 / 9)).epsilon(1e-9));
}

TEST_CASE("hierarchical AllReduce on 2 nodes: intra reduce-scatter, inter AllReduce, intra all-gather") {
  // 2 × 8 A100, forced HIERARCHICAL/Simple. Latency: 8.4 + 2·7·3.4 + 2·1·14 = 84.0 µs.
  // Per byte of S: intra RS + AG 2·(7/8)/231e9 = 7.5758e-12 s; inter ring AllReduce of S/8 on each rail:
  // 2·(1/2)/8 / (25e9 · 0.8) = 6.25e-12 s → 1.38258e-11 s/B; S = 1 GiB → 14.8453 ms + 84 µs.
  const calibrate::HardwareProfile a100 = calibrate::load_profile("a100-sxm4-80gb");
  NcclSettings s;
  s.algorithm = Algorithm::kHierarchical;
  s.protocol = Protocol::kSimple;
  const CollectivePlan p = plan(cluster(2, 8, 300, 200), a100, CollectiveOp::kAllReduce, GiB(1), s);
  CHECK(to_us(p.latency) == doctest::Approx(84.0));
  const double per_byte = 2.0 * 7 / 8 / 231e9 + 2.0 * 0.5 / 8 / 20e9;
  CHECK(p.time.raw() == doctest::Approx(84e-6 + 1073741824.0 * per_byte).epsilon(1e-9));
}

TEST_CASE("a forced algorithm that cannot run is an input error naming nccl.algorithm") {
  const calibrate::HardwareProfile a100 = calibrate::load_profile("a100-sxm4-80gb");
  NcclSettings s;
  s.algorithm = Algorithm::kNvls;  // A100 has no NVLS
  CHECK_THROWS_WITH(plan(cluster(1, 8, 300, 200), a100, CollectiveOp::kAllReduce, MB(8), s),
                    doctest::Contains("nccl.algorithm: nvls cannot run allreduce on these 8 GPUs: the profile has no "
                                      "NVLS (H100 and later)"));
  // Each refusal names the requirement that is not met.
  s.algorithm = Algorithm::kCollNet;
  CHECK_THROWS_WITH(plan(cluster(2, 8, 300, 200), a100, CollectiveOp::kAllReduce, MB(8), s),
                    doctest::Contains("collnet cannot run allreduce on these 16 GPUs: the fabric has no in-network "
                                      "reduction"));
  s.algorithm = Algorithm::kPat;
  CHECK_THROWS_WITH(plan(cluster(2, 8, 300, 200), a100, CollectiveOp::kAllGather, MB(8), s),
                    doctest::Contains("pat cannot run allgather on these 16 GPUs: pat needs one GPU per node"));
  s.algorithm = Algorithm::kTree;
  CHECK_THROWS_WITH(plan(cluster(2, 8, 300, 200), a100, CollectiveOp::kBroadcast, MB(8), s),
                    doctest::Contains("tree cannot run broadcast on these 16 GPUs: NCCL runs Broadcast and Reduce as "
                                      "rings only"));
}

TEST_CASE("a forced tree's time grows with the size: NCCL's correction factors are joined between powers of two") {
  // NCCL's treeCorrectionFactor is a step per power of two (for LL it steps from .4 below 1 MiB up to .5 at
  // 1 MiB, for Simple from .5 below 2 MiB to .6 at 2 MiB). Read as steps, the physical time of a tree
  // dropped just after a power of two (2 HGX H100 nodes, tree LL: 79.19 µs at 1 MiB − 4 B, 68.39 µs at
  // 1 MiB). Joined linearly in log2(size) it grows: no factor doubles within an octave (the steepest rise,
  // LL128's .6 → .8, is ×1.33), so size / factor still grows. At the powers of two the table's value stands.
  const calibrate::HardwareProfile h100 = calibrate::load_profile("h100-sxm5-80gb");
  const auto two_nodes = cluster(2, 8, 450, 400);
  for (Protocol p : {Protocol::kLL, Protocol::kLL128, Protocol::kSimple}) {
    NcclSettings s;
    s.algorithm = Algorithm::kTree;
    s.protocol = p;
    double previous = 0;
    for (double size = 4096; size <= 2.0 * 1024 * 1024 * 1024; size *= std::pow(2.0, 0.125)) {
      for (double at : {std::floor(size / 4) * 4 - 4, std::floor(size / 4) * 4}) {
        CAPTURE(to_string(p));
        CAPTURE(at);
        const double t = to_us(plan(two_nodes, h100, CollectiveOp::kAllReduce, bytes(at), s).time);
        CHECK(t >= previous);
        previous = t;
      }
    }
  }
  // At a power of two, the table's own value: tree Simple at 64 MiB on one 8-GPU node is NCCL's latency
  // plus S over b_intra/2 (an interior GPU of the chain sends 2S) times the factor at log2(64 MiB/64) = 20,
  // which is .8: 450e9 · 0.82 / 2 · 0.8 = 147.6e9 B/s of payload.
  NcclSettings s;
  s.algorithm = Algorithm::kTree;
  s.protocol = Protocol::kSimple;
  const CollectivePlan at_64 = plan(cluster(1, 8, 450, 400), h100, CollectiveOp::kAllReduce, MiB(64), s);
  CHECK(at_64.time.raw() - at_64.latency.raw() == doctest::Approx(64.0 * 1048576 / 147.6e9).epsilon(1e-9));
}

TEST_CASE("hierarchical AllReduce on one node is the ring: same time for every protocol") {
  // With one domain there is no inter-node step: intra reduce-scatter + all-gather is the ring AllReduce,
  // 2(n−1)/n · S over the ring's bus bandwidth, with the same protocol caps (on bus bandwidth: LL's llMaxBw
  // bound the hierarchical algorithm's payload rate instead, 1.75x looser on 8 GPUs).
  const calibrate::HardwareProfile h100 = calibrate::load_profile("h100-sxm5-80gb");
  const auto node = cluster(1, 8, 450, 400);
  for (Protocol p : {Protocol::kLL, Protocol::kLL128, Protocol::kSimple}) {
    for (double mib : {1.0, 16.0, 256.0}) {
      NcclSettings ring, hier;
      ring.algorithm = Algorithm::kRing;
      hier.algorithm = Algorithm::kHierarchical;
      ring.protocol = hier.protocol = p;
      CAPTURE(to_string(p));
      CAPTURE(mib);
      const CollectivePlan r = plan(node, h100, CollectiveOp::kAllReduce, MiB(mib), ring);
      const CollectivePlan h = plan(node, h100, CollectiveOp::kAllReduce, MiB(mib), hier);
      CHECK(h.time.raw() == doctest::Approx(r.time.raw()).epsilon(1e-12));
    }
  }
}

TEST_CASE("across nodes NCCL's LL cap and network overhead follow the hosts' CPU vendor") {
  // tuning.cc: llMaxBws[index1][index2] with index1 = the GPU's row on one node, else 1 on AMD hosts and 0 on any
  // other; index2 = 0, 1, 2 for 1, 2, >2 nodes. Rows 0 {39.0, 39.0, 20.4} and 1 {87.7, 22.5, 19.0}; the Hopper
  // row's first entry 141.0. 8 H100 per node at 450 GB/s NVLink (busbw 369 GB/s), 400 Gb/s NICs: ring LL's busbw
  // is min(cap, 369 · 0.5 = 184.5 and the rails' rate · 0.5), so the cap itself.
  const calibrate::HardwareProfile h100 = calibrate::load_profile("h100-sxm5-80gb");
  NcclSettings ring_ll;
  ring_ll.algorithm = Algorithm::kRing;
  ring_ll.protocol = Protocol::kLL;
  auto busbw = [&](std::uint32_t nodes, topology::CpuVendor v) {
    topology::ClusterSpec c = cluster(nodes, 8, 450, 400);
    c.node.cpu_vendor = v;
    return plan(c, h100, CollectiveOp::kAllReduce, MiB(1), ring_ll).bus_bandwidth.raw() / 1e9;
  };
  CHECK(busbw(1, topology::CpuVendor::kAmd) == doctest::Approx(141.0));  // one node: the GPU's row
  CHECK(busbw(2, topology::CpuVendor::kUnspecified) == doctest::Approx(39.0));
  CHECK(busbw(2, topology::CpuVendor::kIntel) == doctest::Approx(39.0));
  CHECK(busbw(2, topology::CpuVendor::kArm) == doctest::Approx(39.0));
  CHECK(busbw(2, topology::CpuVendor::kAmd) == doctest::Approx(22.5));
  CHECK(busbw(4, topology::CpuVendor::kIntel) == doctest::Approx(20.4));
  CHECK(busbw(4, topology::CpuVendor::kAmd) == doctest::Approx(19.0));
  // getNetOverhead: 1 µs, 2 µs on x86 AMD; ring steps inside a node cost max(NVLink LL 0.6, overhead). 2 × 8 GPUs:
  // 30 steps, 2 across nodes at the ring's NET LL 2.7 µs: Intel 6.6 + 28 · 1.0 + 2 · 2.7 = 40.0 µs,
  // AMD 6.6 + 28 · 2.0 + 2 · 2.7 = 68.0 µs.
  topology::ClusterSpec two = cluster(2, 8, 450, 400);
  two.node.cpu_vendor = topology::CpuVendor::kIntel;
  CHECK(to_us(plan(two, h100, CollectiveOp::kAllReduce, MiB(1), ring_ll).latency) == doctest::Approx(40.0));
  two.node.cpu_vendor = topology::CpuVendor::kAmd;
  CHECK(to_us(plan(two, h100, CollectiveOp::kAllReduce, MiB(1), ring_ll).latency) == doctest::Approx(68.0));
}

TEST_CASE("NCCL's model takes NVLS AllGather's bus bandwidth as its algorithm bandwidth (no ring ratio)") {
  // nccl.md §1.5: the bus-to-algorithm ratio is not applied to AllGather/ReduceScatter of algorithms other than the
  // ring. 8 H100: NVLS busBw = 369 · 0.85 · 11/12 · 7/8 = 251.5734 GB/s, latency 25 µs, so 1 GiB takes
  // 25 + 1,073,741,824 / 251,573.4 B/µs = 4,293.12 µs in NCCL's model (it was 8/7 faster).
  const calibrate::HardwareProfile h100 = calibrate::load_profile("h100-sxm5-80gb");
  NcclSettings nvls;
  nvls.algorithm = Algorithm::kNvls;
  const CollectivePlan p = plan(cluster(1, 8, 450, 400), h100, CollectiveOp::kAllGather, GiB(1), nvls);
  CHECK(to_us(p.nccl_model_time) == doctest::Approx(25 + 1073741824.0 / (369.0 * 0.85 * 11 / 12 * 7 / 8 * 1e3)));
}

TEST_CASE("NVLSTree: across H100 nodes NCCL's model takes NVLS inside each node and a tree between them") {
  // 2 x 8 H100, one 400 Gb/s NIC per GPU: b_intra = 450 x 0.82 = 369 GB/s, a NIC 50 x 0.85 = 42.5 GB/s, so the
  // node's 8 rails carry 340 GB/s. NCCL 2.30.7 (nccl.md §1.4-1.5), 8 heads (one per NIC):
  //   latency = base 0 + NVLink 25 + 2·log2(2)·NET 20.9 = 66.8 µs;
  //   busBw = min(369·0.85·7/8·2 = 548.89, 340·2 (2 nodes) = 680, 8·57.7 = 461.6) = 461.6 GB/s,
  //   algbw = 461.6 · 16/30 = 246.19 GB/s, so 1 GiB takes 66.8 + 1,073,741,824 / 246,186.7 B/µs = 4,428.29 µs.
  // Ring: 340 · 16/30 = 181.3 GB/s; tree Simple: min(369, 2·340) · 0.92 · 0.5 = 169.7 GB/s: NVLSTree wins.
  // Physical: NVLS S(1 + 1/8) at 308 GB/s → 273.8 GB/s, the trees 340 / 1 (2 nodes: each sends S over its rails),
  // NCCL's per-channel ceiling 246.19: the ceiling binds, 66.8 µs + S / 246.19e9.
  const calibrate::HardwareProfile h100 = calibrate::load_profile("h100-sxm5-80gb");
  topology::ClusterSpec two = cluster(2, 8, 450, 400);
  two.node.nics_per_node = 8;
  const double S = 1073741824.0;
  const CollectivePlan p = plan(two, h100, CollectiveOp::kAllReduce, GiB(1));
  CHECK(p.algorithm == Algorithm::kNvlsTree);
  CHECK(p.protocol == Protocol::kSimple);
  CHECK(p.channels == 8);
  CHECK(to_us(p.latency) == doctest::Approx(66.8));
  CHECK(to_us(p.nccl_model_time) == doctest::Approx(66.8 + S / (461.6 * 16 / 30 * 1e3)));
  CHECK(p.time.raw() == doctest::Approx(66.8e-6 + S / (461.6e9 * 16 / 30)).epsilon(1e-9));
  CHECK(p.bus_bandwidth.raw() == doctest::Approx(461.6e9).epsilon(1e-9));

  // 3 nodes (trees 0-2-1 and 1-0-2): nodes 0 and 2 send 3 half-buffers over their rails, 340 / 1.5 = 226.7 GB/s,
  // so the >2-node ceiling 8·45.5 = 364 GB/s busbw → 364 · 24/46 = 189.91 GB/s binds; latency
  // 25 + 2·log2i(3)·20.9 = 66.8 µs. NCCL's model: min(548.89, 340, 364) · 24/46 = 177.4 GB/s, the ring's
  // 340 · 24/46 as much, at 66.8 µs against the ring's (8.4 + 42·3.4 + 4·14)·1.4 plateau = 290.0 µs.
  // 5 nodes (trees 0-4, 4-2, 2-1, 2-3 and 1-0, 0-3, 3-2, 3-4): nodes 2 and 3 send 4, 340 / 2 = 170 GB/s, below the
  // ceiling 364 · 40/78 = 186.7 GB/s; latency 25 + 2·log2i(5)·20.9 = 108.6 µs.
  for (const auto& [nodes, lat_us, alg] : {std::tuple{3u, 66.8, 364e9 * 24 / 46}, std::tuple{5u, 108.6, 170e9}}) {
    CAPTURE(nodes);
    topology::ClusterSpec c = cluster(nodes, 8, 450, 400);
    c.node.nics_per_node = 8;
    const CollectivePlan px = plan(c, h100, CollectiveOp::kAllReduce, GiB(1));
    CHECK(px.algorithm == Algorithm::kNvlsTree);
    CHECK(px.time.raw() == doctest::Approx(lat_us * 1e-6 + S / alg).epsilon(1e-9));
  }

  // Two GB200 NVL72 racks (18 trays of 4 GPUs a domain, a 400 Gb/s NIC per GPU): 72 heads, one per NIC of the rack.
  // NCCL: min(900·0.82 = 738 · 0.74 · 71/72 · 2 = 1077.1, 72·42.5·2 = 6120, 72·96 = 6912) · 144/286 = 542.3 GB/s
  // beats the ring's 738 · 144/286 = 371.6. Physical: NVLS 432 · 72/73 = 426.08 GB/s binds (the trees 3060, the
  // ceiling 6912 / (2·143/144) = 3480): 1 GiB in 66.8 µs + S / 426.08e9.
  const calibrate::HardwareProfile gb200 = calibrate::load_profile("gb200");
  topology::ClusterSpec racks = cluster(36, 4, 900, 400);
  racks.gpu = "GB200";
  racks.node.nvlink_domain_nodes = 18;
  racks.node.nics_per_node = 4;
  const CollectivePlan pr = plan(racks, gb200, CollectiveOp::kAllReduce, GiB(1));
  CHECK(pr.algorithm == Algorithm::kNvlsTree);
  CHECK(to_us(pr.nccl_model_time) ==
        doctest::Approx(66.8 + S / (738 * 0.74 * 71 / 72 * 2 * 144 / 286 * 1e3)).epsilon(1e-9));
  CHECK(pr.time.raw() == doctest::Approx(66.8e-6 + S / (432e9 * 72 / 73)).epsilon(1e-9));

  // Never a candidate on one node, with 2 GPUs a node (ncclNvlsInit needs more than 2), without NVLS (A100), or for
  // AllGather; forcing it there is an input error.
  auto offers = [&](const topology::ClusterSpec& c, const calibrate::HardwareProfile& prof, CollectiveOp op,
                    std::vector<std::uint32_t> gpus) {
    for (const CollectivePlan& x : CollectiveModel(c, prof, {}).candidates(CollectiveRequest{op, gpus, GiB(1), 0}))
      if (x.algorithm == Algorithm::kNvlsTree) return true;
    return false;
  };
  CHECK(offers(two, h100, CollectiveOp::kAllReduce, first(16)));
  CHECK_FALSE(offers(two, h100, CollectiveOp::kAllReduce, first(8)));
  CHECK_FALSE(offers(two, h100, CollectiveOp::kAllReduce, {0, 1, 8, 9}));
  CHECK(offers(two, h100, CollectiveOp::kAllReduce, {0, 1, 2, 8, 9, 10}));
  CHECK_FALSE(offers(two, calibrate::load_profile("a100-sxm4-80gb"), CollectiveOp::kAllReduce, first(16)));
  CHECK_FALSE(offers(two, h100, CollectiveOp::kAllGather, first(16)));
  topology::ClusterSpec no_nvls = two;
  no_nvls.node.nvls = false;
  CHECK_FALSE(offers(no_nvls, h100, CollectiveOp::kAllReduce, first(16)));
  NcclSettings forced;
  forced.algorithm = Algorithm::kNvlsTree;
  CHECK_THROWS_WITH(plan(cluster(1, 8, 450, 400), h100, CollectiveOp::kAllReduce, MiB(8), forced),
                    doctest::Contains("nccl.algorithm: nvlstree cannot run allreduce on these 8 GPUs"));
}

TEST_CASE("forced LL128 runs without NVLink, as NCCL_PROTO=LL128 does, CollNet needs at most 8 local ranks") {
  const calibrate::HardwareProfile a100 = calibrate::load_profile("a100-sxm4-80gb");
  topology::ClusterSpec pcie = cluster(1, 4, 0, 200);
  pcie.node.scale_up = topology::ScaleUp::kPcieOnly;
  NcclSettings ll128;
  ll128.protocol = Protocol::kLL128;
  CHECK(plan(pcie, a100, CollectiveOp::kAllReduce, MiB(8), ll128).protocol == Protocol::kLL128);
  // By default LL128 is no candidate there (nccl.md §1.6: it needs NVLink inside the node).
  for (const CollectivePlan& c :
       CollectiveModel(pcie, a100, {}).candidates({CollectiveOp::kAllReduce, first(4), MiB(8), 0}))
    CHECK(c.protocol != Protocol::kLL128);
  // updateCollCostTable drops CollNet beyond NCCL_MAX_DIRECT_ARITY + 1 = 8 local ranks.
  auto has_collnet = [&](std::uint32_t per_node) {
    topology::ClusterSpec c = cluster(2, per_node, 300, 200);
    c.fabric.in_network_reduction = true;
    bool found = false;
    for (const CollectivePlan& p :
         CollectiveModel(c, a100, {}).candidates({CollectiveOp::kAllReduce, first(c.gpu_count()), MiB(8), 0}))
      found = found || p.algorithm == Algorithm::kCollNet;
    return found;
  };
  CHECK(has_collnet(8));
  CHECK_FALSE(has_collnet(16));
}

TEST_CASE("CollNetDirect AllReduce: NCCL's model takes 0.85 of its bus bandwidth from Hopper on, not on Ampere") {
  // tuning.cc: busBw = graph bandwidth / f (f = ppn/nCh, f -= (f - 1)/2), then `if (compCapIndex >= 90) busBw *=
  // .85`. The profiles carry it: 1 for A100, 0.85 for H100. On the same cluster and profile otherwise, NCCL's
  // model time of a 2 GiB minus a 1 GiB CollNet AllReduce (the latency cancels) grows by 1/0.85 = 1.17647.
  calibrate::HardwareProfile a100 = calibrate::load_profile("a100-sxm4-80gb");
  CHECK(a100.collectives.nccl.collnet_direct_efficiency == 1.0);
  CHECK(calibrate::load_profile("h100-sxm5-80gb").collectives.nccl.collnet_direct_efficiency == 0.85);
  topology::ClusterSpec c = cluster(2, 8, 300, 200);
  c.fabric.in_network_reduction = true;
  NcclSettings collnet;
  collnet.algorithm = Algorithm::kCollNet;
  collnet.protocol = Protocol::kSimple;
  auto model_bandwidth_time = [&](const calibrate::HardwareProfile& p) {
    return to_us(plan(c, p, CollectiveOp::kAllReduce, GiB(2), collnet).nccl_model_time) -
           to_us(plan(c, p, CollectiveOp::kAllReduce, GiB(1), collnet).nccl_model_time);
  };
  const double ampere = model_bandwidth_time(a100);
  a100.collectives.nccl.collnet_direct_efficiency = 0.85;
  CHECK(model_bandwidth_time(a100) / ampere == doctest::Approx(1 / 0.85).epsilon(1e-9));
  // The physical time (what the simulator charges) does not take NCCL's factor.
  CHECK(to_us(plan(c, a100, CollectiveOp::kAllReduce, GiB(1), collnet).time) ==
        doctest::Approx(
            to_us(plan(c, calibrate::load_profile("a100-sxm4-80gb"), CollectiveOp::kAllReduce, GiB(1), collnet).time)));
}

TEST_CASE("PAT: AllGather with one GPU per node below NCCL's crossovers, timed at 0.75 of the NIC") {
  // 16 nodes x 1 H100, 400 Gb/s NICs: b_nic = 50 GB/s x 0.85 = 42.5 GB/s. NCCL's model (tuning.cc, nccl.md §1.6):
  //   PAT        latency 8.0 + log2(16) x 14/3.5 + 16 x 2.8 = 68.8 us; bandwidth 42.5 x 0.75 = 31.875 GB/s (no ratio
  //              for a non-ring AllGather)
  //   ring LL128 latency 14.0 + 15 x 8.5 (one GPU per node: the tree's NET latency) = 141.5 us;
  //              bus min(42.5 x 0.92, 12 x 36.7) = 39.1 GB/s, x 16/15 = 41.707 GB/s
  //   ring Simple latency 8.4 + 15 x 14 = 218.4 us; 42.5 x 16/15 = 45.333 GB/s
  //   ring LL    latency 6.6 + 15 x 5.0 = 81.6 us; bus min(20.4 (the >2-node cap), 21.25) x 16/15 = 21.76 GB/s
  // PAT beats ring LL everywhere above 1 byte (lower latency and more bandwidth); PAT = LL128 at
  // 72.7 us / (1/31875 - 1/41707 us/B) = 9.84 MB, LL128 = Simple at 76.9 / (1/41707 - 1/45333) = 40.1 MB.
  const calibrate::HardwareProfile h100 = calibrate::load_profile("h100-sxm5-80gb");
  const auto nodes = cluster(16, 1, 450, 400);
  CHECK(plan(nodes, h100, CollectiveOp::kAllGather, bytes(1024.0)).algorithm == Algorithm::kPat);
  const CollectivePlan at_1m = plan(nodes, h100, CollectiveOp::kAllGather, MiB(1));
  CHECK(at_1m.algorithm == Algorithm::kPat);
  CHECK(at_1m.protocol == Protocol::kSimple);
  CHECK(to_us(at_1m.nccl_model_time) == doctest::Approx(68.8 + 1048576.0 / 31875));
  // Physical: the NIC's (n - 1)/n x S at 0.75 of 42.5 GB/s: 68.8 us + 1,048,576 x 15/16 / 31.875e9 = 99.64 us.
  CHECK(to_us(at_1m.time) == doctest::Approx(68.8 + 1048576.0 * 15 / 16 / 31875));
  CHECK(plan(nodes, h100, CollectiveOp::kReduceScatter, MiB(8)).algorithm == Algorithm::kPat);
  const CollectivePlan at_16m = plan(nodes, h100, CollectiveOp::kAllGather, MiB(16));
  CHECK(at_16m.algorithm == Algorithm::kRing);
  CHECK(at_16m.protocol == Protocol::kLL128);
  CHECK(plan(nodes, h100, CollectiveOp::kAllGather, MiB(64)).protocol == Protocol::kSimple);
  // Not a candidate: AllReduce; two GPUs per node; a profile of an NCCL release without PAT.
  auto has_pat = [&](const topology::ClusterSpec& c, const calibrate::HardwareProfile& p, CollectiveOp op) {
    bool found = false;
    for (const CollectivePlan& x : CollectiveModel(c, p, {}).candidates({op, first(c.gpu_count()), MiB(1), 0}))
      found = found || x.algorithm == Algorithm::kPat;
    return found;
  };
  CHECK(has_pat(nodes, h100, CollectiveOp::kAllGather));
  CHECK_FALSE(has_pat(nodes, h100, CollectiveOp::kAllReduce));
  CHECK_FALSE(has_pat(cluster(8, 2, 450, 400), h100, CollectiveOp::kAllGather));
  calibrate::HardwareProfile old = h100;
  old.collectives.nccl.pat_bus_efficiency = 0;
  CHECK_FALSE(has_pat(nodes, old, CollectiveOp::kAllGather));
}
