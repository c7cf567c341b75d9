// TPU-style collectives on a torus (Algorithm::kTorus, workloads/nccl_model.h): per-dimension times against
// closed forms derived here by hand, FLOW against ANALYTICAL, degenerate tori, and the TPU v4 profile.
//
// Figures used throughout (calibrate/profiles/tpu-v4.textproto, topology/presets/tpu-v4-cube.textproto):
//   ICI link 50 GB/s per direction; nvlink_bus_efficiency 0.9  =>  b = 45e9 B/s per direction of a link
//   ring_base_latency 5 µs per call; nvlink_step_latency α = 1 µs per ring step
#include <doctest/doctest.h>

#include <map>
#include <numeric>
#include <string>

#include "calibrate/hardware_profile.h"
#include "sim/input_error.h"
#include "sim/simulation.h"
#include "topology/topology.h"
#include "topology/torus.h"
#include "workloads/collective_engine.h"
#include "workloads/nccl_model.h"
#include "workloads/network_model.h"
#include "workloads/scenario.h"

using namespace clustersim;
using namespace clustersim::workloads;

namespace {

// A torus cluster as the tpu-v4-cube preset builds it: 4 chips per tray, 50 GB/s per ICI link and direction,
// nvlink_per_direction = links per chip x 50 GB/s.
// `wraps` false: a mesh (a TPU v4 slice smaller than whole 4x4x4 cubes).
topology::ClusterSpec torus(std::uint32_t x, std::uint32_t y, std::uint32_t z, double hop_us = 0, bool wraps = true) {
  topology::ClusterSpec c;
  const std::uint32_t chips = x * y * z;
  c.gpus_per_node = chips % 4 == 0 ? 4 : chips;
  c.nodes = chips / c.gpus_per_node;
  c.gpu = "TPUv4";
  c.node.preset = "tpu-v4-cube";
  c.node.scale_up = topology::ScaleUp::kTorus;
  c.node.nics_per_node = 0;
  c.node.torus = {x, y, z};
  c.node.torus_wraps = wraps;
  c.nvlink_per_direction = GBps(50.0 * topology::torus_links_per_chip(c.node.torus));
  c.nvlink_hop_latency = microseconds(hop_us);
  return c;
}

std::vector<std::uint32_t> chips(std::initializer_list<std::uint32_t> list) { return list; }
std::vector<std::uint32_t> first(std::uint32_t n) {
  std::vector<std::uint32_t> v(n);
  std::iota(v.begin(), v.end(), 0u);
  return v;
}

Scenario scenario(const topology::ClusterSpec& c, Fidelity f) {
  Scenario s;
  s.name = "torus test";
  s.cluster = c;
  s.profile = calibrate::load_profile("tpu-v4");
  s.profile_ref = "tpu-v4";
  s.fidelity = f;
  return s;
}

const calibrate::HardwareProfile& tpu() {
  static const calibrate::HardwareProfile p = calibrate::load_profile("tpu-v4");
  return p;
}

constexpr double kB = 45e9;  // b: one ICI link, one direction, after the 0.9 efficiency

}  // namespace

TEST_CASE("TPU v4 profile loads by name with its published figures") {
  const calibrate::HardwareProfile p = calibrate::load_profile("tpu-v4");
  CHECK(p.origin == "built-in");
  CHECK(p.gpu.gpu == "TPUv4");  // the tpu-v4-cube preset's chip name
  // Google Cloud TPU v4 documentation / Jouppi et al. 2023: 275 TFLOP/s bf16, 32 GiB HBM2 at 1200 GB/s.
  CHECK(p.gpu.peak_bf16.raw() == doctest::Approx(275e12));
  CHECK(p.gpu.hbm_bandwidth.raw() == doctest::Approx(1200e9));
  CHECK(p.gpu.memory_capacity.raw() == doctest::Approx(32.0 * 1073741824.0));
  // Derived: XLA's 3-pass (HIGH) and 6-pass (HIGHEST) bf16 f32 matmuls: 275/3 = 91.7, 275/6 = 45.8 TFLOP/s.
  CHECK(p.gpu.peak_tf32.raw() == doctest::Approx(91.7e12));
  CHECK(p.gpu.peak_fp32.raw() == doctest::Approx(45.8e12));
  CHECK(p.gpu.gemm_table.empty());  // no measured curve: one assumed efficiency
  CHECK_FALSE(p.collectives.nccl.present);  // ICI has no NCCL tuning table
  CHECK(p.collectives.nvlink_bus_efficiency == doctest::Approx(0.9));
  const auto names = calibrate::builtin_profile_names();
  CHECK(std::find(names.begin(), names.end(), "tpu-v4") != names.end());
}

