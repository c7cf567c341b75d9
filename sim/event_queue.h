// EventQueue: the discrete-event core. Events are ordered by (time, insertion sequence), so
// events scheduled for the same picosecond run in the order they were scheduled: runs are
// deterministic. Cancellation is O(1): an event's slot is marked dead and skipped when it
// reaches the top of the heap (lazy removal); a generation count makes stale ids harmless.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/sim_time.h"

namespace clustersim::sim {

struct EventId {
  std::uint32_t slot = 0;
  std::uint32_t generation = 0;
  friend bool operator==(EventId, EventId) = default;
};

class EventQueue {
 public:
  // Schedules fn at absolute time t (t >= now()). Returns an id usable with cancel().
  EventId schedule_at(SimTime t, std::function<void()> fn);
  // Cancels a pending event; false if it already ran or was cancelled. O(1).
  bool cancel(EventId id);
  // Pops and runs the earliest live event, advancing now(). False if none is left.
  bool run_next();
  SimTime now() const { return now_; }
  bool empty() const { return live_ == 0; }
  std::size_t pending() const { return live_; }
  std::uint64_t executed() const { return executed_; }

 private:
  struct Entry {
    SimTime time;
    std::uint64_t seq;
    std::uint32_t slot;
  };
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  struct Slot {
    std::function<void()> fn;
    std::uint32_t generation = 0;
    bool pending = false;
  };

  std::vector<Entry> heap_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_slots_;
  SimTime now_ = 0;
  std::uint64_t next_seq_ = 0;
  std::size_t live_ = 0;
  std::uint64_t executed_ = 0;
};

}  // namespace clustersim::sim
