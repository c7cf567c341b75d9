#include "cli/sweep_command.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <iostream>
#include <mutex>
#include <ostream>
#include <sstream>
#include <system_error>
#include <thread>

#include "cli/command_line.h"
#include "cli/html_report.h"
#include "cli/report.h"
#include "cli/scenario_loader.h"
#include "sim/input_error.h"
#include "sim/trace.h"
#include "topology/communicator_span.h"
#include "topology/topology.h"
#include "workloads/rank_layout.h"

namespace po = boost::program_options;

namespace clustersim::cli {

using workloads::ParallelPlan;
using workloads::PipelineSchedule;
using workloads::Recompute;
using workloads::Scenario;

namespace {

std::vector<std::uint32_t> divisors(std::uint64_t n) {
  std::vector<std::uint32_t> out;
  for (std::uint64_t d = 1; d <= n && d <= 0xffffffffu; ++d)
    if (n % d == 0) out.push_back(static_cast<std::uint32_t>(d));
  return out;
}

// The most GPUs of the sweep's job in one NVLink domain: no TP group can be larger without leaving NVLink.
std::uint32_t largest_domain_share(const Scenario& sc) {
  std::map<std::uint32_t, std::uint32_t> per_domain;  // the job's GPUs in each domain
  for (std::uint32_t g : sc.jobs.at(0).gpus) ++per_domain[topology::domain_of(sc.cluster, g)];
  std::uint32_t most = 0;
  for (const auto& [domain, count] : per_domain) most = std::max(most, count);
  return most;
}

// Why a layout's TP groups leave NVLink, or "" when each group's GPUs share one NVLink domain. The groups come
// from the job's rank order and its GPU list (a job on part of a node, or on GPUs 0-3 and 8-11 of two nodes,
// is placed as it is, not as whole consecutive domains). `most`: largest_domain_share(sc).
std::string tp_domain_problem(const Scenario& sc, std::uint32_t most, std::uint32_t tp, std::uint32_t dp,
                              std::uint32_t pp, std::uint32_t cp) {
  if (tp == 1) return "";
  const workloads::Job& job = sc.jobs.at(0);
  if (tp > most) return "tp spans more than one NVLink domain";
  const workloads::RankLayout layout(tp, dp, pp, job.parallel.rank_order, cp);
  for (const std::vector<std::uint32_t>& group : layout.groups(workloads::ParallelDim::kTensor))
    for (std::uint32_t r : group)
      if (topology::domain_of(sc.cluster, job.gpus[r]) != topology::domain_of(sc.cluster, job.gpus[group[0]]))
        return "some TP groups would straddle two NVLink domains";
  return "";
}

// "activations (3 layers x 2 micro-batches in flight, 1F1B)" → "activations".
std::string part_kind(const std::string& part) {
  const std::size_t paren = part.find(" (");
  return paren == std::string::npos ? part : part.substr(0, paren);
}

double headroom_gib(const workloads::AnalyticalEstimate& e) { return to_GiB(e.memory_capacity - e.peak_memory); }

class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), start_(std::chrono::steady_clock::now()) {}
  void show(const char* what, std::size_t done, std::size_t total) {
    if (!enabled_ || total == 0) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (elapsed < 2.0) return;  // short sweeps draw nothing
    const int width = 30, filled = static_cast<int>(double(width) * double(done) / double(total));
    std::fprintf(stderr, "\r%-12s [%s%s] %zu/%zu", what, std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(width - filled), ' ').c_str(), done, total);
    drawn_ = true;
  }
  void finish() {
    if (drawn_) std::fprintf(stderr, "\r%*s\r", 70, "");
    drawn_ = false;
  }

 private:
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

// Runs fn(worker, i) for i in [0, n) on `jobs` worker threads (worker in [0, jobs)) — on this thread alone
// when jobs is 1, on fewer threads when the system refuses more — calling tick(done) from this thread meanwhile. The
// first exception a call throws stops the workers and is rethrown here, after they have joined.
template <class Fn, class Tick>
void parallel_for(std::size_t n, std::uint32_t jobs, Fn fn, Tick tick) {
  std::atomic<std::size_t> next{0}, done{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  auto worker = [&](std::uint32_t w) {
    for (std::size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        fn(w, i);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next.store(n);
      }
      done.fetch_add(1);
    }
  };
  if (jobs <= 1) {
    worker(0);
  } else {
    std::atomic<std::uint32_t> running{0};
    std::vector<std::thread> threads;
    threads.reserve(jobs);
    for (std::uint32_t w = 0; w < jobs; ++w) {
      running.fetch_add(1);
      try {
        threads.emplace_back([&, w] {
          worker(w);
          running.fetch_sub(1);
        });
      } catch (const std::system_error&) {  // the system starts no more threads: those started share the work
        running.fetch_sub(1);
        break;
      }
    }
    if (threads.empty()) worker(0);
    while (running.load() > 0) {
      tick(done.load());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (std::thread& t : threads) t.join();
  }
  if (error) std::rethrow_exception(error);
  tick(n);
}

std::string fixed(const char* format, double v) { return fmt(format, v); }

}  // namespace