TEST_CASE("axis link loads: rings, two-member lines and ties") {
  using topology::AxisTransfer;
  // Bidirectional ring over all 4 positions of a 4-cycle: each directed link carries one edge.
  const std::vector<AxisTransfer> ring4 = {{0, 1, 1}, {1, 2, 1}, {2, 3, 1}, {3, 0, 1},
                                           {1, 0, 1}, {2, 1, 1}, {3, 2, 1}, {0, 3, 1}};
  CHECK(topology::axis_max_load(4, true, ring4) == doctest::Approx(1.0));
  // Axis of 2 (one cable): both rings' edges 0->1 share the link 0->1.
  CHECK(topology::axis_max_load(2, true, std::vector<AxisTransfer>{{0, 1, 1}, {1, 0, 1}, {1, 0, 1}, {0, 1, 1}}) ==
        doctest::Approx(2.0));
  // 0 -> 2 on a 4-cycle: 2 hops either way, split evenly: 0.5 on each of the four links used.
  CHECK(topology::axis_max_load(4, true, std::vector<AxisTransfer>{{0, 2, 1}}) == doctest::Approx(0.5));
  // ... unless the transfer picks a way: the bidirectional ring over {0, 2} sends 0 -> 2 and 2 -> 0 clockwise
  // (increasing positions: 0->1->2, 2->3->0) and both counter-clockwise (2->1->0, 0->3->2): one unit per link.
  const std::vector<AxisTransfer> two_apart = {{0, 2, 1, +1}, {2, 0, 1, +1}, {2, 0, 1, -1}, {0, 2, 1, -1}};
  CHECK(topology::axis_max_load(4, true, two_apart) == doctest::Approx(1.0));
  CHECK(topology::axis_max_load(4, true, std::vector<AxisTransfer>{{0, 2, 1, +1}, {0, 2, 1, +1}}) ==
        doctest::Approx(2.0));
  CHECK(topology::axis_forward(4, true, 0, 2, +1));
  CHECK_FALSE(topology::axis_forward(4, true, 0, 2, -1));
  CHECK_FALSE(topology::axis_forward(4, true, 0, 3, +1));  // not a tie: the short way, backwards
  // The ring over {0, 1, 2}: clockwise 0->1, 1->2, 2->0 (2->3->0, forwards on the tie), counter-clockwise 1->0,
  // 2->1, 0->2 (0->3->2, backwards): every directed link carries one edge. Splitting the ties evenly would put
  // 1.5 on 0->1 (the clockwise edge and half of 0->2).
  const std::vector<AxisTransfer> three = {{0, 1, 1, +1}, {1, 2, 1, +1}, {2, 0, 1, +1},
                                           {1, 0, 1, -1}, {2, 1, 1, -1}, {0, 2, 1, -1}};
  CHECK(topology::axis_max_load(4, true, three) == doctest::Approx(1.0));
  std::vector<AxisTransfer> three_split = three;
  for (AxisTransfer& t : three_split) t.tie = 0;
  CHECK(topology::axis_max_load(4, true, three_split) == doctest::Approx(1.5));
  // Dimension-order walks on 4x4x4 (chip = x + 4y + 16z): 7 (3,1,0) -> 9 (1,2,0) goes along x first, 3 -> 1
  // being a tie, the way of increasing positions (3 -> 0 -> 1: chips 4, 5), then y 1 -> 2 (chip 9); 9 -> 0 along
  // x back to 8, then y 2 -> 0, a tie, forwards through 3 (chip 12) to 0.
  const topology::TorusDims cube = {4, 4, 4};
  CHECK(topology::torus_walk(cube, true, 7, 9) == std::vector<std::uint32_t>{7, 4, 5, 9});
  CHECK(topology::torus_walk(cube, true, 9, 0) == std::vector<std::uint32_t>{9, 8, 12, 0});
  CHECK(topology::torus_walk(cube, true, 5, 5) == std::vector<std::uint32_t>{5});
  CHECK(topology::torus_walk(cube, true, 0, 2, -1) == std::vector<std::uint32_t>{0, 3, 2});  // the tie taken backwards
  // 0 -> 3 on a 4-cycle: 1 hop backwards (wraparound), not 3 forwards.
  CHECK(topology::axis_distance(4, true, 0, 3) == 1);
  CHECK(topology::axis_distance(2, true, 0, 1) == 1);

  // The same axis as a line (a mesh: no wraparound). 0 -> 3 takes the 3 links forwards; the bidirectional ring
  // over all 4 positions closes with 3 -> 0 backwards (3->2->1->0) and 0 -> 3 forwards (0->1->2->3), so every
  // directed link of the line carries its ring edge and one closing edge: 2; the missing link 3 <-> 0 carries 0.
  CHECK(topology::axis_distance(4, false, 0, 3) == 3);
  CHECK(topology::axis_forward(4, false, 0, 3, +1));
  CHECK_FALSE(topology::axis_forward(4, false, 2, 0, +1));  // a line has one way
  CHECK(topology::axis_max_load(4, false, ring4) == doctest::Approx(2.0));
  std::vector<double> plus, minus;
  topology::axis_loads(4, false, ring4, plus, minus);
  CHECK(plus == std::vector<double>{2, 2, 2, 0});
  CHECK(minus == std::vector<double>{2, 2, 2, 0});
  // 0 -> 2 is no tie on a line: both units on 0->1 and 1->2.
  CHECK(topology::axis_max_load(4, false, std::vector<AxisTransfer>{{0, 2, 1}}) == doctest::Approx(1.0));
  // 7 (3,1,0) -> 9 (1,2,0) on a 4x4x4 mesh: x 3 -> 1 backwards through 2 (chips 6, 5), then y 1 -> 2 (chip 9).
  CHECK(topology::torus_walk(cube, false, 7, 9) == std::vector<std::uint32_t>{7, 6, 5, 9});
}

