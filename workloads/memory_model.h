// Peak memory per GPU of a PyTorch DDP replica trained with torch.autocast mixed precision and AdamW.
//
// Model states (Rajbhandari et al. 2020, "ZeRO" §3.1, 16 bytes/parameter for mixed-precision Adam):
// with autocast the parameters themselves stay fp32 (4 B), gradients are fp32 (4 B), Adam keeps
// exp_avg and exp_avg_sq (4 + 4 B); autocast caches the bf16/fp16 copy of each weight inside the
// autocast region (2 B); DDP's gradient buckets are a separate flat copy of the gradients
// (gradient_as_bucket_view=False by default: 4 B).
// Activations of one micro-batch (Korthikanti et al. 2022 §4, no parallelism, 16-bit activations,
// explicit attention matrices): per layer s·b·h·(18 + 4f/h) + 5·a·s²·b bytes (34·sbh + 5as²b at
// f = 4h), plus the embedding dropout s·b·h and the output layer and loss 4·s·b·h·(1 + V/h).
#pragma once

#include <string>
#include <vector>

#include "workloads/scenario.h"

namespace clustersim::workloads {

struct MemoryPart {
  std::string name;
  Bytes size;
};

struct MemoryEstimate {
  std::vector<MemoryPart> parts;
  Bytes peak;
  Bytes capacity;
  bool oom = false;
  std::string largest_part;   // the part that contributes most, named when OOM
};

MemoryEstimate estimate_ddp_memory(const Job& job, const calibrate::GpuPerformance& gpu);

}  // namespace clustersim::workloads
