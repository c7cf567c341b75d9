// Topology: a cluster as a Boost.Graph, with routing and the figures `clustersim topo` prints.
//
// Graph. boost::adjacency_list<vecS, vecS, bidirectionalS> with bundled properties. Vertices are GPUs (and
// TPU-style accelerators), NVSwitches, PCIe switches, host CPUs, NICs and leaf/spine/core switches. Edges are
// DIRECTED links (a full-duplex cable is two edges) with a kind, a bandwidth per direction (BytesPerSecond),
// a latency (Seconds), a stable name "FROM->TO" and an up flag. Link indices 0..link_count()-1 are stable
// and are what routes are made of.
//
// Vertex names (generated forms):
//   n{node}/gpu{i}, n{node}/pcie{i}, n{node}/cpu{i}, n{node}/nic{i}   i = index inside the node
//   n{node}/nvswitch     the node's NVSwitch crossbar (one vertex for all NVSwitch chips: they act as one
//                        non-blocking switch; each GPU has one link of its full NVLink bandwidth to it)
//   nvl{d}/nvswitch      the same for an NVLink domain of several nodes (GB200 NVL72: d = node / 18)
//   rail{r}/leaf{i}      rail-optimised fat tree: leaf i of rail r (NIC r of every node is on rail r)
//   leaf{i}, spine{i}    two-level Clos; spines of the rail-optimised tree are spine{i} too
//   leaf{i}, pod{p}/spine{j}, core{i}   three-level Clos
// Node wiring: GPU i and NIC j sit on PCIe switch floor(i*P/G) and floor(j*P/N), switch k below CPU
// floor(k*C/P); CPUs are joined pairwise by the CPU interconnect. Without PCIe switches a GPU links to its
// CPU (NVLink-C2C when the layout gives it, else PCIe) and to its NIC directly. GPU i's own NIC (its rail)
// is NIC floor(i*N/G). Latencies: a GPU->NVSwitch link and every ICI link carry nvlink_hop_latency,
// a NIC->switch link network_hop_latency + switch_latency, a switch->switch link switch_latency, so a
// path pays each switch it crosses once; PCIe and CPU links carry none.
//
// Fabric sizing (radix k, oversubscription o, NIC port bandwidth b, fabric link bandwidth B): a leaf has
// u = max(1, floor(k*b / (b + o*B))) uplinks and d = min(k - u, floor(o*u*B/b)) downlinks, so d*b / (u*B)
// ~= o (k = 64, o = 1: 32 + 32; o = 4: 48 down + 12 up). Rail-optimised: each rail has ceil(nodes/d) leaves,
// every leaf has one uplink to each of the u spines. Two-level Clos: floor(d / nics_per_node) nodes per leaf
// (all NICs of a node on one leaf), u spines. Three-level Clos: pods of c = min(k/2, leaves) leaves and u
// spines; spine j of every pod links to the c cores of core group j. There is no fabric when the cluster is
// a single NVLink domain, and no spine tier above a single leaf (no core tier above a single pod).
//
// Routing. route(src, dst, flow_key) is a shortest path in hops over up links. GPUs never forward (torus
// chips do: their ICI router is the network). Between NVLink domains, traffic leaves through the source
// GPU's own NIC and enters through the destination GPU's own NIC (NCCL's rail-local choice), each leg a
// shortest path; if that is impossible (a NIC or its link down) the plain shortest path is used. At each hop
// the next links that keep the path shortest are narrowed to the preferred kind (NVLink/ICI before network
// before PCIe before CPU links, so an NVSwitch path wins a tie against a shared PCIe switch). Among what is left,
// a fabric switch (leaf, spine, core) picks by spec.fabric.routing:
//   kDestinationModK: D-mod-k, the destination-based tables an InfiniBand subnet manager programs
//     (OpenSM's fat-tree engine "optimizes routing for congestion-free shift communication pattern", and its
//     min-hop engine balances target LIDs over equal-hop ports; linux-rdma/opensm doc/current-routing.txt). The
//     i-th switch on the path with n > 1 equal ports takes port (key / (n_1 ... n_{i-1})) mod n, key being the
//     destination NIC's ordinal (NICs numbered leaf by leaf, so that one leaf's NICs are consecutive; a GPU's
//     index where the leg ends at a GPU).
//     Every flow to one NIC takes one path, whatever its flow_key; a leaf's consecutive NICs leave on
//     different uplinks, so a ring's node-to-node hops share no fabric link on a full-bisection tree.
//   kEcmpHash: a deterministic hash of (src, dst, flow_key, hop vertex), as Ethernet ECMP hashes each flow's
//     headers: flows can collide on an uplink while others stay idle.
//   kAdaptive (default): adaptive routing, modelled as ideal spraying: spread() gives every link of every
//     equal-cost path its share of the flow (1/n at each switch with n equal ports), and FLOW loads them all;
//     route() returns the D-mod-k path as the representative one (latency, hops). The InfiniBand subnet manager
//     puts "all ports with minimal hops to destination" in one adaptive-routing group on fat trees, and NVIDIA's
//     OpenSM enables AR by default (NVIDIA, InfiniBand Cluster Bring-up Procedure, "Adaptive Routing"); NCCL asks
//     for AR-capable transfers on InfiniBand by default (NCCL_IB_ADAPTIVE_ROUTING). The even split is where
//     per-packet balancing settles when the paths are equally loaded, and on a full-bisection fabric no fabric
//     link is then a bottleneck, whatever the pattern (a leaf's uplinks share evenly what its NICs send up);
//     where one path is busier (a link down, other traffic), real AR moves packets off it and the even split
//     does not, so it is then pessimistic.
// Every other vertex with a choice (inside a node) uses the hash. Distances to each target are
// computed lazily by BFS and cached, and so are resolved routes: Topology is not thread-safe (one per
// simulation). The cache costs O(targets x vertices) small integers.
//
// Bisection bandwidth: the maximum flow (boost::push_relabel_max_flow, integer bytes/s) from a super source
// feeding GPUs 0 .. G/2-1 to a super sink fed by GPUs G/2 .. G-1, over the up links at their (fault-scaled)
// bandwidth, GPUs not forwarding: one direction's worth of what the first half of the GPUs (by index) can
// send the second half at once. On a generated torus: the least such flow over the cuts across each axis
// (the chips below the middle coordinate of the axis against the rest), the torus's true bisection. Diameter: the
// longest route, in links, over all ordered GPU pairs (O(G^2)). Sources of the presets' figures are in
// topology/presets/*.textproto.
#pragma once

