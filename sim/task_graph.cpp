#include "sim/task_graph.h"

#include <cassert>
#include <utility>

namespace clustersim::sim {

StreamId TaskGraph::add_stream(std::uint32_t gpu, std::string name) {
  streams_.push_back(StreamInfo{gpu, std::move(name)});
  stream_tasks_.emplace_back();
  return static_cast<StreamId>(streams_.size() - 1);
}

LabelId TaskGraph::add_label(TaskLabel label) {
  labels_.push_back(std::move(label));
  return static_cast<LabelId>(labels_.size() - 1);
}

TaskId TaskGraph::add(LabelId label, std::span<const StreamId> lanes, Seconds duration,
                      std::span<const TaskId> deps) {
  const auto id = static_cast<TaskId>(tasks_.size());
  assert(label < labels_.size() && "unknown label");
  assert(!lanes.empty() && "a task needs at least one stream");
  assert(duration.raw() >= 0 && "task durations are non-negative");
  for (TaskId d : deps) {
    assert(d < id && "dependencies must name existing tasks");
    (void)d;
  }
  tasks_.push_back(Task{label, static_cast<std::uint32_t>(lanes.size()), static_cast<std::uint32_t>(deps.size()),
                        false, lanes_.size(), deps_.size(), duration});
  for (StreamId s : lanes) {
    assert(s < streams_.size() && "unknown stream");
    assert((stream_tasks_[s].empty() || stream_tasks_[s].back() != id) && "duplicate lane");
    stream_tasks_[s].push_back(id);
    lanes_.push_back(s);
  }
  deps_.insert(deps_.end(), deps.begin(), deps.end());
  return id;
}

TaskId TaskGraph::add_dynamic(LabelId label, std::span<const StreamId> lanes, std::span<const TaskId> deps) {
  const TaskId id = add(label, lanes, seconds(0), deps);
  tasks_[id].dynamic = true;
  return id;
}

TaskId TaskGraph::add(TaskSpec spec) {
  const LabelId label = spec.label != kNewLabel
                            ? spec.label
                            : add_label(TaskLabel{std::move(spec.name), std::move(spec.category), std::move(spec.args)});
  return add(label, spec.lanes, spec.duration, spec.deps);
}

void TaskGraph::add_dependency(TaskId task, TaskId on) {
  assert(task < tasks_.size() && on < tasks_.size());
  extra_deps_.emplace_back(task, on);
}

}  // namespace clustersim::sim
