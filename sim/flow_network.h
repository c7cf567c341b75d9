// FlowNetwork: data transfers ("flows") sharing link bandwidth by weighted max-min fairness, in
// simulated time on a Simulation.
//
// Model. A flow of S bytes over a path of links first waits its latency L (propagation and
// switching along the path), then joins the sharing with its S bytes. While it shares, it runs at
// the rate r(t) (bytes/s) that MaxMinSolver (sim/maxmin.h) gives it for the flows sharing at
// time t: rates are piecewise constant between changes (a flow joins or leaves, a capacity
// changes), and remaining(t) = remaining(t0) - r * (t - t0) between two changes. The flow ends
// when its last byte is delivered: t_end = t0 + remaining(t0) / r, rounded UP to the next integer
// picosecond (a value within 8 ulp above an integer counts as that integer, so exact hand-derived
// times stay exact), and the flow then completes exactly, whatever sub-picosecond rest the
// rounding leaves. A remainder below kFlowRemainderSnap * S left by a rate change counts as
// delivered. A zero-byte flow ends right after its latency; a flow that crosses no link and has
// no bound is delivered instantly; a flow at rate 0 (a link of capacity 0) waits until a change
// gives it bandwidth. Units: bytes, bytes/s, seconds at the interface; SimTime picoseconds inside.
//
// Incremental re-solve (default). Under max-min sharing, flows interact only through shared links:
// a component of the graph "flows -- shared links they cross" is solved independently of the
// others, so a change (a flow joins or leaves, a capacity changes) can alter only the rates in
// the component(s) it touches. FlowNetwork re-solves those components and keeps every other rate.
// MaxMinSolver's component-wise filling makes this exact in floating point too: a component's
// rates are bit-for-bit those of a full re-solve (Mode::kFullResolve, the test oracle, re-solves
// every sharing flow at every change). A flow's progress is re-anchored (remaining bytes advanced
// to now at the old rate) only when its rate actually changes, so both modes do the same
// arithmetic and give identical completion times.
//
// Events. Changes are batched: start(), set_capacity() and completions mark links dirty, and the
// re-solve runs in the network's single engine event at the same picosecond, so a collective
// that starts a thousand flows at once costs one solve. That one event is always pending for the
// earliest of (a pending re-solve, the earliest predicted completion, kept in an indexed min-heap);
// it is cancelled and rescheduled when that earliest time changes. Each flow in its latency phase
// has its own event. Within one picosecond, flows complete (and on_done fires) in the order of
// their start() calls, so runs are deterministic. Consequence: rate() reports the new rates only
// once the network's event at the current picosecond has run.
//
// Sources: the flow-level ("fluid") network model of SimGrid (Velho, Legrand, Quinson, Casanova,
// Schnorr, "On the validity of flow-level TCP network models for grid and cloud simulations",
// ACM TOMACS 23(4), 2013): a latency phase, then max-min shared bandwidth.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "sim/maxmin.h"
#include "sim/simulation.h"
#include "sim/units.h"

namespace clustersim::sim {

inline constexpr double kFlowRemainderSnap = 1e-12;  // relative to the flow's size

struct LinkId {
  std::uint32_t index = 0;
  friend bool operator==(LinkId, LinkId) = default;
  friend auto operator<=>(LinkId, LinkId) = default;
};

struct FlowId {
  std::uint32_t slot = 0;
  std::uint32_t generation = 0;
  friend bool operator==(FlowId, FlowId) = default;
};

// Observed use of one link, up to now().
struct LinkStats {
  BytesPerSecond capacity;
  LinkSharing sharing = LinkSharing::kShared;
  Bytes bytes_carried;             // integral of the aggregate rate over time
  SimTime busy_time = 0;           // picoseconds with at least one flow sharing the link
  std::uint32_t active_flows = 0;  // flows sharing the link now (a path crossing it twice counts twice)
  std::uint32_t peak_flows = 0;    // maximum of active_flows
  BytesPerSecond rate;             // aggregate rate now
};

class FlowNetwork {
 public:
  enum class Mode { kIncremental, kFullResolve };
  static constexpr BytesPerSecond kUnbounded = BytesPerSecond::from_raw(kUnboundedRate);
  // Called when a link's aggregate rate changes: (link, time, new aggregate rate). Within one
  // re-solve, links are reported in increasing index order.
  using RateObserver = std::function<void(LinkId, SimTime, BytesPerSecond)>;

  struct Counters {
    std::uint64_t solves = 0;         // MaxMinSolver::solve() calls
    std::uint64_t solved_flows = 0;   // flows passed to the solver, summed over solves
    std::uint64_t solver_rounds = 0;  // progressive-filling rounds, summed over solves
    std::uint64_t events = 0;         // engine events run by the network (re-solve/completion and latency)
    std::uint64_t flows_started = 0;
    std::uint64_t flows_completed = 0;
  };

  explicit FlowNetwork(Simulation& sim, Mode mode = Mode::kIncremental);
  FlowNetwork(const FlowNetwork&) = delete;
  FlowNetwork& operator=(const FlowNetwork&) = delete;
  ~FlowNetwork();

  LinkId add_link(BytesPerSecond capacity, LinkSharing sharing = LinkSharing::kShared);
  // Takes effect now: progress so far is kept at the old rates, affected flows are re-solved.
  void set_capacity(LinkId link, BytesPerSecond capacity);
  BytesPerSecond capacity(LinkId link) const { return BytesPerSecond::from_raw(links_[link.index].capacity); }
  std::size_t link_count() const { return links_.size(); }

