// clustersim-bench: measures the GPUs of this machine (or of a multi-node job) and writes the raw
// measurements of calibrate/raw.proto — GEMM sweep, memory bandwidth, launch overhead, NCCL
// collectives — together with their provenance (GPU, driver, CUDA, NCCL, date, hosts, command).
// It never writes a profile: `clustersim calibrate fit` does that from these facts.
//
// Order: with one process, the single-GPU parts (GEMM, memory, launch) first and NCCL last, so
// that the quick, robust parts are safe on disk before the long NCCL sweep; with one process per
// GPU, NCCL first, so that no rank waits on rank 0's GEMMs. Rank 0 writes the output file
// (atomically) after every part and every NCCL combination, so a failure or a signal later leaves
// a complete file of everything measured so far.
//
// Exit status: 0 success; 1 a CUDA/cuBLAS/NCCL or I/O failure, printed as one line
// "clustersim-bench: <call> failed: <reason>" (followed by "; the measurements so far are in FILE"
// once a checkpoint has written it), or SIGINT/SIGTERM (interrupt.h); 2 a bad command line,
// launcher environment or pre-set NCCL_ALGO / NCCL_PROTO.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <google/protobuf/stubs/common.h>
#include <google/protobuf/text_format.h>
#include <nccl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "calibrate/bench/bench_error.h"
#include "calibrate/bench/bench_options.h"
#include "calibrate/bench/gemm_bench.h"
#include "calibrate/bench/interrupt.h"
#include "calibrate/bench/memory_bench.h"
#include "calibrate/bench/nccl_bench.h"
#include "calibrate/raw.pb.h"

extern char** environ;  // POSIX; <unistd.h> declares it only with _GNU_SOURCE

namespace clustersim::bench {
namespace {

std::string version_string(int code) {  // CUDA's 1000·major + 10·minor
  return std::to_string(code / 1000) + "." + std::to_string((code % 1000) / 10);
}

std::string nccl_version_string(int code) {  // 10000·major + 100·minor + patch since NCCL 2.9
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? (code % 10000) / 100 : (code % 1000) / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

// The kernel driver's version ("550.54.15") from /proc, which the CUDA API does not report; the
// CUDA driver API version is appended.
std::string driver_version() {
  int api = 0;
  CLUSTERSIM_CUDA(cudaDriverGetVersion(&api));
  const std::string cuda = "CUDA " + version_string(api);
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (in && std::getline(in, line)) {
    static const std::regex kVersion(R"(Module.*?\s([0-9]+\.[0-9]+(\.[0-9]+)?)\s)");
    std::smatch match;
    if (std::regex_search(line, match, kVersion)) return match[1].str() + ", " + cuda;
  }
  return cuda;
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

// `environment_note`: nccl_environment_note() of the environment at startup and NCCL's conf files.
void fill_provenance(const BenchOptions& options, const LaunchEnv& env, int device, const std::string& environment_note,
                     schema::RawProvenance& provenance) {
  cudaDeviceProp properties{};
  CLUSTERSIM_CUDA(cudaGetDeviceProperties(&properties, device));
  int runtime = 0;
  CLUSTERSIM_CUDA(cudaRuntimeGetVersion(&runtime));
  int nccl = 0;
  CLUSTERSIM_NCCL(ncclGetVersion(&nccl));
  provenance.set_gpu(properties.name);
  provenance.set_compute_capability(static_cast<std::uint32_t>(10 * properties.major + properties.minor));
  provenance.set_driver_version(driver_version());
  provenance.set_cuda_version(version_string(runtime));
  provenance.set_nccl_version(nccl_version_string(nccl));
  provenance.set_date(utc_now());
  provenance.set_hostname(host_name());
  provenance.set_hosts_per_nvlink_domain(options.hosts_per_nvlink_domain);
  provenance.set_hosts(1);
  provenance.set_gpus(1);
  provenance.set_launch_mode("one process, 1 GPU");
  provenance.set_command((env.multi_process()
                              ? env.launcher + ", " + std::to_string(env.world) + " processes: " + options.command_line
                              : options.command_line) +
                         environment_note);
}

// Temp file + rename, so readers never see a half-written file, and a failure while writing a
// checkpoint leaves the previous one intact.
void write_output(const std::string& path, const schema::RawMeasurements& raw) {
  std::string bytes;
  if (binary_output(path)) {
    if (!raw.SerializeToString(&bytes)) throw BenchError("SerializeToString", "protobuf could not serialise");
  } else {
    std::string text;
    if (!google::protobuf::TextFormat::PrintToString(raw, &text)) {
      throw BenchError("TextFormat::PrintToString", "protobuf could not print");
    }
    bytes =
        "# proto-file: calibrate/raw.proto\n"
        "# proto-message: clustersim.schema.RawMeasurements\n"
        "# Raw measurements from clustersim-bench; fit with: clustersim calibrate fit " +
        path + "\n" + text;
  }
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) throw BenchError("writing " + temp, std::strerror(errno));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temp.c_str());
    throw BenchError("renaming " + temp + " to " + path, reason);
  }
}

// Fails in seconds, not after minutes of measuring, when the output cannot be written: creates
// and removes the temporary file write_output will use.
void check_writable(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) throw BenchError("--out " + path, "is a directory");
  const std::string probe = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    throw BenchError("creating " + probe + " (to check that --out " + path + " can be written)", std::strerror(errno));
  }
  ::close(fd);
  if (std::remove(probe.c_str()) != 0) throw BenchError("removing " + probe, std::strerror(errno));
}

