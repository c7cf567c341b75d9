// topology::Topology: vertex and link counts of the simple form and of every preset at 1 and several
// nodes, routes (NVSwitch inside a node, rail-local leaf for the same rail, a spine between rails, ECMP
// spread), latency, bisection bandwidth and diameter against hand computation, faults, the explicit form,
// the fabric tiers and the Graphviz writer. Clusters are written as text and loaded through
// cli::load_cluster_text, so the presets are the shipped data files.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>

#include "cli/cluster_loader.h"
#include "sim/input_error.h"
#include "topology/topology.h"

namespace {

using clustersim::BytesPerSecond;
using clustersim::GBps;
using clustersim::to_GBps;
using clustersim::to_us;
using clustersim::topology::ClusterSpec;
using clustersim::topology::LinkIndex;
using clustersim::topology::LinkKind;
using clustersim::topology::NoRouteError;
using clustersim::topology::Topology;
using clustersim::topology::TopologyStats;
using clustersim::topology::VertexKind;
namespace cli = clustersim::cli;

ClusterSpec load(const std::string& text) {
  return cli::load_cluster_text(text, "test.textproto");
}

// "a -> b -> c": the vertex names along a route.
std::string path_of(const Topology& t, std::span<const LinkIndex> route) {
  if (route.empty()) return "";
  std::string out = t.vertex(t.link(route.front()).from).name;
  for (LinkIndex l : route) out += " -> " + t.vertex(t.link(l).to).name;
  return out;
}

std::uint32_t count(const TopologyStats& s, VertexKind k) {
  const auto it = s.vertices.find(k);
  return it == s.vertices.end() ? 0 : it->second;
}

const char* const kSimple2x8 =
    "nodes: 2 gpus_per_node: 8 gpu: \"A100-SXM4-80GB\"\n"
    "nvlink_gbytes_per_s_per_direction: 300 nic_gbits_per_s_per_direction: 200\n";

std::string dgx_a100(int nodes, const std::string& extra = "") {
  return "node_preset: \"dgx-a100\" nodes: " + std::to_string(nodes) + "\n" + extra;
}

}  // namespace

TEST_CASE("topology: the bisection's max-flow holds links whose rates sum past 64-bit integers of B/s") {
  // 2,048 nodes of 8 GPUs at NVLink 1e6 GB/s (1e15 B/s, the fastest rate the loader takes): the GPU->NVSwitch
  // edges the max-flow counts (both directions of the first half's, into the second half's) sum to about 2,048 x 8
  // x 1e15 = 1.6e19 B/s, past the 9.2e18 of a long long; the flow came out 0. The cut is still the NICs: 1,024
  // nodes x 8 NICs x 200 Gbit/s (25 GB/s) = 204,800 GB/s.
  const Topology t(
      load("nodes: 2048 gpus_per_node: 8 gpu: \"A100-SXM4-80GB\"\n"
           "nvlink_gbytes_per_s_per_direction: 1e6 nic_gbits_per_s_per_direction: 200\n"
           "fabric { kind: CLOS_THREE_LEVEL }\n"));
  CHECK(to_GBps(t.bisection_bandwidth()) == doctest::Approx(204800).epsilon(1e-9));
}

TEST_CASE("topology: simple form builds NVSwitch, one NIC per GPU and a rail-optimised tree") {
  const Topology t(load(kSimple2x8));
  // Per node: 8 GPUs + 1 NVSwitch + 8 NICs = 17 vertices; 8 GPU<->NVSwitch + 8 GPU<->NIC duplex = 32 links.
  // Fabric, radix 64, o = 1, NIC = fabric link = 25 GB/s: u = floor(64*25/(25+25)) = 32 uplinks, d = 32.
  // 8 rails x ceil(2/32) = 8 leaves, 32 spines. Vertices 2*17 + 8 + 32 = 74.
  // Links 2*32 + 16 NICs*2 + 8 leaves*32 spines*2 = 64 + 32 + 512 = 608.
  CHECK(t.gpu_count() == 16);
  CHECK(t.vertex_count() == 74);
  CHECK(t.link_count() == 608);
  CHECK(t.find_vertex("n1/nvswitch") != clustersim::topology::kNone);
  CHECK(t.find_vertex("rail7/leaf0") != clustersim::topology::kNone);
  CHECK(t.find_vertex("spine31") != clustersim::topology::kNone);
  CHECK(t.find_vertex("spine32") == clustersim::topology::kNone);
  const auto l = t.link(t.find_link("n0/gpu3->n0/nvswitch"));
  CHECK(l.kind == LinkKind::kNvlink);
  CHECK(to_GBps(l.bandwidth) == doctest::Approx(300).epsilon(1e-12));
  CHECK(l.name == "n0/gpu3->n0/nvswitch");
  CHECK(l.up);
  CHECK(t.node_of(9) == 1);
  CHECK(t.nvlink_domain_of(7) == 0);
  CHECK(t.nvlink_domain_of(8) == 1);

  // Same node: GPU -> NVSwitch -> GPU. Same rail: NIC -> leaf -> NIC. Different rails: through a spine.
  CHECK(path_of(t, t.route(0, 1)) == "n0/gpu0 -> n0/nvswitch -> n0/gpu1");
  CHECK(path_of(t, t.route(0, 8)) == "n0/gpu0 -> n0/nic0 -> rail0/leaf0 -> n1/nic0 -> n1/gpu0");
  const auto cross = t.route(0, 9);
  CHECK(cross.size() == 6);  // gpu -> nic -> leaf -> spine -> leaf -> nic -> gpu
  CHECK(t.vertex(t.link(cross[2]).to).kind == VertexKind::kSpine);
  CHECK(t.route(3, 3).empty());
  CHECK(t.diameter_hops() == 6);
  // Bisection: node 0 -> node 1 over 8 NICs x 25 GB/s = 200 GB/s.
  CHECK(to_GBps(t.bisection_bandwidth()) == doctest::Approx(200).epsilon(1e-9));
}

