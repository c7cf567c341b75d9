// Device memory bandwidth and kernel launch overhead of one GPU.
//
// Memory: for sizes 4 KiB .. 1 GiB (doubling; --quick: up to 64 MiB), two kinds:
//   "d2d_copy"   cudaMemcpyAsync device to device;
//   "hbm_stream" a copy kernel with 16-byte loads and stores (kernels.h).
// Both read `size` bytes and write `size` bytes, so the sample's `bytes` is 2 × size and
// gbytes_per_s = 2 × size / time / 1e9 (the convention of STREAM's "Copy", which counts the
// read and the write). Time: `warmup` untimed copies,
// then `iters` copies back to back between two CUDA events, divided by `iters`.
//
// Launch: an empty <<<1,1>>> kernel.
//   "empty_kernel_back_to_back" N launches, one synchronize, host wall time / N: the launch
//                                throughput the host sustains (what back-to-back kernels cost);
//   "empty_kernel_sync"          N × (launch, cudaStreamSynchronize), host wall time / N: the
//                                round trip of one isolated launch.
// N = 10000 (--quick: 1000).
#pragma once

#include "calibrate/bench/bench_options.h"
#include "calibrate/raw.pb.h"

namespace clustersim::bench {

// Both run on the current CUDA device, append their samples to `raw` and throw Interrupted
// (interrupt.h) between sizes (kinds) after SIGINT/SIGTERM; the samples so far stay in `raw`.
void run_memory_bench(const BenchOptions& options, schema::RawMeasurements& raw);
void run_launch_bench(const BenchOptions& options, schema::RawMeasurements& raw);

}  // namespace clustersim::bench
