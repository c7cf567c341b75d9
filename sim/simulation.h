// Simulation: one object owns the clock, the event queue and the trace sinks of one run.
// There is no global mutable state, so a sweep can run many Simulations on several threads.
#pragma once

#include <functional>
#include <vector>

#include "sim/event_queue.h"
#include "sim/trace.h"

namespace clustersim::sim {

class Simulation {
 public:
  SimTime now() const { return queue_.now(); }
  EventId schedule_at(SimTime t, std::function<void()> fn) {
    if (t >= kMaxSimTime) throw TimeRangeError(to_seconds(t).raw());
    return queue_.schedule_at(t, std::move(fn));
  }
  EventId schedule_after(SimTime delay, std::function<void()> fn) {
    return schedule_at(queue_.now() + delay, std::move(fn));  // both below 2^62: the sum fits
  }
  bool cancel(EventId id) { return queue_.cancel(id); }
  // Runs events until none is left; returns the number of events executed.
  std::uint64_t run();

  // Sinks are owned by the caller and must outlive the run.
  void add_sink(TraceSink* sink) { sinks_.push_back(sink); }
  bool has_sinks() const { return !sinks_.empty(); }
  void emit(const TaskRecord& record) {
    for (TraceSink* s : sinks_) s->on_task(record);
  }
  std::uint64_t events_executed() const { return queue_.executed(); }

 private:
  EventQueue queue_;
  std::vector<TraceSink*> sinks_;
};

}  // namespace clustersim::sim