std::string layout_name(const ParallelPlan& p) {
  std::string s = "tp" + std::to_string(p.tp);
  if (p.cp > 1) s += " cp" + std::to_string(p.cp);
  s += " pp" + std::to_string(p.pp) + " dp" + std::to_string(p.dp);
  if (p.ep > 1) s += " ep" + std::to_string(p.ep);
  if (p.vp > 1) s += " vp" + std::to_string(p.vp);
  s += " mb" + std::to_string(p.micro_batch);
  if (p.sequence_parallel) s += " sp";
  if (p.recompute == Recompute::kSelective) s += " sel";
  if (p.recompute == Recompute::kFull) s += " full";
  if (p.distributed_optimizer) s += " dopt";
  switch (p.effective_framework()) {
    case workloads::Framework::kPytorchDdp: s += " ddp"; break;
    case workloads::Framework::kFsdp:
      // FULL_SHARD fsdp3, SHARD_GRAD_OP fsdp2; hybrid-sharded data parallelism (HSDP) hsdp3, hsdp2.
      s += (p.hybrid_shard ? " hsdp" : " fsdp") + std::to_string(p.zero_stage);
      break;
    case workloads::Framework::kDeepSpeed:
      s += " zero" + std::to_string(p.zero_stage) + (p.hybrid_shard ? "-hybrid" : "");
      break;
    case workloads::Framework::kDataParallel: s += " dataparallel"; break;
    case workloads::Framework::kHorovod: s += " horovod"; break;
    default: break;  // Megatron: the plain name
  }
  return s;
}

Scenario sweep_scenario(const Scenario& in, std::optional<std::uint32_t> gpus) {
  if (in.jobs.empty()) throw InputError(in.source_file, 0, 0, "jobs", "the scenario has no job to sweep");
  Scenario sc = in;
  sc.jobs.resize(1);
  workloads::Job& job = sc.jobs[0];
  if (gpus) {
    const std::uint32_t n = *gpus, per_node = sc.cluster.gpus_per_node;
    if (n == 0) throw InputError("command line", 0, 0, "--gpus", "0 must be at least 1");
    if (n != sc.cluster.gpu_count()) {
      if (sc.cluster.is_explicit() || sc.cluster.node.scale_up == topology::ScaleUp::kTorus)
        throw InputError("command line", 0, 0, "--gpus",
                         std::to_string(n) + " differs from the cluster's " + std::to_string(sc.cluster.gpu_count()) +
                             " " + accelerator_noun(sc.cluster) + "s" +
                             ", and an explicit or torus cluster cannot be resized");
      if (n > per_node && n % per_node != 0)
        throw InputError("command line", 0, 0, "--gpus",
                         std::to_string(n) + " is not a whole number of " + std::to_string(per_node) + "-GPU nodes");
      const std::uint32_t domain = std::max<std::uint32_t>(1, sc.cluster.node.nvlink_domain_nodes);
      std::uint32_t nodes = std::max<std::uint32_t>(1, n / per_node);
      nodes = (nodes + domain - 1) / domain * domain;  // whole NVLink domains
      sc.cluster.nodes = nodes;
      std::erase_if(sc.cluster.slow_gpus, [&](const topology::SlowGpu& s) { return s.gpu >= n; });
      try {
        if (topology::has_fabric(sc.cluster)) topology::fabric_shape(sc.cluster);  // it must hold the new nodes
      } catch (const InputError& e) {
        throw InputError("command line", 0, 0, "--gpus",
                         std::to_string(n) + " GPUs take " + std::to_string(nodes) + " nodes, more than the fabric of " +
                             in.source_file + " holds: " + e.field_path() + ": " + e.message());
      }
    }
    job.gpus.clear();
    for (std::uint32_t g = 0; g < n; ++g) job.gpus.push_back(g);
  }
  return sc;
}

