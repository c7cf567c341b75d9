// Compute time of one operator on one GPU: a roofline against the hardware profile.
//
//   t = max(FLOPs / (peak · η_gemm(M, N, K, dtype)), bytes / B_hbm(bytes)) + t_launch
//
// GEMMs run on tensor cores at the precision's dense peak; element-wise ops run on the vector
// units (FP32 peak). η_gemm, the HBM bandwidth and t_launch come from the profile (built-in or
// calibrated, calibrate/fit.h):
//  * η_gemm: a fitted profile's GEMM table gives the efficiency of the entry of the same dtype nearest
//    to (M, N, K) in log space, distance² = Σ (log2 x − log2 x_entry)² over the three dimensions; a tie
//    goes to the entry listed first. Nearest, not interpolated: measured efficiencies jump with tile
//    quantisation, and a deterministic step is easier to check than a blend. No table, or no entry of the
//    dtype: the profile's single gemm_efficiency. op_time() looks a GEMM up at its own shape (Op::m, n, k
//    from workloads/transformer_ops.h); a batched GEMM (attention per head, grouped experts) at the shape
//    of one matrix of the batch, its FLOPs counting the whole batch. A GEMM op built without a shape
//    (m = 0) is looked up at the cube of the same FLOPs, M = N = K = (FLOPs / 2)^(1/3).
//  * B_hbm: a fitted profile's HBM curve, linear in log(bytes) between its points and clamped to the end
//    points; without one, hbm_gbytes_per_s · hbm_efficiency.
// The profile's compute_slowdown_during_comm (compute slowed while NCCL kernels share the GPU's SMs) is not
// part of op_time(): it depends on what overlaps what, which only the simulation knows. The executor applies
// it while it runs (sim/executor.h, Executor::set_comm_slowdown: compute on a GPU progresses at 1/s while a
// communication task has a lane there, work-conserving) when the caller that builds the Executor passes the
// profile's value (for scenarios: simulate_scenario, workloads/iteration_result.cpp).
// A slowdown factor > 1 stretches the result (a slow GPU in a what-if).
#pragma once

#include <cstdint>

#include "calibrate/hardware_profile.h"
#include "sim/units.h"
#include "workloads/scenario.h"
#include "workloads/transformer_ops.h"

namespace clustersim::workloads {

FlopsPerSecond tensor_peak(const calibrate::GpuPerformance& gpu, Precision precision);

// Achieved fraction of `precision`'s dense peak for an M×K by K×N GEMM (rule above).
double gemm_efficiency(const calibrate::GpuPerformance& gpu, double m, double n, double k, Precision precision);

// Achieved HBM bandwidth for an operator that moves `size` bytes (rule above).
BytesPerSecond hbm_bandwidth(const calibrate::GpuPerformance& gpu, Bytes size);

// The roofline time of an M×K by K×N GEMM moving `size` bytes, launch included.
Seconds gemm_time(double m, double n, double k, Bytes size, const calibrate::GpuPerformance& gpu, Precision precision);

Seconds op_time(const Op& op, const calibrate::GpuPerformance& gpu, Precision precision);

}  // namespace clustersim::workloads
