#include "workloads/compute_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace clustersim::workloads {
namespace {

calibrate::GemmDtype dtype_of(Precision precision) {
  switch (precision) {
    case Precision::kBF16:
      return calibrate::GemmDtype::kBF16;
    case Precision::kFP16:
      return calibrate::GemmDtype::kFP16;
    case Precision::kTF32:
      return calibrate::GemmDtype::kTF32;
    case Precision::kFP32:
      return calibrate::GemmDtype::kFP32;
    case Precision::kFP8:
      return calibrate::GemmDtype::kFP8;
  }
  return calibrate::GemmDtype::kFP32;
}

}  // namespace

FlopsPerSecond tensor_peak(const calibrate::GpuPerformance& gpu, Precision precision) {
  return calibrate::dense_peak(gpu, dtype_of(precision));
}

double gemm_wave_utilization(const calibrate::GpuPerformance& gpu, double m, double n, double batch) {
  if (gpu.sm_count == 0 || gpu.gemm_tile_m == 0 || gpu.gemm_tile_n == 0 || m <= 0 || n <= 0) return 1.0;
  const double sms = gpu.sm_count;
  const double count = std::max(1.0, std::round(batch));
  // Utilisation and tile count of an a x b tiling, the better orientation.
  auto tiling = [&](double a, double b) {
    double best = 0, tiles_of_best = 0;
    for (const auto& [tm, tn] : {std::pair<double, double>{a, b}, std::pair<double, double>{b, a}}) {
      const double tiles = std::ceil(m / tm) * std::ceil(n / tn) * count;
      const double u = m * n * count / (std::ceil(tiles / sms) * sms * tm * tn);  // over waves x SMs x tile
      if (u > best) best = u, tiles_of_best = tiles;
    }
    return std::pair<double, double>{best, tiles_of_best};
  };
  const double a = gpu.gemm_tile_m, b = gpu.gemm_tile_n;
  const auto [u, tiles] = tiling(a, b);
  // Less than one wave: the library picks a smaller tile to occupy more SMs, the square of the shorter side.
  if (tiles >= sms || a == b) return u;
  return std::max(u, tiling(std::min(a, b), std::min(a, b)).first);
}

double gemm_efficiency(const calibrate::GpuPerformance& gpu, double m, double n, double k, Precision precision,
                       double batch) {
  const calibrate::GemmDtype dtype = dtype_of(precision);
  const double lm = std::log2(std::max(m, 1.0)), ln = std::log2(std::max(n, 1.0)), lk = std::log2(std::max(k, 1.0));
  const calibrate::GemmEfficiencyPoint* nearest = nullptr;
  double best = 0;
  for (const calibrate::GemmEfficiencyPoint& e : gpu.gemm_table) {
    if (e.dtype != dtype) continue;
    const double dm = lm - std::log2(static_cast<double>(e.m)), dn = ln - std::log2(static_cast<double>(e.n)),
                 dk = lk - std::log2(static_cast<double>(e.k));
    const double d2 = dm * dm + dn * dn + dk * dk;
    if (!nearest || d2 < best) nearest = &e, best = d2;
  }
  return nearest ? nearest->efficiency : gpu.gemm_efficiency * gemm_wave_utilization(gpu, m, n, batch);
}

BytesPerSecond hbm_bandwidth(const calibrate::GpuPerformance& gpu, Bytes size) {
  const auto& c = gpu.hbm_curve;
  if (c.empty()) return gpu.hbm_bandwidth * gpu.hbm_efficiency;
  if (size <= c.front().size) return c.front().bandwidth;
  if (size >= c.back().size) return c.back().bandwidth;
  std::size_t i = 1;
  while (c[i].size < size) ++i;  // c[i-1].size < size <= c[i].size
  const double x0 = std::log(c[i - 1].size.raw()), x1 = std::log(c[i].size.raw());
  const double t = (std::log(size.raw()) - x0) / (x1 - x0);
  return bytes_per_second(c[i - 1].bandwidth.raw() + t * (c[i].bandwidth.raw() - c[i - 1].bandwidth.raw()));
}

