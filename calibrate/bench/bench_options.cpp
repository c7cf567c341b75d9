#include "calibrate/bench/bench_options.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace clustersim::bench {
namespace {

std::vector<std::string> split_list(const std::string& text, const std::string& flag) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (item.empty()) throw UsageError(flag + ": empty item in list \"" + text + "\"");
    items.push_back(item);
  }
  if (items.empty()) throw UsageError(flag + ": empty list");
  return items;
}

int parse_count(const std::string& text, const std::string& flag, int minimum) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value < minimum) {
    throw UsageError(flag + ": expected an integer >= " + std::to_string(minimum) + ", got \"" + text + "\"");
  }
  return value;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// NCCL's ncclAlgoStr / ncclProtoStr (src/include/nccl_common.h), as clustersim spells them.
constexpr std::array<std::string_view, 7> kNcclAlgos = {"ring",     "tree", "collnetdirect", "collnetchain", "nvls",
                                                        "nvlstree", "pat"};
constexpr std::array<std::string_view, 3> kNcclProtos = {"LL", "LL128", "Simple"};

std::string joined(const std::vector<std::string>& items, const char* separator) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

std::vector<std::string> canonical_list(const std::vector<std::string>& items, const std::string& flag,
                                        std::string (*canonical)(std::string_view), const std::string& known) {
  std::vector<std::string> result;
  for (const std::string& item : items) {
    const std::string name = canonical(item);
    // A label `calibrate fit` does not accept would spoil the whole file, so refuse it here.
    if (name.empty()) throw UsageError(flag + ": \"" + item + "\" is not one of " + known);
    result.push_back(name);
  }
  return result;
}

std::string quoted_for_shell(const std::string& arg) {
  const bool plain = !arg.empty() && arg.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos;
  if (plain) return arg;
  std::string quoted = "'";
  for (char c : arg) quoted += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

std::uint64_t parse_byte_size(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, value);
  std::string suffix = text.substr(digits);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = -1;
  if (suffix.empty() || suffix == "B") shift = 0;
  if (suffix == "K" || suffix == "KB" || suffix == "KIB") shift = 10;
  if (suffix == "M" || suffix == "MB" || suffix == "MIB") shift = 20;
  if (suffix == "G" || suffix == "GB" || suffix == "GIB") shift = 30;
  if (digits == 0 || ec != std::errc() || ptr != text.data() + digits || shift < 0 || value == 0 ||
      value > (std::uint64_t{1} << (62 - shift))) {
    throw UsageError("bad size \"" + text + "\" (expected e.g. 8, 64K, 16M, 1G)");
  }
  return value << shift;
}

bool binary_output(const std::string& path) {
  const std::string ext = lower(std::filesystem::path(path).extension().string());
  return ext == ".binpb" || ext == ".pb" || ext == ".bin";
}

