#include "sim/task_graph.h"

#include <cassert>
#include <utility>

namespace clustersim::sim {

StreamId TaskGraph::add_stream(std::uint32_t gpu, std::string name) {
  streams_.push_back(StreamInfo{gpu, std::move(name)});
  stream_tasks_.emplace_back();
  return static_cast<StreamId>(streams_.size() - 1);
}

TaskId TaskGraph::add(TaskSpec spec) {
  const auto id = static_cast<TaskId>(tasks_.size());
  assert(!spec.lanes.empty() && "a task needs at least one stream");
  assert(spec.duration.raw() >= 0 && "task durations are non-negative");
  for (TaskId d : spec.deps) {
    assert(d < id && "dependencies must name existing tasks");
    (void)d;
  }
  for (StreamId s : spec.lanes) {
    assert(s < streams_.size() && "unknown stream");
    assert((stream_tasks_[s].empty() || stream_tasks_[s].back() != id) && "duplicate lane");
    stream_tasks_[s].push_back(id);
  }
  tasks_.push_back(std::move(spec));
  return id;
}

void TaskGraph::add_dependency(TaskId task, TaskId on) {
  assert(task < tasks_.size() && on < tasks_.size());
  tasks_[task].deps.push_back(on);
}

}  // namespace clustersim::sim
