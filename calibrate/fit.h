// Calibration on the CPU: raw measurements (calibrate/raw.proto) in, a hardware profile
// (calibrate/profile.proto) out — `clustersim calibrate import-nccl-tests` and `clustersim calibrate fit`.
//
// Import. Each nccl-tests log or validation CSV (calibrate/nccl_tests_log.h) becomes CollectiveSamples:
// one per size and placement (out-of-place, and in-place with in_place = true) that has a time; size-0 rows
// (AG/RS sizes nccl-tests rounds to nothing) ran nothing and are dropped. size, count, type, time, algbw and
// busbw are copied as printed (count stays per rank for AllGather/ReduceScatter/AlltoAll, as nccl-tests
// prints it); algorithm and protocol are what the caller says was forced (NCCL_ALGO/NCCL_PROTO), else
// "default". Provenance: the NCCL version the log states, GPUs, hosts where the log says, the GPU name from
// the `# Rank … NVIDIA …` device lines or a CSV's `# hardware:` line, source = the files read.
//
// Fit, per part of the profile (everything not measured is copied from the base profile):
//  * collectives: per (op, algorithm, protocol, link kind, communicator size, size band) a weighted
//    least-squares line
//        t_i = α + γ·x_i,   x_i = size_i · busbw_factor(op, ranks_i),   busbw = 1/γ
//    (nccl-tests' busbw convention, ../shared/reference/nccl.md §2.2 and §5). Weights w_i = 1/t_i², so the
//    fit minimises Σ((pred − t)/t)², the relative error: a band spanning 1 MiB..64 MiB is not ruled by its
//    largest sizes. Closed form with weighted means x̄ = Σwx/Σw, t̄ = Σwt/Σw:
//        γ = Σw(x − x̄)(t − t̄) / Σw(x − x̄)²,   α = t̄ − γ·x̄.
//    A band whose times do not grow with size (γ ≤ 0) is latency-only: γ = 0, α = t̄, busbw = inf. A negative
//    intercept is refitted through the origin: α = 0, γ = Σwxt / Σwx². A band needs two distinct sizes.
//    Link kind: NVLINK when the samples ran on one host (one NVLink domain), else NET. Default bands
//    [0, 64 KiB), [64 KiB, 1 MiB), [1 MiB, 64 MiB), [64 MiB, ∞) — latency-bound, the ramp, the knee, the
//    plateau of nccl-tests curves on NVLink and IB (§1.11); other edges with FitOptions::band_edges.
//  * kernel_launch_us: the median "empty_kernel_back_to_back" overhead (else of every launch sample; none: the
//    base's).
//  * GEMM and memory samples are back-to-back periods (clustersim-bench times a kernel from one event to the
//    next in a stream of them), so they hold the launch gap, while the simulator times a kernel as its execution
//    plus kernel_launch_us. The fit keeps period − kernel_launch_us as the execution, and the fitted profile
//    gives every sample's period back (before, the launch was counted twice: a 4 us GEMM with a 3 us launch came
//    out at 7 us).
//  * GEMM table: efficiency = 2mnk / (mean period of the shape − kernel_launch_us) / the base profile's dense
//    peak of the dtype, capped at 1 (a capped entry is reported: a period at or below the launch is all launch).
//  * HBM curve: per transfer size of the "hbm_stream" samples (else "d2d_copy"), bytes / (mean period −
//    kernel_launch_us), capped at the base's peak hbm_gbytes_per_s (reported); hbm_efficiency = the largest
//    size's bandwidth / the peak.
// The result is deterministic: the same raw files in the same order give byte-identical profile text. The
// profile records the SHA-256 (FIPS 180-4) of the raw files' bytes, concatenated in the order given.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/nccl_tests_log.h"
#include "calibrate/profile.pb.h"
#include "calibrate/proto_text.h"
#include "calibrate/raw.pb.h"