std::vector<std::string> environment_entries() {
  std::vector<std::string> entries;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) entries.emplace_back(*entry);
  return entries;
}

std::optional<std::string> environment_value(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::nullopt : std::optional<std::string>(value);
}

// The user's NCCL_ALGO / NCCL_PROTO / NCCL_COLLNET_ENABLE as NCCL will see them. Must run before
// any NCCL call: NCCL loads its conf files into the environment at its first ncclGetEnv, and a
// value from there is set explicitly here, so that the "default" combination runs under it after
// forced ones (NcclEnvironment restores the environment, and NCCL never reloads the files).
// Throws UsageError for a value that names no single algorithm / protocol.
NcclPresets resolve_nccl_presets(const std::vector<NcclConfFile>& conf_files, bool report) {
  const NcclSetting algo = effective_nccl_setting("NCCL_ALGO", environment_value("NCCL_ALGO"), conf_files);
  const NcclSetting proto = effective_nccl_setting("NCCL_PROTO", environment_value("NCCL_PROTO"), conf_files);
  NcclPresets presets;
  presets.algo = preset_algo_label(algo);
  presets.proto = preset_proto_label(proto);
  for (const NcclSetting* setting : {&algo, &proto}) {
    if (setting->value && setting->source != kFromEnvironment) {
      ::setenv(setting->name.c_str(), setting->value->c_str(), 1);
      if (report) {
        std::printf("nccl: %s=%s from %s\n", setting->name.c_str(), setting->value->c_str(), setting->source.c_str());
      }
    }
  }
  const NcclSetting collnet =
      effective_nccl_setting("NCCL_COLLNET_ENABLE", environment_value("NCCL_COLLNET_ENABLE"), conf_files);
  // NCCL reads the value with strtoll and enables CollNet for 1.
  if (collnet.value) {
    char* end = nullptr;
    const long long value = std::strtoll(collnet.value->c_str(), &end, 0);
    presets.collnet_enabled = end != collnet.value->c_str() && value == 1;
  }
  return presets;
}

int sample_count(const schema::RawMeasurements& raw) {
  return raw.gemm_size() + raw.memory_size() + raw.launch_size() + raw.collectives_size();
}

// The parts in the order of the header comment; `checkpoint` after each (and inside NCCL after
// each combination).
void measure(const BenchOptions& options, const LaunchEnv& env, int device, bool nccl, const NcclPresets& presets,
             int device_count, schema::RawMeasurements& raw, const std::function<void()>& checkpoint) {
  auto nccl_part = [&]() {
    run_nccl_bench(options, env, device_count, presets, raw, checkpoint);
    CLUSTERSIM_CUDA(cudaSetDevice(device));
  };
  if (nccl && env.multi_process()) nccl_part();
  if (env.rank != 0) {
    std::printf("clustersim-bench: rank %d done (rank 0 measures its own GPU and writes the file)\n", env.rank);
    return;
  }
  const auto compute_capability = static_cast<int>(raw.provenance().compute_capability());
  if (options.gemm) {
    run_gemm_bench(options, compute_capability, raw);
    checkpoint();
  }
  if (options.memory) {
    run_memory_bench(options, raw);
    checkpoint();
  }
  if (options.launch) {
    run_launch_bench(options, raw);
    checkpoint();
  }
  if (nccl && !env.multi_process()) nccl_part();
}

