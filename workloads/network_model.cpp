#include "workloads/network_model.h"

#include <algorithm>
#include <cassert>
#include <map>

#include "sim/flow_network.h"
#include "topology/topology.h"

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

void NetworkModel::run_allreduce(const CollectiveCall& call, std::function<void()> done) {
  Impl& m = *impl_;
  const topology::Topology& topo = m.topo;
  const auto& constants = m.scenario.profile.collectives;
  const std::size_t n = call.gpus.size();
  assert(n > 1);

  // Ranks grouped by NVLink domain, domains in order of first appearance, ranks in call order.
  std::vector<std::uint32_t> domain_order;
  std::map<std::uint32_t, std::vector<std::uint32_t>> by_domain;
  for (std::uint32_t g : call.gpus) {
    const std::uint32_t d = topo.nvlink_domain_of(g);
    if (by_domain.find(d) == by_domain.end()) domain_order.push_back(d);
    by_domain[d].push_back(g);
  }
  const std::size_t domains = domain_order.size();
  std::size_t channels = 1;
  if (domains > 1) {
    channels = n;
    for (const auto& [d, ranks] : by_domain) channels = std::min(channels, ranks.size());
  }

  // Per-step software latencies as the analytical model counts them (NCCL ncclTopoTuneModel):
  // 2(n−1) steps, 2(domains−1) of them across domains.
  const double steps = 2.0 * double(n - 1);
  const double inter_steps = 2.0 * double(domains - 1);
  const double intra_steps = steps - inter_steps;

  auto pending = std::make_shared<std::size_t>(channels);
  auto finished = std::make_shared<std::function<void()>>(std::move(done));
  const Bytes per_edge = call.size * (steps / double(n)) / double(channels);
  std::vector<sim::LinkId> path;
  for (std::size_t c = 0; c < channels; ++c) {
    path.clear();
    Seconds intra_latency, inter_latency;
    std::size_t intra_edges = 0, inter_edges = 0;
    auto add_route = [&](std::uint32_t a, std::uint32_t b) {
      const auto links = topo.route(a, b, c);
      for (topology::LinkIndex l : links) path.push_back(m.link_of[l]);
      return topo.latency(links);
    };
    if (domains == 1) {
      for (std::size_t i = 0; i < n; ++i) {
        intra_latency += add_route(call.gpus[i], call.gpus[(i + 1) % n]);
        ++intra_edges;
      }
    } else {
      for (std::size_t di = 0; di < domains; ++di) {
        const auto& local = by_domain[domain_order[di]];
        const auto& next = by_domain[domain_order[(di + 1) % domains]];
        const std::size_t m_local = local.size();
        // Inside the domain: local ranks starting at local index c.
        for (std::size_t j = 0; j + 1 < m_local; ++j) {
          intra_latency += add_route(local[(c + j) % m_local], local[(c + j + 1) % m_local]);
          ++intra_edges;
        }
        // Leave through the entry rank's rail (PXN: the last rank hands its data over NVLink to the
        // rank whose NIC is rail c), arrive on the next domain's rail-c rank.
        const std::uint32_t exit_rank = local[(c + m_local - 1) % m_local];
        const std::uint32_t rail_rank = local[c % m_local];
        Seconds hop;
        if (exit_rank != rail_rank) hop += add_route(exit_rank, rail_rank);
        hop += add_route(rail_rank, next[c % next.size()]);
        inter_latency += hop;
        ++inter_edges;
      }
    }
    Seconds latency = constants.ring_base_latency + constants.nvlink_step_latency * intra_steps +
                      constants.network_step_latency * inter_steps;
    if (intra_edges) latency += intra_latency * (intra_steps / double(intra_edges));
    if (inter_edges) latency += inter_latency * (inter_steps / double(inter_edges));
    m.flows.start(path, per_edge, latency, [pending, finished] {
      if (--*pending == 0) (*finished)();
    });
  }
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
