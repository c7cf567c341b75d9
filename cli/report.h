// Reports of a simulated iteration: the terminal summary and the JSON document of `clustersim run`.
// Both are pure functions of the scenario and the result, so identical inputs give identical bytes.
#pragma once

#include <string>

#include "workloads/iteration_result.h"
#include "workloads/scenario.h"

namespace clustersim::cli {

std::string summary_text(const workloads::Scenario& scenario, const workloads::ScenarioResult& result);
std::string result_json(const workloads::Scenario& scenario, const workloads::ScenarioResult& result);

// Per-link utilisation (FLOW fidelity): bytes carried, busy time and fraction of the makespan,
// peak concurrent flows, mean throughput while busy. Busiest (by bytes) first.
std::string link_usage_json(const workloads::ScenarioResult& result);
std::string link_usage_csv(const workloads::ScenarioResult& result);

// Writes `content` to `path` through a temporary file in the same directory and a rename, so a
// failure never leaves a half-written file. Throws InputError naming the path on failure.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace clustersim::cli
