#include "cli/plan_command.h"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <ostream>
#include <sstream>

#include "calibrate/proto_text.h"
#include "cli/command_line.h"
#include "cli/html_report.h"
#include "cli/report.h"
#include "sim/input_error.h"
#include "topology/topology.h"
#include "workloads/compute_model.h"
#include "workloads/transformer_ops.h"

namespace po = boost::program_options;

namespace clustersim::cli {

Goodput goodput(std::uint32_t gpus, double failures_per_gpu_hour, Seconds checkpoint_write, Seconds restart) {
  Goodput g;
  const double rate = double(gpus) * failures_per_gpu_hour;  // interruptions per hour
  if (rate <= 0) {
    g.mtbf_h = INFINITY;
    g.interval_h = INFINITY;
    return g;
  }
  g.mtbf_h = 1.0 / rate;
  const double delta_h = checkpoint_write.raw() / 3600.0, restart_h = restart.raw() / 3600.0;
  // Young's optimum (CACM 1974), which minimises this first-order waste; Daly's higher-order interval (FGCS 2006)
  // belongs with his exponential waste model, and is shorter by a few % (18.6 against 19.3 min at M = 3.09 h,
  // δ = 60 s): the waste below would not be lower with it.
  g.interval_h = std::sqrt(2.0 * delta_h * g.mtbf_h);
  const double writing = g.interval_h > 0 ? delta_h / g.interval_h : 0.0;
  g.waste_fraction = writing + g.interval_h / (2.0 * g.mtbf_h) + restart_h / g.mtbf_h;
  g.effective_ratio = std::max(0.0, 1.0 - g.waste_fraction);
  return g;
}

std::optional<double> default_gpu_power_w(const std::string& gpu) {
  std::string u = gpu;
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  const bool pcie = u.find("PCIE") != std::string::npos;
  if (u.find("A100") != std::string::npos) return pcie ? 300.0 : 400.0;
  if (u.find("H100") != std::string::npos) return pcie ? 350.0 : 700.0;
  if (u.find("H200") != std::string::npos) return 700.0;
  if (u.find("GB200") != std::string::npos) return 1200.0;
  return std::nullopt;
}

namespace {

// The GPU board power a plan uses: --gpu-power-w, else the datasheet figure of the profile's GPU.
std::optional<double> gpu_power_w(const workloads::Scenario& scenario, const PlanOptions& options) {
  return options.gpu_power_w ? options.gpu_power_w : default_gpu_power_w(scenario.profile.gpu.gpu);
}

// Whole nodes holding `gpus` GPUs: a node is powered however few of its GPUs the job uses.
std::uint32_t nodes_of(std::uint32_t gpus, const workloads::Scenario& scenario) {
  const std::uint32_t per_node = std::max<std::uint32_t>(scenario.cluster.gpus_per_node, 1);
  return (gpus + per_node - 1) / per_node;
}

}  // namespace

std::optional<PlanPoint> plan_for_gpus(const workloads::Scenario& scenario, std::uint32_t gpus,
                                       const PlanOptions& options) {
  SweepOptions so;
  so.gpus = gpus;
  so.top = options.top;
  so.jobs = options.jobs;
  const SweepResult sweep = run_sweep(scenario, so);
  if (sweep.valid == 0) return std::nullopt;
  const workloads::Job& job = sweep.scenario.jobs[0];
  PlanPoint pt;
  pt.gpus = gpus;
  if (!sweep.ranked.empty()) {
    const SweepLayout& best = sweep.layouts[sweep.ranked.front()];
    pt.layout = best.name;
    pt.simulated = true;
    pt.iteration_time = best.simulated->iteration_time;
    pt.mfu = best.simulated->mfu;
  } else {
    const SweepLayout& best = sweep.layouts[sweep.pareto.front()];  // the front starts with the fastest fit
    pt.layout = best.name;
    pt.iteration_time = best.estimate.iteration_time;
    pt.mfu = best.estimate.mfu;
  }
  const double tokens_per_step = double(job.training.global_batch) * job.model.seq_len;
  pt.optimizer_steps = workloads::optimizer_steps_for(options.tokens / tokens_per_step);
  pt.train_time = pt.iteration_time * double(pt.optimizer_steps);
  pt.gpu_hours = pt.train_time.raw() * gpus / 3600.0;
  pt.goodput = goodput(gpus, options.failures_per_gpu_hour, options.checkpoint_write, options.restart);
  pt.wall_time = pt.goodput.effective_ratio > 0 ? pt.train_time / pt.goodput.effective_ratio : seconds(INFINITY);
  const std::optional<double> power = gpu_power_w(scenario, options);
  if (power) pt.energy_kwh = *power * gpus * pt.train_time.raw() / 3.6e6;  // W·s → kWh
  if (power && (options.node_power_w || options.pue)) {
    const double it_w = *power * gpus + options.node_power_w.value_or(0) * nodes_of(gpus, scenario);
    pt.facility_energy_kwh = it_w * options.pue.value_or(1) * pt.train_time.raw() / 3.6e6;
  }
  pt.held_gpu_hours = pt.wall_time.raw() * gpus / 3600.0;
  if (options.price_per_gpu_hour) {
    pt.cost = pt.gpu_hours * *options.price_per_gpu_hour;
    pt.held_cost = pt.held_gpu_hours * *options.price_per_gpu_hour;
  }
  return pt;
}

namespace {

// The most GPUs, in whole search steps up to `limit`, that the scenario's fabric holds (topology::fabric_shape
// refuses more leaves or pods than its switches have ports for; capacity grows with the node count's fit).
std::uint32_t fabric_capacity_gpus(const workloads::Scenario& scenario, std::uint32_t step, std::uint32_t limit) {
  topology::ClusterSpec cluster = scenario.cluster;
  auto holds = [&](std::uint32_t steps) {
    cluster.nodes = steps * step / cluster.gpus_per_node;
    try {
      if (topology::has_fabric(cluster)) topology::fabric_shape(cluster);
      return true;
    } catch (const InputError&) {
      return false;
    }
  };
  std::uint32_t lo = 0, hi = limit / step;  // holds(lo) (0: nothing), the answer in [lo, hi]
  if (holds(hi)) return hi * step;
  while (hi - lo > 1) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    (holds(mid) ? lo : hi) = mid;
  }
  return lo * step;
}

}  // namespace

