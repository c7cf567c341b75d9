#include "workloads/host_dispatch.h"

#include <algorithm>
#include <cassert>
#include <map>
#include <string>

namespace clustersim::workloads {

std::vector<HostProgram::Issue>& HostProgram::of(std::uint32_t rank) {
  assert(rank < ranks_ && "a rank of the job");
  if (issues_.empty()) {
    issues_.resize(ranks_);
    next_.assign(ranks_, 0.0);
    waits_.resize(ranks_);
  }
  return issues_[rank];
}

std::size_t HostProgram::index_of(std::uint32_t rank, sim::TaskId task) const {
  const std::vector<Issue>& list = issues_[rank];
  const auto found = std::lower_bound(list.begin(), list.end(), task,
                                      [](const Issue& i, sim::TaskId t) { return i.task < t; });
  assert(found != list.end() && found->task == task && "the anchor was issued on this rank");
  return static_cast<std::size_t>(found - list.begin());
}

void HostProgram::record(std::uint32_t rank, double position, sim::TaskId task, double kernels, bool device_work) {
  std::vector<Issue>& list = of(rank);
  assert((list.empty() || list.back().task < task) && "issues are recorded in task order");
  list.push_back({position, task, static_cast<float>(kernels), device_work});
}

void HostProgram::issue(std::uint32_t rank, sim::TaskId task, double kernels, bool device_work) {
  of(rank);
  next_[rank] += 1;
  record(rank, next_[rank], task, kernels, device_work);
}

void HostProgram::issue_after(std::uint32_t rank, sim::TaskId anchor, sim::TaskId task, double kernels) {
  const double at = of(rank)[index_of(rank, anchor)].position + 0.5;
  record(rank, at, task, kernels, false);
}

void HostProgram::issue_before(std::uint32_t rank, sim::TaskId anchor, sim::TaskId task, double kernels) {
  const double at = of(rank)[index_of(rank, anchor)].position - 0.5;
  record(rank, at, task, kernels, false);
}

void HostProgram::synchronize_before(std::uint32_t rank, sim::TaskId anchor, sim::TaskId task) {
  of(rank);
  waits_[rank].emplace_back(anchor, task);
}

std::vector<sim::StreamId> HostProgram::build(sim::TaskGraph& graph, std::span<const std::uint32_t> gpus) const {
  std::vector<sim::StreamId> streams(gpus.size(), 0);
  if (!enabled()) return streams;
  std::map<std::string, sim::LabelId> labels;  // GPU task name → its dispatch's label
  std::vector<Issue> order;
  std::vector<sim::TaskId> deps;
  for (std::size_t rank = 0; rank < issues_.size(); ++rank) {
    if (issues_[rank].empty()) continue;
    order = issues_[rank];
    std::stable_sort(order.begin(), order.end(),
                     [](const Issue& a, const Issue& b) { return a.position < b.position; });
    std::map<sim::TaskId, std::vector<sim::TaskId>> waits;  // anchor → what its dispatch waits for
    for (const auto& [anchor, task] : waits_[rank]) waits[anchor].push_back(task);
    const sim::StreamId stream = graph.add_stream(gpus[rank], kHostStream);
    streams[rank] = stream;
    const sim::StreamId lane[] = {stream};
    const Issue* last_device = nullptr;
    for (const Issue& i : order) {
      auto label = labels.find(graph.label(i.task).name);
      if (label == labels.end()) {
        std::string name = graph.label(i.task).name;  // a copy: add_label may move the graph's labels
        const sim::LabelId id = graph.add_label({"dispatch " + name, kCategoryHost, {}});
        label = labels.emplace(std::move(name), id).first;
      }
      deps.clear();
      if (const auto w = waits.find(i.task); w != waits.end()) {
        deps = w->second;
        // torch.cuda.synchronize(): the device work issued before, too.
        if (last_device) deps.push_back(last_device->task);
      }
      const sim::TaskId host = graph.add(label->second, lane, per_kernel_ * double(i.kernels), deps);
      graph.add_dependency(i.task, host);
      if (i.device_work) last_device = &i;
    }
  }
  return streams;
}

double host_gpu_stretch(std::span<const double> host, std::span<const double> gpu) {
  assert(host.size() == gpu.size());
  double issued = 0, done = 0;
  for (std::size_t i = 0; i < host.size(); ++i) {
    issued += host[i];
    done = std::max(done, issued) + gpu[i];
  }
  return done;
}

double host_gpu_stretch_bound(double gpu_total, double host_total, double first_dispatch, double last_kernel) {
  return std::max(gpu_total + first_dispatch, host_total + last_kernel);
}

double host_excursion(std::span<const double> host, std::span<const double> gpu) {
  assert(host.size() == gpu.size());
  double issued = 0, ran = 0, excursion = 0;
  for (std::size_t i = 0; i < host.size(); ++i) {
    issued += host[i];
    excursion = std::max(excursion, issued - ran);
    ran += gpu[i];
  }
  return excursion;
}

double host_gpu_segments(std::span<const HostSegment> segments, double reps) {
  double gpu = 0, drift = 0, peak = 0;
  for (const HostSegment& s : segments) {
    peak = std::max(peak, drift + s.excursion);
    drift += s.host - s.gpu;
    gpu += s.gpu;
  }
  return reps * gpu + peak + std::max(0.0, (reps - 1) * drift);
}

}  // namespace clustersim::workloads
