// Failures of CUDA, cuBLAS, NCCL and file calls in clustersim-bench. Every such call goes through
// one of the check functions below; a failure becomes a BenchError whose message is
// "<call> failed: <reason>", which main prints as one line before exiting with status 1.
// A benchmark cannot recover from a failed device call, but what it measured before stays: rank 0
// writes the output file after every part and every NCCL combination, and once more with the
// samples taken since when a failure ends the run; the error line then ends with
// "; the measurements so far are in FILE".
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <stdexcept>
#include <string>

namespace clustersim::bench {

class BenchError : public std::runtime_error {
 public:
  BenchError(const std::string& call, const std::string& reason) : std::runtime_error(call + " failed: " + reason) {}
};

// "cudaMalloc(&p, n)" -> "cudaMalloc": the error line names the function, not its arguments.
inline std::string call_name(const char* call) {
  std::string name = call;
  return name.substr(0, name.find('('));
}

inline void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    throw BenchError(call_name(call), std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status));
  }
}

inline void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw BenchError(call_name(call), std::string(cublasGetStatusName(status)) + ": " + cublasGetStatusString(status));
  }
}

inline std::string nccl_reason(ncclResult_t status) {
  std::string reason = ncclGetErrorString(status);
  if (const char* last = ncclGetLastError(nullptr); last != nullptr && *last != '\0') {
    reason += std::string(" (") + last + ")";
  }
  return reason;
}

inline void check_nccl(ncclResult_t status, const char* call) {
  if (status != ncclSuccess) throw BenchError(call_name(call), nccl_reason(status));
}

}  // namespace clustersim::bench

// The call's own text names it in the error line.
#define CLUSTERSIM_CUDA(call) ::clustersim::bench::check_cuda((call), #call)
#define CLUSTERSIM_CUBLAS(call) ::clustersim::bench::check_cublas((call), #call)
#define CLUSTERSIM_NCCL(call) ::clustersim::bench::check_nccl((call), #call)
