#include "workloads/iteration_result.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <tuple>

#include "sim/executor.h"
#include "sim/input_error.h"
#include "workloads/collective_engine.h"
#include "workloads/compute_model.h"
#include "workloads/framework_graphs.h"
#include "workloads/megatron_graph.h"
#include "workloads/network_model.h"
#include "workloads/zero_graph.h"

namespace clustersim::workloads {

using Intervals = std::vector<std::pair<sim::SimTime, sim::SimTime>>;

// Sorts intervals and merges overlapping ones.
Intervals merge(Intervals in) {
  std::sort(in.begin(), in.end());
  Intervals out;
  for (const auto& iv : in) {
    if (!out.empty() && iv.first <= out.back().second)
      out.back().second = std::max(out.back().second, iv.second);
    else
      out.push_back(iv);
  }
  return out;
}

sim::SimTime exposed_ps(const Intervals& busy, const Intervals& cover) {
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
  return exposed;
}

Seconds exposed_time(const Intervals& busy, const Intervals& cover) {
  return sim::to_seconds(exposed_ps(busy, cover));
}

const char* to_string(CommKind k) {
  switch (k) {
    case CommKind::kTp:
      return "tp";
    case CommKind::kCp:
      return "cp";
    case CommKind::kEp:
      return "ep";
    case CommKind::kPp:
      return "pp";
    case CommKind::kDp:
      return "dp";
  }
  return "?";
}

const char* label(CommKind k) {
  constexpr const char* kLabels[kCommKinds] = {"TP", "CP", "EP", "PP", "DP"};  // CommKind's order
  const auto i = static_cast<std::size_t>(k);
  return i < kCommKinds ? kLabels[i] : "?";
}

namespace {

CommKind comm_kind_of(const std::string& category) {
  if (category == kCategoryTpComm) return CommKind::kTp;
  if (category == kCategoryCpComm) return CommKind::kCp;
  if (category == kCategoryEpComm) return CommKind::kEp;
  if (category == kCategoryPpComm) return CommKind::kPp;
  return CommKind::kDp;  // dp_comm, and Horovod's negotiation cycles
}

// Exposed time of each kind's intervals where `cover` (merged, sorted) runs nothing; an instant where several kinds
// run goes to the first kind in CommKind order (TimeBreakdown::exposed_by_kind).
std::array<sim::SimTime, kCommKinds> exposed_by_kind(
    const std::vector<std::pair<std::pair<sim::SimTime, sim::SimTime>, CommKind>>& comm,
    const std::vector<std::pair<sim::SimTime, sim::SimTime>>& cover) {
  // Events: +1/−1 per kind (index 0..4) and per cover (index 5), swept in time order.
  std::vector<std::tuple<sim::SimTime, int, std::size_t>> events;
  for (const auto& [span, kind] : comm) {
    if (span.second <= span.first) continue;
    events.emplace_back(span.first, +1, static_cast<std::size_t>(kind));
    events.emplace_back(span.second, -1, static_cast<std::size_t>(kind));
  }
  for (const auto& [a, b] : cover) {
    if (b <= a) continue;
    events.emplace_back(a, +1, kCommKinds);
    events.emplace_back(b, -1, kCommKinds);
  }
  std::sort(events.begin(), events.end());
  std::array<sim::SimTime, kCommKinds> out{};
  std::array<int, kCommKinds + 1> active{};
  sim::SimTime at = 0;
  for (const auto& [t, delta, index] : events) {
    if (t > at && active[kCommKinds] == 0)
      for (std::size_t k = 0; k < kCommKinds; ++k)
        if (active[k] > 0) {
          out[k] += t - at;
          break;
        }
    at = t;
    active[index] += delta;
  }
  return out;
}

}  // namespace

std::uint64_t optimizer_steps_for(double steps) {
  if (!(steps > 0)) return 0;
  // A count within a few ulps of a whole number is that number (the division rounded it off by an ulp); any
  // other is rounded up. Scaling the value down by 1e-12 instead took whole steps off counts from 1e12 on.
  const double whole = std::round(steps);
  const double counted =
      std::fabs(steps - whole) <= 4 * std::numeric_limits<double>::epsilon() * steps ? whole : std::ceil(steps);
  return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(counted));
}