std::string bench_help_text() {
  return R"(usage: clustersim-bench [options]

Measures this machine's GPUs and writes raw measurements (calibrate/raw.proto) with their
provenance; `clustersim calibrate fit raw.textproto -o profile.textproto` turns them into a
hardware profile. Without part flags every part runs.

parts:
  --gemm                cuBLAS GEMM sweep: transformer-layer and square shapes, fp16, bf16,
                        fp32 and TF32 (compute capability >= 8.0); median time, TFLOP/s
  --memory              cudaMemcpy device-to-device and a streaming copy kernel, 4 KiB..1 GiB
                        (bytes moved = 2 x size: every byte is read and written)
  --launch              empty-kernel launch overhead: back-to-back, and launch + synchronize
  --nccl                NCCL all_reduce, all_gather, reduce_scatter, broadcast, alltoall,
                        sendrecv on every GPU taking part (nccl-tests conventions)
  --quick               a small subset of every selected part (well under a minute on one GPU)

options:
  --out FILE            output, written atomically; .binpb, .pb or .bin = binary protobuf,
                        otherwise text format (default raw.textproto); not .json
  --min-bytes SIZE      smallest NCCL message (default 8)
  --max-bytes SIZE      largest NCCL message (default 1G; --quick: 64M); sizes double
  --iters N             timed iterations per measurement (default 20; --quick: 5)
  --warmup N            untimed iterations before them (default 5; --quick: 2)
  --algos LIST          NCCL_ALGO values forced one at a time (default
                        ring,tree,nvls,nvlstree,collnetdirect,collnetchain,pat; --quick: none)
  --protos LIST         NCCL_PROTO values forced one at a time (default LL,LL128,Simple;
                        --quick: none). NCCL's own choice ("default") is always measured too;
                        "default" in a list leaves that variable as the user set it (one name
                        in the environment or an NCCL conf file, or unset). Combinations NCCL
                        cannot run here are skipped with a line each at the start.
  --nccl-id-file PATH   multi-process runs: rank 0 writes the NCCL unique id here (atomically),
                        the other ranks wait for it (use a fresh path per job on a shared file
                        system)
  --nccl-id-timeout S   how long the other ranks wait for the id file (default 600 s)
  --hosts-per-nvlink-domain N
                        hosts that share one NVLink domain (multi-node NVLink: 18 per GB200
                        NVL72 rack; default: each host its own), recorded so that `fit` labels
                        runs inside one domain as NVLINK bands
  -h, --help            this text

multi-process runs (one process per GPU): rank and world size are read from
OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, SLURM_PROCID/SLURM_STEP_NUM_TASKS or RANK/WORLD_SIZE,
the local GPU from LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or SLURM_LOCALID. The
NCCL id comes from --nccl-id-file, from CLUSTERSIM_NCCL_ID (hex), or from NCCL's own
NCCL_COMM_ID=host:port. A process that sees several GPUs and no launcher drives them all
(like nccl-tests -g N).

order: one process runs GEMM, memory, launch, then NCCL; one process per GPU runs NCCL first.
Rank 0 rewrites the output after every part and NCCL combination, so a failure or SIGINT/SIGTERM
leaves everything measured so far (for a short window: timeout -s TERM 600 clustersim-bench ...).

exit status: 0 success, 1 a CUDA/cuBLAS/NCCL or I/O failure (one line naming the call) or an
interrupt by SIGINT/SIGTERM, 2 a bad command line, or an NCCL_ALGO / NCCL_PROTO set to more than
one name (use --algos / --protos instead).
)";
}

