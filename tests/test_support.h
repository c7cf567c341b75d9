// Helpers shared by the test files.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <utility>

#include "sim/input_error.h"

namespace clustersim::testing {

// what() of the InputError the call throws, or a marker that makes a CHECK fail readably.
inline std::string input_error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no InputError thrown>";
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Scenario text for the fast-path and host-dispatch tests: `nodes` DGX-A100-like nodes (8 GPUs, NVLink 300 GB/s,
// 200 Gb/s NICs), ANALYTICAL fidelity, `model` a preset name optionally followed by overrides ("mixtral-8x7b
// layers: 2 seq_len: 4096"), `parallel` and `training` the bodies of those blocks (training gets samples: 1000).
inline std::string a100_scenario_text(std::uint32_t nodes, const std::string& model, const std::string& parallel,
                                      const std::string& training = "") {
  const std::size_t space = model.find(' ');
  const std::string preset = model.substr(0, space), more = space == std::string::npos ? "" : model.substr(space);
  return "cluster { nodes: " + std::to_string(nodes) +
         " gpus_per_node: 8 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300"
         " nic_gbits_per_s_per_direction: 200 }\n"
         "profile: \"a100-sxm4-80gb\"\nfidelity: ANALYTICAL\nmodel { preset: \"" +
         preset + "\"" + more + " }\nparallel { " + parallel + " }\ntraining { samples: 1000 " + training + " }\n";
}

// One node of 8 A100s (NVLink 300 GB/s, 200 Gb/s NIC), ANALYTICAL fidelity, a 4-layer model with 8 heads
// (h 1024, V 32,000, s 1024), DP 8 x micro-batch 1 x grad-accum 2 = global batch 16: the sweep and plan tests'.
inline constexpr const char* kTinyA100Scenario =
    "cluster { nodes: 1 gpus_per_node: 8 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 "
    "nic_gbits_per_s_per_direction: 200 }\n"
    "profile: \"a100-sxm4-80gb\"\nfidelity: ANALYTICAL\n"
    "model { name: \"tiny\" layers: 4 hidden: 1024 heads: 8 vocab: 32000 seq_len: 1024 }\n"
    "parallel { dp: 8 micro_batch: 1 grad_accum: 2 }\ntraining { samples: 1000 global_batch: 16 }\n";

// A fresh, empty scratch folder under the system's temporary directory.
inline std::filesystem::path scratch_dir(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("clustersim-test-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Removes a scratch folder when the test case that made it ends, passed or failed.
struct RemoveOnExit {
  std::filesystem::path dir;
  explicit RemoveOnExit(std::filesystem::path d) : dir(std::move(d)) {}
  RemoveOnExit(const RemoveOnExit&) = delete;
  RemoveOnExit& operator=(const RemoveOnExit&) = delete;
  ~RemoveOnExit() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

struct BinaryRun {
  int status = -1;
  std::string out;
  std::string err;
};

// Runs the built `clustersim` with `args` from the source folder; stdout and stderr go through files in `dir`.
inline BinaryRun run_clustersim(const std::string& args, const std::filesystem::path& dir) {
  const std::filesystem::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  const std::string cmd = std::string("cd ") + CLUSTERSIM_SOURCE_DIR + " && " + CLUSTERSIM_BINARY + " " + args +
                          " >" + out.string() + " 2>" + err.string();
  const int raw = std::system(cmd.c_str());
  return BinaryRun{WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(out), slurp(err)};
}

// The first number after `"key":` in a JSON text (--json writes a space after the colon, --trace none).
inline double json_number(const std::string& json, const std::string& key) {
  const std::regex re("\"" + key + "\": ?([-0-9.eE+]+)");
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_search(json, m, re), "key " << key << " missing");
  return std::stod(m[1]);
}

}  // namespace clustersim::testing