TEST_CASE("torus AllReduce time per dimension on a 4x4x4 slice (ANALYTICAL closed form)") {
  const auto c = torus(4, 4, 4, /*hop_us=*/0.5);
  const Bytes S = MiB(64);  // 67,108,864 B
  const CollectiveRequest req{CollectiveOp::kAllReduce, first(64), S, 0};
  const std::vector<TorusPhase> ph = torus_phases(c, tpu(), req);
  // Reduce-scatter along x, y, z, then all-gather along z, y, x; k = 4 on every axis.
  REQUIRE(ph.size() == 6);
  const int axes[] = {0, 1, 2, 2, 1, 0};
  for (int i = 0; i < 6; ++i) {
    CHECK(ph[i].axis == axes[i]);
    CHECK(ph[i].ranks == 4);
    CHECK(ph[i].steps == 3);  // k − 1 ring steps
    CHECK(ph[i].step == (i < 3 ? TorusStep::kReduceScatter : TorusStep::kAllGather));
  }
  // What a chip holds entering RS / leaving AG: S on x, S/4 on y, S/16 on z.
  CHECK(ph[0].bytes.raw() == doctest::Approx(67108864.0));
  CHECK(ph[1].bytes.raw() == doctest::Approx(16777216.0));
  CHECK(ph[2].bytes.raw() == doctest::Approx(4194304.0));
  CHECK(ph[3].bytes.raw() == doctest::Approx(4194304.0));
  CHECK(ph[5].bytes.raw() == doctest::Approx(67108864.0));
  // Per dimension the bidirectional ring moves (k−1)/k · S' over β = 2b = 90e9 B/s:
  //   x: 3/4 · 67,108,864 / 90e9 = 559.2405 µs;  y: 3/4 · 16,777,216 / 90e9 = 139.8101 µs;
  //   z: 3/4 · 4,194,304 / 90e9 = 34.9525 µs (the same again for the all-gathers).
  CHECK(to_us(ph[0].transfer) == doctest::Approx(559.2405).epsilon(1e-6));
  CHECK(to_us(ph[1].transfer) == doctest::Approx(139.8101).epsilon(1e-6));
  CHECK(to_us(ph[2].transfer) == doctest::Approx(34.9525).epsilon(1e-6));
  CHECK(to_us(ph[5].transfer) == doctest::Approx(559.2405).epsilon(1e-6));
  // Latency per phase: 3 steps × (α 1 µs + one 0.5 µs ICI link) = 4.5 µs; 2(k−1) = 6 steps per dimension.
  CHECK(to_us(ph[0].step_latency) == doctest::Approx(3.0));
  CHECK(to_us(ph[0].hop_latency) == doctest::Approx(1.5));
  // In this order, one axis at a time: 5 µs base + 6 phases × 4.5 µs = 32 µs, plus 2 · (63/64) · S / 90e9
  //   = 1.96875 · 67,108,864 / 90e9 = 1468.0064 µs  =>  1500.0064 µs, with 2 of a chip's 6 links busy.
  double serial = 5;
  for (const TorusPhase& p : ph) serial += to_us(p.step_latency + p.hop_latency + p.transfer);
  CHECK(serial == doctest::Approx(1500.0064).epsilon(1e-6));
  // Split in 3 parts, part j reduce-scattering along axes j, j+1, j+2 (mod 3) and all-gathering back: in each of
  // the 6 stages every axis carries one part. Stage transfers 3/4 · S' / 90e9 with S' = S/3, S/12, S/48:
  //   186.4135 + 46.6034 + 11.6508 = 244.6677 µs per half, 489.3354 µs in all
  //   (= 2 · (1/3)(1 + 1/4 + 1/16) · 3/4 · S / 90e9, a third of the serial 1468.0064 µs less one per mille);
  // latency unchanged (k = 4 on every axis: 3 steps per stage): 32 µs  =>  521.3354 µs.
  const std::vector<TorusPhase> split = torus_phases(c, tpu(), req, 3);
  REQUIRE(split.size() == 18);
  for (std::uint32_t stage = 0; stage < 6; ++stage)
    for (std::uint32_t part = 0; part < 3; ++part) {
      const TorusPhase& p = split[stage * 3 + part];
      CHECK(p.stage == stage);
      CHECK(p.part == part);
      // Reduce-scatter stage i: axis (j + i) mod 3; all-gather stage i: axis (j + 2 − i) mod 3.
      const std::uint32_t i = stage < 3 ? stage : stage - 3;
      CHECK(p.axis == int(stage < 3 ? (part + i) % 3 : (part + 2 - i) % 3));
    }
  CHECK(split[0].bytes.raw() == doctest::Approx(67108864.0 / 3));
  CHECK(split[3].bytes.raw() == doctest::Approx(67108864.0 / 12));
  CHECK(split[17].bytes.raw() == doctest::Approx(67108864.0 / 3));
  const CollectivePlan plan = CollectiveModel(c, tpu()).plan(req);
  CHECK(plan.algorithm == Algorithm::kTorus);
  CHECK(plan.protocol == Protocol::kSimple);
  CHECK(plan.channels == 3);  // the parts
  CHECK(to_us(plan.latency) == doctest::Approx(32.0));
  CHECK(to_us(plan.hop_latency) == doctest::Approx(9.0));
  CHECK(to_us(plan.time) == doctest::Approx(521.3354).epsilon(1e-6));
  // The plan's bus bandwidth is the transfer's (latency left out): 2 · (63/64) · S / 489.3354 µs = 270.0 GB/s, a
  // chip's 6 links × 45 GB/s; the nccl-tests busbw, latency included, is 2 · (63/64) · S / 521.3354 µs = 253.4 GB/s.
  CHECK(plan.bus_bandwidth.raw() == doctest::Approx(1.96875 * 67108864 / 489.3354e-6).epsilon(1e-6));
  // And the same number through the ANALYTICAL engine.
  CHECK(to_us(run_collective(scenario(c, Fidelity::kAnalytical), req).time) == doctest::Approx(521.3354).epsilon(1e-6));
}

