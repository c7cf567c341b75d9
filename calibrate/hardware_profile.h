// HardwareProfile: achieved performance of one GPU type and of NCCL ring collectives around it,
// as value types (schema: calibrate/profile.proto). Built-in profiles are data files in
// calibrate/profiles/ with their sources; load_profile() parses one, by built-in name or path.
#pragma once

#include <optional>
#include <array>
#include <cstdint>
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

// NCCL's tuning constants (see calibrate/profile.proto NcclTuning). Arrays indexed by protocol are
// {LL, LL128, Simple}; by node count {1 node, 2 nodes, >2 nodes}.
struct NcclTuning {
  bool present = false;                  // false: only ring/Simple is modelled
  std::string source;
  using PerProtocol = std::array<double, 3>;
  PerProtocol ring_base_us{}, tree_base_us{}, nvls_base_us{}, collnet_base_us{};
  PerProtocol ring_nvlink_us{}, tree_nvlink_us{}, nvls_nvlink_us{}, collnet_nvlink_us{};
  PerProtocol ring_pci_us{}, tree_pci_us{};
  PerProtocol ring_net_us{}, tree_net_us{}, nvls_net_us{}, collnet_net_us{};
  std::array<double, 3> ll_max_bus_GBps{}, ring_ll128_per_channel_GBps{}, tree_per_channel_GBps{},
      tree_ll128_per_channel_GBps{};
  double nvls_efficiency = 0;
  std::uint32_t channels = 1;
  double net_overhead_us = 0;
  std::array<std::vector<double>, 3> tree_correction;  // per protocol, index log2(bytes / 64)
};

struct CollectiveConstants {
  Seconds ring_base_latency;             // per collective call
  Seconds nvlink_step_latency;           // per ring step over NVLink
  Seconds network_step_latency;          // per ring step crossing nodes
  double nvlink_bus_efficiency = 1.0;    // achieved busbw / link bandwidth, (0, 1]
  double network_bus_efficiency = 1.0;
  NcclTuning nccl;
  BytesPerSecond nvls_bandwidth;         // per GPU, NVLS AllReduce; 0 = none
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
