#include "workloads/host_dispatch.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace clustersim::workloads {

std::vector<HostProgram::Issue>& HostProgram::of(std::uint32_t rank) {
  assert(rank < ranks_ && "a rank of the job");
  if (issues_.empty()) {
    issues_.resize(ranks_);
    next_.assign(ranks_, 0.0);
    index_.resize(ranks_);
  }
  return issues_[rank];
}

double HostProgram::position_of(std::uint32_t rank, sim::TaskId task) const {
  const auto found = index_[rank].find(task);
  assert(found != index_[rank].end() && "the anchor was issued on this rank");
  return issues_[rank][found->second].position;
}

void HostProgram::issue(std::uint32_t rank, sim::TaskId task, double kernels, bool device_work) {
  std::vector<Issue>& list = of(rank);
  next_[rank] += 1;
  index_[rank].emplace(task, list.size());
  list.push_back({next_[rank], seq_++, task, kernels, device_work, {}});
}

void HostProgram::issue_after(std::uint32_t rank, sim::TaskId anchor, sim::TaskId task, double kernels) {
  std::vector<Issue>& list = of(rank);
  const double at = position_of(rank, anchor) + 0.5;
  index_[rank].emplace(task, list.size());
  list.push_back({at, seq_++, task, kernels, false, {}});
}

void HostProgram::issue_before(std::uint32_t rank, sim::TaskId anchor, sim::TaskId task, double kernels) {
  std::vector<Issue>& list = of(rank);
  const double at = position_of(rank, anchor) - 0.5;
  index_[rank].emplace(task, list.size());
  list.push_back({at, seq_++, task, kernels, false, {}});
}

void HostProgram::synchronize_before(std::uint32_t rank, sim::TaskId anchor, sim::TaskId task) {
  std::vector<Issue>& list = of(rank);
  const auto found = index_[rank].find(anchor);
  assert(found != index_[rank].end() && "the anchor was issued on this rank");
  list[found->second].waits.push_back(task);
}

std::vector<sim::StreamId> HostProgram::build(sim::TaskGraph& graph, std::span<const std::uint32_t> gpus) const {
  std::vector<sim::StreamId> streams(gpus.size(), 0);
  if (!enabled()) return streams;
  std::map<std::string, sim::LabelId> labels;  // GPU task name → its dispatch's label
  for (std::size_t rank = 0; rank < issues_.size(); ++rank) {
    if (issues_[rank].empty()) continue;
    std::vector<const Issue*> order;
    order.reserve(issues_[rank].size());
    for (const Issue& i : issues_[rank]) order.push_back(&i);
    std::stable_sort(order.begin(), order.end(), [](const Issue* a, const Issue* b) {
      return a->position != b->position ? a->position < b->position : a->seq < b->seq;
    });
    const sim::StreamId stream = graph.add_stream(gpus[rank], kHostStream);
    streams[rank] = stream;
    const sim::StreamId lane[] = {stream};
    const Issue* last_device = nullptr;
    std::vector<sim::TaskId> deps;
    for (const Issue* i : order) {
      auto label = labels.find(graph.label(i->task).name);
      if (label == labels.end()) {
        std::string name = graph.label(i->task).name;  // a copy: add_label may move the graph's labels
        const sim::LabelId id = graph.add_label({"dispatch " + name, kCategoryHost, {}});
        label = labels.emplace(std::move(name), id).first;
      }
      deps = i->waits;
      // torch.cuda.synchronize(): the device work issued before, too.
      if (!i->waits.empty() && last_device) deps.push_back(last_device->task);
      const sim::TaskId host = graph.add(label->second, lane, per_kernel_ * i->kernels, deps);
      graph.add_dependency(i->task, host);
      if (i->device_work) last_device = i;
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
