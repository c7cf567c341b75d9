// cuBLAS GEMM sweep: the matrix shapes of transformer layers and square sizes, per data type.
//
// Shapes follow a transformer layer with hidden size h and M tokens (batch × sequence) per GPU:
// QKV projection (M, 3h, h), attention output projection (M, h, h), MLP up (M, 4h, h) and MLP
// down (M, h, 4h), written (m, n, k) for Y[m×n] = X[m×k]·Wᵀ with W stored n×k, the layout of
// torch.nn.Linear (cuBLAS sees it column-major as op(A)=T, op(B)=N, the "TN" GEMM). Sizes:
// h ∈ {1024, 2048, 4096, 8192, 12288}, M ∈ {512, 2048, 8192}, plus square m = n = k from 256 to
// 16384. Types: fp16 and bf16 (fp32 accumulation, as mixed-precision training runs them), fp32
// (CUBLAS_COMPUTE_32F, no TF32) and TF32 (fp32 data, CUBLAS_COMPUTE_32F_FAST_TF32; compute
// capability >= 8.0 only). Shapes whose operands do not fit in free memory are skipped.
//
// Timing: `warmup` untimed GEMMs, then `iters` GEMMs back to back on one stream with a CUDA event
// recorded between consecutive ones; the sample is the median per-GEMM time, and
// tflops = 2·m·n·k / time / 1e12.
#pragma once

#include <cstdint>
#include <vector>

#include "calibrate/bench/bench_options.h"
#include "calibrate/raw.pb.h"

namespace clustersim::bench {

struct GemmShape {
  std::uint64_t m = 0;
  std::uint64_t n = 0;
  std::uint64_t k = 0;
};

// The shapes above, without duplicates, in sweep order; --quick keeps h = 4096, M = 2048 and the
// squares 1024, 4096, 8192.
std::vector<GemmShape> gemm_shapes(bool quick);

// Runs on the current CUDA device and appends one GemmSample per shape and type to `raw`. Throws
// Interrupted (interrupt.h) between shapes after SIGINT/SIGTERM; the samples so far stay in `raw`.
void run_gemm_bench(const BenchOptions& options, int compute_capability, schema::RawMeasurements& raw);

}  // namespace clustersim::bench