PlanResult run_plan(const workloads::Scenario& scenario, const PlanOptions& options) {
  PlanResult r;
  if (options.gpus) {
    r.point = plan_for_gpus(scenario, *options.gpus, options);
    r.searched = 1;
    return r;
  }
  const double deadline_s = *options.deadline_days * 86400.0;
  if (scenario.cluster.is_explicit() || scenario.cluster.node.scale_up == topology::ScaleUp::kTorus) {
    // The deadline search resizes the cluster in whole nodes, which a torus or explicit cluster cannot be:
    // its own GPU count meets the deadline or not.
    r.fixed_size = true;
    r.searched = 1;
    r.search_from = scenario.cluster.gpu_count();
    std::optional<PlanPoint> pt = plan_for_gpus(scenario, scenario.cluster.gpu_count(), options);
    if (pt && pt->wall_time.raw() <= deadline_s)
      r.point = std::move(pt);
    else
      r.closest = std::move(pt);
    return r;
  }
  const workloads::Job& job = scenario.jobs.at(0);
  const std::uint32_t step =
      scenario.cluster.gpus_per_node * std::max<std::uint32_t>(1, scenario.cluster.node.nvlink_domain_nodes);
  // Compute bound: the FLOPs every layout executes at least — the causal half of each attention square (what
  // a flash kernel computes), the routed experts' tokens that are not dropped — at the dense peak within the
  // deadline. No layout runs on fewer GPUs in time, whatever convention its MFU uses.
  workloads::OpConfig whole;
  whole.expert_load =
      workloads::routed_fraction_computed(job.model, job.parallel.moe_capacity_factor, job.parallel.moe_token_skew);
  // Over whole optimizer steps, as the training runs them (a budget below one step still runs one).
  const double tokens_per_step = double(job.training.global_batch) * job.model.seq_len;
  const double tokens = double(workloads::optimizer_steps_for(options.tokens / tokens_per_step)) * tokens_per_step;
  const double flops = workloads::model_flops(job.model, whole, workloads::AttentionFlops::kCausalHalf).raw() * tokens /
                       job.model.seq_len;
  const double peak = workloads::tensor_peak(scenario.profile.gpu, job.training.precision).raw();
  const double bound = flops / (peak * *options.deadline_days * 86400.0);
  r.compute_bound = bound;
  // The search runs in whole NVLink domains: the limit too (plan_command refuses one below a domain).
  const std::uint32_t max_gpus = options.max_gpus / step * step;
  r.search_limit = max_gpus;
  std::uint32_t n = step;
  if (bound > step) n = static_cast<std::uint32_t>(std::min<double>(max_gpus, std::ceil(bound / step) * step));
  r.search_from = n;
  // The scenario's fabric (switch radix, levels) may hold fewer: the search ends at its capacity.
  const std::uint32_t limit = fabric_capacity_gpus(scenario, step, max_gpus);
  if (limit < max_gpus) r.fabric_limit = limit;
  for (; n <= limit && n >= step; n += step) {
    ++r.searched;
    std::optional<PlanPoint> pt = plan_for_gpus(scenario, n, options);
    if (pt && pt->wall_time.raw() <= deadline_s) {
      r.point = std::move(pt);
      r.closest.reset();
      break;
    }
    if (pt && (!r.closest || pt->wall_time < r.closest->wall_time ||
               (!std::isfinite(pt->wall_time.raw()) && !std::isfinite(r.closest->wall_time.raw()) &&
                pt->train_time < r.closest->train_time)))
      r.closest = std::move(pt);
  }
  return r;
}

