#include "calibrate/bench/bench_options.h"

#include <cctype>
#include <charconv>
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
  --out FILE            output, written atomically; .binpb = binary protobuf, otherwise
                        text format (default raw.textproto)
  --min-bytes SIZE      smallest NCCL message (default 8)
  --max-bytes SIZE      largest NCCL message (default 1G; --quick: 64M); sizes double
  --iters N             timed iterations per measurement (default 20; --quick: 5)
  --warmup N            untimed iterations before them (default 5; --quick: 2)
  --algos LIST          NCCL_ALGO values forced one at a time (default
                        ring,tree,nvls,nvlstree,collnetdirect,collnetchain,pat; --quick: none)
  --protos LIST         NCCL_PROTO values forced one at a time (default LL,LL128,Simple;
                        --quick: none). NCCL's own choice ("default") is always measured too;
                        "default" in a list leaves that variable unset.
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

exit status: 0 success, 1 a CUDA/cuBLAS/NCCL or I/O failure (one line naming the call),
2 a bad command line.
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
      options.algos = split_list(next_value(), flag);
    } else if (flag == "--protos") {
      options.protos = split_list(next_value(), flag);
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

}  // namespace clustersim::bench
