// Cluster loading (cli/cluster_loader): the simple form keeps its values, presets fill the node layout and
// may be overridden, explicit vertices and links, faults and slow GPUs; every form round-trips through
// write_cluster (--resolved) to an equal ClusterSpec; bad input names FILE:LINE:COL and the field.
#include <doctest/doctest.h>

#include "tests/test_support.h"
#include <google/protobuf/text_format.h>

#include <functional>
#include <string>

#include "cli/cluster_loader.h"
#include "cli/scenario_loader.h"
#include "sim/input_error.h"
#include "topology/cluster.pb.h"
#include "topology/topology.h"

namespace {

using clustersim::InputError;
using clustersim::to_GBps;
using clustersim::topology::ClusterSpec;
using clustersim::topology::ScaleUp;
namespace cli = clustersim::cli;

const std::string kData = std::string(CLUSTERSIM_SOURCE_DIR) + "/tests/data/topology/";

ClusterSpec load(const std::string& text) {
  return cli::load_cluster_text(text, "c.textproto");
}

std::string error_of(const std::function<void()>& call) { return clustersim::testing::input_error_of(call); }

std::string text_error(const std::string& text) {
  return error_of([&] { load(text); });
}

std::string resolved(const ClusterSpec& spec) {
  clustersim::schema::Cluster m;
  cli::write_cluster(spec, m);
  std::string out;
  google::protobuf::TextFormat::PrintToString(m, &out);
  return out;
}

}  // namespace

TEST_CASE("topology loader: the simple form gives the values it always gave") {
  const ClusterSpec s = load(
      "nodes: 2 gpus_per_node: 8 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 "
      "nic_gbits_per_s_per_direction: 200");
  CHECK(s.nodes == 2);
  CHECK(s.gpus_per_node == 8);
  CHECK(s.nvlink_per_direction.raw() == 3e11);
  CHECK(s.nic_per_direction.raw() == 2.5e10);
  CHECK(s.node.preset.empty());
  CHECK(s.node.nics_per_node == 8);
  CHECK(s.fabric.kind == clustersim::topology::FabricKind::kRailOptimizedFatTree);
  CHECK(s.fabric.oversubscription == 1);
  CHECK(s.fabric.switch_radix == 64);
  CHECK(s.fabric.link_per_direction.raw() == 2.5e10);  // default: the NIC port
  CHECK(s.compute_slowdown(3) == 1);
  // The shipped default scenario still loads, with the same cluster values.
  const auto scenario = cli::load_default_scenario();
  CHECK(scenario.cluster.gpu_count() == 16);
  CHECK(scenario.cluster.nvlink_per_direction.raw() == 3e11);
  CHECK(scenario.cluster.nic_per_direction.raw() == 2.5e10);
}

