#include "sim/event_queue.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace clustersim::sim {

EventId EventQueue::schedule_at(SimTime t, std::function<void()> fn) {
  assert(t >= now_ && "events cannot be scheduled in the past");
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[slot];
  s.fn = std::move(fn);
  s.pending = true;
  heap_.push_back(Entry{t, next_seq_++, slot});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
  ++live_;
  return EventId{slot, s.generation};
}

bool EventQueue::cancel(EventId id) {
  if (id.slot >= slots_.size()) return false;
  Slot& s = slots_[id.slot];
  if (!s.pending || s.generation != id.generation) return false;
  s.pending = false;
  s.fn = nullptr;
  --live_;
  return true;  // the heap entry stays and is dropped when it surfaces
}

bool EventQueue::run_next() {
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    const Entry e = heap_.back();
    heap_.pop_back();
    Slot& s = slots_[e.slot];
    const bool live = s.pending;
    std::function<void()> fn = std::move(s.fn);
    s.fn = nullptr;
    s.pending = false;
    ++s.generation;  // the id handed out for this event is now stale
    free_slots_.push_back(e.slot);
    if (!live) continue;
    --live_;
    now_ = e.time;
    ++executed_;
    fn();
    return true;
  }
  return false;
}

}  // namespace clustersim::sim