#include <array>
#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "topology/cluster_spec.h"

namespace clustersim::topology {

using VertexIndex = std::uint32_t;
using LinkIndex = std::uint32_t;
// A link a flow loads, and the share of the flow's bytes that crosses it (Topology::spread).
struct SpreadLink {
  LinkIndex link = 0;
  double share = 1;
};
inline constexpr std::uint32_t kNone = 0xffffffffu;

struct VertexProps {
  std::string name;
  VertexKind kind = VertexKind::kGpu;
  std::uint32_t node = kNone;  // kNone for fabric switches and multi-node NVSwitches
  std::uint32_t gpu = kNone;   // GPU index, kNone for other vertices
  bool forwards = true;        // may be a transit vertex of a route (false for GPUs outside a torus)
};

struct LinkProps {
  LinkKind kind = LinkKind::kNvlink;
  BytesPerSecond bandwidth = bytes_per_second(0);  // per direction, after faults
  Seconds latency = seconds(0);
  std::string name;  // "FROM->TO"
  bool up = true;
  LinkIndex index = 0;
};

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, VertexProps, LinkProps>;

struct LinkInfo {
  VertexIndex from = 0;
  VertexIndex to = 0;
  LinkKind kind = LinkKind::kNvlink;
  BytesPerSecond bandwidth = bytes_per_second(0);
  Seconds latency = seconds(0);
  std::string_view name;
  bool up = true;
};

// No up path between two GPUs (links down). A consequence of the input, so an InputError-like message.
class NoRouteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct LinkKindStats {
  std::uint32_t count = 0;                     // directed links, up or down
  BytesPerSecond total = bytes_per_second(0);  // summed bandwidth of the up ones
};

// Downlink over uplink bandwidth of a fabric tier: as provisioned for a generated fabric (leaf: d*b / (u*B),
// see the sizing rule; spine of a three-level Clos: 1), the worst switch's for an explicit one.
struct TierOversubscription {
  std::string tier;  // "leaf", "spine"
  double ratio = 0;  // downlink / uplink bandwidth; 0 = no uplinks (one leaf holds every NIC): non-blocking
};

struct TopologyStats {
  std::uint32_t gpus = 0;
  std::map<VertexKind, std::uint32_t> vertices;  // count per kind (GPUs included)
  std::map<LinkKind, LinkKindStats> links;
  std::uint32_t nvlink_domain_size = 0;  // GPUs in the largest NVLink/ICI-connected domain
  std::uint32_t nvlink_domains = 0;
  BytesPerSecond bisection = bytes_per_second(0);
  std::vector<TierOversubscription> oversubscription;
  std::uint32_t diameter_hops = 0;
};

// Leaf ports of a generated fabric (see the sizing rule above).
struct FabricPorts {
  std::uint32_t uplinks = 0;
  std::uint32_t downlinks = 0;
};
FabricPorts fabric_ports(const ClusterSpec& spec);

// How many leaf switches (and, in a three-level Clos, pods) a generated fabric needs for the cluster's NICs,
// checked against the switches' ports; throws InputError (fabric.switch_radix, fabric.kind) where they do not fit.
// Arithmetic only, so that a node count no fabric of this radix holds fails before any node is built (a mistyped
// `nodes: 99999999` is an error at once, not hours of building).
struct FabricShape {
  FabricPorts ports;
  std::uint32_t leaves_per_rail = 0;  // kRailOptimizedFatTree: leaves of each rail
  std::uint32_t nodes_per_leaf = 0;   // otherwise: whole nodes under one leaf
  std::uint32_t leaves = 0;
  std::uint32_t leaves_per_pod = 0;  // kClosThreeLevel only
  std::uint32_t pods = 0;            // kClosThreeLevel only
};
FabricShape fabric_shape(const ClusterSpec& spec);
// Whether a generated cluster has a network fabric at all: more than one NVLink domain (a torus is one), with
// NICs. Only then must fabric_shape() hold its nodes.
bool has_fabric(const ClusterSpec& spec);
// Fabric switches the route from node a's NIC to node b's crosses on a generated fabric of this shape (any rail: the
// rails' leaves hold the same nodes): 1 under one leaf, 3 through a spine, 5 through a core; 0 for one node. Each
// adds the fabric's switch_latency to the route (Topology's link latencies). Only where has_fabric(spec) holds.
std::uint32_t fabric_switches_between(const ClusterSpec& spec, const FabricShape& shape, std::uint32_t node_a,
                                      std::uint32_t node_b);

// ICI links per chip of a torus: 2 per dimension longer than 2, 1 for a dimension of 2, 0 for 1. On a mesh (no
// wraparound) these are the links of a chip inside each line; the chips at a line's ends have one fewer. Every
// link runs at nvlink_per_direction / this.
std::uint32_t torus_links_per_chip(const std::array<std::uint32_t, 3>& dims);

class Topology {
 public:
  // Builds the graph; throws InputError (empty file, field path relative to the cluster, e.g.
  // "link_faults[1].pattern") when a fault selects nothing or the explicit form names an unknown vertex.
  explicit Topology(const ClusterSpec& spec);
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;
  ~Topology();

