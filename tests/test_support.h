// Helpers shared by the test files.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

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

// A fresh, empty scratch folder under the system's temporary directory.
inline std::filesystem::path scratch_dir(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("clustersim-test-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

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

}  // namespace clustersim::testing
