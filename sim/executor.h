// Executor: runs a TaskGraph on a Simulation.
//
// A task starts at the earliest time when (1) all its dependencies have finished and (2) it is
// at the head of every one of its lanes' streams (each stream runs its tasks one at a time, in
// order; streams of one GPU run concurrently). It then occupies its lanes for its duration.
// Bookkeeping is O(1) per lane per event: a task counts the lanes that have reached it instead
// of polling them, so a collective over n GPUs costs O(n), not O(n^2).
// If the event queue drains with tasks left, the run deadlocked (a dependency cycle, or a
// collective whose members reach it in incompatible orders); finish() then throws DeadlockError
// naming the stuck tasks and what each waits for.
//
// Compute slowed by concurrent communication (DESIGN.md §3; the profile's
// gpu.compute_slowdown_during_comm, calibrate/hardware_profile.h): NCCL kernels occupy SMs, so while any
// communication task with a lane on GPU g runs, compute tasks on g progress at 1/s of their speed. It is
// work-conserving: a compute task of duration d holds d of work; over an interval of length Δ it does Δ of
// work without communication on its GPU(s) and Δ/s with it, and it ends when its work is done. A task that
// overlaps communication for part of its run is stretched only for that part: overlapped for a time o that
// ends before it does, it ends at start + d + o·(1 − 1/s) (it did o/s instead of o of work). Only the transitions
// "no communication ↔ some" on a GPU change rates (two concurrent collectives slow compute as one does);
// at a transition the running compute tasks of that GPU get their end event cancelled and rescheduled.
// Off (s = 1, the default) the executor does no bookkeeping at all and runs exactly as without it.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/simulation.h"
#include "sim/task_graph.h"

namespace clustersim::sim {

class DeadlockError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs dynamic tasks (TaskGraph::add_dynamic). run() is called when the task starts; it must call
// done() exactly once, when the task ends (at that simulated time, typically from an event).
class TaskRunner {
 public:
  virtual ~TaskRunner() = default;
  virtual void run(TaskId task, std::function<void()> done) = 0;
};

// Which tasks slow which (categories as in TaskLabel::category) and by how much.
struct CommSlowdown {
  double factor = 1.0;                          // s >= 1; 1 = off
  std::vector<std::string> compute_categories;  // slowed; only static tasks (a dynamic task's runner times it)
  std::vector<std::string> comm_categories;     // slow the compute of every GPU they have a lane on
};

class Executor {
 public:
  // `runner` is required when the graph has dynamic tasks.
  Executor(Simulation& sim, const TaskGraph& graph, TaskRunner* runner = nullptr);
  // Schedules the tasks that can run at time now(); the rest follow as events fire.
  // Calling it again does nothing.
  void start();
  // Applies compute slowdown during communication (see above); call before start(). factor < 1 is a
  // programming error (the profile loader rejects it).
  void set_comm_slowdown(const CommSlowdown& slowdown);
  // Call after Simulation::run(): throws DeadlockError if tasks were left unfinished.
  void finish() const;

  SimTime start_time(TaskId id) const { return start_[id]; }
  SimTime end_time(TaskId id) const { return end_[id]; }
  bool done(TaskId id) const { return end_[id] >= 0; }
  std::size_t completed() const { return completed_; }
  SimTime makespan() const { return makespan_; }

 private:
  void try_start(TaskId id);
  void begin(TaskId id);  // try_start's work once the task can start
  // Rethrows a TimeRangeError that names no task as one that names `id` and its GPU.
  [[noreturn]] void throw_naming(const TimeRangeError& e, TaskId id) const;
  void complete(TaskId id);
  void arrive(StreamId s);
  // Compute slowdown bookkeeping (only when slow_factor_ > 1).
  enum class Kind : std::uint8_t { kOther, kCompute, kComm };
  struct Running {          // a compute task in flight
    double work_left = 0;   // picoseconds of unslowed work left at `since`
    SimTime since = 0;
    bool slowed = false;
    EventId end_event;
  };
  bool comm_on_gpus(TaskId id) const;
  void comm_changed(std::uint32_t gpu);  // the GPU's communication went from none to some or back
  void start_compute(TaskId id);


  Simulation& sim_;
  const TaskGraph& graph_;
  TaskRunner* runner_;
  std::vector<std::size_t> dependents_begin_;  // CSR: dependents of t are
  std::vector<TaskId> dependents_;             // dependents_[begin[t] .. begin[t+1])
  std::vector<std::uint32_t> deps_left_;
  std::vector<std::uint32_t> lanes_arrived_;
  std::vector<std::size_t> stream_head_;  // index into graph_.stream_tasks(s)
  std::vector<SimTime> start_;
  std::vector<SimTime> end_;
  std::size_t completed_ = 0;
  SimTime makespan_ = 0;
  bool started_ = false;
  double slow_factor_ = 1.0;
  std::vector<Kind> kind_;                            // per task, when slowing
  std::vector<std::uint32_t> comm_running_;           // per GPU: communication tasks in flight
  std::vector<std::vector<TaskId>> compute_running_;  // per GPU: compute tasks in flight, in start order
  std::unordered_map<TaskId, Running> running_;       // looked up only, never iterated (determinism)
};

}  // namespace clustersim::sim
