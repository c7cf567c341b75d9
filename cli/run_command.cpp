#include "cli/run_command.h"

#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <optional>
#include <ostream>

#include "cli/command_line.h"
#include "cli/html_report.h"
#include "cli/report.h"
#include "cli/scenario_loader.h"
#include "sim/input_error.h"
#include "sim/trace.h"
#include "workloads/iteration_result.h"

namespace po = boost::program_options;

namespace clustersim::cli {

int run_command(const std::vector<std::string>& args, std::ostream& out) {
  po::options_description named(
      "clustersim run [SCENARIO] [options]\n\n"
      "Simulates one training iteration (optimizer step) of SCENARIO (.textproto or .json;\n"
      "without one, the built-in default scenario) and prints where the time goes\n"
      "and how long training takes.\n\nOptions");
  named.add_options()("help,h", "show this help")("json", po::value<std::string>()->value_name("FILE"),
                                                  "write the results as JSON")(
      "trace", po::value<std::string>()->value_name("FILE"),
      "write the timeline as Chrome trace-event JSON (open in https://ui.perfetto.dev); with the symmetry "
      "reduction, the simulated GPUs: replica 0's, tensor ranks 0 and 1 of each TP group (--no-symmetry: all)")(
      "trace-gpus", po::value<std::string>()->value_name("LIST"),
      "keep only these GPUs' events in --trace, e.g. 0-7,64 (a large run's trace outgrows what Perfetto's web UI "
      "loads, about 2 GB)")(
      "links", po::value<std::string>()->value_name("FILE"),
      "write per-link utilisation as JSON (FLOW fidelity): bytes, busy fraction, peak concurrent flows")(
      "links-csv", po::value<std::string>()->value_name("FILE"), "the same as CSV")(
      "resolved", po::value<std::string>()->value_name("FILE"),
      "write the scenario with every default filled in (text format)")(
      "no-symmetry",
      "simulate every GPU even where replicas or tensor ranks are provably identical (by default, at "
      "ANALYTICAL fidelity, one replica stands for all, and tensor rank 1 for ranks 2 and up, when nothing "
      "breaks the symmetry)")(
      "report", po::value<std::string>()->value_name("FILE"),
      "write a report: FILE.html (one self-contained file: configuration, time breakdown per job and stage, "
      "memory against capacity, a timeline excerpt, busiest links) or FILE.md (Markdown, the same tables)");
  const ParsedCommand parsed = parse_command(args, named, "run");
  const po::variables_map& vm = parsed.options;
  if (vm.count("help")) {
    out << named << "\n";
    return 0;
  }
  std::optional<ReportFormat> report;
  if (vm.count("report")) report = report_format(vm["report"].as<std::string>());
  check_output_options(parsed, {"json", "trace", "links", "links-csv", "report", "resolved"});
  const workloads::Scenario scenario = load_scenario_argument(parsed, "run");

  if ((vm.count("links") || vm.count("links-csv")) && scenario.fidelity != workloads::Fidelity::kFlow)
    throw InputError("command line", 0, 0, vm.count("links") ? "--links" : "--links-csv",
                     "per-link utilisation needs fidelity: FLOW (the scenario sets ANALYTICAL)");

  // Trace process names: the device (a "chip" of a torus: TPU pods), its node and local index, and with several jobs
  // the job that runs on it.
  std::vector<std::string> job_of(scenario.cluster.gpu_count());
  if (scenario.jobs.size() > 1)
    for (const workloads::Job& job : scenario.jobs)
      for (std::uint32_t g : job.gpus) job_of[g] = ", job " + job.name;
  std::vector<std::string> labels;
  for (std::uint32_t g = 0; g < scenario.cluster.gpu_count(); ++g)
    labels.push_back(std::string(accelerator_noun(scenario.cluster)) + " " + std::to_string(g) + " (node " +
                     std::to_string(scenario.cluster.node_of(g)) + ", local " +
                     std::to_string(g % scenario.cluster.gpus_per_node) + job_of[g] + ")");
  sim::ChromeTraceWriter trace(std::move(labels));
  std::vector<sim::TraceSink*> sinks;
  if (vm.count("trace-gpus")) {
    if (!vm.count("trace")) throw InputError("command line", 0, 0, "--trace-gpus", "needs --trace FILE");
    trace.keep_only(parse_gpu_ranges(vm["trace-gpus"].as<std::string>(), scenario.cluster.gpu_count(), "--trace-gpus"));
  }
  if (vm.count("trace")) sinks.push_back(&trace);
  TimelineRecorder timeline(report ? timeline_gpus(scenario) : std::vector<std::uint32_t>{});
  if (report) sinks.push_back(&timeline);

  const workloads::ScenarioResult result =
      workloads::simulate_scenario(scenario, sinks, vm.count("trace") ? &trace : nullptr, 8,
                                   vm.count("no-symmetry") ? workloads::Symmetry::kOff : workloads::Symmetry::kAuto);

  if (vm.count("trace-gpus") && trace.event_count() == 0)
    throw InputError("command line", 0, 0, "--trace-gpus",
                     "none of these GPUs ran a simulated task (with the symmetry reduction only data-parallel replica "
                     "0's GPUs of tensor ranks 0 and 1 are simulated; --no-symmetry simulates every GPU)");
  out << summary_text(scenario, result);
  if (vm.count("json")) write_file_atomically(vm["json"].as<std::string>(), result_json(scenario, result));
  if (vm.count("trace")) {
    write_file_atomically(vm["trace"].as<std::string>(), [&](std::ostream& o) { trace.write_json(o); });
    // About 250 bytes an event: past 5 million (over 1 GB) the file nears what the web viewers load.
    if (trace.event_count() > 5'000'000)
      std::cerr << "note: " << vm["trace"].as<std::string>() << " holds " << trace.event_count()
                << " events (over 1 GB); Perfetto's web UI loads up to about 2 GB: --trace-gpus keeps fewer GPUs, "
                   "and Perfetto's trace_processor --httpd opens larger files\n";
  }
  if (vm.count("links")) write_file_atomically(vm["links"].as<std::string>(), link_usage_json(result));
  if (vm.count("links-csv")) write_file_atomically(vm["links-csv"].as<std::string>(), link_usage_csv(result));
  if (report) write_file_atomically(vm["report"].as<std::string>(), run_report(scenario, result, &timeline, *report));
  if (vm.count("resolved")) {
    const std::string path = vm["resolved"].as<std::string>();
    workloads::Scenario resolved = scenario;
    // A profile file named relative to the scenario is rewritten relative to the resolved file,
    // so the resolved scenario loads from wherever it was written.
    if (scenario.profile.origin != "built-in") {
      const std::filesystem::path out_dir = std::filesystem::absolute(path).parent_path();
      resolved.profile_ref = std::filesystem::absolute(scenario.profile.origin)
                                 .lexically_normal()
                                 .lexically_relative(out_dir.lexically_normal())
                                 .generic_string();
    }
    write_file_atomically(path, resolved_scenario_text(resolved));
  }
  return 0;
}

}  // namespace clustersim::cli
