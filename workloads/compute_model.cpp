#include "workloads/compute_model.h"

#include <algorithm>

namespace clustersim::workloads {

FlopsPerSecond tensor_peak(const calibrate::GpuPerformance& gpu, Precision precision) {
  switch (precision) {
    case Precision::kBF16: return gpu.peak_bf16;
    case Precision::kFP16: return gpu.peak_fp16;
    case Precision::kTF32: return gpu.peak_tf32;
    case Precision::kFP32: return gpu.peak_fp32;
  }
  return gpu.peak_fp32;
}

Seconds op_time(const Op& op, const calibrate::GpuPerformance& gpu, Precision precision) {
  const FlopsPerSecond peak = op.kind == OpKind::kGemm ? tensor_peak(gpu, precision) : gpu.peak_fp32;
  const Seconds math = op.flops / (peak * (op.kind == OpKind::kGemm ? gpu.gemm_efficiency : 1.0));
  const Seconds memory = op.bytes / (gpu.hbm_bandwidth * gpu.hbm_efficiency);
  return std::max(math, memory) + gpu.kernel_launch;
}

}  // namespace clustersim::workloads
