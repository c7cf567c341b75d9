#include "sim/maxmin.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>

namespace clustersim::sim {

void MaxMinSolver::clear() {
  capacity_.clear();
  sharing_.clear();
  weight_.clear();
  bound_.clear();
  inc_begin_.assign(1, 0);
  inc_link_.clear();
  inc_share_.clear();
  rate_.clear();
  rounds_ = 0;
  components_ = 0;
}

void MaxMinSolver::reserve(std::size_t links, std::size_t flows, std::size_t incidences) {
  capacity_.reserve(links);
  sharing_.reserve(links);
  weight_.reserve(flows);
  bound_.reserve(flows);
  inc_begin_.reserve(flows + 1);
  inc_link_.reserve(incidences);
  inc_share_.reserve(incidences);
}

std::uint32_t MaxMinSolver::add_link(double capacity, LinkSharing sharing) {
  assert(capacity >= 0 && "link capacity must be >= 0 (and not NaN)");
  capacity_.push_back(capacity);
  sharing_.push_back(sharing);
  return static_cast<std::uint32_t>(capacity_.size() - 1);
}

void MaxMinSolver::set_capacity(std::uint32_t link, double capacity) {
  assert(link < capacity_.size());
  assert(capacity >= 0 && "link capacity must be >= 0 (and not NaN)");
  capacity_[link] = capacity;
}

std::uint32_t MaxMinSolver::add_flow(std::span<const std::uint32_t> links, double weight, double bound) {
  return add_flow(links, {}, weight, bound);
}

std::uint32_t MaxMinSolver::add_flow(std::span<const std::uint32_t> links, std::span<const double> shares,
                                     double weight, double bound) {
  assert(weight > 0 && std::isfinite(weight) && "flow weight must be finite and > 0");
  assert(bound >= 0 && "flow bound must be >= 0 (and not NaN)");
  assert((shares.empty() || shares.size() == links.size()) && "one share per link");
  for (std::size_t k = 0; k < links.size(); ++k) {
    assert(links[k] < capacity_.size() && "flow crosses an unknown link");
    const double share = shares.empty() ? 1.0 : shares[k];
    assert(share > 0 && std::isfinite(share) && "a link's share of a flow must be finite and > 0");
    inc_link_.push_back(links[k]);
    inc_share_.push_back(share);
  }
  weight_.push_back(weight);
  bound_.push_back(bound);
  inc_begin_.push_back(static_cast<std::uint32_t>(inc_link_.size()));
  return static_cast<std::uint32_t>(weight_.size() - 1);
}

void MaxMinSolver::solve() {
  const std::size_t n_flows = weight_.size();
  const std::size_t n_links = capacity_.size();
  rate_.assign(n_flows, 0.0);
  rounds_ = 0;
  components_ = 0;

  // Fatpipe links are per-flow bounds: fold them into an effective bound.
  bound_eff_.resize(n_flows);
  for (std::size_t f = 0; f < n_flows; ++f) {
    double b = bound_[f];
    for (std::uint32_t k = inc_begin_[f]; k < inc_begin_[f + 1]; ++k) {
      const std::uint32_t l = inc_link_[k];
      if (sharing_[l] == LinkSharing::kFatpipe) b = std::min(b, capacity_[l] / inc_share_[k]);
    }
    bound_eff_[f] = b;
  }

  // Transpose the shared incidences: each link's flows, in increasing flow index.
  lf_begin_.assign(n_links + 1, 0);
  for (std::uint32_t l : inc_link_) {
    if (sharing_[l] == LinkSharing::kShared) ++lf_begin_[l + 1];
  }
  for (std::size_t l = 0; l < n_links; ++l) lf_begin_[l + 1] += lf_begin_[l];
  lf_flow_.resize(lf_begin_[n_links]);
  lf_share_.resize(lf_begin_[n_links]);
  link_active_.assign(n_links, 0);  // used as the fill cursor here
  for (std::size_t f = 0; f < n_flows; ++f) {
    for (std::uint32_t k = inc_begin_[f]; k < inc_begin_[f + 1]; ++k) {
      const std::uint32_t l = inc_link_[k];
      if (sharing_[l] != LinkSharing::kShared) continue;
      const std::uint32_t j = lf_begin_[l] + link_active_[l]++;
      lf_flow_[j] = static_cast<std::uint32_t>(f);
      lf_share_[j] = inc_share_[k];
    }
  }

  link_rem_.resize(n_links);
  link_weight_.resize(n_links);
  link_level_.resize(n_links);
  flow_state_.assign(n_flows, 0);
  link_seen_.assign(n_links, 0);
  comp_flows_.clear();
  comp_links_.clear();

  // Components by breadth-first search from the lowest unseen flow; the queue is comp_flows_
  // itself. The discovery order depends only on the component's own structure and relative
  // index order, which is what makes a component's rates independent of the other flows.
  for (std::size_t seed = 0; seed < n_flows; ++seed) {
    if (flow_state_[seed] != 0) continue;
    const std::size_t flow_begin = comp_flows_.size();
    const std::size_t link_begin = comp_links_.size();
    flow_state_[seed] = 1;
    comp_flows_.push_back(static_cast<std::uint32_t>(seed));
    for (std::size_t q = flow_begin; q < comp_flows_.size(); ++q) {
      const std::uint32_t g = comp_flows_[q];
      for (std::uint32_t k = inc_begin_[g]; k < inc_begin_[g + 1]; ++k) {
        const std::uint32_t l = inc_link_[k];
        if (sharing_[l] != LinkSharing::kShared || link_seen_[l]) continue;
        link_seen_[l] = 1;
        comp_links_.push_back(l);
        for (std::uint32_t j = lf_begin_[l]; j < lf_begin_[l + 1]; ++j) {
          const std::uint32_t h = lf_flow_[j];
          if (flow_state_[h] == 0) {
            flow_state_[h] = 1;
            comp_flows_.push_back(h);
          }
        }
      }
    }
    ++components_;
    fill_component(flow_begin, comp_flows_.size(), link_begin, comp_links_.size());
  }
}

void MaxMinSolver::freeze(std::uint32_t f, double rate) {
  rate_[f] = rate;
  const double w = weight_[f];
  for (std::uint32_t k = inc_begin_[f]; k < inc_begin_[f + 1]; ++k) {
    const std::uint32_t l = inc_link_[k];
    if (sharing_[l] != LinkSharing::kShared) continue;
    link_rem_[l] -= inc_share_[k] * rate;
    link_weight_[l] -= inc_share_[k] * w;
    if (--link_active_[l] == 0) link_weight_[l] = 0;
  }
}

void MaxMinSolver::fill_component(std::size_t flow_begin, std::size_t flow_end, std::size_t link_begin,
                                  std::size_t link_end) {
  for (std::size_t i = link_begin; i < link_end; ++i) {
    const std::uint32_t l = comp_links_[i];
    link_rem_[l] = capacity_[l];
    link_weight_[l] = 0;
    link_active_[l] = 0;
  }
  for (std::size_t i = flow_begin; i < flow_end; ++i) {
    const std::uint32_t f = comp_flows_[i];
    for (std::uint32_t k = inc_begin_[f]; k < inc_begin_[f + 1]; ++k) {
      const std::uint32_t l = inc_link_[k];
      if (sharing_[l] != LinkSharing::kShared) continue;
      link_weight_[l] += inc_share_[k] * weight_[f];
      ++link_active_[l];
    }
  }
  active_links_.assign(comp_links_.begin() + static_cast<std::ptrdiff_t>(link_begin),
                       comp_links_.begin() + static_cast<std::ptrdiff_t>(link_end));
  active_flows_.assign(comp_flows_.begin() + static_cast<std::ptrdiff_t>(flow_begin),
                       comp_flows_.begin() + static_cast<std::ptrdiff_t>(flow_end));

  while (!active_flows_.empty()) {
    ++rounds_;
    // The level at which each remaining constraint would become tight; lambda is the lowest.
    double lambda = kUnboundedRate;
    for (std::uint32_t l : active_links_) {
      if (!(link_weight_[l] > 0)) {
        // Subtracting weights of very different magnitudes can cancel to <= 0 while flows remain:
        // recompute the sum exactly from the link's unfrozen flows.
        double w = 0;
        for (std::uint32_t j = lf_begin_[l]; j < lf_begin_[l + 1]; ++j) {
          if (flow_state_[lf_flow_[j]] == 1) w += lf_share_[j] * weight_[lf_flow_[j]];
        }
        link_weight_[l] = w;
      }
      const double level = link_rem_[l] > 0 ? link_rem_[l] / link_weight_[l] : 0.0;
      link_level_[l] = level;
      lambda = std::min(lambda, level);
    }
    for (std::uint32_t f : active_flows_) lambda = std::min(lambda, bound_eff_[f] / weight_[f]);

    if (lambda == kUnboundedRate) {  // nothing limits the remaining flows
      for (std::uint32_t f : active_flows_) {
        flow_state_[f] = 2;
        rate_[f] = kUnboundedRate;
      }
      break;
    }

    // Everything within a relative epsilon of lambda saturates in this round.
    const double threshold = lambda + lambda * kMaxMinSaturationEpsilon;
    to_freeze_.clear();
    for (std::uint32_t f : active_flows_) {
      if (bound_eff_[f] / weight_[f] <= threshold) {
        flow_state_[f] = 2;
        to_freeze_.push_back(f);
      }
    }
    for (std::uint32_t l : active_links_) {
      if (link_level_[l] > threshold) continue;
      for (std::uint32_t j = lf_begin_[l]; j < lf_begin_[l + 1]; ++j) {
        const std::uint32_t h = lf_flow_[j];
        if (flow_state_[h] == 1) {
          flow_state_[h] = 2;
          to_freeze_.push_back(h);
        }
      }
    }
    // A frozen flow takes the level of its own tightest constraint (all are >= lambda and
    // computed before this round's freezing), which keeps every link exactly feasible.
    for (std::uint32_t f : to_freeze_) {
      double level = kUnboundedRate;
      for (std::uint32_t k = inc_begin_[f]; k < inc_begin_[f + 1]; ++k) {
        const std::uint32_t l = inc_link_[k];
        if (sharing_[l] == LinkSharing::kShared) level = std::min(level, link_level_[l]);
      }
      freeze(f, std::min(bound_eff_[f], weight_[f] * level));
    }

    std::erase_if(active_flows_, [&](std::uint32_t f) { return flow_state_[f] != 1; });
    std::erase_if(active_links_, [&](std::uint32_t l) { return link_active_[l] == 0; });
  }
}

MaxMinCheck check_max_min(const MaxMinSolver& problem, std::span<const double> rates, double tolerance) {
  MaxMinCheck check;
  const auto n_flows = static_cast<std::uint32_t>(problem.flow_count());
  const auto n_links = static_cast<std::uint32_t>(problem.link_count());
  assert(rates.size() == n_flows);
  char buf[256];
  auto fail = [&](bool& flag, const char* what) {
    flag = false;
    if (check.violation.empty()) check.violation = what;
  };

  std::vector<double> sum(n_links, 0.0);
  std::vector<double> max_norm(n_links, 0.0);  // max rate/weight among the link's flows
  std::vector<double> bound_eff(n_flows);
  for (std::uint32_t f = 0; f < n_flows; ++f) {
    const double r = rates[f];
    double b = problem.bound(f);
    if (!(r >= 0)) {
      std::snprintf(buf, sizeof buf, "flow %u has rate %g (negative or NaN)", f, r);
      fail(check.feasible, buf);
    }
    const std::span<const std::uint32_t> links = problem.links_of(f);
    const std::span<const double> shares = problem.shares_of(f);
    for (std::size_t k = 0; k < links.size(); ++k) {
      const std::uint32_t l = links[k];
      if (problem.sharing(l) == LinkSharing::kFatpipe) {
        b = std::min(b, problem.capacity(l) / shares[k]);
        continue;
      }
      sum[l] += shares[k] * r;
      max_norm[l] = std::max(max_norm[l], r / problem.weight(f));
    }
    bound_eff[f] = b;
    if (std::isfinite(b) && r > b * (1 + tolerance)) {
      std::snprintf(buf, sizeof buf, "flow %u has rate %.17g above its bound (or a fatpipe capacity) %.17g", f, r, b);
      fail(check.feasible, buf);
    }
  }
  for (std::uint32_t l = 0; l < n_links; ++l) {
    const double c = problem.capacity(l);
    if (problem.sharing(l) == LinkSharing::kShared && std::isfinite(c) && sum[l] > c * (1 + tolerance)) {
      std::snprintf(buf, sizeof buf, "shared link %u carries %.17g > capacity %.17g", l, sum[l], c);
      fail(check.feasible, buf);
    }
  }
  for (std::uint32_t f = 0; f < n_flows; ++f) {
    const double r = rates[f];
    if (r >= bound_eff[f] * (1 - tolerance)) continue;  // at its bound (+inf == +inf included)
    bool has_bottleneck = false;
    for (std::uint32_t l : problem.links_of(f)) {
      if (problem.sharing(l) != LinkSharing::kShared) continue;
      const bool saturated = sum[l] >= problem.capacity(l) * (1 - tolerance);
      const bool maximal = r / problem.weight(f) >= max_norm[l] * (1 - tolerance);
      if (saturated && maximal) {
        has_bottleneck = true;
        break;
      }
    }
    if (!has_bottleneck) {
      std::snprintf(buf, sizeof buf, "flow %u (rate %.17g, weight %g, bound %g) has no bottleneck link", f, r,
                    problem.weight(f), bound_eff[f]);
      fail(check.bottlenecked, buf);
    }
  }
  return check;
}

}  // namespace clustersim::sim
