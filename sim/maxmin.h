// MaxMinSolver: weighted max-min fair bandwidth sharing on plain numbers (bytes/s).
//
// Model. Links (constraints) l have a capacity C_l and a sharing policy; flows (variables) i have
// a weight w_i > 0, an optional upper bound b_i (+inf = none) and the links they cross, each with a
// share a_il > 0: the part of the flow's rate that crosses it (1 for a single path; 1/n on each of n
// paths a flow is sprayed over; a flow crossing l twice counts twice).
//   SHARED  link:  sum_{i crosses l} a_il r_i <= C_l
//   FATPIPE link:  a_il r_i <= C_l for each flow i crossing l, no sum (a non-blocking backplane, a
//                  "latency only" hop); it acts as an extra per-flow bound, never couples flows.
//   bound:         r_i <= b_i
// The weighted max-min fair allocation is the feasible r for which no r_i/w_i can grow without
// lowering some r_j/w_j <= r_i/w_i. It is computed by progressive filling: all unfrozen flows
// run at r_i = w_i * lambda with a common level lambda; lambda rises until a constraint is tight:
// a shared link at level (C_l - frozen_l) / sum_{unfrozen i on l} a_il w_i, or a flow's bound at level
// b_i / w_i. Flows on a tight constraint freeze at that rate; the rest go on rising. Each round
// freezes at least one constraint, so there are at most (shared links + flows) rounds; a round
// costs O(active links + active flows + incidences of the flows it freezes), so a solve is
// O((links + flows) * rounds + incidences).
// A flow that crosses no link is limited by its bound alone: its rate is b_i, or +inf when it is
// unbounded. A shared link of capacity 0 gives its flows rate 0.
//
// Numerics. Constraints whose level is within a relative kMaxMinSaturationEpsilon of the round's
// minimum saturate in the same round (so near-ties cost one round, not two); each flow frozen in
// a round takes the level of its own tightest constraint, so the result stays exactly feasible up
// to floating-point rounding. Flows are split into connected components (flows coupled through
// shared links, transitively) and each component is filled on its own, in an order that depends
// only on the component's flows and links and their relative order: the rates of a component are
// bit-for-bit the same whether it is solved alone or together with any other flows. FlowNetwork
// relies on that to re-solve only what a change touches and still match a full re-solve exactly.
// Everything is deterministic: ties are resolved by index order.
//
// Sources: the progressive-filling formulation of SimGrid's LMM solver (maxmin.cpp): H. Casanova,
// A. Legrand, M. Quinson, "SimGrid: a Generic Framework for Large-Scale Distributed Experiments",
// UKSim 2008; P. Velho, A. Legrand, "Accuracy Study and Improvement of Network Simulation in the
// SimGrid Framework", SIMUTools 2009; weighted max-min fairness as in D. Bertsekas, R. Gallager,
// "Data Networks", 2nd ed., section 6.5.2. (Algorithm re-derived here; no code copied.)
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace clustersim::sim {

enum class LinkSharing : std::uint8_t {
  kShared,   // the flows crossing the link share its capacity: sum of rates <= capacity
  kFatpipe,  // each flow may use the full capacity on its own: rate <= capacity
};

// Named tolerances of the flow model.
inline constexpr double kMaxMinSaturationEpsilon = 1e-9;  // relative: near-tied constraints saturate together
inline constexpr double kMaxMinCheckTolerance = 1e-7;     // relative: default tolerance of check_max_min
inline constexpr double kUnboundedRate = std::numeric_limits<double>::infinity();

class MaxMinSolver {
 public:
  // Forgets the problem; keeps every buffer's capacity, so a solver reused for many solves stops
  // allocating once it has seen its largest problem.
  void clear();
  void reserve(std::size_t links, std::size_t flows, std::size_t incidences);

  // capacity in bytes/s, >= 0 (+inf allowed). Returns the link's index (0, 1, 2, ...).
  std::uint32_t add_link(double capacity, LinkSharing sharing = LinkSharing::kShared);
  void set_capacity(std::uint32_t link, double capacity);
  // links: indices returned by add_link (may be empty). weight > 0; bound in bytes/s, >= 0.
  // Returns the flow's index (0, 1, 2, ...).
  std::uint32_t add_flow(std::span<const std::uint32_t> links, double weight = 1.0, double bound = kUnboundedRate);
  // The same with each link's share of the flow's rate (shares.size() == links.size(), each finite and > 0;
  // empty: every share 1).
  std::uint32_t add_flow(std::span<const std::uint32_t> links, std::span<const double> shares, double weight,
                         double bound);

  // Computes every flow's rate (bytes/s).
  void solve();
  std::span<const double> rates() const { return rate_; }
  double rate(std::uint32_t flow) const { return rate_[flow]; }

  // The problem, for checkers and callers.
  std::size_t link_count() const { return capacity_.size(); }
  std::size_t flow_count() const { return weight_.size(); }
  double capacity(std::uint32_t link) const { return capacity_[link]; }
  LinkSharing sharing(std::uint32_t link) const { return sharing_[link]; }
  double weight(std::uint32_t flow) const { return weight_[flow]; }
  double bound(std::uint32_t flow) const { return bound_[flow]; }
  std::span<const std::uint32_t> links_of(std::uint32_t flow) const {
    return {inc_link_.data() + inc_begin_[flow], inc_link_.data() + inc_begin_[flow + 1]};
  }
  std::span<const double> shares_of(std::uint32_t flow) const {  // parallel to links_of(flow)
    return {inc_share_.data() + inc_begin_[flow], inc_share_.data() + inc_begin_[flow + 1]};
  }

  // Statistics of the last solve().
  std::uint64_t rounds() const { return rounds_; }
  std::uint64_t components() const { return components_; }

 private:
  void fill_component(std::size_t flow_begin, std::size_t flow_end, std::size_t link_begin, std::size_t link_end);
  void freeze(std::uint32_t f, double rate);

  // Problem: links, flows, and the flows' links in CSR form.
  std::vector<double> capacity_;
  std::vector<LinkSharing> sharing_;
  std::vector<double> weight_;
  std::vector<double> bound_;
  std::vector<std::uint32_t> inc_begin_{0};  // flow f crosses inc_link_[inc_begin_[f] .. inc_begin_[f+1])
  std::vector<std::uint32_t> inc_link_;
  std::vector<double> inc_share_;  // parallel to inc_link_

  // Solution and per-solve scratch (kept between solves).
  std::vector<double> rate_;
  std::vector<double> bound_eff_;        // min(bound, capacities of its fatpipe links)
  std::vector<std::uint32_t> lf_begin_;  // shared link l is crossed by lf_flow_[lf_begin_[l] .. lf_begin_[l+1])
  std::vector<std::uint32_t> lf_flow_;
  std::vector<double> lf_share_;           // parallel to lf_flow_
  std::vector<std::uint32_t> comp_flows_;  // flows grouped by component, in discovery order
  std::vector<std::uint32_t> comp_links_;  // shared links grouped by component
  std::vector<std::uint8_t> flow_state_;   // 0 unseen, 1 in a component (active), 2 frozen
  std::vector<std::uint8_t> link_seen_;
  std::vector<double> link_rem_;            // capacity left by frozen flows
  std::vector<double> link_weight_;         // sum of the weights of unfrozen flows crossing it
  std::vector<std::uint32_t> link_active_;  // number of unfrozen incidences
  std::vector<double> link_level_;          // this round's level
  std::vector<std::uint32_t> active_links_;
  std::vector<std::uint32_t> active_flows_;
  std::vector<std::uint32_t> to_freeze_;
  std::uint64_t rounds_ = 0;
  std::uint64_t components_ = 0;
};

// Verdict of check_max_min: feasibility and the bottleneck property, with the first violation.
struct MaxMinCheck {
  bool feasible = true;      // shared sums <= C(1+tol); fatpipe and bound respected per flow; rates >= 0
  bool bottlenecked = true;  // every flow is at its (effective) bound or crosses a saturated shared
                             // link on which its rate/weight is maximal (within tol)
  std::string violation;     // empty when both hold
  bool ok() const { return feasible && bottlenecked; }
};

// Checks `rates` against the problem held by `problem` (its own rates are not used). A rate
// vector is the weighted max-min fair allocation iff it is feasible and every flow has a
// bottleneck (Bertsekas & Gallager, proposition in section 6.5.2, extended to weights and bounds).
MaxMinCheck check_max_min(const MaxMinSolver& problem, std::span<const double> rates,
                          double tolerance = kMaxMinCheckTolerance);

}  // namespace clustersim::sim
