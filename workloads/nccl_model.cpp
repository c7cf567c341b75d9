#include "workloads/nccl_model.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "sim/input_error.h"
#include "topology/communicator_span.h"
#include "topology/topology.h"
#include "topology/torus.h"

namespace clustersim::workloads {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  out.erase(std::remove(out.begin(), out.end(), '_'), out.end());
  return out;
}

constexpr double kInf = std::numeric_limits<double>::infinity();
int proto_index(Protocol p) {
  return p == Protocol::kLL ? 0 : p == Protocol::kLL128 ? 1 : 2;
}

// Everything about where a communicator sits that the models need.
struct Shape {
  std::uint32_t n = 0;        // ranks
  std::uint32_t domains = 0;  // NVLink domains spanned ("nodes" in NCCL's formulas)
  std::uint32_t ppn = 0;      // ranks per domain (NCCL: nRanks / nNodes)
  std::uint32_t rails = 0;    // ranks of the least populated domain: rings/trees leave through that many NICs
  std::uint32_t max_ppn = 0;  // ranks of the most populated domain
  int idx = 0;                // NCCL's node-count index: 1 node, 2 nodes, more
  bool amd_hosts = false;     // the hosts' CPUs are AMD: NCCL's AMD LL caps and network overhead across domains
  bool nvlink = true;         // intra-domain links are NVLink (else PCIe)
  bool nvswitch = true;       // an explicit cluster's ranks all have an NVLink to an NVSwitch (NVLS needs one)
  double b_intra = 0;         // bytes/s per GPU inside a domain, after efficiency
  double b_nic = 0;           // bytes/s per GPU's NIC, after efficiency
  double egress = 0;          // bytes/s a domain's rails carry out at once (rails × NIC)
  // A ring on a torus: its edges between chips that are not neighbours take several ICI links in dimension
  // order (topology::torus_walk, as FLOW routes them): the most edges any directed link carries, and the links
  // per edge on average. 1 and 1 elsewhere.
  double torus_ring_load = 1;
  double torus_ring_hops = 1;
  // An AlltoAll on a torus (point-to-point): the most (source, destination) pairs whose dimension-order route
  // crosses one directed ICI link (each pair moves S/n).
  double torus_alltoall_load = 0;
  // A lone AlltoAll's seconds per byte of S through its busiest NIC, where NICs serve several GPUs (lone_nics());
  // 0: (n − rails)/n / b_nic.
  double alltoall_nic_s_per_byte = 0;
  // Fabric switches per network edge (fabric_routes(): by node, and a spine between two rails' leaves), each adding
  // the fabric's switch latency: the ring's (or chain's) edges between the domains' first ranks on average, the
  // trees' edges on average, the farthest pair of ranks (point-to-point). And the trees' depth in network edges.
  // Filled only where the cluster has hop latencies.
  double ring_switches = 0;
  double tree_switches = 0;
  double farthest_switches = 0;
  std::uint32_t tree_depth = 0;
  // The ring's network edges that start with a PXN hand-over inside their domain (a domain of more than one rank:
  // the last rank passes to the rank whose NIC the channel takes, network_model.cpp's ring_path), and PAT's
  // rounds' switches, each round's farthest pair. Filled only where the cluster has hop latencies.
  double pxn_hops = 0;
  double pat_switches = 0;
  // Leaf uplinks of a generated fabric (leaf_uplinks()): the network edges that leave a leaf share its uplinks,
  // spread evenly over them (FLOW's routes can do worse, never better: D-mod-k only where flows share a destination
  // residue, the ECMP hash wherever it collides; adaptive routing spreads them as evenly as this). `ring_flow_cap`:
  // bytes/s one ring channel's edge can get; `tree_alg_cap`: the trees' payload bytes/s; `alltoall_leaf_s_per_byte`:
  // seconds per byte of an AlltoAll's per-rank buffer the busiest leaf's uplinks need. No bound: inf, inf, 0.
  double ring_flow_cap = std::numeric_limits<double>::infinity();
  double tree_alg_cap = std::numeric_limits<double>::infinity();
  double alltoall_leaf_s_per_byte = 0;
  // PCIe-only nodes and explicit clusters (graph_routes()): the ring's bus bytes/s, a Send/Recv's bytes/s and an
  // AlltoAll's seconds per byte of S that the busiest link inside a node (of an explicit graph: any link) allows
  // (the trees' bound joins tree_alg_cap). No bound: inf, inf, 0.
  double route_ring_cap = std::numeric_limits<double>::infinity();
  double route_p2p_cap = std::numeric_limits<double>::infinity();
  double route_alltoall_s_per_byte = 0;
  // And hierarchical AllReduce's phases, seconds per byte of S: both intra-node phases together, the rings across.
  double route_hier_intra_s_per_byte = 0;
  double route_hier_inter_s_per_byte = 0;
  double route_collnet_cap = std::numeric_limits<double>::infinity();  // CollNet's S per second
  double route_nvls_cap = std::numeric_limits<double>::infinity();     // NVLS AllReduce's S(1 + 1/n) per second
  // An explicit cluster (graph_routes()): its links alone bound the transfers, b_intra, b_nic and egress (from its
  // scalar figures) being NCCL's tuning inputs only, and its links' latency_us are the hop latencies. The ring's
  // bound from its NVLink and ICI links alone, where AllGather's own NVLink efficiency applies. The hop latencies
  // as FLOW's routes pay them in place of the plan's, in seconds: a ring step's (channel 0's edges' routes on
  // average), the longest route of a point-to-point collective, PAT's rounds' longest routes summed, the trees'.
  bool graph_only = false;
  double route_ring_nvlink_cap = std::numeric_limits<double>::infinity();
  double route_ring_step_latency = 0;
  double route_p2p_latency = 0;
  double route_pat_latency = 0;
  double route_tree_latency = 0;  // up and down: the longest chain in a domain, the trees' depth in edges
  // NVLSTree on an explicit graph: S per second its one coflow gets through the busiest link (each domain's NVLS ring
  // and the trees' edges between the heads), and the trees' hop latencies, up and down, without chains.
  double route_nvlstree_cap = std::numeric_limits<double>::infinity();
  double route_nvlstree_latency = 0;
  // A communicator alone on NICs that several GPUs share (lone_nics()): the trees' and CollNet's S per second
  // through the busiest NIC port, in place of egress.
  // And hierarchical AllReduce's L rings across: seconds per byte of S through the NIC that carries most of them.
  bool lone_ports = false;
  double lone_tree_cap = std::numeric_limits<double>::infinity();
  double lone_collnet_cap = std::numeric_limits<double>::infinity();
  double lone_hier_s_per_byte = 0;
  // Oversubscribed leaves (leaf_uplinks()): hierarchical's rings across, seconds per byte of S per ring's
  // 2(D − 1)/D through the busiest leaf's uplinks; PAT's rounds, each (its share of S, seconds per byte of that
  // share through the busiest leaf's uplinks).
  double hier_leaf_s_per_byte = 0;
  std::vector<std::pair<double, double>> pat_rounds;
};

// The ring's link loads on a torus (Shape::torus_ring_load): the ring over `order` (a chain without the closing
// edge for Broadcast and Reduce, from the root).
void torus_ring_routes(const topology::TorusDims& dims, bool wraps, const std::vector<std::uint32_t>& order, bool chain,
                       Shape& sh) {
  const std::size_t n = order.size(), edges = chain ? n - 1 : n;
  if (n < 2 || edges == 0) return;
  std::map<std::pair<std::uint32_t, std::uint32_t>, double> load;  // directed link (chip, next chip) -> edges
  double hops = 0;
  for (std::size_t i = 0; i < edges; ++i) {
    const std::vector<std::uint32_t> walk = topology::torus_walk(dims, wraps, order[i], order[(i + 1) % n]);
    for (std::size_t h = 0; h + 1 < walk.size(); ++h) load[{walk[h], walk[h + 1]}] += 1;
    hops += static_cast<double>(walk.size() - 1);
  }
  double most = 0;
  for (const auto& [link, edges_on_it] : load) most = std::max(most, edges_on_it);
  sh.torus_ring_load = std::max(1.0, most);
  sh.torus_ring_hops = std::max(1.0, hops / static_cast<double>(edges));
}

// Shape::torus_alltoall_load: every member sends to every other along topology::torus_walk (x, then y, then z,
// the short way round, ties the way of increasing positions). Counted per axis line, not per pair: the x legs
// on line (y, z) run from each member there to every x that holds a destination, as many times as members have
// that x; the y legs on line (x, z) from every y (the members with that y and z) to every y (the members with
// that x and y); the z legs on line (x, y) from every z (the members with that z) to the members on the line.
void torus_alltoall_routes(const topology::TorusDims& dims, bool wraps, const std::vector<std::uint32_t>& members,
                           Shape& sh) {
  const std::uint32_t X = dims[0], Y = dims[1], Z = dims[2];
  std::vector<double> at_x(X, 0), at_z(Z, 0), at_yz(std::size_t{Y} * Z, 0), at_xy(std::size_t{X} * Y, 0);
  std::vector<std::uint8_t> member(std::size_t{X} * Y * Z, 0);
  for (std::uint32_t g : members) {
    const topology::TorusCoords c = topology::torus_coords(dims, g);
    at_x[c[0]] += 1;
    at_z[c[2]] += 1;
    at_yz[c[1] + std::size_t{Y} * c[2]] += 1;
    at_xy[c[0] + std::size_t{X} * c[1]] += 1;
    member[g] = 1;
  }
  double most = 0;
  std::vector<topology::AxisTransfer> legs;
  const auto line = [&](std::uint32_t D) {
    if (!legs.empty()) most = std::max(most, topology::axis_max_load(D, wraps, legs));
    legs.clear();
  };
  for (std::uint32_t z = 0; z < Z; ++z)  // x legs
    for (std::uint32_t y = 0; y < Y; ++y) {
      for (std::uint32_t x = 0; x < X; ++x)
        if (member[topology::torus_chip(dims, {x, y, z})])
          for (std::uint32_t to = 0; to < X; ++to)
            if (to != x && at_x[to] > 0) legs.push_back({x, to, at_x[to], +1});
      line(X);
    }
  for (std::uint32_t z = 0; z < Z; ++z)  // y legs
    for (std::uint32_t x = 0; x < X; ++x) {
      for (std::uint32_t from = 0; from < Y; ++from)
        for (std::uint32_t to = 0; to < Y; ++to) {
          const double w = at_yz[from + std::size_t{Y} * z] * at_xy[x + std::size_t{X} * to];
          if (to != from && w > 0) legs.push_back({from, to, w, +1});
        }
      line(Y);
    }
  for (std::uint32_t y = 0; y < Y; ++y)  // z legs
    for (std::uint32_t x = 0; x < X; ++x) {
      for (std::uint32_t from = 0; from < Z; ++from)
        for (std::uint32_t to = 0; to < Z; ++to)
          if (to != from && at_z[from] > 0 && member[topology::torus_chip(dims, {x, y, to})])
            legs.push_back({from, to, at_z[from], +1});
      line(Z);
    }
  sh.torus_alltoall_load = most;
}

std::uint32_t nsteps(CollectiveOp op, std::uint32_t n) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return 2 * (n - 1);
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllGather:
      return n - 1;
    default:
      return n;
  }
}

std::uint32_t log2i(std::uint32_t v) {
  std::uint32_t r = 0;
  while (v >>= 1) ++r;
  return r;
}

}  // namespace

const char* to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return "allreduce";
    case CollectiveOp::kReduceScatter:
      return "reducescatter";
    case CollectiveOp::kAllGather:
      return "allgather";
    case CollectiveOp::kBroadcast:
      return "broadcast";
    case CollectiveOp::kReduce:
      return "reduce";
    case CollectiveOp::kAllToAll:
      return "alltoall";
    case CollectiveOp::kSendRecv:
      return "sendrecv";
  }
  return "?";
}

const char* to_string(Algorithm a) {
  switch (a) {
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kTree:
      return "tree";
    case Algorithm::kNvls:
      return "nvls";
    case Algorithm::kCollNet:
      return "collnet";
    case Algorithm::kHierarchical:
      return "hierarchical";
    case Algorithm::kPointToPoint:
      return "p2p";
    case Algorithm::kTorus:
      return "torus";
    case Algorithm::kPat:
      return "pat";
    case Algorithm::kNvlsTree:
      return "nvlstree";
  }
  return "?";
}

const char* to_string(Protocol p) {
  switch (p) {
    case Protocol::kLL:
      return "LL";
    case Protocol::kLL128:
      return "LL128";
    case Protocol::kSimple:
      return "Simple";
  }
  return "?";
}

std::optional<CollectiveOp> parse_collective_op(std::string_view name) {
  static const std::map<std::string, CollectiveOp> names = {
      {"allreduce", CollectiveOp::kAllReduce}, {"reducescatter", CollectiveOp::kReduceScatter},
      {"allgather", CollectiveOp::kAllGather}, {"broadcast", CollectiveOp::kBroadcast},
      {"reduce", CollectiveOp::kReduce},       {"alltoall", CollectiveOp::kAllToAll},
      {"sendrecv", CollectiveOp::kSendRecv},   {"p2p", CollectiveOp::kSendRecv}};
  std::string key = lower(name);
  if (key.size() > 4 && key.substr(key.size() - 4) == "perf") key = key.substr(0, key.size() - 4);
  const auto it = names.find(key);
  return it == names.end() ? std::nullopt : std::optional<CollectiveOp>(it->second);
}

