// HardwareProfile: achieved performance of one GPU type and of NCCL ring collectives around it,
// as value types (schema: calibrate/profile.proto). Built-in profiles are data files in
// calibrate/profiles/ with their sources; load_profile() parses one, by built-in name or path.
//
// A fitted profile (clustersim calibrate fit, calibrate/fit.h) adds measured tables: GEMM efficiency
// by (M, N, K, dtype), an HBM bandwidth curve by transfer size, and alpha-beta bands per collective,
// algorithm, protocol and link kind:  t = alpha + size · busbw_factor(op, n) / busbw  for sizes in
// [min_bytes, max_bytes) (nccl-tests' busbw convention, ../shared/reference/nccl.md §2.2, §5).
// find_band() is the one lookup rule for those bands (documented there).
#pragma once

#include <optional>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/units.h"

namespace clustersim::calibrate {

// The largest GEMM dimension (m, n or k) a profile's table or a raw GEMM sample may hold: INT_MAX, as cuBLAS takes
// m, n and k as int (cublasGemmEx).
inline constexpr std::uint64_t kMaxGemmDimension = 2147483647;

// The element types GEMMs are measured in (calibrate/raw.proto GemmSample.DataType).
enum class GemmDtype { kFP16, kBF16, kFP32, kTF32, kFP8 };
const char* to_string(GemmDtype d);  // "FP16", "BF16", "FP32", "TF32", "FP8"

struct GemmEfficiencyPoint {
  std::uint64_t m = 0, n = 0, k = 0;
  GemmDtype dtype = GemmDtype::kBF16;
  double efficiency = 1.0;  // achieved / dense peak of the dtype, (0, 1]
};

struct HbmBandwidthPoint {
  Bytes size;                // bytes moved (read + written)
  BytesPerSecond bandwidth;  // achieved
};

// The least efficiency (fraction of peak) a profile may hold: a scalar one (GEMM, HBM, bus, attention kernel) and a
// GEMM-table entry, which a measured tiny GEMM can put far lower. The loader refuses less; calibrate fit writes none.
inline constexpr double kMinEfficiency = 1e-3;
inline constexpr double kMinGemmTableEfficiency = 1e-9;

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
  std::vector<GemmEfficiencyPoint> gemm_table{};  // empty: gemm_efficiency everywhere
  std::vector<HbmBandwidthPoint> hbm_curve{};     // size strictly increasing; empty: hbm_bandwidth·hbm_efficiency
  // >= 1: compute kernels run this much slower while communication kernels share the GPU (NCCL kernels
  // occupy SMs). Applied by sim::Executor::set_comm_slowdown (sim/executor.h). 1 in the built-in profiles: the
  // published figures are aggregates, not per-GPU calibrations — e.g. Lee et al. 2025 (arXiv 2507.03114) measure
  // an average 18.9% (max 40%) compute slowdown under overlap across A100, H100, MI250 and MI210 training runs,
  // 1.19 as a what-if. Calibrate it on the target: time a GEMM alone and with a concurrent NCCL AllReduce on
  // another stream that covers it, s = t_overlapped / t_alone (clustersim-bench does not measure this yet).
  double compute_slowdown_during_comm = 1.0;
  // Tile and wave quantisation of GEMMs (profile.proto GpuProfile.sm_count): 0 SMs = not modelled.
  std::uint32_t sm_count = 0;
  std::uint32_t gemm_tile_m = 0, gemm_tile_n = 0;  // output tile, elements
  FlopsPerSecond peak_fp8{};  // dense FP8 tensor peak (profile.proto peak_fp8_tflops); 0 = no FP8 tensor cores
  // Fused attention kernels' published rates (profile.proto flash_attention_*): fractions of the 16-bit dense
  // peak over the FLOPs the kernel executes; 0 = no rate for this GPU.
  struct AttentionRate {
    double forward = 0, backward = 0;
    bool present() const { return forward > 0 && backward > 0; }
  };
  AttentionRate flash_fa2{}, flash_fa3{}, flash_triton{};
};

// The GPU's dense peak for GEMMs of this dtype (0 for FP8 without FP8 tensor cores).
FlopsPerSecond dense_peak(const GpuPerformance& gpu, GemmDtype d);