namespace {

std::string unit_of(const workloads::Scenario& sc) {
  return accelerator_noun(sc.cluster);
}

// The job's MTBF: hours (a shorter unit below one hour); none at failure rate 0.
std::string mtbf_text(const Goodput& g) {
  if (!std::isfinite(g.mtbf_h)) return "none (failure rate 0: no interruptions modelled)";
  return g.mtbf_h >= 1 ? fmt("%.2f h", g.mtbf_h) : human_duration(seconds(g.mtbf_h * 3600));
}

std::string interval_text(const Goodput& g) {
  if (!std::isfinite(g.interval_h)) return "none (no failures to checkpoint against)";
  return human_duration(seconds(g.interval_h * 3600));
}

// Waste is a share of the wall time: at 100 % or more no work survives (effective ratio 0).
std::string waste_text(const Goodput& g) {
  if (g.effective_ratio <= 0) return "100 % or more: the job never finishes";
  return fmt("%.2f %%", 100 * g.waste_fraction);
}

// GPU-hours and money: whole above 100, else 3 significant digits (a short job's 0.0044 GPU-hours).
std::string amount_text(double v) {
  return fmt(v >= 100 ? "%.0f" : "%.3g", v);
}

std::string energy_text(double kwh) {
  if (kwh >= 1000) return fmt("%.1f MWh", kwh / 1000);
  return fmt(kwh >= 1 ? "%.1f kWh" : "%.3g kWh", kwh);
}

// How the facility's energy is made up: "(16 GPUs x 700 W + 2 nodes x 4600 W) x PUE 1.2".
std::string facility_power_text(const workloads::Scenario& sc, const PlanOptions& options, const PlanPoint& p) {
  const std::string unit = unit_of(sc);
  std::string s = "(" + std::to_string(p.gpus) + " " + unit + "s x " + fmt("%g", *gpu_power_w(sc, options)) + " W";
  if (options.node_power_w) {
    const std::uint32_t nodes = nodes_of(p.gpus, sc);
    s += " + " + std::to_string(nodes) + (nodes == 1 ? " node x " : " nodes x ") + fmt("%g", *options.node_power_w) +
         " W";
  }
  s += ") x PUE " + fmt("%g", options.pue.value_or(1));
  // Without --node-power-w the nodes' CPUs, memory, NICs and switches are not counted: say so.
  if (!options.node_power_w) s += " (" + unit + "s only: --node-power-w adds the rest of each node)";
  return s;
}

// "N", or "N (T tokens / S per step = X, rounded up: ...)" when the budget is not whole steps (S = global batch
// x sequence).
std::string steps_text(const workloads::Job& job, const PlanOptions& options, std::uint64_t steps) {
  const double tokens_per_step = double(job.training.global_batch) * job.model.seq_len;
  const double exact = options.tokens / tokens_per_step;
  std::string s = std::to_string(steps);
  if (std::fabs(double(steps) - exact) > 1e-9 * exact)
    s += " (" + fmt("%.4g", options.tokens) + " tokens / " + fmt("%.10g", tokens_per_step) +
         " per step = " + fmt("%.10g", exact) + ", rounded up: the last step is partial and timed as a whole one)";
  return s;
}

// The compute bound in GPUs: whole below 1e9, else in 4 significant digits (a deadline of seconds asks for 1e29).
std::string bound_text(double bound) {
  return bound < 1e9 ? fmt("%.0f", std::ceil(bound)) : fmt("%.4g", bound);
}

// The deadline search's step: whole nodes, or whole NVLink domains where one spans several nodes.
std::string search_unit_text(const workloads::Scenario& sc) {
  const std::uint32_t domain = sc.cluster.node.nvlink_domain_nodes;
  if (domain <= 1) return "whole nodes";
  return "whole NVLink domains (" + std::to_string(domain * sc.cluster.gpus_per_node) + " GPUs, " +
         std::to_string(domain) + " nodes)";
}

// "N", or "N (capped by --max-gpus; the bound is B)" when the bound lies above the cap.
std::string compute_bound_text(const PlanResult& r) {
  std::string s = std::to_string(r.search_from);
  if (r.compute_bound > r.search_limit) s += " (--max-gpus; the bound itself is " + bound_text(r.compute_bound) + ")";
  return s;
}

// "1 node", "4 nodes", or "part of 1 node" for fewer GPUs than a node has.
std::string nodes_text(std::uint32_t gpus, std::uint32_t per_node) {
  if (gpus < per_node) return "part of 1 node";
  const std::uint32_t nodes = (gpus + per_node - 1) / per_node;
  return std::to_string(nodes) + (nodes == 1 ? " node" : " nodes");
}

// Why a deadline search found no plan.
std::string no_plan_sentence(const workloads::Scenario& sc, const PlanResult& r) {
  if (r.fixed_size) {
    return "The cluster's " + std::to_string(r.search_from) + " " + unit_of(sc) +
           "s do not meet the deadline (or no layout runs on them), and a torus or explicit cluster is not "
           "resized: give a larger cluster in the scenario.";
  }
  // The bound alone rules out every count searchable: no layout on fewer GPUs computes the FLOPs in time.
  const std::uint32_t most = r.fabric_limit > 0 ? r.fabric_limit : r.search_limit;
  if (r.compute_bound > most)
    return "No GPU count can meet the deadline: the compute bound alone, " + bound_text(r.compute_bound) +
           " GPUs (the training FLOPs at the dense peak within the deadline), is more than the " +
           std::to_string(most) + (r.fabric_limit > 0 ? " the scenario's fabric holds" : " of --max-gpus") +
           ". Raise the deadline" + (r.fabric_limit > 0 ? " or give the scenario a larger fabric." : " or --max-gpus.");
  if (r.fabric_limit > 0)
    return "No GPU count up to " + std::to_string(r.fabric_limit) +
           ", the most the scenario's fabric holds, meets the deadline (the compute bound is " +
           std::to_string(r.search_from) +
           "): give the scenario a larger fabric (fabric.switch_radix, fabric.kind CLOS_THREE_LEVEL).";
  return "No GPU count up to " + std::to_string(r.search_limit) + " meets the deadline.";
}

// How close the search came, after no_plan_sentence: the tried count with the shortest wall time.
std::string closest_sentence(const workloads::Scenario& sc, const PlanOptions& options, const PlanResult& r) {
  const std::string unit = unit_of(sc);
  if (!r.closest) return r.searched == 0 ? "" : "No layout runs on any " + unit + " count tried.";
  const PlanPoint& c = *r.closest;
  std::string s = "Closest: " + std::to_string(c.gpus) + " " + unit + "s (" +
                  nodes_text(c.gpus, sc.cluster.gpus_per_node) + "), " + c.layout + ", ";
  const bool finishes = std::isfinite(c.wall_time.raw());
  s += finishes ? human_duration(c.wall_time) + " with failures" : "never finishing with failures";
  s += " (" + human_duration(c.train_time) + " without) against the deadline of " + fmt("%g", *options.deadline_days) +
       " days.";
  if (!finishes)  // more GPUs only shorten the MTBF
    s += " Failures stop every count tried: lower the checkpoint write and restart times or the failure rate.";
  else if (!r.fixed_size)
    s += r.fabric_limit > 0 ? " Give a larger fabric or raise the deadline." : " Raise --max-gpus or the deadline.";
  return s;
}

}  // namespace