namespace clustersim::calibrate {

// Lower-case hex SHA-256 of `bytes`.
std::string sha256_hex(std::string_view bytes);

// ---- import-nccl-tests ----------------------------------------------------------------------------------

struct ImportOptions {
  std::string algorithm = "default";  // what NCCL_ALGO forced when measuring
  std::string protocol = "default";   // what NCCL_PROTO forced
  std::string gpu;                    // device name; empty: from the logs
  std::uint32_t hosts_per_nvlink_domain = 0;  // multi-node NVLink (GB200 NVL72: 18); 0: one host per domain
};

// The runs as raw measurements. Throws InputError (file, field) when a run does not say which collective it
// measured or on how many GPUs, names an unknown collective, or when `options` names an unknown algorithm or
// protocol (path "--algo"/"--proto" on "command line").
schema::RawMeasurements import_measured_runs(const std::vector<MeasuredRun>& runs, const ImportOptions& options);
// Why a run cannot be imported ("" when it can): it has no rows, does not name its collective, or measured one
// clustersim does not model (gather, scatter, hypercube, ...). import_measured_runs leaves such a test of a log of
// several out while another run is importable; the caller notes it.
std::string import_skip_reason(const MeasuredRun& run);

// Text format of raw measurements (or of a profile), deterministic, with `header` as leading `#` lines.
std::string message_text(const google::protobuf::Message& message, const std::string& header);

// ---- reading raw files ----------------------------------------------------------------------------------

struct RawInput {
  std::string path;
  std::string bytes;  // the file as read (hashed)
  std::unique_ptr<schema::RawMeasurements> raw;
  std::unique_ptr<ParsedText> parsed;  // field locations; null for binary input
  // Throws InputError(path, line:col where known, field_path, message).
  [[noreturn]] void fail(const std::string& field_path, const std::string& message) const;
};

// Binary protobuf when the name ends in .pb/.binpb/.bin or the bytes hold control characters, JSON for .json,
// else text format.
RawInput parse_raw(std::string bytes, const std::string& path);
RawInput read_raw(const std::string& path);

// ---- fit ------------------------------------------------------------------------------------------------

struct FitOptions {
  std::string base;  // built-in name or path; empty: by the raw GPU name
  std::vector<std::uint64_t> band_edges = {64ull << 10, 1ull << 20, 64ull << 20};  // inner edges, increasing
  std::string name;  // profile name; empty: "<base>-fitted"
};

struct BandFit {
  std::string op, algorithm, protocol, link;  // link "NVLINK" / "NET"
  std::uint64_t min_bytes = 0;
  std::optional<std::uint64_t> max_bytes;
  std::uint32_t ranks = 0;              // the communicator size the samples ran on
  std::uint32_t points = 0;             // samples in the band
  bool fitted = false;                  // false: skipped (see note)
  double alpha_us = 0, busbw_GBps = 0;  // busbw may be inf
  double mean_relative_error = 0, max_relative_error = 0;
  std::string note;  // why skipped, or how it was constrained
};

struct FitResult {
  std::string base_name;    // the base profile as chosen ("h100-sxm5-80gb" or a path)
  std::string base_reason;  // "--base" or "GPU NVIDIA H100 80GB HBM3 matches H100-SXM5-80GB"
  schema::HardwareProfile profile;
  std::string profile_text;  // what `fit` writes
  std::vector<BandFit> bands;
  std::size_t gemm_entries = 0, hbm_points = 0, launch_samples = 0;
  std::vector<std::string> notes;  // capped efficiencies, assumptions
  std::string raw_sha256;
};

// Fits a profile. Throws InputError for bad samples (file:line:col, field path), an unknown or unmatched
// base ("… choose one with --base: a100-sxm4-80gb, h100-sxm5-80gb"), and when nothing could be fitted.
FitResult fit_profile(const std::vector<RawInput>& raws, const FitOptions& options);

// The residual report `fit` prints: per band the samples, mean and max relative error, α and busbw.
std::string fit_report(const FitResult& result);

// The built-in profile for a device name ("NVIDIA H100 80GB HBM3" → "h100-sxm5-80gb"): a profile whose
// provenance.gpu equals it, else the one whose gpu type's first token (the chip, "H100") is a token of the
// device name and that shares the most tokens with it (case-insensitive, split at non-alphanumerics,
// "NVIDIA" ignored). nullopt when none or a tie. Built-ins fitted to one cluster (a raw_sha256 in their
// provenance, e.g. vtrain-a100) are never chosen.
std::optional<std::string> builtin_profile_for_gpu(const std::string& device_name);

// The GPU's device name in a measured run's `#` lines: "NVIDIA H100 80GB HBM3" from "# hardware: 1 node, 8x
// NVIDIA H100 80GB HBM3 (SXM, …" or "#  Rank  0 Group  0 Pid 1 on host device  0 [0000:1b:00] NVIDIA H100 80GB
// HBM3". Empty when no line names an NVIDIA device.
std::string gpu_name_from_headers(const std::vector<std::string>& lines);

// Whether a device name ("NVIDIA H100 80GB HBM3") is of the chip a GPU type names ("H100-SXM5-80GB": its first
// token, "H100"), with tokens as builtin_profile_for_gpu splits them.
bool same_chip(const std::string& device_name, const std::string& gpu_type);

// A byte count in the largest binary unit that divides it exactly: "0", "64 KiB", "1 MiB", "3000 B".
std::string size_text(std::uint64_t bytes);

}  // namespace clustersim::calibrate