std::vector<ParallelPlan> enumerate_layouts(const Scenario& sc, bool allow_tp_across_nodes,
                                            std::map<std::string, std::size_t>* rejected) {
  const workloads::Job& job = sc.jobs.at(0);
  const workloads::ModelSpec& m = job.model;
  const ParallelPlan& base = job.parallel;
  const auto n = static_cast<std::uint32_t>(job.gpus.size());
  const std::uint64_t batch = job.training.global_batch;
  const std::uint32_t domain_share = largest_domain_share(sc);
  // Hybrid sharding needs the job on more than one node (equal GPUs per node: the sweep takes whole nodes).
  const bool nodes = !job.gpus.empty() && sc.cluster.node_of(job.gpus.front()) != sc.cluster.node_of(job.gpus.back());
  auto reject = [&](const std::string& why) {
    if (rejected) ++(*rejected)[why];
  };
  // The scenario's plan with the swept dimensions cleared: Megatron unless a framework variant says otherwise.
  ParallelPlan start = base;
  start.framework = workloads::Framework::kMegatron;
  start.zero_stage = 0;
  start.hybrid_shard = false;
  start.horovod_hierarchical = false;
  std::vector<ParallelPlan> out;
  for (std::uint32_t tp : divisors(n)) {
    if (m.heads % tp != 0 || m.n_kv() % tp != 0) {
      reject("tp does not divide the attention (or key/value) heads");
      continue;
    }
    for (std::uint32_t cp : divisors(n / tp)) {
      if (cp > 1 && m.seq_len % (2 * cp) != 0) {  // cp | s/2
        reject("cp does not divide half the sequence (causal load balancing: 2 chunks per rank)");
        continue;
      }
      if (cp > 1 && base.attention != workloads::AttentionKernel::kFlash) {
        reject("cp needs fused (flash) attention, which the scenario does not set");
        continue;
      }
      for (std::uint32_t pp : divisors(n / (tp * cp))) {
        if (m.layers % pp != 0) {
          reject("pp does not divide the layers");
          continue;
        }
        const std::uint32_t dp = n / (tp * cp * pp);
        if (batch % dp != 0) {
          reject("dp does not divide the global batch");
          continue;
        }
        // TP groups must stay inside NVLink domains (tp 3 on 8-GPU nodes puts ranks 6-8 across two).
        if (const std::string why = allow_tp_across_nodes ? "" : tp_domain_problem(sc, domain_share, tp, dp, pp, cp);
            !why.empty()) {
          reject(why);
          continue;
        }
        for (std::uint32_t ep : m.is_moe() ? divisors(dp) : std::vector<std::uint32_t>{1}) {
          if (m.experts % ep != 0) {
            reject("ep does not divide the experts");
            continue;
          }
          if (ep > 1 && job.training.precision == workloads::Precision::kFP16) {
            reject("expert parallelism does not run in FP16 (Megatron-LM)");
            continue;
          }
          // Sequence parallelism splits a context rank's s/cp tokens over the TP group; EP with TP needs it.
          const bool sp_fits = tp > 1 && (m.seq_len / cp) % tp == 0;
          if (tp > 1 && ep > 1 && !sp_fits) {
            reject("ep with tp needs sequence parallelism, and tp does not divide the tokens of a context rank");
            continue;
          }
          if (tp > 1 && !sp_fits) reject("sequence parallelism: tp does not divide the tokens of a context rank");
          const bool pure_dp = tp == 1 && cp == 1 && pp == 1 && ep == 1;
          for (std::uint32_t mb : divisors(batch / dp)) {
            const auto ga = static_cast<std::uint32_t>(batch / dp / mb);
            ParallelPlan q = start;
            q.tp = tp;
            q.cp = cp;
            q.pp = pp;
            q.dp = dp;
            q.ep = ep;
            q.micro_batch = mb;
            q.grad_accum = ga;
            for (std::uint32_t vp : pp > 1 ? divisors(m.layers / pp) : std::vector<std::uint32_t>{1}) {
              if (vp > 1 && ga % pp != 0) {
                reject("interleaving needs grad_accum a multiple of pp");
                continue;
              }
              for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
                // Megatron-LM: expert parallelism with tensor parallelism needs sequence parallelism.
                for (int sp = (tp > 1 && ep > 1 ? 1 : 0); sp <= (sp_fits ? 1 : 0); ++sp)
                  for (int dopt = 0; dopt <= (dp * cp > 1 ? 1 : 0); ++dopt) {
                    ParallelPlan p = q;
                    p.vp = vp;
                    p.schedule = vp > 1 ? PipelineSchedule::kInterleaved
                                 : base.schedule == PipelineSchedule::kGPipe ? PipelineSchedule::kGPipe
                                                                              : PipelineSchedule::kOneFOneB;
                    p.recompute = rc;
                    p.sequence_parallel = sp == 1;
                    p.distributed_optimizer = dopt == 1;
                    p.pp_scatter_gather = base.pp_scatter_gather && tp > 1 && pp > 1 && !p.sequence_parallel;
                    p.tp_comm_overlap = base.tp_comm_overlap && p.sequence_parallel;  // needs SP
                    p.overlap_param_gather = base.overlap_param_gather && p.distributed_optimizer;
                    out.push_back(p);
                  }
            }
            if (!pure_dp) continue;
            // Pure data parallelism under the other frameworks (zero_graph.h, ddp_graph.h): PyTorch DDP
            // (with the scenario's attention), FSDP FULL_SHARD and SHARD_GRAD_OP (and their
            // hybrid-sharded forms across nodes), DeepSpeed ZeRO 1–3. No Megatron options (SP, distributed
            // optimizer, pp_scatter_gather, overlap_grad_reduce).
            ParallelPlan d = q;
            d.vp = 1;
            d.schedule = PipelineSchedule::kOneFOneB;
            d.recompute = Recompute::kNone;
            d.sequence_parallel = d.distributed_optimizer = d.pp_scatter_gather = d.overlap_grad_reduce = false;
            d.tp_comm_overlap = d.overlap_param_gather = false;
            {
              ParallelPlan ddp = d;  // with the scenario's attention (F.scaled_dot_product_attention's flash kernel)
              ddp.framework = workloads::Framework::kPytorchDdp;
              out.push_back(ddp);
            }
            // FSDP and DeepSpeed take activation checkpointing (every block: recompute FULL) and the
            // scenario's attention kernel.
            for (Recompute rc : {Recompute::kNone, Recompute::kFull}) {
              d.recompute = rc;
              for (bool hybrid : {false, true}) {
                if (hybrid && !nodes) continue;
                for (std::uint32_t stage : {3u, 2u}) {
                  ParallelPlan f = d;
                  f.framework = workloads::Framework::kFsdp;
                  f.ddp_bucket_set = false;  // FSDP has no DDP buckets
                  f.zero_stage = stage;
                  f.hybrid_shard = hybrid;
                  out.push_back(f);
                }
              }
              for (std::uint32_t stage : {1u, 2u, 3u}) {
                ParallelPlan z = d;
                z.framework = workloads::Framework::kDeepSpeed;
                z.ddp_bucket_set = false;  // nor DeepSpeed
                z.zero_stage = stage;
                out.push_back(z);
              }
            }
          }
        }
      }
    }
  }
  return out;
}