TEST_CASE("topology loader: presets fill the node and may be overridden") {
  const ClusterSpec a = load("node_preset: \"dgx-a100\" nodes: 4");
  CHECK(a.gpus_per_node == 8);
  CHECK(a.gpu == "A100-SXM4-80GB");
  CHECK(to_GBps(a.nvlink_per_direction) == doctest::Approx(300).epsilon(1e-15));
  CHECK(a.nic_per_direction.raw() == doctest::Approx(2.5e10).epsilon(1e-15));  // 200 Gbit/s, one NIC per GPU
  CHECK(a.node.preset == "dgx-a100");
  CHECK(a.node.pcie_switches == 4);
  CHECK(a.node.cpus == 2);
  CHECK(to_GBps(a.node.pcie_per_direction) == doctest::Approx(31.5));

  const ClusterSpec h =
      load("node_preset: \"dgx-h100\" nodes: 1 gpu: \"H100-SXM5-94GB\" nvlink_gbytes_per_s_per_direction: 400");
  CHECK(h.gpu == "H100-SXM5-94GB");
  CHECK(to_GBps(h.nvlink_per_direction) == doctest::Approx(400));
  CHECK(h.nic_per_direction.raw() == doctest::Approx(5e10));  // 400 Gbit/s

  const ClusterSpec nvl = load("node_preset: \"gb200-nvl72\" nodes: 18");
  CHECK(nvl.gpus_per_node == 4);
  CHECK(nvl.node.nvlink_domain_nodes == 18);
  CHECK(to_GBps(nvl.nvlink_per_direction) == doctest::Approx(900));

  // PCIe-only: the per-GPU "NVLink" figure of the analytical model is the GPU's PCIe Gen3 x16 link; 2 NICs of
  // 100 Gbit/s for 8 GPUs = 25 Gbit/s per GPU.
  const ClusterSpec p = load("node_preset: \"pcie-8gpu-sys-4029gp-trt\" nodes: 2");
  CHECK(p.node.scale_up == ScaleUp::kPcieOnly);
  CHECK(to_GBps(p.nvlink_per_direction) == doctest::Approx(15.75));
  CHECK(p.nic_per_direction.raw() * 8 / 1e9 == doctest::Approx(25));
  CHECK(p.nic_port_per_direction().raw() * 8 / 1e9 == doctest::Approx(100));

  // Torus: the per-chip figure is 6 ICI links x 50 GB/s.
  const ClusterSpec t = load("node_preset: \"tpu-v4-cube\" nodes: 16");
  CHECK(to_GBps(t.nvlink_per_direction) == doctest::Approx(300));
  CHECK(t.node.torus == std::array<std::uint32_t, 3>{4, 4, 4});
  const ClusterSpec t8 = load("node_preset: \"tpu-v4-cube\" nodes: 32 torus { x: 4 y: 4 z: 8 }");
  CHECK(t8.gpu_count() == 128);
  // Wraparound on slices of whole 4x4x4 cubes (every side a multiple of 4) only; smaller slices are meshes.
  CHECK(t.node.torus_wraps);
  CHECK(t8.node.torus_wraps);
  const ClusterSpec mesh = load("node_preset: \"tpu-v4-cube\" nodes: 8 torus { x: 2 y: 4 z: 4 }");
  CHECK_FALSE(mesh.node.torus_wraps);
  CHECK(to_GBps(mesh.nvlink_per_direction) == doctest::Approx(250));  // 1 + 2 + 2 links inside the mesh x 50 GB/s
  CHECK_FALSE(load("node_preset: \"tpu-v4-cube\" nodes: 1 torus { x: 2 y: 2 z: 1 }").node.torus_wraps);
}

TEST_CASE("topology loader: every form and preset round-trips through the resolved text") {
  const char* const cases[] = {
      "nodes: 2 gpus_per_node: 8 gpu: \"A\" nvlink_gbytes_per_s_per_direction: 0.1 nic_gbits_per_s_per_direction: 1.1 "
      "nvlink_hop_latency_us: 0.3 network_hop_latency_us: 1.7",
      "nodes: 3 gpus_per_node: 4 gpu: \"A\" nvlink_gbytes_per_s_per_direction: 300 nic_gbits_per_s_per_direction: 200 "
      "nics_per_node: 2 fabric { kind: CLOS_THREE_LEVEL oversubscription: 3 switch_radix: 8 "
      "link_gbits_per_s_per_direction: 400 switch_latency_us: 0.13 }",
      "node_preset: \"dgx-a100\" nodes: 2",
      "node_preset: \"dgx-h100\" nodes: 3 fabric { kind: CLOS_TWO_LEVEL oversubscription: 2 }",
      "node_preset: \"dgx-h100\" nodes: 3 fabric { kind: CLOS_TWO_LEVEL routing: ECMP_HASH }",
      "node_preset: \"dgx-h100\" nodes: 3 fabric { kind: CLOS_THREE_LEVEL routing: ADAPTIVE }",
      "nodes: 1 gpus_per_node: 2 gpu: \"X\" nvlink_gbytes_per_s_per_direction: 1 nic_gbits_per_s_per_direction: 1 "
      "fabric { routing: ECMP_HASH } vertices { name: \"a\" kind: GPU } vertices { name: \"b\" kind: GPU } "
      "links { from: \"a\" to: \"b\" kind: NVLINK gbytes_per_s_per_direction: 1 }",
      "node_preset: \"hgx-h100\" nodes: 1",
      "node_preset: \"hgx-h200\" nodes: 2 gpus_per_node: 4",
      "node_preset: \"gb200-nvl72\" nodes: 36",
      "node_preset: \"pcie-8gpu-sys-4029gp-trt\" nodes: 2",
      "node_preset: \"tpu-v4-cube\" nodes: 16",
      "node_preset: \"dgx-a100\" nodes: 2 link_faults { from: \"n0/nic0\" to: \"rail0/leaf0\" down: true } "
      "link_faults { pattern: \"n1/nic3->*\" bandwidth_factor: 0.3 } slow_gpus { gpu: 9 compute_slowdown: 1.7 } "
      "slow_gpus { gpu: 2 compute_slowdown: 1 }",
      "nodes: 1 gpus_per_node: 2 gpu: \"X\" nvlink_gbytes_per_s_per_direction: 1 nic_gbits_per_s_per_direction: 1 "
      "vertices { name: \"a\" kind: GPU } vertices { name: \"b\" kind: GPU gpu: 1 node: 0 } "
      "vertices { name: \"s\" kind: NVSWITCH } links { from: \"a\" to: \"s\" kind: NVLINK gbytes_per_s_per_direction: "
      "0.7 "
      "latency_us: 0.3 } links { from: \"s\" to: \"b\" kind: NVLINK gbytes_per_s_per_direction: 0.7 } "
      "links { from: \"b\" to: \"a\" kind: PCIE gbytes_per_s_per_direction: 3 duplex: false }",
  };
  for (const char* text : cases) {
    CAPTURE(text);
    const ClusterSpec first = load(text);
    const std::string again = resolved(first);
    CAPTURE(again);
    const ClusterSpec second = load(again);
    CHECK(first == second);
    CHECK(resolved(second) == again);
  }
  const ClusterSpec h200 = load("node_preset: \"hgx-h200\" nodes: 2 gpus_per_node: 4");
  CHECK(h200.node.nics_per_node == 4);  // the preset's one NIC per GPU kept
  // An explicit cluster keeps its hosts' CPU vendor and its NVSwitches' NVLS (they were reset with the layout),
  // and the resolved text carries them.
  const ClusterSpec amd = load(
      "nodes: 1 gpus_per_node: 1 gpu: \"X\" nvlink_gbytes_per_s_per_direction: 1 nic_gbits_per_s_per_direction: 1 "
      "cpu_vendor: AMD nvls: false vertices { name: \"a\" kind: GPU }");
  CHECK(amd.node.cpu_vendor == clustersim::topology::CpuVendor::kAmd);
  CHECK_FALSE(amd.node.nvls);
  CHECK(load(resolved(amd)) == amd);
  // The scenario-level round trip of a preset scenario with faults (a fixture).
  const auto scenario = cli::load_scenario_file(kData + "dgx_a100_faults.textproto");
  CHECK(scenario.cluster.link_faults.size() == 2);
  CHECK(scenario.cluster.compute_slowdown(5) == 1.25);
  CHECK(clustersim::to_us(scenario.cluster.fabric.switch_latency) == doctest::Approx(0.2));
  const auto reloaded =
      cli::load_scenario_text(cli::resolved_scenario_text(scenario), "resolved.textproto", false, kData);
  CHECK(reloaded.cluster == scenario.cluster);
}

