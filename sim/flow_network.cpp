#include "sim/flow_network.h"

#include <algorithm>
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <utility>

namespace clustersim::sim {

namespace {

constexpr double kPsPerSecond = 1e12;

// Bytes moved at `rate` bytes/s during `dt` picoseconds. Multiplying before dividing keeps
// round inputs exact (5e9 B/s * 1e11 ps / 1e12 = 5e8 B with no rounding at all).
double bytes_in(double rate, SimTime dt) {
  return rate * static_cast<double>(dt) / kPsPerSecond;
}

}  // namespace

FlowNetwork::FlowNetwork(Simulation& sim, Mode mode) : sim_(sim), mode_(mode) {}

FlowNetwork::~FlowNetwork() {
  if (event_pending_) sim_.cancel(event_);
  for (const Flow& fl : flows_) {
    if (fl.state == State::kLatency) sim_.cancel(fl.latency_event);
  }
}

LinkId FlowNetwork::add_link(BytesPerSecond capacity, LinkSharing sharing) {
  assert(capacity.raw() >= 0 && "link capacity must be >= 0 (and not NaN)");
  Link& link = links_.emplace_back();
  link.capacity = capacity.raw();
  link.sharing = sharing;
  link.rate_since = sim_.now();
  return LinkId{static_cast<std::uint32_t>(links_.size() - 1)};
}

void FlowNetwork::set_capacity(LinkId id, BytesPerSecond capacity) {
  assert(id.index < links_.size());
  assert(capacity.raw() >= 0 && "link capacity must be >= 0 (and not NaN)");
  Link& link = links_[id.index];
  if (link.capacity == capacity.raw()) return;
  link.capacity = capacity.raw();
  // Rates so far were right for the old capacity; progress is re-anchored when rates change.
  if (!link.flows.empty()) mark_dirty(id.index);
  arm();
}

FlowId FlowNetwork::start(std::span<const LinkId> path, Bytes size, Seconds latency, std::function<void()> on_done,
                          double weight, BytesPerSecond bound) {
  return start(path, {}, size, latency, std::move(on_done), weight, bound);
}

FlowId FlowNetwork::start(std::span<const LinkId> path, std::span<const double> shares, Bytes size, Seconds latency,
                          std::function<void()> on_done, double weight, BytesPerSecond bound) {
  assert((shares.empty() || shares.size() == path.size()) && "one share per link of the path");
  assert(size.raw() >= 0 && std::isfinite(size.raw()) && "flow size must be finite and >= 0");
  assert(latency.raw() >= 0 && "flow latency must be >= 0");
  assert(weight > 0 && std::isfinite(weight) && "flow weight must be finite and > 0");
  assert(bound.raw() >= 0 && "flow bound must be >= 0 (and not NaN)");
  std::uint32_t f;
  if (!free_slots_.empty()) {
    f = free_slots_.back();
    free_slots_.pop_back();
  } else {
    f = static_cast<std::uint32_t>(flows_.size());
    flows_.emplace_back();
  }
  Flow& fl = flows_[f];
  fl.links.clear();
  for (LinkId l : path) {
    assert(l.index < links_.size() && "flow path crosses an unknown link");
    fl.links.push_back(l.index);
  }
  fl.shares.assign(shares.begin(), shares.end());
  if (std::all_of(fl.shares.begin(), fl.shares.end(), [](double a) { return a == 1.0; })) fl.shares.clear();
  fl.link_pos.assign(fl.links.size(), kNoPos);
  fl.on_done = std::move(on_done);
  fl.size = size.raw();
  fl.weight = weight;
  fl.bound = bound.raw();
  fl.remaining = fl.size;
  fl.rate = 0;
  fl.anchor = sim_.now();
  fl.completion = kNever;
  fl.seq = next_seq_++;
  fl.heap_pos = kNoPos;
  fl.state = State::kLatency;
  ++active_count_;
  ++counters_.flows_started;
  const FlowId id{f, fl.generation};

  const SimTime delay = to_sim_time(latency);
  if (delay == 0) {
    join(f);
    arm();
  } else {
    fl.latency_event = sim_.schedule_after(delay, [this, f] {
      ++counters_.events;
      join(f);
      arm();
    });
  }
  return id;
}

void FlowNetwork::join(std::uint32_t f) {
  Flow& fl = flows_[f];
  const SimTime now = sim_.now();
  fl.anchor = now;
  if (fl.size == 0) {  // nothing to deliver: completes at this picosecond without sharing
    fl.state = State::kInstant;
    fl.completion = now;
    heap_set(f);
    return;
  }
  fl.state = State::kSharing;
  for (std::size_t k = 0; k < fl.links.size(); ++k) {
    Link& link = links_[fl.links[k]];
    if (link.flows.empty()) link.busy_since = now;
    fl.link_pos[k] = static_cast<std::uint32_t>(link.flows.size());
    link.flows.push_back(f);
    link.flow_inc.push_back(static_cast<std::uint32_t>(k));
    link.peak = std::max(link.peak, static_cast<std::uint32_t>(link.flows.size()));
  }
  dirty_flows_.push_back(f);  // its links' other flows are reached from it
}

void FlowNetwork::leave(std::uint32_t f) {
  Flow& fl = flows_[f];
  const SimTime now = sim_.now();
  for (std::size_t k = 0; k < fl.links.size(); ++k) {
    const std::uint32_t l = fl.links[k];
    Link& link = links_[l];
    const std::uint32_t pos = fl.link_pos[k];
    const std::uint32_t last_flow = link.flows.back();
    const std::uint32_t last_inc = link.flow_inc.back();
    link.flows[pos] = last_flow;
    link.flow_inc[pos] = last_inc;
    flows_[last_flow].link_pos[last_inc] = pos;
    link.flows.pop_back();
    link.flow_inc.pop_back();
    if (link.flows.empty()) link.busy += now - link.busy_since;
    // On a shared link the others may now speed up; on a fatpipe link only the aggregate changes.
    if (link.sharing == LinkSharing::kShared) {
      mark_dirty(l);
    } else {
      mark_rate_dirty(l);
    }
  }
}

void FlowNetwork::mark_dirty(std::uint32_t l) {
  if (links_[l].dirty) return;
  links_[l].dirty = true;
  dirty_links_.push_back(l);
}

void FlowNetwork::mark_rate_dirty(std::uint32_t l) {
  if (links_[l].rate_dirty) return;
  links_[l].rate_dirty = true;
  rate_links_.push_back(l);
}

void FlowNetwork::on_event() {
  event_pending_ = false;
  ++counters_.events;
  in_event_ = true;
  const SimTime now = sim_.now();
  for (;;) {
    // Everything due now leaves the sharing, in (completion, start order).
    due_.clear();
    while (!heap_.empty() && flows_[heap_.front()].completion <= now) {
      const std::uint32_t f = heap_.front();
      heap_remove(f);
      due_.push_back(f);
    }
    std::vector<std::function<void()>> callbacks;
    callbacks.swap(callbacks_);
    callbacks.clear();
    for (std::uint32_t f : due_) {
      Flow& fl = flows_[f];
      if (fl.state == State::kSharing) leave(f);
      fl.state = State::kFree;
      fl.rate = 0;
      fl.completion = kNever;
      ++fl.generation;  // ids of this flow are now stale
      callbacks.push_back(std::move(fl.on_done));
      fl.on_done = nullptr;
      free_slots_.push_back(f);
      --active_count_;
      ++counters_.flows_completed;
    }
    // Callbacks may start flows or change capacities: those changes join this picosecond's
    // re-solve below instead of each causing one.
    for (auto& cb : callbacks) {
      if (cb) cb();
    }
    callbacks.clear();
    callbacks.swap(callbacks_);  // keep the buffer
    if (has_changes()) resolve();
    if (heap_.empty() || flows_[heap_.front()].completion > now) break;
  }
  in_event_ = false;
  arm();
}

void FlowNetwork::resolve() {
  comp_flows_.clear();
  comp_links_.clear();
  if (mode_ == Mode::kFullResolve) {
    for (std::uint32_t f = 0; f < flows_.size(); ++f) {
      if (flows_[f].state == State::kSharing) comp_flows_.push_back(f);
    }
    for (std::uint32_t l = 0; l < links_.size(); ++l) comp_links_.push_back(l);
  } else {
    // The components touched by the changes: flows reached from the dirty flows and links
    // through shared links (a fatpipe link couples nobody, so the search does not cross it).
    const std::uint32_t epoch = ++mark_epoch_;
    auto visit_flow = [&](std::uint32_t f) {
      Flow& fl = flows_[f];
      if (fl.mark == epoch || fl.state != State::kSharing) return;
      fl.mark = epoch;
      comp_flows_.push_back(f);
    };
    auto visit_link = [&](std::uint32_t l) {
      if (links_[l].mark == epoch) return false;
      links_[l].mark = epoch;
      comp_links_.push_back(l);
      return true;
    };
    for (std::uint32_t f : dirty_flows_) visit_flow(f);
    for (std::uint32_t l : dirty_links_) {
      visit_link(l);
      for (std::uint32_t g : links_[l].flows) visit_flow(g);
    }
    for (std::size_t q = 0; q < comp_flows_.size(); ++q) {
      const Flow& fl = flows_[comp_flows_[q]];
      for (std::uint32_t l : fl.links) {
        if (!visit_link(l) || links_[l].sharing != LinkSharing::kShared) continue;
        for (std::uint32_t g : links_[l].flows) visit_flow(g);
      }
    }
  }

  if (!comp_flows_.empty()) {
    // Flows in start order, links in index order: the solver then does the same arithmetic
    // for a component as a full re-solve does (see MaxMinSolver), so rates match bit for bit.
    std::sort(comp_flows_.begin(), comp_flows_.end(),
              [&](std::uint32_t a, std::uint32_t b) { return flows_[a].seq < flows_[b].seq; });
    std::sort(comp_links_.begin(), comp_links_.end());
    solver_.clear();
    for (std::uint32_t i = 0; i < comp_links_.size(); ++i) {
      Link& link = links_[comp_links_[i]];
      link.local = i;
      solver_.add_link(link.capacity, link.sharing);
    }
    for (std::uint32_t f : comp_flows_) {
      const Flow& fl = flows_[f];
      local_path_.clear();
      for (std::uint32_t l : fl.links) local_path_.push_back(links_[l].local);
      solver_.add_flow(local_path_, fl.shares, fl.weight, fl.bound);
    }
    solver_.solve();
    ++counters_.solves;
    counters_.solved_flows += comp_flows_.size();
    counters_.solver_rounds += solver_.rounds();
    for (std::uint32_t i = 0; i < comp_flows_.size(); ++i) apply_rate(comp_flows_[i], solver_.rate(i));
  }

  for (std::uint32_t l : dirty_links_) {
    links_[l].dirty = false;
    mark_rate_dirty(l);
  }
  dirty_links_.clear();
  dirty_flows_.clear();
  std::sort(rate_links_.begin(), rate_links_.end());
  for (std::uint32_t l : rate_links_) {
    links_[l].rate_dirty = false;
    refresh_link_rate(l);
  }
  rate_links_.clear();
}

void FlowNetwork::apply_rate(std::uint32_t f, double rate) {
  Flow& fl = flows_[f];
  if (rate == fl.rate) return;  // unchanged: keep the anchor, so the arithmetic does not depend on re-solves
  const SimTime now = sim_.now();
  if (fl.rate > 0 && now > fl.anchor) {
    fl.remaining = std::isinf(fl.rate) ? 0.0 : fl.remaining - bytes_in(fl.rate, now - fl.anchor);
    if (fl.remaining <= fl.size * kFlowRemainderSnap) fl.remaining = 0;
  }
  fl.anchor = now;
  fl.rate = rate;
  fl.completion = predict_completion(fl);
  heap_set(f);
  for (std::uint32_t l : fl.links) mark_rate_dirty(l);
}

SimTime FlowNetwork::predict_completion(const Flow& fl) const {
  if (fl.remaining <= 0 || std::isinf(fl.rate)) return fl.anchor;
  if (!(fl.rate > 0)) return kNever;
  const double ps = fl.remaining * kPsPerSecond / fl.rate;
  // Round up to the picosecond, but a value within 8 ulp above an integer is that integer (the
  // division's rounding must not turn an exact 100 ms into 100 ms + 1 ps).
  const double up = std::ceil(ps - ps * (8 * DBL_EPSILON));
  // A flow that moves, but would end beyond the engine's range: the inputs are far outside what hardware does.
  // The error names when it would end (not how long it has left).
  if (!(up < double(kMaxSimTime - fl.anchor))) {
    char what[96];
    std::snprintf(what, sizeof what, "a network transfer of %.4g B moving at %.4g B/s", fl.size, fl.rate);
    throw TimeRangeError((double(fl.anchor) + ps) * 1e-12, what);
  }
  return fl.anchor + std::max<SimTime>(1, static_cast<SimTime>(up));
}

void FlowNetwork::refresh_link_rate(std::uint32_t l) {
  Link& link = links_[l];
  double sum = 0;
  for (std::size_t j = 0; j < link.flows.size(); ++j) {
    const Flow& fl = flows_[link.flows[j]];
    sum += fl.shares.empty() ? fl.rate : fl.shares[link.flow_inc[j]] * fl.rate;
  }
  if (sum == link.rate) return;
  const SimTime now = sim_.now();
  if (now > link.rate_since && link.rate > 0) link.bytes += bytes_in(link.rate, now - link.rate_since);
  link.rate_since = now;
  link.rate = sum;
  if (observer_) observer_(LinkId{l}, now, BytesPerSecond::from_raw(sum));
}

void FlowNetwork::arm() {
  if (in_event_) return;  // on_event re-arms when it is done
  SimTime want = kNever;
  if (has_changes()) {
    want = sim_.now();
  } else if (!heap_.empty()) {
    want = flows_[heap_.front()].completion;
  }
  if (event_pending_ && event_time_ == want) return;
  if (event_pending_) {
    sim_.cancel(event_);
    event_pending_ = false;
  }
  if (want == kNever) return;
  event_ = sim_.schedule_at(want, [this] { on_event(); });
  event_time_ = want;
  event_pending_ = true;
}

const FlowNetwork::Flow* FlowNetwork::find(FlowId id) const {
  if (id.slot >= flows_.size()) return nullptr;
  const Flow& fl = flows_[id.slot];
  if (fl.generation != id.generation || fl.state == State::kFree) return nullptr;
  return &fl;
}

bool FlowNetwork::active(FlowId id) const {
  return find(id) != nullptr;
}

BytesPerSecond FlowNetwork::rate(FlowId id) const {
  const Flow* fl = find(id);
  return BytesPerSecond::from_raw(fl && fl->state == State::kSharing ? fl->rate : 0.0);
}

Bytes FlowNetwork::remaining(FlowId id) const {
  const Flow* fl = find(id);
  if (!fl) return Bytes::from_raw(0);
  if (fl->state != State::kSharing || !(fl->rate > 0)) return Bytes::from_raw(fl->remaining);
  if (std::isinf(fl->rate)) return Bytes::from_raw(0);
  const double left = fl->remaining - bytes_in(fl->rate, sim_.now() - fl->anchor);
  return Bytes::from_raw(std::max(0.0, left));
}

LinkStats FlowNetwork::link_stats(LinkId id) const {
  assert(id.index < links_.size());
  const Link& link = links_[id.index];
  const SimTime now = sim_.now();
  LinkStats s;
  s.capacity = BytesPerSecond::from_raw(link.capacity);
  s.sharing = link.sharing;
  double bytes = link.bytes;
  if (now > link.rate_since && link.rate > 0) bytes += bytes_in(link.rate, now - link.rate_since);
  s.bytes_carried = Bytes::from_raw(bytes);
  s.busy_time = link.busy + (link.flows.empty() ? 0 : now - link.busy_since);
  s.active_flows = static_cast<std::uint32_t>(link.flows.size());
  s.peak_flows = link.peak;
  s.rate = BytesPerSecond::from_raw(link.rate);
  return s;
}

// ---- indexed min-heap of predicted completions ----

bool FlowNetwork::heap_less(std::uint32_t a, std::uint32_t b) const {
  const Flow& x = flows_[a];
  const Flow& y = flows_[b];
  return x.completion != y.completion ? x.completion < y.completion : x.seq < y.seq;
}

void FlowNetwork::heap_set(std::uint32_t f) {
  Flow& fl = flows_[f];
  if (fl.completion == kNever) {
    if (fl.heap_pos != kNoPos) heap_remove(f);
    return;
  }
  if (fl.heap_pos == kNoPos) {
    fl.heap_pos = static_cast<std::uint32_t>(heap_.size());
    heap_.push_back(f);
    heap_up(fl.heap_pos);
    return;
  }
  heap_up(fl.heap_pos);
  heap_down(fl.heap_pos);
}

void FlowNetwork::heap_up(std::uint32_t pos) {
  const std::uint32_t f = heap_[pos];
  while (pos > 0) {
    const std::uint32_t parent = (pos - 1) / 2;
    if (!heap_less(f, heap_[parent])) break;
    heap_[pos] = heap_[parent];
    flows_[heap_[pos]].heap_pos = pos;
    pos = parent;
  }
  heap_[pos] = f;
  flows_[f].heap_pos = pos;
}

void FlowNetwork::heap_down(std::uint32_t pos) {
  const std::uint32_t f = heap_[pos];
  const auto n = static_cast<std::uint32_t>(heap_.size());
  for (;;) {
    std::uint32_t child = 2 * pos + 1;
    if (child >= n) break;
    if (child + 1 < n && heap_less(heap_[child + 1], heap_[child])) ++child;
    if (!heap_less(heap_[child], f)) break;
    heap_[pos] = heap_[child];
    flows_[heap_[pos]].heap_pos = pos;
    pos = child;
  }
  heap_[pos] = f;
  flows_[f].heap_pos = pos;
}

void FlowNetwork::heap_remove(std::uint32_t f) {
  const std::uint32_t pos = flows_[f].heap_pos;
  flows_[f].heap_pos = kNoPos;
  const std::uint32_t last = heap_.back();
  heap_.pop_back();
  if (last == f) return;
  heap_[pos] = last;
  flows_[last].heap_pos = pos;
  heap_up(pos);
  heap_down(flows_[last].heap_pos);
}

}  // namespace clustersim::sim
