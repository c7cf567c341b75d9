#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "calibrate/bench/kernels.h"

namespace clustersim::bench {
namespace {

constexpr int kThreads = 256;

__global__ void empty_kernel() {}

__global__ void stream_copy_kernel(const int4* __restrict__ src, int4* __restrict__ dst, std::size_t vectors) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < vectors; i += stride) {
    dst[i] = src[i];
  }
}

__device__ float hashed_value(std::size_t i, std::uint32_t seed) {
  // xorshift-multiply mix (Murmur3 finaliser); quality only needs to defeat all-equal operands.
  std::uint32_t x = static_cast<std::uint32_t>(i) ^ static_cast<std::uint32_t>(i >> 32) ^ seed;
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return static_cast<float>(x & 0xffffu) / 65536.0f - 0.5f;
}

template <class T>
__device__ T from_float(float v);
template <>
__device__ __half from_float<__half>(float v) {
  return __float2half(v);
}
template <>
__device__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}
template <>
__device__ float from_float<float>(float v) {
  return v;
}

template <class T>
__global__ void fill_kernel(T* data, std::size_t elements, std::uint32_t seed) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < elements; i += stride) {
    data[i] = from_float<T>(hashed_value(i, seed));
  }
}

unsigned int blocks_for(std::size_t elements) {
  const std::size_t wanted = (elements + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(wanted < 65536 ? (wanted == 0 ? 1 : wanted) : 65536);
}

}  // namespace

cudaError_t launch_empty_kernel(cudaStream_t stream) {
  empty_kernel<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t launch_stream_copy(const void* src, void* dst, std::size_t bytes, int blocks, cudaStream_t stream) {
  stream_copy_kernel<<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(
      static_cast<const int4*>(src), static_cast<int4*>(dst), bytes / sizeof(int4));
  return cudaGetLastError();
}

cudaError_t launch_fill(void* data, std::size_t elements, FillType type, std::uint32_t seed, cudaStream_t stream) {
  const unsigned int blocks = blocks_for(elements);
  switch (type) {
    case FillType::kFp16:
      fill_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__half*>(data), elements, seed);
      break;
    case FillType::kBf16:
      fill_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(data), elements, seed);
      break;
    case FillType::kFp32:
      fill_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<float*>(data), elements, seed);
      break;
  }
  return cudaGetLastError();
}

}  // namespace clustersim::bench