  // Starts a flow of `size` bytes over `path` (links in order; may be empty) at now(). After
  // `latency` it shares bandwidth with weight `weight` (> 0) and at most `bound` bytes/s;
  // on_done runs (from an engine event) when its last byte is delivered.
  FlowId start(std::span<const LinkId> path, Bytes size, Seconds latency, std::function<void()> on_done,
               double weight = 1.0, BytesPerSecond bound = kUnbounded);
  // The same for a flow spread over several paths: shares[k] (finite, > 0) is the part of the flow's rate
  // that crosses path[k] (1/n on each of n paths it is sprayed over; see MaxMinSolver); empty: every share 1.
  // The links' aggregate rates and bytes carried count each flow's share.
  FlowId start(std::span<const LinkId> path, std::span<const double> shares, Bytes size, Seconds latency,
               std::function<void()> on_done, double weight = 1.0, BytesPerSecond bound = kUnbounded);

  // True from start() until the flow completes (on_done is called after it becomes false).
  bool active(FlowId flow) const;
  // Current rate: 0 in the latency phase and after completion.
  BytesPerSecond rate(FlowId flow) const;
  // Bytes not yet delivered at now() (size in the latency phase, 0 after completion).
  Bytes remaining(FlowId flow) const;
  std::size_t active_flows() const { return active_count_; }

  LinkStats link_stats(LinkId link) const;
  // Calls fn(LinkId, const LinkStats&) for every link in index order.
  template <class Fn>
  void for_each_link(Fn&& fn) const {
    for (std::uint32_t i = 0; i < links_.size(); ++i) fn(LinkId{i}, link_stats(LinkId{i}));
  }
  void set_rate_observer(RateObserver observer) { observer_ = std::move(observer); }

  const Counters& counters() const { return counters_; }
  Mode mode() const { return mode_; }

 private:
  enum class State : std::uint8_t { kFree, kLatency, kSharing, kInstant };
  static constexpr std::uint32_t kNoPos = 0xffffffffu;
  static constexpr SimTime kNever = INT64_MAX;

  struct Flow {
    std::vector<std::uint32_t> links;     // path
    std::vector<double> shares;           // each link's share of the rate; empty: all 1
    std::vector<std::uint32_t> link_pos;  // position of each incidence in its link's flow list
    std::function<void()> on_done;
    double size = 0;
    double weight = 1;
    double bound = kUnboundedRate;
    double remaining = 0;  // bytes left at `anchor`
    double rate = 0;       // bytes/s since `anchor`
    SimTime anchor = 0;
    SimTime completion = kNever;
    std::uint64_t seq = 0;  // start order: the deterministic tie-break everywhere
    std::uint32_t generation = 0;
    std::uint32_t heap_pos = kNoPos;
    std::uint32_t mark = 0;  // traversal stamp
    EventId latency_event;
    State state = State::kFree;
  };
  struct Link {
    double capacity = 0;
    LinkSharing sharing = LinkSharing::kShared;
    std::vector<std::uint32_t> flows;     // sharing flows (slot), one entry per incidence
    std::vector<std::uint32_t> flow_inc;  // which incidence of that flow's path
    double rate = 0;                      // aggregate
    SimTime rate_since = 0;
    double bytes = 0;  // carried up to rate_since
    SimTime busy_since = 0;
    SimTime busy = 0;
    std::uint32_t peak = 0;
    std::uint32_t mark = 0;   // traversal stamp
    std::uint32_t local = 0;  // index in the solver problem being built
    bool dirty = false;       // in dirty_links_: its flows must be re-solved
    bool rate_dirty = false;  // in rate_links_: its aggregate rate must be recomputed
  };

  const Flow* find(FlowId id) const;
  void join(std::uint32_t f);
  void leave(std::uint32_t f);
  void mark_dirty(std::uint32_t l);       // re-solve the link's flows
  void mark_rate_dirty(std::uint32_t l);  // recompute the link's aggregate rate
  bool has_changes() const { return !dirty_links_.empty() || !dirty_flows_.empty() || !rate_links_.empty(); }
  SimTime predict_completion(const Flow& fl) const;
  void on_event();
  void resolve();
  void apply_rate(std::uint32_t f, double rate);
  void refresh_link_rate(std::uint32_t l);
  void arm();
  // Indexed min-heap of predicted completions, keyed by (completion, seq).
  bool heap_less(std::uint32_t a, std::uint32_t b) const;
  void heap_set(std::uint32_t f);  // insert, move or remove f after its completion changed
  void heap_up(std::uint32_t pos);
  void heap_down(std::uint32_t pos);
  void heap_remove(std::uint32_t f);

  Simulation& sim_;
  Mode mode_;
  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::vector<std::uint32_t> free_slots_;
  std::vector<std::uint32_t> heap_;
  std::uint64_t next_seq_ = 0;
  std::size_t active_count_ = 0;

  // Pending changes, consumed by the next re-solve.
  std::vector<std::uint32_t> dirty_links_;
  std::vector<std::uint32_t> dirty_flows_;
  std::vector<std::uint32_t> rate_links_;  // links whose aggregate rate may have changed
  std::uint32_t mark_epoch_ = 0;

  // The network's single engine event.
  EventId event_;
  SimTime event_time_ = 0;
  bool event_pending_ = false;
  bool in_event_ = false;

  // Scratch, kept between solves.
  MaxMinSolver solver_;
  std::vector<std::uint32_t> comp_flows_;
  std::vector<std::uint32_t> comp_links_;
  std::vector<std::uint32_t> local_path_;
  std::vector<std::uint32_t> due_;
  std::vector<std::function<void()>> callbacks_;

  RateObserver observer_;
  Counters counters_;
};

}  // namespace clustersim::sim