std::optional<Algorithm> parse_algorithm(std::string_view name) {
  static const std::map<std::string, Algorithm> names = {{"ring", Algorithm::kRing},
                                                         {"tree", Algorithm::kTree},
                                                         {"nvls", Algorithm::kNvls},
                                                         {"collnet", Algorithm::kCollNet},
                                                         {"collnetdirect", Algorithm::kCollNet},
                                                         {"sharp", Algorithm::kCollNet},
                                                         {"hierarchical", Algorithm::kHierarchical},
                                                         {"p2p", Algorithm::kPointToPoint},
                                                         {"torus", Algorithm::kTorus},
                                                         {"pat", Algorithm::kPat},
                                                         {"nvlstree", Algorithm::kNvlsTree}};
  const auto it = names.find(lower(name));
  return it == names.end() ? std::nullopt : std::optional<Algorithm>(it->second);
}

std::optional<Protocol> parse_protocol(std::string_view name) {
  const std::string key = lower(name);
  if (key == "ll") return Protocol::kLL;
  if (key == "ll128") return Protocol::kLL128;
  if (key == "simple") return Protocol::kSimple;
  return std::nullopt;
}

std::uint32_t pat_rounds(std::uint32_t n) {
  std::uint32_t rounds = 0;
  while ((std::uint64_t{1} << rounds) < n) ++rounds;
  return rounds;
}

namespace {

// NCCL's binary tree over n ranks (src/graph/trees.cc, ncclGetBtree): in order, rank 0 the root, rank r's parent
// found from its lowest set bit b: (r xor b) | 2b, or r xor b where that is past the end; so parent and child are
// 2^k apart (8 ranks: 0 - 4, 4 - 2 and 6, 2 - 1 and 3, 6 - 5 and 7). Returns n for the root.
std::uint32_t btree_parent(std::uint32_t rank, std::uint32_t n) {
  if (rank == 0) return n;
  std::uint32_t bit = 1;
  while ((bit & rank) == 0) bit <<= 1;
  const std::uint32_t up = (rank ^ bit) | (bit << 1);
  return up < n ? up : rank ^ bit;
}

}  // namespace

std::uint32_t tree_parent(int tree, std::uint32_t i, std::uint32_t domains) {
  if (tree == 0) return btree_parent(i, domains);
  // ncclGetDtree: tree 1 mirrors tree 0 (rank r as D − 1 − r) on an even count, and shifts it by one on an odd one.
  if (domains % 2 == 0) {
    const std::uint32_t p = btree_parent(domains - 1 - i, domains);
    return p == domains ? domains : domains - 1 - p;
  }
  const std::uint32_t p = btree_parent((i + domains - 1) % domains, domains);
  return p == domains ? domains : (p + 1) % domains;
}

namespace {

// Half-buffers each domain (tree position) sends over the two trees: one up to each parent (reduce), one down to
// each child (broadcast).
std::vector<std::uint32_t> tree_sends(std::uint32_t domains) {
  std::vector<std::uint32_t> sends(domains, 0);
  for (int tree = 0; tree < 2; ++tree)
    for (std::uint32_t i = 0; i < domains; ++i) {
      const std::uint32_t p = tree_parent(tree, i, domains);
      if (p == domains) continue;
      ++sends[i];
      ++sends[p];
    }
  return sends;
}

}  // namespace

std::uint32_t tree_max_sends(std::uint32_t domains) {
  const std::vector<std::uint32_t> sends = tree_sends(domains);
  return domains ? *std::max_element(sends.begin(), sends.end()) : 0;
}

double tree_chain_sends(std::uint32_t m, std::uint32_t k) {
  if (m < 2 || k == 0) return 0;
  std::uint32_t most = 0;
  for (std::uint32_t g = 0; g < m; ++g) {
    std::uint32_t sends = 0;
    for (std::uint32_t c = 0; c < k; ++c) {
      const std::uint32_t position = (g + m - c % m) % m;  // chain c starts at GPU c mod m
      sends += position == 0 || position == m - 1 ? 1 : 2;
    }
    most = std::max(most, sends);
  }
  return double(most) / k;
}

double busbw_factor(CollectiveOp op, std::uint32_t ranks) {
  const double n = ranks;
  switch (op) {
    case CollectiveOp::kAllReduce:
      return n > 1 ? 2 * (n - 1) / n : 1;
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllGather:
    case CollectiveOp::kAllToAll:
      return n > 1 ? (n - 1) / n : 1;
    default:
      return 1;
  }
}

const char* nccl_tests_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return "all_reduce";
    case CollectiveOp::kReduceScatter:
      return "reduce_scatter";
    case CollectiveOp::kAllGather:
      return "all_gather";
    case CollectiveOp::kBroadcast:
      return "broadcast";
    case CollectiveOp::kReduce:
      return "reduce";
    case CollectiveOp::kAllToAll:
      return "alltoall";
    case CollectiveOp::kSendRecv:
      return "sendrecv";
  }
  return "?";
}

namespace {

// ---- Fitted alpha-beta bands (clustersim calibrate fit) -------------------------------------------------
// When the profile has a band for the chosen (op, algorithm, protocol, link kind: NVLINK if the communicator
// lies in one NVLink domain, else NET) covering the size (calibrate::find_band: the op's own bands first, then
// the same algorithm of another ring-family op), the measured
//   t = max(alpha + size · busbw_factor(op, n) / busbw, launch overhead)
// replaces the physical model's time. NCCL's choice of algorithm and protocol is untouched. The band's alpha
// already holds the real hops, so the plan's latency is alpha and its hop part is capped by it; FLOW fidelity
// gets a wire factor that makes a contention-free run take the band's time.

void apply_fitted_band(const calibrate::CollectiveConstants& k, const CollectiveRequest& req, std::uint32_t ranks,
                       std::uint32_t domains, double raw_algbw, Seconds launch_overhead, CollectivePlan& plan) {
  const double bytes = req.size.raw();
  const calibrate::AlphaBetaBand* band = calibrate::find_band(
      k, nccl_tests_name(req.op), to_string(plan.algorithm), to_string(plan.protocol),
      domains <= 1 ? calibrate::LinkKind::kNvlink : calibrate::LinkKind::kNet, static_cast<std::uint64_t>(bytes), ranks);
  if (!band) return;
  const double alg = band->busbw.raw() / busbw_factor(req.op, ranks);  // payload bytes per second; may be inf
  plan.latency = band->alpha;
  plan.hop_latency = std::min(plan.hop_latency, band->alpha);
  plan.time = std::max(band->alpha + seconds(bytes / alg), launch_overhead);
  plan.bus_bandwidth = band->busbw;
  plan.wire_factor = std::isfinite(raw_algbw) ? raw_algbw / alg : 1.0;
}

}  // namespace

namespace {

// A generated node whose PCIe switches hold some GPU apart from its own NIC (GPU i of G on switch i·P/G, its NIC
// j = i·N/G on switch j·P/N, as topology.cpp cables them: e.g. 3 NICs for 8 GPUs on 4 switches): that GPU's traffic
// to the network crosses its switch's uplink, the CPUs and the NIC's switch, which the scalar figures do not see.
bool nics_off_their_gpus_switches(const topology::ClusterSpec& c) {
  const std::uint32_t G = c.gpus_per_node, N = c.node.nics_per_node, P = c.node.pcie_switches;
  if (c.is_explicit() || c.is_torus() || P == 0 || N == 0 || G == 0) return false;
  for (std::uint32_t i = 0; i < G; ++i)
    if (i * P / G != (i * N / G) * P / N) return true;
  return false;
}

}  // namespace

CollectiveModel::CollectiveModel(const topology::ClusterSpec& cluster, const calibrate::HardwareProfile& profile,
                                 NcclSettings settings)
    : cluster_(cluster), profile_(profile), settings_(settings) {
  // The closed form routes on the topology where the scalar figures cannot stand for it: explicit clusters, PCIe-only
  // nodes, and nodes whose NICs sit under other PCIe switches than their GPUs (graph_routes()).
  if (cluster.is_explicit() || (cluster.node.scale_up == topology::ScaleUp::kPcieOnly && !cluster.is_torus()) ||
      nics_off_their_gpus_switches(cluster))
    route_topology_ = std::make_shared<const topology::Topology>(cluster);
}

namespace {

struct Evaluator {
  const topology::ClusterSpec& cluster;
  const calibrate::HardwareProfile& profile;
  const NcclSettings& settings;
  const CollectiveRequest& req;
  Shape sh;
  // The communicator's ranks by domain (a PCIe-only node is one), domains in order of first appearance, ranks in
  // communicator order: network_model.cpp's group(). `ring_domains`: the same over ring_order() (from the root for
  // Broadcast and Reduce's chain).
  std::vector<std::vector<std::uint32_t>> domains, ring_domains;

  Evaluator(const topology::ClusterSpec& c, const calibrate::HardwareProfile& p, const NcclSettings& s,
            const CollectiveRequest& r, const topology::Topology* route_topology)
      : cluster(c), profile(p), settings(s), req(r) {
    domains = domains_in_order(req.gpus);
    ring_domains = chain_op() ? domains_in_order(ring_order()) : domains;
    const topology::CommunicatorSpan span = topology::span_of(cluster, req.gpus);
    const auto& k = profile.collectives;
    sh.n = span.ranks;
    sh.domains = span.nodes;
    sh.ppn = std::max<std::uint32_t>(1, sh.n / std::max<std::uint32_t>(1, sh.domains));
    sh.rails = span.min_ranks_per_node;
    sh.max_ppn = span.max_ranks_per_node;
    sh.idx = sh.domains <= 1 ? 0 : sh.domains == 2 ? 1 : 2;
    sh.amd_hosts = cluster.node.cpu_vendor == topology::CpuVendor::kAmd;
    sh.nvlink = cluster.node.scale_up != topology::ScaleUp::kPcieOnly;
    if (cluster.is_explicit() && route_topology) explicit_scale_up(*route_topology);
    // On a torus an edge of a ring crosses one ICI link, not all of a chip's links (nvlink_per_direction).
    const double scale_up = cluster.is_torus()
                                ? cluster.nvlink_per_direction.raw() /
                                      std::max<std::uint32_t>(1, topology::torus_links_per_chip(cluster.node.torus))
                                : cluster.nvlink_per_direction.raw();
    // A PCIe-only node's GPU-to-GPU links are PCIe, derated as the network's links are (FLOW does the same).
    const double intra_efficiency = sh.nvlink ? k.nvlink_bus_efficiency : k.network_bus_efficiency;
    sh.b_intra = span.max_ranks_per_node > 1 ? scale_up * intra_efficiency : kInf;
    // A NIC port faster than the PCIe link it hangs off (a what-if NIC upgrade) cannot be filled: behind a PCIe
    // switch that link carries all the NIC's GPUs' traffic, without switches each GPU has its own (topology.cpp).
    const double nic_pcie = nic_pcie_link();
    sh.b_nic = std::min(cluster.nic_per_direction.raw(),
                        cluster.node.pcie_switches > 0
                            ? nic_pcie * cluster.node.nics_per_node / std::max(1u, cluster.gpus_per_node)
                            : nic_pcie) *
               k.network_bus_efficiency;
    if (shares_nics_alone()) lone_nics();
    sh.egress = sh.domains > 1 ? sh.b_nic * sh.rails : kInf;
    if (cluster.is_torus()) {
      const bool chain = req.op == CollectiveOp::kBroadcast || req.op == CollectiveOp::kReduce;
      std::vector<std::uint32_t> order = req.gpus;
      if (chain && !order.empty())
        std::rotate(order.begin(), order.begin() + std::min<std::size_t>(req.root, order.size() - 1), order.end());
      torus_ring_routes(cluster.node.torus, cluster.node.torus_wraps, order, chain, sh);
      if (req.op == CollectiveOp::kAllToAll)
        torus_alltoall_routes(cluster.node.torus, cluster.node.torus_wraps, req.gpus, sh);
    }
    if (sh.domains > 1 && (cluster.network_hop_latency.raw() > 0 || cluster.nvlink_hop_latency.raw() > 0 ||
                           cluster.fabric.switch_latency.raw() > 0))
      fabric_routes();
    if (sh.domains > 1 && !cluster.is_explicit() && topology::has_fabric(cluster)) leaf_uplinks();
    if (route_topology && sh.n > 1) graph_routes(*route_topology);
  }

  // An explicit cluster says its scale-up in its links, not in a preset: the communicator's GPUs talk over NVLink
  // (NCCL's NVLink latencies and efficiency, LL128 on by default) when each has an NVLink or ICI link, else over
  // PCIe; NVLS needs each on an NVSwitch (nccl.md §1.6: NCCL searches NVLS graphs only with NVSwitches).
  void explicit_scale_up(const topology::Topology& topo) {
    const topology::Graph& graph = topo.graph();
    for (std::uint32_t g : req.gpus) {
      bool nvlink = false, nvswitch = false;
      for (auto [e, end] = boost::out_edges(topo.gpu_vertex(g), graph); e != end; ++e) {
        const topology::LinkKind kind = graph[*e].kind;
        if (kind != topology::LinkKind::kNvlink && kind != topology::LinkKind::kIci) continue;
        nvlink = true;
        nvswitch = nvswitch || graph[boost::target(*e, graph)].kind == topology::VertexKind::kNvSwitch;
      }
      sh.nvlink = sh.nvlink && nvlink;
      sh.nvswitch = sh.nvswitch && nvswitch;
    }
  }

