#include "topology/topology.h"

#include <algorithm>
#include <boost/graph/graphviz.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <ostream>
#include <set>

#include "sim/input_error.h"
#include "topology/torus.h"

namespace clustersim::topology {
namespace {

constexpr std::uint16_t kUnreachable = 0xffff;

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// One of n equal next links at vertex u, by a hash of the route's seed and the vertex (the ECMP hash).
std::size_t hash_pick(std::uint64_t seed, std::uint32_t u, std::size_t n) {
  return n > 1 ? mix(seed ^ (std::uint64_t{u} * 0xd6e8feb86659fd93ULL)) % n : 0;
}

// Lower is preferred when several next links keep a route shortest.
int preference(LinkKind kind) {
  switch (kind) {
    case LinkKind::kNvlink:
    case LinkKind::kIci:
      return 0;
    case LinkKind::kNetwork:
      return 1;
    case LinkKind::kPcie:
      return 2;
    case LinkKind::kCpuInterconnect:
      return 3;
  }
  return 4;
}

// '*' matches any run of characters (also '/'), '?' one character.
bool glob_match(std::string_view pattern, std::string_view text) {
  std::size_t p = 0, t = 0, star = std::string_view::npos, back = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      back = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++back;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::uint32_t ceil_div(std::uint32_t a, std::uint32_t b) {
  return static_cast<std::uint32_t>((std::uint64_t{a} + b - 1) / b);  // no wrap-around for a near 2^32
}

std::string str(std::uint32_t v) {
  return std::to_string(v);
}

[[noreturn]] void input_error(const std::string& path, const std::string& message) {
  throw InputError("", 0, 0, path, message);
}


}  // namespace

const char* to_string(VertexKind kind) {
  switch (kind) {
    case VertexKind::kGpu:
      return "gpu";
    case VertexKind::kNvSwitch:
      return "nvswitch";
    case VertexKind::kPcieSwitch:
      return "pcie_switch";
    case VertexKind::kCpu:
      return "cpu";
    case VertexKind::kNic:
      return "nic";
    case VertexKind::kLeaf:
      return "leaf";
    case VertexKind::kSpine:
      return "spine";
    case VertexKind::kCore:
      return "core";
  }
  return "?";
}

const char* to_string(LinkKind kind) {
  switch (kind) {
    case LinkKind::kNvlink:
      return "nvlink";
    case LinkKind::kPcie:
      return "pcie";
    case LinkKind::kNetwork:
      return "network";
    case LinkKind::kIci:
      return "ici";
    case LinkKind::kCpuInterconnect:
      return "cpu_link";
  }
  return "?";
}

const char* to_string(FabricKind kind) {
  switch (kind) {
    case FabricKind::kRailOptimizedFatTree:
      return "rail-optimised fat tree";
    case FabricKind::kClosTwoLevel:
      return "two-level Clos";
    case FabricKind::kClosThreeLevel:
      return "three-level Clos";
  }
  return "?";
}

const char* to_string(CpuVendor vendor) {
  switch (vendor) {
    case CpuVendor::kUnspecified:
      return "unspecified";
    case CpuVendor::kIntel:
      return "Intel";
    case CpuVendor::kAmd:
      return "AMD";
    case CpuVendor::kArm:
      return "Arm";
  }
  return "?";
}

const char* to_string(FabricRouting routing) {
  switch (routing) {
    case FabricRouting::kDestinationModK:
      return "D-mod-k";
    case FabricRouting::kEcmpHash:
      return "ECMP hash";
    case FabricRouting::kAdaptive:
      return "adaptive";
  }
  return "?";
}

std::size_t Topology::RouteKeyHash::operator()(const RouteKey& k) const {
  return static_cast<std::size_t>(mix(mix((std::uint64_t{k.src} << 32) | k.dst) ^ k.flow));
}

Topology::~Topology() = default;

Topology::Topology(const ClusterSpec& spec) : spec_(spec) {
  if (spec_.is_explicit()) {
    build_explicit();
  } else {
    build_generated();
  }
  apply_faults();
  compute_domains();
  fabric_slot_.assign(vertex_count(), kNone);
  for (VertexIndex v = 0; v < vertex_count(); ++v) {
    const VertexKind k = graph_[v].kind;
    if (k == VertexKind::kNic || is_fabric_switch(k)) {
      fabric_slot_[v] = fabric_slots_++;
    }
  }
  // Destination keys for D-mod-k: NICs numbered leaf by leaf (the leaf each is cabled to, then vertex order;
  // NICs on no leaf last), so that the NICs under one leaf have consecutive keys, as a fat-tree routing engine
  // numbers its end ports; a rail-optimised tree's leaf holds NIC r of several nodes, which node-major numbers
  // would give one residue. GPUs keep their index.
  destination_key_.assign(vertex_count(), 0);
  std::vector<std::pair<VertexIndex, VertexIndex>> nics;  // (leaf or kNone, NIC)
  for (VertexIndex v = 0; v < vertex_count(); ++v) {
    const VertexProps& p = graph_[v];
    if (p.kind != VertexKind::kNic) {
      destination_key_[v] = p.kind == VertexKind::kGpu ? p.gpu : v;
      continue;
    }
    VertexIndex leaf = kNone;
    for (auto [e, end] = boost::out_edges(v, graph_); e != end && leaf == kNone; ++e) {
      const auto w = static_cast<VertexIndex>(boost::target(*e, graph_));
      if (graph_[w].kind == VertexKind::kLeaf) leaf = w;
    }
    nics.emplace_back(leaf, v);
  }
  std::sort(nics.begin(), nics.end());
  for (std::uint32_t i = 0; i < nics.size(); ++i) destination_key_[nics[i].second] = i;
  if (spec_.is_explicit()) assign_explicit_nics();
}

// An explicit cluster's GPU sends to other nodes through the NIC of its node closest to it, as NCCL pairs each GPU
// with its nearest NIC by PCI distance; GPUs that tie on the same NICs (a PCIe switch with 2 GPUs and 2 NICs, as in
// a DGX) take them in turn in GPU order, as a generated node's GPUs take theirs (build_node). A GPU whose node has
// no NIC it reaches inside the node keeps kNone and its shortest routes.
void Topology::assign_explicit_nics() {
  std::map<std::uint32_t, std::vector<VertexIndex>> nics_of_node;
  for (VertexIndex v = 0; v < vertex_count(); ++v)
    if (graph_[v].kind == VertexKind::kNic && graph_[v].node != kNone) nics_of_node[graph_[v].node].push_back(v);
  std::map<std::vector<VertexIndex>, std::uint32_t> given;  // GPUs given one of these nearest NICs so far
  for (std::uint32_t g = 0; g < gpu_count(); ++g) {
    const auto it = nics_of_node.find(node_of(g));
    if (it == nics_of_node.end()) continue;
    std::vector<VertexIndex> nearest;
    std::uint32_t best = kNone;
    std::vector<LinkIndex> path;
    for (VertexIndex nic : it->second) {
      const std::uint32_t d = distance(gpu_vertex_[g], nic, Scope::kAny);
      if (d == kNone || d > best) continue;
      // Only a NIC reached inside the node, not one whose shortest way in is back from the fabric.
      path.clear();
      walk(gpu_vertex_[g], nic, Scope::kAny, 0, path);
      if (crosses_fabric(path)) continue;
      if (d < best) nearest.clear();
      best = d;
      nearest.push_back(nic);
    }
    if (!nearest.empty()) own_nic_[g] = nearest[given[nearest]++ % nearest.size()];
  }
}

// Between nodes of an explicit cluster, where the shortest route crosses the network: through both GPUs' own
// NICs, NIC to NIC over the fabric's switches only, as a generated cluster's rails (use_rails), rather than through
// whichever NIC or another node's PCIe switch a path as short takes. NVLink drawn between the nodes, or any route
// that needs no fabric switch, stays as the shortest route finds it.
bool Topology::explicit_rails(std::uint32_t src, std::uint32_t dst) const {
  if (!spec_.is_explicit() || own_nic_[src] == kNone || own_nic_[dst] == kNone) return false;
  if (node_of(src) == node_of(dst)) return false;
  const VertexIndex s = gpu_vertex_[src], t = gpu_vertex_[dst], ns = own_nic_[src], nd = own_nic_[dst];
  if (distance(s, t, Scope::kAny) == kNone || distance(s, ns, Scope::kAny) == kNone ||
      distance(ns, nd, Scope::kFabric) == kNone || distance(nd, t, Scope::kAny) == kNone)
    return false;
  std::vector<LinkIndex> shortest;
  walk(s, t, Scope::kAny, 0, shortest);
  return crosses_fabric(shortest);
}

bool Topology::crosses_fabric(const std::vector<LinkIndex>& path) const {
  return std::any_of(path.begin(), path.end(),
                     [this](LinkIndex l) { return is_fabric_switch(graph_[link(l).to].kind); });
}

// ---------------------------------------------------------------------------------------------------------
// Construction

VertexIndex Topology::add_vertex(std::string name, VertexKind kind, std::uint32_t node, std::uint32_t gpu) {
  VertexProps p;
  p.name = std::move(name);
  p.kind = kind;
  p.node = node;
  p.gpu = gpu;
  p.forwards = kind != VertexKind::kGpu || spec_.node.scale_up == ScaleUp::kTorus;
  const auto v = static_cast<VertexIndex>(boost::add_vertex(p, graph_));
  vertex_by_name_.emplace(graph_[v].name, v);
  if (kind == VertexKind::kGpu) {
    if (gpu_vertex_.size() <= gpu) gpu_vertex_.resize(gpu + 1, kNone);
    gpu_vertex_[gpu] = v;
  }
  return v;
}

void Topology::add_link(VertexIndex from, VertexIndex to, LinkKind kind, BytesPerSecond bandwidth, Seconds latency) {
  LinkProps p;
  p.kind = kind;
  p.bandwidth = bandwidth;
  p.latency = latency;
  p.name = graph_[from].name + "->" + graph_[to].name;
  // A parallel link gets "#2", "#3", ...: counted per vertex pair (boost::edge would scan the out-edges of a
  // switch with every GPU of a large domain, quadratic in the GPUs).
  const std::uint32_t parallel = ++links_between_[(std::uint64_t{from} << 32) | to];
  if (parallel > 1) p.name += "#" + str(parallel);
  p.index = static_cast<LinkIndex>(edges_.size());
  edges_.push_back(boost::add_edge(from, to, p, graph_).first);
}

void Topology::add_duplex(VertexIndex a, VertexIndex b, LinkKind kind, BytesPerSecond bandwidth, Seconds to_b_latency,
                          Seconds to_a_latency) {
  add_link(a, b, kind, bandwidth, to_b_latency);
  add_link(b, a, kind, bandwidth, to_a_latency);
}

void Topology::build_generated() {
  const NodeLayout& layout = spec_.node;
  const std::uint32_t per_domain = layout.scale_up == ScaleUp::kTorus ? spec_.nodes : layout.nvlink_domain_nodes;
  const std::uint32_t domains = ceil_div(spec_.nodes, std::max<std::uint32_t>(per_domain, 1));
  // The fabric's sizing is checked before anything is built: a fabric too small for the nodes fails at once.
  std::optional<FabricShape> fabric;
  if (has_fabric(spec_)) fabric = fabric_shape(spec_);
  own_nic_.assign(spec_.gpu_count(), kNone);
  for (std::uint32_t d = 0; d < domains; ++d) {
    const std::uint32_t first = d * per_domain;
    const std::uint32_t last = std::min(spec_.nodes, first + per_domain);
    const auto domain_begin = static_cast<VertexIndex>(vertex_count());
    for (std::uint32_t n = first; n < last; ++n) {
      const auto begin = static_cast<VertexIndex>(vertex_count());
      build_node(n);
      node_range_.push_back({begin, vertex_count()});
    }
    const std::uint32_t domain_gpus = (last - first) * spec_.gpus_per_node;
    if (layout.scale_up == ScaleUp::kNvSwitch && per_domain > 1 && domain_gpus > 1) {
      const VertexIndex sw = add_vertex("nvl" + str(d) + "/nvswitch", VertexKind::kNvSwitch, kNone, kNone);
      for (std::uint32_t g = first * spec_.gpus_per_node; g < last * spec_.gpus_per_node; ++g) {
        add_duplex(gpu_vertex_[g], sw, LinkKind::kNvlink, spec_.nvlink_per_direction, spec_.nvlink_hop_latency,
                   seconds(0));
      }
    }
    domain_range_.push_back({domain_begin, vertex_count()});
    for (std::uint32_t g = first * spec_.gpus_per_node; g < last * spec_.gpus_per_node; ++g) group_.push_back(d);
  }
  if (layout.scale_up == ScaleUp::kTorus) build_torus();
  if (fabric) build_fabric(*fabric);
}

void Topology::build_node(std::uint32_t n) {
  const NodeLayout& layout = spec_.node;
  const std::uint32_t G = spec_.gpus_per_node;
  const std::uint32_t N = layout.nics_per_node;
  const std::uint32_t P = layout.pcie_switches;
  const std::uint32_t C = layout.cpus;
  const std::string prefix = "n" + str(n) + "/";
  std::vector<VertexIndex> gpus, pcie, cpus, nics;
  for (std::uint32_t i = 0; i < G; ++i) {
    gpus.push_back(add_vertex(prefix + "gpu" + str(i), VertexKind::kGpu, n, n * G + i));
  }
  if (layout.scale_up == ScaleUp::kNvSwitch && layout.nvlink_domain_nodes <= 1 && G > 1) {
    const VertexIndex sw = add_vertex(prefix + "nvswitch", VertexKind::kNvSwitch, n, kNone);
    for (VertexIndex g : gpus) {
      add_duplex(g, sw, LinkKind::kNvlink, spec_.nvlink_per_direction, spec_.nvlink_hop_latency, seconds(0));
    }
  }
  for (std::uint32_t k = 0; k < P; ++k)
    pcie.push_back(add_vertex(prefix + "pcie" + str(k), VertexKind::kPcieSwitch, n, kNone));
  for (std::uint32_t c = 0; c < C; ++c) cpus.push_back(add_vertex(prefix + "cpu" + str(c), VertexKind::kCpu, n, kNone));
  for (std::uint32_t j = 0; j < N; ++j) nics.push_back(add_vertex(prefix + "nic" + str(j), VertexKind::kNic, n, kNone));

  const BytesPerSecond pcie_bw = layout.pcie_per_direction;
  const BytesPerSecond nic_side = pcie_bw.raw() > 0 ? pcie_bw : spec_.nic_port_per_direction();
  const Seconds zero = seconds(0);
  if (P > 0) {
    for (std::uint32_t i = 0; i < G; ++i) add_duplex(gpus[i], pcie[i * P / G], LinkKind::kPcie, pcie_bw, zero, zero);
    for (std::uint32_t j = 0; j < N; ++j) add_duplex(nics[j], pcie[j * P / N], LinkKind::kPcie, pcie_bw, zero, zero);
    if (C > 0) {
      for (std::uint32_t k = 0; k < P; ++k) add_duplex(pcie[k], cpus[k * C / P], LinkKind::kPcie, pcie_bw, zero, zero);
    }
  } else {
    if (C > 0) {
      const bool c2c = layout.c2c_per_direction.raw() > 0;
      for (std::uint32_t i = 0; i < G; ++i) {
        add_duplex(gpus[i], cpus[i * C / G], c2c ? LinkKind::kCpuInterconnect : LinkKind::kPcie,
                   c2c ? layout.c2c_per_direction : pcie_bw, zero, zero);
      }
    }
    if (N > 0) {
      for (std::uint32_t i = 0; i < G; ++i) add_duplex(gpus[i], nics[i * N / G], LinkKind::kPcie, nic_side, zero, zero);
    }
  }
  if (layout.cpu_interconnect_per_direction.raw() > 0) {
    for (std::uint32_t a = 0; a < C; ++a) {
      for (std::uint32_t b = a + 1; b < C; ++b) {
        add_duplex(cpus[a], cpus[b], LinkKind::kCpuInterconnect, layout.cpu_interconnect_per_direction, zero, zero);
      }
    }
  }
  if (N > 0) {
    for (std::uint32_t i = 0; i < G; ++i) own_nic_[n * G + i] = nics[i * N / G];
  }
}

std::uint32_t torus_links_per_chip(const std::array<std::uint32_t, 3>& dims) {
  std::uint32_t links = 0;
  for (std::uint32_t d : dims) links += d > 2 ? 2 : (d == 2 ? 1 : 0);
  return links;
}

void Topology::build_torus() {
  const auto& dims = spec_.node.torus;
  const std::uint32_t links = torus_links_per_chip(dims);
  if (links == 0) return;
  const BytesPerSecond per_link = spec_.nvlink_per_direction / static_cast<double>(links);
  const std::uint32_t X = dims[0], Y = dims[1], Z = dims[2];
  for (std::uint32_t g = 0; g < gpu_count(); ++g) {
    const std::uint32_t c[3] = {g % X, (g / X) % Y, g / (X * Y)};
    for (int axis = 0; axis < 3; ++axis) {
      const std::uint32_t size = dims[axis];
      // The link to the next chip along the axis; the last chip's (back to chip 0) only where the axis is a ring.
      if (size < 2 || (size == 2 && c[axis] != 0)) continue;
      if (c[axis] + 1 == size && !axis_is_ring(size, spec_.node.torus_wraps)) continue;
      std::uint32_t n[3] = {c[0], c[1], c[2]};
      n[axis] = (c[axis] + 1) % size;
      const std::uint32_t h = n[0] + X * (n[1] + Y * n[2]);
      add_duplex(gpu_vertex_[g], gpu_vertex_[h], LinkKind::kIci, per_link, spec_.nvlink_hop_latency,
                 spec_.nvlink_hop_latency);
    }
  }
  (void)Z;
}

FabricPorts fabric_ports(const ClusterSpec& spec) {
  const FabricSpec& f = spec.fabric;
  const double b = spec.nic_port_per_direction().raw();
  const double B = f.link_per_direction.raw() > 0 ? f.link_per_direction.raw() : b;
  const double k = f.switch_radix;
  FabricPorts p;
  p.uplinks = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(std::floor(k * b / (b + f.oversubscription * B))));
  const double down = std::floor(f.oversubscription * p.uplinks * B / b + 1e-9);
  p.downlinks = static_cast<std::uint32_t>(std::max(0.0, std::min(k - p.uplinks, down)));
  return p;
}

bool has_fabric(const ClusterSpec& spec) {
  const NodeLayout& layout = spec.node;
  const std::uint32_t per_domain = layout.scale_up == ScaleUp::kTorus ? spec.nodes : layout.nvlink_domain_nodes;
  return ceil_div(spec.nodes, std::max<std::uint32_t>(per_domain, 1)) > 1 && layout.nics_per_node > 0;
}

std::uint32_t fabric_switches_between(const ClusterSpec& spec, const FabricShape& shape, std::uint32_t node_a,
                                      std::uint32_t node_b) {
  if (node_a == node_b) return 0;
  const std::uint32_t per_leaf =
      spec.fabric.kind == FabricKind::kRailOptimizedFatTree ? shape.ports.downlinks : shape.nodes_per_leaf;
  const std::uint32_t leaf_a = node_a / per_leaf, leaf_b = node_b / per_leaf;
  if (leaf_a == leaf_b) return 1;
  if (shape.pods > 1 && leaf_a / shape.leaves_per_pod != leaf_b / shape.leaves_per_pod) return 5;
  return 3;
}

FabricShape fabric_shape(const ClusterSpec& spec) {
  const FabricSpec& f = spec.fabric;
  const std::uint32_t k = f.switch_radix;
  const std::uint32_t N = spec.node.nics_per_node;
  FabricShape s;
  s.ports = fabric_ports(spec);
  if (s.ports.downlinks == 0) input_error("fabric.switch_radix", str(k) + " ports leave no downlink port on a leaf");
  if (f.kind == FabricKind::kRailOptimizedFatTree) {
    s.leaves_per_rail = ceil_div(spec.nodes, s.ports.downlinks);
    s.leaves = static_cast<std::uint32_t>(
        std::min<std::uint64_t>(std::uint64_t{N} * s.leaves_per_rail, std::numeric_limits<std::uint32_t>::max()));
  } else {
    s.nodes_per_leaf = s.ports.downlinks / N;
    if (s.nodes_per_leaf == 0) {
      input_error("fabric.switch_radix", "a leaf has " + str(s.ports.downlinks) + " downlink ports, fewer than the " +
                                             str(N) + " NICs of a node");
    }
    s.leaves = ceil_div(spec.nodes, s.nodes_per_leaf);
  }
  if (s.leaves <= 1) return s;
  if (f.kind != FabricKind::kClosThreeLevel) {
    if (s.leaves > k) {
      input_error("fabric.kind", str(s.leaves) + " leaves exceed the " + str(k) +
                                     " ports of a spine; a two-level tree of radix " + str(k) + " holds at most " +
                                     str(k) + " leaves (use CLOS_THREE_LEVEL)");
    }
    return s;
  }
  s.leaves_per_pod = std::min(std::max<std::uint32_t>(k / 2, 1), s.leaves);
  s.pods = ceil_div(s.leaves, s.leaves_per_pod);
  if (s.pods > k) input_error("fabric.kind", str(s.pods) + " pods exceed the " + str(k) + " ports of a core switch");
  return s;
}

void Topology::build_fabric(const FabricShape& shape) {
  const FabricSpec& f = spec_.fabric;
  const FabricPorts& ports = shape.ports;
  const std::uint32_t N = spec_.node.nics_per_node;
  const BytesPerSecond b = spec_.nic_port_per_direction();
  const BytesPerSecond B = f.link_per_direction.raw() > 0 ? f.link_per_direction : b;
  const Seconds sw = f.switch_latency;
  const Seconds nic_up = spec_.network_hop_latency + sw;
  const auto nic_of = [&](std::uint32_t node, std::uint32_t j) {
    return find_vertex("n" + str(node) + "/nic" + str(j));
  };
  std::vector<VertexIndex> leaves;
  if (f.kind == FabricKind::kRailOptimizedFatTree) {
    const std::uint32_t per_rail = shape.leaves_per_rail;
    for (std::uint32_t r = 0; r < N; ++r) {
      for (std::uint32_t i = 0; i < per_rail; ++i) {
        leaves.push_back(add_vertex("rail" + str(r) + "/leaf" + str(i), VertexKind::kLeaf, kNone, kNone));
      }
      for (std::uint32_t n = 0; n < spec_.nodes; ++n) {
        add_duplex(nic_of(n, r), leaves[r * per_rail + n / ports.downlinks], LinkKind::kNetwork, b, nic_up, seconds(0));
      }
    }
  } else {
    for (std::uint32_t i = 0; i < shape.leaves; ++i)
      leaves.push_back(add_vertex("leaf" + str(i), VertexKind::kLeaf, kNone, kNone));
    for (std::uint32_t n = 0; n < spec_.nodes; ++n) {
      for (std::uint32_t j = 0; j < N; ++j) {
        add_duplex(nic_of(n, j), leaves[n / shape.nodes_per_leaf], LinkKind::kNetwork, b, nic_up, seconds(0));
      }
    }
  }
  tiers_.push_back("leaf");
  const auto L = static_cast<std::uint32_t>(leaves.size());
  if (L <= 1) return;
  if (f.kind != FabricKind::kClosThreeLevel) {
    std::vector<VertexIndex> spines;
    for (std::uint32_t j = 0; j < ports.uplinks; ++j)
      spines.push_back(add_vertex("spine" + str(j), VertexKind::kSpine, kNone, kNone));
    for (VertexIndex leaf : leaves) {
      for (VertexIndex s : spines) add_duplex(leaf, s, LinkKind::kNetwork, B, sw, sw);
    }
    tiers_.push_back("spine");
    return;
  }
  const std::uint32_t c = shape.leaves_per_pod;
  const std::uint32_t pods = shape.pods;
  std::vector<std::vector<VertexIndex>> spines(pods);
  for (std::uint32_t p = 0; p < pods; ++p) {
    for (std::uint32_t j = 0; j < ports.uplinks; ++j) {
      spines[p].push_back(add_vertex("pod" + str(p) + "/spine" + str(j), VertexKind::kSpine, kNone, kNone));
    }
    for (std::uint32_t i = p * c; i < std::min(L, (p + 1) * c); ++i) {
      for (VertexIndex s : spines[p]) add_duplex(leaves[i], s, LinkKind::kNetwork, B, sw, sw);
    }
  }
  tiers_.push_back("spine");
  if (pods <= 1) return;
  std::vector<VertexIndex> cores;
  for (std::uint32_t i = 0; i < ports.uplinks * c; ++i)
    cores.push_back(add_vertex("core" + str(i), VertexKind::kCore, kNone, kNone));
  for (std::uint32_t p = 0; p < pods; ++p) {
    for (std::uint32_t j = 0; j < ports.uplinks; ++j) {
      for (std::uint32_t m = 0; m < c; ++m) add_duplex(spines[p][j], cores[j * c + m], LinkKind::kNetwork, B, sw, sw);
    }
  }
}

void Topology::build_explicit() {
  for (std::size_t i = 0; i < spec_.vertices.size(); ++i) {
    const VertexSpec& v = spec_.vertices[i];
    if (vertex_by_name_.count(v.name) != 0) {
      input_error("vertices[" + std::to_string(i) + "].name", "\"" + v.name + "\" is already a vertex");
    }
    add_vertex(v.name, v.kind, v.node.value_or(kNone), v.kind == VertexKind::kGpu ? v.gpu.value_or(kNone) : kNone);
  }
  for (std::size_t i = 0; i < gpu_vertex_.size(); ++i) {
    if (gpu_vertex_[i] == kNone) input_error("vertices", "no GPU vertex has gpu index " + std::to_string(i));
  }
  for (std::size_t i = 0; i < spec_.links.size(); ++i) {
    const LinkSpec& l = spec_.links[i];
    const std::string path = "links[" + std::to_string(i) + "]";
    const VertexIndex a = find_vertex(l.from);
    if (a == kNone) input_error(path + ".from", "no vertex \"" + l.from + "\"");
    const VertexIndex b = find_vertex(l.to);
    if (b == kNone) input_error(path + ".to", "no vertex \"" + l.to + "\"");
    if (a == b) input_error(path + ".to", "a link from \"" + l.from + "\" to itself");
    add_link(a, b, l.kind, l.bandwidth, l.latency);
    if (l.duplex) add_link(b, a, l.kind, l.bandwidth, l.latency);
  }
  own_nic_.assign(gpu_vertex_.size(), kNone);
}

void Topology::apply_faults() {
  // Each fault's factor is checked against 1e-6 where it is read; several on one link multiply, and their
  // product must stay above it too (60 factors of 1e-6 underflow to 0: a link that never delivers).
  std::vector<double> factor(link_count(), 1.0);
  for (std::size_t i = 0; i < spec_.link_faults.size(); ++i) {
    const LinkFault& fault = spec_.link_faults[i];
    const std::string path = "link_faults[" + std::to_string(i) + "]";
    std::vector<LinkIndex> selected;
    if (!fault.pattern.empty()) {
      for (LinkIndex l = 0; l < link_count(); ++l) {
        if (glob_match(fault.pattern, graph_[edges_[l]].name)) selected.push_back(l);
      }
      if (selected.empty()) input_error(path + ".pattern", "\"" + fault.pattern + "\" matches no link");
    } else {
      const VertexIndex a = find_vertex(fault.from);
      if (a == kNone) input_error(path + ".from", "no vertex \"" + fault.from + "\"");
      const VertexIndex b = find_vertex(fault.to);
      if (b == kNone) input_error(path + ".to", "no vertex \"" + fault.to + "\"");
      for (const auto& [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
        for (auto [e, end] = boost::out_edges(x, graph_); e != end; ++e) {
          if (boost::target(*e, graph_) == y) selected.push_back(graph_[*e].index);
        }
      }
      if (selected.empty()) input_error(path, "no link between \"" + fault.from + "\" and \"" + fault.to + "\"");
    }
    for (LinkIndex l : selected) {
      LinkProps& p = graph_[edges_[l]];
      if (fault.down) {
        p.up = false;
      } else {
        p.bandwidth = p.bandwidth * fault.bandwidth_factor;
        factor[l] *= fault.bandwidth_factor;
        if (factor[l] < 1e-6) {
          char product[32];
          std::snprintf(product, sizeof product, "%.3g", factor[l]);
          input_error(path + ".bandwidth_factor",
                      "with the faults before it, link " + p.name + " runs at " + product +
                          " of its bandwidth, below 1e-6: a link that slow is down for any training step (use "
                          "down: true)");
        }
      }
    }
  }
}

void Topology::compute_domains() {
  // Union-find over NVLink and ICI links (whatever their state: a domain is a wiring fact).
  std::vector<VertexIndex> parent(vertex_count());
  std::iota(parent.begin(), parent.end(), VertexIndex{0});
  const auto find = [&](VertexIndex v) {
    while (parent[v] != v) v = parent[v] = parent[parent[v]];
    return v;
  };
  for (const auto& e : edges_) {
    const LinkKind kind = graph_[e].kind;
    if (kind != LinkKind::kNvlink && kind != LinkKind::kIci) continue;
    const VertexIndex a = find(static_cast<VertexIndex>(boost::source(e, graph_)));
    const VertexIndex b = find(static_cast<VertexIndex>(boost::target(e, graph_)));
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
  std::unordered_map<VertexIndex, std::uint32_t> ids;
  domain_.resize(gpu_count());
  for (std::uint32_t g = 0; g < gpu_count(); ++g) {
    const VertexIndex root = find(gpu_vertex_[g]);
    domain_[g] = ids.emplace(root, static_cast<std::uint32_t>(ids.size())).first->second;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Accessors

LinkInfo Topology::link(LinkIndex i) const {
  const auto& e = edges_.at(i);
  const LinkProps& p = graph_[e];
  return LinkInfo{static_cast<VertexIndex>(boost::source(e, graph_)),
                  static_cast<VertexIndex>(boost::target(e, graph_)),
                  p.kind,
                  p.bandwidth,
                  p.latency,
                  p.name,
                  p.up};
}

VertexIndex Topology::find_vertex(std::string_view name) const {
  const auto it = vertex_by_name_.find(std::string(name));
  return it == vertex_by_name_.end() ? kNone : it->second;
}

LinkIndex Topology::find_link(std::string_view name) const {
  const std::size_t arrow = name.find("->");
  if (arrow == std::string_view::npos) return kNone;
  const VertexIndex from = find_vertex(name.substr(0, arrow));
  if (from == kNone) return kNone;
  for (auto [e, end] = boost::out_edges(from, graph_); e != end; ++e) {
    if (graph_[*e].name == name) return graph_[*e].index;
  }
  return kNone;
}

Seconds Topology::latency(std::span<const LinkIndex> path) const {
  Seconds total = seconds(0);
  for (LinkIndex l : path) total += graph_[edges_.at(l)].latency;
  return total;
}

// ---------------------------------------------------------------------------------------------------------
// Routing

// Index of v in the distance array of (target, scope); kNone when v is outside the scope.
std::uint32_t Topology::slot(VertexIndex v, VertexIndex target, Scope scope) const {
  switch (scope) {
    case Scope::kAny:
      return v;
    case Scope::kFabric:
      return fabric_slot_[v];
    case Scope::kNode:
    case Scope::kDomain: {
      const Range r = scope_range(target, scope);
      return v >= r.begin && v < r.end ? v - r.begin : kNone;
    }
  }
  return kNone;
}

Topology::Range Topology::scope_range(VertexIndex target, Scope scope) const {
  if (scope == Scope::kNode) return node_range_.at(graph_[target].node);
  return domain_range_.at(group_.at(graph_[target].gpu));
}

std::uint32_t Topology::slot_count(VertexIndex target, Scope scope) const {
  switch (scope) {
    case Scope::kAny:
      return vertex_count();
    case Scope::kFabric:
      return fabric_slots_;
    case Scope::kNode:
    case Scope::kDomain: {
      const Range r = scope_range(target, scope);
      return r.end - r.begin;
    }
  }
  return 0;
}

VertexIndex Topology::fabric_parent(VertexIndex nic) const {
  // The one fabric-scope vertex a link up arrives at the NIC from, when it is the only fabric-scope in-link and a
  // switch (an explicit cluster may cable two NICs back to back: each the other's only one, and distances() would
  // derive each from the other for ever).
  VertexIndex only = kNone;
  std::uint32_t in_scope = 0;
  for (auto [e, end] = boost::in_edges(nic, graph_); e != end; ++e) {
    const auto u = static_cast<VertexIndex>(boost::source(*e, graph_));
    if (fabric_slot_[u] == kNone) continue;
    ++in_scope;
    if (graph_[*e].up) only = u;
  }
  return in_scope == 1 && only != kNone && is_fabric_switch(graph_[only].kind) ? only : kNone;
}

const std::vector<std::uint16_t>& Topology::distances(VertexIndex target, Scope scope) const {
  const std::uint64_t key = (std::uint64_t{target} << 2) | static_cast<std::uint64_t>(scope);
  auto& entry = distance_cache_[key];
  if (entry) return *entry;
  if (scope == Scope::kFabric && graph_[target].kind == VertexKind::kNic) {
    // A NIC reached only from its leaf: distances to the NIC are the leaf's plus one, so the many NICs of a
    // leaf share one BFS (the cache still keeps one array per NIC).
    const VertexIndex only = fabric_parent(target);
    if (only != kNone) {
      std::vector<std::uint16_t> derived = distances(only, scope);  // a copy: the cache may rehash below
      for (std::uint16_t& d : derived) d = d == kUnreachable ? kUnreachable : static_cast<std::uint16_t>(d + 1);
      derived[fabric_slot_[target]] = 0;
      auto& slot_entry = distance_cache_[key];
      slot_entry = std::make_unique<std::vector<std::uint16_t>>(std::move(derived));
      return *slot_entry;
    }
  }
  entry = std::make_unique<std::vector<std::uint16_t>>(slot_count(target, scope), kUnreachable);
  std::vector<std::uint16_t>& dist = *entry;
  std::deque<VertexIndex> queue{target};
  dist[slot(target, target, scope)] = 0;
  while (!queue.empty()) {
    const VertexIndex v = queue.front();
    queue.pop_front();
    if (v != target && !graph_[v].forwards) continue;  // reached as a source, never passed through
    const std::uint16_t next = static_cast<std::uint16_t>(dist[slot(v, target, scope)] + 1);
    for (auto [e, end] = boost::in_edges(v, graph_); e != end; ++e) {
      if (!graph_[*e].up) continue;
      const auto u = static_cast<VertexIndex>(boost::source(*e, graph_));
      const std::uint32_t su = slot(u, target, scope);
      if (su == kNone || dist[su] != kUnreachable) continue;
      dist[su] = next;
      queue.push_back(u);
    }
  }
  return dist;
}

std::uint32_t Topology::distance(VertexIndex from, VertexIndex target, Scope scope) const {
  const std::uint32_t s = slot(from, target, scope);
  if (s == kNone) return kNone;
  const std::uint16_t d = distances(target, scope)[s];
  return d == kUnreachable ? kNone : d;
}

void Topology::next_links(VertexIndex u, VertexIndex target, Scope scope, const std::vector<std::uint16_t>& dist,
                          std::vector<LinkIndex>& candidates) const {
  const std::uint16_t du = dist[slot(u, target, scope)];
  assert(du != kUnreachable && du > 0);
  candidates.clear();
  int best = std::numeric_limits<int>::max();
  for (auto [e, end] = boost::out_edges(u, graph_); e != end; ++e) {
    const LinkProps& p = graph_[*e];
    if (!p.up) continue;
    const auto v = static_cast<VertexIndex>(boost::target(*e, graph_));
    const std::uint32_t sv = slot(v, target, scope);
    if (sv == kNone || dist[sv] != du - 1 || (v != target && !graph_[v].forwards)) continue;
    const int rank = preference(p.kind);
    if (rank < best) {
      best = rank;
      candidates.clear();
    }
    if (rank == best) candidates.push_back(p.index);
  }
  assert(!candidates.empty());
}

void Topology::walk(VertexIndex from, VertexIndex target, Scope scope, std::uint64_t seed,
                    std::vector<LinkIndex>& out) const {
  const std::vector<std::uint16_t>& dist = distances(target, scope);
  std::vector<LinkIndex> candidates;
  // Adaptive routing's one representative path (latencies, hop counts) is the D-mod-k one.
  const bool by_destination = spec_.fabric.routing != FabricRouting::kEcmpHash;
  std::uint64_t divisor = 1;  // D-mod-k: the product of the port counts already chosen among
  VertexIndex u = from;
  while (u != target) {
    next_links(u, target, scope, dist, candidates);
    std::size_t pick = 0;
    if (candidates.size() > 1 && by_destination && is_fabric_switch(graph_[u].kind)) {
      pick = (destination_key_[target] / divisor) % candidates.size();
      if (divisor < (std::uint64_t{1} << 32)) divisor *= candidates.size();
    } else if (candidates.size() > 1) {
      pick = hash_pick(seed, u, candidates.size());
    }
    const LinkIndex chosen = candidates[pick];
    out.push_back(chosen);
    u = static_cast<VertexIndex>(boost::target(edges_[chosen], graph_));
  }
}

void Topology::walk_spread(VertexIndex from, VertexIndex target, Scope scope, std::uint64_t seed,
                           std::vector<SpreadLink>& out) const {
  // Up to the first fabric switch the flow is not split: each vertex picks one link as walk() does. From there
  // the spread depends on (switch, target, scope) only, and is cached: an AlltoAll's pairs share a few hundred
  // (leaf, NIC) spreads instead of one per pair.
  const std::vector<std::uint16_t>& dist = distances(target, scope);
  std::vector<LinkIndex> candidates;
  VertexIndex u = from;
  while (u != target && !is_fabric_switch(graph_[u].kind)) {
    next_links(u, target, scope, dist, candidates);
    const std::size_t n = candidates.size();
    const std::size_t pick = hash_pick(seed, u, n);
    out.push_back({candidates[pick], 1.0});
    u = static_cast<VertexIndex>(boost::target(edges_[candidates[pick]], graph_));
  }
  if (u == target) return;
  const RouteKey key{u, target, static_cast<std::uint64_t>(scope)};
  auto it = spread_cache_.find(key);
  if (it == spread_cache_.end()) it = spread_cache_.emplace(key, spread_from(u, target, scope)).first;
  out.insert(out.end(), it->second.begin(), it->second.end());
}

std::vector<SpreadLink> Topology::spread_from(VertexIndex from, VertexIndex target, Scope scope) const {
  // Hop by hop over the vertices the flow has reached, with the share of it that reaches each: all are at the
  // same distance from the target, so the walk ends when the one vertex left is the target. A fabric switch
  // with n > 1 next links sends 1/n of its share over each; any other vertex picks one link by a hash of itself
  // and the target.
  const std::vector<std::uint16_t>& dist = distances(target, scope);
  const std::uint64_t seed = mix(std::uint64_t{target} << 8 | static_cast<std::uint64_t>(scope));
  std::vector<SpreadLink> out;
  std::vector<LinkIndex> candidates;
  std::vector<std::pair<VertexIndex, double>> here{{from, 1.0}}, next;
  std::vector<SpreadLink> step;
  while (here.size() > 1 || here.front().first != target) {
    step.clear();
    for (const auto& [u, share] : here) {
      next_links(u, target, scope, dist, candidates);
      const std::size_t n = candidates.size();
      if (n > 1 && is_fabric_switch(graph_[u].kind)) {
        for (LinkIndex l : candidates) step.push_back({l, share / static_cast<double>(n)});
      } else {
        const std::size_t pick = hash_pick(seed, u, n);
        step.push_back({candidates[pick], share});
      }
    }
    // Each link leaves one vertex, so no link appears twice in a step; vertices reached by several links
    // gather their shares (in link order, so the sums are the same on every run).
    std::sort(step.begin(), step.end(), [](const SpreadLink& a, const SpreadLink& b) { return a.link < b.link; });
    next.clear();
    for (const SpreadLink& s : step) {
      out.push_back(s);
      next.emplace_back(static_cast<VertexIndex>(boost::target(edges_[s.link], graph_)), s.share);
    }
    std::stable_sort(next.begin(), next.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    here.clear();
    for (const auto& [v, share] : next) {
      if (!here.empty() && here.back().first == v) {
        here.back().second += share;
      } else {
        here.emplace_back(v, share);
      }
    }
  }
  return out;
}

bool Topology::use_rails(std::uint32_t src, std::uint32_t dst) const {
  return !spec_.is_explicit() && group_[src] != group_[dst] && own_nic_[src] != kNone && own_nic_[dst] != kNone;
}

void Topology::throw_no_route(std::uint32_t src, std::uint32_t dst) const {
  throw NoRouteError("no route from GPU " + str(src) + " (" + graph_[gpu_vertex_[src]].name + ") to GPU " + str(dst) +
                     " (" + graph_[gpu_vertex_[dst]].name + "): every path has a link down");
}

std::uint32_t Topology::route_hops(std::uint32_t src, std::uint32_t dst) const {
  if (src == dst) return 0;
  const VertexIndex s = gpu_vertex_.at(src);
  const VertexIndex t = gpu_vertex_.at(dst);
  if (use_rails(src, dst)) {
    const VertexIndex ns = own_nic_[src], nd = own_nic_[dst];
    const std::uint32_t a = distance(s, ns, Scope::kNode);
    const std::uint32_t b = a == kNone ? kNone : distance(ns, nd, Scope::kFabric);
    const std::uint32_t c = b == kNone ? kNone : distance(nd, t, Scope::kNode);
    if (c != kNone) return a + b + c;
  } else if (!spec_.is_explicit() && group_[src] == group_[dst]) {
    const std::uint32_t d = distance(s, t, Scope::kDomain);
    if (d != kNone) return d;
  }
  if (explicit_rails(src, dst)) {
    const VertexIndex ns = own_nic_[src], nd = own_nic_[dst];
    return distance(s, ns, Scope::kAny) + distance(ns, nd, Scope::kFabric) + distance(nd, t, Scope::kAny);
  }
  return distance(s, t, Scope::kAny);
}

void Topology::check_gpus(std::uint32_t src, std::uint32_t dst) const {
  if (src >= gpu_count() || dst >= gpu_count()) {
    throw std::out_of_range("route: GPU " + str(std::max(src, dst)) + " of " + str(gpu_count()));
  }
}

std::size_t Topology::legs(std::uint32_t src, std::uint32_t dst, std::array<Leg, 3>& out) const {
  const VertexIndex s = gpu_vertex_[src];
  const VertexIndex t = gpu_vertex_[dst];
  if (use_rails(src, dst)) {
    const VertexIndex ns = own_nic_[src], nd = own_nic_[dst];
    if (distance(s, ns, Scope::kNode) != kNone && distance(ns, nd, Scope::kFabric) != kNone &&
        distance(nd, t, Scope::kNode) != kNone) {
      out = {Leg{s, ns, Scope::kNode}, Leg{ns, nd, Scope::kFabric}, Leg{nd, t, Scope::kNode}};
      return 3;
    }
  } else if (!spec_.is_explicit() && group_[src] == group_[dst] && distance(s, t, Scope::kDomain) != kNone) {
    out[0] = Leg{s, t, Scope::kDomain};
    return 1;
  } else if (explicit_rails(src, dst)) {
    out = {Leg{s, own_nic_[src], Scope::kAny}, Leg{own_nic_[src], own_nic_[dst], Scope::kFabric},
           Leg{own_nic_[dst], t, Scope::kAny}};
    return 3;
  }
  if (distance(s, t, Scope::kAny) == kNone) throw_no_route(src, dst);
  out[0] = Leg{s, t, Scope::kAny};
  return 1;
}

std::span<const LinkIndex> Topology::route(std::uint32_t src, std::uint32_t dst, std::uint64_t flow_key) const {
  check_gpus(src, dst);
  if (src == dst) return {};
  const RouteKey key{src, dst, flow_key};
  if (const auto it = route_cache_.find(key); it != route_cache_.end()) return it->second;
  std::array<Leg, 3> leg;
  const std::size_t n = legs(src, dst, leg);
  std::vector<LinkIndex> path;
  const std::uint64_t seed = mix(mix((std::uint64_t{src} << 32) | dst) ^ mix(flow_key));
  for (std::size_t i = 0; i < n; ++i) walk(leg[i].from, leg[i].target, leg[i].scope, seed, path);
  return route_cache_.emplace(key, std::move(path)).first->second;
}

std::vector<SpreadLink> Topology::spread(std::uint32_t src, std::uint32_t dst, std::uint64_t flow_key) const {
  check_gpus(src, dst);
  std::vector<SpreadLink> links;
  if (src == dst) return links;
  if (spec_.fabric.routing == FabricRouting::kAdaptive) {
    std::array<Leg, 3> leg;
    const std::size_t n = legs(src, dst, leg);
    const std::uint64_t seed = mix(mix((std::uint64_t{src} << 32) | dst) ^ mix(flow_key));
    for (std::size_t i = 0; i < n; ++i) walk_spread(leg[i].from, leg[i].target, leg[i].scope, seed, links);
  } else {
    for (LinkIndex l : route(src, dst, flow_key)) links.push_back({l, 1.0});
  }
  return links;
}

// ---------------------------------------------------------------------------------------------------------
// Figures

BytesPerSecond Topology::bisection_bandwidth() const {
  const std::uint32_t G = gpu_count();
  if (G < 2) return bytes_per_second(0);
  if (spec_.is_torus()) {
    // A torus: the least of the cuts across each axis of 2 or more chips (chips with coordinate < D/2 on one
    // side). Chip index order halves the last axis longer than 1 only, which for a 4x4x8 and an 8x4x4 slice
    // gives 1600 and 3200 GB/s; across the 8-long axis both give 1600.
    const TorusDims& dims = spec_.node.torus;
    BytesPerSecond least = bytes_per_second(0);
    bool any = false;
    for (int axis = 0; axis < 3; ++axis) {
      const std::uint32_t D = dims[static_cast<std::size_t>(axis)];
      if (D < 2) continue;
      const BytesPerSecond b = max_flow_between(
          [&](std::uint32_t g) { return torus_coords(dims, g)[static_cast<std::size_t>(axis)] < D / 2; });
      if (!any || b < least) least = b;
      any = true;
    }
    if (any) return least;
  }
  return max_flow_between([G](std::uint32_t g) { return g < G / 2; });
}

BytesPerSecond Topology::max_flow_between(const std::function<bool(std::uint32_t)>& first_half) const {
  const std::uint32_t G = gpu_count();
  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  using FlowGraph = boost::adjacency_list<
      boost::vecS, boost::vecS, boost::directedS, boost::no_property,
      boost::property<boost::edge_capacity_t, long long,
                      boost::property<boost::edge_residual_capacity_t, long long,
                                      boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
  const std::uint32_t V = vertex_count();
  FlowGraph flow(V + 2);
  auto capacity = boost::get(boost::edge_capacity, flow);
  auto reverse = boost::get(boost::edge_reverse, flow);
  const auto add = [&](std::uint32_t a, std::uint32_t b, long long cap) {
    const auto e = boost::add_edge(a, b, flow).first;
    const auto r = boost::add_edge(b, a, flow).first;
    capacity[e] = cap;
    capacity[r] = 0;
    reverse[e] = r;
    reverse[r] = e;
  };
  const auto half_of = [&](VertexIndex v) -> int {  // 0 first half, 1 second, -1 forwarding vertex
    const VertexProps& p = graph_[v];
    if (p.kind != VertexKind::kGpu || p.forwards) return -1;
    return first_half(p.gpu) ? 0 : 1;
  };
  // Capacities are whole B/s, unless the links' sum would come near the 64-bit integers' 9.2e18: then whole
  // multiples of a unit that keeps the sum under 2^61 (a million 1e15 B/s links needs units of 1e3 B/s). The
  // source and sink edges take the sum + 1, so it must fit with room to spare.
  double sum = 0;
  for (const auto& e : edges_)
    if (graph_[e].up) sum += graph_[e].bandwidth.raw();
  const double unit = std::max(1.0, std::ldexp(sum, -61));
  long long total = 0;
  for (const auto& e : edges_) {
    const LinkProps& p = graph_[e];
    if (!p.up) continue;
    const auto a = static_cast<VertexIndex>(boost::source(e, graph_));
    const auto b = static_cast<VertexIndex>(boost::target(e, graph_));
    if (half_of(a) == 1 || half_of(b) == 0) continue;  // GPUs only send (first half) or receive (second)
    const long long cap = std::llround(p.bandwidth.raw() / unit);
    total += cap;
    add(a, b, cap);
  }
  const std::uint32_t source = V, sink = V + 1;
  for (std::uint32_t g = 0; g < G; ++g) {
    if (first_half(g)) {
      add(source, gpu_vertex_[g], total + 1);
    } else {
      add(gpu_vertex_[g], sink, total + 1);
    }
  }
  const long long value = boost::push_relabel_max_flow(flow, source, sink);
  return bytes_per_second(static_cast<double>(value) * unit);
}

std::uint32_t Topology::diameter_hops() const {
  // The longest route_hops() over every ordered pair, without visiting each pair where the rails decide. A pair
  // on the rails (use_rails) takes (src GPU -> its NIC) + (NIC -> NIC through the fabric) + (NIC -> dst GPU)
  // hops when all three legs exist; every other pair takes route_hops() itself. The fabric leg to a NIC whose
  // only fabric link comes from its leaf is the leaf's distance + 1 (as distances() derives it), so for all
  // destinations under one leaf the farthest rail source is one maximum over the NICs: the largest
  // (src -> NIC) + (NIC -> leaf) per NIC, taken from a group other than the destination's (the best two groups
  // are kept). Pairs whose fabric leg does not exist go to route_hops() one by one. Work: one BFS and one pass
  // over the NICs per leaf, and G x (group size) pairs, where every pair was visited before (1e9 at 32,768 GPUs).
  // The BFS per leaf walks a compact copy of the fabric scope's up links (below), not the graph's edge lists: the
  // same distances as distances(), 2,048 BFS of about 400k links each at 65,536 GPUs.
  const std::uint32_t G = gpu_count();
  std::uint32_t longest = 0;
  const auto visit = [&](std::uint32_t s, std::uint32_t d) {
    const std::uint32_t h = route_hops(s, d);
    if (h == kNone) throw_no_route(s, d);
    longest = std::max(longest, h);
  };
  std::vector<std::uint32_t> to_nic(G, kNone), from_nic(G, kNone);
  for (std::uint32_t g = 0; g < G; ++g) {
    if (own_nic_[g] == kNone || spec_.is_explicit()) continue;
    to_nic[g] = distance(gpu_vertex_[g], own_nic_[g], Scope::kNode);
    from_nic[g] = distance(own_nic_[g], gpu_vertex_[g], Scope::kNode);
  }
  // A NIC serving GPUs of two groups (none is built so) is left to route_hops(), as source and as destination.
  std::map<VertexIndex, std::uint32_t> nic_group;
  std::set<VertexIndex> shared_nics;
  for (std::uint32_t g = 0; g < G; ++g) {
    if (spec_.is_explicit() || own_nic_[g] == kNone) continue;
    const auto [it, added] = nic_group.emplace(own_nic_[g], group_[g]);
    if (!added && it->second != group_[g]) shared_nics.insert(own_nic_[g]);
  }
  const auto on_rails = [&](std::uint32_t g) {
    return !spec_.is_explicit() && own_nic_[g] != kNone && !shared_nics.contains(own_nic_[g]);
  };
  // Sources: those that reach their own NIC, by NIC (the largest first leg); the others pair by pair.
  struct NicSources {
    VertexIndex nic = kNone;
    std::uint32_t group = 0;
    std::uint32_t first_leg = 0;  // the largest (src GPU -> NIC) of the NIC's GPUs
    std::vector<std::uint32_t> gpus;
  };
  std::vector<NicSources> nics;
  std::map<VertexIndex, std::size_t> nic_index;
  std::vector<std::uint32_t> odd_sources;
  std::map<std::uint32_t, std::vector<std::uint32_t>> by_group;
  for (std::uint32_t s = 0; s < G; ++s) {
    if (!spec_.is_explicit()) by_group[group_[s]].push_back(s);
    if (!on_rails(s) || to_nic[s] == kNone) {
      odd_sources.push_back(s);
      continue;
    }
    const auto [it, added] = nic_index.emplace(own_nic_[s], nics.size());
    if (added) nics.push_back({own_nic_[s], group_[s], 0, {}});
    nics[it->second].first_leg = std::max(nics[it->second].first_leg, to_nic[s]);
    nics[it->second].gpus.push_back(s);
  }
  // Destinations on the rails, by the array their NIC's fabric distances are: (origin, offset) = (its leaf, 1)
  // or (itself, 0). The others pair with every source.
  std::map<std::pair<VertexIndex, std::uint32_t>, std::vector<std::uint32_t>> by_origin;
  for (std::uint32_t d = 0; d < G; ++d) {
    if (!on_rails(d) || from_nic[d] == kNone) {
      for (std::uint32_t s = 0; s < G; ++s) visit(s, d);
      continue;
    }
    const VertexIndex parent = fabric_parent(own_nic_[d]);
    by_origin[parent == kNone ? std::pair{own_nic_[d], 0u} : std::pair{parent, 1u}].push_back(d);
  }
  // Row s: the fabric slots u with an up link u -> (slot s); forwards[s]: may be passed through. The BFS is
  // distances()'s for Scope::kFabric, without its cache (each leaf's array is used once).
  std::vector<std::uint32_t> row_start(std::size_t{fabric_slots_} + 1, 0), row_from;
  std::vector<std::uint8_t> slot_forwards(fabric_slots_, 0);
  for (VertexIndex v = 0; v < vertex_count(); ++v) {
    const std::uint32_t sv = fabric_slot_[v];
    if (sv == kNone) continue;
    slot_forwards[sv] = graph_[v].forwards ? 1 : 0;
    for (auto [e, end] = boost::in_edges(v, graph_); e != end; ++e)
      if (graph_[*e].up && fabric_slot_[boost::source(*e, graph_)] != kNone) ++row_start[sv + 1];
  }
  std::partial_sum(row_start.begin(), row_start.end(), row_start.begin());
  row_from.resize(row_start.back());
  {
    std::vector<std::uint32_t> fill(row_start.begin(), row_start.end() - 1);
    for (VertexIndex v = 0; v < vertex_count(); ++v) {
      const std::uint32_t sv = fabric_slot_[v];
      if (sv == kNone) continue;
      for (auto [e, end] = boost::in_edges(v, graph_); e != end; ++e) {
        if (!graph_[*e].up) continue;
        const std::uint32_t su = fabric_slot_[boost::source(*e, graph_)];
        if (su != kNone) row_from[fill[sv]++] = su;
      }
    }
  }
  std::vector<std::uint16_t> fabric(fabric_slots_);
  std::vector<std::uint32_t> queue(fabric_slots_);
  const auto fabric_bfs = [&](VertexIndex target) {
    std::fill(fabric.begin(), fabric.end(), kUnreachable);
    const std::uint32_t st = fabric_slot_[target];
    std::size_t head = 0, tail = 0;
    fabric[st] = 0;
    queue[tail++] = st;
    while (head < tail) {
      const std::uint32_t sv = queue[head++];
      if (sv != st && !slot_forwards[sv]) continue;  // reached as a source, never passed through
      const auto next = static_cast<std::uint16_t>(fabric[sv] + 1);
      for (std::uint32_t i = row_start[sv]; i < row_start[sv + 1]; ++i) {
        const std::uint32_t su = row_from[i];
        if (fabric[su] != kUnreachable) continue;
        fabric[su] = next;
        queue[tail++] = su;
      }
    }
  };
  for (const auto& [key, destinations] : by_origin) {
    const auto [origin, offset] = key;
    fabric_bfs(origin);
    // The best two (first leg + fabric leg to the origin) of distinct groups, and the NICs with no fabric leg.
    // With offset 0 the origin is the destinations' own NIC: its slot (0) stands for no fabric leg, and its
    // GPUs are of the destinations' group, which the rail maximum leaves out.
    std::uint32_t best[2] = {kNone, kNone}, best_group[2] = {0, 0};
    std::vector<std::size_t> unreachable;
    for (std::size_t i = 0; i < nics.size(); ++i) {
      const NicSources& n = nics[i];
      const std::uint16_t b = fabric[fabric_slot_[n.nic]];
      if (b == kUnreachable) {
        unreachable.push_back(i);
        continue;
      }
      const std::uint32_t v = n.first_leg + b;
      if (best[0] == kNone || v > best[0]) {
        if (best[0] != kNone && n.group != best_group[0]) {
          best[1] = best[0];
          best_group[1] = best_group[0];
        }
        best[0] = v;
        best_group[0] = n.group;
      } else if (n.group != best_group[0] && (best[1] == kNone || v > best[1])) {
        best[1] = v;
        best_group[1] = n.group;
      }
    }
    for (const std::uint32_t d : destinations) {
      for (const std::uint32_t s : by_group[group_[d]]) visit(s, d);
      for (const std::uint32_t s : odd_sources)
        if (group_[s] != group_[d]) visit(s, d);
      for (const std::size_t i : unreachable)
        if (nics[i].group != group_[d])
          for (const std::uint32_t s : nics[i].gpus) visit(s, d);
      const std::uint32_t rail = best_group[0] != group_[d] ? best[0] : best[1];
      if (rail != kNone) longest = std::max(longest, rail + offset + from_nic[d]);
    }
  }
  return longest;
}

TopologyStats Topology::stats() const {
  TopologyStats s;
  s.gpus = gpu_count();
  for (VertexIndex v = 0; v < vertex_count(); ++v) ++s.vertices[graph_[v].kind];
  for (const auto& e : edges_) {
    const LinkProps& p = graph_[e];
    LinkKindStats& k = s.links[p.kind];
    ++k.count;
    if (p.up) k.total += p.bandwidth;
  }
  std::map<std::uint32_t, std::uint32_t> domain_sizes;
  for (std::uint32_t d : domain_) ++domain_sizes[d];
  s.nvlink_domains = static_cast<std::uint32_t>(domain_sizes.size());
  for (const auto& [d, n] : domain_sizes) s.nvlink_domain_size = std::max(s.nvlink_domain_size, n);
  s.bisection = bisection_bandwidth();
  // Per tier, the worst switch's downlink bandwidth (links arriving from the tier below) over its uplink bandwidth
  // (links going to the tier above), as the graph is built: with the NICs actually attached.
  const auto level = [](VertexKind k) {
    switch (k) {
      case VertexKind::kNic:
        return 0;
      case VertexKind::kLeaf:
        return 1;
      case VertexKind::kSpine:
        return 2;
      case VertexKind::kCore:
        return 3;
      default:
        return -1;
    }
  };
  std::vector<TierOversubscription> built;
  for (VertexKind tier : {VertexKind::kLeaf, VertexKind::kSpine}) {
    double worst = 0;
    bool any = false;
    for (VertexIndex v = 0; v < vertex_count(); ++v) {
      if (graph_[v].kind != tier) continue;
      double down = 0, up = 0;
      for (auto [e, end] = boost::in_edges(v, graph_); e != end; ++e) {
        if (level(graph_[boost::source(*e, graph_)].kind) == level(tier) - 1) down += graph_[*e].bandwidth.raw();
      }
      for (auto [e, end] = boost::out_edges(v, graph_); e != end; ++e) {
        if (level(graph_[boost::target(*e, graph_)].kind) == level(tier) + 1) up += graph_[*e].bandwidth.raw();
      }
      if (up > 0) {
        worst = std::max(worst, down / up);
        any = true;
      }
    }
    if (any) built.push_back({to_string(tier), worst});
  }
  if (!spec_.is_explicit()) {
    // Generated fabrics: the ratio as provisioned (the ports of a full leaf), then as built where it differs (a
    // partially filled leaf, or a small cluster's leaf with fewer uplinks, carries another ratio).
    if (!tiers_.empty()) {
      const FabricPorts ports = fabric_ports(spec_);
      const double b = spec_.nic_port_per_direction().raw();
      const double B = spec_.fabric.link_per_direction.raw() > 0 ? spec_.fabric.link_per_direction.raw() : b;
      const double provisioned = ports.downlinks * b / (ports.uplinks * B);
      s.oversubscription.push_back({"leaf", provisioned});
      const bool uplinks = std::any_of(built.begin(), built.end(), [](const auto& o) { return o.tier == "leaf"; });
      for (const auto& o : built)
        if (o.tier == "leaf" && std::fabs(o.ratio - provisioned) > 1e-9 * provisioned)
          s.oversubscription.push_back({"leaf as built (worst leaf, NICs attached)", o.ratio});
      // One leaf holds every NIC: the fabric has no spine, and no byte crosses an uplink (ratio 0: none).
      if (!uplinks) s.oversubscription.push_back({"leaf as built (one leaf holds every NIC, no uplinks)", 0.0});
      if (tiers_.size() > 1 && spec_.fabric.kind == FabricKind::kClosThreeLevel) {
        s.oversubscription.push_back({"spine", 1.0});  // as many core uplinks as leaves below, same speed
      }
    }
  } else {
    s.oversubscription = built;
  }
  s.diameter_hops = diameter_hops();
  return s;
}

void Topology::write_graphviz(std::ostream& out) const {
  const auto vertex_writer = [this](std::ostream& o, Graph::vertex_descriptor v) {
    const VertexProps& p = graph_[v];
    const char* shape = p.kind == VertexKind::kGpu ? "box" : (p.kind == VertexKind::kNic ? "ellipse" : "diamond");
    o << "[label=\"" << p.name << "\\n"
      << to_string(p.kind) << "\" kind=\"" << to_string(p.kind) << "\" shape=" << shape << "]";
  };
  const auto edge_writer = [this](std::ostream& o, Graph::edge_descriptor e) {
    const LinkProps& p = graph_[e];
    o << "[label=\"" << to_string(p.kind) << " " << to_GBps(p.bandwidth) << " GB/s\" kind=\"" << to_string(p.kind)
      << "\"" << (p.up ? "" : " style=dashed") << "]";
  };
  boost::write_graphviz(out, graph_, vertex_writer, edge_writer, boost::default_writer());
}

}  // namespace clustersim::topology
