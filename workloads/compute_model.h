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
//    dtype: the profile's gemm_efficiency (the efficiency of full waves of large tiles) times the wave
//    utilisation u below. op_time() looks a GEMM up at its own shape (Op::m, n, k
//    from workloads/transformer_ops.h); a batched GEMM (attention per head, grouped experts) at the shape
//    of one matrix of the batch, its FLOPs counting the whole batch. A GEMM op built without a shape
//    (m = 0) is looked up at the cube of the same FLOPs, M = N = K = (FLOPs / 2)^(1/3), u included.
//  * u, tile and wave quantisation (NVIDIA, "Matrix Multiplication Background User Guide", DU-09799-001,
//    §3.1 and §3.2): the kernel splits each M×N output of the batch into tiles of the profile's
//    gemm_tile_m × gemm_tile_n (cuBLAS's most efficient large-GEMM tiles are 256×128 and 128×256, §2.3),
//    one thread block per tile, and runs them on the sm_count SMs in waves, so a GEMM takes as long as
//    ⌈tiles / SMs⌉ full waves of full tiles:
//        tiles = ⌈M / a⌉ · ⌈N / b⌉ · batch,   u = M · N · batch / (⌈tiles / SMs⌉ · SMs · a · b),
//    for the better of (a, b) = (tile_m, tile_n) and (tile_n, tile_m). When that leaves SMs idle (fewer
//    tiles than SMs) the library uses a smaller tile to occupy more of them: the longer side is halved, down
//    to a square tile (256 × 128 → 128 × 128), at the same efficiency, and the better u counts. u = 1 when the
//    profile has no SM count. A measured GEMM table already holds these effects at its shapes, so u applies
//    only without one. Not modelled: split-K and stream-K kernels (some small-output, large-K shapes), and the
//    lower efficiency of short K (the tile's prologue and epilogue): against OpenXLA's measured H100 bf16 table
//    (xla/service/gpu/model/matmul_interpolator_data.h, sm_90), 0.7 × u of 989.4 TFLOP/s gives 672 TFLOP/s for
//    4096³ (measured 783) and 2048³ (632), 336 for 1024 × 1024 × 2048 (350) and 2048 × 512 × 2048 (348), but
//    672 for 512 × 4096 × 1024 (373) and 4096 × 512 × 512 (239), where K is short.
//  * B_hbm: a fitted profile's HBM curve, linear in log(bytes) between its points and clamped to the end
//    points; without one, hbm_gbytes_per_s · hbm_efficiency.
// The profile's compute_slowdown_during_comm (compute slowed while NCCL kernels share the GPU's SMs) is not
// part of op_time(): it depends on what overlaps what, which only the simulation knows. The executor applies
// it while it runs (sim/executor.h, Executor::set_comm_slowdown: compute on a GPU progresses at 1/s while a
// communication task has a lane there, work-conserving) when the caller that builds the Executor passes the
// profile's value (for scenarios: simulate_scenario, workloads/iteration_result.cpp).
// A slowdown factor > 1 stretches the result (a slow GPU in a what-if).
// FP8 (Precision::kFP8, Transformer Engine): GEMMs flagged Op::fp8 (the transformer layers' linear layers) use
// the profile's dense FP8 peak and FP8 entries of the GEMM table (else gemm_efficiency × u, the same rule as
// BF16); every other op is timed as BF16. tensor_peak(kFP8), and with it MFU, is the FP8 peak.
// Fused attention (Op::fused_attention: the flash kernel, a ring-attention step) of a named implementation
// (parallel.flash_kernel FA2, FA3 or TRITON) runs at that kernel's published rate r from the profile
// (GpuProfile.flash_attention_*), a fraction of the 16-bit dense peak over the FLOPs the kernel executes, in
// FlashAttention-2's benchmark convention (Dao 2023, §4.1):
//     t = max(F_exec / (peak_bf16 · r_pass), bytes / B_hbm) + t_launch,
//     F_exec = F_op · (backward ? 5/4 : 1) · (causal full square ? 1/2 : 1),
// F_op being the op's model FLOPs (forward 4·s²·d per head, backward twice that): the backward kernel runs
// five matmuls against the forward's two (the scores are recomputed), 2.5 times the forward's FLOPs; a causal
// mask skips about half the square (every model here is a causal decoder), and a ring-attention step's FLOPs
// already count only its unmasked blocks. The unnamed kernel (FlashKernel::kGeneric) is timed as a GEMM of its
// shape over the full square, as above; a ring-attention step (2c x c half-block) as the 2c x 2c block it
// belongs to, twice its FLOPs, so that context parallelism does not halve the unnamed kernel's attention time.
#pragma once

#include <cstdint>

#include "calibrate/hardware_profile.h"
#include "sim/units.h"
#include "workloads/scenario.h"
#include "workloads/transformer_ops.h"

namespace clustersim::workloads {

FlopsPerSecond tensor_peak(const calibrate::GpuPerformance& gpu, Precision precision);

// Achieved fraction of `precision`'s dense peak for `batch` M×K by K×N GEMMs (rule above).
double gemm_efficiency(const calibrate::GpuPerformance& gpu, double m, double n, double k, Precision precision,
                       double batch = 1);

// u of the rule above: the fraction of the SM-tile slots of its waves that `batch` M×N outputs fill (1 when the
// profile has no SM count).
double gemm_wave_utilization(const calibrate::GpuPerformance& gpu, double m, double n, double batch = 1);

// Achieved HBM bandwidth for an operator that moves `size` bytes (rule above).
BytesPerSecond hbm_bandwidth(const calibrate::GpuPerformance& gpu, Bytes size);

// The roofline time of an M×K by K×N GEMM moving `size` bytes, launch included.
Seconds gemm_time(double m, double n, double k, Bytes size, const calibrate::GpuPerformance& gpu, Precision precision);

Seconds op_time(const Op& op, const calibrate::GpuPerformance& gpu, Precision precision);

// The profile's published rate for fused-attention implementation `k` (nullptr for kGeneric); its
// present() is false when the profile has none for this GPU.
const calibrate::GpuPerformance::AttentionRate* attention_rate(const calibrate::GpuPerformance& gpu, FlashKernel k);

}  // namespace clustersim::workloads
