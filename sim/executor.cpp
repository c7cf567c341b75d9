#include "sim/executor.h"

#include <cassert>
#include <sstream>

namespace clustersim::sim {

Executor::Executor(Simulation& sim, const TaskGraph& graph)
    : sim_(sim),
      graph_(graph),
      dependents_(graph.size()),
      deps_left_(graph.size(), 0),
      lanes_arrived_(graph.size(), 0),
      stream_head_(graph.stream_count(), 0),
      start_(graph.size(), -1),
      end_(graph.size(), -1) {
  for (TaskId t = 0; t < graph.size(); ++t) {
    for (TaskId d : graph.task(t).deps) {
      dependents_[d].push_back(t);
      ++deps_left_[t];
    }
  }
}

void Executor::start() {
  if (started_) return;  // arrivals must be counted once per stream
  started_ = true;
  for (StreamId s = 0; s < graph_.stream_count(); ++s) arrive(s);
  // Tasks whose streams were all reached above were tried already; a task cannot be ready
  // without being at the head of its streams, so nothing else needs a look.
}

void Executor::arrive(StreamId s) {
  const auto& tasks = graph_.stream_tasks(s);
  if (stream_head_[s] >= tasks.size()) return;
  const TaskId t = tasks[stream_head_[s]];
  ++lanes_arrived_[t];
  try_start(t);
}

void Executor::try_start(TaskId id) {
  const TaskSpec& spec = graph_.task(id);
  if (deps_left_[id] != 0 || lanes_arrived_[id] != spec.lanes.size() || start_[id] >= 0) return;
  start_[id] = sim_.now();
  sim_.schedule_after(to_sim_time(spec.duration), [this, id] { complete(id); });
}

void Executor::complete(TaskId id) {
  const TaskSpec& spec = graph_.task(id);
  const SimTime now = sim_.now();
  end_[id] = now;
  ++completed_;
  if (now > makespan_) makespan_ = now;
  for (StreamId s : spec.lanes) {
    const StreamInfo& info = graph_.stream(s);
    sim_.emit(TaskRecord{id, spec.name, spec.category, info.gpu, info.name, start_[id], now, &spec.args});
  }
  for (StreamId s : spec.lanes) {
    ++stream_head_[s];
    arrive(s);
  }
  for (TaskId d : dependents_[id]) {
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
  int listed = 0;
  for (TaskId t = 0; t < graph_.size() && listed < 8; ++t) {
    if (start_[t] >= 0) continue;
    const TaskSpec& spec = graph_.task(t);
    // Only tasks at the head of a stream are interesting: the others wait behind them.
    if (lanes_arrived_[t] == 0) continue;
    out << (listed ? "; " : " ") << "'" << spec.name << "' (task " << t << ")";
    if (deps_left_[t] != 0) {
      out << " waits for";
      for (TaskId d : spec.deps)
        if (end_[d] < 0) out << " '" << graph_.task(d).name << "'";
    }
    if (lanes_arrived_[t] != spec.lanes.size()) {
      out << " has " << lanes_arrived_[t] << "/" << spec.lanes.size() << " members; missing";
      for (StreamId s : spec.lanes) {
        const auto& tasks = graph_.stream_tasks(s);
        if (stream_head_[s] < tasks.size() && tasks[stream_head_[s]] != t)
          out << " gpu" << graph_.stream(s).gpu << "/" << graph_.stream(s).name << " (busy with '"
              << graph_.task(tasks[stream_head_[s]]).name << "')";
      }
    }
    ++listed;
  }
  if (stuck > static_cast<std::size_t>(listed)) out << "; ...";
  throw DeadlockError(out.str());
}

}  // namespace clustersim::sim
