// Shared parts of the `clustersim` subcommands: parsing options plus positional scenario files
// (bad options become InputError naming the command line), loading the scenario argument, and
// small formatting helpers used by the reports.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "workloads/scenario.h"

namespace clustersim::cli {

struct ParsedCommand {
  boost::program_options::variables_map options;
  std::vector<std::string> scenarios;  // positional arguments
};

// Parses `args` against `named` (which must include "help") plus any number of positional scenario
// paths. Throws InputError("command line", ..., command, ...) on unknown or malformed options.
ParsedCommand parse_command(const std::vector<std::string>& args,
                            const boost::program_options::options_description& named, const std::string& command);

// Checks every given output option (check_output_path), then that no two of them name the same file and that
// none names an input (the positional scenarios and `inputs`): `run S.textproto --json S.textproto` would
// overwrite the scenario. Devices and pipes (/dev/null) may be given to several options.
// Throws InputError("command line", ..., "--OPTION", ...).
void check_output_options(const ParsedCommand& parsed, std::initializer_list<const char*> options,
                          const std::vector<std::string>& inputs = {});

// The one optional scenario argument: the built-in default when absent; more than one is an error.
workloads::Scenario load_scenario_argument(const ParsedCommand& parsed, const std::string& command);

// printf-style formatting of one number.
std::string fmt(const char* format, double value);

// A duration in the largest unit that keeps it at 1 or more: "20.59 days", "4.57 hours", "5.72 minutes",
// "15.900 s", "3.243 ms".
std::string human_duration(Seconds s);

// "0-63,128-191" → {0..63, 128..191}: GPU index ranges as jobs and --ranks write them, sorted. Throws
// InputError("command line", 0, 0, option, ...) for malformed text, backwards ranges, GPUs that do not
// exist (index >= total) and GPUs listed twice. `option` names the flag in the error ("--ranks").
std::vector<std::uint32_t> parse_gpu_ranges(const std::string& text, std::uint32_t total,
                                            const std::string& option = "--ranks");
// The same parser reporting through `fail` (which must throw), for other inputs such as a scenario's
// jobs[i].gpus.
std::vector<std::uint32_t> parse_gpu_ranges(const std::string& text, std::uint32_t total,
                                            const std::function<void(const std::string&)>& fail);

// {0..63, 128..191} → "0-63,128-191".
std::string gpu_ranges_text(const std::vector<std::uint32_t>& gpus);

}  // namespace clustersim::cli