TEST_CASE("topology: preset vertex and link counts at 1 and several nodes") {
  SUBCASE("dgx-a100") {
    // One node: 8 GPU + 1 NVSwitch + 4 PCIe switches + 2 CPUs + 8 NICs = 23 vertices.
    // Links: GPU-NVSwitch 16 + GPU-PCIe 16 + NIC-PCIe 16 + PCIe-CPU 8 + CPU-CPU 2 = 58. No fabric for 1 node.
    const Topology one(load(dgx_a100(1)));
    CHECK(one.vertex_count() == 23);
    CHECK(one.link_count() == 58);
    // 4 nodes on the preset's radix-40 switches (QM8790; at 1:1 a leaf has 20 downlinks and 20 uplinks, one logical
    // spine per uplink): 4*23 + 8 rail leaves + 20 spines = 120; 4*58 + 32 NICs*2 + 8*20*2 = 232 + 64 + 320 = 616.
    const Topology four(load(dgx_a100(4)));
    CHECK(four.vertex_count() == 120);
    CHECK(four.link_count() == 616);
    const TopologyStats s = four.stats();
    CHECK(s.gpus == 32);
    CHECK(count(s, VertexKind::kPcieSwitch) == 16);
    CHECK(count(s, VertexKind::kLeaf) == 8);
    CHECK(count(s, VertexKind::kSpine) == 20);
    CHECK(s.nvlink_domain_size == 8);
    CHECK(s.nvlink_domains == 4);
    CHECK(s.links.at(LinkKind::kNvlink).count == 64);
    // 64 NVLink links x 300 GB/s = 19,200 GB/s.
    CHECK(to_GBps(s.links.at(LinkKind::kNvlink).total) == doctest::Approx(19200).epsilon(1e-9));
  }
  SUBCASE("dgx-h100, hgx-h100, hgx-h200 share the layout") {
    for (const char* preset : {"dgx-h100", "hgx-h100", "hgx-h200"}) {
      CAPTURE(preset);
      const Topology t(load(std::string("node_preset: \"") + preset + "\" nodes: 2"));
      // 2*23 + 8 leaves + u spines: NIC 400 Gb/s = 50 GB/s = fabric link: u = 32. 46 + 8 + 32 = 86.
      CHECK(t.vertex_count() == 86);
      CHECK(t.link_count() == 2 * 58 + 32 + 512);
      CHECK(to_GBps(t.link(t.find_link("n0/gpu0->n0/nvswitch")).bandwidth) == doctest::Approx(450));
      CHECK(to_GBps(t.link(t.find_link("n0/nic0->rail0/leaf0")).bandwidth) == doctest::Approx(50));
      CHECK(to_GBps(t.link(t.find_link("n0/gpu0->n0/pcie0")).bandwidth) == doctest::Approx(63));
    }
  }
  SUBCASE("gb200-nvl72: one 72-GPU NVLink domain per 18 trays") {
    // Per tray: 4 GPUs + 2 Grace + 4 NICs = 10 vertices; 4 GPU-CPU (C2C) + 4 GPU-NIC duplex = 16 links.
    // One rack (18 trays): 180 + 1 domain NVSwitch = 181 vertices; 18*16 + 72*2 = 288 + 144 = 432 links.
    const Topology rack(load("node_preset: \"gb200-nvl72\" nodes: 18"));
    CHECK(rack.vertex_count() == 181);
    CHECK(rack.link_count() == 432);
    CHECK(rack.stats().nvlink_domain_size == 72);
    CHECK(path_of(rack, rack.route(0, 71)) == "n0/gpu0 -> nvl0/nvswitch -> n17/gpu3");
    // Bisection: 36 GPUs x 900 GB/s into the NVSwitch = 32,400 GB/s (NVIDIA: 130 TB/s = 72 x 1.8 TB/s, both ways).
    CHECK(to_GBps(rack.bisection_bandwidth()) == doctest::Approx(32400).epsilon(1e-9));
    // Two racks: 362 + 4 rails x ceil(36/32) = 8 leaves + 32 spines = 402 vertices;
    // 864 + 144 NICs*2 + 8*32*2 = 864 + 288 + 512 = 1664 links.
    const Topology two(load("node_preset: \"gb200-nvl72\" nodes: 36"));
    CHECK(two.vertex_count() == 402);
    CHECK(two.link_count() == 1664);
    CHECK(two.nvlink_domain_of(71) == 0);
    CHECK(two.nvlink_domain_of(72) == 1);
    // Node 18 sits on rail0/leaf0 with node 0 (32 nodes per leaf): GPU 0 -> GPU 72 needs no spine.
    CHECK(path_of(two, two.route(0, 72)) == "n0/gpu0 -> n0/nic0 -> rail0/leaf0 -> n18/nic0 -> n18/gpu0");
  }
  SUBCASE("8-GPU PCIe server: GPU to GPU through PCIe switches and the CPUs") {
    // 8 GPUs + 4 PCIe switches + 2 CPUs + 2 NICs = 16 vertices; GPU-PCIe 16 + NIC-PCIe 4 + PCIe-CPU 8 + UPI 2 = 30.
    const Topology t(load("node_preset: \"pcie-8gpu-sys-4029gp-trt\" nodes: 1"));
    CHECK(t.vertex_count() == 16);
    CHECK(t.link_count() == 30);
    CHECK(t.stats().vertices.count(VertexKind::kNvSwitch) == 0);
    CHECK(path_of(t, t.route(0, 1)) == "n0/gpu0 -> n0/pcie0 -> n0/gpu1");
    CHECK(path_of(t, t.route(0, 2)) == "n0/gpu0 -> n0/pcie0 -> n0/cpu0 -> n0/pcie1 -> n0/gpu2");
    CHECK(path_of(t, t.route(0, 4)) == "n0/gpu0 -> n0/pcie0 -> n0/cpu0 -> n0/cpu1 -> n0/pcie2 -> n0/gpu4");
    CHECK(t.diameter_hops() == 5);
    // GPUs 0-3 below CPU 0 send to GPUs 4-7 below CPU 1: UPI 41.6 GB/s, but CPU 1 reaches its GPUs through
    // 2 switch uplinks of 15.75 GB/s: min(41.6, 2 x 15.75) = 31.5 GB/s.
    CHECK(to_GBps(t.bisection_bandwidth()) == doctest::Approx(31.5).epsilon(1e-9));
    // Two of them: NIC 0 serves GPUs 0-3 (NIC floor(i*2/8)), NIC 1 GPUs 4-7; 2 rails.
    const Topology two(load("node_preset: \"pcie-8gpu-sys-4029gp-trt\" nodes: 2"));
    CHECK(path_of(two, two.route(2, 10)) ==
          "n0/gpu2 -> n0/pcie1 -> n0/cpu0 -> n0/pcie0 -> n0/nic0 -> rail0/leaf0 -> n1/nic0 -> n1/pcie0 -> n1/cpu0 -> "
          "n1/pcie1 -> n1/gpu2");
  }
  SUBCASE("tpu-v4-cube: 4x4x4 torus with wraparound") {
    // 64 chips, each with a duplex link to its +1 neighbour in x, y and z: 64*3*2 = 384 ICI links.
    const Topology t(load("node_preset: \"tpu-v4-cube\" nodes: 16"));
    CHECK(t.vertex_count() == 64);
    CHECK(t.link_count() == 384);
    const TopologyStats s = t.stats();
    CHECK(s.links.at(LinkKind::kIci).count == 384);
    CHECK(to_GBps(t.link(0).bandwidth) == doctest::Approx(50));  // 6 links share 300 GB/s per chip
    CHECK(s.nvlink_domain_size == 64);
    // Farthest chip: 2 hops per dimension with wraparound = 6.
    CHECK(s.diameter_hops == 6);
    CHECK(t.route(0, 42).size() == 6);  // chip 42 = (2, 2, 2)
    CHECK(t.route(0, 3).size() == 1);   // (3, 0, 0) is 0's wraparound neighbour
    // Halves z in {0,1} and {2,3}: 16 columns x 2 crossing links (1->2 and the wraparound 0->3) x 50 GB/s.
    CHECK(to_GBps(s.bisection) == doctest::Approx(1600).epsilon(1e-9));
  }
  SUBCASE("tpu-v4-cube as a 2x4x4 slice: a mesh, no wraparound") {
    // 32 chips (chip = x + 2y + 8z). Cables: x (2 long) one per line x 4·4 lines = 16; y and z (4 long, no
    // wraparound) 3 per line x 2·4 lines = 24 each: 64 cables, 128 directed ICI links (a torus would have 80 and
    // 160). A chip inside the mesh has 1 + 2 + 2 = 5 links: 5 x 50 GB/s per chip, 50 per link.
    const Topology t(load("node_preset: \"tpu-v4-cube\" nodes: 8 torus { x: 2 y: 4 z: 4 }"));
    CHECK(t.vertex_count() == 32);
    const TopologyStats s = t.stats();
    CHECK(s.links.at(LinkKind::kIci).count == 128);
    CHECK(to_GBps(s.links.at(LinkKind::kIci).total) == doctest::Approx(128 * 50.0));
    // Farthest chips: 1 + 3 + 3 hops (corner to corner of the mesh); 0 -> (0, 3, 0) = chip 6 takes 3 links, not
    // the 1 wraparound link a torus would have.
    CHECK(s.diameter_hops == 7);
    CHECK(t.route(0, 6).size() == 3);
    // Cuts: across x 16 cables x 50 = 800 GB/s; across y (y < 2) or z one cable per line x 8 lines = 400: the least.
    CHECK(to_GBps(s.bisection) == doctest::Approx(400).epsilon(1e-9));
  }
  SUBCASE("a torus's bisection is its least cut across an axis, whichever axis is the long one") {
    // 128 chips as 4x4x8, 8x4x4 and 4x8x4: cutting the 8-long axis in half leaves 4·4 = 16 lines along it, each
    // crossing the cut twice (the middle link and the wraparound) at 50 GB/s: 1600 GB/s. Halving a 4-long axis
    // crosses 8·4 = 32 lines twice: 3200. By chip index the first half is z < 2 on the 8x4x4 slice, which is the
    // 3200 GB/s cut; the bisection is the least: 1600 for all three.
    for (const char* dims : {"x: 4 y: 4 z: 8", "x: 8 y: 4 z: 4", "x: 4 y: 8 z: 4"}) {
      CAPTURE(dims);
      const Topology t(load(std::string("node_preset: \"tpu-v4-cube\" nodes: 32 torus { ") + dims + " }"));
      CHECK(to_GBps(t.bisection_bandwidth()) == doctest::Approx(1600).epsilon(1e-9));
    }
    const Topology t(load("node_preset: \"tpu-v4-cube\" nodes: 32 torus { x: 8 y: 4 z: 4 }"));
    CHECK(to_GBps(t.max_flow_between([](std::uint32_t g) { return g < 64; })) == doctest::Approx(3200).epsilon(1e-9));
  }
}