TEST_CASE("torus: one part per axis order once the transfer outweighs the extra steps") {
  // The 4x2 box of chips 0–7 (x 0–3, y 0–1, z 0) of a 4x4x4 torus, no link latency. Along x a bidirectional ring
  // of 4 (load 3/8 of what a chip holds on its busiest link); along y two neighbours, whose two rings share the
  // one cable (load 1/2). With b = 45e9 B/s:
  //   one part, x then y:  RS = 3/8 · S/b + 1/2 · S/4/b = 1/2 · S/b, 3 + 1 steps; AllReduce S/b, 8 steps.
  //   two parts (x,y | y,x): stage 0 max(3/8 · S/2, 1/2 · S/2)/b = 1/4 · S/b; stage 1 max(1/2 · S/8,
  //     3/8 · S/4)/b = 3/32 · S/b; RS = 11/32 · S/b, 3 + 3 steps; AllReduce 11/16 · S/b, 12 steps.
  // The split costs 4 steps (4 µs) more and saves 5/16 · S/b: it pays from S = 4e-6 · 45e9 · 16/5 = 576,000 B.
  //   64 KiB: one part 5 + 8 + 65,536/45e9 = 14.45636 µs (the split: 5 + 12 + 1.0012 = 18.0012 µs);
  //   8 MiB:  the split 5 + 12 + 11/16 · 8,388,608/45e9 = 17 + 128.1593 = 145.1593 µs (one part 199.4135 µs).
  const auto c = torus(4, 4, 4);
  const CollectiveModel m(c, tpu());
  const CollectivePlan small = m.plan({CollectiveOp::kAllReduce, first(8), bytes(65536), 0});
  CHECK(small.channels == 1);
  CHECK(to_us(small.time) == doctest::Approx(14.45636).epsilon(1e-6));
  const CollectivePlan large = m.plan({CollectiveOp::kAllReduce, first(8), MiB(8), 0});
  CHECK(large.channels == 2);
  CHECK(to_us(large.time) == doctest::Approx(145.1593).epsilon(1e-6));
  // FLOW runs the same stages as flows: the parts of a stage use disjoint links, so it takes the same time.
  CHECK(to_us(run_collective(scenario(c, Fidelity::kFlow), {CollectiveOp::kAllReduce, first(8), MiB(8), 0}).time) ==
        doctest::Approx(145.1593).epsilon(1e-6));
  // Broadcast, Reduce, AlltoAll and Send/Recv do not split.
  CHECK(torus_axis_parts(c, {CollectiveOp::kBroadcast, first(8), MiB(8), 0}) == 1);
  CHECK(torus_axis_parts(c, {CollectiveOp::kReduceScatter, first(8), MiB(8), 0}) == 2);
  CHECK(torus_axis_parts(c, {CollectiveOp::kAllReduce, chips({0, 1, 2, 3}), MiB(8), 0}) == 1);  // one axis
}

