#include "calibrate/bench/nccl_bench.h"

#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "calibrate/bench/bench_error.h"
#include "calibrate/bench/cuda_resources.h"
#include "calibrate/bench/interrupt.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error "clustersim-bench needs NCCL >= 2.18 (ncclCommSplit, ncclGetLastError)"
#endif

namespace clustersim::bench {
namespace {

constexpr double kUsableMemoryFraction = 0.8;  // of free memory, for the send + receive buffers
constexpr std::size_t kHostnameBytes = 64;     // per rank in the hostname all-gather
constexpr std::size_t kElementBytes = sizeof(float);

// ---------------------------------------------------------------------------------------------
// Launcher environment

std::optional<int> env_int(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  int value = 0;
  const char* end = text + std::strlen(text);
  auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || ptr != end || value < 0) {
    throw UsageError(std::string("environment variable ") + name + "=\"" + text + "\" is not a non-negative integer");
  }
  return value;
}

// ---------------------------------------------------------------------------------------------
// Operations

enum class Op { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kAlltoAll, kSendRecv };

struct OpInfo {
  Op op;
  const char* name;  // nccl-tests test name without "_perf", as in kNcclOpNames
  bool point_to_point;
};

// Names from kNcclOpNames (one spelling for the plan and the sweep; string literals, so null-terminated).
constexpr OpInfo kOps[] = {
    {Op::kAllReduce, kNcclOpNames[0].data(), false},
    {Op::kAllGather, kNcclOpNames[1].data(), false},
    {Op::kReduceScatter, kNcclOpNames[2].data(), false},
    {Op::kBroadcast, kNcclOpNames[3].data(), false},
    {Op::kAlltoAll, kNcclOpNames[4].data(), true},
    {Op::kSendRecv, kNcclOpNames[5].data(), true},
};

struct OpSize {
  std::uint64_t count = 0;  // the nccl-tests "count" column (per rank / per peer, see header)
  std::uint64_t size = 0;   // the nccl-tests "size" column, bytes
  double busbw_factor = 1.0;
};

OpSize op_size(Op op, std::uint64_t requested_bytes, int ranks) {
  const std::uint64_t elements = requested_bytes / kElementBytes;
  const auto n = static_cast<std::uint64_t>(ranks);
  const double ring_factor = static_cast<double>(ranks - 1) / ranks;
  // nccl-tests rounds per-rank counts down to whole 16-byte units (4 floats).
  const std::uint64_t per_rank = (elements / n) & ~std::uint64_t{3};
  switch (op) {
    case Op::kAllReduce:
      return {elements, elements * kElementBytes, 2.0 * ring_factor};
    case Op::kBroadcast:
    case Op::kSendRecv:
      return {elements, elements * kElementBytes, 1.0};
    case Op::kAllGather:
    case Op::kReduceScatter:
    case Op::kAlltoAll:
      return {per_rank, per_rank * n * kElementBytes, ring_factor};
  }
  return {};
}

// One GPU driven by this process, with its buffers and the communicator under test.
struct LocalGpu {
  int device = 0;
  int rank = 0;
  std::unique_ptr<CudaStream> stream;
  DeviceBuffer send;
  DeviceBuffer recv;
  DeviceBuffer scratch;  // barrier and rank-reduction values
  ncclComm_t comm = nullptr;
};

char* byte_offset(const DeviceBuffer& buffer, std::uint64_t bytes) {
  return static_cast<char*>(buffer.get()) + bytes;
}

// Enqueues one operation for one GPU. Returns NCCL's status (rejections are not exceptions).
ncclResult_t enqueue(Op op, const LocalGpu& gpu, std::uint64_t count, int ranks) {
  const void* send = gpu.send.get();
  void* recv = gpu.recv.get();
  cudaStream_t stream = gpu.stream->get();
  switch (op) {
    case Op::kAllReduce:
      return ncclAllReduce(send, recv, count, ncclFloat, ncclSum, gpu.comm, stream);
    case Op::kAllGather:
      return ncclAllGather(send, recv, count, ncclFloat, gpu.comm, stream);
    case Op::kReduceScatter:
      return ncclReduceScatter(send, recv, count, ncclFloat, ncclSum, gpu.comm, stream);
    case Op::kBroadcast:
      return ncclBroadcast(send, recv, count, ncclFloat, 0, gpu.comm, stream);
    case Op::kAlltoAll: {
      ncclResult_t status = ncclGroupStart();
      for (int peer = 0; peer < ranks && status == ncclSuccess; ++peer) {
        const std::uint64_t offset = static_cast<std::uint64_t>(peer) * count * kElementBytes;
        status = ncclSend(byte_offset(gpu.send, offset), count, ncclFloat, peer, gpu.comm, stream);
        if (status == ncclSuccess) {
          status = ncclRecv(byte_offset(gpu.recv, offset), count, ncclFloat, peer, gpu.comm, stream);
        }
      }
      const ncclResult_t end = ncclGroupEnd();
      return status != ncclSuccess ? status : end;
    }
    case Op::kSendRecv: {
      ncclResult_t status = ncclGroupStart();
      if (status == ncclSuccess) {
        status = ncclSend(send, count, ncclFloat, (gpu.rank + 1) % ranks, gpu.comm, stream);
      }
      if (status == ncclSuccess) {
        status = ncclRecv(recv, count, ncclFloat, (gpu.rank + ranks - 1) % ranks, gpu.comm, stream);
      }
      const ncclResult_t end = ncclGroupEnd();
      return status != ncclSuccess ? status : end;
    }
  }
  return ncclInvalidArgument;
}

// One iteration: the operation on every local GPU, in one group when there are several.
ncclResult_t enqueue_all(Op op, const std::vector<std::unique_ptr<LocalGpu>>& gpus, std::uint64_t count, int ranks) {
  ncclResult_t status = ncclGroupStart();
  for (const auto& gpu : gpus) {
    if (status != ncclSuccess) break;
    status = enqueue(op, *gpu, count, ranks);
  }
  const ncclResult_t end = ncclGroupEnd();
  return status != ncclSuccess ? status : end;
}

// Waits for every local stream, watching for asynchronous NCCL errors (a failed peer must end the
// run with a message, not hang it), as nccl-tests does, and for SIGINT/SIGTERM (Interrupted; the
// caller's communicators are then aborted, which also ends a collective that would never finish).
ncclResult_t wait_all(const std::vector<std::unique_ptr<LocalGpu>>& gpus) {
  for (const auto& gpu : gpus) {
    while (true) {
      const cudaError_t state = cudaStreamQuery(gpu->stream->get());
      if (state == cudaSuccess) break;
      if (state != cudaErrorNotReady) check_cuda(state, "cudaStreamQuery");
      ncclResult_t async_status = ncclSuccess;
      CLUSTERSIM_NCCL(ncclCommGetAsyncError(gpu->comm, &async_status));
      if (async_status != ncclSuccess) return async_status;
      throw_if_interrupted();
      std::this_thread::yield();
    }
  }
  return ncclSuccess;
}

void destroy_comms(std::vector<std::unique_ptr<LocalGpu>>& gpus, bool abort) {
  if (abort) {
    for (auto& gpu : gpus) {
      if (gpu->comm != nullptr) ncclCommAbort(gpu->comm);
      gpu->comm = nullptr;
    }
    return;
  }
  // Several communicators driven by one thread finalise together (NCCL's documented pattern).
  CLUSTERSIM_NCCL(ncclGroupStart());
  for (auto& gpu : gpus) {
    if (gpu->comm != nullptr) CLUSTERSIM_NCCL(ncclCommFinalize(gpu->comm));
  }
  CLUSTERSIM_NCCL(ncclGroupEnd());
  for (auto& gpu : gpus) {
    if (gpu->comm != nullptr) CLUSTERSIM_NCCL(ncclCommDestroy(gpu->comm));
    gpu->comm = nullptr;
  }
}

// ---------------------------------------------------------------------------------------------
// The NCCL unique id of a multi-process run

std::string to_hex(const ncclUniqueId& id) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (char c : id.internal) {
    const auto byte = static_cast<unsigned char>(c);
    hex += kDigits[byte >> 4];
    hex += kDigits[byte & 0xf];
  }
  return hex;
}