TEST_CASE("topology: rail-optimised routes use the GPU's own NIC, the rail leaf, and a spine between rails") {
  // Radix 8, o = 1, 25 GB/s everywhere: u = floor(8*25/50) = 4 spines, d = 4 nodes per rail leaf.
  const std::string ecmp = "fabric { switch_radix: 8 routing: ECMP_HASH }";
  for (const std::string& fabric : {std::string("fabric { switch_radix: 8 }"), ecmp}) {
    CAPTURE(fabric);
    const Topology t(load(dgx_a100(2, fabric)));
    CHECK(t.stats().vertices.at(VertexKind::kSpine) == 4);
    // GPU 0 and GPU 1 share PCIe switch 0, but the NVSwitch wins the 2-hop tie.
    CHECK(path_of(t, t.route(0, 1)) == "n0/gpu0 -> n0/nvswitch -> n0/gpu1");
    CHECK(path_of(t, t.route(0, 8)) ==
          "n0/gpu0 -> n0/pcie0 -> n0/nic0 -> rail0/leaf0 -> n1/nic0 -> n1/pcie0 -> n1/gpu0");
    // Rail 0 to rail 1: 8 links; the 4th vertex after the source is a spine. With the ECMP hash, 1,000 flows
    // spread over the 4 spines: each expected 250, allowed +-20% (200..300). By destination (and adaptively, the
    // default, whose representative route() is the D-mod-k one) every flow to n1/nic1 takes one spine: NICs are
    // numbered leaf by leaf (rail r's leaf holds n0/nic r and n1/nic r: numbers 2r and 2r + 1), so n1/nic1 is
    // number 3 and takes uplink 3 mod 4 = 3, to spine3.
    std::map<std::string, int> per_spine;
    for (std::uint64_t key = 0; key < 1000; ++key) {
      const auto r = t.route(0, 9, key);
      REQUIRE(r.size() == 8);
      CHECK(t.vertex(t.link(r[0]).to).name == "n0/pcie0");
      CHECK(t.vertex(t.link(r[2]).to).name == "rail0/leaf0");
      CHECK(t.vertex(t.link(r[6]).from).name == "n1/nic1");
      ++per_spine[t.vertex(t.link(r[3]).to).name];
    }
    if (fabric == ecmp) {
      REQUIRE(per_spine.size() == 4);
      for (const auto& [spine, n] : per_spine) {
        CAPTURE(spine);
        CHECK(n >= 200);
        CHECK(n <= 300);
      }
    } else {
      REQUIRE(per_spine.size() == 1);
      CHECK(per_spine.begin()->first == "spine3");
      // n0/gpu0 to rail r of node 1 (number 2r + 1): spines 1, 3, 1, 3, ...; to rail r of node 0 from node 1's
      // GPU 1 (number 2r): spines 0, 2, 0, 2, ...
      for (std::uint32_t r = 1; r < 8; ++r) {
        CAPTURE(r);
        CHECK(t.vertex(t.link(t.route(0, 8 + r)[3]).to).name == "spine" + std::to_string((2 * r + 1) % 4));
        if (r != 1) CHECK(t.vertex(t.link(t.route(9, r)[3]).to).name == "spine" + std::to_string((2 * r) % 4));
      }
    }
    // Deterministic and cached: the same key gives the same links (the same storage).
    CHECK(t.route(0, 9, 17).data() == t.route(0, 9, 17).data());
    CHECK(t.diameter_hops() == 8);
  }
}