TEST_CASE("torus ReduceScatter, AllGather, Broadcast and AlltoAll closed forms on 4x4x4") {
  const auto c = torus(4, 4, 4);
  const CollectiveModel m(c, tpu());
  const Bytes S = MiB(64);  // nccl-tests size: the total for ReduceScatter/AllGather/AlltoAll
  // ReduceScatter = the AllReduce's first half, in 3 parts (previous test): 5 µs + 9 steps × 1 µs + 244.6677 µs
  // = 258.6677 µs (one part at a time: 14 + (63/64) · S / 90e9 = 14 + 734.0032 µs).
  CHECK(to_us(m.plan({CollectiveOp::kReduceScatter, first(64), S, 0}).time) == doctest::Approx(258.6677).epsilon(1e-6));
  // AllGather along z, y, x from S/64 per chip: z leaves S/16, y S/4, x S: the same bytes as the RS, reversed.
  const auto ag = torus_phases(c, tpu(), {CollectiveOp::kAllGather, first(64), S, 0});
  REQUIRE(ag.size() == 3);
  CHECK(ag[0].axis == 2);
  CHECK(ag[0].bytes.raw() == doctest::Approx(4194304.0));
  CHECK(ag[2].bytes.raw() == doctest::Approx(67108864.0));
  // In 3 parts part j gathers along axes j+2, j+1, j (mod 3) from S/192: S/48, S/12, S/3 leave its stages.
  const auto ag3 = torus_phases(c, tpu(), {CollectiveOp::kAllGather, first(64), S, 0}, 3);
  REQUIRE(ag3.size() == 9);
  CHECK(ag3[1].axis == 0);  // part 1, stage 0: (1 + 2) mod 3
  CHECK(ag3[1].bytes.raw() == doctest::Approx(67108864.0 / 48));
  CHECK(ag3[8].bytes.raw() == doctest::Approx(67108864.0 / 3));
  CHECK(to_us(m.plan({CollectiveOp::kAllGather, first(64), S, 0}).time) == doctest::Approx(258.6677).epsilon(1e-6));
  // Broadcast from chip 0, forced to the per-axis chains: per axis two pipelined chains, each through the line's
  // 3 other chips (clockwise and counter-clockwise), S/2 each, so every chip gets both halves:
  //   S/2 / b = 33,554,432 / 45e9 = 745.6540 µs per axis; latency 3 steps × 1 µs per axis; 5 µs base.
  //   3 × 745.6540 + 9 + 5 = 2250.9621 µs.
  NcclSettings torus_only, ring_only;
  torus_only.algorithm = Algorithm::kTorus;
  ring_only.algorithm = Algorithm::kRing;
  const CollectivePlan chains = CollectiveModel(c, tpu(), torus_only).plan({CollectiveOp::kBroadcast, first(64), S, 0});
  CHECK(to_us(chains.time) == doctest::Approx(2250.9621).epsilon(1e-6));
  // The axes run one after another (1.5 S/b in all), where the ring through the 64 chips moves S once (S/b =
  // 1491.3087 µs plus its steps): unforced, the faster ring runs.
  const CollectivePlan ring = CollectiveModel(c, tpu(), ring_only).plan({CollectiveOp::kBroadcast, first(64), S, 0});
  CHECK(to_us(ring.time) > 1491.3087);
  CHECK(ring.time < chains.time);
  const CollectivePlan chosen = m.plan({CollectiveOp::kBroadcast, first(64), S, 0});
  CHECK(chosen.algorithm == Algorithm::kRing);
  CHECK(chosen.time == ring.time);
  // AlltoAll: each pair S/64 on shortest paths. Along one axis a directed link carries 32 pairs' shares
  // (4 lines' worth of 16 pairs per (i, j); distances 1, 2, 1 on a 4-cycle, 2 split evenly): 32/64 · S / b
  //   = 33,554,432 / 45e9 = 745.6540 µs; + 5 µs base + 1 step + 0 link latency = 751.6540 µs.
  CHECK(to_us(m.plan({CollectiveOp::kAllToAll, first(64), S, 0}).time) == doctest::Approx(751.6540).epsilon(1e-6));
}

TEST_CASE("1-D torus: the per-dimension algorithm degenerates to one bidirectional ring") {
  // 8 chips in a ring (torus 8x1x1, 2 ICI links per chip). AllReduce = RS + AG over k = 8 on one axis:
  //   2 · (7/8) · S / (2b) = 7/8 · S / 45e9;  S = 8 MiB: 7/8 · 8,388,608 / 45e9 = 7,340,032 / 45e9 = 163.1118 µs
  //   latency 5 µs + 2 · 7 steps × 1 µs = 19 µs  =>  182.1118 µs.
  // (The classic unidirectional ring, 2(n−1)/n · S / b, takes twice the transfer time: 326.2236 µs.)
  const auto ring8 = torus(8, 1, 1);
  const CollectiveRequest req{CollectiveOp::kAllReduce, first(8), MiB(8), 0};
  const CollectivePlan p = CollectiveModel(ring8, tpu()).plan(req);
  CHECK(p.algorithm == Algorithm::kTorus);
  CHECK(torus_phases(ring8, tpu(), req).size() == 2);
  CHECK(to_us(p.time) == doctest::Approx(182.1118).epsilon(1e-6));
  CHECK(to_us(run_collective(scenario(ring8, Fidelity::kFlow), req).time) == doctest::Approx(182.1118).epsilon(1e-6));

  // Two chips (torus 2x1x1): one cable, so both directions of the "ring" share each direction of it.
  // RS: each chip sends S/2 over the link; AG the same: S / b = 8,388,608 / 45e9 = 186.4135 µs
  //   + 5 µs + 2 steps × 1 µs = 193.4135 µs.
  const auto pair = torus(2, 1, 1);
  const CollectiveRequest two{CollectiveOp::kAllReduce, first(2), MiB(8), 0};
  CHECK(to_us(CollectiveModel(pair, tpu()).plan(two).time) == doctest::Approx(193.4135).epsilon(1e-6));
  CHECK(to_us(run_collective(scenario(pair, Fidelity::kFlow), two).time) == doctest::Approx(193.4135).epsilon(1e-6));
}