  // PCIe-only nodes of a generated cluster: the links inside a node (the GPUs', NICs' and switches' PCIe links, the
  // CPUs' interconnect) carry the collective's edges as FLOW routes them (network_model.cpp, on the same Topology).
  // A PCIe switch's uplink serves every GPU and NIC below it. On the PCIe server preset (2 GPUs per switch, one NIC
  // per 4 GPUs) an 8-GPU AlltoAll sends 6 pairs' S/8 from each of a switch's 2 GPUs up its uplink, 12 where a GPU's
  // own link carries 7; and a ring over 2 nodes crosses switch 0's uplink with edge 1 -> 2 of each of its 8
  // channels plus the 2 channels that enter the node for GPUs 2 and 3 through NIC 0 (10 where a GPU's link carries
  // 8). Each bound is the busiest link's load over its capacity (network_bus_efficiency, as FLOW derates PCIe and
  // CPU links); max-min sharing can make FLOW slower than it, never faster. The network links beyond the NICs keep
  // their own bounds (egress, leaf_uplinks()).
  //   Ring (and the chain of Broadcast and Reduce): channel c of k is FLOW's ring_path, in each node the ranks from
  //   local rank c round to c − 1 (the last hop the PXN hand-over), then out through rank c's NIC to the next node's
  //   rank c; a link carrying L channel-edges of S·f/k each bounds the ring's bus bandwidth (S·f per second) by
  //   k·C/L. Trees (AllReduce): channel c's chains, S/k each way per edge, and its edges between nodes, S/2k each
  //   way; with L in units of S/2k, the bound on S per second is 2k·C/L. AlltoAll: S/n per ordered pair, a rank's
  //   pairs in other nodes through the route's leg inside its node (out) and the destination's (in). Send/Recv:
  //   the pair's route.
  // An explicit cluster (vertices and links): the same edges, each on its whole route, so every link of the graph
  // counts, NVLink and ICI links at nvlink_bus_efficiency, the others at network_bus_efficiency (FLOW's
  // derating); a route through a fabric switch under adaptive routing spreads over its equal-cost paths as
  // FLOW's does (Topology::spread); an AlltoAll routes every ordered pair. There these bounds replace those of the
  // scalar NVLink and NIC figures, which only tune (Shape::graph_only).
  void graph_routes(const topology::Topology& topo) {
    using Load = std::map<topology::LinkIndex, double>;
    const bool whole = cluster.is_explicit();
    const bool adaptive = cluster.fabric.routing == topology::FabricRouting::kAdaptive;
    auto scale_up = [&topo](topology::LinkIndex l) {
      const topology::LinkKind kind = topo.link(l).kind;
      return kind == topology::LinkKind::kNvlink || kind == topology::LinkKind::kIci;
    };
    auto inside = [&topo, whole](topology::LinkIndex l) {
      const topology::LinkKind kind = topo.link(l).kind;
      return whole || kind == topology::LinkKind::kPcie || kind == topology::LinkKind::kCpuInterconnect;
    };
    auto add = [&](Load& load, std::uint32_t a, std::uint32_t b, std::uint64_t key, double weight) {
      if (a == b) return;
      const auto links = topo.route(a, b, key);
      const bool spreads = whole && adaptive && std::any_of(links.begin(), links.end(), [&topo](auto l) {
                             return topology::is_fabric_switch(topo.vertex(topo.link(l).to).kind);
                           });
      if (spreads) {
        for (const topology::SpreadLink& l : topo.spread(a, b, key)) load[l.link] += weight * l.share;
        return;
      }
      for (topology::LinkIndex l : links)
        if (inside(l)) load[l] += weight;
    };
    // Seconds per byte per unit of load on the busiest link (of the NVLink and ICI links only, with nvlink_only).
    const double nvlink_efficiency = profile.collectives.nvlink_bus_efficiency;
    const double network_efficiency = profile.collectives.network_bus_efficiency;
    auto busiest = [&](const Load& load, bool nvlink_only = false) {
      double most = 0;
      for (const auto& [l, units] : load) {
        if (nvlink_only && !scale_up(l)) continue;
        const double capacity = topo.link(l).bandwidth.raw() * (scale_up(l) ? nvlink_efficiency : network_efficiency);
        if (capacity > 0) most = std::max(most, units / capacity);
      }
      return most;
    };
    const std::vector<std::uint32_t>& gpus = req.gpus;
    const std::size_t n = gpus.size();
    auto latency = [&topo](std::uint32_t a, std::uint32_t b, std::uint64_t key) {
      return a == b ? 0.0 : topo.latency(topo.route(a, b, key)).raw();
    };
    sh.graph_only = whole;
    Load load;
    if (req.op == CollectiveOp::kSendRecv) {
      sh.route_p2p_latency = latency(gpus[0], gpus[1], 0);
      add(load, gpus[0], gpus[1], 0, 1);
      const double s = busiest(load);
      if (s > 0) sh.route_p2p_cap = 1 / s;
      return;
    }
    if (req.op == CollectiveOp::kAllToAll && whole) {
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j) {
          add(load, gpus[i], gpus[j], i, 1);
          sh.route_p2p_latency = std::max(sh.route_p2p_latency, latency(gpus[i], gpus[j], i));
        }
      sh.route_alltoall_s_per_byte = busiest(load) / static_cast<double>(n);
      return;
    }
    if (req.op == CollectiveOp::kAllToAll) {
      std::map<std::uint32_t, std::size_t> on_node;
      for (std::uint32_t g : gpus) ++on_node[cluster.node_of(g)];
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t g = gpus[i], node = cluster.node_of(g);
        std::optional<std::uint32_t> away;  // a rank of another node
        for (std::uint32_t h : gpus) {
          if (cluster.node_of(h) == node)
            add(load, g, h, i, 1);
          else if (!away)
            away = h;
        }
        if (!away) continue;
        const auto others = static_cast<double>(n - on_node[node]);
        const auto out = topo.route(g, *away, i), in = topo.route(*away, g, 0);
        for (topology::LinkIndex l : out) {  // up to the first link out of the node
          if (!inside(l)) break;
          load[l] += others;
        }
        for (auto it = in.rbegin(); it != in.rend() && inside(*it); ++it) load[*it] += others;
      }
      sh.route_alltoall_s_per_byte = busiest(load) / static_cast<double>(n);
      return;
    }
    const std::uint32_t k = sh.domains > 1 ? std::max(1u, sh.rails) : 1;
    const bool chain = chain_op();
    const std::vector<std::uint32_t> order = ring_order();
    const auto& nodes = ring_domains;
    double ring_latency = 0;  // channel 0's edges' routes (a network edge: the hand-over and the hop), and edges
    std::size_t ring_edges = 0;
    if (nodes.size() == 1) {
      for (std::size_t i = 0; i + (chain ? 1 : 0) < n; ++i) {
        add(load, order[i], order[(i + 1) % n], 0, 1);
        ring_latency += latency(order[i], order[(i + 1) % n], 0);
        ++ring_edges;
      }
    } else {
      for (std::uint32_t c = 0; c < k; ++c)
        for (std::size_t d = 0; d < nodes.size(); ++d) {
          const auto& local = nodes[d];
          const std::size_t m = local.size();
          for (std::size_t j = 0; j + 1 < m; ++j) {
            add(load, local[(c + j) % m], local[(c + j + 1) % m], c, 1);
            if (c == 0) ring_latency += latency(local[j], local[j + 1], 0), ++ring_edges;
          }
          if (chain && d + 1 == nodes.size()) break;
          const auto& next = nodes[(d + 1) % nodes.size()];
          add(load, local[(c + m - 1) % m], local[c % m], c, 1);
          add(load, local[c % m], next[c % next.size()], c, 1);
          if (c == 0) ring_latency += latency(local[m - 1], local[0], 0) + latency(local[0], next[0], 0), ++ring_edges;
        }
    }
    if (ring_edges > 0) sh.route_ring_step_latency = ring_latency / double(ring_edges);
    if (const double s = busiest(load); s > 0) sh.route_ring_cap = k / s;
    if (const double s = busiest(load, true); whole && s > 0) sh.route_ring_nvlink_cap = k / s;
    // PAT (one GPU per node): round r sends to the rank n/2^r away, each round waiting for its longest route.
    if (whole && gather_scatter()) {
      const std::size_t rounds = pat_rounds(static_cast<std::uint32_t>(n));
      for (std::size_t r = 1; r <= rounds; ++r) {
        double longest = 0;
        for (std::size_t i = 0; i < n; ++i)
          longest = std::max(longest, latency(gpus[i], gpus[(i + (std::size_t{1} << (rounds - r))) % n], i));
        sh.route_pat_latency += longest;
      }
    }
    // NVLS AllReduce on an explicit graph (network_model.cpp): one flow of S(1 + 1/n) around the communicator in
    // its order, every edge on its route (key 0), so a slow GPU link or an edge through one of several switches
    // holds the whole flow back.
    if (whole && req.op == CollectiveOp::kAllReduce) {
      Load nvls;
      for (std::size_t i = 0; i < n; ++i) add(nvls, gpus[i], gpus[(i + 1) % n], 0, 1);
      if (const double s = busiest(nvls); s > 0) sh.route_nvls_cap = 1 / s;
    }
    const auto& tree_nodes = domains;
    const auto D = static_cast<std::uint32_t>(tree_nodes.size());
    // CollNet (network_model.cpp; AllReduce, AllGather and ReduceScatter alike): each domain is a coflow of S/m,
    // every rank's leg up to the fabric (towards rank j mod m' of the next domain) and back down, and a ring over
    // the domain's ranks carrying 2(m − 1) shards; a link carrying u of them bounds S per second by m·C/u.
    for (std::size_t d = 0; D > 1 && d < D && !whole; ++d) {  // an explicit fabric has no in-network reduction
      const auto& local = tree_nodes[d];
      const auto& next = tree_nodes[(d + 1) % D];
      const std::size_t m = local.size();
      Load legs;
      for (std::size_t j = 0; j < m; ++j) {
        const std::uint32_t peer = next[j % next.size()];
        for (topology::LinkIndex l : topo.route(local[j], peer, j)) {
          if (!inside(l)) break;
          legs[l] += 1;
        }
        const auto back = topo.route(peer, local[j], j);
        for (auto it = back.rbegin(); it != back.rend() && inside(*it); ++it) legs[*it] += 1;
        if (m > 1) add(legs, local[j], local[(j + 1) % m], j, 2.0 * double(m - 1));
      }
      if (const double s = busiest(legs); s > 0) sh.route_collnet_cap = std::min(sh.route_collnet_cap, double(m) / s);
    }
    if (req.op != CollectiveOp::kAllReduce) return;
    // Channel c's two binary trees over the domains' rank-c heads, each edge up and down at `weight`.
    auto tree_edges = [&](Load& into, std::uint32_t c, double weight) {
      for (int t = 0; t < 2 && D > 1; ++t)
        for (std::uint32_t child = 0; child < D; ++child) {
          const std::uint32_t parent = tree_parent(t, child, D);
          if (parent == D) continue;
          const std::uint32_t a = tree_nodes[child][c % tree_nodes[child].size()];
          const std::uint32_t b = tree_nodes[parent][c % tree_nodes[parent].size()];
          add(into, a, b, c, weight);
          add(into, b, a, c, weight);
        }
    };
    Load tree;
    for (std::uint32_t c = 0; c < k; ++c) {
      for (const auto& local : tree_nodes) {
        const std::size_t m = local.size();
        for (std::size_t j = 0; j + 1 < m; ++j) {
          add(tree, local[(c + j) % m], local[(c + j + 1) % m], c, 2);
          add(tree, local[(c + j + 1) % m], local[(c + j) % m], c, 2);
        }
      }
      tree_edges(tree, c, 1);
    }
    if (const double s = busiest(tree); s > 0) sh.tree_alg_cap = std::min(sh.tree_alg_cap, 2.0 * k / s);
    // The trees' hop latencies (FLOW charges the plan's), as the generated clusters' figures count them (make()):
    // up and down, channel 0's longest chain inside a domain and the trees' depth times their edges' routes on
    // average.
    if (whole) {
      double chain_latency = 0, sum = 0, edges = 0;
      std::uint32_t depth = 0;
      for (const auto& local : tree_nodes) {
        double along = 0;
        for (std::size_t j = 0; j + 1 < local.size(); ++j) along += latency(local[j], local[j + 1], 0);
        chain_latency = std::max(chain_latency, along);
      }
      for (int t = 0; t < 2 && D > 1; ++t)
        for (std::uint32_t child = 0; child < D; ++child) {
          std::uint32_t d = 0;
          for (std::uint32_t j = child; tree_parent(t, j, D) != D; j = tree_parent(t, j, D)) ++d;
          depth = std::max(depth, d);
          const std::uint32_t parent = tree_parent(t, child, D);
          if (parent == D) continue;
          sum += latency(tree_nodes[child][0], tree_nodes[parent][0], 0);
          edges += 1;
        }
      sh.route_tree_latency = 2 * (chain_latency + depth * (edges > 0 ? sum / edges : 0));
      sh.route_nvlstree_latency = 2 * depth * (edges > 0 ? sum / edges : 0);
      // NVLSTree (network_model.cpp): one coflow of S, in each domain of m ranks a ring round them carrying
      // S(1 + 1/m) (NVLS, as above), and per channel c the trees' edges between the domains' rank-c heads, S/2k
      // each way.
      Load nvlstree;
      for (const auto& local : tree_nodes) {
        const std::size_t m = local.size();
        for (std::size_t j = 0; m > 1 && j < m; ++j)
          add(nvlstree, local[j], local[(j + 1) % m], 0, 1.0 + 1.0 / double(m));
      }
      for (std::uint32_t c = 0; c < k; ++c) tree_edges(nvlstree, c, 0.5 / k);
      if (const double s = busiest(nvlstree); s > 0) sh.route_nvlstree_cap = 1 / s;
    }
    // Hierarchical (network_model.cpp): in each node a ring over its m ranks in communicator order moves
    // (m − 1)/m · S per edge, once to reduce-scatter and once to all-gather; across nodes L (the most ranks on a
    // node) rings, ring j from rank j mod m of each node to rank j mod m' of the next, S/L · 2(D − 1)/D each.
    Load across;
    std::size_t L = 0;
    for (const auto& local : tree_nodes) L = std::max(L, local.size());
    for (const auto& local : tree_nodes) {
      const std::size_t m = local.size();
      Load ring;
      for (std::size_t j = 0; m > 1 && j < m; ++j) add(ring, local[j], local[(j + 1) % m], 0, 1);
      sh.route_hier_intra_s_per_byte =
          std::max(sh.route_hier_intra_s_per_byte, 2.0 * double(m - 1) / double(m) * busiest(ring));
    }
    for (std::size_t j = 0; D > 1 && j < L; ++j)
      for (std::size_t d = 0; d < D; ++d) {
        const auto& here = tree_nodes[d];
        const auto& next = tree_nodes[(d + 1) % D];
        add(across, here[j % here.size()], next[j % next.size()], j, 1);
      }
    sh.route_hier_inter_s_per_byte = D > 1 ? 2.0 * (D - 1) / D / double(L) * busiest(across) : 0;
  }

  // Bytes/s of the PCIe link between a GPU and its NIC on a generated cluster (inf where there is none): the NIC's
  // own link to its PCIe switch, or a GPU's link straight to its NIC.
  double nic_pcie_link() const {
    const double pcie = cluster.node.pcie_per_direction.raw();
    return !cluster.is_explicit() && !cluster.is_torus() && cluster.node.nics_per_node > 0 && pcie > 0 ? pcie : kInf;
  }

  bool chain_op() const { return req.op == CollectiveOp::kBroadcast || req.op == CollectiveOp::kReduce; }
  // The order a ring visits the ranks: the communicator's, from the root for Broadcast and Reduce's chain.
  std::vector<std::uint32_t> ring_order() const {
    std::vector<std::uint32_t> order = req.gpus;
    if (chain_op() && !order.empty())
      std::rotate(order.begin(), order.begin() + std::min<std::size_t>(req.root, order.size() - 1), order.end());
    return order;
  }
  // `gpus` by domain (a PCIe-only node is one), domains in order of first appearance, ranks in the given order:
  // network_model.cpp's group().
  std::vector<std::vector<std::uint32_t>> domains_in_order(const std::vector<std::uint32_t>& gpus) const {
    std::map<std::uint32_t, std::size_t> index;
    std::vector<std::vector<std::uint32_t>> out;
    for (std::uint32_t g : gpus) {
      const auto it = index.emplace(topology::domain_of(cluster, g), out.size()).first;
      if (it->second == out.size()) out.emplace_back();
      out[it->second].push_back(g);
    }
    return out;
  }

  // A communicator running alone (CollectiveRequest::alone) on a generated cluster whose NICs serve several GPUs.
  bool shares_nics_alone() const {
    const std::uint32_t G = cluster.gpus_per_node, N = cluster.node.nics_per_node;
    return req.alone && N > 0 && N < G && !cluster.is_explicit() && !cluster.is_torus();
  }

  // NVLSTree's heads per domain, NCCL's NVLS graph channels across nodes: one per NIC the communicator's least
  // populated domain leaves through, at most the domain's NICs (a GB200 NVL72 rack's 18 trays have 72; an explicit
  // cluster's GPUs each have their own, assign_explicit_nics).
  double nvls_heads() const {
    const std::uint32_t rails = std::max(1u, sh.rails);
    const std::uint32_t nics = cluster.node.nics_per_node * std::max(1u, cluster.node.nvlink_domain_nodes);
    return cluster.is_explicit() || nics == 0 ? rails : std::min(rails, nics);
  }

  // NVLSTree's payload bytes/s at NCCL's per-channel ceiling (perChMaxNVLSTreeBw per head, a bus bandwidth).
  double nvlstree_ceiling() const {
    if (!t().present) return kInf;
    return nvls_heads() * t().nvlstree_per_channel_GBps[sh.idx] * 1e9 / busbw_factor(req.op, sh.n);
  }

  // A GPU's own NIC within its node (GPU i of G uses NIC i·N/G, as topology.cpp cables it).
  std::uint32_t rail_of(std::uint32_t gpu) const {
    return (gpu % cluster.gpus_per_node) * cluster.node.nics_per_node / cluster.gpus_per_node;
  }

  // A NIC serving several GPUs (nics_per_node < gpus_per_node; which one, rail_of): nic_per_direction is each
  // GPU's share of the port, which holds when all of them send at once (training). A communicator running alone
  // (CollectiveRequest::alone) shares a port among its own ranks on it only. Rings and trees: channel c leaves a domain
  // of m ranks through the NIC of its rank c mod m (as FLOW's rings do), so b_nic is the port over the most channels
  // one NIC carries. AlltoAll: every rank of a domain of m sends (n − m)/n of S through its NIC, shared with the
  // domain's other ranks on it.
  void lone_nics() {
    const std::uint32_t N = cluster.node.nics_per_node;
    // The port, or the PCIe link of a NIC behind a switch where that is slower (nic_pcie_link()).
    const bool switched = cluster.node.pcie_switches > 0;
    const double port = std::min(cluster.nic_port_per_direction().raw(), switched ? nic_pcie_link() : kInf) *
                        profile.collectives.network_bus_efficiency;
    auto nic_of = [&](std::uint32_t g) { return std::uint64_t{cluster.node_of(g)} * N + rail_of(g); };
    // Rings: channel c of k through the NIC of rank c mod m of each domain of m. AlltoAll: a domain's ranks on one
    // NIC each send (n − m)/n of S through it.
    // Trees (AllReduce): the domain at position i (order of first appearance, as network_model.cpp places them in
    // the trees) sends sends[i] half-buffers of S/2k per channel, channel c through the NIC of its rank c mod m; a
    // NIC carrying u of them in all bounds the trees' S per second by 2k·port/u. (rails · b_nic over the busiest
    // domain's sends would pair the NIC with the most channels in one domain with the most sends in another.)
    // CollNet: each rank sends its shard S/m up (and gets it back) through its own NIC; q ranks of a domain of m on
    // one NIC bound S per second by m·port/q. Hierarchical: L (the most ranks of a domain) rings of S/L cross the
    // domains, ring j through the NIC of rank j mod m.
    const auto D = static_cast<std::uint32_t>(domains.size());
    const std::vector<std::uint32_t> sends = D > 1 ? tree_sends(D) : std::vector<std::uint32_t>(D, 0);
    const std::uint32_t channels = std::max(1u, sh.rails), L = std::max(1u, sh.max_ppn);
    std::map<std::uint64_t, double> tree_units;
    std::map<std::uint64_t, std::uint32_t> rings_on_nic;
    std::uint32_t most_channels = 1, most_rings = 0;
    double most_alltoall = 0, most_units = 0;  // most_alltoall: ranks on one NIC x (n − m)
    for (std::uint32_t i = 0; i < D; ++i) {
      const auto& ranks = domains[i];
      const auto m = static_cast<std::uint32_t>(ranks.size());
      std::map<std::uint64_t, std::uint32_t> on_nic, channels_on_nic;
      for (std::uint32_t c = 0; c < channels; ++c) {
        const std::uint64_t nic = nic_of(ranks[c % m]);
        most_channels = std::max(most_channels, ++channels_on_nic[nic]);
        most_units = std::max(most_units, tree_units[nic] += sends[i]);
      }
      for (std::uint32_t g : ranks) {
        const std::uint32_t q = ++on_nic[nic_of(g)];
        most_alltoall = std::max(most_alltoall, double(q) * double(sh.n - m));
        sh.lone_collnet_cap = std::min(sh.lone_collnet_cap, double(m) * port / q);
      }
      for (std::uint32_t j = 0; j < L; ++j) most_rings = std::max(most_rings, ++rings_on_nic[nic_of(ranks[j % m])]);
    }
    sh.b_nic =
        std::min(port / most_channels, switched ? kInf : nic_pcie_link() * profile.collectives.network_bus_efficiency);
    sh.alltoall_nic_s_per_byte = most_alltoall / sh.n / port;
    sh.lone_tree_cap = most_units > 0 ? 2.0 * channels * port / most_units : kInf;
    sh.lone_hier_s_per_byte = double(most_rings) / L / port;
    sh.lone_ports = true;
  }

  // Shape's leaf-uplink bounds on a generated fabric (topology.h's sizing rule: a leaf has u uplinks of the fabric's
  // link bandwidth, derated like every network link by network_bus_efficiency). A GPU's traffic leaves through its
  // own NIC (rail floor(local·N/G)); that NIC sits on leaf floor(node/d) of its rail in a rail-optimised fat tree (d
  // downlinks), on leaf floor(node/nodes_per_leaf) with all the node's NICs in a Clos. Edges between domains
  // under different leaves cross the uplinks of both. Rings and trees run one channel per rail
  // (CollectivePlan::channels): in a Clos all of a node's channels share its leaf, in a rail-optimised tree each
  // rail's leaf carries its own channel. The communicator's domains are in order of first appearance, each at the
  // node and rail of its first rank, as fabric_routes() takes them.
  void leaf_uplinks() {
    const topology::FabricShape shape = topology::fabric_shape(cluster);
    if (shape.leaves <= 1 || shape.ports.uplinks == 0) return;
    const bool rail = cluster.fabric.kind == topology::FabricKind::kRailOptimizedFatTree;
    const double port = cluster.nic_per_direction.raw() * cluster.gpus_per_node /
                        std::max<std::uint32_t>(1, cluster.node.nics_per_node);
    const double link = cluster.fabric.link_per_direction.raw() > 0 ? cluster.fabric.link_per_direction.raw() : port;
    // A leaf whose uplinks carry what its downlinks can bring (oversubscription <= 1) never binds: the edges leaving
    // it are at most those its NICs send, and each NIC's share is already bounded by its own bandwidth.
    if (shape.ports.uplinks * link >= shape.ports.downlinks * port) return;
    const double cap = shape.ports.uplinks * link * profile.collectives.network_bus_efficiency;  // per leaf
    auto leaf_of = [&](std::uint32_t gpu) -> std::uint64_t {
      const std::uint32_t node = cluster.node_of(gpu);
      return rail ? std::uint64_t{rail_of(gpu)} * shape.leaves_per_rail + node / shape.ports.downlinks
                  : node / shape.nodes_per_leaf;
    };
    // Channel c (and hierarchical's ring c) leaves and enters a domain of m ranks through the NIC of its rank c mod m
    // (domains_in_order()): that NIC's leaf.
    const auto D = static_cast<std::uint32_t>(domains.size());
    const std::uint32_t channels = std::max(1u, sh.rails);
    auto channel_leaf = [&](const auto& groups, std::uint32_t domain, std::uint32_t c) {
      return leaf_of(groups[domain][c % groups[domain].size()]);
    };
    // Ring: channel c's edge from domain i to i + 1 (the last to the first; a chain from the root has no such last
    // edge) leaves i's leaf when the next domain's is another, and enters the next one's; the busiest leaf's
    // crossing edges, over every channel, share its uplinks (out) or the spines' links down to it (in). Round a ring
    // a leaf has as many of each; a chain can bring all its channels into one leaf and take none out.
    std::map<std::uint64_t, double> ring_out, ring_in, tree_out;
    for (std::uint32_t c = 0; c < channels; ++c)
      for (std::uint32_t i = 0; i + (chain_op() ? 1 : 0) < D; ++i) {
        const std::uint64_t a = channel_leaf(ring_domains, i, c), b = channel_leaf(ring_domains, (i + 1) % D, c);
        if (a != b) ring_out[a] += 1, ring_in[b] += 1;
      }
    for (const auto* crossing : {&ring_out, &ring_in})
      for (const auto& [leaf, flows] : *crossing) sh.ring_flow_cap = std::min(sh.ring_flow_cap, cap / flows);
    // Hierarchical AllReduce: L (the most ranks of a domain) rings across the domains, S/L each.
    std::map<std::uint64_t, double> hier_out;
    std::uint32_t L = 1;
    for (const auto& ranks : domains) L = std::max(L, static_cast<std::uint32_t>(ranks.size()));
    double most_rings = 0;
    for (std::uint32_t j = 0; j < L; ++j)
      for (std::uint32_t i = 0; i < D; ++i) {
        const std::uint64_t a = channel_leaf(domains, i, j), b = channel_leaf(domains, (i + 1) % D, j);
        if (a != b) most_rings = std::max(most_rings, hier_out[a] += 1);
      }
    sh.hier_leaf_s_per_byte = most_rings / L / cap;
    // PAT (one rank per domain, network_model.cpp): round k sends its shards of S/n to the rank n/2^k away, one
    // coflow per round; the flows that leave a leaf share its uplinks.
    if (sh.max_ppn == 1) {
      const std::uint32_t n = D, rounds = pat_rounds(n);
      std::uint32_t sent = 0;
      for (std::uint32_t k = 1; k <= rounds; ++k) {
        const std::uint32_t distance = 1u << (rounds - k), shards = k < rounds ? 1u << (k - 1) : n - 1 - sent;
        sent += shards;
        std::map<std::uint64_t, double> out;
        double most = 0;
        for (std::uint32_t i = 0; i < n; ++i) {
          const std::uint64_t a = leaf_of(req.gpus[i]), b = leaf_of(req.gpus[(i + distance) % n]);
          if (a != b) most = std::max(most, out[a] += 1);
        }
        sh.pat_rounds.emplace_back(double(shards) / n, most / cap);
      }
    }
    // Trees: each of the two trees carries half of the buffer over every edge, both ways, split over the channels:
    // an edge between leaves sends S/(2·channels) per channel out of each of its two leaves.
    for (std::uint32_t c = 0; c < channels; ++c)
      for (int tree = 0; tree < 2; ++tree)
        for (std::uint32_t i = 0; i < D; ++i) {
          const std::uint32_t p = tree_parent(tree, i, D);
          if (p == D) continue;
          const std::uint64_t a = channel_leaf(domains, i, c), b = channel_leaf(domains, p, c);
          if (a == b) continue;
          tree_out[a] += 1;
          tree_out[b] += 1;
        }
    for (const auto& [leaf, edges] : tree_out)
      sh.tree_alg_cap = std::min(sh.tree_alg_cap, cap / (edges / (2.0 * channels)));
    // AlltoAll: every rank sends S/n to each other rank; what goes to a rank of another domain under another leaf
    // (its own NIC's) crosses the source leaf's uplinks.
    // Ranks reached without the uplinks: those under the same leaf, and those of the same domain (NVLink).
    std::map<std::uint64_t, double> under_leaf;
    std::map<std::uint32_t, double> in_domain;
    std::map<std::pair<std::uint32_t, std::uint64_t>, double> in_both;
    for (std::uint32_t g : req.gpus) {
      const std::uint32_t d = topology::domain_of(cluster, g);
      under_leaf[leaf_of(g)] += 1;
      in_domain[d] += 1;
      in_both[{d, leaf_of(g)}] += 1;
    }
    std::map<std::uint64_t, double> a2a_out;
    const double n = double(req.gpus.size());
    for (std::uint32_t g : req.gpus) {
      const std::uint64_t leaf = leaf_of(g);
      const std::uint32_t d = topology::domain_of(cluster, g);
      a2a_out[leaf] += (n - under_leaf[leaf] - in_domain[d] + in_both[{d, leaf}]) / n;
    }
    for (const auto& [leaf, per_byte] : a2a_out)
      sh.alltoall_leaf_s_per_byte = std::max(sh.alltoall_leaf_s_per_byte, per_byte / cap);
  }

  // Shape's switch counts, PXN hand-overs and tree depth over the communicator's domains in order of first
  // appearance (domains_in_order()), each edge between the domains' first ranks, as FLOW's channel 0 takes them.
  void fabric_routes() {
    const auto D = static_cast<std::uint32_t>(domains.size());
    // Without a generated fabric (one domain, an explicit cluster) no route crosses a fabric switch.
    const bool fabric = !cluster.is_explicit() && topology::has_fabric(cluster);
    const topology::FabricShape shape = fabric ? topology::fabric_shape(cluster) : topology::FabricShape{};
    const bool rail = cluster.fabric.kind == topology::FabricKind::kRailOptimizedFatTree;
    // Switches on the route from GPU a's NIC to GPU b's: by their nodes, and on a rail-optimised tree a spine more
    // between two rails' leaves (leaf, spine, leaf) where the nodes share their leaves.
    auto switches = [&](std::uint32_t a, std::uint32_t b) {
      if (!fabric) return 0.0;
      const std::uint32_t by_node =
          topology::fabric_switches_between(cluster, shape, cluster.node_of(a), cluster.node_of(b));
      return double(rail && by_node == 1 && rail_of(a) != rail_of(b) ? 3 : by_node);
    };
    // A ring's (and a chain's, from the root, without the closing edge) network edges: channel 0 crosses from each
    // domain's first rank to the next domain's (ring_path), the edges whose routed latencies FLOW charges.
    const auto& ring = ring_domains;
    double sum = 0, edges = 0;
    for (std::uint32_t i = 0; i + (chain_op() ? 1 : 0) < D; ++i) {
      sum += switches(ring[i][0], ring[(i + 1) % D][0]);
      edges += 1;
      if (ring[i].size() > 1) sh.pxn_hops += 1;
    }
    sh.ring_switches = edges > 0 ? sum / edges : 0;
    sum = edges = 0;
    for (int tree = 0; tree < 2; ++tree)
      for (std::uint32_t i = 0; i < D; ++i) {
        std::uint32_t depth = 0;
        for (std::uint32_t j = i; tree_parent(tree, j, D) != D; j = tree_parent(tree, j, D)) ++depth;
        sh.tree_depth = std::max(sh.tree_depth, depth);
        const std::uint32_t p = tree_parent(tree, i, D);
        if (p == D) continue;
        sum += switches(domains[i][0], domains[p][0]);
        edges += 1;
      }
    sh.tree_switches = edges > 0 ? sum / edges : 0;
    // The farthest pair: some domain is as far from the first as any two are from each other (another leaf, or
    // another pod, exists exactly when one differs from the first's). On a rail-optimised tree, ranks on two rails
    // make some pair of ranks in different domains cross a spine.
    std::set<std::uint32_t> rails;
    for (std::uint32_t g : req.gpus) rails.insert(rail_of(g));
    for (std::uint32_t i = 1; i < D; ++i)
      sh.farthest_switches = std::max(sh.farthest_switches, switches(domains[0][0], domains[i][0]));
    if (fabric && rail && rails.size() > 1 && D > 1) sh.farthest_switches = std::max(sh.farthest_switches, 3.0);
    // PAT (one rank per domain): round k's pairs are n/2^k apart (network_model.cpp); FLOW waits for each round's
    // longest route.
    if (sh.max_ppn == 1) {
      const std::uint32_t n = D, rounds = pat_rounds(n);
      for (std::uint32_t k = 1; k <= rounds; ++k) {
        const std::uint32_t distance = 1u << (rounds - k);
        double farthest = 0;
        for (std::uint32_t i = 0; i < n; ++i)
          farthest = std::max(farthest, switches(req.gpus[i], req.gpus[(i + distance) % n]));
        sh.pat_switches += farthest;
      }
    }
  }

  const calibrate::NcclTuning& t() const { return profile.collectives.nccl; }
  bool gather_scatter() const { return req.op == CollectiveOp::kAllGather || req.op == CollectiveOp::kReduceScatter; }

  // NCCL's LL bus-bandwidth cap in GB/s: the GPU's row inside one NVLink domain, the hosts' CPU row across
  // domains (tuning.cc: "LL: for single node, we look at GPU type; for multi-node, we look at CPU type").
  double ll_max_bus_GBps() const {
    const auto& k = t();
    return sh.idx > 0 && sh.amd_hosts ? k.ll_max_bus_amd_GBps[sh.idx - 1] : k.ll_max_bus_GBps[sh.idx];
  }

  // NCCL's per-(algo, proto) latency in µs (nccl.md §1.4), without the launch overhead.
  double latency_us(Algorithm a, Protocol p, double bytes) const {
    const auto& c = profile.collectives;
    const int pi = proto_index(p);
    const std::uint32_t n = sh.n, N = std::max<std::uint32_t>(1, sh.domains), ppn = sh.ppn;
    if (!t().present) {  // ring Simple only, from the profile's ring constants
      const double steps = nsteps(req.op, n);
      const double inter = req.op == CollectiveOp::kAllReduce ? 2.0 * (N - 1) : double(N - 1);
      return to_us(c.ring_base_latency) + (steps - inter) * to_us(c.nvlink_step_latency) +
             inter * to_us(c.network_step_latency);
    }
    const auto& k = t();
    auto intra = [&](const auto& nv, const auto& pci) { return sh.nvlink ? nv[pi] : pci[pi]; };
    const double steps = nsteps(req.op, n);
    const double overhead = sh.amd_hosts ? k.net_overhead_amd_us : k.net_overhead_us;  // getNetOverhead
    const double net_overhead = N > 1 ? overhead * (p == Protocol::kSimple ? 3 : 1) : 0;
    switch (a) {
      case Algorithm::kRing: {
        if (req.op == CollectiveOp::kBroadcast || req.op == CollectiveOp::kReduce) {
          // Broadcast/Reduce ring with graph->sameChannels: base + one step of the ring's latency (tuning.cc).
          // NCCL's ring search (search.cc, ncclTopoCompute) first tries every channel on the first channel's ring
          // and keeps that when it is already perfect, as it is on one NVSwitch domain (its logs: "sameChannels
          // 1"); across nodes the channels take different NICs (sameChannels 0), and so on NVLink meshes.
          if (N == 1 && (cluster.is_explicit() ? sh.nvswitch : cluster.node.scale_up == topology::ScaleUp::kNvSwitch))
            return k.ring_base_us[pi] + intra(k.ring_nvlink_us, k.ring_pci_us);
          // Otherwise: per-step latency of the link class; Simple takes the tree's (tuning.cc).
          const double lat = N == 1 ? (p == Protocol::kSimple ? intra(k.tree_nvlink_us, k.tree_pci_us)
                                                              : intra(k.ring_nvlink_us, k.ring_pci_us))
                                    : (p == Protocol::kSimple ? k.tree_net_us[2] : k.ring_net_us[pi]);
          return k.ring_base_us[pi] + steps * lat;
        }
        const double inter_steps = req.op == CollectiveOp::kAllReduce ? 2.0 * (N - 1) : double(N - 1);
        // NCCL's ppn is nRanks / nNodes as a float: 1 only with one rank in every node.
        const double inter_lat = n == N ? k.tree_net_us[pi] : k.ring_net_us[pi];
        double lat = k.ring_base_us[pi] +
                     (steps - inter_steps) * std::max(intra(k.ring_nvlink_us, k.ring_pci_us), net_overhead) +
                     inter_steps * inter_lat;
        // "Plateau effect of ring" (tuning.cc): multi-node ring Simple AllReduce with enough data per rank.
        if (p == Protocol::kSimple && N > 1 && req.op == CollectiveOp::kAllReduce &&
            bytes / (double(k.channels) * n) >= 64)
          lat *= 1.4;
        return lat;
      }
      case Algorithm::kTree:
        return k.tree_base_us[pi] +
               2 * ((ppn - 1) * intra(k.tree_nvlink_us, k.tree_pci_us) + log2i(N) * k.tree_net_us[pi]);
      case Algorithm::kCollNet:
        return k.collnet_base_us[pi] + 2 * (std::min<double>(1, ppn - 1) * k.collnet_nvlink_us[pi] + (ppn - 1) * 0.4) +
               k.collnet_net_us[pi];
      case Algorithm::kNvls:
        return k.nvls_nvlink_us[pi] + (N > 1 ? k.nvls_net_us[pi] : 0);
      case Algorithm::kNvlsTree:
        // tuning.cc: base + intraLat + 2·log2i(nNodes)·interLat, interLat the tree's where NCCL's ppn is 1.
        return k.nvlstree_base_us[pi] + k.nvlstree_nvlink_us[pi] +
               2 * log2i(N) * (n == N ? k.tree_net_us[pi] : k.nvlstree_net_us[pi]);
      case Algorithm::kHierarchical:
        // Ring reduce-scatter and all-gather inside each domain, ring AllReduce across domains.
        return k.ring_base_us[pi] + 2.0 * (ppn - 1) * intra(k.ring_nvlink_us, k.ring_pci_us) +
               2.0 * (N - 1) * k.ring_net_us[pi];
      case Algorithm::kPointToPoint:
        return k.ring_base_us[pi] + (N > 1 ? k.ring_net_us[pi] : intra(k.ring_nvlink_us, k.ring_pci_us));
      case Algorithm::kPat:
        // tuning.cc: log2(nNodes) steps at a 3.5th of the network latency, and a linear part of 2.8 µs per rank.
        return k.pat_base_us[pi] + log2i(N) * (k.pat_net_us[pi] / 3.5) + n * 2.8;
      case Algorithm::kTorus:  // planned by torus_plan(), never here
        break;
    }
    return 0;
  }

  // NCCL's algorithm bandwidth in GB/s (nccl.md §1.5), for the choice.
  double nccl_algbw_GBps(Algorithm a, Protocol p, double bytes) const {
    const auto& k = t();
    const std::uint32_t n = sh.n, N = std::max<std::uint32_t>(1, sh.domains);
    const double nch = k.channels;
    // channels × per-channel bandwidth of the algorithm's graph. A ring crosses each domain boundary
    // once per channel; a double binary tree uses each domain's rails in both trees, so its graph can
    // carry twice the rails' bandwidth before the network binds.
    const double tree_graph =
        std::min(sh.b_intra, N > 1 ? 2 * sh.egress / (tree_max_sends(static_cast<std::uint32_t>(N)) / 2.0) : kInf);
    const double graph = (a == Algorithm::kTree ? tree_graph : std::min(sh.b_intra, sh.egress)) / 1e9;
    double bus = graph;
    switch (a) {
      case Algorithm::kRing:
        if (p == Protocol::kLL) bus = std::min(ll_max_bus_GBps(), graph * 0.5);
        if (p == Protocol::kLL128) bus = std::min(graph * 0.92, nch * k.ring_ll128_per_channel_GBps[sh.idx]);
        break;
      case Algorithm::kTree:
        // The refinements stack, in tuning.cc's order: the AllReduce line applies to every protocol, then
        // LL's or LL128's own factor and cap on top. So tree LL128 never models more bandwidth than tree
        // Simple, and Simple takes over once the bandwidth term outweighs LL128's smaller latency.
        if (req.op == CollectiveOp::kAllReduce) bus = std::min(bus * 0.92, nch * k.tree_per_channel_GBps[sh.idx]);
        if (p == Protocol::kLL) bus = std::min(bus / 3.8, ll_max_bus_GBps());
        if (p == Protocol::kLL128)
          bus = std::min(bus * (N == 1 ? 7.0 / 9.0 : 120.0 / 128.0), nch * k.tree_ll128_per_channel_GBps[sh.idx]);
        break;
      case Algorithm::kNvls: {
        double intra = sh.b_intra / 1e9 * k.nvls_efficiency * (nch - 1) / nch;
        intra *= req.op == CollectiveOp::kAllReduce ? 2.0 : double(sh.ppn - 1) / sh.ppn;
        bus = std::min(intra, N > 1 ? sh.egress / 1e9 : kInf);
        break;
      }
      case Algorithm::kNvlsTree: {
        // The NVLS graph's channels are its heads, one per NIC (nvls_heads()); "AllReduce pipelines two
        // operations" inside, and on 2 nodes the tree carries twice the network's bandwidth (tuning.cc).
        const double heads = nvls_heads();
        const double intra = sh.b_intra / 1e9 * k.nvls_efficiency * (heads - 1) / heads * 2.0;
        const double inter = sh.egress / 1e9 * (N <= 2 ? 2.0 : 1.0);
        bus = std::min({intra, inter, heads * k.nvlstree_per_channel_GBps[sh.idx]});
        break;
      }
      case Algorithm::kPat:
        bus = graph * k.pat_bus_efficiency;  // tuning.cc: busBw *= .75
        break;
      case Algorithm::kCollNet: {
        if (req.op == CollectiveOp::kAllReduce) {
          double f = sh.ppn / nch;
          f -= (f - 1) / 2;
          bus = graph / f * k.collnet_direct_efficiency;  // 0.85 from Hopper on (tuning.cc, cc >= 90)
        } else {
          bus = sh.ppn * std::min(sh.b_intra, sh.egress * 0.9) / 1e9 / nch;
        }
        break;
      }
      default:
        break;
    }
    // Bus to algorithm bandwidth (nccl.md §1.5): not for AllGather/ReduceScatter of algorithms other than the ring,
    // whose bus bandwidth above is already the algorithm's.
    const double ratio = a != Algorithm::kRing && gather_scatter() ? 1.0
                         : (a == Algorithm::kRing || a == Algorithm::kNvls || a == Algorithm::kNvlsTree)
                             ? double(n) / nsteps(req.op, n)
                             : 0.5;
    double alg = bus * ratio;
    if (a == Algorithm::kTree && req.op == CollectiveOp::kAllReduce) alg *= tree_correction(p, bytes);
    return alg;
  }

  // NCCL's treeCorrectionFactor at log2(bytes/64), a step function (tuning.cc): what NCCL's choice sees.
  // With smooth = true, the physical model's reading of the same measurements: the table holds one value
  // per power of two, joined linearly in log2(size) (1.0 past the table's end), so that a tree's time
  // grows with the size instead of dropping by up to 13 % just after each power of two where the factor
  // steps up. At powers of two both readings are the table's value.
  double tree_correction(Protocol p, double bytes, bool smooth = false) const {
    if (!t().present) return 1.0;
    const auto& table = t().tree_correction[proto_index(p)];
    const auto chunks = static_cast<std::uint64_t>(bytes) >> 6;
    if (chunks == 0) return 1.0;
    const std::uint32_t log_size = log2i(static_cast<std::uint32_t>(std::min<std::uint64_t>(chunks, 1u << 31)));
    auto at = [&](std::size_t i) { return i < table.size() ? table[i] : 1.0; };
    if (!smooth || bytes >= 64.0 * double(1u << 31)) return at(log_size);
    const double fraction = std::log2(bytes / 64.0) - log_size;  // in [0, 1)
    return at(log_size) + (at(log_size + 1) - at(log_size)) * std::clamp(fraction, 0.0, 1.0);
  }

  // Physical algorithm bandwidth in bytes/s: payload bytes (nccl-tests size) per second.
  // With raw = true: the links' rate only (no protocol efficiency, caps or correction).
  double physical_algbw(Algorithm a, Protocol p, double bytes, bool raw = false) const {
    const auto& k = t();
    const double n = sh.n, N = std::max<std::uint32_t>(1, sh.domains);
    // AllGather's own NVLink efficiency, where the profile has one, scales the intra-domain rate like a protocol
    // efficiency (not in `raw`: FLOW's links are derated by nvlink_bus_efficiency, and the wire factor adds this).
    // On an explicit cluster the graph's links alone bound them (graph_routes()), AllGather's efficiency on its
    // NVLink and ICI links.
    const double ag_efficiency = profile.collectives.nvlink_allgather_bus_efficiency;
    const double ag = !raw && req.op == CollectiveOp::kAllGather && ag_efficiency > 0
                          ? ag_efficiency / profile.collectives.nvlink_bus_efficiency
                          : 1.0;
    const double scalar_intra = sh.graph_only ? kInf : sh.b_intra;
    const double b_intra = scalar_intra * ag;
    const double egress = sh.graph_only ? kInf : sh.egress;
    const double b_nic = sh.graph_only ? kInf : sh.b_nic;
    const double ring_bus =
        std::min({b_intra / sh.torus_ring_load, egress, sh.domains > 1 ? sh.rails * sh.ring_flow_cap : kInf,
                  sh.route_ring_cap, sh.route_ring_nvlink_cap * ag});
    auto protocol_cap = [&](double bus_Bps) {  // ring protocols: wire efficiency and NCCL's per-channel caps
      if (!k.present || raw) return bus_Bps;
      if (p == Protocol::kLL) return std::min(ll_max_bus_GBps() * 1e9, bus_Bps * 0.5);
      if (p == Protocol::kLL128)
        return std::min(bus_Bps * 0.92, k.channels * k.ring_ll128_per_channel_GBps[sh.idx] * 1e9);
      return bus_Bps;
    };
    switch (a) {
      case Algorithm::kRing:
        return protocol_cap(ring_bus) / busbw_factor(req.op, sh.n);
      case Algorithm::kPat:
        // One GPU per node: every rank's NIC sends and receives (n − 1)/n · S, as in the ring, over pat_rounds(n)
        // rounds; NCCL's efficiency factor for PAT (0.75) is its measured shortfall.
        // On oversubscribed leaves each round waits for its busiest leaf's uplinks or for the NICs, whichever is
        // slower (the ring's own leaf bound does not apply: PAT's rounds cross other leaves than the ring's edges).
        {
          const double eff = raw ? 1.0 : k.pat_bus_efficiency;
          if (sh.pat_rounds.empty()) return ring_bus * eff / busbw_factor(req.op, sh.n);
          const double links = std::min({b_intra / sh.torus_ring_load, egress, sh.route_ring_cap});
          double per_byte = 0;
          for (const auto& [share, leaf_s_per_byte] : sh.pat_rounds)
            per_byte += share * std::max(1 / links, leaf_s_per_byte);
          return per_byte > 0 ? eff / per_byte : kInf;
        }
      case Algorithm::kTree: {
        // Chains inside the domains (the busiest GPU sends tree_chain_sends · S: 2S in one chain of 3 or
        // more), a double binary tree across domains: the busiest domain sends tree_max_sends half-buffers
        // over its rails (S with 2 domains, 2S from 3 on: an interior node feeds two children).
        const std::uint32_t channels = N > 1 ? std::max(1u, sh.rails) : 1;
        double chain = 0;
        for (std::uint32_t m = std::max(1u, sh.rails); m <= sh.max_ppn; ++m)
          chain = std::max(chain, tree_chain_sends(m, channels));
        const double tree_bytes = N > 1 ? tree_max_sends(static_cast<std::uint32_t>(N)) / 2.0 : 0;
        const double across = N <= 1 ? kInf : sh.lone_ports ? sh.lone_tree_cap : egress / tree_bytes;
        double alg = std::min({chain > 0 ? b_intra / chain : kInf, across, sh.tree_alg_cap});
        if (!std::isfinite(alg)) alg = b_intra;
        if (raw) return alg;
        // Wire efficiency: Simple moves payload only; LL and LL128 as NCCL's tree factors (1/3.8; 7/9 in a
        // node, 120/128 across). The size-dependent tree correction is NCCL's measured shortfall.
        const double eff = p == Protocol::kSimple ? 1.0
                           : p == Protocol::kLL   ? 1 / 3.8
                                                  : (N == 1 ? 7.0 / 9 : 120.0 / 128);
        return alg * eff * tree_correction(p, bytes, true);
      }
      case Algorithm::kNvls:
        // nccl.md §1.12: S(1 + 1/n) through each GPU's link to the switch at the measured NVLS rate, which a
        // slower link (a what-if NVLink) caps, as FLOW's bounded flow over that link.
        if (req.op == CollectiveOp::kAllReduce && profile.collectives.nvls_bandwidth.raw() > 0)
          return std::min({profile.collectives.nvls_bandwidth.raw(), scalar_intra, sh.route_nvls_cap}) * n / (n + 1);
        return ring_bus / busbw_factor(req.op, sh.n);
      case Algorithm::kNvlsTree: {
        // Pipelined, so the slower part binds (network_model.cpp runs both as one coflow): NVLS inside each domain,
        // S(1 + 1/m) through each GPU's link to its switch at most at the measured NVLS rate (nccl.md §1.12; the
        // least populated domain, m = rails, is the slowest), and the trees between the domains' heads, whose
        // network edges load the rails as the tree's do (the busiest domain's rails carry tree_max_sends/2 · S). On
        // an explicit graph its links alone bound both (route_nvlstree_cap). NCCL's per-channel ceiling
        // (perChMaxNVLSTreeBw, one channel per head) is the kernels' measured limit.
        const double m = std::max(1u, sh.rails);
        const double nvls = std::min(profile.collectives.nvls_bandwidth.raw(), scalar_intra) * m / (m + 1);
        const double across = N <= 1          ? kInf
                              : sh.lone_ports ? sh.lone_tree_cap
                                              : egress / (tree_max_sends(static_cast<std::uint32_t>(N)) / 2.0);
        // The ceiling is a rate of the kernels, not bytes on the wire: it stays in the raw rate (no wire factor),
        // and FLOW bounds the flows by it (CollectivePlan::payload_rate_cap).
        return std::min({nvls, across, sh.graph_only ? sh.route_nvlstree_cap : sh.tree_alg_cap, nvlstree_ceiling()});
      }
      case Algorithm::kCollNet: {
        // The switches reduce: a domain sends its data once and receives the result once over its rails;
        // inside the domain a reduce-scatter and an all-gather over NVLink. A domain of m ranks takes
        // S / min(m · NIC, b_intra · m / (2(m − 1))); the reduction waits for the slowest, and both terms fall
        // to their least at an end of the range: the least populated domain's rails (egress), the most
        // populated domain's NVLink.
        const double m = sh.max_ppn;
        return std::min({sh.lone_ports ? sh.lone_collnet_cap : egress, m > 1 ? b_intra * m / (2 * (m - 1)) : kInf,
                         sh.route_collnet_cap});
      }
      case Algorithm::kHierarchical: {
        // Per byte of S: the reduce-scatter and all-gather inside the most populated domain (L ranks:
        // 2(L − 1)/L over NVLink), and the L rings across domains (network_model.cpp), ring j through rank j mod m
        // of a domain of m: a rank carries ceil(L/m) rings of S/L, each 2(N − 1)/N, and the busiest is in the
        // domain of the largest ceil(L/m)/L (the least populated one when every m divides L: S/r). Each phase
        // waits for its slowest domain.
        const std::uint32_t L = std::max(1u, sh.max_ppn);
        std::map<std::uint32_t, std::uint32_t> ranks_of;  // by domain (hierarchical is forced only: not a hot path)
        for (std::uint32_t g : req.gpus) ++ranks_of[topology::domain_of(cluster, g)];
        double rings_per_rank = 0;  // max over the communicator's domains of ceil(L/m)/L
        for (const auto& [domain, m] : ranks_of) rings_per_rank = std::max(rings_per_rank, double((L + m - 1) / m) / L);
        // Seconds per byte of S through the busiest NIC, per ring's 2(N − 1)/N: a rank's own share of its NIC, or,
        // alone on NICs that several GPUs share, the whole port carrying the rings of all its ranks on it.
        const double nic_s_per_byte = sh.lone_ports ? sh.lone_hier_s_per_byte : rings_per_rank / b_nic;
        const double intra_time = std::max(L > 1 ? 2.0 * (L - 1) / L / b_intra : 0, sh.route_hier_intra_s_per_byte);
        const double inter_time = N > 1 ? std::max(2 * (N - 1) / N * std::max(nic_s_per_byte, sh.hier_leaf_s_per_byte),
                                                   sh.route_hier_inter_s_per_byte)
                                        : 0;
        const double per_byte = intra_time + inter_time;
        if (!(per_byte > 0)) return kInf;
        // The protocol caps are on bus bandwidth, as for the ring (on one domain the two are the same ring).
        const double factor = busbw_factor(req.op, sh.n);
        return protocol_cap(factor / per_byte) / factor;
      }
      case Algorithm::kPointToPoint: {
        if (req.op == CollectiveOp::kSendRecv) {
          const bool same = sh.domains <= 1;
          return std::min(same ? b_intra : b_nic, sh.route_p2p_cap);
        }
        // AlltoAll: a GPU in a domain of m sends (n − m)/n of S across domains through its NIC and (m − 1)/n
        // inside: the least populated domain's GPUs carry the most through their NICs, the most populated
        // domain's the most inside.
        const double inter = N <= 1                           ? 0
                             : sh.alltoall_nic_s_per_byte > 0 ? sh.alltoall_nic_s_per_byte
                                                              : (n - sh.rails) / n / b_nic;
        // On a torus the domain is the ICI network: the busiest link carries its pairs' S/n each (b_intra is one
        // link there).
        const double local = cluster.is_torus() ? sh.torus_alltoall_load / n / b_intra
                             : sh.max_ppn > 1   ? (sh.max_ppn - 1.0) / n / b_intra
                                                : 0;
        const double per_byte = std::max({inter, local, sh.alltoall_leaf_s_per_byte, sh.route_alltoall_s_per_byte});
        return per_byte > 0 ? 1 / per_byte : kInf;
      }
      case Algorithm::kTorus:  // planned by torus_plan(), never here
        break;
    }
    return kInf;
  }

  CollectivePlan make(Algorithm a, Protocol p) const {
    const double bytes = req.size.raw();
    CollectivePlan plan;
    plan.op = req.op;
    plan.algorithm = a;
    plan.protocol = p;
    plan.channels = sh.domains > 1 && (a == Algorithm::kRing || a == Algorithm::kTree || a == Algorithm::kNvlsTree)
                        ? std::max(1u, sh.rails)
                        : 1;
    const double lat_us = latency_us(a, p, bytes);
    const double switch_latency = cluster.fabric.switch_latency.raw();
    // An NVLink hop's latency; a PCIe-only node's GPUs reach each other over PCIe links, which carry none.
    const double nvlink_hop = sh.nvlink ? cluster.nvlink_hop_latency.raw() : 0.0;
    double hops = 0;  // the cluster's own per-hop latencies along a ring or the trees, or a point-to-point route
    if (a == Algorithm::kRing && sh.n > 1) {
      // A chunk crosses one edge per step: 2(n − 1) steps round a ring of n edges for AllReduce, n − 1 for
      // the others, n − 1 down a chain (Broadcast, Reduce); of a ring's n edges the domains' D are network
      // hops (of a chain's n − 1, D − 1). The network model charges the routed links the same way.
      const bool chain = chain_op();
      const double n = sh.n, D = sh.domains;
      const double steps = chain ? n - 1 : req.op == CollectiveOp::kAllReduce ? 2 * (n - 1) : n - 1;
      const double edges = chain ? n - 1 : n;
      const double network_edges = D > 1 ? (chain ? D - 1 : D) : 0;
      const double inter = steps * network_edges / edges;
      // A network edge pays the NIC's hop and each fabric switch on its route, and where its domain has more than
      // one rank the PXN hand-over's NVLink hop before it.
      hops = sh.graph_only ? steps * sh.route_ring_step_latency
                           : (steps - inter) * sh.torus_ring_hops * nvlink_hop +
                                 inter * (cluster.network_hop_latency.raw() + sh.ring_switches * switch_latency) +
                                 steps / edges * sh.pxn_hops * nvlink_hop;
    } else if (a == Algorithm::kTree && sh.n > 1) {
      // Reduce up and broadcast down: each domain's chain (its ranks − 1 NVLink edges) and the trees' depth in
      // network edges, each way; the flows of FLOW fidelity pay the same.
      const double chain = sh.max_ppn > 1 ? 2.0 * (sh.max_ppn - 1) * nvlink_hop : 0.0;
      hops = sh.graph_only ? sh.route_tree_latency
                           : chain + 2.0 * sh.tree_depth *
                                         (cluster.network_hop_latency.raw() + sh.tree_switches * switch_latency);
    } else if (a == Algorithm::kNvlsTree && sh.n > 1) {
      // The trees' depth in network edges, each way; inside the domains NVLS pays NCCL's latency only, as kNvls.
      hops = sh.graph_only
                 ? sh.route_nvlstree_latency
                 : 2.0 * sh.tree_depth * (cluster.network_hop_latency.raw() + sh.tree_switches * switch_latency);
    } else if (a == Algorithm::kPat && sh.n > 1) {
      // Each round crosses the network once, through the switches of its farthest pair.
      hops = sh.graph_only ? sh.route_pat_latency
                           : pat_rounds(sh.n) * cluster.network_hop_latency.raw() + sh.pat_switches * switch_latency;
    } else if (a == Algorithm::kPointToPoint && sh.n > 1) {
      // One hop: over the network when the pair (for AlltoAll, the farthest pair) is in different domains.
      hops = sh.graph_only    ? sh.route_p2p_latency
             : sh.domains > 1 ? cluster.network_hop_latency.raw() + sh.farthest_switches * switch_latency
                              : nvlink_hop;
    }
    plan.hop_latency = seconds(hops);
    plan.latency = microseconds(lat_us) + plan.hop_latency;
    const double alg = sh.n > 1 ? physical_algbw(a, p, bytes) : kInf;
    plan.time = plan.latency + seconds(std::isfinite(alg) && alg > 0 ? bytes / alg : 0);
    // Back-to-back calls overlap the host's launch of the next call with the GPU work of this one,
    // so a call costs the longer of the two (nccl-tests' steady-state time, nccl.md §2.3).
    plan.time = std::max(plan.time, settings.launch_overhead);
    if (sh.n <= 1) plan.time = seconds(0);
    plan.bus_bandwidth = bytes_per_second(std::isfinite(alg) ? alg * busbw_factor(req.op, sh.n) : 0);
    const double raw = sh.n > 1 ? physical_algbw(a, p, bytes, true) : kInf;
    plan.wire_factor = std::isfinite(alg) && alg > 0 && std::isfinite(raw) ? raw / alg : 1.0;
    if (a == Algorithm::kNvlsTree && sh.n > 1) plan.payload_rate_cap = bytes_per_second(nvlstree_ceiling());
    if (sh.n > 1) apply_fitted_band(profile.collectives, req, sh.n, sh.domains, raw, settings.launch_overhead, plan);
    if (t().present && a != Algorithm::kHierarchical && a != Algorithm::kPointToPoint) {
      const double nccl_alg = nccl_algbw_GBps(a, p, bytes);
      plan.nccl_model_time = microseconds(lat_us + (nccl_alg > 0 ? bytes / (1000 * nccl_alg) : 1e30));
    } else {
      plan.nccl_model_time = microseconds(lat_us) + seconds(std::isfinite(alg) && alg > 0 ? bytes / alg : 0);
    }
    return plan;
  }

  // Algorithms NCCL may use for this request, and whether each can run here at all.
  std::vector<Algorithm> algorithms(bool forced) const {
    switch (req.op) {
      case CollectiveOp::kAllToAll:
      case CollectiveOp::kSendRecv:
        return {Algorithm::kPointToPoint};
      case CollectiveOp::kBroadcast:
      case CollectiveOp::kReduce:
        return {Algorithm::kRing};
      default:
        break;
    }
    // The ring always; the others where their requirements hold (unavailable()); hierarchical, not one of NCCL's,
    // only when forced.
    std::vector<Algorithm> out = {Algorithm::kRing};
    for (Algorithm a : {Algorithm::kTree, Algorithm::kNvls, Algorithm::kNvlsTree, Algorithm::kCollNet, Algorithm::kPat,
                        Algorithm::kHierarchical})
      if ((a != Algorithm::kHierarchical || forced) && unavailable(a).empty()) out.push_back(a);
    return out;
  }

  // Why `a` is not among algorithms() here, in words: the first of its requirements that this communicator, cluster
  // or profile does not meet ("" when it can run). The one statement of those requirements: algorithms() and the
  // error of a forced algorithm both read it.
  std::string unavailable(Algorithm a) const {
    const auto& k = t();
    const auto& c = profile.collectives;
    const bool ar = req.op == CollectiveOp::kAllReduce;
    if (a == Algorithm::kPointToPoint) return "p2p runs AlltoAll and Send/Recv only";
    if (a == Algorithm::kTorus) return "torus needs a communicator that is a box of a TPU torus";
    if (chain_op() && a != Algorithm::kRing) return "NCCL runs Broadcast and Reduce as rings only";
    if (!k.present && a != Algorithm::kRing)
      return "the profile has no NCCL tuning constants (collectives.nccl), so the ring only";
    const bool nvswitch = cluster.is_explicit() ? sh.nvswitch : cluster.node.scale_up == topology::ScaleUp::kNvSwitch;
    switch (a) {
      case Algorithm::kTree:
      case Algorithm::kHierarchical:
        return ar ? "" : std::string(to_string(a)) + " runs AllReduce only";
      case Algorithm::kNvls:
      case Algorithm::kNvlsTree:
        // NVLS needs NVSwitch multicast (NCCL searches NVLS graphs only with NVSwitches) and more than 2 GPUs
        // (ncclNvlsInit); NVLSTree (NCCL 2.18 and later) runs AllReduce across domains with NVLS inside each, never
        // on one node (nccl.md §1.6), nor with fewer than 2 heads (tuning.cc skips NVLS graphs of one channel).
        if (k.nvls_efficiency <= 0 || c.nvls_bandwidth.raw() <= 0) return "the profile has no NVLS (H100 and later)";
        if (!nvswitch)
          return cluster.is_explicit() ? "NVLS needs every GPU on an NVSWITCH vertex" : "the nodes have no NVSwitch";
        if (!cluster.node.nvls) return "the cluster says nvls: false";
        if (a == Algorithm::kNvls) {
          if (sh.domains != 1) return "NVLS runs inside one NVLink domain (nvlstree across domains)";
          return sh.n > 2 ? "" : "NVLS needs more than 2 GPUs";
        }
        if (!ar) return "nvlstree runs AllReduce only";
        if (sh.domains <= 1) return "nvlstree runs across NVLink domains (nvls inside one)";
        if (sh.rails <= 2) return "nvlstree needs more than 2 of the communicator's GPUs in every NVLink domain";
        if (nvls_heads() < 2) return "nvlstree needs at least 2 NICs a domain (one NVLS head each)";
        return k.nvlstree_per_channel_GBps[sh.idx] > 0 ? "" : "the profile has no NVLSTree constants";
      case Algorithm::kCollNet:
        // updateCollCostTable (enqueue.cc) drops CollNet with more than NCCL_MAX_DIRECT_ARITY + 1 = 8 local ranks.
        if (!cluster.fabric.in_network_reduction) return "the fabric has no in-network reduction";
        if (sh.domains <= 1) return "collnet runs across NVLink domains";
        return sh.max_ppn <= 8 ? "" : "collnet needs at most 8 of the communicator's GPUs a domain";
      case Algorithm::kPat:
        // ncclPatEnable: AllGather and ReduceScatter with one GPU per node, in NCCL releases that have it.
        if (!gather_scatter()) return "pat runs AllGather and ReduceScatter only";
        if (k.pat_bus_efficiency <= 0) return "the profile's NCCL release has no PAT";
        return sh.domains == sh.n && sh.n > 1 ? "" : "pat needs one GPU per node";
      default:
        return "";
    }
  }

  // With ll128_forced (NCCL_PROTO=LL128) LL128 runs wherever the algorithm has it: NCCL's architecture and path
  // checks apply to its default setting only (tuning.cc, protoEnable == 2).
  std::vector<Protocol> protocols(Algorithm a, bool ll128_forced = false) const {
    if (!t().present || a == Algorithm::kNvls || a == Algorithm::kNvlsTree || a == Algorithm::kCollNet ||
        a == Algorithm::kPointToPoint || a == Algorithm::kPat)
      return {Protocol::kSimple};
    std::vector<Protocol> out = {Protocol::kLL};
    // By default LL128 needs NVLink inside the node (nccl.md §1.6).
    if (sh.nvlink || ll128_forced) out.push_back(Protocol::kLL128);
    out.push_back(Protocol::kSimple);
    return out;
  }
};

}  // namespace