std::uint64_t run_optimizer_steps(double epochs, double samples_per_epoch, std::uint64_t global_batch, bool per_epoch) {
  const double whole = std::floor(epochs);
  if (!per_epoch || whole < 1) return optimizer_steps_for(epochs * samples_per_epoch / double(global_batch));
  const double per_pass = double(optimizer_steps_for(samples_per_epoch / double(global_batch)));
  const double rest = epochs - whole;  // a last, partial pass over the data
  return static_cast<std::uint64_t>(whole * per_pass) +
         (rest > 0 ? optimizer_steps_for(rest * samples_per_epoch / double(global_batch)) : 0);
}

TrainingTime training_time(const TrainingJob& job, std::uint32_t grad_accum, std::uint32_t gpus, Seconds iteration_time,
                           bool per_epoch) {
  TrainingTime t;
  t.optimizer_steps = run_optimizer_steps(job.epochs, job.samples_per_epoch, job.global_batch, per_epoch);
  t.micro_batch_steps = t.optimizer_steps * grad_accum;
  t.time_to_train = iteration_time * double(t.optimizer_steps);
  t.gpu_hours = t.time_to_train.raw() * gpus / 3600.0;
  return t;
}

bool symmetry_may_apply(const Scenario& sc) {
  return sc.fidelity == Fidelity::kAnalytical && sc.jobs.size() == 1 && sc.cluster.slow_gpus.empty() &&
         sc.cluster.link_faults.empty() && sc.jobs[0].parallel.megatron();
}

namespace {

ScenarioResult simulate(const Scenario& sc, const std::vector<sim::TraceSink*>& sinks,
                        sim::ChromeTraceWriter* link_counters, std::size_t counter_links, Symmetry symmetry);

}  // namespace

ScenarioResult simulate_scenario(const Scenario& sc, const std::vector<sim::TraceSink*>& sinks,
                                 sim::ChromeTraceWriter* link_counters, std::size_t counter_links,
                                 Symmetry symmetry) {
  try {
    return simulate(sc, sinks, link_counters, counter_links, symmetry);
  } catch (const sim::TimeRangeError& e) {
    // The inputs asked for it: name the scenario the way every input error does.
    throw InputError(sc.source_file, 0, 0, "", e.what());
  }
}

