#include "cli/cluster_loader.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "cli/validate.h"
#include "topology/presets.h"
#include "topology/topology.h"
#include "topology/topology.pb.h"

namespace clustersim::cli {
namespace {

// A link's rate: > 0, at least 1.25 MB/s (0.01 Gbit/s = 10 Mbit/s, 0.00125 GB/s: slower than any Ethernet port
// training runs over; a 50 Mbit/s WAN link passes) and at most 1e15 B/s (1 PB/s: over 1,000x NVLink 5's 900 GB/s).
// Anything outside is a unit mistake: a rate far too small simulates a step of months, one that small times a link
// fault's factor could round to 0, and one far too large overflowed the bisection's integer capacities.
double link_rate(const ParsedText& in, const std::string& path, bool has, double value, const char* unit) {
  positive(in, path, has, value, unit);
  const double bytes_per_unit = std::string_view(unit).starts_with("Gbit") ? 1.25e8 : 1e9;
  const double floor = 1.25e6 / bytes_per_unit, ceiling = 1e15 / bytes_per_unit;
  if (value < floor)
    in.fail(path, format_number(value) + " is below " + format_number(floor) + " " + unit +
                      " (10 Mbit/s): no interconnect is that slow");
  if (value > ceiling)
    in.fail(path, format_number(value) + " is above " + format_number(ceiling) + " " + unit +
                      " (1 PB/s): no interconnect is that fast");
  return value;
}

using topology::ClusterSpec;
using topology::FabricKind;
using topology::FabricRouting;
using topology::LinkKind;
using topology::NodeLayout;
using topology::ScaleUp;
using topology::VertexKind;

std::string join(const std::string& path, const std::string& field) {
  return path.empty() ? field : path + "." + field;
}

std::string indexed(const std::string& path, const char* field, int i) {
  return join(path, std::string(field) + "[" + std::to_string(i) + "]");
}

std::string quote(const std::string& s) {
  return "\"" + s + "\"";
}

std::string preset_list() {
  std::string out;
  for (std::string_view n : node_preset_names()) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

// A preset file, parsed and checked (its errors name topology/presets/NAME.textproto).
struct Preset {
  NodeLayout layout;
  std::string gpu;
  std::uint32_t gpus_per_node = 1;
  BytesPerSecond nvlink = bytes_per_second(0);    // per GPU (NVSWITCH)
  BytesPerSecond ici_link = bytes_per_second(0);  // per torus link
  BytesPerSecond nic_port = bytes_per_second(0);
  std::uint32_t switch_radix = 0;  // the reference architecture's fabric switch; 0 = the schema's default
  std::string switch_model;
};

topology::CpuVendor cpu_vendor(schema::Cluster::CpuVendor v) {
  switch (v) {
    case schema::Cluster::INTEL:
      return topology::CpuVendor::kIntel;
    case schema::Cluster::AMD:
      return topology::CpuVendor::kAmd;
    case schema::Cluster::ARM:
      return topology::CpuVendor::kArm;
    default:
      return topology::CpuVendor::kUnspecified;
  }
}

schema::Cluster::CpuVendor to_schema(topology::CpuVendor v) {
  switch (v) {
    case topology::CpuVendor::kIntel:
      return schema::Cluster::INTEL;
    case topology::CpuVendor::kAmd:
      return schema::Cluster::AMD;
    case topology::CpuVendor::kArm:
      return schema::Cluster::ARM;
    case topology::CpuVendor::kUnspecified:
      break;
  }
  return schema::Cluster::CPU_VENDOR_UNSPECIFIED;
}

Preset load_preset(const std::string& name, std::string_view text) {
  schema::NodePreset m;
  const ParsedText in =
      calibrate::parse_message(text, "topology/presets/" + name + ".textproto", calibrate::InputSyntax::kTextFormat, m);
  Preset p;
  p.layout.preset = name;
  if (!m.has_gpu() || m.gpu().empty()) in.fail("gpu", "missing (required)");
  p.gpu = m.gpu();
  p.gpus_per_node = at_least_one(in, "gpus_per_node", m.has_gpus_per_node(), m.gpus_per_node());
  switch (m.scale_up()) {
    case schema::NodePreset::PCIE_ONLY:
      p.layout.scale_up = ScaleUp::kPcieOnly;
      break;
    case schema::NodePreset::TORUS:
      p.layout.scale_up = ScaleUp::kTorus;
      break;
    default:
      p.layout.scale_up = ScaleUp::kNvSwitch;
      break;
  }
  p.layout.nvlink_domain_nodes =
      m.has_nvlink_domain_nodes() ? at_least_one(in, "nvlink_domain_nodes", true, m.nvlink_domain_nodes()) : 1;
  if (p.layout.scale_up == ScaleUp::kNvSwitch) {
    p.nvlink = GBps(link_rate(in, "nvlink_gbytes_per_s_per_direction", m.has_nvlink_gbytes_per_s_per_direction(),
                              m.nvlink_gbytes_per_s_per_direction(), "decimal GB/s per GPU per direction"));
  }
  if (p.layout.scale_up == ScaleUp::kTorus) {
    p.ici_link = GBps(link_rate(in, "ici_link_gbytes_per_s_per_direction", m.has_ici_link_gbytes_per_s_per_direction(),
                                m.ici_link_gbytes_per_s_per_direction(), "decimal GB/s per link per direction"));
    if (!m.has_torus()) in.fail("torus", "missing (required for scale_up: TORUS)");
    p.layout.torus = {at_least_one(in, "torus.x", m.torus().has_x(), m.torus().x()),
                      at_least_one(in, "torus.y", m.torus().has_y(), m.torus().y()),
                      at_least_one(in, "torus.z", m.torus().has_z(), m.torus().z())};
  }
  p.layout.nics_per_node = m.nics_per_node();
  if (p.layout.nics_per_node > 0) {
    p.nic_port = Gbitps(link_rate(in, "nic_gbits_per_s_per_direction", m.has_nic_gbits_per_s_per_direction(),
                                  m.nic_gbits_per_s_per_direction(), "Gbit/s per NIC per direction"));
  }
  if (m.has_fabric_switch_radix()) {
    p.switch_radix = m.fabric_switch_radix();
    if (p.switch_radix < 2) in.fail("fabric_switch_radix", std::to_string(p.switch_radix) + " must be >= 2");
    if (!m.has_fabric_switch() || m.fabric_switch().empty()) in.fail("fabric_switch", "missing (names the switch)");
    p.switch_model = m.fabric_switch();
  }
  p.layout.pcie_switches = m.pcie_switches();
  p.layout.cpus = m.cpus();
  const bool needs_pcie = p.layout.pcie_switches > 0 || p.layout.scale_up == ScaleUp::kPcieOnly ||
                          (p.layout.cpus > 0 && !m.has_c2c_gbytes_per_s_per_direction());
  if (needs_pcie || m.has_pcie_gbytes_per_s_per_direction()) {
    p.layout.pcie_per_direction =
        GBps(link_rate(in, "pcie_gbytes_per_s_per_direction", m.has_pcie_gbytes_per_s_per_direction(),
                       m.pcie_gbytes_per_s_per_direction(), "decimal GB/s per x16 link per direction"));
  }
  if (p.layout.pcie_switches > 0 && p.layout.cpus == 0) in.fail("cpus", "PCIe switches need a CPU above them");
  p.layout.cpu_interconnect_per_direction = GBps(non_negative(
      in, "cpu_interconnect_gbytes_per_s_per_direction", m.has_cpu_interconnect_gbytes_per_s_per_direction(),
      m.cpu_interconnect_gbytes_per_s_per_direction(), "decimal GB/s per direction"));
  p.layout.c2c_per_direction =
      GBps(non_negative(in, "c2c_gbytes_per_s_per_direction", m.has_c2c_gbytes_per_s_per_direction(),
                        m.c2c_gbytes_per_s_per_direction(), "decimal GB/s per GPU per direction"));
  p.layout.cpu_vendor = cpu_vendor(m.cpu_vendor());
  if (p.layout.scale_up == ScaleUp::kPcieOnly && p.layout.pcie_switches == 0 && p.layout.cpus == 0) {
    in.fail("pcie_switches", "a PCIe-only node needs PCIe switches or CPUs to join its GPUs");
  }
  return p;
}

VertexKind vertex_kind(schema::Vertex::Kind k) {
  switch (k) {
    case schema::Vertex::NVSWITCH:
      return VertexKind::kNvSwitch;
    case schema::Vertex::PCIE_SWITCH:
      return VertexKind::kPcieSwitch;
    case schema::Vertex::CPU:
      return VertexKind::kCpu;
    case schema::Vertex::NIC:
      return VertexKind::kNic;
    case schema::Vertex::LEAF:
      return VertexKind::kLeaf;
    case schema::Vertex::SPINE:
      return VertexKind::kSpine;
    case schema::Vertex::CORE:
      return VertexKind::kCore;
    default:
      return VertexKind::kGpu;
  }
}

schema::Vertex::Kind to_schema(VertexKind k) {
  switch (k) {
    case VertexKind::kGpu:
      return schema::Vertex::GPU;
    case VertexKind::kNvSwitch:
      return schema::Vertex::NVSWITCH;
    case VertexKind::kPcieSwitch:
      return schema::Vertex::PCIE_SWITCH;
    case VertexKind::kCpu:
      return schema::Vertex::CPU;
    case VertexKind::kNic:
      return schema::Vertex::NIC;
    case VertexKind::kLeaf:
      return schema::Vertex::LEAF;
    case VertexKind::kSpine:
      return schema::Vertex::SPINE;
    case VertexKind::kCore:
      return schema::Vertex::CORE;
  }
  return schema::Vertex::GPU;
}

LinkKind link_kind(schema::Link::Kind k) {
  switch (k) {
    case schema::Link::PCIE:
      return LinkKind::kPcie;
    case schema::Link::NETWORK:
      return LinkKind::kNetwork;
    case schema::Link::ICI:
      return LinkKind::kIci;
    case schema::Link::CPU_INTERCONNECT:
      return LinkKind::kCpuInterconnect;
    default:
      return LinkKind::kNvlink;
  }
}

schema::Link::Kind to_schema(LinkKind k) {
  switch (k) {
    case LinkKind::kNvlink:
      return schema::Link::NVLINK;
    case LinkKind::kPcie:
      return schema::Link::PCIE;
    case LinkKind::kNetwork:
      return schema::Link::NETWORK;
    case LinkKind::kIci:
      return schema::Link::ICI;
    case LinkKind::kCpuInterconnect:
      return schema::Link::CPU_INTERCONNECT;
  }
  return schema::Link::NVLINK;
}

FabricKind fabric_kind(schema::Fabric::Kind k) {
  switch (k) {
    case schema::Fabric::CLOS_TWO_LEVEL:
      return FabricKind::kClosTwoLevel;
    case schema::Fabric::CLOS_THREE_LEVEL:
      return FabricKind::kClosThreeLevel;
    default:
      return FabricKind::kRailOptimizedFatTree;
  }
}

FabricRouting fabric_routing(schema::Fabric::Routing r) {
  switch (r) {
    case schema::Fabric::ECMP_HASH:
      return FabricRouting::kEcmpHash;
    case schema::Fabric::DESTINATION_MOD_K:
      return FabricRouting::kDestinationModK;
    default:
      return FabricRouting::kAdaptive;
  }
}

schema::Fabric::Routing to_schema(FabricRouting r) {
  switch (r) {
    case FabricRouting::kEcmpHash:
      return schema::Fabric::ECMP_HASH;
    case FabricRouting::kAdaptive:
      return schema::Fabric::ADAPTIVE;
    case FabricRouting::kDestinationModK:
      break;
  }
  return schema::Fabric::DESTINATION_MOD_K;
}

schema::Fabric::Kind to_schema(FabricKind k) {
  switch (k) {
    case FabricKind::kRailOptimizedFatTree:
      return schema::Fabric::RAIL_OPTIMIZED_FAT_TREE;
    case FabricKind::kClosTwoLevel:
      return schema::Fabric::CLOS_TWO_LEVEL;
    case FabricKind::kClosThreeLevel:
      return schema::Fabric::CLOS_THREE_LEVEL;
  }
  return schema::Fabric::RAIL_OPTIMIZED_FAT_TREE;
}

std::string required_gpu(const ParsedText& in, const schema::Cluster& c, const std::string& path) {
  if (!c.has_gpu() || c.gpu().empty()) {
    in.fail(join(path, "gpu"), "missing (required: the GPU type, e.g. \"A100-SXM4-80GB\", as the profile names it)");
  }
  return c.gpu();
}

BytesPerSecond nvlink_field(const ParsedText& in, const schema::Cluster& c, const std::string& path) {
  return GBps(link_rate(in, join(path, "nvlink_gbytes_per_s_per_direction"), c.has_nvlink_gbytes_per_s_per_direction(),
                        c.nvlink_gbytes_per_s_per_direction(), "decimal GB/s per GPU per direction"));
}

BytesPerSecond nic_field(const ParsedText& in, const schema::Cluster& c, const std::string& path) {
  return Gbitps(link_rate(in, join(path, "nic_gbits_per_s_per_direction"), c.has_nic_gbits_per_s_per_direction(),
                          c.nic_gbits_per_s_per_direction(), "Gbit/s per GPU per direction"));
}

void from_preset(const ParsedText& in, const schema::Cluster& c, const std::string& path, ClusterSpec& out) {
  const std::string& name = c.node_preset();
  const std::optional<std::string_view> text = topology::builtin_preset_text(name);
  if (!text) in.fail(join(path, "node_preset"), quote(name) + " is not a built-in node preset (" + preset_list() + ")");
  const Preset p = load_preset(name, *text);
  out.node = p.layout;
  if (p.switch_radix > 0) {  // the scenario's fabric.switch_radix, when set, replaces it (fabric())
    out.fabric.switch_radix = p.switch_radix;
    out.fabric.switch_model = p.switch_model;
  }
  out.gpus_per_node =
      c.has_gpus_per_node() ? at_least_one(in, join(path, "gpus_per_node"), true, c.gpus_per_node()) : p.gpus_per_node;
  out.gpu = c.has_gpu() ? required_gpu(in, c, path) : p.gpu;
  if (c.has_nics_per_node()) {
    out.node.nics_per_node = c.nics_per_node();
  } else if (c.has_gpus_per_node() && p.layout.nics_per_node > 0) {  // keep the preset's NICs per GPU
    out.node.nics_per_node = std::max<std::uint32_t>(
        1, static_cast<std::uint32_t>(std::uint64_t{p.layout.nics_per_node} * out.gpus_per_node / p.gpus_per_node));
  }
  // NIC bandwidth per GPU = port x NICs / GPUs.
  if (c.has_nic_gbits_per_s_per_direction()) {
    if (out.node.nics_per_node == 0) {
      in.fail(join(path, "nic_gbits_per_s_per_direction"), "the nodes have no NICs (nics_per_node is 0)");
    }
    out.nic_per_direction = nic_field(in, c, path);
  } else if (out.node.nics_per_node > 0) {
    if (p.nic_port.raw() <= 0) {
      in.fail(join(path, "nic_gbits_per_s_per_direction"),
              "missing (required: preset " + quote(name) + " has no NICs to take the bandwidth from)");
    }
    out.nic_per_direction = p.nic_port * static_cast<double>(out.node.nics_per_node) / out.gpus_per_node;
  } else {
    out.nic_per_direction = bytes_per_second(0);
  }
  if (c.has_torus()) {
    if (p.layout.scale_up != ScaleUp::kTorus) {
      in.fail(join(path, "torus"), "preset " + quote(name) + " is not a torus");
    }
    const std::string t = join(path, "torus");
    out.node.torus = {at_least_one(in, t + ".x", c.torus().has_x(), c.torus().x()),
                      at_least_one(in, t + ".y", c.torus().has_y(), c.torus().y()),
                      at_least_one(in, t + ".z", c.torus().has_z(), c.torus().z())};
    // TPU v4 slices have sides of 1, 2 or a multiple of 4 (Cloud TPU v4 topologies: 2x2x1 … 4x4x4 … 16x16x16);
    // a side of 3 or 6 is no slice. Which slices wrap around: below (ScaleUp::kTorus).
    const char* axis_names[] = {"x", "y", "z"};
    for (int a = 0; a < 3; ++a)
      if (const std::uint32_t side = out.node.torus[static_cast<std::size_t>(a)]; side > 2 && side % 4 != 0)
        in.fail(t + "." + axis_names[a], std::to_string(side) +
                                             " is not a side of a TPU v4 slice (1, 2 or a multiple of 4, which "
                                             "closes into a ring)");
  }
  switch (p.layout.scale_up) {
    case ScaleUp::kPcieOnly:
      if (c.has_nvlink_gbytes_per_s_per_direction()) {
        in.fail(join(path, "nvlink_gbytes_per_s_per_direction"),
                "preset " + quote(name) + " has no NVLink: its GPUs talk over PCIe");
      }
      out.nvlink_per_direction = p.layout.pcie_per_direction;  // the per-GPU path to the other GPUs
      break;
    case ScaleUp::kTorus: {
      const auto& d = out.node.torus;
      // The optical circuit switches close a slice's axes into rings only when the slice is whole 4x4x4 cubes:
      // every side a multiple of 4 (Cloud TPU v4 documentation, "3D mesh and 3D torus": the chips form a 3D mesh
      // of nearest-neighbour links, configured as a 3D torus on slices whose every dimension is a multiple of 4,
      // e.g. 4x4x8; smaller slices such as 2x2x4 or 2x4x4 stay a mesh). A side of 1 or 2 makes the whole slice a
      // mesh.
      out.node.torus_wraps = std::all_of(d.begin(), d.end(), [](std::uint32_t side) { return side % 4 == 0; });
      const std::uint64_t chips = std::uint64_t{d[0]} * d[1] * d[2];
      if (chips != std::uint64_t{out.nodes} * out.gpus_per_node) {
        in.fail(join(path, c.has_torus() ? "torus" : "nodes"),
                "a " + std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]) +
                    " torus holds " + std::to_string(chips) + " chips, but " + plural(out.nodes, "node") + " x " +
                    std::to_string(out.gpus_per_node) +
                    " per node = " + std::to_string(std::uint64_t{out.nodes} * out.gpus_per_node));
      }
      out.nvlink_per_direction = c.has_nvlink_gbytes_per_s_per_direction()
                                     ? nvlink_field(in, c, path)
                                     : p.ici_link * static_cast<double>(topology::torus_links_per_chip(d));
      break;
    }
    case ScaleUp::kNvSwitch:
      out.nvlink_per_direction = c.has_nvlink_gbytes_per_s_per_direction() ? nvlink_field(in, c, path) : p.nvlink;
      break;
  }
}

void explicit_form(const ParsedText& in, const schema::Cluster& c, const std::string& path, ClusterSpec& out) {
  for (const char* field : {"node_preset", "torus", "nics_per_node"}) {
    const bool has = std::string(field) == "node_preset" ? c.has_node_preset()
                     : std::string(field) == "torus"     ? c.has_torus()
                                                         : c.has_nics_per_node();
    if (has) in.fail(join(path, field), "not used by an explicit cluster (vertices and links)");
  }
  if (c.has_fabric()) {  // the switches are given; only how they route is left to say
    std::vector<const google::protobuf::FieldDescriptor*> set;
    c.fabric().GetReflection()->ListFields(c.fabric(), &set);
    for (const google::protobuf::FieldDescriptor* field : set) {
      if (field->name() != "routing")
        in.fail(join(join(path, "fabric"), field->name()),
                "not used by an explicit cluster (vertices and links), whose fabric takes only `routing`");
    }
    out.fabric.routing = fabric_routing(c.fabric().routing());
  }
  // Nothing of a node's layout but what the cluster says for every form (its NVSwitches' NVLS, its hosts' CPUs).
  const bool nvls = out.node.nvls;
  const topology::CpuVendor vendor = out.node.cpu_vendor;
  out.node = NodeLayout{};
  out.node.nics_per_node = 0;
  out.node.nvls = nvls;
  out.node.cpu_vendor = vendor;
  const std::uint32_t gpus = out.gpu_count();
  std::vector<bool> taken(gpus, false);
  std::uint32_t next_gpu = 0;
  for (int i = 0; i < c.vertices_size(); ++i) {
    const schema::Vertex& v = c.vertices(i);
    const std::string vp = indexed(path, "vertices", i);
    if (!v.has_name() || v.name().empty()) in.fail(join(vp, "name"), "missing (required)");
    if (!v.has_kind()) in.fail(join(vp, "kind"), "missing (required)");
    topology::VertexSpec spec;
    spec.name = v.name();
    spec.kind = vertex_kind(v.kind());
    if (v.has_node()) spec.node = v.node();
    if (spec.kind == VertexKind::kGpu) {
      const std::uint32_t g = v.has_gpu() ? v.gpu() : next_gpu;
      ++next_gpu;
      if (g >= gpus) {
        in.fail(join(vp, v.has_gpu() ? "gpu" : "name"),
                "GPU index " + std::to_string(g) + " is not below nodes x gpus_per_node = " + std::to_string(gpus));
      }
      if (taken[g])
        in.fail(join(vp, v.has_gpu() ? "gpu" : "name"), "GPU index " + std::to_string(g) + " is used twice");
      taken[g] = true;
      spec.gpu = g;
      if (spec.node && *spec.node != out.node_of(g)) {
        in.fail(join(vp, "node"), "GPU " + std::to_string(g) + " is on node " + std::to_string(out.node_of(g)) +
                                      " (gpu / gpus_per_node), not " + std::to_string(*spec.node));
      }
      spec.node = out.node_of(g);
    } else if (v.has_gpu()) {
      in.fail(join(vp, "gpu"), "only GPU vertices have a GPU index");
    } else if (spec.node && *spec.node >= out.nodes) {
      in.fail(join(vp, "node"),
              "node " + std::to_string(*spec.node) + " is not below nodes = " + std::to_string(out.nodes));
    }
    out.vertices.push_back(std::move(spec));
  }
  if (next_gpu != gpus) {
    in.fail(join(path, "vertices"), std::to_string(next_gpu) + (next_gpu == 1 ? " GPU vertex" : " GPU vertices") +
                                        " but nodes x gpus_per_node = " + std::to_string(gpus));
  }
  for (int i = 0; i < c.links_size(); ++i) {
    const schema::Link& l = c.links(i);
    const std::string lp = indexed(path, "links", i);
    if (!l.has_from() || l.from().empty()) in.fail(join(lp, "from"), "missing (required: a vertex name)");
    if (!l.has_to() || l.to().empty()) in.fail(join(lp, "to"), "missing (required: a vertex name)");
    if (!l.has_kind()) in.fail(join(lp, "kind"), "missing (required)");
    topology::LinkSpec spec;
    spec.from = l.from();
    spec.to = l.to();
    spec.kind = link_kind(l.kind());
    spec.bandwidth = GBps(link_rate(in, join(lp, "gbytes_per_s_per_direction"), l.has_gbytes_per_s_per_direction(),
                                    l.gbytes_per_s_per_direction(), "decimal GB/s per direction"));
    spec.latency = microseconds(latency_us(in, join(lp, "latency_us"), l.has_latency_us(), l.latency_us()));
    spec.duplex = !l.has_duplex() || l.duplex();
    out.links.push_back(std::move(spec));
  }
}

constexpr std::uint32_t kMaxSwitchRadix = 4096;

void fabric(const ParsedText& in, const schema::Cluster& c, const std::string& path, ClusterSpec& out) {
  const schema::Fabric& f = c.fabric();
  const std::string fp = join(path, "fabric");
  out.fabric.kind = fabric_kind(f.kind());
  if (f.has_oversubscription()) {
    out.fabric.oversubscription = finite(in, join(fp, "oversubscription"), f.oversubscription());
    if (out.fabric.oversubscription < 1) {
      in.fail(join(fp, "oversubscription"), format_number(f.oversubscription()) +
                                                " must be >= 1 (leaf downlink / uplink bandwidth; 1 = non-blocking)");
    }
  }
  if (f.has_switch_radix()) {
    out.fabric.switch_radix = f.switch_radix();
    out.fabric.switch_model.clear();
    if (out.fabric.switch_radix < 2)
      in.fail(join(fp, "switch_radix"), std::to_string(f.switch_radix()) + " must be >= 2");
    // The largest switch ASICs have 512 ports (Tomahawk 5 at 100G); a bound far above keeps the graph buildable.
    if (out.fabric.switch_radix > kMaxSwitchRadix)
      in.fail(join(fp, "switch_radix"), std::to_string(f.switch_radix()) + " ports is more than the " +
                                            std::to_string(kMaxSwitchRadix) + " clustersim builds");
  }
  // A leaf of k ports keeps at least one uplink: k - 1 downlinks per uplink is the most oversubscription.
  if (out.fabric.oversubscription > out.fabric.switch_radix - 1)
    in.fail(join(fp, "oversubscription"), format_number(out.fabric.oversubscription) + " is more than a leaf of " +
                                              std::to_string(out.fabric.switch_radix) + " ports can give (" +
                                              std::to_string(out.fabric.switch_radix - 1) + ":1)");
  if (f.has_link_gbits_per_s_per_direction()) {
    const double gbits = link_rate(in, join(fp, "link_gbits_per_s_per_direction"), true,
                                   f.link_gbits_per_s_per_direction(), "Gbit/s per direction");
    // Within a factor 1000 of the NIC port either way: a leaf needs uplinks and downlinks of comparable speed.
    const double port = out.nic_port_per_direction().raw() * 8 / 1e9;
    if (port > 0 && (gbits > port * 1000 || gbits < port / 1000))
      in.fail(join(fp, "link_gbits_per_s_per_direction"), format_number(gbits) + " Gbit/s is more than 1000 times " +
                                                              (gbits > port ? "above" : "below") + " the NIC port's " +
                                                              format_number(port) + " Gbit/s");
    out.fabric.link_per_direction = Gbitps(gbits);
  } else {
    out.fabric.link_per_direction = out.nic_port_per_direction();
  }
  out.fabric.switch_latency =
      microseconds(latency_us(in, join(fp, "switch_latency_us"), f.has_switch_latency_us(), f.switch_latency_us()));
  out.fabric.in_network_reduction = f.in_network_reduction();
  out.fabric.routing = fabric_routing(f.routing());
  // A leaf's downlinks (NIC ports) take oversubscription x uplinks x link / port of its ports: uplinks far slower
  // than the NICs leave none of a leaf's ports for them. Blamed on the field that set it: the link rate when given.
  if (topology::has_fabric(out) && out.nic_port_per_direction().raw() > 0 &&
      topology::fabric_ports(out).downlinks == 0) {
    const std::string field = f.has_link_gbits_per_s_per_direction() ? "link_gbits_per_s_per_direction"
                              : f.has_switch_radix()                 ? "switch_radix"
                                                                     : "oversubscription";
    in.fail(join(fp, field), "a leaf of " + std::to_string(out.fabric.switch_radix) + " ports has no port left for a " +
                                 format_number(out.nic_port_per_direction().raw() * 8 / 1e9) + " Gbit/s NIC: at " +
                                 format_number(out.fabric.link_per_direction.raw() * 8 / 1e9) +
                                 " Gbit/s per uplink and oversubscription " +
                                 format_number(out.fabric.oversubscription) +
                                 ", one NIC port needs more uplinks than that");
  }
}

void faults_and_stragglers(const ParsedText& in, const schema::Cluster& c, const std::string& path, ClusterSpec& out) {
  for (int i = 0; i < c.link_faults_size(); ++i) {
    const schema::LinkFault& f = c.link_faults(i);
    const std::string fp = indexed(path, "link_faults", i);
    topology::LinkFault fault;
    if (f.has_pattern()) {
      if (f.has_from() || f.has_to()) in.fail(join(fp, "pattern"), "give either from + to or a pattern, not both");
      if (f.pattern().empty()) in.fail(join(fp, "pattern"), "empty");
      fault.pattern = f.pattern();
    } else {
      if (!f.has_from() || f.from().empty()) in.fail(join(fp, "from"), "missing (required: from + to, or a pattern)");
      if (!f.has_to() || f.to().empty()) in.fail(join(fp, "to"), "missing (required: from + to, or a pattern)");
      fault.from = f.from();
      fault.to = f.to();
    }
    if (f.has_down() && f.down()) {
      if (f.has_bandwidth_factor())
        in.fail(join(fp, "bandwidth_factor"), "a link that is down has no bandwidth_factor");
      fault.down = true;
    } else {
      if (!f.has_bandwidth_factor()) {
        in.fail(join(fp, f.has_down() ? "down" : "bandwidth_factor"),
                "missing (required: down: true or a bandwidth_factor)");
      }
      const double k = finite(in, join(fp, "bandwidth_factor"), f.bandwidth_factor());
      if (!(k > 0 && k < 1)) {
        in.fail(join(fp, "bandwidth_factor"), format_number(k) + " must be in (0, 1) (use down: true for 0)");
      }
      if (k < 1e-6)  // with the slowest link rate (1e-6) still above 0: a flow there must finish
        in.fail(join(fp, "bandwidth_factor"),
                format_number(k) + " is below 1e-6: a link that slow is down for any training step (use down: true)");
      fault.bandwidth_factor = k;
    }
    out.link_faults.push_back(std::move(fault));
  }
  std::set<std::uint32_t> seen;
  for (int i = 0; i < c.slow_gpus_size(); ++i) {
    const schema::SlowGpu& s = c.slow_gpus(i);
    const std::string sp = indexed(path, "slow_gpus", i);
    if (!s.has_gpu()) in.fail(join(sp, "gpu"), "missing (required: a GPU index)");
    if (s.gpu() >= out.gpu_count()) {
      in.fail(join(sp, "gpu"),
              std::to_string(s.gpu()) + " is not below the cluster's " + plural(out.gpu_count(), "GPU"));
    }
    if (!seen.insert(s.gpu()).second) in.fail(join(sp, "gpu"), "GPU " + std::to_string(s.gpu()) + " is listed twice");
    if (!s.has_compute_slowdown()) in.fail(join(sp, "compute_slowdown"), "missing (required, >= 1)");
    const double k = finite(in, join(sp, "compute_slowdown"), s.compute_slowdown());
    if (k < 1) in.fail(join(sp, "compute_slowdown"), format_number(k) + " must be >= 1 (1 = full speed)");
    at_most(in, join(sp, "compute_slowdown"), k, 1e4, "x", "a straggler that slow has failed; leave the GPU out");
    out.slow_gpus.push_back({s.gpu(), k});
  }
  std::sort(out.slow_gpus.begin(), out.slow_gpus.end(),
            [](const topology::SlowGpu& a, const topology::SlowGpu& b) { return a.gpu < b.gpu; });
}

// Builds the graph once: fabric sizing, explicit names and fault selectors are checked there; then every
// GPU must still reach GPU 0 and be reached from it.
constexpr std::uint32_t kAllPairsGpus = 256;

void check_graph(const ParsedText& in, const schema::Cluster& c, const std::string& path, const ClusterSpec& out) {
  std::optional<topology::Topology> topo;
  try {
    topo.emplace(out);
  } catch (const InputError& e) {
    // Fabric sizing errors of a cluster that leaves the fabric to its defaults come from the node count.
    const bool sizing = e.field_path().rfind("fabric", 0) == 0 && !c.has_fabric();
    in.fail(join(path, sizing ? "nodes" : e.field_path()), e.message());
  }
  if (c.link_faults_size() == 0 && !out.is_explicit()) return;
  const std::string where = join(path, out.link_faults.empty() ? "links" : "link_faults");
  // Every GPU to and from two anchors, the first and the last GPU (another node's when there are several): GPUs
  // do not forward traffic, so a GPU whose NIC is cut reaches its own node's GPUs (the first anchor) but no
  // other node (the second).
  // An explicit cluster can wire GPUs to disjoint switches that both anchors reach (g1 on s1 only, g2 on s2 only,
  // the anchors on both): every pair is checked there, up to kAllPairsGpus GPUs.
  const std::uint32_t last = topo->gpu_count() - 1;
  std::vector<std::uint32_t> anchors{0u, last};
  if (out.is_explicit() && topo->gpu_count() <= kAllPairsGpus) {
    anchors.resize(topo->gpu_count());
    for (std::uint32_t g = 0; g < topo->gpu_count(); ++g) anchors[g] = g;
  }
  for (std::uint32_t anchor : anchors) {
    for (std::uint32_t g = 0; g < topo->gpu_count(); ++g) {
      for (const auto& [a, b] : {std::pair{g, anchor}, std::pair{anchor, g}}) {
        if (a == b || topo->route_hops(a, b) != topology::kNone) continue;
        in.fail(where, "no route from GPU " + std::to_string(a) + " (" + topo->vertex(topo->gpu_vertex(a)).name +
                           ") to GPU " + std::to_string(b) + " (" + topo->vertex(topo->gpu_vertex(b)).name + ")" +
                           (out.link_faults.empty() ? "" : " with these links down"));
      }
    }
  }
}

double gbytes(BytesPerSecond r) {
  return invert(r.raw(), r.raw() / 1e9, [](double v) { return GBps(v).raw(); });
}
double gbits(BytesPerSecond r) {
  return invert(r.raw(), r.raw() * 8 / 1e9, [](double v) { return Gbitps(v).raw(); });
}
double us(Seconds s) {
  return invert(s.raw(), to_us(s), [](double v) { return microseconds(v).raw(); });
}

}  // namespace