TEST_CASE("topology: routed by destination, a ring's node-to-node hops share no fabric link on full-bisection trees") {
  // The shift pattern of NCCL's rings across nodes: GPU c of node i sends to GPU c of node i + 1 (the last to node
  // 0), one flow per rail c with flow key c, on 16 DGX H100 nodes (8 NICs each) under fabrics of 16-port switches
  // at 1:1. By destination (D-mod-k) every leaf/spine/core link carries at most one of the 128 flows: a leaf's
  // NICs have consecutive numbers, so the flows leaving a leaf go to consecutive numbers, one per uplink
  // (u = 8: the Clos's leaf holds one node, whose 8 flows go to numbers 8(i + 1) + c), and at a pod's spine
  // (three-level) the core is digit (number / 8) mod 8, the same for the 8 flows of one node pair but on 8
  // different spines. An AlltoAll's flows into one NIC all take one path. The ECMP hash puts 2 or more flows
  // on some link of the Clos forms (the same hash every run). Without a `routing` the switches route adaptively,
  // and route() gives the D-mod-k path as the representative one.
  struct Form {
    const char* fabric;
    bool hash_collides;  // rail-optimised: each rail leaves its leaves at 2 boundaries only, the hash is not tested
  };
  const Form forms[] = {{"kind: CLOS_TWO_LEVEL switch_radix: 16", true},
                        {"kind: CLOS_THREE_LEVEL switch_radix: 16", true},
                        {"switch_radix: 16", false}};  // rail-optimised: rail c's 8 nodes share a leaf
  for (const Form& form : forms) {
    for (const char* routing : {"", " routing: DESTINATION_MOD_K", " routing: ECMP_HASH"}) {
      if (!form.hash_collides && std::string(routing) == " routing: ECMP_HASH") continue;
      CAPTURE(form.fabric);
      CAPTURE(routing);
      const Topology t(
          load("node_preset: \"dgx-h100\" nodes: 16 fabric { " + std::string(form.fabric) + routing + " }"));
      std::map<LinkIndex, int> flows_on;
      for (std::uint32_t c = 0; c < 8; ++c)
        for (std::uint32_t i = 0; i < 16; ++i)
          for (LinkIndex l : t.route(i * 8 + c, ((i + 1) % 16) * 8 + c, c)) {
            const VertexKind a = t.vertex(t.link(l).from).kind, b = t.vertex(t.link(l).to).kind;
            const bool fabric = a == VertexKind::kLeaf || a == VertexKind::kSpine || a == VertexKind::kCore;
            if (fabric && (b == VertexKind::kLeaf || b == VertexKind::kSpine || b == VertexKind::kCore)) ++flows_on[l];
          }
      int most = 0;
      for (const auto& [l, n] : flows_on) most = std::max(most, n);
      if (std::string(routing) == " routing: ECMP_HASH") {
        CHECK(most >= 2);
      } else {
        CHECK(most == 1);
      }
    }
  }
}

