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
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
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

class Executor {
 public:
  // `runner` is required when the graph has dynamic tasks.
  Executor(Simulation& sim, const TaskGraph& graph, TaskRunner* runner = nullptr);
  // Schedules the tasks that can run at time now(); the rest follow as events fire.
  // Calling it again does nothing.
  void start();
  // Call after Simulation::run(): throws DeadlockError if tasks were left unfinished.
  void finish() const;

  SimTime start_time(TaskId id) const { return start_[id]; }
  SimTime end_time(TaskId id) const { return end_[id]; }
  bool done(TaskId id) const { return end_[id] >= 0; }
  std::size_t completed() const { return completed_; }
  SimTime makespan() const { return makespan_; }

 private:
  void try_start(TaskId id);
  void complete(TaskId id);
  void arrive(StreamId s);

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
};

}  // namespace clustersim::sim