BenchOptions parse_bench_options(int argc, const char* const* argv) {
  BenchOptions options;
  bool max_bytes_set = false;
  bool iters_set = false;
  bool warmup_set = false;
  for (int i = 0; i < argc; ++i) {
    if (i > 0) options.command_line += ' ';
    options.command_line += quoted_for_shell(argv[i]);
  }
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    std::string value;
    bool has_inline_value = false;
    if (const auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_inline_value = true;
    }
    auto next_value = [&]() -> std::string {
      if (has_inline_value) return value;
      if (i + 1 >= argc) throw UsageError(flag + " needs a value");
      return argv[++i];
    };
    auto no_value = [&]() {
      if (has_inline_value) throw UsageError(flag + " takes no value");
    };
    if (flag == "-h" || flag == "--help") {
      no_value();
      options.help = true;
    } else if (flag == "--gemm") {
      no_value();
      options.gemm = true;
    } else if (flag == "--memory") {
      no_value();
      options.memory = true;
    } else if (flag == "--launch") {
      no_value();
      options.launch = true;
    } else if (flag == "--nccl") {
      no_value();
      options.nccl = true;
    } else if (flag == "--quick") {
      no_value();
      options.quick = true;
    } else if (flag == "--out" || flag == "-o") {
      options.out = next_value();
      if (options.out.empty()) throw UsageError("--out: empty file name");
      if (lower(std::filesystem::path(options.out).extension().string()) == ".json")
        throw UsageError("--out: " + options.out +
                         ": clustersim-bench writes text format (.textproto) or binary protobuf (.binpb, .pb, .bin), "
                         "not JSON");
    } else if (flag == "--min-bytes") {
      options.min_bytes = parse_byte_size(next_value());
    } else if (flag == "--max-bytes") {
      options.max_bytes = parse_byte_size(next_value());
      max_bytes_set = true;
    } else if (flag == "--iters") {
      options.iters = parse_count(next_value(), flag, 1);
      iters_set = true;
    } else if (flag == "--warmup") {
      options.warmup = parse_count(next_value(), flag, 0);
      warmup_set = true;
    } else if (flag == "--algos") {
      options.algos = canonical_list(split_list(next_value(), flag), flag, canonical_nccl_algo,
                                     "ring, tree, nvls, nvlstree, collnetdirect, collnetchain, pat, default");
    } else if (flag == "--protos") {
      options.protos =
          canonical_list(split_list(next_value(), flag), flag, canonical_nccl_proto, "LL, LL128, Simple, default");
    } else if (flag == "--nccl-id-file") {
      options.nccl_id_file = next_value();
      if (options.nccl_id_file.empty()) throw UsageError("--nccl-id-file: empty path");
    } else if (flag == "--nccl-id-timeout") {
      options.nccl_id_timeout_s = parse_count(next_value(), flag, 1);
    } else if (flag == "--hosts-per-nvlink-domain") {
      options.hosts_per_nvlink_domain = static_cast<std::uint32_t>(parse_count(next_value(), flag, 1));
    } else {
      throw UsageError("unknown argument \"" + std::string(argv[i]) + "\"");
    }
  }
  if (!options.gemm && !options.memory && !options.launch && !options.nccl) {
    options.gemm = options.memory = options.launch = options.nccl = true;
  }
  if (options.quick) {
    if (!max_bytes_set) options.max_bytes = std::uint64_t{64} << 20;
    if (!iters_set) options.iters = 5;
    if (!warmup_set) options.warmup = 2;
  } else {
    if (options.algos.empty()) {
      options.algos = {"ring", "tree", "nvls", "nvlstree", "collnetdirect", "collnetchain", "pat"};
    }
    if (options.protos.empty()) options.protos = {"LL", "LL128", "Simple"};
  }
  if (!options.algos.empty() && options.protos.empty()) options.protos = {"default"};
  if (!options.protos.empty() && options.algos.empty()) options.algos = {"default"};
  if (options.min_bytes > options.max_bytes) {
    throw UsageError("--min-bytes " + std::to_string(options.min_bytes) + " is larger than --max-bytes " +
                     std::to_string(options.max_bytes));
  }
  return options;
}

std::string canonical_nccl_algo(std::string_view name) {
  const std::string key = lower(name);
  if (key == "default") return key;
  for (std::string_view algo : kNcclAlgos) {
    if (key == algo) return key;
  }
  return {};
}

std::string canonical_nccl_proto(std::string_view name) {
  const std::string key = lower(name);
  if (key == "default") return key;
  for (std::string_view proto : kNcclProtos) {
    if (key == lower(proto)) return std::string(proto);
  }
  return {};
}