// ---- Torus (TPU ICI) collectives, see the header ---------------------------------------------------------

namespace {

bool torus_cluster(const topology::ClusterSpec& c) {
  return c.is_torus() && topology::torus_links_per_chip(c.node.torus) > 0;
}

// Whether Algorithm::kTorus can run this request: a torus cluster, and a box of it (Send/Recv: two chips).
bool torus_applies(const topology::ClusterSpec& c, const CollectiveRequest& req) {
  if (!torus_cluster(c)) return false;
  if (req.op == CollectiveOp::kSendRecv) return req.gpus.size() == 2;
  return topology::torus_box(c.node.torus, req.gpus).has_value();
}

}  // namespace

std::uint32_t torus_axis_parts(const topology::ClusterSpec& cluster, const CollectiveRequest& req) {
  if (!torus_applies(cluster, req) || req.gpus.size() <= 1) return 1;
  if (req.op != CollectiveOp::kAllReduce && req.op != CollectiveOp::kReduceScatter &&
      req.op != CollectiveOp::kAllGather)
    return 1;
  const topology::TorusBox box = *topology::torus_box(cluster.node.torus, req.gpus);
  std::uint32_t axes = 0;
  for (int a = 0; a < 3; ++a) axes += box.extent(a) > 1 ? 1 : 0;
  return std::max(1u, axes);
}