  const ClusterSpec& spec() const { return spec_; }
  const Graph& graph() const { return graph_; }

  std::uint32_t gpu_count() const { return static_cast<std::uint32_t>(gpu_vertex_.size()); }
  std::uint32_t vertex_count() const { return static_cast<std::uint32_t>(boost::num_vertices(graph_)); }
  std::uint32_t link_count() const { return static_cast<std::uint32_t>(edges_.size()); }
  VertexIndex gpu_vertex(std::uint32_t gpu) const { return gpu_vertex_.at(gpu); }
  std::uint32_t node_of(std::uint32_t gpu) const { return graph_[gpu_vertex(gpu)].node; }
  std::uint32_t nvlink_domain_of(std::uint32_t gpu) const { return domain_.at(gpu); }
  const VertexProps& vertex(VertexIndex v) const { return graph_[v]; }
  LinkInfo link(LinkIndex i) const;
  VertexIndex find_vertex(std::string_view name) const;  // kNone when absent
  LinkIndex find_link(std::string_view name) const;      // kNone when absent

  // The links from GPU src to GPU dst (empty when src == dst). Throws NoRouteError. The span stays valid
  // as long as the Topology.
  std::span<const LinkIndex> route(std::uint32_t src_gpu, std::uint32_t dst_gpu, std::uint64_t flow_key = 0) const;
  // The links a flow from src to dst loads, each with the share of the flow's bytes that crosses it: route()'s
  // links with share 1, except under adaptive routing (FabricRouting::kAdaptive), where a fabric switch with
  // n > 1 equal next links sends 1/n of what reaches it over each (ideal packet spraying over every equal-cost
  // path). Links in hop order, by index within a hop. Throws as route() does. Where a flow passes a vertex
  // with a choice after its first fabric switch (routes around a fault, explicit clusters), the vertex picks by
  // a hash of itself and the target. The spreads from a fabric switch to a target are cached.
  std::vector<SpreadLink> spread(std::uint32_t src_gpu, std::uint32_t dst_gpu, std::uint64_t flow_key = 0) const;
  // route(...).size() without building the route; kNone when there is no route.
  std::uint32_t route_hops(std::uint32_t src_gpu, std::uint32_t dst_gpu) const;
  Seconds latency(std::span<const LinkIndex> path) const;

