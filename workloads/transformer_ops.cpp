#include "workloads/transformer_ops.h"

namespace clustersim::workloads {
namespace {

struct Dims {
  double B, s, h, a, f, V, e;
};

Dims dims_of(const ModelSpec& m, std::uint32_t micro_batch, Precision p) {
  return Dims{double(micro_batch), double(m.seq_len), double(m.hidden), double(m.heads),
              double(m.ffn_hidden), double(m.vocab), element_bytes(p)};
}

// A GEMM of an [M x K] by [K x N] product.
Op gemm(std::string name, double M, double K, double N, double e, double grad_params = 0) {
  return Op{std::move(name), OpKind::kGemm, flops(2 * M * K * N), bytes(e * (M * K + K * N + M * N)), grad_params};
}

Op elementwise(std::string name, double flop_count, double byte_count, double grad_params = 0) {
  return Op{std::move(name), OpKind::kElementwise, flops(flop_count), bytes(byte_count), grad_params};
}

}  // namespace

std::vector<Op> forward_ops(const ModelSpec& model, std::uint32_t micro_batch, Precision precision) {
  const Dims d = dims_of(model, micro_batch, precision);
  const double tokens = d.B * d.s;
  const double act = tokens * d.h;          // elements of one [B, s, h] activation
  const double scores = d.B * d.a * d.s * d.s;  // elements of one attention matrix set
  std::vector<Op> ops;
  ops.push_back(elementwise("embed.fwd", act, d.e * 3 * act));  // word + position gather, add
  for (std::uint32_t l = 0; l < model.layers; ++l) {
    const std::string p = "L" + std::to_string(l) + ".";
    ops.push_back(elementwise(p + "ln1.fwd", 8 * act, d.e * 2 * act));
    ops.push_back(gemm(p + "qkv.fwd", tokens, d.h, 3 * d.h, d.e));
    // Q·Kᵀ per head: [s x d_head]·[d_head x s], a heads, B samples: 2·B·s²·h FLOPs.
    ops.push_back(Op{p + "attn_scores.fwd", OpKind::kGemm, flops(2 * d.B * d.s * d.s * d.h),
                     bytes(d.e * (2 * act + scores)), 0});
    ops.push_back(elementwise(p + "softmax.fwd", 5 * scores, d.e * 2 * scores + scores));  // + dropout mask
    ops.push_back(Op{p + "attn_values.fwd", OpKind::kGemm, flops(2 * d.B * d.s * d.s * d.h),
                     bytes(d.e * (scores + 2 * act)), 0});
    ops.push_back(gemm(p + "proj.fwd", tokens, d.h, d.h, d.e));
    ops.push_back(elementwise(p + "residual1.fwd", 2 * act, d.e * 3 * act + act));
    ops.push_back(elementwise(p + "ln2.fwd", 8 * act, d.e * 2 * act));
    ops.push_back(gemm(p + "fc1.fwd", tokens, d.h, d.f, d.e));
    ops.push_back(elementwise(p + "gelu.fwd", 8 * tokens * d.f, d.e * 2 * tokens * d.f));
    ops.push_back(gemm(p + "fc2.fwd", tokens, d.f, d.h, d.e));
    ops.push_back(elementwise(p + "residual2.fwd", 2 * act, d.e * 3 * act + act));
  }
  ops.push_back(elementwise("final_ln.fwd", 8 * act, d.e * 2 * act));
  ops.push_back(gemm("lm_head.fwd", tokens, d.h, d.V, d.e));
  ops.push_back(elementwise("loss.fwd", 5 * tokens * d.V, d.e * 2 * tokens * d.V));
  return ops;
}

std::vector<Op> backward_ops(const ModelSpec& model, std::uint32_t micro_batch, Precision precision) {
  const Dims d = dims_of(model, micro_batch, precision);
  const double tokens = d.B * d.s;
  const double act = tokens * d.h;
  const double scores = d.B * d.a * d.s * d.s;
  std::vector<Op> ops;
  ops.push_back(elementwise("loss.bwd", 3 * tokens * d.V, d.e * 2 * tokens * d.V));
  // dX = dY·Wᵀ: [tokens x V]·[V x h]; dW = Xᵀ·dY: [h x tokens]·[tokens x V]. The LM head is tied to
  // the word embedding, whose gradient completes only in embed.bwd.
  ops.push_back(gemm("lm_head.dgrad", tokens, d.V, d.h, d.e));
  ops.push_back(gemm("lm_head.wgrad", d.h, tokens, d.V, d.e));
  ops.push_back(elementwise("final_ln.bwd", 10 * act, d.e * 3 * act, 2 * d.h));
  for (std::uint32_t i = model.layers; i-- > 0;) {
    const std::string p = "L" + std::to_string(i) + ".";
    ops.push_back(elementwise(p + "residual2.bwd", act, d.e * 2 * act + act));
    ops.push_back(gemm(p + "fc2.dgrad", tokens, d.h, d.f, d.e));
    ops.push_back(gemm(p + "fc2.wgrad", d.f, tokens, d.h, d.e, d.f * d.h + d.h));
    ops.push_back(elementwise(p + "gelu.bwd", 8 * tokens * d.f, d.e * 3 * tokens * d.f));
    ops.push_back(gemm(p + "fc1.dgrad", tokens, d.f, d.h, d.e));
    ops.push_back(gemm(p + "fc1.wgrad", d.h, tokens, d.f, d.e, d.h * d.f + d.f));
    ops.push_back(elementwise(p + "ln2.bwd", 10 * act, d.e * 3 * act, 2 * d.h));
    ops.push_back(elementwise(p + "residual1.bwd", act, d.e * 2 * act + act));
    ops.push_back(gemm(p + "proj.dgrad", tokens, d.h, d.h, d.e));
    ops.push_back(gemm(p + "proj.wgrad", d.h, tokens, d.h, d.e, d.h * d.h + d.h));
    // Gradients of both attention matmuls w.r.t. both inputs: 2 x forward FLOPs each.
    ops.push_back(Op{p + "attn_values.bwd", OpKind::kGemm, flops(4 * d.B * d.s * d.s * d.h),
                     bytes(d.e * (2 * scores + 4 * act)), 0});
    ops.push_back(elementwise(p + "softmax.bwd", 4 * scores, d.e * 3 * scores + scores));
    ops.push_back(Op{p + "attn_scores.bwd", OpKind::kGemm, flops(4 * d.B * d.s * d.s * d.h),
                     bytes(d.e * (scores + 4 * act)), 0});
    ops.push_back(gemm(p + "qkv.dgrad", tokens, 3 * d.h, d.h, d.e));
    ops.push_back(gemm(p + "qkv.wgrad", d.h, tokens, 3 * d.h, d.e, 3 * d.h * d.h + 3 * d.h));
    ops.push_back(elementwise(p + "ln1.bwd", 10 * act, d.e * 3 * act, 2 * d.h));
  }
  ops.push_back(elementwise("embed.bwd", act, d.e * 2 * act + 4 * d.V * d.h, model.embedding_parameters()));
  return ops;
}

Op optimizer_op(double parameters) {
  return elementwise("optimizer.adam", 12 * parameters, 28 * parameters);
}

Flops model_flops(const ModelSpec& model, std::uint32_t micro_batch) {
  Flops total;
  for (const Op& op : forward_ops(model, micro_batch, Precision::kBF16))
    if (op.kind == OpKind::kGemm) total += op.flops;
  for (const Op& op : backward_ops(model, micro_batch, Precision::kBF16))
    if (op.kind == OpKind::kGemm) total += op.flops;
  return total;
}

}  // namespace clustersim::workloads
