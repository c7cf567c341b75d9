#include "workloads/memory_model.h"

namespace clustersim::workloads {

MemoryEstimate estimate_ddp_memory(const Job& job, const calibrate::GpuPerformance& gpu) {
  const ModelSpec& m = job.model;
  const double psi = m.parameter_count();
  const bool mixed = job.training.precision == Precision::kBF16 || job.training.precision == Precision::kFP16;
  const double s = m.seq_len, b = job.parallel.micro_batch, h = m.hidden, a = m.heads, f = m.ffn_hidden,
               V = m.vocab;
  const double e = element_bytes(job.training.precision);
  // Korthikanti's byte counts assume 16-bit activations and 1-byte masks; scale the 16-bit parts
  // by e/2 for fp32 training (masks stay 1 byte: 2 of the 34·sbh, 1 of the 5as²b).
  const double scale = e / 2.0;
  const double per_layer = s * b * h * ((18 + 4 * f / h - 2) * scale + 2) + a * s * s * b * (4 * scale + 1);
  const double activations = m.layers * per_layer + s * b * h * scale + 4 * s * b * h * (1 + V / h) * scale;

  MemoryEstimate est;
  est.parts = {
      {"weights (fp32)", bytes(4 * psi)},
      {"gradients (fp32)", bytes(4 * psi)},
      {"optimizer state (Adam m, v fp32)", bytes(8 * psi)},
      {"DDP gradient buckets (fp32 copy)", bytes(4 * psi)},
  };
  if (mixed) est.parts.push_back({"autocast weight copies (16-bit)", bytes(2 * psi)});
  est.parts.push_back({"activations (one micro-batch)", bytes(activations)});
  Bytes largest;
  for (const MemoryPart& p : est.parts) {
    est.peak += p.size;
    if (p.size > largest) {
      largest = p.size;
      est.largest_part = p.name;
    }
  }
  est.capacity = gpu.memory_capacity;
  est.oom = est.peak > est.capacity;
  return est;
}

}  // namespace clustersim::workloads