std::vector<TorusPhase> torus_phases(const topology::ClusterSpec& cluster, const calibrate::HardwareProfile& profile,
                                     const CollectiveRequest& req, std::uint32_t parts) {
  std::vector<TorusPhase> out;
  if (!torus_applies(cluster, req) || req.gpus.size() <= 1) return out;
  assert((parts == 1 || parts == torus_axis_parts(cluster, req)) && "one part per axis order");
  const topology::TorusDims& dims = cluster.node.torus;
  const bool wraps = cluster.node.torus_wraps;
  const double link = cluster.nvlink_per_direction.raw() / topology::torus_links_per_chip(dims) *
                      profile.collectives.nvlink_bus_efficiency;  // b, bytes/s per direction of one ICI link
  const Seconds step = profile.collectives.nvlink_step_latency;
  const Seconds hop = cluster.nvlink_hop_latency;
  const double S = req.size.raw();
  auto finish = [&](TorusPhase p, double edge_hops) {
    p.step_latency = step * static_cast<double>(p.steps);
    p.hop_latency = hop * edge_hops;
    p.transfer = seconds(p.bytes.raw() * p.max_link_load / link);
    out.push_back(p);
  };

  if (req.op == CollectiveOp::kSendRecv) {
    const topology::TorusCoords a = topology::torus_coords(dims, req.gpus[0]), b = topology::torus_coords(dims, req.gpus[1]);
    std::uint32_t hops = 0;
    for (std::size_t x = 0; x < 3; ++x) hops += topology::axis_distance(dims[x], wraps, a[x], b[x]);
    TorusPhase p{TorusStep::kSendRecv, -1, 2, req.size, 1, {}, {}, hops > 0 ? 1.0 : 0.0, {}};
    finish(p, hops);
    return out;
  }

  const topology::TorusBox box = *topology::torus_box(dims, req.gpus);
  const double n = static_cast<double>(req.gpus.size());
  if (req.op == CollectiveOp::kAllToAll) {
    // Every pair sends S/n directly. Along axis a, the pairs whose a-coordinates are (i, j) are (n/k)² and their
    // routes spread over the n/k lines of the box: n/k per line, i.e. weight (n/k)·(1/n) = 1/k of S per (i, j).
    double load = 0;
    std::uint32_t longest = 0;
    for (int a = 0; a < 3; ++a) {
      const auto& m = box.coords[static_cast<std::size_t>(a)];
      const double k = static_cast<double>(m.size());
      std::vector<topology::AxisTransfer> t;
      std::uint32_t far = 0;
      for (std::uint32_t i : m)
        for (std::uint32_t j : m)
          if (i != j) {
            t.push_back({i, j, 1.0 / k});
            far = std::max(far, topology::axis_distance(dims[static_cast<std::size_t>(a)], wraps, i, j));
          }
      load = std::max(load, topology::axis_max_load(dims[static_cast<std::size_t>(a)], wraps, t));
      longest += far;
    }
    finish(TorusPhase{TorusStep::kAllToAll, -1, box.size(), req.size, 1, {}, {}, load, {}}, longest);
    return out;
  }

  // A bidirectional ring over the members of a line: each direction's ring carries (k−1)/k of half the data per
  // edge; the busiest link carries (its edge count) × that.
  auto ring = [&](TorusStep kind, int a, double held, std::uint32_t stage, std::uint32_t part) {
    const auto& m = box.coords[static_cast<std::size_t>(a)];
    const std::uint32_t D = dims[static_cast<std::size_t>(a)], k = static_cast<std::uint32_t>(m.size());
    std::vector<topology::AxisTransfer> t;
    double hops = 0;
    for (std::uint32_t i = 0; i < k; ++i) {
      const std::uint32_t u = m[i], v = m[(i + 1) % k];
      // Between members half the axis apart either way is as short: the clockwise ring (members in increasing
      // order) goes the way of increasing positions, the counter-clockwise ring the other, as FLOW routes them.
      t.push_back({u, v, 1.0, +1});  // clockwise ring
      t.push_back({v, u, 1.0, -1});  // counter-clockwise ring
      hops += topology::axis_distance(D, wraps, u, v);
    }
    const double edges_on_busiest = topology::axis_max_load(D, wraps, t);
    TorusPhase p{kind, a, k, bytes(held), k - 1, {}, {}, edges_on_busiest * (k - 1.0) / k / 2.0, {}, stage, part};
    finish(p, (k - 1.0) * hops / k);  // k−1 steps over edges of hops/k links on average
  };
  // Pipelined chains from the root's position both ways round the line, each through all k − 1 other members
  // with half the buffer, so that every member gets both halves and every directed link carries S/2 (a line on an
  // axis of 2 chips has one route: one chain with all of it); reversed for a reduce. Latency: k − 1 steps.
  const topology::TorusCoords root = topology::torus_coords(dims, req.gpus[std::min<std::size_t>(req.root, req.gpus.size() - 1)]);
  auto chains = [&](TorusStep kind, int a) {
    const auto& m = box.coords[static_cast<std::size_t>(a)];
    const std::uint32_t D = dims[static_cast<std::size_t>(a)], k = static_cast<std::uint32_t>(m.size());
    const std::uint32_t r = static_cast<std::uint32_t>(
        std::lower_bound(m.begin(), m.end(), root[static_cast<std::size_t>(a)]) - m.begin());
    const bool two_ways = topology::axis_is_ring(D, wraps);  // the axis closes into a ring
    const std::uint32_t cw = k - 1, ccw = two_ways ? k - 1 : 0;
    const double cw_share = ccw > 0 ? 0.5 : 1.0;
    std::vector<topology::AxisTransfer> t;
    double cw_hops = 0, ccw_hops = 0;
    for (std::uint32_t j = 0; j < cw; ++j) {
      const std::uint32_t u = m[(r + j) % k], v = m[(r + j + 1) % k];
      t.push_back(kind == TorusStep::kBroadcast ? topology::AxisTransfer{u, v, cw_share, +1}
                                                : topology::AxisTransfer{v, u, cw_share, -1});
      cw_hops += topology::axis_distance(D, wraps, u, v);
    }
    for (std::uint32_t j = 0; j < ccw; ++j) {
      const std::uint32_t u = m[(r + k - j) % k], v = m[(r + k - j - 1) % k];
      t.push_back(kind == TorusStep::kBroadcast ? topology::AxisTransfer{u, v, 0.5, -1}
                                                : topology::AxisTransfer{v, u, 0.5, +1});
      ccw_hops += topology::axis_distance(D, wraps, u, v);
    }
    finish(TorusPhase{kind, a, k, req.size, k - 1, {}, {}, topology::axis_max_load(D, wraps, t), {}},
           std::max(cw_hops, ccw_hops));
  };

  const std::array<int, 3> forward = {0, 1, 2}, backward = {2, 1, 0};
  auto active = [&](int a) { return box.extent(a) > 1; };
  std::vector<int> axes;  // the box's axes with more than one member, x first
  for (int a : forward)
    if (active(a)) axes.push_back(a);
  const auto A = static_cast<std::uint32_t>(axes.size());
  // Part j's reduce-scatter order: the axes rotated by j (one part: x, y, z); its all-gather runs it backwards.
  auto rs_axis = [&](std::uint32_t part, std::uint32_t i) { return axes[(part + i) % A]; };
  switch (req.op) {
    case CollectiveOp::kAllReduce:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllGather: {
      const bool gather_only = req.op == CollectiveOp::kAllGather;
      std::uint32_t stage = 0;
      if (!gather_only) {
        for (std::uint32_t i = 0; i < A; ++i, ++stage)
          for (std::uint32_t j = 0; j < parts; ++j) {
            double held = S / parts;
            for (std::uint32_t before = 0; before < i; ++before) held /= box.extent(rs_axis(j, before));
            ring(TorusStep::kReduceScatter, rs_axis(j, i), held, stage, j);
          }
        if (req.op == CollectiveOp::kReduceScatter) break;
      }
      // All-gather: part j goes back along its reduce-scatter axes, last first, from S/(parts·n) per chip.
      for (std::uint32_t i = 0; i < A; ++i, ++stage)
        for (std::uint32_t j = 0; j < parts; ++j) {
          double held = S / parts / n;
          for (std::uint32_t done = 0; done <= i; ++done) held *= box.extent(rs_axis(j, A - 1 - done));
          ring(TorusStep::kAllGather, rs_axis(j, A - 1 - i), held, stage, j);
        }
      break;
    }
    case CollectiveOp::kBroadcast:
      for (int a : forward)
        if (active(a)) chains(TorusStep::kBroadcast, a);
      break;
    case CollectiveOp::kReduce:
      for (int a : backward)
        if (active(a)) chains(TorusStep::kReduce, a);
      break;
    default:
      break;
  }
  for (std::size_t i = 0; i < out.size() && (req.op == CollectiveOp::kBroadcast || req.op == CollectiveOp::kReduce);
       ++i)
    out[i].stage = static_cast<std::uint32_t>(i);  // chains one axis after another
  return out;
}