namespace {

Seconds gemm_roofline(Flops work, double m, double n, double k, double batch, Bytes size,
                      const calibrate::GpuPerformance& gpu, Precision precision) {
  const Seconds math = work / (tensor_peak(gpu, precision) * gemm_efficiency(gpu, m, n, k, precision, batch));
  return std::max(math, size / hbm_bandwidth(gpu, size)) + gpu.kernel_launch;
}

}  // namespace

Seconds gemm_time(double m, double n, double k, Bytes size, const calibrate::GpuPerformance& gpu, Precision precision) {
  return gemm_roofline(flops(2 * m * n * k), m, n, k, 1, size, gpu, precision);
}

const calibrate::GpuPerformance::AttentionRate* attention_rate(const calibrate::GpuPerformance& gpu, FlashKernel k) {
  switch (k) {
    case FlashKernel::kFa2: return &gpu.flash_fa2;
    case FlashKernel::kFa3: return &gpu.flash_fa3;
    case FlashKernel::kTriton: return &gpu.flash_triton;
    case FlashKernel::kGeneric: break;
  }
  return nullptr;
}

Seconds op_time(const Op& op, const calibrate::GpuPerformance& gpu, Precision precision) {
  // FP8 training: only the linear layers' GEMMs run in FP8; every other GEMM (attention, LM head, router) in BF16.
  if (precision == Precision::kFP8 && !op.fp8) precision = Precision::kBF16;
  if (op.kind == OpKind::kGemm && op.fused_attention) {
    const calibrate::GpuPerformance::AttentionRate* r = attention_rate(gpu, op.flash_kernel);
    if (r && r->present()) {
      // The backward kernel executes 2.5x the forward's FLOPs (five matmuls against two); its op counts 2x.
      constexpr double kBackwardExecutedPerModelFlop = 2.5 / 2.0;
      // A causal mask leaves about half the square to compute (a ring step's FLOPs already exclude it).
      constexpr double kCausalExecutedFraction = 0.5;
      const double executed = op.flops.raw() * (op.attention_backward ? kBackwardExecutedPerModelFlop : 1.0) *
                              (op.causal_skipped ? 1.0 : kCausalExecutedFraction);
      const Seconds math = flops(executed) / (gpu.peak_bf16 * (op.attention_backward ? r->backward : r->forward));
      return std::max(math, op.bytes / hbm_bandwidth(gpu, op.bytes)) + gpu.kernel_launch;
    }
  }
  if (op.kind == OpKind::kGemm && op.fused_attention && op.causal_skipped && op.m > 0 && op.n > 0 && op.k > 0) {
    // The unnamed kernel is timed over the full square (see the header): a ring-attention step's 2c x c
    // half-block counts as the 2c x 2c block it belongs to, twice its FLOPs, as the cp = 1 kernel does.
    return gemm_roofline(op.flops * 2.0, op.m, 2 * op.n, op.k, op.batch, op.bytes, gpu, precision);
  }
  if (op.kind == OpKind::kGemm) {
    if (op.m > 0 && op.n > 0 && op.k > 0)
      return gemm_roofline(op.flops, op.m, op.n, op.k, op.batch, op.bytes, gpu, precision);
    const double edge = std::cbrt(op.flops.raw() / 2);  // no shape: the cube of the same FLOPs (see the header)
    return gemm_roofline(op.flops, edge, edge, edge, 1, op.bytes, gpu, precision);
  }
  const Seconds math = op.flops / gpu.peak_fp32;
  const Seconds memory = op.bytes / hbm_bandwidth(gpu, op.bytes);
  return std::max(math, memory) + gpu.kernel_launch;
}

}  // namespace clustersim::workloads