// Returns the exit status; throws UsageError (status 2) and, for failures, std::exception (1).
int run(const BenchOptions& options) {
  install_interrupt_handlers();
  const std::vector<std::string> startup_environment = environment_entries();  // before any setenv
  const LaunchEnv env = detect_launch_env();
  const bool rank0 = env.rank == 0;
  if (rank0) check_writable(options.out);
  int device_count = 0;
  const cudaError_t status = cudaGetDeviceCount(&device_count);
  if (status != cudaSuccess || device_count == 0) {
    const std::string detail = status != cudaSuccess
                                   ? std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status)
                                   : std::string("the driver reports 0 devices");
    throw BenchError("cudaGetDeviceCount", "no CUDA device (" + detail + ")");
  }
  const int local = env.local_rank_known ? env.local_rank : env.rank;
  const int device = env.multi_process() ? local % device_count : 0;
  CLUSTERSIM_CUDA(cudaSetDevice(device));

  const bool nccl = options.nccl && (env.multi_process() || device_count >= 2);
  std::vector<NcclConfFile> conf_files;
  NcclPresets presets;
  if (nccl) {
    conf_files = read_nccl_conf_files();
    presets = resolve_nccl_presets(conf_files, rank0);
  }

  schema::RawMeasurements raw;
  schema::RawProvenance& provenance = *raw.mutable_provenance();
  fill_provenance(options, env, device, nccl_environment_note(startup_environment, conf_files), provenance);
  if (rank0) {
    std::printf("clustersim-bench: %s (sm_%u), driver %s, CUDA runtime %s, NCCL %s, host %s\n",
                provenance.gpu().c_str(), provenance.compute_capability(), provenance.driver_version().c_str(),
                provenance.cuda_version().c_str(), provenance.nccl_version().c_str(), provenance.hostname().c_str());
    if (options.nccl && !nccl) {
      std::printf("nccl: skipped: only one GPU is visible and no launcher started other ranks\n");
    }
    std::fflush(stdout);
  }

  bool written = false;  // rank 0 has written the file at least once
  auto checkpoint = [&]() {
    if (!rank0) return;
    write_output(options.out, raw);
    written = true;
  };
  try {
    measure(options, env, device, nccl, presets, device_count, raw, checkpoint);
  } catch (const Interrupted&) {
    if (rank0) {
      write_output(options.out, raw);
      std::fprintf(stderr, "clustersim-bench: interrupted by signal %d; wrote the %d samples measured so far to %s\n",
                   interrupt_signal(), sample_count(raw), options.out.c_str());
    } else {
      std::fprintf(stderr, "clustersim-bench: rank %d interrupted by signal %d\n", env.rank, interrupt_signal());
    }
    return 1;
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    // Samples recorded since the last checkpoint are complete measurements too: keep them. A
    // failure to write them must not hide the error that ended the run.
    if (rank0 && sample_count(raw) > 0) {
      try {
        write_output(options.out, raw);
        written = true;
      } catch (const std::exception&) {
      }
    }
    if (!written) throw;
    throw std::runtime_error(std::string(e.what()) + "; the measurements so far are in " + options.out);
  }
  if (rank0) {
    write_output(options.out, raw);
    std::printf("clustersim-bench: wrote %d gemm, %d memory, %d launch, %d collective samples to %s\n", raw.gemm_size(),
                raw.memory_size(), raw.launch_size(), raw.collectives_size(), options.out.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace clustersim::bench

int main(int argc, char** argv) {
  GOOGLE_PROTOBUF_VERIFY_VERSION;
  using clustersim::bench::BenchError;
  using clustersim::bench::UsageError;
  clustersim::bench::BenchOptions options;
  try {
    options = clustersim::bench::parse_bench_options(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "clustersim-bench: %s (see --help)\n", e.what());
    return 2;
  }
  if (options.help) {
    std::fputs(clustersim::bench::bench_help_text().c_str(), stdout);
    return 0;
  }
  try {
    return clustersim::bench::run(options);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "clustersim-bench: %s\n", e.what());
    return 2;
  } catch (const BenchError& e) {
    std::fprintf(stderr, "clustersim-bench: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "clustersim-bench: %s\n", e.what());
    return 1;
  }
}