namespace {

CollectivePlan torus_plan(const topology::ClusterSpec& cluster, const calibrate::HardwareProfile& profile,
                          const NcclSettings& settings, const CollectiveRequest& req) {
  if (settings.protocol && *settings.protocol != Protocol::kSimple)
    throw InputError(settings.source_file, settings.protocol_line, settings.protocol_column, "nccl.protocol",
                     std::string(to_string(*settings.protocol)) + " is not available for torus here (ICI collectives "
                                                                  "have no NCCL protocols; Simple only)");
  CollectivePlan plan;
  plan.op = req.op;
  plan.algorithm = Algorithm::kTorus;
  plan.protocol = Protocol::kSimple;
  // A stage takes its slowest phase's latency and its slowest phase's transfer (the phases of a stage run on
  // disjoint links; FLOW runs a stage as one set of flows after its latency). The buffer in one part (the axes
  // one after another) or in one part per axis (every axis busy in every stage), whichever is faster: the
  // split pays max_k (k−1) steps per stage, more than Σ (k−1) over the stages on a box of unequal sides, and
  // wins once the transfer dominates.
  struct Timed {
    Seconds latency, hops, transfer;
    std::uint32_t parts = 1;
  };
  auto timed = [&](std::uint32_t parts) {
    Timed t;
    t.parts = parts;
    t.latency = profile.collectives.ring_base_latency;
    const std::vector<TorusPhase> phases = torus_phases(cluster, profile, req, parts);
    for (std::size_t i = 0; i < phases.size();) {
      Seconds lat, hop, transfer;
      std::size_t j = i;
      for (; j < phases.size() && phases[j].stage == phases[i].stage; ++j) {
        if (phases[j].step_latency + phases[j].hop_latency > lat) {
          lat = phases[j].step_latency + phases[j].hop_latency;
          hop = phases[j].hop_latency;
        }
        transfer = std::max(transfer, phases[j].transfer);
      }
      t.latency += lat;
      t.hops += hop;
      t.transfer += transfer;
      i = j;
    }
    return t;
  };
  Timed best = timed(1);
  if (const std::uint32_t parts = torus_axis_parts(cluster, req); parts > 1) {
    const Timed split = timed(parts);
    if (split.latency + split.transfer < best.latency + best.transfer) best = split;
  }
  plan.channels = best.parts;
  const Seconds latency = best.latency, hops = best.hops, transfer = best.transfer;
  plan.latency = latency;
  plan.hop_latency = hops;
  plan.time = req.gpus.size() <= 1 ? seconds(0) : std::max(latency + transfer, settings.launch_overhead);
  const double alg = transfer.raw() > 0 ? req.size.raw() / transfer.raw() : 0;
  plan.bus_bandwidth = bytes_per_second(alg * busbw_factor(req.op, static_cast<std::uint32_t>(req.gpus.size())));
  plan.nccl_model_time = plan.time;
  return plan;
}

}  // namespace