namespace {

ScenarioResult simulate(const Scenario& sc, const std::vector<sim::TraceSink*>& sinks,
                        sim::ChromeTraceWriter* link_counters, std::size_t counter_links, Symmetry symmetry) {
  sim::Simulation simulation;
  for (sim::TraceSink* s : sinks) simulation.add_sink(s);
  std::unique_ptr<NetworkModel> network;
  if (sc.fidelity == Fidelity::kFlow) {
    network = std::make_unique<NetworkModel>(simulation, sc);
    if (link_counters) network->record_rates();
  }
  CollectiveEngine collectives(simulation, sc, network.get());
  sim::TaskGraph graph;
  std::vector<JobGraph> job_graphs;
  // Replicas and tensor ranks simulated per job (dp, tp: all). Exact only where collectives are closed-form,
  // nothing else shares the cluster and every GPU and link is as its counterparts.
  std::vector<std::uint32_t> replicas, tensor_ranks;
  for (const Job& job : sc.jobs) {
    replicas.push_back(job.parallel.dp);
    tensor_ranks.push_back(job.parallel.tp);
  }
  // Trace sinks see the simulated ranks' tasks only (a trace or report timeline of the others would repeat
  // them); Symmetry::kOff simulates, and so traces, every GPU.
  if (symmetry == Symmetry::kAuto && symmetry_may_apply(sc)) {
    replicas[0] = megatron_simulated_replicas(sc, sc.jobs[0], collectives.model());
    tensor_ranks[0] = megatron_simulated_tensor_ranks(sc, sc.jobs[0], collectives.model(), replicas[0]);
  }
  for (std::size_t j = 0; j < sc.jobs.size(); ++j) {
    const Job& job = sc.jobs[j];
    switch (job.parallel.effective_framework()) {
      case Framework::kMegatron:
        job_graphs.push_back(build_megatron_job(sc, job, graph, collectives, replicas[j], tensor_ranks[j]));
        break;
      case Framework::kFsdp:
      case Framework::kDeepSpeed: job_graphs.push_back(build_zero_job(sc, job, graph, collectives)); break;
      case Framework::kDataParallel: job_graphs.push_back(build_data_parallel_job(sc, job, graph, collectives)); break;
      case Framework::kHorovod: job_graphs.push_back(build_horovod_job(sc, job, graph, collectives)); break;
      default: job_graphs.push_back(build_ddp_job(sc, job, graph, collectives)); break;
    }
    JobGraph& built = job_graphs.back();
    built.host_stream = built.host.build(graph, job.gpus);
    built.host = HostProgram{};  // the recorded programs are in the graph now
  }

  sim::Executor executor(simulation, graph, &collectives);
  // NCCL kernels occupy SMs: compute slows by the profile's factor while communication runs on its GPU.
  executor.set_comm_slowdown({sc.profile.gpu.compute_slowdown_during_comm,
                              {kCategoryCompute, kCategoryEager},
                              {kCategoryDpComm, kCategoryTpComm, kCategoryPpComm, kCategoryCpComm, kCategoryEpComm}});
  executor.start();
  ScenarioResult out;
  out.events = simulation.run();
  executor.finish();
  out.tasks = graph.size();
  out.makespan = sim::to_seconds(executor.makespan());
  if (network) {
    out.links = network->link_usage();
    if (link_counters) {
      for (std::size_t i = 0; i < out.links.size() && i < counter_links; ++i)
        for (const auto& [t, rate] : network->rate_samples(out.links[i].name))
          link_counters->add_counter_sample(out.links[i].name + " (GB/s)", t, rate / 1e9);
    }
  }

  auto intervals = [&](sim::StreamId s) {
    Intervals iv;
    for (sim::TaskId t : graph.stream_tasks(s)) iv.emplace_back(executor.start_time(t), executor.end_time(t));
    return iv;
  };
  for (std::size_t j = 0; j < sc.jobs.size(); ++j) {
    const Job& job = sc.jobs[j];
    JobGraph& it = job_graphs[j];
    IterationResult r;
    r.job = job.name;
    sim::SimTime end = 0;
    for (sim::TaskId t : it.optimizer_task) end = std::max(end, executor.end_time(t));
    for (sim::TaskId t : it.step_end_task) end = std::max(end, executor.end_time(t));
    r.iteration_time = sim::to_seconds(end);
    const auto ranks = static_cast<std::uint32_t>(job.gpus.size());
    const bool reduced = replicas[j] != job.parallel.dp || tensor_ranks[j] != job.parallel.tp;
    r.simulated_replicas = replicas[j];
    r.simulated_tensor_ranks = tensor_ranks[j];
    r.simulated_ranks = reduced ? ranks / (job.parallel.dp * job.parallel.tp) * replicas[j] * tensor_ranks[j] : ranks;
    out.symmetry_reduced = out.symmetry_reduced || reduced;
    out.simulated_gpus += r.simulated_ranks;
    std::vector<std::uint32_t> mirror;  // rank → the simulated rank it copies
    if (reduced)
      for (std::uint32_t rank = 0; rank < ranks; ++rank)
        mirror.push_back(megatron_mirror_rank(job, replicas[j], rank, tensor_ranks[j]));
    std::uint32_t worst = 0;
    for (std::uint32_t rank = 0; rank < ranks; ++rank) {
      if (reduced && mirror[rank] != rank) {
        // Ranks are visited in order and a mirror has no higher coordinate, so a lower rank: its breakdown is
        // there already.
        r.per_gpu.push_back(r.per_gpu[mirror[rank]]);
        if (r.per_gpu.back().exposed_comm > r.per_gpu[worst].exposed_comm) worst = rank;
        continue;
      }
      // Compute-stream tasks are compute, except tensor-parallel collectives (Megatron waits for them on
      // the compute stream): those are exposed communication by construction.
      Intervals compute, comm;
      sim::SimTime tp_comm = 0, eager = 0;
      for (sim::TaskId t : graph.stream_tasks(it.compute_stream[rank])) {
        if (graph.label(t).category == kCategoryTpComm) {
          tp_comm += executor.end_time(t) - executor.start_time(t);
        } else {
          compute.emplace_back(executor.start_time(t), executor.end_time(t));
          if (graph.label(t).category == kCategoryEager) eager += executor.end_time(t) - executor.start_time(t);
        }
      }
      Intervals busy_compute_stream = intervals(it.compute_stream[rank]);
      comm = intervals(it.comm_stream[rank]);
      std::vector<std::pair<std::pair<sim::SimTime, sim::SimTime>, CommKind>> kinds;
      auto add_kinds = [&](sim::StreamId s) {
        for (sim::TaskId t : graph.stream_tasks(s))
          kinds.push_back({{executor.start_time(t), executor.end_time(t)}, comm_kind_of(graph.label(t).category)});
      };
      add_kinds(it.comm_stream[rank]);
      for (sim::StreamId s : it.other_comm_streams.empty() ? std::vector<sim::StreamId>{} : it.other_comm_streams[rank]) {
        const Intervals more = intervals(s);
        comm.insert(comm.end(), more.begin(), more.end());
        add_kinds(s);
      }
      comm = merge(std::move(comm));
      // Sums in integer picoseconds so that the three parts add up to the iteration exactly.
      sim::SimTime busy = 0;
      for (const auto& [s, e] : compute) busy += e - s;
      const sim::SimTime exposed = tp_comm + exposed_ps(comm, busy_compute_stream);
      Intervals input;
      if (rank < it.input_streams.size())
        for (sim::StreamId s : it.input_streams[rank]) {
          const Intervals more = intervals(s);
          input.insert(input.end(), more.begin(), more.end());
        }
      Intervals cover = busy_compute_stream;
      cover.insert(cover.end(), comm.begin(), comm.end());
      Intervals inputs = merge(std::move(input));
      const sim::SimTime stalled = exposed_ps(inputs, merge(cover));
      // Host dispatch stall: the host thread busy issuing while the GPU runs nothing (and no input stalls it).
      sim::SimTime host_stalled = 0;
      if (rank < it.host_stream.size() && it.host_stream[rank] != 0) {
        cover.insert(cover.end(), inputs.begin(), inputs.end());
        host_stalled = exposed_ps(merge(intervals(it.host_stream[rank])), merge(std::move(cover)));
      }
      TimeBreakdown b;
      b.compute = sim::to_seconds(busy);
      b.exposed_comm = sim::to_seconds(exposed);
      {
        std::array<sim::SimTime, kCommKinds> split = exposed_by_kind(kinds, merge(Intervals(busy_compute_stream)));
        split[static_cast<std::size_t>(CommKind::kTp)] += tp_comm;
        for (std::size_t k = 0; k < kCommKinds; ++k) b.exposed_by_kind[k] = sim::to_seconds(split[k]);
      }
      b.exposed_input = sim::to_seconds(stalled);
      b.exposed_host = sim::to_seconds(host_stalled);
      b.idle = sim::to_seconds(end - busy - exposed - stalled - host_stalled);
      b.compute_eager = sim::to_seconds(eager);
      r.per_gpu.push_back(b);
      if (b.exposed_comm > r.per_gpu[worst].exposed_comm) worst = rank;
    }
    r.breakdown = r.per_gpu[worst];
    r.breakdown_gpu = job.gpus[worst];

    const double global_batch = double(job.parallel.micro_batch) * job.parallel.grad_accum * job.parallel.dp;
    r.samples_per_s = global_batch / r.iteration_time.raw();
    r.tokens_per_s = r.samples_per_s * job.model.seq_len;
    // Dropped tokens (a capacity factor) are not computed, nor counted.
    const double routed =
        routed_fraction_computed(job.model, job.parallel.moe_capacity_factor, job.parallel.moe_token_skew);
    r.model_flops_per_step =
        model_flops(job.model, job.parallel.micro_batch, routed) * (double(job.parallel.grad_accum) * job.parallel.dp);
    r.mfu = r.model_flops_per_step.raw() /
            (r.iteration_time.raw() * ranks * tensor_peak(sc.profile.gpu, job.training.precision).raw());
    {
      // HFU counts the recomputed forward too; the causal MFU counts half of each attention square (what a
      // causal kernel computes, Megatron-LM's current convention). Whole model, one micro-batch, tp 1.
      OpConfig whole;
      whole.micro_batch = job.parallel.micro_batch;
      whole.precision = job.training.precision;
      whole.recompute = job.parallel.recompute;
      whole.attention = job.parallel.attention;
      whole.expert_load = routed;
      const double per_mb = model_flops(job.model, whole).raw();
      const double scale = per_mb > 0 ? r.model_flops_per_step.raw() / per_mb : 0;
      r.hardware_flops_per_step = hardware_flops(job.model, whole) * scale;
      const double denominator =
          r.iteration_time.raw() * ranks * tensor_peak(sc.profile.gpu, job.training.precision).raw();
      r.hfu = r.hardware_flops_per_step.raw() / denominator;
      r.mfu_causal = model_flops(job.model, whole, AttentionFlops::kCausalHalf).raw() * scale / denominator;
    }
    r.buckets = std::move(it.buckets);
    for (sim::TaskId t : it.bucket_allreduce)
      r.bucket_allreduce.push_back(sim::to_seconds(executor.end_time(t) - executor.start_time(t)));
    if (job.parallel.megatron()) {
      // Megatron layout: the stage with the highest peak (1F1B's first stage holds p micro-batches; the
      // last holds the LM head's logits). The job's optimizer and gradient dtype, the distributed
      // optimizer's sharding, the plan's recomputation and attention kernel (what the graph simulates).
      const ParallelPlan& par = job.parallel;
      for (std::uint32_t stage = 0; stage < par.pp; ++stage) {
        const MemoryConfig mc = megatron_memory_config(job.model, par, job.training, stage);
        MemoryEstimate e = estimate_memory(job.model, mc, sc.profile.gpu.memory_capacity);
        if (par.pp > 1) r.stage_peak_memory.push_back(e.peak);
        if (stage == 0 || e.peak > r.memory.peak) {
          r.memory = std::move(e);
          r.memory_stage = stage;
        }
      }
    } else if (job.parallel.effective_framework() == Framework::kFsdp ||
               job.parallel.effective_framework() == Framework::kDeepSpeed) {
      r.memory = estimate_zero_memory(sc, job);
    } else if (job.parallel.effective_framework() == Framework::kDataParallel) {
      r.memory = estimate_data_parallel_memory(job, sc.profile.gpu);
    } else if (job.parallel.effective_framework() == Framework::kHorovod) {
      r.memory = estimate_horovod_memory(job, sc.profile.gpu);
    } else {
      r.memory = estimate_ddp_memory(job, sc.profile.gpu);
    }
    r.training = training_time(job.training, job.parallel.grad_accum, ranks, r.iteration_time,
                               job.parallel.effective_framework() != Framework::kMegatron);
    out.jobs.push_back(std::move(r));
  }
  return out;
}

}  // namespace

}  // namespace clustersim::workloads