SweepResult run_sweep(const Scenario& input, const SweepOptions& options) {
  SweepResult r;
  r.scenario = sweep_scenario(input, options.gpus);
  const workloads::Job& job = r.scenario.jobs[0];
  r.gpus = static_cast<std::uint32_t>(job.gpus.size());
  const std::vector<ParallelPlan> plans = enumerate_layouts(r.scenario, options.allow_tp_across_nodes, &r.rejected);
  r.layouts.resize(plans.size());
  for (std::size_t i = 0; i < plans.size(); ++i) {
    r.layouts[i].plan = plans[i];
    r.layouts[i].name = layout_name(plans[i]);
  }

  // Score: each thread owns an estimator and takes fixed slices of 256 layouts.
  Progress progress(options.progress);
  const std::uint32_t jobs = std::max(1u, options.jobs);
  {
    constexpr std::size_t kSlice = 256;
    const std::size_t slices = (plans.size() + kSlice - 1) / kSlice;
    std::vector<std::unique_ptr<workloads::AnalyticalEstimator>> estimators(jobs);
    parallel_for(
        slices, jobs,
        [&](std::uint32_t w, std::size_t s) {
          if (!estimators[w]) estimators[w] = std::make_unique<workloads::AnalyticalEstimator>(r.scenario, job);
          for (std::size_t i = s * kSlice; i < std::min(plans.size(), (s + 1) * kSlice); ++i)
            r.layouts[i].estimate = estimators[w]->estimate(plans[i]);
        },
        [&](std::size_t done) { progress.show("scoring", std::min(plans.size(), done * kSlice), plans.size()); });
  }

  std::vector<std::size_t> fit;
  for (std::size_t i = 0; i < r.layouts.size(); ++i) {
    const workloads::AnalyticalEstimate& e = r.layouts[i].estimate;
    if (e.oom)
      ++r.rejected["out of memory: " + part_kind(e.oom_part)];
    else if (cli::simulation_too_large(job.model, r.layouts[i].plan, r.layouts[i].plan.gpus(), r.scenario.fidelity))
      ++r.rejected["more tasks than clustersim simulates (run refuses it too)"];
    else
      fit.push_back(i);
  }
  r.valid = fit.size();
  // Fastest first; among equal times (to the nanosecond: below that the models' sums differ by rounding only) the
  // one with more memory headroom (it dominates the others), then by name. The analytical ranking and the
  // re-simulated one break ties alike, so that plan's answer does not depend on --top.
  auto faster = [&](double ta, double tb, std::size_t a, std::size_t b) {
    const long long na = std::llround(ta * 1e9), nb = std::llround(tb * 1e9);
    if (na != nb) return na < nb;
    const double ha = headroom_gib(r.layouts[a].estimate), hb = headroom_gib(r.layouts[b].estimate);
    return ha != hb ? ha > hb : r.layouts[a].name < r.layouts[b].name;
  };
  auto by_estimate = [&](std::size_t a, std::size_t b) {
    return faster(r.layouts[a].estimate.iteration_time.raw(), r.layouts[b].estimate.iteration_time.raw(), a, b);
  };
  std::sort(fit.begin(), fit.end(), by_estimate);

  // Pareto front: fastest first; keep a layout when it has more headroom than every faster one. Times within a
  // relative 1e-6 count as equal (the analytical model gives a ZeRO-1 and a DDP layout on one GPU the same time up
  // to rounding): a layout with more headroom at an equal time replaces those of the front it then dominates.
  double best_headroom = -1e300;
  for (std::size_t i : fit) {
    const double h = headroom_gib(r.layouts[i].estimate);
    if (h <= best_headroom) continue;
    const double t = r.layouts[i].estimate.iteration_time.raw();
    while (!r.pareto.empty() && t <= r.layouts[r.pareto.back()].estimate.iteration_time.raw() * (1 + 1e-6))
      r.pareto.pop_back();
    r.pareto.push_back(i);
    best_headroom = h;
  }

  // Re-simulate the top K with the event-driven model.
  const std::size_t k = std::min<std::size_t>(options.top, fit.size());
  std::vector<std::size_t> top(fit.begin(), fit.begin() + static_cast<std::ptrdiff_t>(k));
  parallel_for(
      k, jobs,
      [&](std::uint32_t, std::size_t i) {
        Scenario one = r.scenario;
        one.jobs[0].parallel = r.layouts[top[i]].plan;
        r.layouts[top[i]].simulated = workloads::simulate_scenario(one).jobs[0];
      },
      [&](std::size_t done) { progress.show("simulating", done, k); });
  progress.finish();
  r.ranked = top;
  std::sort(r.ranked.begin(), r.ranked.end(), [&](std::size_t a, std::size_t b) {
    return faster(r.layouts[a].simulated->iteration_time.raw(), r.layouts[b].simulated->iteration_time.raw(), a, b);
  });
  return r;
}

