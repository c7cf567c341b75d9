#include "workloads/network_model.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <map>
#include <memory>

#include "sim/flow_network.h"
#include "topology/topology.h"
#include "topology/torus.h"

namespace clustersim::workloads {

struct NetworkModel::Impl {
  sim::Simulation& sim;
  const Scenario& scenario;
  topology::Topology topo;
  sim::FlowNetwork flows;
  std::vector<sim::LinkId> link_of;  // topology link → flow-network link
  bool record_rates = false;
  std::vector<std::vector<std::pair<sim::SimTime, double>>> rate_samples;  // per topology link

  Impl(sim::Simulation& s, const Scenario& sc) : sim(s), scenario(sc), topo(sc.cluster), flows(s) {
    const auto& c = sc.profile.collectives;
    for (topology::LinkIndex i = 0; i < topo.link_count(); ++i) {
      const topology::LinkInfo l = topo.link(i);
      const bool scale_up = l.kind == topology::LinkKind::kNvlink || l.kind == topology::LinkKind::kIci;
      const double efficiency = scale_up ? c.nvlink_bus_efficiency : c.network_bus_efficiency;
      link_of.push_back(flows.add_link(l.up ? l.bandwidth * efficiency : bytes_per_second(0)));
    }
  }
};

NetworkModel::NetworkModel(sim::Simulation& sim, const Scenario& scenario)
    : impl_(std::make_unique<Impl>(sim, scenario)) {}

NetworkModel::~NetworkModel() = default;

void NetworkModel::record_rates() {
  impl_->record_rates = true;
  impl_->rate_samples.assign(impl_->topo.link_count(), {});
  // Flow-network links were created in topology order, so the indices coincide.
  impl_->flows.set_rate_observer([this](sim::LinkId link, sim::SimTime t, BytesPerSecond rate) {
    impl_->rate_samples[link.index].emplace_back(t, rate.raw());
  });
}

namespace {

// The ranks of a communicator grouped by NVLink domain: domains in order of first appearance,
// ranks in communicator order. A node without NVLink (PCIe only) is one domain, as NCCL builds one ring
// segment per node and the closed form (communicator_span.h) counts one: a GPU alone would send every
// channel out through the NIC of the node's last rank.
struct Domains {
  std::vector<std::vector<std::uint32_t>> ranks;
};

Domains group(const topology::Topology& topo, const std::vector<std::uint32_t>& gpus) {
  Domains d;
  std::map<std::uint32_t, std::size_t> index;
  // A PCIe-only node is one domain, and so is each node of an explicit cluster, as NCCL counts nodes and the
  // closed form groups them (topology::domain_of): a GPU there without NVLink would be a domain of its own.
  const bool by_node = topo.spec().node.scale_up == topology::ScaleUp::kPcieOnly || topo.spec().is_explicit();
  for (std::uint32_t g : gpus) {
    const std::uint32_t dom = by_node ? topo.spec().node_of(g) : topo.nvlink_domain_of(g);
    auto it = index.find(dom);
    if (it == index.end()) {
      it = index.emplace(dom, d.ranks.size()).first;
      d.ranks.emplace_back();
    }
    d.ranks[it->second].push_back(g);
  }
  return d;
}

}  // namespace

// The links a flow loads, with the share of its bytes each carries (empty shares: all 1; a link listed twice
// carries them twice). Shares other than 1 come from adaptive routing (topology::Topology::spread).
struct NetworkModel::Path {
  std::vector<sim::LinkId> links;
  std::vector<double> shares;
  void add(sim::LinkId link, double share = 1.0) {
    if (share != 1.0 && shares.empty()) shares.assign(links.size(), 1.0);
    links.push_back(link);
    if (!shares.empty()) shares.push_back(share);
  }
  // One entry per link, its shares summed (in path order): the same load, fewer incidences for the flow network.
  // Under adaptive routing an AlltoAll's coflow crosses its leaf's uplinks once per peer: thousands of entries
  // that become a few dozen.
  void merge_repeats() {
    if (links.size() < 2) return;
    std::vector<std::pair<std::uint32_t, double>> by_link;
    by_link.reserve(links.size());
    for (std::size_t k = 0; k < links.size(); ++k)
      by_link.emplace_back(links[k].index, shares.empty() ? 1.0 : shares[k]);
    std::stable_sort(by_link.begin(), by_link.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    links.clear();
    shares.clear();
    for (const auto& [l, share] : by_link) {
      if (!links.empty() && links.back().index == l) {
        shares.back() += share;
      } else {
        links.push_back(sim::LinkId{l});
        shares.push_back(share);
      }
    }
  }
};

// A rate-coupled flow: `bytes` cross every link of `path` at the link's share.
struct NetworkModel::Coflow {
  Path path;
  Bytes bytes;
  BytesPerSecond bound = sim::FlowNetwork::kUnbounded;
};

void NetworkModel::append_route(Path& path, std::uint32_t a, std::uint32_t b, std::uint64_t key, int times,
                                Seconds* latency, double share) const {
  if (a == b) return;
  const topology::Topology& topo = impl_->topo;
  const auto links = topo.route(a, b, key);
  // Only a route through a fabric switch spreads (most routes stay inside a node: the route as it is).
  const bool through_fabric = std::any_of(links.begin(), links.end(), [&topo](topology::LinkIndex l) {
    return topology::is_fabric_switch(topo.vertex(topo.link(l).to).kind);
  });
  if (through_fabric && impl_->scenario.cluster.fabric.routing == topology::FabricRouting::kAdaptive) {
    const std::vector<topology::SpreadLink> spread = impl_->topo.spread(a, b, key);
    for (int t = 0; t < times; ++t)
      for (const topology::SpreadLink& l : spread) path.add(impl_->link_of[l.link], l.share * share);
  } else {
    for (int t = 0; t < times; ++t)
      for (topology::LinkIndex l : links) path.add(impl_->link_of[l], share);
  }
  if (latency) *latency += impl_->topo.latency(links);
}

// Channel c of NCCL's ring over `gpus` (see the header). With `chain`, the edge that closes the ring
// is left out (Broadcast/Reduce pipelines from the root). Returns the edges' routed links and the
// summed link latencies of the intra- and inter-domain edges.
void NetworkModel::ring_path(const std::vector<std::uint32_t>& gpus, std::size_t c, bool chain, Path& path,
                             Seconds& intra, Seconds& inter, std::size_t& intra_edges, std::size_t& inter_edges) const {
  const Domains d = group(impl_->topo, gpus);
  const std::size_t domains = d.ranks.size();
  // On a torus an edge between chips that are not neighbours goes link by link in dimension order
  // (topology::torus_walk), the route the ANALYTICAL ring counts its links' loads on (nccl_model.cpp).
  const topology::ClusterSpec& cluster = impl_->scenario.cluster;
  const bool torus = cluster.is_torus();
  if (domains == 1) {
    const std::size_t n = gpus.size();
    for (std::size_t i = 0; i + (chain ? 1 : 0) < n; ++i) {
      if (torus) {
        const std::vector<std::uint32_t> walk =
            topology::torus_walk(cluster.node.torus, cluster.node.torus_wraps, gpus[i], gpus[(i + 1) % n]);
        for (std::size_t h = 0; h + 1 < walk.size(); ++h) append_route(path, walk[h], walk[h + 1], c, 1, &intra);
      } else {
        append_route(path, gpus[i], gpus[(i + 1) % n], c, 1, &intra);
      }
      ++intra_edges;
    }
    return;
  }
  for (std::size_t di = 0; di < domains; ++di) {
    const auto& local = d.ranks[di];
    const std::size_t m = local.size();
    for (std::size_t j = 0; j + 1 < m; ++j) {
      append_route(path, local[(c + j) % m], local[(c + j + 1) % m], c, 1, &intra);
      ++intra_edges;
    }
    if (chain && di + 1 == domains) break;
    // Leave through rail c (PXN: the last rank hands over on NVLink to the rank whose NIC is rail c),
    // arrive on the next domain's rail-c rank.
    const auto& next = d.ranks[(di + 1) % domains];
    const std::uint32_t exit_rank = local[(c + m - 1) % m], rail_rank = local[c % m];
    Seconds hop;
    append_route(path, exit_rank, rail_rank, c, 1, &hop);
    append_route(path, rail_rank, next[c % next.size()], c, 1, &hop);
    inter += hop;
    ++inter_edges;
  }
}

void NetworkModel::start_phase(std::vector<Coflow> flows, Seconds latency, std::function<void()> done) {
  auto pending = std::make_shared<std::size_t>(flows.size());
  auto finished = std::make_shared<std::function<void()>>(std::move(done));
  if (flows.empty()) {
    impl_->sim.schedule_after(sim::to_sim_time(latency), [finished] { (*finished)(); });
    return;
  }
  // Adaptive routing's coflows list each fabric link once per edge that spreads over it: merged to one entry per
  // link. (Static routings keep their paths as they are, so their results stay bit for bit.)
  if (impl_->scenario.cluster.fabric.routing == topology::FabricRouting::kAdaptive)
    for (Coflow& f : flows) f.path.merge_repeats();
  for (Coflow& f : flows)
    impl_->flows.start(
        f.path.links, f.path.shares, f.bytes, latency,
        [pending, finished] {
          if (--*pending == 0) (*finished)();
        },
        1.0, f.bound);
}

void NetworkModel::run_phases(std::shared_ptr<Phases> phases, std::size_t next,
                              std::shared_ptr<std::function<void()>> done) {
  if (next == phases->size()) {
    (*done)();
    return;
  }
  auto& [flows, latency] = (*phases)[next];
  start_phase(std::move(flows), latency, [this, phases, next, done] { run_phases(phases, next + 1, done); });
}

void NetworkModel::run_torus(const CollectivePlan& plan, const CollectiveRequest& req, std::function<void()> done) {
  const topology::ClusterSpec& cluster = impl_->scenario.cluster;
  const topology::TorusDims& dims = cluster.node.torus;
  const bool wraps = cluster.node.torus_wraps;
  const std::vector<TorusPhase> phases = torus_phases(cluster, impl_->scenario.profile, req, plan.channels);
  const double wire = plan.wire_factor;
  auto out = std::make_shared<Phases>();

  if (req.op == CollectiveOp::kSendRecv || req.op == CollectiveOp::kAllToAll) {
    assert(phases.size() == 1);
    const TorusPhase& p = phases[0];
    std::vector<Coflow> flows;
    Seconds longest;
    if (req.op == CollectiveOp::kSendRecv) {
      Coflow f;
      append_route(f.path, req.gpus[0], req.gpus[1], 0, 1, &longest);
      f.bytes = bytes(p.bytes.raw() * wire);
      flows.push_back(std::move(f));
    } else {
      // Every rank sends S/n to each other rank at once, in dimension order (x, then y, then z; a tie split
      // over both ways). On each line of the box along axis a the pairs whose a-coordinates are (i, j) send
      // S/k_a between them (torus_phases); topology::axis_loads turns that into each directed link's share of S.
      // One flow per loaded link carries it: n² pair flows (4,096 on a 4x4x4 cube, 262,144 on 8x8x8) would add
      // nothing to the contention-free time, and the links' totals are what other traffic shares with.
      const topology::TorusBox box = *topology::torus_box(dims, req.gpus);
      for (std::size_t a = 0; a < 3; ++a) {
        const auto& m = box.coords[a];
        const std::uint32_t D = dims[a];
        if (m.size() < 2) continue;
        std::vector<topology::AxisTransfer> t;
        for (std::uint32_t i : m)
          for (std::uint32_t j : m)
            if (i != j) t.push_back({i, j, 1.0 / double(m.size())});
        std::vector<double> plus, minus;
        topology::axis_loads(D, wraps, t, plus, minus);
        const std::size_t b = (a + 1) % 3, c = (a + 2) % 3;
        for (std::uint32_t yb : box.coords[b])
          for (std::uint32_t yc : box.coords[c])
            for (std::uint32_t i = 0; i < D; ++i)
              for (const bool forward : {true, false}) {
                const double load = forward ? plus[i] : minus[i];
                if (!(load > 0)) continue;
                topology::TorusCoords u{}, v{};
                u[b] = v[b] = yb, u[c] = v[c] = yc;
                u[a] = forward ? i : (i + 1) % D;
                v[a] = forward ? (i + 1) % D : i;
                Coflow f;
                append_route(f.path, topology::torus_chip(dims, u), topology::torus_chip(dims, v), 0, 1, nullptr);
                f.bytes = bytes(p.bytes.raw() * load * wire);
                flows.push_back(std::move(f));
              }
      }
      longest = p.hop_latency;  // the farthest pair's links (torus_phases)
    }
    out->emplace_back(std::move(flows), impl_->scenario.profile.collectives.ring_base_latency + p.step_latency + longest);
    run_phases(out, 0, std::make_shared<std::function<void()>>(std::move(done)));
    return;
  }

  const topology::TorusBox box = *topology::torus_box(dims, req.gpus);
  const topology::TorusCoords root =
      topology::torus_coords(dims, req.gpus[std::min<std::size_t>(req.root, req.gpus.size() - 1)]);
  // The phases of one stage (torus_phases: one per part, each on its own axis) run as one set of flows after the
  // longest of their latencies.
  std::vector<Coflow> stage_flows;
  Seconds stage_latency;
  for (std::size_t index = 0; index < phases.size(); ++index) {
    const TorusPhase& p = phases[index];
    const int a = p.axis;
    const auto ua = static_cast<std::size_t>(a);
    const auto& m = box.coords[ua];
    const std::uint32_t k = static_cast<std::uint32_t>(m.size());
    const std::size_t b = (ua + 1) % 3, c = (ua + 2) % 3;
    std::vector<Coflow> flows;
    Seconds link_latency;
    bool first_line = true;
    for (std::uint32_t yb : box.coords[b]) {
      for (std::uint32_t yc : box.coords[c]) {
        topology::TorusCoords at{};
        at[b] = yb, at[c] = yc;
        // Broadcast (axes x, y, z in turn) acts on the lines whose coordinates on the axes still to come are the
        // root's (those that hold the data); Reduce (z, y, x) on the lines whose coordinates on the axes already
        // reduced are the root's (those that still hold partial sums: every line of the first axis, then the root's
        // plane, then the root's line). Either way: the axes after `ua` in x, y, z order.
        const bool later_b = b > ua;
        const bool later_c = c > ua;
        const bool chain = p.step == TorusStep::kBroadcast || p.step == TorusStep::kReduce;
        if (chain && ((later_b && yb != root[b]) || (later_c && yc != root[c]))) continue;
        // From member i to member j of the line, link by link along the axis (topology::torus_walk: the short
        // way; half the axis apart, `tie`: the clockwise ring and chain go the way of increasing positions, the
        // others the other way, as torus_phases counts the links' loads).
        auto hop_by_hop = [&](Path& path, std::uint32_t i, std::uint32_t j, int tie, Seconds* latency) {
          topology::TorusCoords from = at, to = at;
          from[ua] = m[i % k];
          to[ua] = m[j % k];
          const std::vector<std::uint32_t> walk =
              topology::torus_walk(dims, wraps, topology::torus_chip(dims, from), topology::torus_chip(dims, to), tie);
          for (std::size_t h = 0; h + 1 < walk.size(); ++h) append_route(path, walk[h], walk[h + 1], 0, 1, latency);
        };
        Seconds lat;
        if (!chain) {
          Coflow cw, ccw;
          for (std::uint32_t i = 0; i < k; ++i) {
            hop_by_hop(cw.path, i, i + 1, +1, &lat);
            hop_by_hop(ccw.path, i + 1, i, -1, nullptr);
          }
          cw.bytes = ccw.bytes = bytes((k - 1.0) / k * p.bytes.raw() / 2.0 * wire);
          flows.push_back(std::move(cw));
          flows.push_back(std::move(ccw));
          if (first_line) link_latency = lat * ((k - 1.0) / k);  // k−1 steps over the k edges' latencies
        } else {
          const std::uint32_t r = static_cast<std::uint32_t>(std::lower_bound(m.begin(), m.end(), root[ua]) - m.begin());
          // Both ways round through all k − 1 others, half the buffer each (one way on an axis that is no ring).
          const std::uint32_t ncw = k - 1, nccw = topology::axis_is_ring(dims[ua], wraps) ? k - 1 : 0;
          const bool reduce = p.step == TorusStep::kReduce;
          Coflow cw, ccw;
          for (std::uint32_t j = 0; j < ncw; ++j) {
            const std::uint32_t u = r + j, v = r + j + 1;
            if (reduce)
              hop_by_hop(cw.path, v, u, -1, &lat);
            else
              hop_by_hop(cw.path, u, v, +1, &lat);
          }
          Seconds ccw_lat;
          for (std::uint32_t j = 0; j < nccw; ++j) {
            const std::uint32_t u = r + k - j, v = r + k - j - 1;
            if (reduce)
              hop_by_hop(ccw.path, v, u, +1, &ccw_lat);
            else
              hop_by_hop(ccw.path, u, v, -1, &ccw_lat);
          }
          cw.bytes = bytes(p.bytes.raw() * (nccw > 0 ? 0.5 : 1.0) * wire);
          ccw.bytes = bytes(p.bytes.raw() * 0.5 * wire);
          flows.push_back(std::move(cw));
          if (nccw > 0) flows.push_back(std::move(ccw));
          if (first_line) link_latency = std::max(lat, ccw_lat);  // the longer chain's links, pipelined
        }
        first_line = false;
      }
    }
    stage_latency = std::max(stage_latency, p.step_latency + link_latency);
    for (Coflow& f : flows) stage_flows.push_back(std::move(f));
    if (index + 1 == phases.size() || phases[index + 1].stage != p.stage) {
      Seconds latency = stage_latency;
      if (out->empty()) latency += impl_->scenario.profile.collectives.ring_base_latency;
      out->emplace_back(std::move(stage_flows), latency);
      stage_flows.clear();
      stage_latency = Seconds{};
    }
  }
  run_phases(out, 0, std::make_shared<std::function<void()>>(std::move(done)));
}

void NetworkModel::run(const CollectivePlan& plan, const CollectiveRequest& req, std::function<void()> done) {
  const std::vector<std::uint32_t>& gpus = req.gpus;
  const std::size_t n = gpus.size();
  assert(n > 1);
  const double S = req.size.raw() * plan.wire_factor;
  // The plan's latency without the cluster's nominal hop latencies: the routed links' own latencies
  // replace them where an algorithm's steps follow its edges (rings).
  const Seconds base = plan.latency - plan.hop_latency;
  std::vector<Coflow> flows;
  // Channel c's two binary trees over the domains' rank-c heads (NCCL's double binary tree), each edge up and down
  // at `share` of the coflow's bytes.
  auto tree_edges = [this](Path& path, const Domains& d, std::size_t c, double share) {
    const auto D = static_cast<std::uint32_t>(d.ranks.size());
    for (int tree = 0; tree < 2 && D > 1; ++tree)
      for (std::uint32_t child = 0; child < D; ++child) {
        const std::uint32_t parent = tree_parent(tree, child, D);
        if (parent == D) continue;
        const std::uint32_t a = d.ranks[child][c % d.ranks[child].size()];
        const std::uint32_t b = d.ranks[parent][c % d.ranks[parent].size()];
        append_route(path, a, b, c, 1, nullptr, share);
        append_route(path, b, a, c, 1, nullptr, share);
      }
  };
  switch (plan.algorithm) {
    case Algorithm::kTorus:
      run_torus(plan, req, std::move(done));
      return;
    case Algorithm::kRing: {
      const bool chain = req.op == CollectiveOp::kBroadcast || req.op == CollectiveOp::kReduce;
      std::vector<std::uint32_t> order = gpus;
      if (chain) std::rotate(order.begin(), order.begin() + std::min<std::size_t>(req.root, n - 1), order.end());
      const std::size_t k = plan.channels;
      const double per_edge = S * (chain ? 1.0 : busbw_factor(req.op, static_cast<std::uint32_t>(n))) / double(k);
      // A chunk crosses one edge per step (a chain's n − 1 edges once).
      const double steps = req.op == CollectiveOp::kAllReduce && !chain ? 2.0 * double(n - 1) : double(n - 1);
      Seconds link_latency;
      for (std::size_t c = 0; c < k; ++c) {
        Coflow f;
        Seconds intra, inter;
        std::size_t intra_edges = 0, inter_edges = 0;
        ring_path(order, c, chain, f.path, intra, inter, intra_edges, inter_edges);
        f.bytes = bytes(per_edge);
        // Pipelined steps cross edges in turn: spread the steps over the edges' latencies.
        const std::size_t edges = intra_edges + inter_edges;
        if (c == 0 && edges) link_latency = (intra + inter) * (steps / double(edges));
        flows.push_back(std::move(f));
      }
      start_phase(std::move(flows), base + link_latency, std::move(done));
      return;
    }
    case Algorithm::kPat: {
      // One GPU per node, log2(n) rounds, farthest first (NCCL connects PAT's ranks at power-of-two distances):
      // round k sends 2^(k−1) shards of S/n to the rank n/2^k away (the last round the rest, so that every rank
      // sends (n − 1)/n · S in all). Small shards cross the far links, large ones the near: on an oversubscribed
      // fabric the far rounds share the spine as the routes decide. Each round waits for the previous one.
      const std::size_t rounds = pat_rounds(static_cast<std::uint32_t>(n));
      auto phases = std::make_shared<Phases>();
      std::size_t sent = 0;  // shards of S/n each rank has sent
      for (std::size_t k = 1; k <= rounds; ++k) {
        const std::size_t distance = std::size_t{1} << (rounds - k);
        const std::size_t shards = k < rounds ? std::size_t{1} << (k - 1) : n - 1 - sent;
        sent += shards;
        Coflow f;
        Seconds longest;
        for (std::size_t i = 0; i < n; ++i) {
          Seconds route;
          append_route(f.path, gpus[i], gpus[(i + distance) % n], i, 1, &route);
          longest = std::max(longest, route);
        }
        f.bytes = bytes(S * double(shards) / double(n));
        std::vector<Coflow> round;
        round.push_back(std::move(f));
        phases->emplace_back(std::move(round), (k == 1 ? base : Seconds{}) + longest);
      }
      run_phases(phases, 0, std::make_shared<std::function<void()>>(std::move(done)));
      return;
    }
    case Algorithm::kTree: {
      // Per channel: a chain inside each domain (S/k up and S/k down each edge) and two binary trees
      // over the domains' rail-c ranks (S/2k up and down each edge). Unit: S/2k.
      const Domains d = group(impl_->topo, gpus);
      const std::size_t k = plan.channels;
      for (std::size_t c = 0; c < k; ++c) {
        Coflow f;
        for (const auto& local : d.ranks) {
          const std::size_t m = local.size();
          for (std::size_t j = 0; j + 1 < m; ++j) {
            append_route(f.path, local[(c + j) % m], local[(c + j + 1) % m], c, 2, nullptr);
            append_route(f.path, local[(c + j + 1) % m], local[(c + j) % m], c, 2, nullptr);
          }
        }
        tree_edges(f.path, d, c, 1.0);
        f.bytes = bytes(S / (2.0 * double(k)));
        flows.push_back(std::move(f));
      }
      // The trees' hop latencies are the plan's (its chains' and trees' depth, CollectiveModel), not a route's.
      start_phase(std::move(flows), plan.latency, std::move(done));
      return;
    }
    case Algorithm::kNvls: {
      // Every GPU sends S + S/n to the NVSwitch and receives S/n + S (nccl.md §1.12), at most at the
      // measured NVLS rate.
      Coflow f;
      for (std::size_t i = 0; i < n; ++i) append_route(f.path, gpus[i], gpus[(i + 1) % n], 0, 1, nullptr);
      f.bytes = bytes(S * (1.0 + 1.0 / double(n)));
      if (req.op == CollectiveOp::kAllReduce && impl_->scenario.profile.collectives.nvls_bandwidth.raw() > 0)
        f.bound = impl_->scenario.profile.collectives.nvls_bandwidth;
      else
        f.bytes = bytes(S * busbw_factor(req.op, static_cast<std::uint32_t>(n)));
      flows.push_back(std::move(f));
      break;
    }
    case Algorithm::kNvlsTree: {
      // One coflow of S, as the stages pipeline (the closed form takes the slower): in each domain of m ranks NVLS
      // moves S + S/m up and S/m + S down each GPU's link to its switch, a ring round the domain's ranks as kNvls's,
      // at most at the measured NVLS rate (the least populated domain first reaches it); between the domains, per
      // channel c of k, the two binary trees over the domains' rank-c heads carry S/2k up and down each edge.
      const Domains d = group(impl_->topo, gpus);
      const std::size_t k = plan.channels;
      Coflow f;
      std::size_t least = n;
      for (const auto& local : d.ranks) {
        const std::size_t m = local.size();
        least = std::min(least, m);
        for (std::size_t j = 0; m > 1 && j < m; ++j)
          append_route(f.path, local[j], local[(j + 1) % m], 0, 1, nullptr, 1.0 + 1.0 / double(m));
      }
      for (std::size_t c = 0; c < k; ++c) tree_edges(f.path, d, c, 0.5 / double(k));
      f.bytes = bytes(S);
      f.bound = plan.payload_rate_cap;  // NCCL's per-channel ceiling, a rate of the kernels
      if (const BytesPerSecond nvls = impl_->scenario.profile.collectives.nvls_bandwidth; nvls.raw() > 0)
        f.bound = std::min(f.bound, nvls * (double(least) / double(least + 1)));
      flows.push_back(std::move(f));
      // The trees' hop latencies are the plan's, as the tree's.
      start_phase(std::move(flows), plan.latency, std::move(done));
      return;
    }
    case Algorithm::kCollNet: {
      // The switches reduce: each rank sends its shard up to its leaf, where the reduction in the network begins,
      // and gets the reduced shard back down the same way (the aggregation tree above the leaves carries one
      // stream per leaf, not each rank's: not charged). The legs are the first links of the route towards a rank
      // of the next domain, to the first fabric switch, and the last links of the route back, from the last one.
      // Inside the domain a reduce-scatter and an all-gather move 2(m − 1) shards per rank. A domain of m ranks
      // has shards of S/m, so each domain is a coflow of its own: with uneven domains the least populated one
      // (the most bytes per NIC) ends last, as the reduction waits for it.
      const Domains d = group(impl_->topo, gpus);
      const topology::Topology& topo = impl_->topo;
      auto is_switch = [&topo](topology::VertexIndex v) { return topology::is_fabric_switch(topo.vertex(v).kind); };
      auto fabric_leg = [&](Path& path, std::uint32_t from, std::uint32_t to, std::uint64_t key, bool up) {
        const auto links = topo.route(from, to, key);
        if (up) {
          for (topology::LinkIndex l : links) {
            path.add(impl_->link_of[l]);
            if (is_switch(topo.link(l).to)) return;
          }
        } else {
          std::size_t first = 0;  // the route's last link out of a fabric switch, and the links after it
          for (std::size_t i = 0; i < links.size(); ++i)
            if (is_switch(topo.link(links[i]).from)) first = i;
          for (std::size_t i = first; i < links.size(); ++i) path.add(impl_->link_of[links[i]]);
        }
      };
      for (std::size_t di = 0; di < d.ranks.size(); ++di) {
        const auto& local = d.ranks[di];
        const auto& next = d.ranks[(di + 1) % d.ranks.size()];
        const std::size_t m = local.size();
        Coflow f;
        for (std::size_t j = 0; j < m; ++j) {
          const std::uint32_t peer = next[j % next.size()];
          fabric_leg(f.path, local[j], peer, j, true);
          fabric_leg(f.path, peer, local[j], j, false);
          if (m > 1) append_route(f.path, local[j], local[(j + 1) % m], j, static_cast<int>(2 * (m - 1)), nullptr);
        }
        f.bytes = bytes(S / double(m));
        flows.push_back(std::move(f));
      }
      break;
    }
    case Algorithm::kHierarchical: {
      // Three phases, each waiting for the previous: ring reduce-scatter inside every domain (a domain of m
      // ranks leaves each with S/m), ring AllReduce of the shards across domains, ring all-gather. The middle
      // phase runs L = the largest domain's rank count rings, ring j through rank j mod m of each domain,
      // each ring S/L: a rank of a domain of m carries ceil(L/m) rings (S/m in all where m divides L, e.g.
      // every rank of an even layout), so with uneven domains the least populated one's NICs carry the most.
      const Domains d = group(impl_->topo, gpus);
      std::size_t L = 0;
      for (const auto& local : d.ranks) L = std::max(L, local.size());
      const std::size_t D = d.ranks.size();
      auto intra_phase = [this, d, S]() {
        std::vector<Coflow> out;
        for (const auto& local : d.ranks) {
          const std::size_t m = local.size();
          if (m < 2) continue;
          Coflow f;
          for (std::size_t j = 0; j < m; ++j) append_route(f.path, local[j], local[(j + 1) % m], 0, 1, nullptr);
          f.bytes = bytes(S * double(m - 1) / double(m));
          out.push_back(std::move(f));
        }
        return out;
      };
      std::vector<Coflow> inter;
      if (D > 1) {
        for (std::size_t j = 0; j < L; ++j) {
          Coflow f;
          for (std::size_t di = 0; di < D; ++di) {
            const auto& here = d.ranks[di];
            const auto& next = d.ranks[(di + 1) % D];
            append_route(f.path, here[j % here.size()], next[j % next.size()], j, 1, nullptr);
          }
          f.bytes = bytes(S / double(L) * 2.0 * double(D - 1) / double(D));
          inter.push_back(std::move(f));
        }
      }
      auto shared_done = std::make_shared<std::function<void()>>(std::move(done));
      start_phase(intra_phase(), base, [this, intra_phase, inter, shared_done]() mutable {
        start_phase(std::move(inter), seconds(0), [this, intra_phase, shared_done] {
          start_phase(intra_phase(), seconds(0), [shared_done] { (*shared_done)(); });
        });
      });
      return;
    }
    case Algorithm::kPointToPoint: {
      // The routed links' latencies replace the nominal hop latency: the longest route's, as every pair of an
      // AlltoAll must arrive.
      Seconds longest;
      if (req.op == CollectiveOp::kSendRecv) {
        Coflow f;
        append_route(f.path, gpus[0], gpus[1], 0, 1, &longest);
        f.bytes = bytes(S);
        flows.push_back(std::move(f));
      } else {
        // AlltoAll: every rank sends S/n to each other rank at once. On a torus each pair goes link by link in
        // dimension order (topology::torus_walk), as the closed form counts the links' loads.
        // Under adaptive routing each rank's coflow is merged to one entry per link as it is built (start_phase
        // would merge it the same way, summing the shares in path order): unmerged, the n coflows held every
        // route's spread at once, n² x (equal-cost links) entries (1,024 ranks on a three-level Clos: about
        // 2 x 10^9, some 24 GB) before any was merged.
        const topology::ClusterSpec& cluster = impl_->scenario.cluster;
        const bool adaptive = cluster.fabric.routing == topology::FabricRouting::kAdaptive;
        std::vector<double> load;  // per flow-network link: the rank's summed share (adaptive)
        std::vector<std::uint32_t> touched;
        if (adaptive) {
          std::uint32_t count = 0;
          for (const sim::LinkId l : impl_->link_of) count = std::max(count, l.index + 1);
          load.assign(count, 0.0);
        }
        for (std::size_t i = 0; i < n; ++i) {
          Coflow f;
          for (std::size_t j = 0; j < n; ++j) {
            if (j == i) continue;
            Seconds route;
            Path pair;
            Path& into = adaptive ? pair : f.path;
            if (cluster.is_torus()) {
              const std::vector<std::uint32_t> walk =
                  topology::torus_walk(cluster.node.torus, cluster.node.torus_wraps, gpus[i], gpus[j]);
              for (std::size_t h = 0; h + 1 < walk.size(); ++h) append_route(into, walk[h], walk[h + 1], i, 1, &route);
            } else {
              append_route(into, gpus[i], gpus[j], i, 1, &route);
            }
            for (std::size_t k = 0; adaptive && k < pair.links.size(); ++k) {  // shares are > 0: 0 is untouched
              const std::uint32_t l = pair.links[k].index;
              if (load[l] == 0.0) touched.push_back(l);
              load[l] += pair.shares.empty() ? 1.0 : pair.shares[k];
            }
            longest = std::max(longest, route);
          }
          if (adaptive) {
            std::sort(touched.begin(), touched.end());  // merge_repeats' order: by link
            for (const std::uint32_t l : touched) {
              f.path.links.push_back(sim::LinkId{l});
              f.path.shares.push_back(load[l]);
              load[l] = 0.0;
            }
            touched.clear();
          }
          f.bytes = bytes(S / double(n));
          flows.push_back(std::move(f));
        }
      }
      start_phase(std::move(flows), base + longest, std::move(done));
      return;
    }
  }
  start_phase(std::move(flows), base, std::move(done));
}

std::vector<LinkUsage> NetworkModel::link_usage() const {
  std::vector<LinkUsage> out;
  const Impl& m = *impl_;
  for (topology::LinkIndex i = 0; i < m.topo.link_count(); ++i) {
    const sim::LinkStats s = m.flows.link_stats(m.link_of[i]);
    if (s.bytes_carried.raw() <= 0) continue;
    const topology::LinkInfo l = m.topo.link(i);
    out.push_back(LinkUsage{std::string(l.name), topology::to_string(l.kind), s.capacity, s.bytes_carried,
                            sim::to_seconds(s.busy_time), s.peak_flows});
  }
  std::stable_sort(out.begin(), out.end(), [](const LinkUsage& a, const LinkUsage& b) {
    return a.bytes_carried != b.bytes_carried ? a.bytes_carried > b.bytes_carried : a.name < b.name;
  });
  return out;
}

std::vector<std::pair<sim::SimTime, double>> NetworkModel::rate_samples(const std::string& link_name) const {
  const topology::LinkIndex i = impl_->topo.find_link(link_name);
  if (i == topology::kNone || i >= impl_->rate_samples.size()) return {};
  return impl_->rate_samples[i];
}

const topology::Topology& NetworkModel::topology() const {
  return impl_->topo;
}

}  // namespace clustersim::workloads
