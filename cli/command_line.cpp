#include "cli/command_line.h"

#include <cstdio>

#include "cli/scenario_loader.h"
#include "sim/input_error.h"

namespace po = boost::program_options;

namespace clustersim::cli {

ParsedCommand parse_command(const std::vector<std::string>& args, const po::options_description& named,
                            const std::string& command) {
  po::options_description hidden;
  hidden.add_options()("scenario", po::value<std::vector<std::string>>());
  po::options_description all;
  all.add(named).add(hidden);
  po::positional_options_description positional;
  positional.add("scenario", -1);
  ParsedCommand parsed;
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), parsed.options);
    po::notify(parsed.options);
  } catch (const po::error& e) {
    throw InputError("command line", 0, 0, command, std::string(e.what()) + " (see clustersim " + command + " --help)");
  }
  if (parsed.options.count("scenario")) parsed.scenarios = parsed.options["scenario"].as<std::vector<std::string>>();
  return parsed;
}

workloads::Scenario load_scenario_argument(const ParsedCommand& parsed, const std::string& command) {
  if (parsed.scenarios.size() > 1)
    throw InputError("command line", 0, 0, command,
                     "takes one scenario, got " + std::to_string(parsed.scenarios.size()));
  return parsed.scenarios.empty() ? load_default_scenario() : load_scenario_file(parsed.scenarios[0]);
}

std::string fmt(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

std::string gpu_ranges_text(const std::vector<std::uint32_t>& gpus) {
  std::string out;
  for (std::size_t i = 0; i < gpus.size();) {
    std::size_t j = i;
    while (j + 1 < gpus.size() && gpus[j + 1] == gpus[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(gpus[i]) + (j > i ? "-" + std::to_string(gpus[j]) : "");
    i = j + 1;
  }
  return out;
}

}  // namespace clustersim::cli