namespace {

// Shares of the iteration of a re-simulated layout: idle (pipeline bubble and waiting) and exposed comm.
double sim_bubble(const workloads::IterationResult& s) { return s.breakdown.idle / s.iteration_time; }
double sim_comm(const workloads::IterationResult& s) { return s.breakdown.exposed_comm / s.iteration_time; }
double est_bubble(const workloads::AnalyticalEstimate& e) { return e.bubble / e.iteration_time; }
double est_comm(const workloads::AnalyticalEstimate& e) {
  return (e.tp_comm + e.cp_comm + e.ep_comm + e.pp_comm + e.dp_comm) / e.iteration_time;
}

std::string pad(std::string s, std::size_t w, bool right = false) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

}  // namespace

std::string sweep_text(const SweepResult& r) {
  const workloads::Job& job = r.scenario.jobs[0];
  std::ostringstream o;
  o << "Sweep: " << r.scenario.name << "\n";
  const char* unit = accelerator_noun(r.scenario.cluster);
  o << "  model " << job.model.name << " on " << r.gpus << " " << unit << "s (" << r.scenario.cluster.gpu
    << "), global batch " << job.training.global_batch << ", sequence " << job.model.seq_len << ", "
    << (job.parallel.attention != workloads::AttentionKernel::kFlash ? std::string("explicit attention")
        : job.parallel.flash_kernel == workloads::FlashKernel::kGeneric
            ? std::string("FlashAttention")
            : std::string("FlashAttention (") + workloads::to_string(job.parallel.flash_kernel) + ")")
    << "\n";
  o << "  layouts enumerated " << r.layouts.size() << ", fit in memory " << r.valid << ", re-simulated "
    << r.ranked.size() << " (" << workloads::to_string(r.scenario.fidelity) << " fidelity)\n\n";

  // Out-of-memory rejections are whole layouts; the checks before a layout is formed cut a tp/cp/pp/dp shape (or an
  // ep or interleaving degree of it) with every layout it would have had, and count once per cut.
  o << "Rejected (out of memory: layouts; the other checks: shapes or degrees cut before their layouts were formed)\n";
  if (r.rejected.empty()) o << "  none\n";
  for (const auto& [why, count] : r.rejected) o << "  " << pad(std::to_string(count), 8, true) << "  " << why << "\n";
  o << "\n";

  o << "Ranked by simulated iteration time (top " << r.ranked.size() << " of the analytical ranking)\n";
  o << "  " << pad("#", 3, true) << "  " << pad("layout", 44) << pad("iter s", 10, true) << pad("analyt. s", 11, true)
    << pad("tokens/s", 12, true) << pad("MFU %", 7, true) << pad("peak GiB", 10, true) << pad("free GiB", 10, true)
    << pad("bubble %", 10, true) << pad("comm %", 8, true) << "\n";
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    const SweepLayout& l = r.layouts[r.ranked[i]];
    const workloads::IterationResult& s = *l.simulated;
    o << "  " << pad(std::to_string(i + 1), 3, true) << "  " << pad(l.name, 44)
      << pad(fixed("%.4f", s.iteration_time.raw()), 10, true)
      << pad(fixed("%.4f", l.estimate.iteration_time.raw()), 11, true) << pad(fixed("%.0f", s.tokens_per_s), 12, true)
      << pad(fixed("%.1f", 100 * s.mfu), 7, true) << pad(fixed("%.2f", to_GiB(s.memory.peak)), 10, true)
      << pad(fixed("%.2f", to_GiB(s.memory.capacity - s.memory.peak)), 10, true)
      << pad(fixed("%.1f", 100 * sim_bubble(s)), 10, true) << pad(fixed("%.1f", 100 * sim_comm(s)), 8, true) << "\n";
  }
  if (r.ranked.empty()) {
    if (r.valid > 0)
      o << "  none re-simulated (--top 0); " << r.valid << " layouts fit\n";
    else if (std::any_of(r.rejected.begin(), r.rejected.end(),
                         [](const auto& kv) { return kv.first.rfind("out of memory", 0) == 0; }))
      o << "  no layout fits in memory\n";
    else
      o << "  no layout: every one was rejected for the reasons above\n";
  }
  o << "  (bubble % = idle share, comm % = exposed communication share of the " << unit
    << " with the most exposed communication)\n\n";

  o << "Pareto front: analytical iteration time vs memory headroom (" << r.pareto.size() << " layouts)\n";
  o << "  " << pad("layout", 44) << pad("analyt. s", 11, true) << pad("tokens/s", 12, true)
    << pad("free GiB", 10, true) << "\n";
  for (std::size_t i : r.pareto) {
    const SweepLayout& l = r.layouts[i];
    o << "  " << pad(l.name, 44) << pad(fixed("%.4f", l.estimate.iteration_time.raw()), 11, true)
      << pad(fixed("%.0f", l.estimate.tokens_per_s), 12, true) << pad(fixed("%.2f", headroom_gib(l.estimate)), 10, true)
      << "\n";
  }
  return o.str();
}

