#include "calibrate/bench/gemm_bench.h"

#include <cublas_v2.h>
#include <library_types.h>

#include <algorithm>
#include <cstdio>

#include "calibrate/bench/bench_error.h"
#include "calibrate/bench/cuda_resources.h"
#include "calibrate/bench/interrupt.h"
#include "calibrate/bench/kernels.h"

namespace clustersim::bench {
namespace {

constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;  // cuBLAS' recommendation for Hopper
constexpr double kUsableMemoryFraction = 0.9;

struct GemmType {
  schema::GemmSample::DataType dtype;
  const char* name;
  cudaDataType_t data;
  cublasComputeType_t compute;
  FillType fill;
  std::size_t element_bytes;
  int min_compute_capability;
};

constexpr GemmType kTypes[] = {
    {schema::GemmSample::FP16, "fp16", CUDA_R_16F, CUBLAS_COMPUTE_32F, FillType::kFp16, 2, 0},
    {schema::GemmSample::BF16, "bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F, FillType::kBf16, 2, 80},
    {schema::GemmSample::FP32, "fp32", CUDA_R_32F, CUBLAS_COMPUTE_32F, FillType::kFp32, 4, 0},
    {schema::GemmSample::TF32, "tf32", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, FillType::kFp32, 4, 80},
};

class CublasHandle {
 public:
  CublasHandle() { CLUSTERSIM_CUBLAS(cublasCreate(&handle_)); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle() { cublasDestroy(handle_); }
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

}  // namespace

std::vector<GemmShape> gemm_shapes(bool quick) {
  const std::vector<std::uint64_t> hidden =
      quick ? std::vector<std::uint64_t>{4096} : std::vector<std::uint64_t>{1024, 2048, 4096, 8192, 12288};
  const std::vector<std::uint64_t> tokens =
      quick ? std::vector<std::uint64_t>{2048} : std::vector<std::uint64_t>{512, 2048, 8192};
  const std::vector<std::uint64_t> squares = quick
                                                 ? std::vector<std::uint64_t>{1024, 4096, 8192}
                                                 : std::vector<std::uint64_t>{256, 512, 1024, 2048, 4096, 8192, 16384};
  std::vector<GemmShape> shapes;
  auto add = [&shapes](std::uint64_t m, std::uint64_t n, std::uint64_t k) {
    const bool seen =
        std::any_of(shapes.begin(), shapes.end(), [&](const GemmShape& s) { return s.m == m && s.n == n && s.k == k; });
    if (!seen) shapes.push_back({m, n, k});
  };
  for (std::uint64_t h : hidden) {
    for (std::uint64_t m : tokens) {
      add(m, 3 * h, h);  // QKV
      add(m, h, h);      // attention output projection
      add(m, 4 * h, h);  // MLP up
      add(m, h, 4 * h);  // MLP down
    }
  }
  for (std::uint64_t s : squares) add(s, s, s);
  return shapes;
}

void run_gemm_bench(const BenchOptions& options, int compute_capability, schema::RawMeasurements& raw) {
  CudaStream stream;
  CublasHandle handle;
  DeviceBuffer workspace(kWorkspaceBytes);
  CLUSTERSIM_CUBLAS(cublasSetStream(handle.get(), stream.get()));
  CLUSTERSIM_CUBLAS(cublasSetWorkspace(handle.get(), workspace.get(), workspace.bytes()));
  CLUSTERSIM_CUBLAS(cublasSetMathMode(handle.get(), CUBLAS_DEFAULT_MATH));

  std::vector<CudaEvent> events(static_cast<std::size_t>(options.iters) + 1);
  const float alpha = 1.0f;
  const float beta = 0.0f;
  int skipped = 0;
  std::printf("gemm: %zu shapes; median of %d back-to-back GEMMs after %d warmup\n", gemm_shapes(options.quick).size(),
              options.iters, options.warmup);
  for (const GemmType& type : kTypes) {
    if (compute_capability < type.min_compute_capability) {
      std::printf("gemm: %s skipped (needs compute capability >= %d.%d)\n", type.name, type.min_compute_capability / 10,
                  type.min_compute_capability % 10);
      continue;
    }
    for (const GemmShape& shape : gemm_shapes(options.quick)) {
      throw_if_interrupted();
      const std::size_t a_elements = shape.n * shape.k;  // W, n×k
      const std::size_t b_elements = shape.m * shape.k;  // X, m×k
      const std::size_t c_elements = shape.m * shape.n;  // Y, m×n
      const std::size_t need = (a_elements + b_elements + c_elements) * type.element_bytes;
      std::size_t free_bytes = 0;
      std::size_t total_bytes = 0;
      CLUSTERSIM_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
      if (static_cast<double>(need) > kUsableMemoryFraction * static_cast<double>(free_bytes)) {
        ++skipped;
        continue;
      }
      DeviceBuffer a(a_elements * type.element_bytes);
      DeviceBuffer b(b_elements * type.element_bytes);
      DeviceBuffer c(c_elements * type.element_bytes);
      CLUSTERSIM_CUDA(launch_fill(a.get(), a_elements, type.fill, 1, stream.get()));
      CLUSTERSIM_CUDA(launch_fill(b.get(), b_elements, type.fill, 2, stream.get()));

      const int m = static_cast<int>(shape.n);  // cuBLAS is column-major: it computes Yᵀ = W·Xᵀ
      const int n = static_cast<int>(shape.m);
      const int k = static_cast<int>(shape.k);
      auto gemm = [&]() {
        CLUSTERSIM_CUBLAS(cublasGemmEx(handle.get(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, a.get(), type.data, k,
                                       b.get(), type.data, k, &beta, c.get(), type.data, m, type.compute,
                                       CUBLAS_GEMM_DEFAULT));
      };
      for (int i = 0; i < options.warmup; ++i) gemm();
      CLUSTERSIM_CUDA(cudaEventRecord(events[0].get(), stream.get()));
      for (std::size_t i = 1; i < events.size(); ++i) {
        gemm();
        CLUSTERSIM_CUDA(cudaEventRecord(events[i].get(), stream.get()));
      }
      CLUSTERSIM_CUDA(cudaStreamSynchronize(stream.get()));
      std::vector<double> times_us;
      for (std::size_t i = 1; i < events.size(); ++i) times_us.push_back(elapsed_us(events[i - 1], events[i]));
      const double time_us = median(times_us);
      const double flops =
          2.0 * static_cast<double>(shape.m) * static_cast<double>(shape.n) * static_cast<double>(shape.k);
      schema::GemmSample* sample = raw.add_gemm();
      sample->set_m(shape.m);
      sample->set_n(shape.n);
      sample->set_k(shape.k);
      sample->set_dtype(type.dtype);
      sample->set_time_us(time_us);
      sample->set_tflops(flops / (time_us * 1e-6) / 1e12);
      std::printf("gemm %-4s m=%-6llu n=%-6llu k=%-6llu %12.2f us %9.2f TFLOP/s\n", type.name,
                  static_cast<unsigned long long>(shape.m), static_cast<unsigned long long>(shape.n),
                  static_cast<unsigned long long>(shape.k), time_us, sample->tflops());
      std::fflush(stdout);
    }
  }
  if (skipped > 0) std::printf("gemm: %d shape/type pairs skipped: operands do not fit in free memory\n", skipped);
}

}  // namespace clustersim::bench
