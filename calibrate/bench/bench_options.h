// Command line of clustersim-bench. Parsed before any CUDA call, so `--help` and usage errors work
// on machines without a GPU. Sizes accept binary suffixes as nccl-tests does (K = 2^10, M = 2^20,
// G = 2^30): "8", "64K", "1G".
//
// Also the parts of the NCCL sweep that need no CUDA or NCCL header, so that the unit tests
// (tests/calibrate/test_bench_options.cpp) can call them: algorithm and protocol names, which
// (algorithm, protocol, operation) combinations NCCL can run at all, NCCL's configuration files,
// and the label of a run under a user's own NCCL_ALGO / NCCL_PROTO.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
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
  std::vector<std::string> algos;   // forced NCCL_ALGO values, canonical: "ring", ..., or "default"
  std::vector<std::string> protos;  // forced NCCL_PROTO values, canonical: "LL", "LL128", "Simple", "default"
  std::string nccl_id_file;         // multi-process: where rank 0 publishes the id
  double nccl_id_timeout_s = 600.0;
  std::uint32_t hosts_per_nvlink_domain = 0;  // 0: each host its own NVLink domain
  bool help = false;
  std::string command_line;  // argv joined, for the provenance
};

// Throws UsageError. Applies --quick's smaller defaults to every value not given explicitly.
BenchOptions parse_bench_options(int argc, const char* const* argv);

std::string bench_help_text();
// Whether --out FILE is written as binary protobuf: the extensions `clustersim calibrate fit` reads as binary,
// in any case (.binpb, .pb, .bin); anything else is text format. parse_bench_args refuses .json (no JSON writer).
bool binary_output(const std::string& path);

// "64K" -> 65536. Throws UsageError on anything else than a positive integer with K/M/G suffix.
std::uint64_t parse_byte_size(const std::string& text);

// ---------------------------------------------------------------------------------------------
// NCCL names

// The operations clustersim-bench times (nccl-tests names without "_perf"), in run order.
inline constexpr std::array<std::string_view, 6> kNcclOpNames = {"all_reduce", "all_gather", "reduce_scatter",
                                                                 "broadcast",  "alltoall",   "sendrecv"};

// NCCL_ALGO names as NCCL compares them (strcasecmp against ncclAlgoStr): "Ring", "RING" -> "ring";
// "default" -> "default"; anything else (a list, "^nvls", a typo) -> "".
std::string canonical_nccl_algo(std::string_view name);
// NCCL_PROTO names likewise: "ll" -> "LL", "ll128" -> "LL128", "simple" -> "Simple", "default"; else "".
std::string canonical_nccl_proto(std::string_view name);

// ---------------------------------------------------------------------------------------------
// Which combinations to run (NCCL 2.2x-2.30 src/graph/tuning.cc; shared/reference/nccl.md §1.6)

struct NcclPlanInput {
  std::vector<std::string> algos;  // --algos, canonical; "default" = the user's own setting
  std::vector<std::string> protos;
  std::string preset_algo = "default";  // label of the user's own NCCL_ALGO (preset_label), "default" if unset
  std::string preset_proto = "default";
  int ranks = 2;
  int hosts = 1;
  bool collnet_enabled = false;  // NCCL_COLLNET_ENABLE=1
};

struct NcclCombination {
  std::string algo;              // NCCL_ALGO to set; "default" leaves the user's own setting
  std::string proto;             // NCCL_PROTO likewise
  std::string algo_label;        // what the samples record: algo, or the user's setting for "default"
  std::string proto_label;       // likewise
  std::vector<std::string> ops;  // of kNcclOpNames, in that order

  bool runs(std::string_view op) const;
};

struct SkippedCombination {
  std::string algo;   // label
  std::string proto;  // label; "" when the reason holds for every protocol of the algorithm
  std::string reason;

  // "NCCL_ALGO=pat: needs one GPU per host (8 ranks on 1 host)"
  std::string describe() const;
};