std::string sweep_csv(const SweepResult& r) {
  std::vector<std::size_t> rank_of(r.layouts.size(), 0);
  for (std::size_t i = 0; i < r.ranked.size(); ++i) rank_of[r.ranked[i]] = i + 1;
  std::ostringstream o;
  o << "layout,framework,tp,cp,pp,dp,ep,vp,micro_batch,grad_accum,sequence_parallel,recompute,"
       "distributed_optimizer,zero_stage,hybrid_shard,status,oom_part,analytical_iteration_s,analytical_tokens_per_s,analytical_mfu,peak_memory_gib,headroom_gib,"
       "bubble_fraction,exposed_comm_fraction,simulated_iteration_s,rank\n";
  for (std::size_t i = 0; i < r.layouts.size(); ++i) {
    const SweepLayout& l = r.layouts[i];
    const workloads::AnalyticalEstimate& e = l.estimate;
    const ParallelPlan& p = l.plan;
    o << l.name << "," << workloads::to_string(p.effective_framework()) << "," << p.tp << "," << p.cp << "," << p.pp
      << "," << p.dp << "," << p.ep << "," << p.vp << "," << p.micro_batch << "," << p.grad_accum << ","
      << (p.sequence_parallel ? 1 : 0) << "," << workloads::to_string(p.recompute) << ","
      << (p.distributed_optimizer ? 1 : 0) << "," << p.zero_stage << "," << (p.hybrid_shard ? 1 : 0) << ","
      << (e.oom ? "oom" : "ok") << ",\"" << (e.oom ? part_kind(e.oom_part) : "") << "\","
      << fixed("%.10g", e.iteration_time.raw()) << "," << fixed("%.10g", e.tokens_per_s) << "," << fixed("%.10g", e.mfu)
      << "," << fixed("%.4f", to_GiB(e.peak_memory)) << "," << fixed("%.4f", headroom_gib(e)) << ","
      << fixed("%.4f", est_bubble(e)) << "," << fixed("%.4f", est_comm(e)) << ","
      << (l.simulated ? fixed("%.10g", l.simulated->iteration_time.raw()) : "") << ","
      << (rank_of[i] ? std::to_string(rank_of[i]) : "") << "\n";
  }
  return o.str();
}

