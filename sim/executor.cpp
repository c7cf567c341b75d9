#include "sim/executor.h"

#include <cassert>
#include <sstream>

namespace clustersim::sim {

Executor::Executor(Simulation& sim, const TaskGraph& graph, TaskRunner* runner)
    : sim_(sim),
      graph_(graph),
      runner_(runner),
      dependents_begin_(graph.size() + 1, 0),
      deps_left_(graph.size(), 0),
      lanes_arrived_(graph.size(), 0),
      stream_head_(graph.stream_count(), 0),
      start_(graph.size(), -1),
      end_(graph.size(), -1) {
  // Build the reverse adjacency (who waits for t) in compressed-row form: count, prefix-sum, fill.
  const auto& extra = graph.extra_dependencies();
  for (TaskId t = 0; t < graph.size(); ++t)
    for (TaskId d : graph.deps(t)) ++dependents_begin_[d + 1];
  for (const auto& [t, d] : extra) ++dependents_begin_[d + 1];
  for (std::size_t i = 1; i < dependents_begin_.size(); ++i) dependents_begin_[i] += dependents_begin_[i - 1];
  dependents_.resize(dependents_begin_.back());
  std::vector<std::size_t> fill(dependents_begin_.begin(), dependents_begin_.end() - 1);
  for (TaskId t = 0; t < graph.size(); ++t) {
    for (TaskId d : graph.deps(t)) dependents_[fill[d]++] = t;
    deps_left_[t] = static_cast<std::uint32_t>(graph.deps(t).size());
  }
  for (const auto& [t, d] : extra) {
    dependents_[fill[d]++] = t;
    ++deps_left_[t];
  }
}

void Executor::start() {
  if (started_) return;  // arrivals must be counted once per stream
  started_ = true;
  for (StreamId s = 0; s < graph_.stream_count(); ++s) arrive(s);
  // A task cannot be ready without being at the head of its streams, so the arrivals above
  // have tried every task that can start now.
}

void Executor::arrive(StreamId s) {
  const auto& tasks = graph_.stream_tasks(s);
  if (stream_head_[s] >= tasks.size()) return;
  const TaskId t = tasks[stream_head_[s]];
  ++lanes_arrived_[t];
  try_start(t);
}

void Executor::try_start(TaskId id) {
  if (deps_left_[id] != 0 || lanes_arrived_[id] != graph_.lanes(id).size() || start_[id] >= 0) return;
  start_[id] = sim_.now();
  if (graph_.dynamic(id)) {
    assert(runner_ && "dynamic tasks need a TaskRunner");
    // Completion goes through the queue even when the runner finishes at once, so that a task
    // never completes inside the call that started it.
    runner_->run(id, [this, id] { sim_.schedule_after(0, [this, id] { complete(id); }); });
    return;
  }
  sim_.schedule_after(to_sim_time(graph_.duration(id)), [this, id] { complete(id); });
}

void Executor::complete(TaskId id) {
  const SimTime now = sim_.now();
  end_[id] = now;
  ++completed_;
  if (now > makespan_) makespan_ = now;
  if (sim_.has_sinks()) {
    const TaskLabel& label = graph_.label(id);
    for (StreamId s : graph_.lanes(id)) {
      const StreamInfo& info = graph_.stream(s);
      sim_.emit(TaskRecord{id, label.name, label.category, info.gpu, info.name, start_[id], now, &label.args});
    }
  }
  for (StreamId s : graph_.lanes(id)) {
    ++stream_head_[s];
    arrive(s);
  }
  for (std::size_t i = dependents_begin_[id]; i < dependents_begin_[id + 1]; ++i) {
    const TaskId d = dependents_[i];
    --deps_left_[d];
    try_start(d);
  }
}

void Executor::finish() const {
  if (completed_ == graph_.size()) return;
  std::ostringstream out;
  const std::size_t stuck = graph_.size() - completed_;
  out << "simulation deadlocked at t=" << format_us(sim_.now()) << " us with " << stuck
      << " unfinished task(s); stuck:";
  // What a stuck task waits for: unfinished dependencies (given at creation or added later).
  auto waits_for = [&](TaskId t) {
    std::vector<TaskId> out_deps;
    for (TaskId d : graph_.deps(t))
      if (end_[d] < 0) out_deps.push_back(d);
    for (const auto& [task, on] : graph_.extra_dependencies())
      if (task == t && end_[on] < 0) out_deps.push_back(on);
    return out_deps;
  };
  int listed = 0;
  for (TaskId t = 0; t < graph_.size() && listed < 8; ++t) {
    if (start_[t] >= 0) continue;
    // Only tasks at the head of a stream are interesting: the others wait behind them.
    if (lanes_arrived_[t] == 0) continue;
    const auto lanes = graph_.lanes(t);
    out << (listed ? "; " : " ") << "'" << graph_.label(t).name << "' (task " << t << ")";
    if (deps_left_[t] != 0) {
      out << " waits for";
      for (TaskId d : waits_for(t)) out << " '" << graph_.label(d).name << "'";
    }
    if (lanes_arrived_[t] != lanes.size()) {
      out << " has " << lanes_arrived_[t] << "/" << lanes.size() << " members; missing";
      for (StreamId s : lanes) {
        const auto& tasks = graph_.stream_tasks(s);
        if (stream_head_[s] < tasks.size() && tasks[stream_head_[s]] != t)
          out << " gpu" << graph_.stream(s).gpu << "/" << graph_.stream(s).name << " (busy with '"
              << graph_.label(tasks[stream_head_[s]]).name << "')";
      }
    }
    ++listed;
  }
  if (stuck > static_cast<std::size_t>(listed)) out << "; ...";
  throw DeadlockError(out.str());
}

}  // namespace clustersim::sim