std::vector<CollectivePlan> CollectiveModel::candidates(const CollectiveRequest& request) const {
  if (torus_applies(cluster_, request)) {
    std::vector<CollectivePlan> out = {torus_plan(cluster_, profile_, NcclSettings{}, request)};
    if (request.op == CollectiveOp::kBroadcast || request.op == CollectiveOp::kReduce)
      out.push_back(Evaluator(cluster_, profile_, settings_, request, route_topology_.get())
                        .make(Algorithm::kRing, Protocol::kSimple));
    return out;
  }
  Evaluator e(cluster_, profile_, settings_, request, route_topology_.get());
  std::vector<CollectivePlan> out;
  for (Algorithm a : e.algorithms(false))
    for (Protocol p : e.protocols(a)) out.push_back(e.make(a, p));
  return out;
}

CollectivePlan CollectiveModel::plan(const CollectiveRequest& request) const {
  // NCCL_ALGO selects among collective algorithms only: AlltoAll and Send/Recv are point-to-point operations
  // whatever it says (nccl-tests' alltoall_perf runs under NCCL_ALGO=RING), so a forced algorithm other than p2p
  // does not apply to them.
  const bool p2p_op = request.op == CollectiveOp::kAllToAll || request.op == CollectiveOp::kSendRecv;
  const bool forced = settings_.algorithm.has_value() &&
                      !(p2p_op && *settings_.algorithm != Algorithm::kPointToPoint);
  // A torus box runs the per-dimension ICI decomposition unless another algorithm is forced (NCCL's ring, each
  // edge routed in dimension order over the ICI links, stays available for comparison).
  if ((!forced || *settings_.algorithm == Algorithm::kTorus) && torus_applies(cluster_, request)) {
    CollectivePlan torus = torus_plan(cluster_, profile_, settings_, request);
    // Broadcast and Reduce chain one axis after another (1.5 S/b on a cube), where the ring through the box
    // pipelines the whole buffer once (S/b): the faster one runs, as a library choosing by time would.
    if (!forced && (request.op == CollectiveOp::kBroadcast || request.op == CollectiveOp::kReduce)) {
      const CollectivePlan ring = Evaluator(cluster_, profile_, settings_, request, route_topology_.get())
                                      .make(Algorithm::kRing, Protocol::kSimple);
      if (ring.time < torus.time) return ring;
    }
    return torus;
  }
  Evaluator e(cluster_, profile_, settings_, request, route_topology_.get());
  std::vector<Algorithm> algos = e.algorithms(forced);
  if (forced) {
    const Algorithm want = *settings_.algorithm;
    if (std::find(algos.begin(), algos.end(), want) == algos.end()) {
      std::string why = std::string(to_string(want)) + " cannot run " + to_string(request.op) + " on these " +
                        std::to_string(request.gpus.size()) + " GPUs";
      if (const std::string reason = e.unavailable(want); !reason.empty()) why += ": " + reason;
      why += " (candidates:";
      for (Algorithm a : algos) why += std::string(" ") + to_string(a);
      throw InputError(settings_.source_file, settings_.algorithm_line, settings_.algorithm_column, "nccl.algorithm",
                       why + ")");
    }
    algos = {want};
  }
  std::optional<CollectivePlan> best;
  for (Algorithm a : algos) {
    std::vector<Protocol> protos = e.protocols(a, settings_.protocol == Protocol::kLL128);
    if (settings_.protocol) {
      if (std::find(protos.begin(), protos.end(), *settings_.protocol) == protos.end()) {
        if (forced || algos.size() == 1)
          throw InputError(
              settings_.source_file, settings_.protocol_line, settings_.protocol_column, "nccl.protocol",
              std::string(to_string(*settings_.protocol)) + " is not available for " + to_string(a) + " here");
        continue;
      }
      protos = {*settings_.protocol};
    }
    for (Protocol p : protos) {
      const CollectivePlan c = e.make(a, p);
      if (!best || c.nccl_model_time < best->nccl_model_time) best = c;
    }
  }
  if (!best) {
    throw InputError(settings_.source_file, settings_.protocol_line, settings_.protocol_column, "nccl.protocol",
                     "no algorithm offers the forced protocol here");
  }
  return *best;
}

}  // namespace clustersim::workloads
