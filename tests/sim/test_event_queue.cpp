// Tests of the discrete-event core (sim/event_queue.h) and its Simulation wrapper: events run in
// (time, insertion sequence) order, cancellation is exact (a cancelled event never runs, stale ids
// are harmless), and events may schedule and cancel others. A randomized test with >= 10,000
// events compares the execution order against an oracle that sorts the non-cancelled events.
#include "sim/event_queue.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <tuple>
#include <vector>

#include "sim/simulation.h"

namespace clustersim::sim {
namespace {

TEST_CASE("event queue: an empty queue has nothing to run") {
  EventQueue q;
  CHECK(q.empty());
  CHECK(q.pending() == 0);
  CHECK(q.now() == 0);
  CHECK_FALSE(q.run_next());
  CHECK(q.executed() == 0);
  CHECK_FALSE(q.cancel(EventId{}));        // never issued
  CHECK_FALSE(q.cancel(EventId{17, 3}));   // slot out of range
}

TEST_CASE("event queue: events run in time order and advance the clock") {
  EventQueue q;
  std::vector<int> order;
  std::vector<SimTime> clock;
  auto rec = [&](int label) {
    return [&, label] {
      order.push_back(label);
      clock.push_back(q.now());
    };
  };
  q.schedule_at(30, rec(30));
  q.schedule_at(10, rec(10));
  q.schedule_at(1'000'000'000'000'000, rec(-1));  // 1000 s: far future, still exact int64 ps
  q.schedule_at(20, rec(20));
  q.schedule_at(0, rec(0));
  CHECK(q.pending() == 5);
  while (q.run_next()) {
  }
  CHECK(order == std::vector<int>{0, 10, 20, 30, -1});
  CHECK(clock == std::vector<SimTime>{0, 10, 20, 30, 1'000'000'000'000'000});
  CHECK(q.now() == 1'000'000'000'000'000);
  CHECK(q.executed() == 5);
  CHECK(q.empty());
}

TEST_CASE("event queue: ties run in insertion order") {
  EventQueue q;
  std::vector<int> order;
  // Interleave two times; within each time the insertion order must be kept:
  // t=5: labels 0, 2, 4, 6; t=3: labels 1, 3, 5, 7. Expected: 1 3 5 7 0 2 4 6.
  for (int i = 0; i < 8; ++i) q.schedule_at(i % 2 == 0 ? 5 : 3, [&order, i] { order.push_back(i); });
  while (q.run_next()) {
  }
  CHECK(order == std::vector<int>{1, 3, 5, 7, 0, 2, 4, 6});
}

TEST_CASE("event queue: a cancelled event never runs, cancel is exact") {
  EventQueue q;
  std::vector<int> order;
  const EventId a = q.schedule_at(10, [&] { order.push_back(1); });
  const EventId b = q.schedule_at(20, [&] { order.push_back(2); });
  const EventId c = q.schedule_at(30, [&] { order.push_back(3); });
  CHECK(q.pending() == 3);

  CHECK(q.cancel(b));
  CHECK(q.pending() == 2);
  CHECK_FALSE(q.cancel(b));  // twice: already cancelled
  CHECK(q.pending() == 2);

  REQUIRE(q.run_next());
  CHECK(order == std::vector<int>{1});
  CHECK_FALSE(q.cancel(a));  // after it ran
  REQUIRE(q.run_next());     // skips the dead entry for b and runs c
  CHECK(order == std::vector<int>{1, 3});
  CHECK(q.now() == 30);
  CHECK_FALSE(q.cancel(c));
  CHECK_FALSE(q.run_next());
  CHECK(q.executed() == 2);
  CHECK(q.empty());
}

TEST_CASE("event queue: cancelled events do not advance the clock") {
  EventQueue q;
  bool ran = false;
  const EventId id = q.schedule_at(100, [&] { ran = true; });
  CHECK(q.cancel(id));
  CHECK(q.empty());
  CHECK_FALSE(q.run_next());
  CHECK_FALSE(ran);
  CHECK(q.now() == 0);  // the dead entry at t=100 must not move the clock
  CHECK(q.executed() == 0);
}

TEST_CASE("event queue: a stale id after slot reuse does not cancel the new event") {
  EventQueue q;
  int ran_first = 0;
  int ran_second = 0;
  const EventId first = q.schedule_at(1, [&] { ++ran_first; });
  REQUIRE(q.run_next());
  // The slot of `first` is free now; the next event takes it with a new generation.
  const EventId second = q.schedule_at(2, [&] { ++ran_second; });
  CHECK(second.slot == first.slot);  // the scenario under test: the slot really is reused
  CHECK(second.generation != first.generation);
  CHECK_FALSE(second == first);
  CHECK_FALSE(q.cancel(first));  // stale
  CHECK(q.pending() == 1);
  REQUIRE(q.run_next());
  CHECK(ran_first == 1);
  CHECK(ran_second == 1);

  SUBCASE("stale id of a cancelled event") {
    EventQueue r;
    int ran = 0;
    const EventId dead = r.schedule_at(5, [&] { ran += 100; });
    CHECK(r.cancel(dead));
    CHECK_FALSE(r.run_next());  // drops the dead entry, freeing its slot
    const EventId live = r.schedule_at(6, [&] { ran += 1; });
    CHECK(live.slot == dead.slot);
    CHECK_FALSE(r.cancel(dead));
    CHECK(r.pending() == 1);
    REQUIRE(r.run_next());
    CHECK(ran == 1);
  }
}

TEST_CASE("event queue: events scheduled and cancelled from inside events") {
  EventQueue q;
  std::vector<int> order;
  EventId victim{};
  // t=10 (label 1) schedules label 4 at t=10 (a tie: it runs after label 2, queued earlier at
  // t=10) and label 5 at t=15 (before label 3 at t=20), and cancels label 6 (t=40).
  q.schedule_at(10, [&] {
    order.push_back(1);
    q.schedule_at(q.now(), [&] { order.push_back(4); });
    q.schedule_at(15, [&] { order.push_back(5); });
    CHECK(q.cancel(victim));
  });
  q.schedule_at(10, [&] { order.push_back(2); });
  q.schedule_at(20, [&] {
    order.push_back(3);
    // A chain: each event schedules the next 1 ps later.
    q.schedule_at(q.now() + 1, [&] {
      order.push_back(7);
      q.schedule_at(q.now() + 1, [&] { order.push_back(8); });
    });
  });
  victim = q.schedule_at(40, [&] { order.push_back(6); });
  std::size_t steps = 0;
  while (q.run_next()) ++steps;
  CHECK(steps == 7);
  CHECK(order == std::vector<int>{1, 2, 4, 5, 3, 7, 8});
  CHECK(q.now() == 22);  // label 8 at 20 + 1 + 1; the cancelled t=40 event did not move the clock
}

TEST_CASE("event queue: a running event's own id is stale") {
  EventQueue q;
  EventId own{};
  bool result = true;
  own = q.schedule_at(3, [&] { result = q.cancel(own); });
  REQUIRE(q.run_next());
  CHECK_FALSE(result);
  CHECK(q.executed() == 1);
}

TEST_CASE("simulation: schedule_after is relative to now, run drains the queue") {
  Simulation sim;
  std::vector<SimTime> times;
  sim.schedule_at(100, [&] {
    times.push_back(sim.now());
    sim.schedule_after(50, [&] { times.push_back(sim.now()); });  // 100 + 50 = 150
    sim.schedule_after(0, [&] { times.push_back(sim.now()); });   // same picosecond
  });
  const EventId dead = sim.schedule_after(120, [&] { times.push_back(-1); });
  CHECK(sim.cancel(dead));
  CHECK(sim.run() == 3);
  CHECK(times == std::vector<SimTime>{100, 100, 150});
  CHECK(sim.now() == 150);
  CHECK(sim.events_executed() == 3);
  CHECK(sim.run() == 0);  // nothing left
}

// Randomized test against an oracle. Every schedule_at call gets the next global sequence number
// (the queue's insertion order); the oracle's order is the non-cancelled events sorted by
// (time, sequence). This is valid for events scheduled from inside events too, because those are
// scheduled at t >= now, so they can never need to run before an event that already ran.
TEST_CASE("event queue: randomized order and cancellation against a sort oracle") {
  struct Record {
    SimTime time;
    std::uint64_t seq;
    EventId id;
    bool cancelled = false;
    bool ran = false;
  };
  EventQueue q;
  std::vector<Record> records;
  std::vector<std::uint64_t> executed;  // sequence numbers in execution order
  std::mt19937_64 rng(20240611);
  int cancel_mismatches = 0;
  int clock_mismatches = 0;
  std::uint64_t cancels_true = 0;
  std::uint64_t cancels_false = 0;
  constexpr std::size_t kInitial = 8'000;
  constexpr std::size_t kMaxEvents = 20'000;

  // Try to cancel a random event scheduled so far (pending, ran or already cancelled); the
  // queue's answer must be "true iff it has neither run nor been cancelled".
  auto random_cancel = [&] {
    if (records.empty()) return;
    std::uniform_int_distribution<std::size_t> pick(0, records.size() - 1);
    Record& r = records[pick(rng)];
    const bool expected = !r.ran && !r.cancelled;
    const bool got = q.cancel(r.id);
    if (got != expected) ++cancel_mismatches;
    if (got) {
      r.cancelled = true;
      ++cancels_true;
    } else {
      ++cancels_false;
    }
  };

  std::function<void(SimTime)> schedule;  // schedules one recorded event at time t
  schedule = [&](SimTime t) {
    const std::uint64_t seq = records.size();
    records.push_back(Record{t, seq, EventId{}});
    records[seq].id = q.schedule_at(t, [&, seq] {
      Record& r = records[seq];
      if (q.now() != r.time) ++clock_mismatches;
      r.ran = true;
      executed.push_back(seq);
      // Events schedule more events (delays in [0, 20], so many land on the same picosecond)
      // and cancel random ones, including their own id (stale) and long-gone ids (slot reuse).
      std::uniform_int_distribution<int> die(0, 99);
      const int roll = die(rng);
      if (roll < 40 && records.size() < kMaxEvents) {
        std::uniform_int_distribution<int> children(1, 3);
        std::uniform_int_distribution<SimTime> delay(0, 20);
        const int n = children(rng);
        for (int i = 0; i < n; ++i) schedule(q.now() + delay(rng));
      }
      if (roll >= 80) random_cancel();
    });
  };

  // Initial events: times in [0, 500] for 8,000 events -> ~16 per picosecond: many ties.
  std::uniform_int_distribution<SimTime> time(0, 500);
  for (std::size_t i = 0; i < kInitial; ++i) {
    schedule(time(rng));
    if (i % 10 == 0) random_cancel();
  }
  while (q.run_next()) {
  }

  // Oracle.
  std::vector<const Record*> live;
  for (const Record& r : records)
    if (!r.cancelled) live.push_back(&r);
  std::sort(live.begin(), live.end(), [](const Record* a, const Record* b) {
    return std::tie(a->time, a->seq) < std::tie(b->time, b->seq);
  });
  std::vector<std::uint64_t> expected;
  expected.reserve(live.size());
  for (const Record* r : live) expected.push_back(r->seq);

  INFO("scheduled " << records.size() << ", executed " << executed.size() << ", cancels true/false "
                    << cancels_true << "/" << cancels_false);
  CHECK(records.size() >= 10'000);
  CHECK(cancels_true >= 500);   // the test really exercises cancellation...
  CHECK(cancels_false >= 100);  // ...including stale and repeated cancels
  CHECK(cancel_mismatches == 0);
  CHECK(clock_mismatches == 0);
  CHECK(executed.size() == expected.size());
  if (executed != expected) {
    std::size_t i = 0;
    while (i < executed.size() && i < expected.size() && executed[i] == expected[i]) ++i;
    INFO("first difference at position " << i);
    CHECK(executed == expected);
  }
  for (const Record& r : records) {
    if (r.cancelled == r.ran) {  // exactly one of them for every event
      CHECK(r.cancelled != r.ran);
      break;
    }
  }
  CHECK(q.executed() == executed.size());
  CHECK(q.empty());
  CHECK(q.now() == (live.empty() ? 0 : live.back()->time));
}

}  // namespace
}  // namespace clustersim::sim