std::string sweep_json(const SweepResult& r) {
  using sim::json_escape;
  const workloads::Job& job = r.scenario.jobs[0];
  std::ostringstream o;
  auto layout_json = [&](const SweepLayout& l) {
    const workloads::AnalyticalEstimate& e = l.estimate;
    std::ostringstream j;
    j << "{\"layout\": \"" << json_escape(l.name) << "\", \"framework\": \""
      << json_escape(workloads::to_string(l.plan.effective_framework())) << "\", \"tp\": " << l.plan.tp
      << ", \"cp\": " << l.plan.cp << ", \"pp\": " << l.plan.pp << ", \"dp\": " << l.plan.dp
      << ", \"ep\": " << l.plan.ep << ", \"vp\": " << l.plan.vp << ", \"micro_batch\": " << l.plan.micro_batch
      << ", \"grad_accum\": " << l.plan.grad_accum
      << ", \"sequence_parallel\": " << (l.plan.sequence_parallel ? "true" : "false") << ", \"recompute\": \""
      << workloads::to_string(l.plan.recompute)
      << "\", \"distributed_optimizer\": " << (l.plan.distributed_optimizer ? "true" : "false")
      << ", \"zero_stage\": " << l.plan.zero_stage << ", \"hybrid_shard\": " << (l.plan.hybrid_shard ? "true" : "false")
      << ", \"oom\": " << (e.oom ? "true" : "false") << ", \"oom_part\": \"" << json_escape(e.oom ? e.oom_part : "")
      << "\", \"analytical_iteration_s\": " << fixed("%.10g", e.iteration_time.raw())
      << ", \"analytical_tokens_per_s\": " << fixed("%.10g", e.tokens_per_s)
      << ", \"analytical_mfu\": " << fixed("%.10g", e.mfu)
      << ", \"peak_memory_gib\": " << fixed("%.4f", to_GiB(e.peak_memory))
      << ", \"headroom_gib\": " << fixed("%.4f", headroom_gib(e));
    if (l.simulated) {
      const workloads::IterationResult& s = *l.simulated;
      j << ", \"simulated\": {\"iteration_s\": " << fixed("%.10g", s.iteration_time.raw())
        << ", \"tokens_per_s\": " << fixed("%.10g", s.tokens_per_s) << ", \"mfu\": " << fixed("%.10g", s.mfu)
        << ", \"peak_memory_gib\": " << fixed("%.4f", to_GiB(s.memory.peak))
        << ", \"bubble_fraction\": " << fixed("%.4f", sim_bubble(s))
        << ", \"exposed_comm_fraction\": " << fixed("%.4f", sim_comm(s)) << "}";
    }
    j << "}";
    return j.str();
  };
  o << "{\n  \"scenario\": \"" << json_escape(r.scenario.name) << "\",\n";
  o << "  \"model\": \"" << json_escape(job.model.name) << "\",\n  \"gpus\": " << r.gpus
    << ",\n  \"global_batch\": " << job.training.global_batch << ",\n";
  o << "  \"enumerated\": " << r.layouts.size() << ",\n  \"fit\": " << r.valid << ",\n  \"rejected\": {";
  bool first = true;
  for (const auto& [why, count] : r.rejected) {
    o << (first ? "" : ", ") << "\"" << json_escape(why) << "\": " << count;
    first = false;
  }
  o << "},\n  \"ranked\": [";
  for (std::size_t i = 0; i < r.ranked.size(); ++i) o << (i ? ",\n    " : "\n    ") << layout_json(r.layouts[r.ranked[i]]);
  o << "\n  ],\n  \"pareto\": [";
  for (std::size_t i = 0; i < r.pareto.size(); ++i) o << (i ? ", " : "") << "\"" << json_escape(r.layouts[r.pareto[i]].name) << "\"";
  o << "],\n  \"layouts\": [";
  for (std::size_t i = 0; i < r.layouts.size(); ++i) o << (i ? ",\n    " : "\n    ") << layout_json(r.layouts[i]);
  o << "\n  ]\n}\n";
  return o.str();
}

std::string sweep_report(const SweepResult& r, ReportFormat format) {
  const workloads::Job& job = r.scenario.jobs[0];
  ReportDocument doc("clustersim sweep: " + r.scenario.name);
  doc.key_values({{"model", job.model.name},
                  {std::string(accelerator_noun(r.scenario.cluster)) + "s",
                   std::to_string(r.gpus) + " x " + r.scenario.cluster.gpu},
                  {"global batch", std::to_string(job.training.global_batch)},
                  {"layouts enumerated", std::to_string(r.layouts.size())},
                  {"fit in memory", std::to_string(r.valid)},
                  {"re-simulated",
                   std::to_string(r.ranked.size()) + " (" + workloads::to_string(r.scenario.fidelity) + " fidelity)"}});
  doc.heading(2, "Ranked layouts");
  ReportTable ranked;
  ranked.header = {"rank", "layout", "iteration time [s]", "analytical [s]", "tokens/s", "MFU [%]",
                   "peak memory [GiB]", "headroom [GiB]", "bubble [%]", "exposed comm [%]"};
  ranked.right_aligned = {true, false, true, true, true, true, true, true, true, true};
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    const SweepLayout& l = r.layouts[r.ranked[i]];
    const workloads::IterationResult& s = *l.simulated;
    ranked.rows.push_back({std::to_string(i + 1), l.name, fixed("%.4f", s.iteration_time.raw()),
                           fixed("%.4f", l.estimate.iteration_time.raw()), fixed("%.0f", s.tokens_per_s),
                           fixed("%.1f", 100 * s.mfu), fixed("%.2f", to_GiB(s.memory.peak)),
                           fixed("%.2f", to_GiB(s.memory.capacity - s.memory.peak)),
                           fixed("%.1f", 100 * sim_bubble(s)), fixed("%.1f", 100 * sim_comm(s))});
  }
  if (!ranked.rows.empty()) ranked.rows[0][2].best = true;
  doc.table(ranked);
  doc.heading(2, "Rejected layouts");
  doc.paragraph(
      "Out-of-memory rejections count layouts; the other checks count the tp/cp/pp/dp shapes (or ep and "
      "interleaving degrees) they cut before any layout of them was formed.");
  ReportTable rejected;
  rejected.header = {"reason", "count"};
  rejected.right_aligned = {false, true};
  for (const auto& [why, count] : r.rejected) rejected.rows.push_back({why, std::to_string(count)});
  doc.table(rejected);
  doc.heading(2, "Pareto front");
  ReportTable front;
  front.header = {"layout", "analytical time [s]", "tokens/s", "headroom [GiB]"};
  front.right_aligned = {false, true, true, true};
  std::vector<bool> on_front(r.layouts.size(), false);
  for (std::size_t i : r.pareto) {
    on_front[i] = true;
    const SweepLayout& l = r.layouts[i];
    front.rows.push_back({l.name, fixed("%.4f", l.estimate.iteration_time.raw()), fixed("%.0f", l.estimate.tokens_per_s),
                          fixed("%.2f", headroom_gib(l.estimate))});
  }
  doc.table(front);
  std::vector<ScatterPoint> points;
  for (std::size_t i = 0; i < r.layouts.size(); ++i) {
    const SweepLayout& l = r.layouts[i];
    if (l.estimate.oom) continue;
    points.push_back({headroom_gib(l.estimate), l.estimate.iteration_time.raw(), l.name, on_front[i]});
  }
  doc.figure(svg_scatter(points, "memory headroom [GiB]", "analytical iteration time [s]", true),
             "Every layout that fits: analytical iteration time versus memory headroom; the Pareto front in red");
  return format == ReportFormat::kHtml ? doc.html() : doc.markdown();
}