TEST_CASE("torus FLOW agrees with ANALYTICAL within 5% from 1 MiB (contention-free)") {
  const auto c = torus(4, 4, 4, 0.5);
  const Scenario flow = scenario(c, Fidelity::kFlow), analytical = scenario(c, Fidelity::kAnalytical);
  const std::vector<std::vector<std::uint32_t>> comms = {
      first(64),                                                             // the whole slice: x, y, z
      chips({0, 1, 2, 3}),                                                   // one x line (a TP group of tp 4)
      chips({0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60}),  // x = 0, the y-z plane (DP group)
      first(16),                                                             // the z = 0 plane
      first(8),  // a 4x2 box: unequal sides (the parts' stages take the slower axis)
      // Members that are not neighbours (tp 2 along x leaves dp groups at x = 0 and 2): half the axis apart,
      // either way round is as short, and FLOW routes each ring the way torus_phases counts it.
      chips({0, 2}),
      chips({0, 2, 8, 10}),
      chips({0, 1, 2}),
      // Not boxes: NCCL's ring in rank order, its edges between chips that are not neighbours routed link by
      // link in dimension order, as the ANALYTICAL ring counts them (0..7 then 9: the edge 9 -> 0 takes 2 links;
      // 0..62: the closing edge 62 -> 0 takes 4).
      chips({0, 1, 2, 3, 4, 5, 6, 7, 9}),
      first(63),
  };
  for (const auto& gpus : comms) {
    const bool box = topology::torus_box(c.node.torus, gpus).has_value();
    for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather,
                            CollectiveOp::kBroadcast, CollectiveOp::kReduce, CollectiveOp::kAllToAll}) {
      if (op == CollectiveOp::kAllToAll && !box) continue;  // NCCL's point-to-point sends on a non-box
      for (double mib : {1.0, 16.0, 256.0}) {
        const CollectiveRequest req{op, gpus, MiB(mib), 1};
        const double a = run_collective(analytical, req).time.raw();
        const double f = run_collective(flow, req).time.raw();
        INFO(to_string(op), " on ", gpus.size(), " chips, ", mib, " MiB: analytical ", a * 1e6, " us, flow ", f * 1e6,
             " us");
        // Broadcast and Reduce take the faster of the axis chains and the ring; both fidelities the same one.
        const bool chain = op == CollectiveOp::kBroadcast || op == CollectiveOp::kReduce;
        if (!chain) CHECK(run_collective(flow, req).plan.algorithm == (box ? Algorithm::kTorus : Algorithm::kRing));
        CHECK(run_collective(flow, req).plan.algorithm == run_collective(analytical, req).plan.algorithm);
        CHECK(f == doctest::Approx(a).epsilon(0.05));
      }
    }
  }
}

TEST_CASE("torus AlltoAll on members that are not a box: point-to-point over dimension-order routes") {
  // Every member sends S/n to every other along topology::torus_walk (x, then y, then z, the short way, ties the
  // way of increasing positions). The busiest directed ICI link carries L pairs, counted here pair by pair (the
  // closed form counts per axis line), so the bandwidth part is L x S/n / 45 GB/s at both fidelities:
  // t(1 GiB) - t(256 MiB) = 768 MiB x L / n / 45e9. Before, ANALYTICAL charged a chip's (n - 1) S/n to one link
  // and FLOW hashed each pair onto any shortest path: 0.78x to 1.42x apart.
  struct Case {
    std::uint32_t x, y, z;
    bool wraps;
    std::vector<std::uint32_t> gpus;
  };
  const Case cases[] = {{4, 4, 4, true, chips({0, 1, 2, 3, 8, 16, 17})},
                        {4, 4, 4, true, first(9)},
                        {2, 4, 4, false, chips({0, 1, 2, 3, 8, 16, 17})}};
  for (const Case& k : cases) {
    CAPTURE(k.x);
    CAPTURE(k.gpus.size());
    const auto c = torus(k.x, k.y, k.z, 0, k.wraps);
    std::map<std::pair<std::uint32_t, std::uint32_t>, double> pairs_on;
    for (std::uint32_t s : k.gpus)
      for (std::uint32_t d : k.gpus) {
        if (s == d) continue;
        const std::vector<std::uint32_t> walk = topology::torus_walk(c.node.torus, k.wraps, s, d);
        for (std::size_t h = 0; h + 1 < walk.size(); ++h) pairs_on[{walk[h], walk[h + 1]}] += 1;
      }
    double L = 0;
    for (const auto& [link, count] : pairs_on) L = std::max(L, count);
    const double n = static_cast<double>(k.gpus.size());
    for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
      CAPTURE(static_cast<int>(f));
      const Scenario sc = scenario(c, f);
      auto t = [&](Bytes size) {
        return run_collective(sc, CollectiveRequest{CollectiveOp::kAllToAll, k.gpus, size, 0}).time.raw();
      };
      CHECK(run_collective(sc, CollectiveRequest{CollectiveOp::kAllToAll, k.gpus, GiB(1), 0}).plan.algorithm ==
            Algorithm::kPointToPoint);
      // The latencies cancel in the difference.
      CHECK(t(GiB(1)) - t(MiB(256)) == doctest::Approx(768.0 * 1048576 * L / n / kB).epsilon(1e-3));
    }
  }
}