std::string plan_text(const workloads::Scenario& sc, const PlanOptions& options, const PlanResult& r) {
  const workloads::Job& job = sc.jobs.at(0);
  const std::string unit = unit_of(sc);
  std::ostringstream o;
  o << "Plan: " << sc.name << "\n";
  o << "  model " << job.model.name << ", " << fmt("%.4g", options.tokens) << " tokens, global batch "
    << job.training.global_batch << " x sequence " << job.model.seq_len << ", " << sc.cluster.gpu << "\n";
  if (options.deadline_days && r.fixed_size)
    o << "  deadline " << fmt("%g", *options.deadline_days) << " days: the cluster's own " << r.search_from << " "
      << unit << "s (a torus or explicit cluster is not resized)\n";
  else if (options.deadline_days)
    o << "  deadline " << fmt("%g", *options.deadline_days) << " days: searched " << r.searched
      << (r.searched == 1 ? " GPU count" : " GPU counts") << " from the compute bound " << compute_bound_text(r)
      << " in " << search_unit_text(sc) << "\n";
  o << "\n";
  if (!r.point) {
    if (options.gpus)
      o << "No layout runs on " << *options.gpus << " " << unit
        << "s (every one is out of memory or does not divide the model "
        << "and batch; clustersim sweep SCENARIO --gpus " << *options.gpus << " lists why).\n";
    else
      o << no_plan_sentence(sc, r) << "\n"
        << (r.closest || r.searched > 0 ? closest_sentence(sc, options, r) + "\n" : std::string());
    return o.str();
  }
  const PlanPoint& p = *r.point;
  o << (unit + "s").append(21 - unit.size() - 1, ' ') << p.gpus << " (" << nodes_text(p.gpus, sc.cluster.gpus_per_node)
    << ")\n";
  o << "best layout          " << p.layout << (p.simulated ? " (event-driven time)" : " (analytical time)") << "\n";
  o << "iteration time       " << fmt("%.4f", p.iteration_time.raw()) << " s, MFU " << fmt("%.1f", 100 * p.mfu)
    << " %\n";
  o << "optimizer steps      " << steps_text(job, options, p.optimizer_steps) << "\n";
  o << "time to train        " << human_duration(p.train_time) << " without failures\n";
  const bool finishes = std::isfinite(p.wall_time.raw());
  o << (unit + "-hours").append(21 - unit.size() - 6, ' ') << amount_text(p.gpu_hours) << " without failures";
  if (finishes) o << "; " << amount_text(p.held_gpu_hours) << " held for the wall time with failures";
  o << "\n";
  if (p.cost) {
    o << "cost                 " << amount_text(*p.cost) << " USD without failures";
    if (finishes) o << ", " << amount_text(*p.held_cost) << " USD with failures";
    o << ", at " << fmt("%g", *options.price_per_gpu_hour) << " USD per " << unit << "-hour\n";
  }
  if (p.energy_kwh)
    o << ("energy (" + unit + "s)").append(21 - unit.size() - 10, ' ') << energy_text(*p.energy_kwh)
      << " of training without failures at " << fmt("%g", *gpu_power_w(sc, options)) << " W per " << unit << "\n";
  else
    o << "energy               unknown " << unit << " power: pass --gpu-power-w\n";
  if (p.facility_energy_kwh)
    o << "energy (facility)    " << energy_text(*p.facility_energy_kwh)
      << " of training without failures: " << facility_power_text(sc, options, p) << "\n";
  o << "\nFailures and checkpoints\n";
  if (!std::isfinite(p.goodput.mtbf_h)) {
    o << "  failure rate       0 per " << unit << "-hour: no interruptions modelled, no checkpoints needed\n";
  } else {
    o << "  failure rate       " << fmt("%.4g", options.failures_per_gpu_hour) << " per " << unit << "-hour -> MTBF "
      << mtbf_text(p.goodput) << " on " << p.gpus << " " << unit << "s\n";
  }
  o << "  checkpoint         write " << fmt("%g", options.checkpoint_write.raw()) << " s, restart "
    << fmt("%g", options.restart.raw()) << " s; Young interval " << interval_text(p.goodput) << "\n";
  o << "  waste              " << waste_text(p.goodput) << ", effective training time ratio "
    << fmt("%.4f", p.goodput.effective_ratio) << "\n";
  if (!finishes) {
    o << "  wall time          never: failures come faster (MTBF " << mtbf_text(p.goodput)
      << ") than checkpoints and restarts\n                     let work progress; this first-order model needs "
         "checkpoint and restart times well below the MTBF\n";
    return o.str();
  }
  o << "  wall time          " << human_duration(p.wall_time) << " with failures";
  if (options.deadline_days) o << " (deadline " << fmt("%g", *options.deadline_days) << " days: met)";
  o << "\n";
  return o.str();
}