// NCCL's tuning constants (see calibrate/profile.proto NcclTuning). Arrays indexed by protocol are
// {LL, LL128, Simple}; by node count {1 node, 2 nodes, >2 nodes}.
struct NcclTuning {
  bool present = false;                  // false: only ring/Simple is modelled
  std::string source;
  std::string nccl_version;              // "2.30.7"; empty = not stated
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
  // Multi-node LL cap and network overhead on AMD hosts (profile.proto): {2 nodes, >2 nodes}; µs.
  std::array<double, 2> ll_max_bus_amd_GBps{};
  double net_overhead_amd_us = 0;
  // PAT: base and network latency per protocol (µs), bus-bandwidth factor (0: no PAT in this NCCL release).
  PerProtocol pat_base_us{}, pat_net_us{};
  double pat_bus_efficiency = 0;
  double collnet_direct_efficiency = 1;  // CollNetDirect AllReduce busBw factor: 0.85 from Hopper on (profile.proto)
  // NVLSTree (profile.proto): base, NVLink and network latencies per protocol (µs); perChMaxNVLSTreeBws by node count
  // (GB/s), all 0 where the profile has none (NVLSTree is then not a candidate).
  PerProtocol nvlstree_base_us{}, nvlstree_nvlink_us{}, nvlstree_net_us{};
  std::array<double, 3> nvlstree_per_channel_GBps{};
  std::array<std::vector<double>, 3> tree_correction;  // per protocol, index log2(bytes / 64)
};

enum class LinkKind { kNvlink, kNet };  // communicator inside one NVLink domain, or across domains
const char* to_string(LinkKind k);      // "NVLINK", "NET"

// One fitted band (profile.proto AlphaBetaBand). op is nccl-tests' name ("all_reduce"), algorithm one of
// ring/tree/nvls/nvlstree/collnet/pat/hierarchical/p2p/default, protocol LL/LL128/Simple/default (canonical spellings).
struct AlphaBetaBand {
  std::string op, algorithm, protocol;
  LinkKind link = LinkKind::kNvlink;
  std::uint64_t min_bytes = 0;
  std::optional<std::uint64_t> max_bytes;  // exclusive; nullopt = unbounded
  Seconds alpha;
  BytesPerSecond busbw;  // may be +inf (latency-only band)
  std::uint32_t ranks = 0;  // communicator size measured; 0 = any
  std::uint32_t points = 0;
  double mean_relative_error = 0, max_relative_error = 0;
  bool covers(std::uint64_t bytes) const { return bytes >= min_bytes && (!max_bytes || bytes < *max_bytes); }
};

struct CollectiveConstants {
  Seconds ring_base_latency;             // per collective call
  Seconds nvlink_step_latency;           // per ring step over NVLink
  Seconds network_step_latency;          // per ring step crossing nodes
  double nvlink_bus_efficiency = 1.0;    // achieved busbw / link bandwidth, (0, 1]
  double network_bus_efficiency = 1.0;
  NcclTuning nccl;
  BytesPerSecond nvls_bandwidth;         // per GPU, NVLS AllReduce; 0 = none
  std::vector<AlphaBetaBand> bands{};  // fitted; empty in the built-in profiles
  double nvlink_allgather_bus_efficiency = 0;  // nvlink_bus_efficiency for AllGather, (0, 1]; 0 = the same
};

// The band that times a collective, or null. The rule:
//  1. bands of the same op, link kind and covering `bytes`, whose algorithm and protocol each equal the
//     requested one or are "default" (measured with NCCL's own choice); an exact algorithm beats "default",
//     then an exact protocol; among equals the first in the profile.
//  2. none: bands of another ring-family op (all_reduce, reduce_scatter, all_gather, broadcast, reduce, in
//     that order of preference; never alltoall/sendrecv, which run point-to-point) with the same link kind,
//     the *same* algorithm (not "default": NCCL may have run another algorithm for that op) and the protocol
//     as in 1. busbw is nccl-tests' normalisation to the bytes each link carries (PERFORMANCE.md), the same
//     physical wire rate for every ring-family op, so it transfers; alpha is taken as measured (in nccl-tests
//     runs it is mostly the launch floor, shared by all ops).
// Within each rule, after the algorithm/protocol preference, the communicator size decides: a band measured on
// `ranks` GPUs, then a band for any size (ranks 0), then the band whose size is nearest in log2 (an 8-GPU fit
// times a 6-GPU communicator before a 2-GPU fit does; ties: the first in the profile).
// `op` is nccl-tests' name ("all_gather"); `algorithm` and `protocol` as in AlphaBetaBand.
const AlphaBetaBand* find_band(const CollectiveConstants& c, std::string_view op, std::string_view algorithm,
                               std::string_view protocol, LinkKind link, std::uint64_t bytes, std::uint32_t ranks);

struct Provenance {
  std::string source, date, notes;
  std::string gpu, driver_version, cuda_version, nccl_version;  // of the measurement run (fitted profiles)
  std::uint32_t hosts = 0;
  std::string raw_sha256;              // SHA-256 of the raw measurements fitted from; empty for built-ins
  std::vector<std::string> raw_files;  // "<sha256>  <path>"
};

struct HardwareProfile {
  std::string name;
  std::string source;  // provenance: where the numbers come from (= provenance.source)
  std::string origin;                    // "built-in" or the file it was read from
  Provenance provenance;
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
// The text of the built-in profile of that name, or nullopt.
std::optional<std::string> builtin_profile_source(const std::string& name);

}  // namespace clustersim::calibrate
