// TaskGraph: the work of one iteration as tasks with dependencies, each placed on one or more
// streams. A stream belongs to a GPU (as a CUDA stream does: "compute", "dp-comm", ...), runs one
// task at a time, in the order tasks were added to it. A task with several lanes (one stream on
// each member GPU) is a collective: it starts only when every member's stream has reached it and
// its dependencies are done (NCCL semantics), and occupies all its lanes for its duration.
//
// Storage is flat (lanes and dependencies of all tasks in two arrays) and what is shared by many
// tasks — name, category, trace arguments — lives once in a TaskLabel: the same kernel on 1,024
// data-parallel replicas is 1,024 tasks and one label.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sim/trace.h"
#include "sim/units.h"

namespace clustersim::sim {

using TaskId = std::uint32_t;
using StreamId = std::uint32_t;
using LabelId = std::uint32_t;
inline constexpr LabelId kNewLabel = std::numeric_limits<LabelId>::max();

struct StreamInfo {
  std::uint32_t gpu = 0;
  std::string name;
};

struct TaskLabel {
  std::string name;
  std::string category;          // what the time is spent on: "compute", "dp_comm", ...
  std::vector<TaskArg> args;     // shown in traces: FLOPs, bytes, ...
};

// Convenience form of a task; `label`, when set, replaces name/category/args.
struct TaskSpec {
  std::string name;
  std::string category;
  std::vector<StreamId> lanes;   // one stream per participating GPU, at least one
  Seconds duration;              // >= 0
  std::vector<TaskId> deps;      // tasks that must finish first (earlier tasks)
  std::vector<TaskArg> args;
  LabelId label = kNewLabel;
};

class TaskGraph {
 public:
  StreamId add_stream(std::uint32_t gpu, std::string name);
  LabelId add_label(TaskLabel label);
  // Adds a task at the end of each of its lanes' streams. Dependencies must name existing tasks.
  TaskId add(LabelId label, std::span<const StreamId> lanes, Seconds duration, std::span<const TaskId> deps = {});
  // A task whose duration is decided while it runs (e.g. a collective made of flows that share
  // links with other traffic): the executor hands it to its TaskRunner when it starts.
  TaskId add_dynamic(LabelId label, std::span<const StreamId> lanes, std::span<const TaskId> deps = {});
  TaskId add(TaskSpec spec);
  // An extra dependency between any two tasks (may point forward; cycles are reported as
  // deadlocks by the executor, as imported traces can contain them).
  void add_dependency(TaskId task, TaskId on);

  std::size_t size() const { return tasks_.size(); }
  std::size_t stream_count() const { return streams_.size(); }
  const StreamInfo& stream(StreamId id) const { return streams_[id]; }
  // Tasks of a stream in execution order.
  const std::vector<TaskId>& stream_tasks(StreamId id) const { return stream_tasks_[id]; }

  const TaskLabel& label(TaskId id) const { return labels_[tasks_[id].label]; }
  // Appends an argument to a task's label, for what is known only once it ran (a collective's achieved bus
  // bandwidth under contention). Call before the task completes: trace sinks read the label then.
  void append_label_arg(TaskId id, TaskArg arg) { labels_[tasks_[id].label].args.push_back(std::move(arg)); }
  Seconds duration(TaskId id) const { return tasks_[id].duration; }
  bool dynamic(TaskId id) const { return tasks_[id].dynamic; }
  std::span<const StreamId> lanes(TaskId id) const {
    return {lanes_.data() + tasks_[id].lane_begin, tasks_[id].lane_count};
  }
  // Dependencies given when the task was added (see extra_dependencies() for the others).
  std::span<const TaskId> deps(TaskId id) const { return {deps_.data() + tasks_[id].dep_begin, tasks_[id].dep_count}; }
  // (task, on) pairs from add_dependency().
  const std::vector<std::pair<TaskId, TaskId>>& extra_dependencies() const { return extra_deps_; }

 private:
  struct Task {  // 40 bytes: the flag packed beside the 32-bit fields (graphs hold up to 2^26 tasks)
    LabelId label;
    std::uint32_t lane_count;
    std::uint32_t dep_count;
    bool dynamic;
    std::size_t lane_begin;
    std::size_t dep_begin;
    Seconds duration;
  };
  static_assert(sizeof(Task) <= 40);
  std::vector<Task> tasks_;
  std::vector<StreamId> lanes_;
  std::vector<TaskId> deps_;
  std::vector<std::pair<TaskId, TaskId>> extra_deps_;
  std::vector<TaskLabel> labels_;
  std::vector<StreamInfo> streams_;
  std::vector<std::vector<TaskId>> stream_tasks_;
};

}  // namespace clustersim::sim
