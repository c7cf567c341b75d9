// TaskGraph: the work of one iteration as tasks with dependencies, each placed on one or more
// streams. A stream belongs to a GPU (as a CUDA stream does: "compute", "dp-comm", ...), runs one
// task at a time, in the order tasks were added to it. A task with several lanes (one stream on
// each member GPU) is a collective: it starts only when every member's stream has reached it and
// its dependencies are done (NCCL semantics), and occupies all its lanes for its duration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/trace.h"
#include "sim/units.h"

namespace clustersim::sim {

using TaskId = std::uint32_t;
using StreamId = std::uint32_t;

struct StreamInfo {
  std::uint32_t gpu = 0;
  std::string name;
};

struct TaskSpec {
  std::string name;
  std::string category;          // what the time is spent on: "compute", "dp_comm", ...
  std::vector<StreamId> lanes;   // one stream per participating GPU, at least one
  Seconds duration;              // >= 0
  std::vector<TaskId> deps;      // tasks that must finish first (earlier tasks)
  std::vector<TaskArg> args;     // shown in traces: FLOPs, bytes, ...
};

class TaskGraph {
 public:
  StreamId add_stream(std::uint32_t gpu, std::string name);
  // Adds a task at the end of each of its lanes' streams. Dependencies must name existing tasks.
  TaskId add(TaskSpec spec);
  // An extra dependency between any two tasks (may point forward; cycles are reported as
  // deadlocks by the executor, as imported traces can contain them).
  void add_dependency(TaskId task, TaskId on);

  std::size_t size() const { return tasks_.size(); }
  std::size_t stream_count() const { return streams_.size(); }
  const TaskSpec& task(TaskId id) const { return tasks_[id]; }
  const StreamInfo& stream(StreamId id) const { return streams_[id]; }
  // Tasks of a stream in execution order.
  const std::vector<TaskId>& stream_tasks(StreamId id) const { return stream_tasks_[id]; }

 private:
  std::vector<TaskSpec> tasks_;
  std::vector<StreamInfo> streams_;
  std::vector<std::vector<TaskId>> stream_tasks_;
};

}  // namespace clustersim::sim