std::string plan_report(const workloads::Scenario& sc, const PlanOptions& options, const PlanResult& r,
                        ReportFormat format) {
  const workloads::Job& job = sc.jobs.at(0);
  const std::string unit = unit_of(sc);
  ReportDocument doc("clustersim plan: " + sc.name);
  std::vector<std::pair<std::string, std::string>> config = {
      {"model", job.model.name},
      {"tokens", fmt("%.4g", options.tokens)},
      {"global batch", std::to_string(job.training.global_batch) + " x sequence " + std::to_string(job.model.seq_len)},
      {unit, sc.cluster.gpu}};
  if (options.deadline_days) config.push_back({"deadline", fmt("%g", *options.deadline_days) + " days"});
  if (options.gpus) config.push_back({unit + "s given", std::to_string(*options.gpus)});
  doc.key_values(config);
  if (!r.point) {
    doc.paragraph(options.gpus ? "No layout runs on " + std::to_string(*options.gpus) + " " + unit +
                                     "s (every one is out of memory or does not divide the model and batch)."
                               : no_plan_sentence(sc, r) +
                                     (r.closest || r.searched > 0 ? " " + closest_sentence(sc, options, r) : ""));
    return format == ReportFormat::kHtml ? doc.html() : doc.markdown();
  }
  const PlanPoint& p = *r.point;
  doc.heading(2, "Plan");
  ReportTable plan;
  plan.header = {"quantity", "value"};
  plan.right_aligned = {false, true};
  plan.rows.push_back({unit + "s", std::to_string(p.gpus) + " (" + nodes_text(p.gpus, sc.cluster.gpus_per_node) + ")"});
  plan.rows.push_back({"best layout", p.layout + (p.simulated ? " (event-driven time)" : " (analytical time)")});
  plan.rows.push_back({"iteration time [s]", fmt("%.4f", p.iteration_time.raw())});
  plan.rows.push_back({"MFU [%]", fmt("%.1f", 100 * p.mfu)});
  plan.rows.push_back({"optimizer steps", steps_text(job, options, p.optimizer_steps)});
  plan.rows.push_back({"time to train without failures", human_duration(p.train_time)});
  plan.rows.push_back(
      {"wall time with failures", std::isfinite(p.wall_time.raw()) ? human_duration(p.wall_time) : "never"});
  plan.rows.push_back({unit + "-hours without failures", amount_text(p.gpu_hours)});
  if (std::isfinite(p.wall_time.raw()))
    plan.rows.push_back({unit + "-hours held for the wall time with failures", amount_text(p.held_gpu_hours)});
  if (p.cost) {
    plan.rows.push_back({"price per " + unit + "-hour [USD]", fmt("%g", *options.price_per_gpu_hour)});
    plan.rows.push_back({"cost without failures [USD]", amount_text(*p.cost)});
  }
  if (p.held_cost && std::isfinite(*p.held_cost))
    plan.rows.push_back({"cost with failures [USD]", amount_text(*p.held_cost)});
  if (p.energy_kwh) {
    plan.rows.push_back({unit + " board power [W]", fmt("%g", *gpu_power_w(sc, options))});
    plan.rows.push_back({"energy (" + unit + "s) of training without failures", energy_text(*p.energy_kwh)});
  }
  if (p.facility_energy_kwh)
    plan.rows.push_back({"energy (facility) of training without failures",
                         energy_text(*p.facility_energy_kwh) + ": " + facility_power_text(sc, options, p)});
  doc.table(plan);
  doc.heading(2, "Failures and checkpoints");
  ReportTable failures;
  failures.header = {"quantity", "value"};
  failures.right_aligned = {false, true};
  failures.rows.push_back({"failure rate [per " + unit + "-hour]", fmt("%.4g", options.failures_per_gpu_hour)});
  failures.rows.push_back({"MTBF of the job", mtbf_text(p.goodput)});
  failures.rows.push_back({"checkpoint write / restart [s]",
                           fmt("%g", options.checkpoint_write.raw()) + " / " + fmt("%g", options.restart.raw())});
  failures.rows.push_back({"Young interval", interval_text(p.goodput)});
  failures.rows.push_back({"waste (share of the wall time)", waste_text(p.goodput)});
  failures.rows.push_back({"effective training time ratio", fmt("%.4f", p.goodput.effective_ratio)});
  doc.table(failures);
  if (!std::isfinite(p.wall_time.raw())) {
    doc.paragraph("The job never finishes: failures come faster (MTBF " + mtbf_text(p.goodput) +
                  ") than checkpoints and restarts let work progress; this first-order model needs checkpoint and "
                  "restart times well below the MTBF.");
    return format == ReportFormat::kHtml ? doc.html() : doc.markdown();
  }
  // Wall time split: useful training and what failures cost (checkpoints, lost work, restarts).
  const double train_days = p.train_time.raw() / 86400, wall_days = p.wall_time.raw() / 86400;
  StackedBar bar;
  bar.label = std::to_string(p.gpus) + " " + unit + "s";
  bar.segments = {{"training", train_days, "#4e79a7"},
                  {"checkpoints, lost work, restarts", std::max(0.0, wall_days - train_days), "#e15759"}};
  if (options.deadline_days) bar.limit = *options.deadline_days;
  doc.figure(svg_stacked_bars({bar}, "days", "deadline"),
             "Wall time: training and what failures cost" +
                 std::string(options.deadline_days ? ", against the deadline" : ""));
  return format == ReportFormat::kHtml ? doc.html() : doc.markdown();
}