TEST_CASE("TPU v4 mesh slice 2x4x4 (no wraparound): AllReduce phases and FLOW agreement") {
  // 32 chips, chip = x + 2y + 8z; per chip 1 + 2 + 2 links inside the mesh, b = 45e9 B/s per link and direction.
  const auto mesh = torus(2, 4, 4, /*hop_us=*/0.5, /*wraps=*/false);
  const Bytes S = MiB(64);  // 67,108,864 B
  const CollectiveRequest req{CollectiveOp::kAllReduce, first(32), S, 0};
  const std::vector<TorusPhase> ph = torus_phases(mesh, tpu(), req);
  REQUIRE(ph.size() == 6);  // reduce-scatter x, y, z; all-gather z, y, x
  // x (2 chips, one cable): both rings' edges share it, load 2 edges x (1/2) / 2 = 1/2 of what a chip holds:
  //   0.5 · 67,108,864 / 45e9 = 745.6540 µs (as on a torus: an axis of 2 has no wraparound either way).
  CHECK(ph[0].max_link_load == doctest::Approx(0.5));
  CHECK(to_us(ph[0].transfer) == doctest::Approx(745.6540).epsilon(1e-6));
  // y (4 chips in a line): each directed link carries 2 ring edges (axis link loads test), load 2 x (3/4) / 2 =
  // 3/4 of the S/2 a chip holds: 0.75 · 33,554,432 / 45e9 = 559.2405 µs, twice the torus's 279.6203 µs.
  CHECK(ph[1].max_link_load == doctest::Approx(0.75));
  CHECK(to_us(ph[1].transfer) == doctest::Approx(559.2405).epsilon(1e-6));
  // The same slice with wraparound: load 3/8, 0.375 · 33,554,432 / 45e9 = 279.6203 µs.
  const auto wrapped = torus(2, 4, 4, 0.5, /*wraps=*/true);
  CHECK(to_us(torus_phases(wrapped, tpu(), req)[1].transfer) == doctest::Approx(279.6203).epsilon(1e-6));
  // z: 0.75 · S/8 / 45e9 = 0.75 · 8,388,608 / 45e9 = 139.8101 µs.
  CHECK(to_us(ph[2].transfer) == doctest::Approx(139.8101).epsilon(1e-6));
  // Link latency of the y ring: edges of 1, 1, 1 and 3 links = 6, k−1 = 3 steps over 6/4 links each: 4.5 links x
  // 0.5 µs = 2.25 µs (a torus ring: 4 links, 1.5 µs).
  CHECK(to_us(ph[1].hop_latency) == doctest::Approx(2.25));
  // Send/Recv from chip 0 to chip 6 = (0, 3, 0): 3 links on the mesh.
  const std::vector<TorusPhase> p2p =
      torus_phases(mesh, tpu(), CollectiveRequest{CollectiveOp::kSendRecv, chips({0, 6}), MiB(1), 0});
  REQUIRE(p2p.size() == 1);
  CHECK(to_us(p2p[0].hop_latency) == doctest::Approx(1.5));
  CHECK(to_us(torus_phases(wrapped, tpu(), CollectiveRequest{CollectiveOp::kSendRecv, chips({0, 6}), MiB(1), 0})[0]
                  .hop_latency) == doctest::Approx(0.5));  // the torus: 1 wraparound link

  // FLOW routes the same lines link by link over a graph without the wraparound links: within 5% from 1 MiB.
  const Scenario flow = scenario(mesh, Fidelity::kFlow), analytical = scenario(mesh, Fidelity::kAnalytical);
  for (const auto& gpus : {first(32), chips({0, 2, 4, 6}), chips({0, 8, 16, 24}), first(8), first(31)}) {
    for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather,
                            CollectiveOp::kBroadcast, CollectiveOp::kReduce, CollectiveOp::kAllToAll}) {
      if (op == CollectiveOp::kAllToAll && gpus.size() == 31) continue;  // not a box
      for (double mib : {1.0, 64.0}) {
        const CollectiveRequest r{op, gpus, MiB(mib), 1};
        const double a = run_collective(analytical, r).time.raw(), f = run_collective(flow, r).time.raw();
        INFO(to_string(op), " on ", gpus.size(), " chips, ", mib, " MiB: analytical ", a * 1e6, " us, flow ", f * 1e6);
        CHECK(f == doctest::Approx(a).epsilon(0.05));
      }
    }
  }
}