TEST_CASE("topology: adaptive routing spreads a flow evenly over every equal-cost path") {
  // 16 DGX H100 (8 NICs of 400 Gb/s each) under 16-port switches at 1:1: u = 8 uplinks per leaf, one node per
  // leaf. Two-level Clos: GPU 0 (leaf 0) to GPU 8 (leaf 1) climbs to all 8 spines, 1/8 of the flow on each leaf
  // uplink and on each spine's downlink to leaf 1. Three-level Clos: pods of c = 16/2 = 8 leaves and 8 spines,
  // spine j linked to the 8 cores of core group j. GPU 0 (pod 0) to GPU 127 (leaf 15, pod 1): 1/8 on each of
  // leaf 0's 8 uplinks, 1/64 on each of pod 0's 8 x 8 spine-core links and on the 64 core links down into pod 1,
  // 1/8 on each of the 8 spine links into leaf 15. Every hop carries the whole flow (the shares sum to 1), the
  // path route() returns (D-mod-k) is among the links, and outside the fabric the shares are 1. Under the other
  // routings spread() is route() with shares 1.
  struct Form {
    const char* fabric;
    std::uint32_t dst;
    std::map<std::pair<VertexKind, VertexKind>, std::pair<int, double>> expect;  // (from, to) -> links, share
  };
  const auto L = VertexKind::kLeaf, S = VertexKind::kSpine, C = VertexKind::kCore;
  const Form forms[] = {
      {"kind: CLOS_TWO_LEVEL switch_radix: 16", 8, {{{L, S}, {8, 1.0 / 8}}, {{S, L}, {8, 1.0 / 8}}}},
      {"kind: CLOS_THREE_LEVEL switch_radix: 16",
       127,
       {{{L, S}, {8, 1.0 / 8}}, {{S, C}, {64, 1.0 / 64}}, {{C, S}, {64, 1.0 / 64}}, {{S, L}, {8, 1.0 / 8}}}},
  };
  for (const Form& form : forms) {
    CAPTURE(form.fabric);
    const Topology t(
        load("node_preset: \"dgx-h100\" nodes: 16 fabric { " + std::string(form.fabric) + " routing: ADAPTIVE }"));
    const auto spread = t.spread(0, form.dst);
    std::map<std::pair<VertexKind, VertexKind>, std::pair<int, double>> seen;
    std::set<LinkIndex> links;
    double total = 0;
    for (const auto& [l, share] : spread) {
      const VertexKind a = t.vertex(t.link(l).from).kind, b = t.vertex(t.link(l).to).kind;
      links.insert(l);
      total += share;
      if (clustersim::topology::is_fabric_switch(a) && clustersim::topology::is_fabric_switch(b)) {
        auto& [n, each] = seen[{a, b}];
        ++n;
        CHECK((each == 0 || each == share));
        each = share;
      } else {
        CHECK(share == 1.0);
      }
    }
    CHECK(links.size() == spread.size());  // no link twice
    for (const auto& [kinds, want] : form.expect) {
      CAPTURE(static_cast<int>(kinds.first));
      CAPTURE(static_cast<int>(kinds.second));
      CHECK(seen[kinds].first == want.first);
      CHECK(seen[kinds].second == doctest::Approx(want.second).epsilon(1e-15));
    }
    CHECK(seen.size() == form.expect.size());
    const auto route = t.route(0, form.dst);
    CHECK(total == doctest::Approx(double(route.size())).epsilon(1e-12));  // each hop carries the whole flow
    for (LinkIndex l : route) CHECK(links.contains(l));
  }
  for (const char* routing : {"DESTINATION_MOD_K", "ECMP_HASH"}) {
    CAPTURE(routing);
    const Topology t(load(std::string("node_preset: \"dgx-h100\" nodes: 16 fabric { kind: CLOS_TWO_LEVEL "
                                      "switch_radix: 16 routing: ") +
                          routing + " }"));
    const auto route = t.route(0, 8, 3);
    const auto spread = t.spread(0, 8, 3);
    REQUIRE(spread.size() == route.size());
    for (std::size_t i = 0; i < route.size(); ++i) {
      CHECK(spread[i].link == route[i]);
      CHECK(spread[i].share == 1.0);
    }
  }
}

TEST_CASE("topology: path latency adds the hop and switch latencies") {
  const Topology t(load(std::string(kSimple2x8) +
                        "nvlink_hop_latency_us: 1 network_hop_latency_us: 2 fabric { switch_latency_us: 0.5 }"));
  // GPU -> NVSwitch carries the NVLink hop latency, NVSwitch -> GPU nothing: 1 us.
  CHECK(to_us(t.latency(t.route(0, 1))) == doctest::Approx(1).epsilon(1e-12));
  // NIC -> leaf 2 + 0.5, leaf -> spine 0.5, spine -> leaf 0.5, the rest 0: 3.5 us.
  CHECK(to_us(t.latency(t.route(0, 9))) == doctest::Approx(3.5).epsilon(1e-12));
  // Same rail: NIC -> leaf 2.5 us.
  CHECK(to_us(t.latency(t.route(0, 8))) == doctest::Approx(2.5).epsilon(1e-12));
}

TEST_CASE("topology: bisection bandwidth and oversubscription of Clos fabrics") {
  // 2 DGX A100, non-blocking rail-optimised tree: node 0's 8 NICs x 25 GB/s = 200 GB/s.
  CHECK(to_GBps(Topology(load(dgx_a100(2))).bisection_bandwidth()) == doctest::Approx(200).epsilon(1e-9));
  // Two-level Clos, radix 16, o = 1: u = floor(16*25/50) = 8, d = 8 = one DGX per leaf, 8 spines:
  // leaf 0's uplinks 8 x 25 = 200 GB/s.
  const Topology flat(load(dgx_a100(2, "fabric { kind: CLOS_TWO_LEVEL switch_radix: 16 }")));
  CHECK(to_GBps(flat.bisection_bandwidth()) == doctest::Approx(200).epsilon(1e-9));
  // Radix 10, o = 4: u = floor(10*25/(25 + 4*25)) = 2, d = min(8, 4*2) = 8: one DGX per leaf, 2 spines;
  // leaf 0's uplinks 2 x 25 = 50 GB/s = 200 / 4.
  const Topology thin(load(dgx_a100(2, "fabric { kind: CLOS_TWO_LEVEL switch_radix: 10 oversubscription: 4 }")));
  CHECK(to_GBps(thin.bisection_bandwidth()) == doctest::Approx(50).epsilon(1e-9));
  const TopologyStats s = thin.stats();
  REQUIRE(s.oversubscription.size() == 1);
  CHECK(s.oversubscription[0].tier == "leaf");
  CHECK(s.oversubscription[0].ratio == doctest::Approx(4).epsilon(1e-12));  // 8 x 25 / (2 x 25)
  // The preset's radix 40, o = 4: u = floor(40*25/(25 + 4*25)) = 8, d = min(32, 4*8) = 32 -> ratio 32/8 = 4.
  const auto ports = clustersim::topology::fabric_ports(load(dgx_a100(2, "fabric { oversubscription: 4 }")));
  CHECK(ports.uplinks == 8);
  CHECK(ports.downlinks == 32);
  // The schema's default radix 64 (a cluster without a preset that names its switch), o = 4: u = floor(64/5) = 12,
  // d = min(52, 48) = 48 -> ratio 48/12 = 4.
  const auto ports64 = clustersim::topology::fabric_ports(
      load("nodes: 2 gpus_per_node: 8 gpu: \"X\" nvlink_gbytes_per_s_per_direction: 300 "
           "nic_gbits_per_s_per_direction: 200 fabric { oversubscription: 4 }"));
  CHECK(ports64.uplinks == 12);
  CHECK(ports64.downlinks == 48);
}