struct NcclPlan {
  std::vector<NcclCombination> run;  // NCCL's own choice ("default" x "default") first
  std::vector<SkippedCombination> skipped;
};

// The combinations worth a communicator, and for each the operations NCCL can run under it, so
// that none is refused at enqueue time (each refusal aborts and re-creates the communicators).
// Algorithms (by label, so a pre-set NCCL_ALGO=pat is judged as pat):
//   nvls, nvlstree, collnetdirect, collnetchain, pat   Simple protocol only ("default" is fine)
//   nvlstree                                           more than one host
//   nvls                                               one host, or CollNet enabled
//   pat                                                one GPU per host (ranks == hosts)
//   collnetdirect, collnetchain                        CollNet enabled
// Operations: default all; ring all_reduce, all_gather, reduce_scatter, broadcast; tree, nvlstree,
// collnetdirect, collnetchain all_reduce; nvls all_reduce, all_gather, reduce_scatter; pat
// all_gather, reduce_scatter. alltoall and sendrecv (point to point, which NCCL_ALGO does not
// affect) only where the requested algorithm is "default". A combination whose labels repeat an
// earlier one's is skipped too.
NcclPlan plan_nccl_combinations(const NcclPlanInput& input);

// ---------------------------------------------------------------------------------------------
// NCCL's configuration files and the user's own NCCL_ALGO / NCCL_PROTO

// At its first ncclGetEnv NCCL loads $NCCL_CONF_FILE (or, when that is unset or empty, ~/.nccl.conf
// of the user's passwd entry) and then /etc/nccl.conf into the environment with setenv(name,
// value, 0): the environment wins, then the first file, and within a file the first line.
struct NcclConfFile {
  std::string path;
  std::string text;
};

struct NcclConfEntry {
  std::string name;
  std::string value;
};

// NCCL's setEnvFile (src/misc/param.cc), line by line: a line starting with '#' is skipped, as is
// one without '='; the name is everything before the first '=' and the value everything after it
// (neither trimmed; only the '\n' is dropped), each cut to 1023 characters; an empty name is
// skipped (setenv refuses it). Entries in file order, repeats included.
std::vector<NcclConfEntry> parse_nccl_conf(std::string_view text);

// The files NCCL would load, in its order, that exist and can be read.
std::vector<NcclConfFile> read_nccl_conf_files();

inline constexpr std::string_view kFromEnvironment = "the environment";

struct NcclSetting {
  std::string name;
  std::optional<std::string> value;  // nullopt: set nowhere
  std::string source;                // kFromEnvironment or the conf file's path
};

// The value NCCL will see for `name`: the environment's, else the first conf file's that sets it.
NcclSetting effective_nccl_setting(const std::string& name, const std::optional<std::string>& environment_value,
                                   const std::vector<NcclConfFile>& conf_files);

// The label the "default" combination records for the user's own NCCL_ALGO (resp. NCCL_PROTO):
// "default" when it is set nowhere, the canonical name when it names exactly one algorithm
// (protocol). Anything else - a list, a "^" exclusion, a per-operation "allreduce:tree", an
// unknown or empty name - leaves the measurement without a label `calibrate fit` accepts: a
// UsageError naming the variable, its value and where it came from.
std::string preset_algo_label(const NcclSetting& setting);
std::string preset_proto_label(const NcclSetting& setting);

// For provenance.command: " [env: NAME=value ...]" with the NCCL_* variables and
// CUDA_VISIBLE_DEVICES among `environment` (entries "NAME=value", as in environ), sorted by name,
// then " [FILE: NAME=value ...]" per conf file with the settings NCCL takes from it (names not in
// the environment nor in an earlier file). Values are quoted for a shell where needed. "" if none.
std::string nccl_environment_note(const std::vector<std::string>& environment,
                                  const std::vector<NcclConfFile>& conf_files);

}  // namespace clustersim::bench
