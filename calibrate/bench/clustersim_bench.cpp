// clustersim-bench: measures the GPUs of this machine (or of a multi-node job) and writes the raw
// measurements of calibrate/raw.proto — GEMM sweep, memory bandwidth, launch overhead, NCCL
// collectives — together with their provenance (GPU, driver, CUDA, NCCL, date, hosts, command).
// It never writes a profile: `clustersim calibrate fit` does that from these facts.
// Exit status: 0 success; 1 a CUDA/cuBLAS/NCCL or I/O failure, printed as one line
// "clustersim-bench: <call> failed: <reason>"; 2 a bad command line or launcher environment.
#include <cuda_runtime_api.h>
#include <google/protobuf/stubs/common.h>
#include <google/protobuf/text_format.h>
#include <nccl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "calibrate/bench/bench_error.h"
#include "calibrate/bench/bench_options.h"
#include "calibrate/bench/gemm_bench.h"
#include "calibrate/bench/memory_bench.h"
#include "calibrate/bench/nccl_bench.h"
#include "calibrate/raw.pb.h"

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

void fill_provenance(const BenchOptions& options, const LaunchEnv& env, int device, schema::RawProvenance& provenance) {
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
  provenance.set_command(env.multi_process()
                             ? env.launcher + ", " + std::to_string(env.world) + " processes: " + options.command_line
                             : options.command_line);
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Temp file + rename, so readers never see a half-written file and a failed run leaves none.
void write_output(const std::string& path, const schema::RawMeasurements& raw) {
  std::string bytes;
  if (ends_with(path, ".binpb") || ends_with(path, ".pb")) {
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

void run(const BenchOptions& options) {
  const LaunchEnv env = detect_launch_env();
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

  schema::RawMeasurements raw;
  schema::RawProvenance& provenance = *raw.mutable_provenance();
  fill_provenance(options, env, device, provenance);
  const bool rank0 = env.rank == 0;
  if (rank0) {
    std::printf("clustersim-bench: %s (sm_%u), driver %s, CUDA runtime %s, NCCL %s, host %s\n",
                provenance.gpu().c_str(), provenance.compute_capability(), provenance.driver_version().c_str(),
                provenance.cuda_version().c_str(), provenance.nccl_version().c_str(), provenance.hostname().c_str());
  }

  // NCCL first: in a multi-process run the other ranks must not wait on rank 0's GEMMs.
  if (options.nccl) {
    if (!env.multi_process() && device_count < 2) {
      std::printf("nccl: skipped: only one GPU is visible and no launcher started other ranks\n");
    } else {
      const NcclParticipants participants = run_nccl_bench(options, env, device_count, raw);
      provenance.set_hosts(participants.hosts);
      provenance.set_gpus(participants.gpus);
      provenance.set_launch_mode(participants.launch_mode);
      CLUSTERSIM_CUDA(cudaSetDevice(device));
    }
  }
  if (!rank0) {
    std::printf("clustersim-bench: rank %d done (rank 0 measures its own GPU and writes the file)\n", env.rank);
    return;
  }
  if (options.gemm) run_gemm_bench(options, static_cast<int>(provenance.compute_capability()), raw);
  if (options.memory) run_memory_bench(options, raw);
  if (options.launch) run_launch_bench(options, raw);
  write_output(options.out, raw);
  std::printf("clustersim-bench: wrote %d gemm, %d memory, %d launch, %d collective samples to %s\n", raw.gemm_size(),
              raw.memory_size(), raw.launch_size(), raw.collectives_size(), options.out.c_str());
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
    clustersim::bench::run(options);
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
  return 0;
}