TEST_CASE("torus algorithm choice: boxes only, ring when forced or not a box, GPU clusters never") {
  const auto c = torus(4, 4, 4);
  const CollectiveModel m(c, tpu());
  // Chips 0..5 are x line y=0 plus two chips of y=1: not a box, so NCCL's ring over one ICI link per edge:
  // 2 · 5/6 · S / b (ring Simple latency 5 µs + 10 steps × 1 µs) for S = 6 MiB:
  //   (5/3) · 6,291,456 / 45e9 = 233.0169 µs + 15 µs = 248.0169 µs.
  const CollectivePlan ring = m.plan({CollectiveOp::kAllReduce, first(6), MiB(6), 0});
  CHECK(ring.algorithm == Algorithm::kRing);
  CHECK(to_us(ring.time) == doctest::Approx(248.0169).epsilon(1e-6));
  // Forced ring on a box is allowed (for comparison); a forced protocol other than Simple is not.
  NcclSettings forced_ring;
  forced_ring.algorithm = Algorithm::kRing;
  CHECK(CollectiveModel(c, tpu(), forced_ring).plan({CollectiveOp::kAllReduce, first(64), MiB(1), 0}).algorithm ==
        Algorithm::kRing);
  NcclSettings ll;
  ll.protocol = Protocol::kLL;
  CHECK_THROWS_AS(CollectiveModel(c, tpu(), ll).plan({CollectiveOp::kAllReduce, first(64), MiB(1), 0}), InputError);
  CHECK(parse_algorithm("TORUS") == Algorithm::kTorus);
  CHECK(std::string(to_string(Algorithm::kTorus)) == "torus");
  // On a GPU cluster torus cannot be forced, and NCCL's choice never yields it.
  topology::ClusterSpec gpu;
  gpu.nodes = 2;
  gpu.gpus_per_node = 8;
  gpu.nvlink_per_direction = GBps(300);
  gpu.nic_per_direction = Gbitps(200);
  const auto a100 = calibrate::load_profile("a100-sxm4-80gb");
  NcclSettings forced_torus;
  forced_torus.algorithm = Algorithm::kTorus;
  CHECK_THROWS_AS(CollectiveModel(gpu, a100, forced_torus).plan({CollectiveOp::kAllReduce, first(16), MiB(1), 0}),
                  InputError);
  for (double mib : {0.001, 1.0, 256.0})
    CHECK(CollectiveModel(gpu, a100).plan({CollectiveOp::kAllReduce, first(16), MiB(mib), 0}).algorithm !=
          Algorithm::kTorus);
  // Send/Recv between any two chips: one route. Chip 0 -> 21 = (1,1,1): 3 hops; S / b + 5 µs + 1 step.
  //   1 MiB: 1,048,576 / 45e9 = 23.3017 µs + 6 µs = 29.3017 µs.
  CHECK(to_us(m.plan({CollectiveOp::kSendRecv, chips({0, 21}), MiB(1), 0}).time) ==
        doctest::Approx(29.3017).epsilon(1e-6));
}

TEST_CASE("torus FLOW Reduce: every line of the first axis, then the root's plane, then the root's line") {
  // Reduce to chip 0 on 4x4x4 runs z, y, x: first every z line (all 64 chips hold partial sums), then the z = 0
  // plane's y lines, then the root's x line (y = z = 0). Broadcast runs x, y, z the other way round. Chip
  // g = x + 4y + 16z is GPU g % 4 of node g / 4. So the x link between chips 5 (1,1,0) and 4 (0,1,0), on the
  // x line y = 1, z = 0, carries nothing in a Reduce to chip 0; the z link from chip 21 (1,1,1) to chip 5 (1,1,0)
  // carries part of the buffer (its line's chain towards z = 0).
  const auto c = torus(4, 4, 4);
  for (CollectiveOp op : {CollectiveOp::kReduce, CollectiveOp::kBroadcast}) {
    CAPTURE(to_string(op));
    const Scenario sc = scenario(c, Fidelity::kFlow);
    sim::Simulation simulation;
    NetworkModel network(simulation, sc);
    const CollectiveRequest req{op, first(64), MiB(64), 0};
    bool done = false;
    NcclSettings torus_only;  // the axis chains (unforced, the ring through the cube is faster)
    torus_only.algorithm = Algorithm::kTorus;
    network.run(CollectiveModel(c, tpu(), torus_only).plan(req), req, [&] { done = true; });
    simulation.run();
    REQUIRE(done);
    std::map<std::string, double> carried;
    for (const LinkUsage& u : network.link_usage()) carried[u.name] = u.bytes_carried.raw();
    // Off the root's x line no x link is used; every z line is (Reduce: towards z = 0; Broadcast: away from it).
    CHECK(carried.count("n1/gpu1->n1/gpu0") + carried.count("n1/gpu0->n1/gpu1") == 0);
    const std::string z_link = op == CollectiveOp::kReduce ? "n5/gpu1->n1/gpu1" : "n1/gpu1->n5/gpu1";
    REQUIRE(carried.count(z_link) == 1);
    // Chains from position 0 both ways round a line of 4, each through the 3 others with half the buffer: the link
    // next to the root carries S/2.
    CHECK(carried[z_link] == doctest::Approx(67108864.0 / 2));
  }
}