std::vector<std::string_view> node_preset_names() {
  return topology::builtin_preset_text_names();
}

topology::ClusterSpec to_cluster(const ParsedText& in, const schema::Cluster& c, const std::string& path) {
  ClusterSpec out;
  out.nodes = at_least_one(in, join(path, "nodes"), c.has_nodes(), c.nodes());
  const bool is_explicit = c.vertices_size() > 0 || c.links_size() > 0;
  if (c.has_node_preset()) {
    if (is_explicit) {
      in.fail(join(path, "node_preset"), "an explicit cluster (vertices and links) cannot also name a node_preset");
    }
    from_preset(in, c, path, out);
  } else {
    out.gpus_per_node = at_least_one(in, join(path, "gpus_per_node"), c.has_gpus_per_node(), c.gpus_per_node());
    out.gpu = required_gpu(in, c, path);
    out.nvlink_per_direction = nvlink_field(in, c, path);
    out.nic_per_direction = nic_field(in, c, path);
    if (!is_explicit) {
      if (c.has_torus()) in.fail(join(path, "torus"), "a torus needs a torus node_preset (" + preset_list() + ")");
      out.node.nics_per_node = c.has_nics_per_node() ? c.nics_per_node() : out.gpus_per_node;
    }
  }
  // The largest clusters built have a few hundred thousand GPUs; at 2^20 (sweep's and plan's bound too) the
  // topology alone takes seconds and a gigabyte.
  constexpr std::uint64_t kMaxGpus = std::uint64_t{1} << 20;
  if (std::uint64_t{out.nodes} * out.gpus_per_node > kMaxGpus) {
    const bool per_node = out.gpus_per_node > out.nodes;
    in.fail(join(path, per_node ? "gpus_per_node" : "nodes"),
            plural(out.nodes, "node") + " x " + plural(out.gpus_per_node, "GPU") +
                " per node is more GPUs than clustersim models (" + std::to_string(kMaxGpus) + ")");
  }
  // The largest scale-up domain sold, GB200 NVL72 (and the announced NVL576), holds well under 1,024 GPUs; a node
  // of more is a typo, and its all-pairs tables would grow with the square of it. Every form (preset, simple,
  // explicit).
  at_most(in, join(path, "gpus_per_node"), out.gpus_per_node, 1024, "GPUs", "no server or scale-up domain has more");
  if (c.has_nvls()) out.node.nvls = c.nvls();
  if (c.has_cpu_vendor()) out.node.cpu_vendor = cpu_vendor(c.cpu_vendor());
  out.nvlink_hop_latency = microseconds(
      latency_us(in, join(path, "nvlink_hop_latency_us"), c.has_nvlink_hop_latency_us(), c.nvlink_hop_latency_us()));
  out.network_hop_latency = microseconds(
      latency_us(in, join(path, "network_hop_latency_us"), c.has_network_hop_latency_us(), c.network_hop_latency_us()));
  if (is_explicit) {
    explicit_form(in, c, path, out);
  } else {
    // Each GPU sends through one NIC (topology.h): more NICs than GPUs would leave the rest unconnected and
    // silently drop their bandwidth. The simple form's NIC bandwidth is per GPU already.
    if (out.node.nics_per_node > out.gpus_per_node)
      in.fail(join(path, c.has_nics_per_node() ? "nics_per_node" : "gpus_per_node"),
              plural(out.node.nics_per_node, "NIC") + " for " + plural(out.gpus_per_node, "GPU") +
                  " per node: clustersim gives each GPU one NIC; give nics_per_node <= gpus_per_node and the "
                  "GPU's whole NIC bandwidth in nic_gbits_per_s_per_direction");
    if (c.has_fabric() && out.node.scale_up == ScaleUp::kTorus)
      in.fail(join(path, "fabric"), "a torus has no network fabric (its chips link to each other)");
    fabric(in, c, path, out);
    const std::uint32_t per_domain = out.node.scale_up == ScaleUp::kTorus ? out.nodes : out.node.nvlink_domain_nodes;
    if (out.node.nics_per_node == 0 && out.nodes > per_domain) {
      in.fail(join(path, c.has_nics_per_node() ? "nics_per_node" : "nodes"),
              plural(out.nodes, "node") + " in NVLink domains of " + plural(per_domain, "node") +
                  " need NICs to reach each other, and nics_per_node is 0");
    }
  }
  faults_and_stragglers(in, c, path, out);
  check_graph(in, c, path, out);
  return out;
}