int plan_command(const std::vector<std::string>& args, std::ostream& out) {
  po::options_description named(
      "clustersim plan SCENARIO --tokens T (--deadline-days D | --gpus N) [options]\n\n"
      "Capacity planning with the sweep's best layout: the smallest GPU count (whole nodes; whole NVLink\n"
      "domains where one spans several nodes, e.g. 72-GPU NVL72 racks) that trains\n"
      "on T tokens by the deadline, or the training time on N GPUs; GPU-hours, cost, energy, and the\n"
      "goodput with failures and Young's checkpoint interval.\n\nOptions");
  named.add_options()("help,h", "show this help")("tokens", po::value<double>()->value_name("T"), "training tokens")(
      "deadline-days", po::value<double>()->value_name("D"), "find the smallest GPU count meeting D days")(
      "gpus", po::value<std::uint32_t>()->value_name("N"), "plan for N GPUs")(
      "price-per-gpu-hour", po::value<double>()->value_name("USD"), "price of one GPU-hour in USD, as compare's")(
      "gpu-power-w", po::value<double>()->value_name("W"), "GPU board power (default from the GPU's datasheet)")(
      "node-power-w", po::value<double>()->value_name("W"),
      "a node's power besides its GPUs (CPUs, memory, NICs, fans): adds the facility's energy")(
      "pue", po::value<double>()->value_name("P"),
      "power usage effectiveness, facility / IT energy (>= 1): adds the facility's energy")(
      "failure-rate-per-gpu-hour", po::value<double>()->value_name("R"),
      "interruptions per GPU-hour (default 1.973e-5, Llama 3 405B: 419 in 54 days on 16,384 GPUs)")(
      "checkpoint-write-s", po::value<double>()->value_name("S")->default_value(60), "checkpoint write time")(
      "restart-s", po::value<double>()->value_name("S")->default_value(600), "restart time per interruption")(
      "top", po::value<std::uint32_t>()->value_name("K")->default_value(0),
      "re-simulate the best K layouts event by event (default: analytical time)")(
      "max-gpus", po::value<std::uint32_t>()->value_name("M")->default_value(32768), "deadline search limit")(
      "jobs", po::value<std::uint32_t>()->value_name("J")->default_value(1), "threads")(
      "report", po::value<std::string>()->value_name("FILE"),
      "write a report: FILE.html (self-contained: plan, failures, wall-time chart) or FILE.md");
  const ParsedCommand parsed = parse_command(args, named, "plan");
  const po::variables_map& vm = parsed.options;
  if (vm.count("help")) {
    out << named << "\n";
    return 0;
  }
  auto fail = [](const std::string& option, const std::string& what) {
    throw InputError("command line", 0, 0, option, what);
  };
  if (parsed.scenarios.size() != 1)
    fail("plan", "takes one scenario, got " + std::to_string(parsed.scenarios.size()));
  PlanOptions o;
  if (!vm.count("tokens")) fail("--tokens", "missing (required)");
  o.tokens = vm["tokens"].as<double>();
  if (!std::isfinite(o.tokens)) fail("--tokens", fmt("%g", o.tokens) + " is not a finite number");
  if (!(o.tokens > 0)) fail("--tokens", fmt("%g", o.tokens) + " must be > 0");
  if (vm.count("deadline-days") == vm.count("gpus")) fail("plan", "give exactly one of --deadline-days and --gpus");
  if (vm.count("deadline-days")) {
    o.deadline_days = vm["deadline-days"].as<double>();
    if (!std::isfinite(*o.deadline_days))
      fail("--deadline-days", fmt("%g", *o.deadline_days) + " is not a finite number");
    if (!(*o.deadline_days > 0)) fail("--deadline-days", fmt("%g", *o.deadline_days) + " must be > 0");
  }
  if (vm.count("gpus")) o.gpus = vm["gpus"].as<std::uint32_t>();
  auto non_negative = [&](const char* name) {  // at most 1e12, as profile values: the products stay finite
    const double v = vm[name].as<double>();
    if (!(v >= 0) || !(v <= 1e12)) fail(std::string("--") + name, fmt("%g", v) + " must be >= 0 and <= 1e12");
    return v;
  };
  if (vm.count("price-per-gpu-hour")) o.price_per_gpu_hour = non_negative("price-per-gpu-hour");
  if (vm.count("gpu-power-w")) {
    o.gpu_power_w = non_negative("gpu-power-w");
    if (*o.gpu_power_w == 0) fail("--gpu-power-w", "0 must be > 0 (a GPU draws power)");
  }
  if (vm.count("node-power-w")) o.node_power_w = non_negative("node-power-w");
  if (vm.count("pue")) {
    o.pue = vm["pue"].as<double>();
    if (!(*o.pue >= 1) || !(*o.pue <= 10))
      fail("--pue",
           fmt("%g", *o.pue) + " must be in [1, 10] (facility energy over the IT equipment's, which it includes)");
  }
  if (vm.count("failure-rate-per-gpu-hour")) o.failures_per_gpu_hour = non_negative("failure-rate-per-gpu-hour");
  o.checkpoint_write = seconds(non_negative("checkpoint-write-s"));
  o.restart = seconds(non_negative("restart-s"));
  o.top = vm["top"].as<std::uint32_t>();
  o.jobs = vm["jobs"].as<std::uint32_t>();
  if (o.jobs == 0 || o.jobs > 256) fail("--jobs", std::to_string(o.jobs) + " must be in 1..256");
  o.max_gpus = vm["max-gpus"].as<std::uint32_t>();
  for (const auto& [option, value] : {std::pair{"--gpus", o.gpus.value_or(0)}, {"--max-gpus", o.max_gpus}}) {
    if (value > kMaxPlannedGpus)
      fail(option, std::to_string(value) + " is more than the " + std::to_string(kMaxPlannedGpus) +
                       " GPUs clustersim plans for");
  }
  std::optional<ReportFormat> report;
  if (vm.count("report")) report = report_format(vm["report"].as<std::string>());
  check_output_options(parsed, {"report"});
  const workloads::Scenario scenario = load_scenario_argument(parsed, "plan");
  // plan sizes one job's cluster; jobs sharing a fabric (multi-job scenarios) are not planned together.
  if (scenario.jobs.size() > 1)
    throw InputError(parsed.scenarios.at(0), 0, 0, "jobs",
                     "has " + std::to_string(scenario.jobs.size()) +
                         " jobs; plan sizes the cluster of one job: give each job a scenario of its own");
  // Steps are counted in whole numbers (workloads::kMaxTrainingSteps): 1e30 tokens would overflow the count.
  if (!scenario.jobs.empty()) {
    const workloads::Job& job = scenario.jobs[0];
    const double tokens_per_step = double(job.training.global_batch) * job.model.seq_len;
    if (o.tokens / tokens_per_step > workloads::kMaxTrainingSteps)
      fail("--tokens", calibrate::format_number(o.tokens) + " tokens are " +
                           calibrate::format_number(o.tokens / tokens_per_step) + " optimizer steps of " +
                           calibrate::format_number(tokens_per_step) + " tokens, more than the " +
                           calibrate::format_number(workloads::kMaxTrainingSteps) + " clustersim counts");
  }
  if (o.deadline_days) {
    const std::uint32_t step =
        scenario.cluster.gpus_per_node * std::max<std::uint32_t>(1, scenario.cluster.node.nvlink_domain_nodes);
    if (o.max_gpus < step)
      fail("--max-gpus", std::to_string(o.max_gpus) + " is less than the search step, one NVLink domain of " +
                             std::to_string(step) + " GPUs");
  }
  const PlanResult result = run_plan(scenario, o);
  if (report) write_file_atomically(vm["report"].as<std::string>(), plan_report(scenario, o, result, *report));
  out << plan_text(scenario, o, result);
  return 0;
}

}  // namespace clustersim::cli
