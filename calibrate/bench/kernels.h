// The CUDA kernels clustersim-bench needs, behind plain C++ functions so that only kernels.cu goes
// through nvcc: an empty kernel (launch overhead), a vectorised streaming copy (HBM bandwidth:
// every byte is read once and written once, so bytes moved = 2 × size), and a fill kernel that puts
// small pseudo-random values into GEMM operands (all-zero operands would flatter tensor-core power
// and clocks). Each function returns the launch error (cudaGetLastError), never throws.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace clustersim::bench {

enum class FillType { kFp16, kBf16, kFp32 };

cudaError_t launch_empty_kernel(cudaStream_t stream);

// Copies `bytes` (a multiple of 16) from src to dst with 16-byte loads and stores, grid-stride.
cudaError_t launch_stream_copy(const void* src, void* dst, std::size_t bytes, int blocks, cudaStream_t stream);

// Values uniform in [-0.5, 0.5), deterministic in (index, seed).
cudaError_t launch_fill(void* data, std::size_t elements, FillType type, std::uint32_t seed, cudaStream_t stream);

}  // namespace clustersim::bench
