#include "sim/executor.h"

#include <algorithm>
#include <cassert>
#include <cmath>
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

void Executor::set_comm_slowdown(const CommSlowdown& slowdown) {
  assert(!started_ && "set_comm_slowdown() goes before start()");
  assert(slowdown.factor >= 1 && "compute slowdown during communication must be >= 1");
  if (!(slowdown.factor > 1)) return;  // 1: nothing to track, byte-identical to running without it
  slow_factor_ = slowdown.factor;
  auto in = [](const std::vector<std::string>& set, const std::string& c) {
    return std::find(set.begin(), set.end(), c) != set.end();
  };
  kind_.assign(graph_.size(), Kind::kOther);
  std::uint32_t gpus = 0;
  for (StreamId s = 0; s < graph_.stream_count(); ++s) gpus = std::max(gpus, graph_.stream(s).gpu + 1);
  comm_running_.assign(gpus, 0);
  compute_running_.assign(gpus, {});
  for (TaskId t = 0; t < graph_.size(); ++t) {
    const std::string& c = graph_.label(t).category;
    if (in(slowdown.comm_categories, c))
      kind_[t] = Kind::kComm;
    else if (!graph_.dynamic(t) && in(slowdown.compute_categories, c))
      kind_[t] = Kind::kCompute;
  }
}

bool Executor::comm_on_gpus(TaskId id) const {
  for (StreamId s : graph_.lanes(id))
    if (comm_running_[graph_.stream(s).gpu] != 0) return true;
  return false;
}

void Executor::start_compute(TaskId id) {
  Running r;
  r.since = sim_.now();
  r.slowed = comm_on_gpus(id);
  const SimTime work = to_sim_time(graph_.duration(id));
  r.work_left = static_cast<double>(work);
  const SimTime length = r.slowed ? static_cast<SimTime>(std::llround(r.work_left * slow_factor_)) : work;
  r.end_event = sim_.schedule_after(length, [this, id] { complete(id); });
  running_.emplace(id, r);
  for (StreamId s : graph_.lanes(id)) {
    auto& on = compute_running_[graph_.stream(s).gpu];
    if (std::find(on.begin(), on.end(), id) == on.end()) on.push_back(id);
  }
}

void Executor::comm_changed(std::uint32_t gpu) {
  const SimTime now = sim_.now();
  for (TaskId id : compute_running_[gpu]) {
    Running& r = running_.at(id);
    const bool slowed = comm_on_gpus(id);
    if (slowed == r.slowed) continue;  // another of its GPUs already had communication
    const double elapsed = static_cast<double>(now - r.since);
    r.work_left = std::max(0.0, r.work_left - (r.slowed ? elapsed / slow_factor_ : elapsed));
    r.since = now;
    r.slowed = slowed;
    sim_.cancel(r.end_event);
    const auto length = static_cast<SimTime>(std::llround(slowed ? r.work_left * slow_factor_ : r.work_left));
    try {
      r.end_event = sim_.schedule_after(length, [this, id] { complete(id); });
    } catch (const TimeRangeError& e) {
      throw_naming(e, id);
    }
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
  try {
    begin(id);
  } catch (const TimeRangeError& e) {
    throw_naming(e, id);
  }
}

void Executor::throw_naming(const TimeRangeError& e, TaskId id) const {
  if (e.names_what()) throw e;
  const auto lanes = graph_.lanes(id);
  std::string what = "task \"" + graph_.label(id).name + "\"";
  if (!lanes.empty()) {
    const StreamInfo& s = graph_.stream(lanes.front());
    what += " on GPU " + std::to_string(s.gpu) + " (stream " + s.name + ")";
  }
  throw TimeRangeError(e.seconds(), what);
}

void Executor::begin(TaskId id) {
  start_[id] = sim_.now();
  if (slow_factor_ > 1 && kind_[id] != Kind::kOther) {
    if (kind_[id] == Kind::kCompute) {
      start_compute(id);
      return;
    }
    for (StreamId s : graph_.lanes(id))
      if (comm_running_[graph_.stream(s).gpu]++ == 0) comm_changed(graph_.stream(s).gpu);
  }
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
  if (slow_factor_ > 1 && kind_[id] == Kind::kCompute) {
    running_.erase(id);
    for (StreamId s : graph_.lanes(id)) {
      auto& on = compute_running_[graph_.stream(s).gpu];
      const auto it = std::find(on.begin(), on.end(), id);
      if (it != on.end()) on.erase(it);
    }
  } else if (slow_factor_ > 1 && kind_[id] == Kind::kComm) {
    for (StreamId s : graph_.lanes(id))
      if (--comm_running_[graph_.stream(s).gpu] == 0) comm_changed(graph_.stream(s).gpu);
  }
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
  // First the tasks that started and never finished (a dynamic task whose runner never reported it done): they
  // are the culprits, and every task behind them waits on their streams.
  for (TaskId t = 0; t < graph_.size() && listed < 8; ++t) {
    if (start_[t] < 0 || end_[t] >= 0) continue;
    out << (listed ? "; " : " ") << "'" << graph_.label(t).name << "' (task " << t << ") started at "
        << format_us(start_[t]) << " us and never finished";
    ++listed;
  }
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
