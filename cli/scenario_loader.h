// Scenario loading: the edge where a scenario file (protobuf text format, or JSON for programs;
// schema cli/scenario.proto) becomes validated value types (workloads::Scenario).
//
// Every bad input throws InputError naming FILE:LINE:COL (0 where unknown, always for JSON) and
// the field path as written in the schema, e.g.
//   scenarios/x.textproto:12:7: parallel.dp: 8 does not equal the cluster's 16 GPUs (2 nodes x 8 GPUs per node)
// Units are converted here, once: decimal GB/s (1e9 B/s), Gbit/s (1e9/8 B/s), MiB (2^20 B), us.
// Defaults: name = file stem, model.name = "model", model.ffn_hidden = 4 x hidden,
// parallel.grad_accum = 1, parallel.ddp_bucket_mib = 25 (PyTorch DDP bucket_cap_mb),
// training.epochs = 1, training.global_batch = micro_batch x grad_accum x dp, precision = BF16,
// hop latencies = 0. The profile is a built-in name or a path relative to the scenario's folder.
#pragma once

#include <string>

#include "workloads/scenario.h"

namespace clustersim::cli {

// Reads and validates a scenario file: ".json" → JSON, anything else → text format.
// Unreadable → InputError(path, 0, 0, "", "cannot read file: <reason>").
workloads::Scenario load_scenario_file(const std::string& path);

// Validates scenario text. `display_name` names it in errors and gives the default name (its stem);
// a relative profile path is resolved against `base_dir` ("" = the working directory).
workloads::Scenario load_scenario_text(const std::string& text, const std::string& display_name, bool json,
                                       const std::string& base_dir);

// Whether a layout of `job_gpus` GPUs needs more tasks than clustersim builds (a lower bound of 8 per layer,
// micro-batch and simulated GPU above 2^26): the loader refuses such a scenario, and sweep does not re-simulate it.
bool simulation_too_large(const workloads::ModelSpec& model, const workloads::ParallelPlan& plan, std::size_t job_gpus,
                          workloads::Fidelity fidelity);

// The built-in default scenario (scenarios/default.textproto, compiled in).
workloads::Scenario load_default_scenario();

// The scenario in text format with every default filled in and the profile written as the scenario
// named it. Deterministic; load_scenario_text() of it (same base_dir) gives the same scenario.
std::string resolved_scenario_text(const workloads::Scenario& scenario);

}  // namespace clustersim::cli
