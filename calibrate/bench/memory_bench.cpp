#include "calibrate/bench/memory_bench.h"

#include <chrono>
#include <cstdint>
#include <cstdio>

#include "calibrate/bench/bench_error.h"
#include "calibrate/bench/cuda_resources.h"
#include "calibrate/bench/interrupt.h"
#include "calibrate/bench/kernels.h"

namespace clustersim::bench {
namespace {

constexpr std::uint64_t kMinCopyBytes = std::uint64_t{4} << 10;
constexpr std::uint64_t kMaxCopyBytes = std::uint64_t{1} << 30;
constexpr std::uint64_t kQuickMaxCopyBytes = std::uint64_t{64} << 20;
constexpr int kStreamBlocksPerSm = 8;

void add_memory_sample(schema::RawMeasurements& raw, const char* kind, std::uint64_t size, double time_us) {
  schema::MemorySample* sample = raw.add_memory();
  sample->set_kind(kind);
  sample->set_bytes(2 * size);
  sample->set_time_us(time_us);
  sample->set_gbytes_per_s(static_cast<double>(2 * size) / (time_us * 1e-6) / 1e9);
  std::printf("memory %-10s size=%-11llu %12.2f us %9.2f GB/s (read + write)\n", kind,
              static_cast<unsigned long long>(size), time_us, sample->gbytes_per_s());
  std::fflush(stdout);
}

}  // namespace

void run_memory_bench(const BenchOptions& options, schema::RawMeasurements& raw) {
  const std::uint64_t max_bytes = options.quick ? kQuickMaxCopyBytes : kMaxCopyBytes;
  int device = 0;
  int sms = 0;
  CLUSTERSIM_CUDA(cudaGetDevice(&device));
  CLUSTERSIM_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CudaStream stream;
  DeviceBuffer src(max_bytes);
  DeviceBuffer dst(max_bytes);
  CLUSTERSIM_CUDA(cudaMemsetAsync(src.get(), 1, max_bytes, stream.get()));
  CLUSTERSIM_CUDA(cudaMemsetAsync(dst.get(), 0, max_bytes, stream.get()));
  CudaEvent start;
  CudaEvent stop;

  auto time_us = [&](auto&& copy) {
    for (int i = 0; i < options.warmup; ++i) copy();
    CLUSTERSIM_CUDA(cudaEventRecord(start.get(), stream.get()));
    for (int i = 0; i < options.iters; ++i) copy();
    CLUSTERSIM_CUDA(cudaEventRecord(stop.get(), stream.get()));
    CLUSTERSIM_CUDA(cudaEventSynchronize(stop.get()));
    return elapsed_us(start, stop) / options.iters;
  };
  for (std::uint64_t size = kMinCopyBytes; size <= max_bytes; size *= 2) {
    throw_if_interrupted();
    add_memory_sample(
        raw, "d2d_copy", size, time_us([&] {
          CLUSTERSIM_CUDA(cudaMemcpyAsync(dst.get(), src.get(), size, cudaMemcpyDeviceToDevice, stream.get()));
        }));
  }
  for (std::uint64_t size = kMinCopyBytes; size <= max_bytes; size *= 2) {
    throw_if_interrupted();
    const std::uint64_t vectors = size / 16;
    const std::uint64_t wanted_blocks = (vectors + 255) / 256;
    const std::uint64_t max_blocks = static_cast<std::uint64_t>(sms) * kStreamBlocksPerSm;
    const int blocks = static_cast<int>(wanted_blocks < max_blocks ? wanted_blocks : max_blocks);
    add_memory_sample(raw, "hbm_stream", size, time_us([&] {
                        CLUSTERSIM_CUDA(launch_stream_copy(src.get(), dst.get(), size, blocks, stream.get()));
                      }));
  }
}

void run_launch_bench(const BenchOptions& options, schema::RawMeasurements& raw) {
  const int launches = options.quick ? 1000 : 10000;
  CudaStream stream;
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < 100; ++i) CLUSTERSIM_CUDA(launch_empty_kernel(stream.get()));
  CLUSTERSIM_CUDA(cudaStreamSynchronize(stream.get()));

  auto record = [&](const char* kind, Clock::duration elapsed) {
    schema::LaunchSample* sample = raw.add_launch();
    sample->set_kind(kind);
    sample->set_launches(static_cast<std::uint32_t>(launches));
    sample->set_overhead_us(std::chrono::duration<double, std::micro>(elapsed).count() / launches);
    std::printf("launch %-26s %8.3f us per launch (%d launches)\n", kind, sample->overhead_us(), launches);
    std::fflush(stdout);
  };

  throw_if_interrupted();
  Clock::time_point begin = Clock::now();
  for (int i = 0; i < launches; ++i) CLUSTERSIM_CUDA(launch_empty_kernel(stream.get()));
  CLUSTERSIM_CUDA(cudaStreamSynchronize(stream.get()));
  record("empty_kernel_back_to_back", Clock::now() - begin);

  throw_if_interrupted();
  begin = Clock::now();
  for (int i = 0; i < launches; ++i) {
    CLUSTERSIM_CUDA(launch_empty_kernel(stream.get()));
    CLUSTERSIM_CUDA(cudaStreamSynchronize(stream.get()));
  }
  record("empty_kernel_sync", Clock::now() - begin);
}

}  // namespace clustersim::bench