std::optional<ncclUniqueId> from_hex(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  ncclUniqueId id{};
  if (text.size() != 2 * sizeof(id.internal)) return std::nullopt;
  for (std::size_t i = 0; i < sizeof(id.internal); ++i) {
    unsigned int byte = 0;
    auto [ptr, ec] = std::from_chars(text.data() + 2 * i, text.data() + 2 * i + 2, byte, 16);
    if (ec != std::errc() || ptr != text.data() + 2 * i + 2) return std::nullopt;
    id.internal[i] = static_cast<char>(byte);
  }
  return id;
}

void write_id_file(const std::string& path, const ncclUniqueId& id) {
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::trunc);
    out << to_hex(id) << '\n';
    out.close();
    if (!out) throw BenchError("writing NCCL id file " + temp, std::strerror(errno));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temp.c_str());
    throw BenchError("renaming " + temp + " to " + path, reason);
  }
}

ncclUniqueId read_id_file(const std::string& path, double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  while (true) {
    std::ifstream in(path);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      if (auto id = from_hex(text.str())) return *id;
      // Rank 0 renames a complete file into place, so a malformed one is not a partial write.
      throw BenchError("reading NCCL id file " + path,
                       "not " + std::to_string(2 * sizeof(ncclUniqueId)) + " hex digits");
    }
    if (Clock::now() > deadline) {
      throw BenchError("waiting for NCCL id file " + path,
                       "rank 0 did not write it within " + std::to_string(static_cast<int>(timeout_s)) +
                           " s (is rank 0 running, with the same --nccl-id-file on a shared file system?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

ncclUniqueId obtain_unique_id(const BenchOptions& options, const LaunchEnv& env) {
  ncclUniqueId id{};
  if (!options.nccl_id_file.empty()) {
    if (env.rank == 0) {
      CLUSTERSIM_NCCL(ncclGetUniqueId(&id));
      write_id_file(options.nccl_id_file, id);
      return id;
    }
    return read_id_file(options.nccl_id_file, options.nccl_id_timeout_s);
  }
  if (const char* hex = std::getenv("CLUSTERSIM_NCCL_ID"); hex != nullptr && *hex != '\0') {
    if (auto parsed = from_hex(hex)) return *parsed;
    throw UsageError("CLUSTERSIM_NCCL_ID must be " + std::to_string(2 * sizeof(ncclUniqueId)) +
                     " hex digits (an ncclUniqueId)");
  }
  if (const char* comm_id = std::getenv("NCCL_COMM_ID"); comm_id != nullptr && *comm_id != '\0') {
    // With NCCL_COMM_ID=host:port every rank derives the same id; rank 0 listens there at init.
    CLUSTERSIM_NCCL(ncclGetUniqueId(&id));
    return id;
  }
  throw UsageError("a run with " + std::to_string(env.world) + " processes (" + env.launcher +
                   ") needs --nccl-id-file PATH, CLUSTERSIM_NCCL_ID or NCCL_COMM_ID=host:port to share "
                   "the NCCL id");
}

// ---------------------------------------------------------------------------------------------
// Forced algorithm / protocol

// Sets NCCL_ALGO / NCCL_PROTO for one combination and restores the user's values afterwards. The
// user's values were made explicit before any NCCL call (a conf file's included, see
// clustersim_bench.cpp), so "default" restores exactly what the "default" label stands for.
class NcclEnvironment {
 public:
  NcclEnvironment() : algo_(saved("NCCL_ALGO")), proto_(saved("NCCL_PROTO")) {}
  NcclEnvironment(const NcclEnvironment&) = delete;
  NcclEnvironment& operator=(const NcclEnvironment&) = delete;
  ~NcclEnvironment() {
    restore("NCCL_ALGO", algo_);
    restore("NCCL_PROTO", proto_);
  }

  void apply(const NcclCombination& combination) const {
    set("NCCL_ALGO", combination.algo, algo_);
    set("NCCL_PROTO", combination.proto, proto_);
  }

 private:
  static std::optional<std::string> saved(const char* name) {
    const char* value = std::getenv(name);
    return value == nullptr ? std::nullopt : std::optional<std::string>(value);
  }
  static void restore(const char* name, const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  static void set(const char* name, const std::string& forced, const std::optional<std::string>& original) {
    if (forced == "default") {
      restore(name, original);
    } else {
      ::setenv(name, forced.c_str(), 1);  // NCCL compares names case-insensitively
    }
  }

  std::optional<std::string> algo_;
  std::optional<std::string> proto_;
};

// ---------------------------------------------------------------------------------------------
// The run

class NcclBench {
 public:
  NcclBench(const BenchOptions& options, const LaunchEnv& env, int device_count, const NcclPresets& presets)
      : options_(options), env_(env), presets_(presets) {
    const int local_gpus = env.multi_process() ? 1 : device_count;
    ranks_ = env.multi_process() ? env.world : device_count;
    int current = 0;
    CLUSTERSIM_CUDA(cudaGetDevice(&current));
    for (int i = 0; i < local_gpus; ++i) {
      auto gpu = std::make_unique<LocalGpu>();
      gpu->device = env.multi_process() ? current : i;
      gpu->rank = env.multi_process() ? env.rank : i;
      gpus_.push_back(std::move(gpu));
    }
  }
  NcclBench(const NcclBench&) = delete;
  NcclBench& operator=(const NcclBench&) = delete;
  ~NcclBench() {
    for (auto& gpu : gpus_) {
      if (gpu->comm != nullptr) ncclCommAbort(gpu->comm);
    }
    if (base_comm_ != nullptr) {
      // Unwinding from a failure or an interrupt, a peer may be gone or inside a collective that
      // never ends, and ncclCommDestroy could wait for it forever; ncclCommAbort does not wait.
      if (std::uncaught_exceptions() > 0) {
        ncclCommAbort(base_comm_);
      } else {
        ncclCommDestroy(base_comm_);
      }
    }
  }

  NcclParticipants run(schema::RawMeasurements& raw, const std::function<void()>& checkpoint) {
    NcclParticipants participants;
    participants.gpus = static_cast<std::uint32_t>(ranks_);
    participants.launch_mode =
        env_.multi_process() ? "one process per GPU" : "one process, " + std::to_string(ranks_) + " GPUs";
    if (env_.multi_process()) init_base_comm();
    allocate_buffers();
    if (env_.multi_process()) participants.hosts = count_hosts();
    hosts_ = participants.hosts;
    // Before the first checkpoint, so that every file written says who took part.
    schema::RawProvenance& provenance = *raw.mutable_provenance();
    provenance.set_hosts(participants.hosts);
    provenance.set_gpus(participants.gpus);
    provenance.set_launch_mode(participants.launch_mode);
    NcclPlanInput plan_input;
    plan_input.algos = options_.algos;
    plan_input.protos = options_.protos;
    plan_input.preset_algo = presets_.algo;
    plan_input.preset_proto = presets_.proto;
    plan_input.ranks = ranks_;
    plan_input.hosts = static_cast<int>(hosts_);
    plan_input.collnet_enabled = presets_.collnet_enabled;
    const NcclPlan plan = plan_nccl_combinations(plan_input);
    if (env_.multi_process()) check_same_plan(plan);
    if (is_rank0()) {
      std::printf(
          "nccl: %d ranks on %u host(s), %s; sizes %llu..%llu B; %d iterations after %d warmup; "
          "time = max over ranks; %zu combination(s) of NCCL_ALGO x NCCL_PROTO\n",
          ranks_, hosts_, participants.launch_mode.c_str(), static_cast<unsigned long long>(options_.min_bytes),
          static_cast<unsigned long long>(max_bytes_), options_.iters, options_.warmup, plan.run.size());
      for (const SkippedCombination& skipped : plan.skipped) {
        std::printf("nccl: skipping %s\n", skipped.describe().c_str());
      }
      std::fflush(stdout);
    }
    NcclEnvironment environment;
    for (const NcclCombination& combination : plan.run) {
      throw_if_interrupted();
      run_combination(combination, environment, raw);
      checkpoint();
    }
    return participants;
  }

 private:
  bool is_rank0() const { return env_.rank == 0; }

  void use_device(const LocalGpu& gpu) const { CLUSTERSIM_CUDA(cudaSetDevice(gpu.device)); }

  void init_base_comm() {
    const ncclUniqueId id = obtain_unique_id(options_, env_);
    CLUSTERSIM_NCCL(ncclCommInitRank(&base_comm_, env_.world, id, env_.rank));
    // Every rank has read the id file by now (init needs all of them): remove it, so that a
    // later job that reuses the path cannot pick up this stale id.
    if (is_rank0() && !options_.nccl_id_file.empty()) std::remove(options_.nccl_id_file.c_str());
  }

  // Buffers of max_bytes for send and receive, capped (identically on every rank) to what fits.
  void allocate_buffers() {
    double fit = static_cast<double>(options_.max_bytes);
    for (const auto& gpu : gpus_) {
      use_device(*gpu);
      std::size_t free_bytes = 0;
      std::size_t total_bytes = 0;
      CLUSTERSIM_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
      fit = std::min(fit, kUsableMemoryFraction * static_cast<double>(free_bytes) / 2.0);
    }
    for (auto& gpu : gpus_) {
      use_device(*gpu);
      gpu->stream = std::make_unique<CudaStream>();
      gpu->scratch = DeviceBuffer(kHostnameBytes * static_cast<std::size_t>(ranks_) + 64);
    }
    if (env_.multi_process()) fit = reduce_over_ranks(fit, ncclMin);
    max_bytes_ = options_.max_bytes;
    while (static_cast<double>(max_bytes_) > fit && max_bytes_ > options_.min_bytes) max_bytes_ /= 2;
    if (max_bytes_ != options_.max_bytes && is_rank0()) {
      std::printf("nccl: largest size lowered to %llu B to fit in free GPU memory\n",
                  static_cast<unsigned long long>(max_bytes_));
    }
    for (auto& gpu : gpus_) {
      use_device(*gpu);
      gpu->send = DeviceBuffer(max_bytes_);
      gpu->recv = DeviceBuffer(max_bytes_);
      CLUSTERSIM_CUDA(cudaMemsetAsync(gpu->send.get(), 0, max_bytes_, gpu->stream->get()));
      CLUSTERSIM_CUDA(cudaMemsetAsync(gpu->recv.get(), 0, max_bytes_, gpu->stream->get()));
      CLUSTERSIM_CUDA(cudaStreamSynchronize(gpu->stream->get()));
    }
  }

  // Waits for the bootstrap communicator's operation on this rank's stream as wait_all does: a
  // failed peer ends the run with a BenchError, SIGINT/SIGTERM with Interrupted, neither hangs it.
  // Called before copying the result to (pageable) host memory, a copy that would block in the
  // CUDA call itself until the collective finished.
  void wait_base(const LocalGpu& gpu, const char* call) const {
    while (true) {
      const cudaError_t state = cudaStreamQuery(gpu.stream->get());
      if (state == cudaSuccess) return;
      if (state != cudaErrorNotReady) check_cuda(state, "cudaStreamQuery");
      ncclResult_t async_status = ncclSuccess;
      CLUSTERSIM_NCCL(ncclCommGetAsyncError(base_comm_, &async_status));
      if (async_status != ncclSuccess) throw BenchError(call, nccl_reason(async_status));
      throw_if_interrupted();
      std::this_thread::yield();
    }
  }

  // Multi-process only. Every rank plans from its own environment and NCCL conf files; ranks that
  // disagree (say, an /etc/nccl.conf on some hosts only) would create communicators for different
  // combinations and wait for each other forever.
  void check_same_plan(const NcclPlan& plan) {
    std::string text;
    for (const NcclCombination& combination : plan.run) {
      text += combination.algo + "/" + combination.proto + "/" + combination.algo_label + "/" +
              combination.proto_label + ":";
      for (const std::string& op : combination.ops) text += op + ",";
      text += ";";
    }
    // 52 bits of the hash, which a double holds exactly; the same binary hashes alike on every rank.
    const auto fingerprint = static_cast<double>(std::hash<std::string>{}(text) & ((std::uint64_t{1} << 52) - 1));
    const double lowest = reduce_over_ranks(fingerprint, ncclMin);
    const double highest = reduce_over_ranks(fingerprint, ncclMax);
    if (lowest != highest) {
      throw BenchError("agreeing on the NCCL combinations",
                       "the ranks differ in NCCL_ALGO, NCCL_PROTO or NCCL_COLLNET_ENABLE (in the environment or "
                       "NCCL's conf files); give every rank the same settings");
    }
  }

  // Multi-process only: an all-reduce of one value over the bootstrap communicator (which runs
  // with the user's own NCCL settings, so forced combinations cannot break it).
  double reduce_over_ranks(double value, ncclRedOp_t op) {
    const LocalGpu& gpu = *gpus_.front();
    CLUSTERSIM_CUDA(
        cudaMemcpyAsync(gpu.scratch.get(), &value, sizeof value, cudaMemcpyHostToDevice, gpu.stream->get()));
    CLUSTERSIM_NCCL(
        ncclAllReduce(gpu.scratch.get(), gpu.scratch.get(), 1, ncclFloat64, op, base_comm_, gpu.stream->get()));
    wait_base(gpu, "ncclAllReduce (bootstrap communicator)");
    CLUSTERSIM_CUDA(
        cudaMemcpyAsync(&value, gpu.scratch.get(), sizeof value, cudaMemcpyDeviceToHost, gpu.stream->get()));
    CLUSTERSIM_CUDA(cudaStreamSynchronize(gpu.stream->get()));
    return value;
  }

  std::uint32_t count_hosts() {
    const LocalGpu& gpu = *gpus_.front();
    std::vector<char> names(kHostnameBytes * static_cast<std::size_t>(ranks_), '\0');
    char own[kHostnameBytes] = {};
    ::gethostname(own, sizeof own - 1);
    char* device_names = static_cast<char*>(gpu.scratch.get());
    CLUSTERSIM_CUDA(cudaMemcpyAsync(device_names + kHostnameBytes * static_cast<std::size_t>(env_.rank), own,
                                    kHostnameBytes, cudaMemcpyHostToDevice, gpu.stream->get()));
    CLUSTERSIM_NCCL(ncclAllGather(device_names + kHostnameBytes * static_cast<std::size_t>(env_.rank), device_names,
                                  kHostnameBytes, ncclChar, base_comm_, gpu.stream->get()));
    wait_base(gpu, "ncclAllGather (host names, bootstrap communicator)");
    CLUSTERSIM_CUDA(
        cudaMemcpyAsync(names.data(), device_names, names.size(), cudaMemcpyDeviceToHost, gpu.stream->get()));
    CLUSTERSIM_CUDA(cudaStreamSynchronize(gpu.stream->get()));
    std::set<std::string> hosts;
    for (int r = 0; r < ranks_; ++r) {
      const char* name = names.data() + kHostnameBytes * static_cast<std::size_t>(r);
      hosts.insert(std::string(name, strnlen(name, kHostnameBytes)));
    }
    return static_cast<std::uint32_t>(hosts.size());
  }

  ncclResult_t create_comms() {
    if (env_.multi_process()) {
      // A split re-runs NCCL's init (topology search, tuning) and so reads NCCL_ALGO/NCCL_PROTO
      // afresh, without a new unique id.
      return ncclCommSplit(base_comm_, 0, env_.rank, &gpus_.front()->comm, nullptr);
    }
    std::vector<ncclComm_t> comms(gpus_.size(), nullptr);
    std::vector<int> devices;
    for (const auto& gpu : gpus_) devices.push_back(gpu->device);
    const ncclResult_t status = ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), devices.data());
    if (status == ncclSuccess) {
      for (std::size_t i = 0; i < gpus_.size(); ++i) gpus_[i]->comm = comms[i];
    }
    return status;
  }

  void run_combination(const NcclCombination& combination, const NcclEnvironment& environment,
                       schema::RawMeasurements& raw) {
    environment.apply(combination);
    const std::string& proto = combination.proto_label;
    const std::string what = "NCCL_ALGO=" + combination.algo_label + " NCCL_PROTO=" + proto;
    for (const OpInfo& op : kOps) {
      if (!combination.runs(op.name)) continue;
      // NCCL_ALGO does not apply to point-to-point operations, whatever the user set.
      const std::string algo = op.point_to_point ? std::string("default") : combination.algo_label;
      if (gpus_.front()->comm == nullptr) {
        const ncclResult_t status = create_comms();
        if (status != ncclSuccess) {
          if (is_rank0()) {
            std::printf("nccl: %s rejected at communicator init: %s; nothing recorded\n", what.c_str(),
                        nccl_reason(status).c_str());
          }
          destroy_comms(gpus_, /*abort=*/true);
          return;
        }
      }
      for (std::uint64_t requested = options_.min_bytes; requested <= max_bytes_; requested *= 2) {
        throw_if_interrupted();
        const OpSize size = op_size(op.op, requested, ranks_);
        if (size.count == 0) continue;
        double time_us = 0.0;
        const ncclResult_t status = time_op(op.op, size.count, time_us);
        if (status != ncclSuccess) {
          if (is_rank0()) {
            std::printf("nccl: %s with %s rejected at %llu B: %s; nothing recorded from there\n", op.name, what.c_str(),
                        static_cast<unsigned long long>(size.size), nccl_reason(status).c_str());
          }
          destroy_comms(gpus_, /*abort=*/true);
          break;
        }
        if (is_rank0()) record(raw, op, algo, proto, size, time_us);
      }
    }
    if (gpus_.front()->comm != nullptr) destroy_comms(gpus_, /*abort=*/false);
  }

  // nccl-tests timing: warmup, (barrier), then `iters` operations back to back and one wait.
  ncclResult_t time_op(Op op, std::uint64_t count, double& time_us) {
    for (int i = 0; i < options_.warmup; ++i) {
      if (const ncclResult_t s = enqueue_all(op, gpus_, count, ranks_); s != ncclSuccess) return s;
    }
    if (const ncclResult_t s = wait_all(gpus_); s != ncclSuccess) return s;
    if (env_.multi_process()) reduce_over_ranks(0.0, ncclMax);  // barrier
    const auto begin = std::chrono::steady_clock::now();
    for (int i = 0; i < options_.iters; ++i) {
      if (const ncclResult_t s = enqueue_all(op, gpus_, count, ranks_); s != ncclSuccess) return s;
    }
    if (const ncclResult_t s = wait_all(gpus_); s != ncclSuccess) return s;
    const auto elapsed = std::chrono::steady_clock::now() - begin;
    time_us = std::chrono::duration<double, std::micro>(elapsed).count() / options_.iters;
    if (env_.multi_process()) time_us = reduce_over_ranks(time_us, ncclMax);
    return ncclSuccess;
  }

  void record(schema::RawMeasurements& raw, const OpInfo& op, const std::string& algo, const std::string& proto,
              const OpSize& size, double time_us) const {
    schema::CollectiveSample* sample = raw.add_collectives();
    const double algbw = static_cast<double>(size.size) / (time_us * 1e-6) / 1e9;
    sample->set_op(op.name);
    sample->set_algorithm(algo);
    sample->set_protocol(proto);
    sample->set_ranks(static_cast<std::uint32_t>(ranks_));
    sample->set_nodes(hosts_);
    sample->set_size_bytes(size.size);
    sample->set_count(size.count);
    sample->set_type("float");
    sample->set_in_place(false);
    sample->set_time_us(time_us);
    sample->set_algbw_gbytes_per_s(algbw);
    sample->set_busbw_gbytes_per_s(algbw * size.busbw_factor);
    std::printf("nccl %-14s %-13s %-6s %12llu B %12llu %12.2f us %8.2f algbw %8.2f busbw GB/s\n", op.name, algo.c_str(),
                proto.c_str(), static_cast<unsigned long long>(size.size), static_cast<unsigned long long>(size.count),
                time_us, algbw, algbw * size.busbw_factor);
    std::fflush(stdout);
  }

  const BenchOptions& options_;
  const LaunchEnv& env_;
  const NcclPresets& presets_;
  int ranks_ = 1;
  std::uint32_t hosts_ = 1;
  std::uint64_t max_bytes_ = 0;
  ncclComm_t base_comm_ = nullptr;
  std::vector<std::unique_ptr<LocalGpu>> gpus_;
};

}  // namespace

LaunchEnv detect_launch_env() {
  struct Source {
    const char* rank;
    const char* size;
    const char* local_rank;
    const char* launcher;
  };
  static constexpr Source kSources[] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "mpirun (Open MPI)"},
      {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "mpirun (PMI)"},
      {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "srun"},
      {"RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun-style launcher"},
  };
  static constexpr const char* kLocalRanks[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                                "SLURM_LOCALID"};
  LaunchEnv env;
  for (const Source& source : kSources) {
    const std::optional<int> rank = env_int(source.rank);
    const std::optional<int> size = env_int(source.size);
    if (!rank || !size) continue;
    if (*size < 1 || *rank >= *size) {
      throw UsageError(std::string(source.rank) + "=" + std::to_string(*rank) + " is not below " + source.size + "=" +
                       std::to_string(*size));
    }
    env.rank = *rank;
    env.world = *size;
    env.launcher = source.launcher;
    std::optional<int> local = env_int(source.local_rank);
    for (const char* name : kLocalRanks) {
      if (!local) local = env_int(name);
    }
    if (local) {
      env.local_rank = *local;
      env.local_rank_known = true;
    }
    break;
  }
  return env;
}

NcclParticipants run_nccl_bench(const BenchOptions& options, const LaunchEnv& env, int device_count,
                                const NcclPresets& presets, schema::RawMeasurements& raw,
                                const std::function<void()>& checkpoint) {
  NcclBench bench(options, env, device_count, presets);
  return bench.run(raw, checkpoint);
}

}  // namespace clustersim::bench