TEST_CASE("topology: three-level Clos in pods, partial leaves, any node count") {
  // Simple form, 6 nodes x 2 GPUs, radix 4, o = 1: u = 2, d = 2 -> one node (2 NICs) per leaf, 6 leaves;
  // c = min(4/2, 6) = 2 leaves per pod -> 3 pods of 2 spines; 2 groups x 2 = 4 cores.
  const Topology t(
      load("nodes: 6 gpus_per_node: 2 gpu: \"X\" nvlink_gbytes_per_s_per_direction: 100 "
           "nic_gbits_per_s_per_direction: 200 fabric { kind: CLOS_THREE_LEVEL switch_radix: 4 }"));
  // Vertices 6 x (2 GPU + NVSwitch + 2 NIC) + 6 + 6 + 4 = 46. Links: nodes 6 x 8 = 48, NIC-leaf 24,
  // leaf-spine 6 x 2 x 2 = 24, spine-core 6 x 2 x 2 = 24: 120.
  CHECK(t.vertex_count() == 46);
  CHECK(t.link_count() == 120);
  CHECK(t.find_vertex("pod2/spine1") != clustersim::topology::kNone);
  CHECK(t.find_vertex("core3") != clustersim::topology::kNone);
  // Pod 0 to pod 2: gpu nic leaf spine core spine leaf nic gpu = 8 links.
  const auto r = t.route(0, 10);
  CHECK(r.size() == 8);
  CHECK(t.vertex(t.link(r[3]).to).kind == VertexKind::kCore);
  const TopologyStats s = t.stats();
  CHECK(s.diameter_hops == 8);
  // Non-blocking: GPUs 0-5 (nodes 0-2, 6 NICs) to GPUs 6-11: 6 x 25 GB/s = 150 GB/s.
  CHECK(to_GBps(s.bisection) == doctest::Approx(150).epsilon(1e-9));
  REQUIRE(s.oversubscription.size() == 2);
  CHECK(s.oversubscription[1].tier == "spine");
  CHECK(s.oversubscription[1].ratio == doctest::Approx(1));
  // Provisioned first: 2 DGX on the preset's 40-port rail leaves report the design ratio 20 x 25 / (20 x 25); then
  // as built, since it differs: each rail leaf holds 2 NICs (one per node) under 20 uplinks, 2 x 25 / (20 x 25) = 0.1.
  const TopologyStats two = Topology(load(dgx_a100(2))).stats();
  REQUIRE(two.oversubscription.size() == 2);
  CHECK(two.oversubscription[0].tier == "leaf");
  CHECK(two.oversubscription[0].ratio == doctest::Approx(1));
  CHECK(two.oversubscription[1].tier == "leaf as built (worst leaf, NICs attached)");
  CHECK(two.oversubscription[1].ratio == doctest::Approx(0.1));

  // Two DGX A100 on one leaf of a 3:1 two-level Clos (radix 40: u = floor(40 x 25 / (25 + 3 x 25)) = 10 uplinks,
  // d = 30 downlinks for the 16 NICs): the only leaf has no spine above it, so as built nothing is oversubscribed
  // (ratio 0, "non-blocking" in topo) beside the provisioned 3:1.
  const TopologyStats one_leaf =
      Topology(load(dgx_a100(2, "fabric { kind: CLOS_TWO_LEVEL oversubscription: 3 }"))).stats();
  REQUIRE(one_leaf.oversubscription.size() == 2);
  CHECK(one_leaf.oversubscription[0].ratio == doctest::Approx(3));
  CHECK(one_leaf.oversubscription[1].tier == "leaf as built (one leaf holds every NIC, no uplinks)");
  CHECK(one_leaf.oversubscription[1].ratio == 0);

  // A partial last leaf: 5 one-GPU nodes, radix 8 (d = 4): rail0/leaf0 holds nodes 0-3, rail0/leaf1 node 4.
  // Vertices 5 x 2 + 2 leaves + 4 spines = 16; links 5 x 2 + 10 + 2 x 4 x 2 = 36.
  const Topology partial(
      load("nodes: 5 gpus_per_node: 1 gpu: \"X\" nvlink_gbytes_per_s_per_direction: 100 "
           "nic_gbits_per_s_per_direction: 200 fabric { switch_radix: 8 }"));
  CHECK(partial.vertex_count() == 16);
  CHECK(partial.link_count() == 36);
  CHECK(partial.route(0, 1).size() == 4);
  CHECK(partial.route(0, 4).size() == 6);

  // 1,000 DGX A100 (8,000 GPUs) in a three-level Clos of the preset's radix 40: a leaf's 20 downlinks take 2 nodes
  // of 8 NICs -> 500 leaves, 20 leaves per pod -> 25 pods of 20 spines (500), 20 x 20 = 400 cores.
  const Topology big(load(dgx_a100(1000, "fabric { kind: CLOS_THREE_LEVEL }")));
  const TopologyStats bs = [&] {
    TopologyStats out;
    for (clustersim::topology::VertexIndex v = 0; v < big.vertex_count(); ++v) ++out.vertices[big.vertex(v).kind];
    return out;
  }();
  CHECK(bs.vertices.at(VertexKind::kLeaf) == 500);
  CHECK(bs.vertices.at(VertexKind::kSpine) == 500);
  CHECK(bs.vertices.at(VertexKind::kCore) == 400);
  CHECK(big.route(0, 7999).size() == 10);  // gpu pcie nic leaf spine core spine leaf nic pcie gpu
}

TEST_CASE("topology: link faults reroute, slow links, and no route is an error") {
  SUBCASE("a NIC cable down: the route falls back to the other NIC of the PCIe switch") {
    const Topology t(load(dgx_a100(2, "link_faults { from: \"n0/nic0\" to: \"rail0/leaf0\" down: true }")));
    CHECK_FALSE(t.link(t.find_link("n0/nic0->rail0/leaf0")).up);
    CHECK_FALSE(t.link(t.find_link("rail0/leaf0->n0/nic0")).up);
    // NIC 1 shares PCIe switch 0 with GPU 0 and reaches GPU 8 through its own rail: still 6 links.
    CHECK(path_of(t, t.route(0, 8)) ==
          "n0/gpu0 -> n0/pcie0 -> n0/nic1 -> rail1/leaf0 -> n1/nic1 -> n1/pcie0 -> n1/gpu0");
    for (std::uint32_t d = 8; d < 16; ++d) {
      for (LinkIndex l : t.route(0, d)) CHECK(t.link(l).up);
    }
    // Bisection loses one NIC: 7 x 25 = 175 GB/s.
    CHECK(to_GBps(t.bisection_bandwidth()) == doctest::Approx(175).epsilon(1e-9));
  }
  SUBCASE("bandwidth_factor scales every link the pattern names, one direction") {
    const Topology t(load(dgx_a100(2, "link_faults { pattern: \"n0/nic0->*\" bandwidth_factor: 0.5 }")));
    CHECK(to_GBps(t.link(t.find_link("n0/nic0->rail0/leaf0")).bandwidth) == doctest::Approx(12.5));  // 25 / 2
    CHECK(to_GBps(t.link(t.find_link("n0/nic0->n0/pcie0")).bandwidth) == doctest::Approx(15.75));    // 31.5 / 2
    CHECK(to_GBps(t.link(t.find_link("rail0/leaf0->n0/nic0")).bandwidth) == doctest::Approx(25));
    // Node 0 -> node 1: 7 x 25 + 12.5 = 187.5 GB/s.
    CHECK(to_GBps(t.bisection_bandwidth()) == doctest::Approx(187.5).epsilon(1e-9));
  }
  SUBCASE("every route cut: NoRouteError from route(), an input error from the loader") {
    ClusterSpec spec = load(kSimple2x8);
    spec.link_faults.push_back({"", "", "n1/nic*", true, 1.0});
    const Topology t(spec);
    CHECK(t.route(0, 1).size() == 2);
    CHECK_THROWS_AS(t.route(0, 8), NoRouteError);
    CHECK(t.route_hops(0, 8) == clustersim::topology::kNone);
    try {
      t.route(0, 8);
    } catch (const NoRouteError& e) {
      CHECK(std::string(e.what()) == "no route from GPU 0 (n0/gpu0) to GPU 8 (n1/gpu0): every path has a link down");
    }
  }
}

