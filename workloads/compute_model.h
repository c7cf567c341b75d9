// Compute time of one operator on one GPU: a roofline against the hardware profile.
//
//   t = max(FLOPs / (peak · η_gemm), bytes / (HBM · η_hbm)) + t_launch
//
// GEMMs run on tensor cores at the precision's dense peak; element-wise ops run on the vector
// units (FP32 peak). η_gemm, η_hbm and t_launch come from the profile (built-in or calibrated).
// A slowdown factor > 1 stretches the result (a slow GPU in a what-if).
#pragma once

#include "calibrate/hardware_profile.h"
#include "sim/units.h"
#include "workloads/scenario.h"
#include "workloads/transformer_ops.h"

namespace clustersim::workloads {

FlopsPerSecond tensor_peak(const calibrate::GpuPerformance& gpu, Precision precision);

Seconds op_time(const Op& op, const calibrate::GpuPerformance& gpu, Precision precision);

}  // namespace clustersim::workloads
