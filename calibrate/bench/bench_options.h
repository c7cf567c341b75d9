// Command line of clustersim-bench. Parsed before any CUDA call, so `--help` and usage errors work
// on machines without a GPU. Sizes accept binary suffixes as nccl-tests does (K = 2^10, M = 2^20,
// G = 2^30): "8", "64K", "1G".
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace clustersim::bench {

// A bad command line: main prints it and exits with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct BenchOptions {
  std::string out = "raw.textproto";  // ".binpb" selects binary protobuf, anything else text format
  bool gemm = false;                  // the parts; none selected on the command line means all
  bool memory = false;
  bool launch = false;
  bool nccl = false;
  bool quick = false;
  std::uint64_t min_bytes = 8;  // NCCL message sizes, doubling
  std::uint64_t max_bytes = std::uint64_t{1} << 30;
  int iters = 20;                   // timed iterations per measurement
  int warmup = 5;                   // untimed iterations before them
  std::vector<std::string> algos;   // forced NCCL_ALGO values, e.g. "ring"
  std::vector<std::string> protos;  // forced NCCL_PROTO values, e.g. "LL128"
  std::string nccl_id_file;         // multi-process: where rank 0 publishes the id
  double nccl_id_timeout_s = 600.0;
  std::uint32_t hosts_per_nvlink_domain = 0;  // 0: each host its own NVLink domain
  bool help = false;
  std::string command_line;  // argv joined, for the provenance
};

// Throws UsageError. Applies --quick's smaller defaults to every value not given explicitly.
BenchOptions parse_bench_options(int argc, const char* const* argv);

std::string bench_help_text();

// "64K" -> 65536. Throws UsageError on anything else than a positive integer with K/M/G suffix.
std::uint64_t parse_byte_size(const std::string& text);

}  // namespace clustersim::bench