TEST_CASE("topology: explicit vertices and links") {
  const Topology t(load(R"(nodes: 1 gpus_per_node: 2 gpu: "X"
      nvlink_gbytes_per_s_per_direction: 100 nic_gbits_per_s_per_direction: 100
      vertices { name: "g0" kind: GPU }
      vertices { name: "g1" kind: GPU }
      vertices { name: "sw" kind: NVSWITCH }
      links { from: "g0" to: "sw" kind: NVLINK gbytes_per_s_per_direction: 100 latency_us: 1 }
      links { from: "g1" to: "sw" kind: NVLINK gbytes_per_s_per_direction: 100 latency_us: 1 }
      links { from: "g0" to: "g1" kind: PCIE gbytes_per_s_per_direction: 10 duplex: false })"));
  CHECK(t.vertex_count() == 3);
  CHECK(t.link_count() == 5);  // 2 duplex + 1 one-way
  // g0 -> g1: the direct one-way PCIe link is 1 hop, shorter than 2 through the switch.
  CHECK(path_of(t, t.route(0, 1)) == "g0 -> g1");
  // g1 -> g0: no reverse PCIe link, through the switch: 2 hops, 2 x 1 us.
  CHECK(path_of(t, t.route(1, 0)) == "g1 -> sw -> g0");
  CHECK(to_us(t.latency(t.route(1, 0))) == doctest::Approx(2));
  CHECK(t.nvlink_domain_of(1) == 0);
  // g0 -> g1: 100 GB/s through the switch + 10 GB/s direct = 110 GB/s.
  CHECK(to_GBps(t.bisection_bandwidth()) == doctest::Approx(110).epsilon(1e-9));
}

TEST_CASE("topology: an explicit cluster's GPUs leave their node through their own NIC, as a DGX's do") {
  // Per node: 2 GPUs and 2 NICs on one PCIe switch (both NICs 2 hops from both GPUs), NIC i of both nodes on leaf
  // i, the leaves under one spine. GPU i takes NIC i of its node (nearest, ties in GPU order), whatever the flow
  // key; a pair across rails crosses the spine from the source's NIC to the destination's. Shortest paths alone
  // hashed each flow onto either NIC (and crossed rails through the other NIC, 6 hops instead of 8).
  const Topology t(load(R"(nodes: 2 gpus_per_node: 2 gpu: "X"
      nvlink_gbytes_per_s_per_direction: 100 nic_gbits_per_s_per_direction: 200
      vertices { name: "g0" kind: GPU } vertices { name: "g1" kind: GPU }
      vertices { name: "g2" kind: GPU } vertices { name: "g3" kind: GPU }
      vertices { name: "p0" kind: PCIE_SWITCH node: 0 } vertices { name: "p1" kind: PCIE_SWITCH node: 1 }
      vertices { name: "n00" kind: NIC node: 0 } vertices { name: "n01" kind: NIC node: 0 }
      vertices { name: "n10" kind: NIC node: 1 } vertices { name: "n11" kind: NIC node: 1 }
      vertices { name: "l0" kind: LEAF } vertices { name: "l1" kind: LEAF } vertices { name: "sp" kind: SPINE }
      links { from: "g0" to: "p0" kind: PCIE gbytes_per_s_per_direction: 32 }
      links { from: "g1" to: "p0" kind: PCIE gbytes_per_s_per_direction: 32 }
      links { from: "g2" to: "p1" kind: PCIE gbytes_per_s_per_direction: 32 }
      links { from: "g3" to: "p1" kind: PCIE gbytes_per_s_per_direction: 32 }
      links { from: "p0" to: "n00" kind: PCIE gbytes_per_s_per_direction: 32 }
      links { from: "p0" to: "n01" kind: PCIE gbytes_per_s_per_direction: 32 }
      links { from: "p1" to: "n10" kind: PCIE gbytes_per_s_per_direction: 32 }
      links { from: "p1" to: "n11" kind: PCIE gbytes_per_s_per_direction: 32 }
      links { from: "n00" to: "l0" kind: NETWORK gbytes_per_s_per_direction: 25 }
      links { from: "n10" to: "l0" kind: NETWORK gbytes_per_s_per_direction: 25 }
      links { from: "n01" to: "l1" kind: NETWORK gbytes_per_s_per_direction: 25 }
      links { from: "n11" to: "l1" kind: NETWORK gbytes_per_s_per_direction: 25 }
      links { from: "l0" to: "sp" kind: NETWORK gbytes_per_s_per_direction: 100 }
      links { from: "l1" to: "sp" kind: NETWORK gbytes_per_s_per_direction: 100 })"));
  for (std::uint64_t key = 0; key < 16; ++key) {
    CAPTURE(key);
    CHECK(path_of(t, t.route(0, 2, key)) == "g0 -> p0 -> n00 -> l0 -> n10 -> p1 -> g2");
    CHECK(path_of(t, t.route(1, 3, key)) == "g1 -> p0 -> n01 -> l1 -> n11 -> p1 -> g3");
    CHECK(path_of(t, t.route(1, 2, key)) == "g1 -> p0 -> n01 -> l1 -> sp -> l0 -> n10 -> p1 -> g2");
  }
  CHECK(t.route_hops(1, 2) == 8);
  CHECK(path_of(t, t.route(0, 1)) == "g0 -> p0 -> g1");  // inside the node: the shortest route
  // Two NICs cabled back to back, no switch: each is the other's only fabric neighbour (the NIC distances' shortcut
  // through a NIC's one leaf recursed between them for ever). And a NIC of node 0 reached only back from the leaf
  // is no GPU's own NIC: g0 keeps its shortest route, through the node-less NIC nx.
  const std::string head = R"(nodes: 2 gpus_per_node: 1 gpu: "X"
      nvlink_gbytes_per_s_per_direction: 100 nic_gbits_per_s_per_direction: 200
      vertices { name: "g0" kind: GPU } vertices { name: "g1" kind: GPU }
      vertices { name: "p0" kind: PCIE_SWITCH node: 0 } vertices { name: "p1" kind: PCIE_SWITCH node: 1 }
      links { from: "g0" to: "p0" kind: PCIE gbytes_per_s_per_direction: 32 }
      links { from: "g1" to: "p1" kind: PCIE gbytes_per_s_per_direction: 32 }
      vertices { name: "n0" kind: NIC node: 0 } vertices { name: "n1" kind: NIC node: 1 }
      links { from: "p1" to: "n1" kind: PCIE gbytes_per_s_per_direction: 32 })";
  const Topology direct(load(head + R"(
      links { from: "p0" to: "n0" kind: PCIE gbytes_per_s_per_direction: 32 }
      links { from: "n0" to: "n1" kind: NETWORK gbytes_per_s_per_direction: 25 })"));
  CHECK(path_of(direct, direct.route(0, 1)) == "g0 -> p0 -> n0 -> n1 -> p1 -> g1");
  const Topology odd(load(head + R"(
      vertices { name: "nx" kind: NIC } vertices { name: "L" kind: LEAF }
      links { from: "p0" to: "nx" kind: PCIE gbytes_per_s_per_direction: 32 }
      links { from: "nx" to: "L" kind: NETWORK gbytes_per_s_per_direction: 25 }
      links { from: "n0" to: "L" kind: NETWORK gbytes_per_s_per_direction: 25 }
      links { from: "n1" to: "L" kind: NETWORK gbytes_per_s_per_direction: 25 })"));
  CHECK(path_of(odd, odd.route(0, 1)) == "g0 -> p0 -> nx -> L -> n1 -> p1 -> g1");
}

TEST_CASE("topology: Graphviz output names vertices, kinds and bandwidths") {
  const Topology t(
      load("nodes: 1 gpus_per_node: 2 gpu: \"X\" nvlink_gbytes_per_s_per_direction: 300 "
           "nic_gbits_per_s_per_direction: 200 link_faults { from: \"n0/gpu1\" to: \"n0/nic1\" down: true }"));
  std::ostringstream out;
  t.write_graphviz(out);
  const std::string dot = out.str();
  CHECK(dot.rfind("digraph", 0) == 0);
  CHECK(dot.find("label=\"n0/gpu0\\ngpu\" kind=\"gpu\"") != std::string::npos);
  CHECK(dot.find("label=\"nvlink 300 GB/s\"") != std::string::npos);
  CHECK(dot.find("style=dashed") != std::string::npos);
}

TEST_CASE("topology: the diameter is the longest route over every pair of GPUs, also with faults") {
  // diameter_hops() groups the pairs that take the rails by NIC and by leaf; the brute force below takes
  // route_hops() for all G^2 ordered pairs. They must agree on every form: rail-optimised and Clos fabrics
  // (two- and three-level, partial leaves and pods), NVLink domains spanning nodes, PCIe nodes where 4 GPUs share
  // a NIC at different distances, a cable down (NIC 0 of node 0 keeps no fabric link: its GPUs reroute through
  // the PCIe switch's other NIC), a torus, and the explicit form.
  const std::vector<std::string> clusters = {
      kSimple2x8,
      dgx_a100(3),
      dgx_a100(5, "fabric { kind: CLOS_TWO_LEVEL oversubscription: 3 switch_radix: 32 }"),
      dgx_a100(3, "link_faults { from: \"n0/nic0\" to: \"rail0/leaf0\" down: true }"),
      dgx_a100(3, "link_faults { pattern: \"rail1/leaf0->*\" down: true }"),
      "nodes: 7 gpus_per_node: 2 gpu: \"X\" nvlink_gbytes_per_s_per_direction: 100 "
      "nic_gbits_per_s_per_direction: 200 fabric { kind: CLOS_THREE_LEVEL switch_radix: 4 }",
      "node_preset: \"pcie-8gpu-sys-4029gp-trt\" nodes: 3",
      "node_preset: \"gb200-nvl72\" nodes: 36",
      "node_preset: \"tpu-v4-cube\" nodes: 4 torus { x: 2 y: 2 z: 4 }",
      R"(nodes: 1 gpus_per_node: 3 gpu: "X" nvlink_gbytes_per_s_per_direction: 100 nic_gbits_per_s_per_direction: 100
         vertices { name: "g0" kind: GPU } vertices { name: "g1" kind: GPU } vertices { name: "g2" kind: GPU }
         vertices { name: "sw" kind: NVSWITCH }
         links { from: "g0" to: "g1" kind: NVLINK gbytes_per_s_per_direction: 100 }
         links { from: "g1" to: "sw" kind: NVLINK gbytes_per_s_per_direction: 100 }
         links { from: "g2" to: "sw" kind: NVLINK gbytes_per_s_per_direction: 100 }
         links { from: "g0" to: "sw" kind: NVLINK gbytes_per_s_per_direction: 100 })"};
  for (const std::string& text : clusters) {
    CAPTURE(text);
    const Topology t(load(text));
    std::uint32_t longest = 0;
    for (std::uint32_t s = 0; s < t.gpu_count(); ++s)
      for (std::uint32_t d = 0; d < t.gpu_count(); ++d) {
        const std::uint32_t h = t.route_hops(s, d);
        REQUIRE(h != clustersim::topology::kNone);
        longest = std::max(longest, h);
      }
    CHECK(longest > 0);
    CHECK(t.diameter_hops() == longest);
  }
}