TEST_CASE("topology loader: bad clusters name file, line:col and field") {
  // "  node_preset: " is 15 characters: the value starts in column 16 of line 3.
  CHECK(error_of([] { cli::load_scenario_file(kData + "unknown_preset.textproto"); }) ==
        kData +
            "unknown_preset.textproto:3:16: cluster.node_preset: \"dgx-a200\" is not a built-in node preset "
            "(dgx-a100, dgx-h100, hgx-h100, hgx-h200, gb200-nvl72, pcie-8gpu-sys-4029gp-trt, tpu-v4-cube)");
  // Line 6 is "  link_faults { pattern: \"n7/*\" down: true }": the value starts in column 26.
  CHECK(error_of([] { cli::load_scenario_file(kData + "bad_fault_pattern.textproto"); }) ==
        kData + "bad_fault_pattern.textproto:6:26: cluster.link_faults[1].pattern: \"n7/*\" matches no link");
  // Line 11 is "          gbytes_per_s_per_direction: -5 }": '-' in column 39.
  CHECK(error_of([] { cli::load_scenario_file(kData + "negative_link_bandwidth.textproto"); }) ==
        kData +
            "negative_link_bandwidth.textproto:11:39: cluster.links[0].gbytes_per_s_per_direction: -5 must be > 0 "
            "(decimal GB/s per direction)");

  // Inline (paths relative to the cluster); line:col of the offending value, counted by hand, e.g.
  // "link_faults { from: \"n0/nic0\" to: " is 34 characters, so the value of `to` starts in column 35.
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 2\nfabric { link_gbits_per_s_per_direction: -400 }") ==
        "c.textproto:2:42: fabric.link_gbits_per_s_per_direction: -400 must be > 0 (Gbit/s per direction)");
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 2 fabric { oversubscription: 0.5 }") ==
        "c.textproto:1:61: fabric.oversubscription: 0.5 must be >= 1 (leaf downlink / uplink bandwidth; 1 = "
        "non-blocking)");
  CHECK(
      text_error("node_preset: \"dgx-a100\" nodes: 2\nlink_faults { from: \"n0/nic0\" to: \"n0/nic9\" down: true }") ==
      "c.textproto:2:35: link_faults[0].to: no vertex \"n0/nic9\"");
  CHECK(
      text_error("node_preset: \"dgx-a100\" nodes: 2\nlink_faults { from: \"n0/nic0\" to: \"n1/nic0\" down: true }") ==
      "c.textproto:2:1: link_faults[0]: no link between \"n0/nic0\" and \"n1/nic0\"");
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 2\nlink_faults { pattern: \"n0/*\" bandwidth_factor: 1.5 }") ==
        "c.textproto:2:49: link_faults[0].bandwidth_factor: 1.5 must be in (0, 1) (use down: true for 0)");
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 2\nlink_faults { pattern: \"n1/*\" down: true }") ==
        "c.textproto:2:1: link_faults: no route from GPU 8 (n1/gpu0) to GPU 0 (n0/gpu0) with these links down");
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 2\nslow_gpus { gpu: 3 compute_slowdown: 0.5 }") ==
        "c.textproto:2:38: slow_gpus[0].compute_slowdown: 0.5 must be >= 1 (1 = full speed)");
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 2\nslow_gpus { gpu: 16 compute_slowdown: 2 }") ==
        "c.textproto:2:18: slow_gpus[0].gpu: 16 is not below the cluster's 16 GPUs");
  CHECK(text_error("node_preset: \"pcie-8gpu-sys-4029gp-trt\" nodes: 1 nvlink_gbytes_per_s_per_direction: 50") ==
        "c.textproto:1:85: nvlink_gbytes_per_s_per_direction: preset \"pcie-8gpu-sys-4029gp-trt\" has no NVLink: its "
        "GPUs talk over PCIe");
  CHECK(text_error("node_preset: \"tpu-v4-cube\" nodes: 2") ==
        "c.textproto:1:35: nodes: a 4x4x4 torus holds 64 chips, but 2 nodes x 4 per node = 8");
  // 6x2x2 = 24 chips = 6 trays, but a side of 6 is no TPU v4 slice (and would wrap around where v4 does not).
  CHECK(text_error("node_preset: \"tpu-v4-cube\" nodes: 6 torus { x: 6 y: 2 z: 2 }") ==
        "c.textproto:1:48: torus.x: 6 is not a side of a TPU v4 slice (1, 2 or a multiple of 4, which closes into a "
        "ring)");
  // The preset's 40-port switches (20 downlinks at 1:1): 8 rails x ceil(300 / 20) = 120 leaves.
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 300") ==
        "c.textproto:1:32: nodes: 120 leaves exceed the 40 ports of a spine; a two-level tree of radix 40 holds at "
        "most 40 leaves (use CLOS_THREE_LEVEL)");
  // A mistyped node count fails before any node is built: 99,999,999 DGX A100 nodes would be 800 M GPU vertices
  // (hours and terabytes), more than the 2^20 GPUs clustersim models. Below that bound the fabric arithmetic
  // rejects a fabric too small: 99,999 nodes are 8 rails x ceil(99,999 / 20 downlinks of the preset's radix-40
  // leaf at 1:1) = 8 x 5,000 = 40,000 leaves; a three-level Clos of radix 40 has 2 nodes per leaf (49,999 + 1 =
  // 50,000 leaves) and holds 20 leaves per pod, so ceil(50,000 / 20) = 2,500 pods for a 40-port core.
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 99999999") ==
        "c.textproto:1:32: nodes: 99999999 nodes x 8 GPUs per node is more GPUs than clustersim models (1048576)");
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 99999") ==
        "c.textproto:1:32: nodes: 40000 leaves exceed the 40 ports of a spine; a two-level tree of radix 40 "
        "holds at most 40 leaves (use CLOS_THREE_LEVEL)");
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 99999 fabric { kind: CLOS_THREE_LEVEL }") ==
        "c.textproto:1:53: fabric.kind: 2500 pods exceed the 40 ports of a core switch");
  CHECK(text_error("nodes: 1 gpus_per_node: 2 gpu: \"X\" nvlink_gbytes_per_s_per_direction: 1 "
                   "nic_gbits_per_s_per_direction: 1 node_preset: \"dgx-a100\" vertices { name: \"a\" kind: GPU }") ==
        "c.textproto:1:119: node_preset: an explicit cluster (vertices and links) cannot also name a node_preset");
  // Explicit: the switches are given, so of the fabric only how they route.
  CHECK(text_error("nodes: 1 gpus_per_node: 1 gpu: \"X\" nvlink_gbytes_per_s_per_direction: 1 "
                   "nic_gbits_per_s_per_direction: 1 fabric { routing: ECMP_HASH switch_radix: 8 } "
                   "vertices { name: \"a\" kind: GPU }") ==
        "c.textproto:1:148: fabric.switch_radix: not used by an explicit cluster (vertices and links), whose fabric "
        "takes only `routing`");
  // Explicit: a switch's node is one of the cluster's (node 7 of 1 was taken silently).
  CHECK(text_error("nodes: 1 gpus_per_node: 1 gpu: \"X\" nvlink_gbytes_per_s_per_direction: 1 "
                   "nic_gbits_per_s_per_direction: 1\n"
                   "vertices { name: \"g0\" kind: GPU } vertices { name: \"s\" kind: NVSWITCH node: 7 }\n"
                   "links { from: \"g0\" to: \"s\" kind: NVLINK gbytes_per_s_per_direction: 1 }") ==
        "c.textproto:2:77: vertices[1].node: node 7 is not below nodes = 1");
  // Explicit: a GPU may not forward, so a chain g0 - g1 - g2 leaves g2 without a route to g0.
  CHECK(text_error("nodes: 1 gpus_per_node: 3 gpu: \"X\" nvlink_gbytes_per_s_per_direction: 1 "
                   "nic_gbits_per_s_per_direction: 1\n"
                   "vertices { name: \"g0\" kind: GPU } vertices { name: \"g1\" kind: GPU } vertices { name: \"g2\" "
                   "kind: GPU }\n"
                   "links { from: \"g0\" to: \"g1\" kind: NVLINK gbytes_per_s_per_direction: 1 }\n"
                   "links { from: \"g1\" to: \"g2\" kind: NVLINK gbytes_per_s_per_direction: 1 }") ==
        "c.textproto:3:1: links: no route from GPU 2 (g2) to GPU 0 (g0)");
  CHECK(text_error("nodes: 1 gpus_per_node: 2 gpu: \"X\" nvlink_gbytes_per_s_per_direction: 1 "
                   "nic_gbits_per_s_per_direction: 1\n"
                   "vertices { name: \"g0\" kind: GPU } vertices { name: \"g1\" kind: GPU }\n"
                   "links { from: \"g0\" to: \"gx\" kind: NVLINK gbytes_per_s_per_direction: 1 }") ==
        "c.textproto:3:24: links[0].to: no vertex \"gx\"");
  // Explicit: g1 only on switch s1, g2 only on s2, g0 and g3 (the first and the last GPU) on both: both anchors
  // reach every GPU, but g1 and g2 have no route between them (GPUs do not forward). Every pair is checked.
  {
    std::string text =
        "nodes: 1 gpus_per_node: 4 gpu: \"X\" nvlink_gbytes_per_s_per_direction: 1 "
        "nic_gbits_per_s_per_direction: 1\n";
    for (const char* g : {"g0", "g1", "g2", "g3"}) text += "vertices { name: \"" + std::string(g) + "\" kind: GPU }\n";
    text += "vertices { name: \"s1\" kind: NVSWITCH } vertices { name: \"s2\" kind: NVSWITCH }\n";
    for (const char* l : {"g0 s1", "g0 s2", "g1 s1", "g2 s2", "g3 s1", "g3 s2"}) {
      const std::string link = l;
      text += "links { from: \"" + link.substr(0, 2) + "\" to: \"" + link.substr(3) +
              "\" kind: NVLINK gbytes_per_s_per_direction: 1 }\n";
    }
    CHECK(text_error(text) == "c.textproto:7:1: links: no route from GPU 2 (g2) to GPU 1 (g1)");
  }
  // Node and fabric values clustersim cannot build or that would be silently changed.
  CHECK(text_error("nodes: 2 gpus_per_node: 8 gpu: \"X\" nvlink_gbytes_per_s_per_direction: 1 "
                   "nic_gbits_per_s_per_direction: 400 nics_per_node: 16") ==
        "c.textproto:1:123: nics_per_node: 16 NICs for 8 GPUs per node: clustersim gives each GPU one NIC; give "
        "nics_per_node <= gpus_per_node and the GPU's whole NIC bandwidth in nic_gbits_per_s_per_direction");
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 2 fabric { switch_radix: 10000000 }") ==
        "c.textproto:1:57: fabric.switch_radix: 10000000 ports is more than the 4096 clustersim builds");
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 2 fabric { oversubscription: 1e17 }") ==
        "c.textproto:1:61: fabric.oversubscription: 1e+17 is more than a leaf of 40 ports can give (39:1)");
  // The dgx-a100 NIC port is 200 Gbit/s.
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 2 fabric { link_gbits_per_s_per_direction: 0.1 }") ==
        "c.textproto:1:75: fabric.link_gbits_per_s_per_direction: 0.1 Gbit/s is more than 1000 times below the "
        "NIC port's 200 Gbit/s");
  // 1000 times slower than the 200 Gbit/s NIC port is taken, but then one NIC port needs 1,000 uplinks, more than
  // a 40-port leaf has: the error names the link rate that caused it (it named switch_radix, which was not set).
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 2 fabric { link_gbits_per_s_per_direction: 0.2 }")
            .starts_with("c.textproto:1:75: fabric.link_gbits_per_s_per_direction: a leaf of 40 ports has no port "
                         "left for a 200 Gbit/s NIC"));
  // Below 10 Mbit/s (0.01 Gbit/s, 0.00125 GB/s) a rate is a unit mistake; times a fault's factor it could round to 0
  // and stall every flow (reported as a deadlock before). Above 1 PB/s (1e6 GB/s, 8e6 Gbit/s: over 1,000x NVLink 5)
  // too: summed over a fabric's links, B/s in 64-bit integers overflowed the bisection's max-flow. A 50 Mbit/s WAN
  // link (0.00625 GB/s) is a real input and passes in either unit.
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 2 fabric { link_gbits_per_s_per_direction: 1e-300 }") ==
        "c.textproto:1:75: fabric.link_gbits_per_s_per_direction: 1e-300 is below 0.01 Gbit/s per direction (10 "
        "Mbit/s): no interconnect is that slow");
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 2 nic_gbits_per_s_per_direction: 0.009")
            .find("nic_gbits_per_s_per_direction: 0.009 is below 0.01 Gbit/s per GPU per direction (10 Mbit/s)") !=
        std::string::npos);
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 2 nvlink_gbytes_per_s_per_direction: 0.001")
            .find("nvlink_gbytes_per_s_per_direction: 0.001 is below 0.00125 decimal GB/s per GPU per direction") !=
        std::string::npos);
  CHECK(text_error("nodes: 2 gpus_per_node: 1 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 0.00625 "
                   "nic_gbits_per_s_per_direction: 0.05") == "<no InputError thrown>");
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 2 nvlink_gbytes_per_s_per_direction: 2e6") ==
        "c.textproto:1:69: nvlink_gbytes_per_s_per_direction: 2e+06 is above 1e+06 decimal GB/s per GPU per "
        "direction (1 PB/s): no interconnect is that fast");
  // Latencies: at most a second (no hop does that), and no straggler 10,000 times slower than its peers.
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 2 network_hop_latency_us: 1e12") ==
        "c.textproto:1:58: network_hop_latency_us: 1e+12 us is above 1e+06 us (a second; no hop, launch or dispatch "
        "takes that long)");
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 2 slow_gpus { gpu: 1 compute_slowdown: 2e4 }") ==
        "c.textproto:1:71: slow_gpus[0].compute_slowdown: 20000 x is above 10000 x (a straggler that slow has failed; "
        "leave the GPU out)");
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 2 gpus_per_node: 2048")
            .find("gpus_per_node: 2048 GPUs is above 1024 GPUs (no server or scale-up domain has more)") !=
        std::string::npos);
  // The simple form too (no preset), and a fabric link too slow is no error where no fabric is built (one node).
  CHECK(text_error("nodes: 1 gpus_per_node: 2048 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 "
                   "nic_gbits_per_s_per_direction: 200")
            .find("gpus_per_node: 2048 GPUs is above 1024 GPUs") != std::string::npos);
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 1 fabric { link_gbits_per_s_per_direction: 1 }") ==
        "<no InputError thrown>");
  CHECK(text_error("node_preset: \"dgx-a100\" nodes: 2 link_faults { pattern: \"nic*\" bandwidth_factor: 1e-10 }")
            .find("link_faults[0].bandwidth_factor: 1e-10 is below 1e-6: a link that slow is down for any training "
                  "step (use down: true)") != std::string::npos);
  CHECK(text_error("node_preset: \"tpu-v4-cube\" nodes: 16 fabric { switch_radix: 8 }") ==
        "c.textproto:1:38: fabric: a torus has no network fabric (its chips link to each other)");
}