int sweep_command(const std::vector<std::string>& args, std::ostream& out) {
  po::options_description named(
      "clustersim sweep SCENARIO [options]\n\n"
      "Every valid parallel layout (tp, cp, pp, dp, ep, vp, micro-batch, recompute, sequence parallelism,\n"
      "distributed optimizer; DDP, FSDP and DeepSpeed ZeRO for pure data parallelism) of the scenario's\n"
      "first job, scored analytically, out-of-memory layouts\n"
      "rejected naming their largest part, the best re-simulated event by event and ranked.\n\nOptions");
  named.add_options()("help,h", "show this help")("gpus", po::value<std::uint32_t>()->value_name("N"),
                                                  "GPU count (part of one node, or whole nodes; default: the job's)")(
      "top", po::value<std::uint32_t>()->value_name("K")->default_value(10), "re-simulate the best K layouts")(
      "csv", po::value<std::string>()->value_name("FILE"), "write every layout as CSV")(
      "json", po::value<std::string>()->value_name("FILE"), "write the sweep as JSON")(
      "jobs", po::value<std::uint32_t>()->value_name("J")->default_value(1), "threads")(
      "allow-tp-across-nodes", "let tensor parallelism span NVLink domains")(
      "report", po::value<std::string>()->value_name("FILE"),
      "write a report: FILE.html (self-contained: ranked table, rejections, Pareto table and plot) or FILE.md");
  const ParsedCommand parsed = parse_command(args, named, "sweep");
  const po::variables_map& vm = parsed.options;
  if (vm.count("help")) {
    out << named << "\n";
    return 0;
  }
  if (parsed.scenarios.size() != 1)
    throw InputError("command line", 0, 0, "sweep",
                     "takes one scenario, got " + std::to_string(parsed.scenarios.size()));
  SweepOptions options;
  if (vm.count("gpus")) options.gpus = vm["gpus"].as<std::uint32_t>();
  if (options.gpus && *options.gpus > kMaxPlannedGpus)
    throw InputError("command line", 0, 0, "--gpus",
                     std::to_string(*options.gpus) + " is more than the " + std::to_string(kMaxPlannedGpus) +
                         " GPUs clustersim sweeps");
  options.top = vm["top"].as<std::uint32_t>();
  options.jobs = vm["jobs"].as<std::uint32_t>();
  if (options.jobs == 0 || options.jobs > 256)
    throw InputError("command line", 0, 0, "--jobs", std::to_string(options.jobs) + " must be in 1..256");
  options.allow_tp_across_nodes = vm.count("allow-tp-across-nodes") > 0;
  options.progress = ::isatty(STDERR_FILENO) == 1;
  std::optional<ReportFormat> report;
  if (vm.count("report")) report = report_format(vm["report"].as<std::string>());
  check_output_options(parsed, {"csv", "json", "report"});
  const Scenario scenario = load_scenario_argument(parsed, "sweep");
  const SweepResult result = run_sweep(scenario, options);
  const std::string text = sweep_text(result);
  // Files first, each atomically: a failure leaves no half-written file and prints no partial report.
  if (vm.count("csv")) write_file_atomically(vm["csv"].as<std::string>(), sweep_csv(result));
  if (vm.count("json")) write_file_atomically(vm["json"].as<std::string>(), sweep_json(result));
  if (report) write_file_atomically(vm["report"].as<std::string>(), sweep_report(result, *report));
  out << text;
  return 0;
}

}  // namespace clustersim::cli
