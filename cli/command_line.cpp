#include "cli/command_line.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include "cli/report.h"
#include "cli/scenario_loader.h"
#include "sim/input_error.h"

namespace po = boost::program_options;

namespace clustersim::cli {

namespace {

// Boost parses "-8" into an unsigned option as 2^32 − 8 (a count of GPUs, layouts or threads that then exhausts
// memory or time): a value of an unsigned option that starts with '-' is refused here.
void refuse_negative_unsigned(const po::parsed_options& options, const po::options_description& all) {
  for (const po::option& o : options.options) {
    const po::option_description* d = all.find_nothrow(o.string_key, false);
    if (d == nullptr) continue;
    const po::value_semantic* sem = d->semantic().get();
    const bool is_unsigned = dynamic_cast<const po::typed_value<unsigned>*>(sem) != nullptr ||
                             dynamic_cast<const po::typed_value<unsigned long>*>(sem) != nullptr ||
                             dynamic_cast<const po::typed_value<unsigned long long>*>(sem) != nullptr;
    if (!is_unsigned) continue;
    for (const std::string& v : o.value) {
      const std::size_t first = v.find_first_not_of(" \t");
      if (first != std::string::npos && v[first] == '-')
        throw InputError("command line", 0, 0, "--" + o.string_key, v + " is negative: it must be a whole number");
    }
  }
}

}  // namespace

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
    const po::parsed_options options = po::command_line_parser(args).options(all).positional(positional).run();
    refuse_negative_unsigned(options, all);
    po::store(options, parsed.options);
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

std::string human_duration(Seconds s) {
  const double v = s.raw();
  if (v >= 86400) return fmt("%.2f days", v / 86400);
  if (v >= 3600) return fmt("%.2f hours", v / 3600);
  if (v >= 60) return fmt("%.2f minutes", v / 60);
  if (v >= 1) return fmt("%.3f s", v);
  return fmt("%.3f ms", v * 1e3);
}

std::vector<std::uint32_t> parse_gpu_ranges(const std::string& text, std::uint32_t total, const std::string& option) {
  return parse_gpu_ranges(text, total,
                          [&](const std::string& message) { throw InputError("command line", 0, 0, option, message); });
}

std::vector<std::uint32_t> parse_gpu_ranges(const std::string& text, std::uint32_t total,
                                            const std::function<void(const std::string&)>& fail_with) {
  // `fail_with` throws; the wrapper tells the compiler this path does not return.
  auto fail = [&](const std::string& message) {
    fail_with(message);
    throw InputError("", 0, 0, "", message);
  };
  const std::string malformed = "\"" + text + "\" is not a list of GPU ranges such as \"0-63,128-191\"";
  std::vector<bool> seen(total, false);
  std::size_t pos = 0;
  // A number and its digits as written (messages quote the digits: the value saturates past `total`).
  auto number = [&](std::string& digits) -> std::uint64_t {
    while (pos < text.size() && text[pos] == ' ') ++pos;
    const std::size_t begin = pos;
    std::uint64_t v = 0;
    // Stop growing past `total`: the value is only compared with it, and this cannot overflow.
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (v <= total) v = v * 10 + static_cast<std::uint64_t>(text[pos] - '0');
      ++pos;
    }
    if (pos == begin) fail(malformed);
    digits = text.substr(begin, pos - begin);
    while (pos < text.size() && text[pos] == ' ') ++pos;
    return v;
  };
  while (true) {
    std::string first_digits;
    const std::uint64_t first = number(first_digits);
    std::uint64_t last = first;
    std::string last_digits = first_digits;
    if (pos < text.size() && text[pos] == '-') {
      ++pos;
      last = number(last_digits);
    }
    if (last >= total)
      fail("GPU " + last_digits + " does not exist (the cluster has " + std::to_string(total) +
           (total == 1 ? " GPU)" : " GPUs)"));
    if (last < first) fail("range " + first_digits + "-" + last_digits + " is backwards");
    for (std::uint64_t g = first; g <= last; ++g) {
      if (seen[g]) fail("GPU " + std::to_string(g) + " is listed twice");
      seen[g] = true;
    }
    if (pos == text.size()) break;
    if (text[pos] != ',') fail(malformed);
    ++pos;
  }
  std::vector<std::uint32_t> out;
  for (std::uint32_t g = 0; g < total; ++g)
    if (seen[g]) out.push_back(g);
  return out;
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

void check_output_options(const ParsedCommand& parsed, std::initializer_list<const char*> options,
                          const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  // The file a path ends up naming (links followed), or empty for what is no plain file: a device, a pipe.
  auto file_of = [](const std::string& path) -> fs::path {
    if (is_stream_output(path)) return {};  // standard output and devices may take several outputs
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (fs::exists(st) && !fs::is_regular_file(st)) return {};
    // A link to a file not written yet (out/lnk -> s, before the run makes s) names that file, which
    // weakly_canonical() alone leaves unresolved: follow such links by hand (a few levels; a loop stops there).
    fs::path p = fs::absolute(path, ec);
    for (int level = 0; level < 40 && !ec && fs::is_symlink(fs::symlink_status(p, ec)) && !fs::exists(p, ec); ++level) {
      const fs::path target = fs::read_symlink(p, ec);
      p = target.is_absolute() ? target : p.parent_path() / target;
    }
    const fs::path canonical = fs::weakly_canonical(p, ec);
    return ec ? fs::path(path).lexically_normal() : canonical;
  };
  std::vector<fs::path> input_files;
  for (const std::vector<std::string>* list : {&parsed.scenarios, &inputs})
    for (const std::string& input : *list) input_files.push_back(file_of(input));
  std::vector<std::pair<std::string, fs::path>> seen;  // option, file
  for (const char* option : options) {
    if (!parsed.options.count(option)) continue;
    const std::string path = parsed.options[option].as<std::string>();
    const std::string name = "--" + std::string(option);
    if (path.empty()) throw InputError("command line", 0, 0, name, "the file name is empty");
    check_output_path(path);
    const fs::path file = file_of(path);
    if (file.empty()) continue;
    for (const auto& [other, other_file] : seen) {
      if (other_file == file)
        throw InputError("command line", 0, 0, name, path + " is also the output of " + other + ": give each its own file");
    }
    if (std::find(input_files.begin(), input_files.end(), file) != input_files.end())
      throw InputError("command line", 0, 0, name, path + " is an input of this command; writing it would overwrite it");
    seen.emplace_back(name, file);
  }
}

}  // namespace clustersim::cli