bool NcclCombination::runs(std::string_view op) const {
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

std::string SkippedCombination::describe() const {
  std::string what = "NCCL_ALGO=" + algo;
  if (!proto.empty()) what += " NCCL_PROTO=" + proto;
  return what + ": " + reason;
}

namespace {

std::string ranks_on_hosts(const NcclPlanInput& input) {
  return std::to_string(input.ranks) + " ranks on " + std::to_string(input.hosts) +
         (input.hosts == 1 ? " host" : " hosts");
}

// Why NCCL's tuning model never offers `algo` here, whatever the protocol and operation; "" if it may.
std::string algorithm_unavailable(const std::string& algo, const NcclPlanInput& input) {
  if (algo == "nvlstree" && input.hosts <= 1) return "needs more than one host (" + ranks_on_hosts(input) + ")";
  if (algo == "nvls" && input.hosts > 1 && !input.collnet_enabled) {
    return "across hosts needs CollNet (NCCL_COLLNET_ENABLE=1; " + ranks_on_hosts(input) + ")";
  }
  if (algo == "pat" && input.ranks != input.hosts) {
    return "needs one GPU per host (" + ranks_on_hosts(input) + ")";
  }
  if ((algo == "collnetdirect" || algo == "collnetchain") && !input.collnet_enabled) {
    // NCCL < 2.23 would run ring or tree instead and the samples would carry a CollNet label.
    return "needs CollNet (NCCL_COLLNET_ENABLE=1 and a CollNet network plugin)";
  }
  return {};
}

bool simple_only(const std::string& algo) {
  return algo == "nvls" || algo == "nvlstree" || algo == "collnetdirect" || algo == "collnetchain" || algo == "pat";
}

std::vector<std::string> ops_of(const std::string& algo_label, bool point_to_point) {
  std::vector<std::string_view> collectives;
  if (algo_label == "default" || algo_label == "ring") {
    collectives = {"all_reduce", "all_gather", "reduce_scatter", "broadcast"};
  } else if (algo_label == "nvls") {
    collectives = {"all_reduce", "all_gather", "reduce_scatter"};
  } else if (algo_label == "pat") {
    collectives = {"all_gather", "reduce_scatter"};
  } else {  // tree, nvlstree, collnetdirect, collnetchain
    collectives = {"all_reduce"};
  }
  std::vector<std::string> ops;
  for (std::string_view op : kNcclOpNames) {
    const bool p2p = op == "alltoall" || op == "sendrecv";
    const bool listed = std::find(collectives.begin(), collectives.end(), op) != collectives.end();
    if (p2p ? point_to_point : listed) ops.emplace_back(op);
  }
  return ops;
}

}  // namespace

NcclPlan plan_nccl_combinations(const NcclPlanInput& input) {
  std::vector<std::pair<std::string, std::string>> requested{{"default", "default"}};
  for (const std::string& algo : input.algos) {
    for (const std::string& proto : input.protos) {
      if (algo != "default" || proto != "default") requested.emplace_back(algo, proto);
    }
  }
  NcclPlan plan;
  std::set<std::string> unavailable;                      // algorithms reported once for all protocols
  std::set<std::pair<std::string, std::string>> planned;  // labels
  for (const auto& [algo, proto] : requested) {
    const std::string algo_label = algo == "default" ? input.preset_algo : algo;
    const std::string proto_label = proto == "default" ? input.preset_proto : proto;
    if (const std::string reason = algorithm_unavailable(algo_label, input); !reason.empty()) {
      if (unavailable.insert(algo_label).second) plan.skipped.push_back({algo_label, "", reason});
      continue;
    }
    if (simple_only(algo_label) && (proto_label == "LL" || proto_label == "LL128")) {
      plan.skipped.push_back({algo_label, proto_label, "runs only with NCCL_PROTO=Simple"});
      continue;
    }
    if (!planned.insert({algo_label, proto_label}).second) {
      plan.skipped.push_back(
          {algo_label, proto_label, "measured already (a pre-set NCCL_ALGO/NCCL_PROTO, or a name listed twice)"});
      continue;
    }
    plan.run.push_back({algo, proto, algo_label, proto_label, ops_of(algo_label, algo == "default")});
  }
  return plan;
}

std::vector<NcclConfEntry> parse_nccl_conf(std::string_view text) {
  constexpr std::size_t kMaxChars = 1023;  // NCCL's envVar / envValue buffers
  std::vector<NcclConfEntry> entries;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    if (!line.empty() && line.front() == '#') continue;
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    entries.push_back(
        {std::string(line.substr(0, std::min(eq, kMaxChars))), std::string(line.substr(eq + 1, kMaxChars))});
  }
  return entries;
}

