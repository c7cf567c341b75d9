// The benchmarks' command lines: --NAME VALUE pairs. --help (or -h) prints the usage and exits 0; an unknown
// option, an option without its value, or a number that is not a whole one is an error (one line, exit status 2).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <string>

namespace clustersim::bench {

[[noreturn]] inline void bench_usage_error(const char* usage, const std::string& message) {
  std::fprintf(stderr, "error: command line: %s (usage: %s)\n", message.c_str(), usage);
  std::exit(2);
}

// The options given, by name; `known` lists the accepted names ("--gpus").
inline std::map<std::string, std::string> bench_options(int argc, char** argv, const char* usage,
                                                        std::initializer_list<const char*> known) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("usage: %s\n", usage);
      std::exit(0);
    }
  }
  std::map<std::string, std::string> out;
  for (int i = 1; i < argc; i += 2) {
    const std::string name = argv[i];
    bool ok = false;
    for (const char* k : known) ok = ok || name == k;
    if (!ok) bench_usage_error(usage, "unknown option " + name);
    if (i + 1 >= argc) bench_usage_error(usage, name + " needs a value");
    out[name] = argv[i + 1];
  }
  return out;
}

// A whole-number option, or `fallback` when it is not given.
inline std::uint64_t bench_whole(const std::map<std::string, std::string>& options, const char* name,
                                 std::uint64_t fallback, const char* usage) {
  const auto it = options.find(name);
  if (it == options.end()) return fallback;
  const std::string& v = it->second;
  if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
    bench_usage_error(usage, std::string(name) + ": \"" + v + "\" is not a whole number");
  return std::strtoull(v.c_str(), nullptr, 10);
}

}  // namespace clustersim::bench
