#include "workloads/iteration_result.h"

#include <cmath>

#include "sim/executor.h"
#include "workloads/compute_model.h"

namespace clustersim::workloads {

using Intervals = std::vector<std::pair<sim::SimTime, sim::SimTime>>;

Seconds exposed_time(const Intervals& busy, const Intervals& cover) {
  sim::SimTime exposed = 0;
  std::size_t j = 0;
  for (const auto& [start, end] : busy) {
    sim::SimTime t = start;
    while (j < cover.size() && cover[j].second <= t) ++j;
    for (std::size_t k = j; k < cover.size() && cover[k].first < end && t < end; ++k) {
      if (cover[k].first > t) exposed += cover[k].first - t;
      t = std::max(t, cover[k].second);
    }
    if (t < end) exposed += end - t;
  }
  return sim::to_seconds(exposed);
}

TrainingTime training_time(const TrainingJob& job, std::uint32_t grad_accum, std::uint32_t gpus,
                           Seconds iteration_time) {
  TrainingTime t;
  const double steps = job.epochs * job.samples_per_epoch / double(job.global_batch);
  // A partial last batch still costs a step; the epsilon keeps 1000/10 from becoming 101.
  t.optimizer_steps = static_cast<std::uint64_t>(std::ceil(steps - 1e-9));
  t.micro_batch_steps = t.optimizer_steps * grad_accum;
  t.time_to_train = iteration_time * double(t.optimizer_steps);
  t.gpu_hours = t.time_to_train.raw() * gpus / 3600.0;
  return t;
}

IterationResult simulate_iteration(const Scenario& sc, const std::vector<sim::TraceSink*>& sinks) {
  IterationGraph it = build_ddp_iteration(sc);
  sim::Simulation simulation;
  for (sim::TraceSink* s : sinks) simulation.add_sink(s);
  sim::Executor executor(simulation, it.graph);
  executor.start();
  IterationResult r;
  r.events = simulation.run();
  executor.finish();
  r.tasks = it.graph.size();
  r.iteration_time = sim::to_seconds(executor.makespan());

  const std::uint32_t gpus = sc.cluster.gpu_count();
  auto intervals = [&](sim::StreamId s) {
    Intervals out;
    for (sim::TaskId t : it.graph.stream_tasks(s)) out.emplace_back(executor.start_time(t), executor.end_time(t));
    return out;
  };
  for (std::uint32_t g = 0; g < gpus; ++g) {
    const Intervals compute = intervals(it.compute_stream[g]);
    const Intervals comm = intervals(it.comm_stream[g]);
    TimeBreakdown b;
    for (const auto& [s, e] : compute) b.compute += sim::to_seconds(e - s);
    b.exposed_comm = exposed_time(comm, compute);
    b.idle = r.iteration_time - b.compute - b.exposed_comm;
    r.per_gpu.push_back(b);
    if (g == 0 || b.exposed_comm > r.per_gpu[r.breakdown_gpu].exposed_comm) r.breakdown_gpu = g;
  }
  r.breakdown = r.per_gpu[r.breakdown_gpu];

  const double global_batch = double(sc.parallel.micro_batch) * sc.parallel.grad_accum * sc.parallel.dp;
  r.samples_per_s = global_batch / r.iteration_time.raw();
  r.tokens_per_s = r.samples_per_s * sc.model.seq_len;
  r.model_flops_per_step = model_flops(sc.model, sc.parallel.micro_batch) * (double(sc.parallel.grad_accum) * sc.parallel.dp);
  r.mfu = r.model_flops_per_step.raw() /
          (r.iteration_time.raw() * gpus * tensor_peak(sc.profile.gpu, sc.training.precision).raw());
  r.buckets = std::move(it.buckets);
  r.memory = estimate_ddp_memory(sc);
  r.training = training_time(sc.training, sc.parallel.grad_accum, gpus, r.iteration_time);
  return r;
}

}  // namespace clustersim::workloads
