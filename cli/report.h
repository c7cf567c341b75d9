// Reports of a simulated iteration: the terminal summary and the JSON document of `clustersim run`.
// Both are pure functions of the scenario and the result, so identical inputs give identical bytes.
#pragma once

#include <functional>
#include <ostream>
#include <string>

#include "workloads/iteration_result.h"
#include "workloads/scenario.h"

namespace clustersim::cli {

std::string summary_text(const workloads::Scenario& scenario, const workloads::ScenarioResult& result);

// What the cluster's accelerators are called in reports: "chip" on a torus of TPU chips (Cloud TPU counts and
// prices chip-hours), else "GPU".
inline const char* accelerator_noun(const topology::ClusterSpec& cluster) {
  return cluster.is_torus() ? "chip" : "GPU";
}

// The input side's assumptions (workloads/input_pipeline.h), so a stall (or its absence) can be checked: the data
// loader ("loader 10 samples/s per node, queue of 2 micro-batch(es) (filled during the previous step)", or that
// there is no loader rate) and the host-to-device copy of each micro-batch (bytes and bandwidth).
struct InputModelText {
  std::string loader;
  std::string copy;
};
InputModelText input_model_text(const workloads::Job& job);
std::string result_json(const workloads::Scenario& scenario, const workloads::ScenarioResult& result);

// Per-link utilisation (FLOW fidelity): bytes carried, busy time and fraction of the makespan,
// peak concurrent flows, mean throughput while busy. Busiest (by bytes) first.
std::string link_usage_json(const workloads::ScenarioResult& result);
std::string link_usage_csv(const workloads::ScenarioResult& result);

// "-" (standard output, as Unix tools read it) or a path under /dev/ or /proc/ (/dev/stdout, /dev/fd/3, a device):
// an output stream, written into directly and appended to, after what the command has printed so far is flushed.
// /dev/stdout names whatever the output is (a pipe, a terminal, a redirected file), which the path does not show.
bool is_stream_output(const std::string& path);

// Writes `content` to `path` through a temporary file in the same directory and a rename, so a
// failure never leaves a half-written file. A symbolic link is followed (its target gets the content, the link
// stays); a device, named pipe or socket, and a stream output (is_stream_output), is written into directly. Throws
// InputError naming the path on failure.
void write_file_atomically(const std::string& path, const std::string& content);
// The same, with the content written by `write` to the file's stream as it is formatted (for large outputs).
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

// Refuses (InputError naming `path`) an output path that cannot be written: a directory, a file without write
// permission, or one in a folder that does not exist or is not writable. Commands call it for every output option
// before they simulate, so that a bad path costs no simulation and leaves no other output behind.
void check_output_path(const std::string& path);

}  // namespace clustersim::cli