void write_cluster(const topology::ClusterSpec& cluster, schema::Cluster& c) {
  c.set_nodes(cluster.nodes);
  c.set_gpus_per_node(cluster.gpus_per_node);
  c.set_gpu(cluster.gpu);
  const bool preset = !cluster.node.preset.empty();
  if (!(preset && cluster.node.scale_up == ScaleUp::kPcieOnly)) {
    c.set_nvlink_gbytes_per_s_per_direction(gbytes(cluster.nvlink_per_direction));
  }
  if (cluster.nic_per_direction.raw() > 0) c.set_nic_gbits_per_s_per_direction(gbits(cluster.nic_per_direction));
  c.set_nvlink_hop_latency_us(us(cluster.nvlink_hop_latency));
  c.set_network_hop_latency_us(us(cluster.network_hop_latency));
  if (!cluster.node.nvls) c.set_nvls(false);
  // Also an unspecified vendor over a preset's: the preset would otherwise bring its own back.
  if (cluster.node.cpu_vendor != topology::CpuVendor::kUnspecified || !cluster.node.preset.empty())
    c.set_cpu_vendor(to_schema(cluster.node.cpu_vendor));
  if (cluster.is_explicit()) {
    for (const topology::VertexSpec& v : cluster.vertices) {
      schema::Vertex& m = *c.add_vertices();
      m.set_name(v.name);
      m.set_kind(to_schema(v.kind));
      if (v.node) m.set_node(*v.node);
      if (v.gpu) m.set_gpu(*v.gpu);
    }
    for (const topology::LinkSpec& l : cluster.links) {
      schema::Link& m = *c.add_links();
      m.set_from(l.from);
      m.set_to(l.to);
      m.set_kind(to_schema(l.kind));
      m.set_gbytes_per_s_per_direction(gbytes(l.bandwidth));
      m.set_latency_us(us(l.latency));
      m.set_duplex(l.duplex);
    }
  } else {
    if (preset) c.set_node_preset(cluster.node.preset);
    c.set_nics_per_node(cluster.node.nics_per_node);
    if (cluster.node.scale_up == ScaleUp::kTorus) {
      c.mutable_torus()->set_x(cluster.node.torus[0]);
      c.mutable_torus()->set_y(cluster.node.torus[1]);
      c.mutable_torus()->set_z(cluster.node.torus[2]);
    }
  }
  if (!cluster.is_explicit() && cluster.node.scale_up != ScaleUp::kTorus) {  // a torus has no fabric
    schema::Fabric& f = *c.mutable_fabric();
    f.set_kind(to_schema(cluster.fabric.kind));
    f.set_oversubscription(cluster.fabric.oversubscription);
    // The preset's switch (switch_model set) comes back with node_preset; any other radix is written.
    if (cluster.fabric.switch_model.empty()) f.set_switch_radix(cluster.fabric.switch_radix);
    if (cluster.fabric.link_per_direction.raw() > 0) {
      f.set_link_gbits_per_s_per_direction(gbits(cluster.fabric.link_per_direction));
    }
    f.set_switch_latency_us(us(cluster.fabric.switch_latency));
    f.set_in_network_reduction(cluster.fabric.in_network_reduction);
    f.set_routing(to_schema(cluster.fabric.routing));
  } else if (cluster.is_explicit() && cluster.fabric.routing != FabricRouting::kAdaptive) {
    c.mutable_fabric()->set_routing(to_schema(cluster.fabric.routing));
  }
  for (const topology::LinkFault& fault : cluster.link_faults) {
    schema::LinkFault& m = *c.add_link_faults();
    if (!fault.pattern.empty()) {
      m.set_pattern(fault.pattern);
    } else {
      m.set_from(fault.from);
      m.set_to(fault.to);
    }
    if (fault.down) {
      m.set_down(true);
    } else {
      m.set_bandwidth_factor(fault.bandwidth_factor);
    }
  }
  for (const topology::SlowGpu& s : cluster.slow_gpus) {
    schema::SlowGpu& m = *c.add_slow_gpus();
    m.set_gpu(s.gpu);
    m.set_compute_slowdown(s.compute_slowdown);
  }
}

topology::ClusterSpec load_cluster_text(const std::string& text, const std::string& file) {
  schema::Cluster message;
  const ParsedText in = calibrate::parse_message(text, file, calibrate::InputSyntax::kTextFormat, message);
  return to_cluster(in, message, "");
}

}  // namespace clustersim::cli
