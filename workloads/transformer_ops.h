// The operators of one training step of a dense GPT-style transformer, in execution order, with
// their FLOPs, HBM bytes and the parameters whose gradients they produce.
//
// FLOPs (Narayanan et al. 2021, SC'21 §5.1): per layer forward, for micro-batch B, sequence s,
// hidden h, FFN width f: QKV 6Bsh², attention scores 2Bs²h, attention over values 2Bs²h, output
// projection 2Bsh², MLP 4Bshf; the LM head 2BshV. With f = 4h the layer totals 24Bsh² + 4Bs²h.
// Backward costs twice the forward: a GEMM Y = XW has a data gradient (dX = dY·Wᵀ) and a weight
// gradient (dW = Xᵀ·dY) of the same FLOPs each. Summed over fwd+bwd this is the model-FLOP closed
// form 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) (Korthikanti et al. 2022).
// Bytes: GEMMs read both operands and write the result once (e·(MK + KN + MN)); element-wise ops
// (LayerNorm, softmax, GeLU, dropout+residual) read and write their tensors; attention matrices are
// explicit (B·a·s² elements, no FlashAttention). Gradients of parameters are fp32 (PyTorch DDP with
// autocast keeps fp32 parameters).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/units.h"
#include "workloads/model_spec.h"
#include "workloads/scenario.h"

namespace clustersim::workloads {

enum class OpKind { kGemm, kElementwise };

struct Op {
  std::string name;           // e.g. "L3.qkv.fwd", "L3.qkv.wgrad", "lm_head.dgrad"
  OpKind kind = OpKind::kGemm;
  Flops flops;
  Bytes bytes;                // HBM traffic
  double grad_parameters = 0; // parameters whose gradient is complete when this op ends
};

// The forward pass of one micro-batch of `micro_batch` samples: embedding, layers, final norm,
// LM head, loss.
std::vector<Op> forward_ops(const ModelSpec& model, std::uint32_t micro_batch, Precision precision);
// The backward pass, in execution order (loss → LM head → layers in reverse → embedding).
// The tied embedding's gradient is complete only after the embedding's backward.
std::vector<Op> backward_ops(const ModelSpec& model, std::uint32_t micro_batch, Precision precision);
// Adam step over `parameters` fp32 parameters: reads param, grad, m, v (16 B) and writes param,
// m, v (12 B) per parameter (torch.optim.AdamW, non-fused foreach: memory-bound).
Op optimizer_op(double parameters);

// Model FLOPs of one micro-batch, fwd + bwd, no recomputation (the convention MFU uses here).
Flops model_flops(const ModelSpec& model, std::uint32_t micro_batch);

}  // namespace clustersim::workloads
