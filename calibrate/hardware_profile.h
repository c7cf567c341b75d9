// HardwareProfile: achieved performance of one GPU type and of NCCL ring collectives around it,
// as value types (schema: calibrate/profile.proto). Built-in profiles are data files in
// calibrate/profiles/ with their sources; load_profile() parses one, by built-in name or path.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/units.h"

namespace clustersim::calibrate {

struct GpuPerformance {
  std::string gpu;                       // GPU type, matched against the cluster's gpu
  FlopsPerSecond peak_bf16;
  FlopsPerSecond peak_fp16;
  FlopsPerSecond peak_tf32;
  FlopsPerSecond peak_fp32;
  BytesPerSecond hbm_bandwidth;
  Bytes memory_capacity;
  double gemm_efficiency = 1.0;          // achieved / peak FLOP/s, (0, 1]
  double hbm_efficiency = 1.0;           // achieved / peak HBM bandwidth, (0, 1]
  Seconds kernel_launch;
};

struct CollectiveConstants {
  Seconds ring_base_latency;             // per collective call
  Seconds nvlink_step_latency;           // per ring step over NVLink
  Seconds network_step_latency;          // per ring step crossing nodes
  double nvlink_bus_efficiency = 1.0;    // achieved busbw / link bandwidth, (0, 1]
  double network_bus_efficiency = 1.0;
};

struct HardwareProfile {
  std::string name;
  std::string source;                    // provenance: where the numbers come from
  std::string origin;                    // "built-in" or the file it was read from
  GpuPerformance gpu;
  CollectiveConstants collectives;
};

// Parses a profile from text-format protobuf. `file` names it in errors (InputError, with line:col).
HardwareProfile parse_profile(const std::string& text, const std::string& file);
// Loads a built-in profile by name ("a100-sxm4-80gb") or, failing that, a file path.
// Neither → InputError naming it and listing the built-in names.
HardwareProfile load_profile(const std::string& name_or_path);
// The built-in profile of that name (origin "built-in"), or nullopt if there is none.
std::optional<HardwareProfile> load_builtin_profile(const std::string& name);
// Reads and parses a profile file (.json → JSON, else text format); origin = path.
// Unreadable → InputError(path, 0, 0, "", "cannot read file: <reason>").
HardwareProfile load_profile_file(const std::string& path);
// Names of the built-in profiles.
std::vector<std::string> builtin_profile_names();

}  // namespace clustersim::calibrate