  BytesPerSecond bisection_bandwidth() const;
  // One direction's maximum flow from the GPUs `first_half` selects to the others (see Bisection above).
  BytesPerSecond max_flow_between(const std::function<bool(std::uint32_t)>& first_half) const;
  std::uint32_t diameter_hops() const;
  TopologyStats stats() const;
  // Graphviz: vertices labelled with name and kind, edges with kind and GB/s; down links dashed.
  void write_graphviz(std::ostream& out) const;

 private:
  // Where a route leg may go: anywhere; inside the target's node or NVLink domain (their vertices are
  // contiguous); NICs and fabric switches only.
  enum class Scope : std::uint8_t { kAny, kNode, kDomain, kFabric };
  struct Range {
    VertexIndex begin = 0, end = 0;
  };

  VertexIndex add_vertex(std::string name, VertexKind kind, std::uint32_t node, std::uint32_t gpu);
  void add_link(VertexIndex from, VertexIndex to, LinkKind kind, BytesPerSecond bandwidth, Seconds latency);
  void add_duplex(VertexIndex a, VertexIndex b, LinkKind kind, BytesPerSecond bandwidth, Seconds to_b_latency,
                  Seconds to_a_latency);
  void build_generated();
  void build_node(std::uint32_t node);
  void build_torus();
  void build_fabric(const FabricShape& shape);
  void build_explicit();
  void apply_faults();
  void compute_domains();