std::vector<NcclConfFile> read_nccl_conf_files() {
  std::vector<std::string> paths;
  if (const char* user_file = std::getenv("NCCL_CONF_FILE"); user_file != nullptr && *user_file != '\0') {
    paths.emplace_back(user_file);
  } else if (const passwd* user = ::getpwuid(::getuid()); user != nullptr && user->pw_dir != nullptr) {
    // NCCL's userHomeDir() asks the passwd database, not $HOME.
    paths.push_back(std::string(user->pw_dir) + "/.nccl.conf");
  }
  paths.emplace_back("/etc/nccl.conf");
  std::vector<NcclConfFile> files;
  for (const std::string& path : paths) {
    std::ifstream in(path, std::ios::binary);
    if (!in) continue;
    std::stringstream text;
    text << in.rdbuf();
    files.push_back({path, text.str()});
  }
  return files;
}

NcclSetting effective_nccl_setting(const std::string& name, const std::optional<std::string>& environment_value,
                                   const std::vector<NcclConfFile>& conf_files) {
  if (environment_value) return {name, environment_value, std::string(kFromEnvironment)};
  for (const NcclConfFile& file : conf_files) {
    for (const NcclConfEntry& entry : parse_nccl_conf(file.text)) {
      if (entry.name == name) return {name, entry.value, file.path};
    }
  }
  return {name, std::nullopt, ""};
}

namespace {

std::string preset_label(const NcclSetting& setting, std::string (*canonical)(std::string_view), const char* kind,
                         const char* known, const char* flag) {
  if (!setting.value) return "default";
  const std::string name = canonical(*setting.value);
  if (!name.empty() && name != "default") return name;
  const bool from_file = setting.source != kFromEnvironment;
  throw UsageError(setting.name + "=\"" + *setting.value + "\" (set in " + setting.source +
                   (from_file ? ", which NCCL loads" : "") + ") does not name exactly one NCCL " + kind + " (" + known +
                   "), so the samples measured under it could not be labelled; unset it" +
                   (from_file ? " (remove the line, or set " + setting.name + " to one name in the environment)" : "") +
                   " and choose with " + flag);
}

}  // namespace

std::string preset_algo_label(const NcclSetting& setting) {
  return preset_label(setting, canonical_nccl_algo, "algorithm",
                      "ring, tree, collnetdirect, collnetchain, nvls, nvlstree, pat", "--algos");
}

std::string preset_proto_label(const NcclSetting& setting) {
  return preset_label(setting, canonical_nccl_proto, "protocol", "LL, LL128, Simple", "--protos");
}

std::string nccl_environment_note(const std::vector<std::string>& environment,
                                  const std::vector<NcclConfFile>& conf_files) {
  auto render = [](const std::map<std::string, std::string>& settings) {
    std::vector<std::string> items;
    for (const auto& [name, value] : settings) items.push_back(name + "=" + quoted_for_shell(value));
    return joined(items, " ");
  };
  std::set<std::string> names;  // every variable set, so that a conf file cannot override it
  std::map<std::string, std::string> from_environment;
  for (const std::string& entry : environment) {
    const std::size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = entry.substr(0, eq);
    names.insert(name);
    if (name.rfind("NCCL_", 0) == 0 || name == "CUDA_VISIBLE_DEVICES")
      from_environment.emplace(name, entry.substr(eq + 1));
  }
  std::string note;
  if (!from_environment.empty()) note += " [env: " + render(from_environment) + "]";
  for (const NcclConfFile& file : conf_files) {
    std::map<std::string, std::string> from_file;
    for (const NcclConfEntry& entry : parse_nccl_conf(file.text)) {
      if (names.insert(entry.name).second) from_file.emplace(entry.name, entry.value);
    }
    if (!from_file.empty()) note += " [" + file.path + ": " + render(from_file) + "]";
  }
  return note;
}

}  // namespace clustersim::bench