  std::uint32_t slot(VertexIndex v, VertexIndex target, Scope scope) const;
  Range scope_range(VertexIndex target, Scope scope) const;
  std::uint32_t slot_count(VertexIndex target, Scope scope) const;
  const std::vector<std::uint16_t>& distances(VertexIndex target, Scope scope) const;
  // The fabric-scope vertex whose distances + 1 are a NIC's (its only fabric-scope link in, when up); kNone.
  VertexIndex fabric_parent(VertexIndex nic) const;
  std::uint32_t distance(VertexIndex from, VertexIndex target, Scope scope) const;
  // The up links from u that keep a path to target shortest, narrowed to the preferred link kind.
  void next_links(VertexIndex u, VertexIndex target, Scope scope, const std::vector<std::uint16_t>& dist,
                  std::vector<LinkIndex>& candidates) const;
  void walk(VertexIndex from, VertexIndex target, Scope scope, std::uint64_t hash_seed,
            std::vector<LinkIndex>& out) const;
  void walk_spread(VertexIndex from, VertexIndex target, Scope scope, std::uint64_t hash_seed,
                   std::vector<SpreadLink>& out) const;
  std::vector<SpreadLink> spread_from(VertexIndex fabric_switch, VertexIndex target, Scope scope) const;
  // A route's legs (GPU -> own NIC -> fabric -> NIC -> GPU, or one leg), their count returned.
  struct Leg {
    VertexIndex from = 0, target = 0;
    Scope scope = Scope::kAny;
  };
  std::size_t legs(std::uint32_t src, std::uint32_t dst, std::array<Leg, 3>& out) const;  // src != dst
  void check_gpus(std::uint32_t src, std::uint32_t dst) const;                            // throws std::out_of_range
  bool use_rails(std::uint32_t src, std::uint32_t dst) const;
  void assign_explicit_nics();
  bool explicit_rails(std::uint32_t src, std::uint32_t dst) const;
  bool crosses_fabric(const std::vector<LinkIndex>& path) const;  // enters a leaf, spine or core switch
  [[noreturn]] void throw_no_route(std::uint32_t src, std::uint32_t dst) const;

  ClusterSpec spec_;
  Graph graph_;
  std::vector<Graph::edge_descriptor> edges_;  // by LinkIndex
  std::vector<VertexIndex> gpu_vertex_;        // by GPU index
  std::vector<VertexIndex> own_nic_;           // by GPU index; kNone without NICs (explicit: assign_explicit_nics)
  std::vector<std::uint32_t> domain_;          // NVLink domain by GPU index (NVLink/ICI-connected component)
  std::vector<std::uint32_t> group_;           // generated forms: the node group routed locally (the built
                                               // NVLink domain, the whole torus; a PCIe-only node) by GPU
  std::vector<Range> node_range_;              // generated forms: vertices of node n
  std::vector<Range> domain_range_;            // generated forms: vertices of NVLink domain d
  std::vector<std::uint32_t> fabric_slot_;     // dense index of NICs and fabric switches, else kNone
  std::vector<std::uint32_t> destination_key_;  // D-mod-k routing key by vertex (NIC ordinal, GPU index)
  std::uint32_t fabric_slots_ = 0;
  std::unordered_map<std::string, VertexIndex> vertex_by_name_;
  std::unordered_map<std::uint64_t, std::uint32_t> links_between_;  // (from << 32 | to) -> links added
  std::vector<std::string> tiers_;  // fabric tiers present, bottom up ("leaf", "spine")

  mutable std::unordered_map<std::uint64_t, std::unique_ptr<std::vector<std::uint16_t>>> distance_cache_;
  struct RouteKey {
    std::uint32_t src, dst;
    std::uint64_t flow;
    bool operator==(const RouteKey&) const = default;
  };
  struct RouteKeyHash {
    std::size_t operator()(const RouteKey& k) const;
  };
  mutable std::unordered_map<RouteKey, std::vector<LinkIndex>, RouteKeyHash> route_cache_;
  // Adaptive routing's spreads from a fabric switch (src) to a target vertex (dst) in a scope (flow).
  mutable std::unordered_map<RouteKey, std::vector<SpreadLink>, RouteKeyHash> spread_cache_;
};

}  // namespace clustersim::topology
