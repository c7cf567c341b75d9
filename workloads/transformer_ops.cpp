#include "workloads/transformer_ops.h"

#include <algorithm>
#include <cassert>
#include <cctype>

namespace clustersim::workloads {

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "NONE";
    case Recompute::kSelective: return "SELECTIVE";
    case Recompute::kFull: return "FULL";
  }
  return "?";
}
const char* to_string(AttentionKernel k) { return k == AttentionKernel::kFlash ? "FLASH" : "EXPLICIT"; }
const char* to_string(AttentionFlops c) {
  return c == AttentionFlops::kCausalHalf ? "causal half (Megatron-LM current)"
                                          : "full square, no causal discount (Narayanan/Korthikanti/PaLM)";
}

namespace {

// Sizes of one rank's share of a micro-batch.
struct Dims {
  double B, s, h, V, e, t;
  double r;       // bytes of a residual-stream element: e, or 4 under autocast (OpConfig::autocast)
  double T;       // tokens B·s seen by GEMMs
  double Tn;      // tokens seen by norms, dropout, residuals: T, or T/t with sequence parallelism
  double a, kv;   // query and KV heads on this rank
  double d;       // head width
  double q, kvd;  // a·d and n_kv·d on this rank
  double V_r;     // vocabulary shard
  double cp;      // context-parallel degree: the rank holds s/cp tokens of each sequence
};

Dims dims_of(const ModelSpec& m, const OpConfig& c) {
  assert(c.tp >= 1 && c.ep >= 1 && c.cp >= 1 && "tensor-, expert- and context-parallel degrees are >= 1");
  assert((!c.autocast || c.eager) && "autocast is eager PyTorch's (OpConfig::autocast implies eager)");
  Dims d{};
  d.B = c.micro_batch;
  d.s = m.seq_len;
  d.h = m.hidden;
  d.V = m.vocab;
  d.e = element_bytes(c.precision);
  d.r = c.autocast ? 4 : d.e;
  d.t = c.tp;
  d.cp = c.cp;
  d.T = d.B * d.s / d.cp;
  d.Tn = c.sequence_parallel ? d.T / d.t : d.T;
  d.a = double(m.heads) / d.t;
  d.kv = double(m.n_kv()) / d.t;
  d.d = m.d_head();
  d.q = d.a * d.d;
  d.kvd = d.kv * d.d;
  d.V_r = d.V / d.t;
  return d;
}

// Y[M x N] = X[M x K]·W[K x N], `batch` times.
Op gemm(std::string name, double M, double K, double N, double e, double grad_params = 0, double batch = 1) {
  Op op{std::move(name), OpKind::kGemm, flops(2 * batch * M * K * N), bytes(batch * e * (M * K + K * N + M * N)),
        grad_params};
  op.m = M;
  op.n = N;
  op.k = K;
  op.batch = batch;
  return op;
}

Op elementwise(std::string name, double flop_count, double byte_count, double grad_params = 0) {
  return Op{std::move(name), OpKind::kElementwise, flops(flop_count), bytes(byte_count), grad_params};
}

// A batched attention GEMM whose bytes are given (the score matrix is written or read once per
// batch, Q/K/V per token).
Op attention_gemm(std::string name, double M, double K, double N, double batch, double byte_count) {
  Op op = gemm(std::move(name), M, K, N, 0, 0, batch);
  op.bytes = bytes(byte_count);
  op.attention_core = true;
  return op;
}

// One linear layer of the forward pass and its two backward GEMMs.
struct Linear {
  std::string name;
  double M, K, N, batch;
  double params;     // weight + bias parameters on this rank
  bool fp8 = true;   // in FP8 under Precision::kFP8 (Transformer Engine's linear layers; not the MoE router)
};

const char* activation_name(const ModelSpec& m) {
  if (m.activation == Activation::kSwiglu) return "swiglu";
  return m.gated_mlp ? "geglu" : "gelu";
}

class LayerBuilder {
 public:
  LayerBuilder(const ModelSpec& m, const OpConfig& c) : m_(m), c_(c), d_(dims_of(m, c)) {}
  const Dims& dims() const { return d_; }
  // Eager PyTorch's explicit attention between the two GEMMs under autocast (OpConfig::autocast), bytes per score
  // in nanoGPT's order (att * scale; masked_fill; softmax; dropout; att @ v), e = 2:
  //   forward   scale (read e, write e) + causal mask (read e, write e) + softmax to fp32 (FP16: one kernel, read 2,
  //             write 4; BF16: a cast, read 2 write 4, then an fp32 softmax, read 4 write 4: PyTorch fuses the
  //             conversion for Half only) + dropout in fp32 (read 4, write 4 and the 1-byte mask) + the cast ·V reads
  //             (read 4, write e): FP16 29, BF16 37 (without dropout 20, 28)
  //   backward  the cast's (read e, write 4) + dropout's (read 4 and the mask, write 4) + softmax's (FP16 one kernel,
  //             read 4 + 4 write 2; BF16 in fp32, read 4 + 4 write 4, then its input cast's, read 4 write e) + the
  //             mask's and the scale's (read e, write e each): FP16 33, BF16 41 (without dropout 24, 32)
  // and the kernels each runs: FP16 5 forward and 5 backward, BF16 6 and 6 (one fewer each without dropout).
  // Without autocast (OpConfig::eager alone) every kernel works in the activations' dtype: forward scale, mask and
  // softmax (read e, write e each) and dropout (read e, write e and the mask): 8e + 1; backward dropout's (read e and
  // the mask, write e), softmax's (read e + e, write e), the mask's and the scale's (read e, write e): 9e + 1;
  // without dropout 6e and 7e. Kernels 4 and 4 (3 and 3 without dropout).
  bool half_softmax() const { return c_.precision == Precision::kFP16; }
  double eager_softmax_bytes(bool forward) const {
    const double e = d_.e, dropout = m_.dropout ? 1 : 0;
    if (!c_.autocast) return forward ? 6 * e + dropout * (2 * e + 1) : 7 * e + dropout * (2 * e + 1);
    if (forward) return 2 * e + 2 * e + (half_softmax() ? e + 4 : (e + 4) + 8) + dropout * 9 + (4 + e);
    return (e + 4) + dropout * 9 + (half_softmax() ? 8 + e : 12 + (4 + e)) + 2 * e + 2 * e;
  }
  double eager_softmax_kernels() const { return (!c_.autocast ? 4 : half_softmax() ? 5 : 6) - (m_.dropout ? 0 : 1); }
  // Eager dropout and residual add (OpConfig::autocast), bytes per element: forward dropout of the 16-bit branch
  // (read e, write e and the mask) then the add that promotes to fp32 (read e + r, write r): 15 with dropout, 10
  // without; backward the add's gradient cast to the branch's 16 bits (read r, write e) then dropout's (read e and
  // the mask, write e): 11 and 6. Kernels 2 and 2 (1 and 1 without dropout). Without autocast (r = e) the add
  // neither promotes nor needs a cast back: forward 5e + 1 (3e), backward dropout's 2e + 1 (nothing without
  // dropout: the add's gradient reaches both branches as it is), kernels 2 and 1 (1 and 0).
  double eager_residual_bytes(bool forward) const {
    const double e = d_.e, r = d_.r, dropout = m_.dropout ? 1 : 0;
    const double cast_back = c_.autocast ? r + e : 0;
    return forward ? dropout * (2 * e + 1) + (e + 2 * r) : cast_back + dropout * (2 * e + 1);
  }
  double eager_residual_kernels(bool forward) const { return (m_.dropout ? 1 : 0) + (forward || c_.autocast ? 1 : 0); }
  // The dropout-and-residual-add op `name` over `act` elements: Megatron's fused kernel or eager PyTorch's; none
  // where eager PyTorch runs no kernel (the backward without autocast or dropout).
  void push_residual(std::vector<Op>& ops, const std::string& name, double act, bool forward) const {
    if (c_.eager && eager_residual_kernels(forward) == 0) return;
    const double per_element = c_.eager ? eager_residual_bytes(forward) : residual_bytes(forward);
    ops.push_back(elementwise(name, (forward ? 2 : 1) * act, per_element * act));
  }
  // Megatron's fused bias-dropout-add, bytes per element: forward reads the branch and the residual and writes the
  // sum (3e) and, with dropout, the 1-byte mask; backward reads the gradient and writes the branch's (2e), with
  // dropout reading the mask.
  double residual_bytes(bool forward) const { return (forward ? 3 : 2) * d_.e + (m_.dropout ? 1 : 0); }
  // Rotary position embedding (position ROPE) of Q and K, T·(q + kvd) elements on this rank, bytes per element:
  // Megatron-Core's fused kernel (apply_rope_fusion, Transformer Engine's fused_rope: one kernel for Q, one for
  // K, forward and backward) reads and writes each element once, 2e. Eager PyTorch (OpConfig::autocast; the
  // Hugging Face apply_rotary_pos_emb, x·cos + rotate_half(x)·sin with rotate_half = cat(−x2, x1)): forward
  // x·cos (2e), the negation of one half (e), the cat (2e), ·sin (2e), the add (3e) = 10e in 5 kernels per
  // tensor; backward g·cos (2e), g·sin (2e), the negation's (e), the two slices' zero-filled gradients (2e each)
  // and the two adds accumulating x's gradient (3e each) = 15e in 9 kernels per tensor.
  double rope_bytes(bool forward) const { return (c_.eager ? (forward ? 10 : 15) : 2) * d_.e; }
  double rope_kernels(bool forward) const { return c_.eager ? (forward ? 10 : 18) : 2; }
  bool rope() const { return m_.position == Position::kRope; }

  double norm_flops_fwd() const { return m_.norm == Norm::kLayerNorm ? 8 : 4; }
  double norm_flops_bwd() const { return m_.norm == Norm::kLayerNorm ? 10 : 6; }

  // The linear layers of layer `l` in forward order (attention first, then MLP or MoE MLP);
  // element-wise ops are added around them by forward()/backward().
  Linear qkv(const std::string& p) const {
    const double N = d_.q + 2 * d_.kvd;
    return {p + "qkv", d_.T, d_.h, N, 1, d_.h * N + (m_.biases ? N : 0)};
  }
  Linear proj(const std::string& p) const {
    return {p + "proj", d_.T, d_.q, d_.h, 1, d_.q * d_.h + (m_.biases ? d_.h : 0)};
  }
  // A dense MLP of full width f on T tokens: fc1 (gate+up when gated) and fc2.
  Linear fc1(const std::string& p, const char* n, double f) const {
    const double N = (m_.gated_mlp ? 2 : 1) * f / d_.t;
    return {p + n, d_.T, d_.h, N, 1, d_.h * N + (m_.biases ? N : 0)};
  }
  Linear fc2(const std::string& p, const char* n, double f) const {
    return {p + n, d_.T, f / d_.t, d_.h, 1, f / d_.t * d_.h + (m_.biases ? d_.h : 0)};
  }
  // Routed experts as a grouped GEMM: E/ep experts on this rank, T·top_k·ep/E tokens each.
  double local_experts() const { return double(m_.experts) / c_.ep; }
  double tokens_per_expert() const { return d_.T * m_.top_k * c_.ep / m_.experts * c_.expert_load; }
  // Tokens a rank permutes (and later un-permutes): with expert parallelism its own sequence shard (the
  // all-to-all dispatcher sends them, then the TP group all-gathers what it received); without, the
  // all-gather dispatcher gathers the TP group's tokens first.
  double permuted_tokens() const { return c_.ep > 1 ? d_.Tn : d_.T; }
  Linear expert_fc1(const std::string& p) const {
    const double N = (m_.gated_mlp ? 2 : 1) * m_.expert_ffn() / d_.t;
    return {p + "expert_fc1", tokens_per_expert(), d_.h, N, local_experts(),
            local_experts() * (d_.h * N + (m_.biases ? N : 0))};
  }
  Linear expert_fc2(const std::string& p) const {
    const double K = m_.expert_ffn() / d_.t;
    return {p + "expert_fc2", tokens_per_expert(), K, d_.h, local_experts(),
            local_experts() * (K * d_.h + (m_.biases ? d_.h : 0))};
  }

  Op fwd(const Linear& x) const { return in_fp8(x, gemm(x.name + ".fwd", x.M, x.K, x.N, d_.e, 0, x.batch)); }
  Op dgrad(const Linear& x) const { return in_fp8(x, gemm(x.name + ".dgrad", x.M, x.N, x.K, d_.e, 0, x.batch)); }
  Op wgrad(const Linear& x) const {
    return in_fp8(x, gemm(x.name + ".wgrad", x.K, x.M, x.N, d_.e, x.params, x.batch));
  }

  // FP8 (Precision::kFP8): the linear layer's three GEMMs read 1-byte operands and write 16-bit results.
  bool fp8(const Linear& x) const { return c_.precision == Precision::kFP8 && x.fp8; }
  Op in_fp8(const Linear& x, Op op) const {
    if (!fp8(x)) return op;
    op.fp8 = true;
    op.bytes = bytes(op.batch * (op.m * op.k + op.k * op.n + d_.e * op.m * op.n));
    return op;
  }
  // Transformer Engine quantises each FP8 GEMM's 16-bit activation input (forward: X, M x K) and output
  // gradient (backward: dY, M x N) to FP8 once, a row-wise copy and the transposed copy the other backward GEMM
  // reads: read e bytes, write 1 + 1 per element, with an absolute-max reduction for the scale (2 FLOPs per
  // element). Counted as its own kernel; TE fuses some of these casts into the preceding norm or activation,
  // which saves the read (not modelled: an upper bound). The weights' casts (once per optimizer step per
  // parameter) are not counted.
  Op cast(const Linear& x, bool forward) const {
    const double elements = x.batch * x.M * (forward ? x.K : x.N);
    return elementwise(x.name + "_cast" + (forward ? ".fwd" : ".bwd"), 2 * elements, (d_.e + 2) * elements);
  }

  // Activation of an MLP whose per-rank width is `f_r` on `tokens` tokens.
  Op act_fwd(const std::string& p, const char* n, double tokens, double f_r) const {
    const double x = tokens * f_r;
    return m_.gated_mlp ? elementwise(p + n + ".fwd", 8 * x, d_.e * 3 * x) : elementwise(p + n + ".fwd", 8 * x, d_.e * 2 * x);
  }
  Op act_bwd(const std::string& p, const char* n, double tokens, double f_r) const {
    const double x = tokens * f_r;
    return m_.gated_mlp ? elementwise(p + n + ".bwd", 10 * x, d_.e * 5 * x) : elementwise(p + n + ".bwd", 8 * x, d_.e * 3 * x);
  }

  // A fused attention kernel of this job's implementation (OpConfig::flash_kernel).
  Op fused(Op op, bool backward) const {
    op.fused_attention = true;
    op.attention_backward = backward;
    op.flash_kernel = c_.flash_kernel;
    return op;
  }

  // Ring attention (context parallelism, see the header): cp fused steps of a 2c×c half-block each,
  // c = s/(2·cp). Per step the kernel reads the local Q and the step's K and V, and updates O and the fp32
  // row statistics (forward); the backward step reads Q, K, V, O, dO and writes dQ, dK, dV.
  std::vector<Op> ring_attention(const std::string& p, bool forward) const {
    const double Ba = d_.B * d_.a, sl = d_.s / d_.cp, c = sl / 2, qt = d_.T * d_.q, kvt = d_.T * d_.kvd;
    std::vector<Op> ops;
    for (std::uint32_t j = 0; j < c_.cp; ++j) {
      const std::string name = p + "ring_attn" + std::to_string(j) + (forward ? ".fwd" : ".bwd");
      Op op = fused(forward ? attention_gemm(name, 2 * c, d_.d, c, 2 * Ba, d_.e * (2 * qt + 2 * kvt) + 4 * Ba * sl)
                            : attention_gemm(name, 2 * c, d_.d, c, 4 * Ba, d_.e * 4 * (qt + kvt) + 4 * Ba * sl),
                    !forward);
      op.causal_skipped = true;
      op.ring_step = int(j);
      ops.push_back(std::move(op));
    }
    return ops;
  }

  std::vector<Op> attention_core_fwd(const std::string& p) const {
    if (c_.cp > 1) return ring_attention(p, true);
    const double Ba = d_.B * d_.a, scores = Ba * d_.s * d_.s, qt = d_.T * d_.q, kvt = d_.T * d_.kvd;
    std::vector<Op> ops;
    if (c_.attention == AttentionKernel::kFlash) {
      // Fused: scores and ·V in one kernel; reads Q, K, V, writes O and the fp32 row statistics.
      ops.push_back(fused(attention_gemm(p + "flash_attn.fwd", d_.s, d_.d, d_.s, 2 * Ba,
                                         d_.e * (2 * qt + 2 * kvt) + 4 * Ba * d_.s),
                          false));
      return ops;
    }
    // Q·Kᵀ per head: [s x d]·[d x s]; writes the B·a·s² scores.
    ops.push_back(attention_gemm(p + "attn_scores.fwd", d_.s, d_.d, d_.s, Ba, d_.e * (qt + kvt + scores)));
    // Megatron's CoreAttention: the fused scale-mask-softmax kernel (reads the scores, writes P), then the
    // attention dropout as its own kernel (reads P, writes the dropped P and a 1-byte mask): 4e + 1 B per score.
    // Without dropout (p = 0: PyTorch's dropout returns its input, no kernel, no mask) 2e B.
    // Eager PyTorch runs its own kernels instead (eager_softmax_bytes).
    const double per_score = c_.eager ? eager_softmax_bytes(true) : m_.dropout ? d_.e * 4 + 1 : d_.e * 2;
    Op softmax = elementwise(p + "softmax.fwd", 5 * scores, per_score * scores);
    softmax.attention_core = true;
    ops.push_back(softmax);
    // P·V per head: [s x s]·[s x d].
    ops.push_back(attention_gemm(p + "attn_values.fwd", d_.s, d_.s, d_.d, Ba, d_.e * (scores + kvt + qt)));
    return ops;
  }

  std::vector<Op> attention_core_bwd(const std::string& p) const {
    if (c_.cp > 1) return ring_attention(p, false);
    const double Ba = d_.B * d_.a, scores = Ba * d_.s * d_.s, qt = d_.T * d_.q, kvt = d_.T * d_.kvd;
    std::vector<Op> ops;
    if (c_.attention == AttentionKernel::kFlash) {
      // Reads Q, K, V, O, dO and the statistics; writes dQ, dK, dV. Twice the forward FLOPs.
      ops.push_back(fused(attention_gemm(p + "flash_attn.bwd", d_.s, d_.d, d_.s, 4 * Ba,
                                         d_.e * 4 * (qt + kvt) + 4 * Ba * d_.s),
                          true));
      return ops;
    }
    // dP = dO·Vᵀ and dV = Pᵀ·dO: twice the forward FLOPs.
    ops.push_back(attention_gemm(p + "attn_values.bwd", d_.s, d_.d, d_.s, 2 * Ba, d_.e * (2 * scores + 2 * qt + 2 * kvt)));
    // The dropout's backward (reads dP' and the mask, writes dP) and the fused softmax backward (reads dP and
    // P, writes dS): 5e + 1 B per score; 3e without dropout.
    // Eager PyTorch: eager_softmax_bytes.
    const double per_score = c_.eager ? eager_softmax_bytes(false) : m_.dropout ? d_.e * 5 + 1 : d_.e * 3;
    Op softmax = elementwise(p + "softmax.bwd", 4 * scores, per_score * scores);
    softmax.attention_core = true;
    ops.push_back(softmax);
    // dQ = dS·K and dK = dSᵀ·Q.
    ops.push_back(attention_gemm(p + "attn_scores.bwd", d_.s, d_.s, d_.d, 2 * Ba, d_.e * (scores + 2 * qt + 2 * kvt)));
    return ops;
  }

  std::vector<Op> forward(std::uint32_t layer) const {
    const std::string p = "L" + std::to_string(layer) + ".";
    const double act = d_.Tn * d_.h;
    std::vector<Op> ops;
    auto push_fwd = [&](const Linear& x) {
      if (fp8(x)) ops.push_back(cast(x, true));
      ops.push_back(fwd(x));
    };
    ops.push_back(elementwise(p + "ln1.fwd", norm_flops_fwd() * act, d_.r * 2 * act));
    if (c_.autocast) ops.push_back(elementwise(p + "ln1_cast.fwd", act, (d_.r + d_.e) * act));
    push_fwd(qkv(p));
    const double rotated = d_.T * (d_.q + d_.kvd);  // Q and K elements
    if (rope()) ops.push_back(elementwise(p + "rope.fwd", 3 * rotated, rope_bytes(true) * rotated));
    for (Op& op : attention_core_fwd(p)) ops.push_back(std::move(op));
    push_fwd(proj(p));
    push_residual(ops, p + "residual1.fwd", act, true);
    ops.push_back(elementwise(p + "ln2.fwd", norm_flops_fwd() * act, d_.r * 2 * act));
    if (c_.autocast) ops.push_back(elementwise(p + "ln2_cast.fwd", act, (d_.r + d_.e) * act));
    if (m_.is_moe_layer(layer)) {
      const double routed = d_.T * m_.top_k, fe = m_.expert_ffn();
      const double tl = permuted_tokens(), pl = tl * m_.top_k;
      ops.push_back(gemm(p + "router.fwd", d_.Tn, d_.h, m_.experts, d_.e));
      ops.push_back(elementwise(p + "moe_dispatch.fwd", 0, d_.e * (tl * d_.h + pl * d_.h)));
      push_fwd(expert_fc1(p));
      ops.push_back(act_fwd(p, "expert_act", routed * c_.expert_load, fe / d_.t));
      push_fwd(expert_fc2(p));
      ops.push_back(elementwise(p + "moe_combine.fwd", 2 * pl * d_.h, d_.e * (pl * d_.h + tl * d_.h)));
      if (m_.shared_experts > 0) {
        const double fs = double(m_.shared_experts) * fe;
        push_fwd(fc1(p, "shared_fc1", fs));
        ops.push_back(act_fwd(p, "shared_act", d_.T, fs / d_.t));
        push_fwd(fc2(p, "shared_fc2", fs));
      }
    } else {
      push_fwd(fc1(p, "fc1", m_.ffn_hidden));
      ops.push_back(act_fwd(p, activation_name(m_), d_.T, m_.ffn_hidden / d_.t));
      push_fwd(fc2(p, "fc2", m_.ffn_hidden));
    }
    push_residual(ops, p + "residual2.fwd", act, true);
    return ops;
  }

  std::vector<Op> backward(std::uint32_t layer) const {
    const std::string p = "L" + std::to_string(layer) + ".";
    const double act = d_.Tn * d_.h;
    std::vector<Op> ops;
    auto add_linear = [&](const Linear& x) {
      if (fp8(x)) ops.push_back(cast(x, false));
      ops.push_back(dgrad(x));
      ops.push_back(wgrad(x));
    };
    push_residual(ops, p + "residual2.bwd", act, false);
    if (m_.is_moe_layer(layer)) {
      const double routed = d_.T * m_.top_k, fe = m_.expert_ffn();
      const double tl = permuted_tokens(), pl = tl * m_.top_k;
      if (m_.shared_experts > 0) {
        const double fs = double(m_.shared_experts) * fe;
        add_linear(fc2(p, "shared_fc2", fs));
        ops.push_back(act_bwd(p, "shared_act", d_.T, fs / d_.t));
        add_linear(fc1(p, "shared_fc1", fs));
      }
      ops.push_back(elementwise(p + "moe_combine.bwd", 2 * pl * d_.h, d_.e * (pl * d_.h + tl * d_.h)));
      add_linear(expert_fc2(p));
      ops.push_back(act_bwd(p, "expert_act", routed * c_.expert_load, fe / d_.t));
      add_linear(expert_fc1(p));
      ops.push_back(elementwise(p + "moe_dispatch.bwd", pl * d_.h, d_.e * (tl * d_.h + pl * d_.h)));
      add_linear(Linear{p + "router", d_.Tn, d_.h, double(m_.experts), 1, m_.router_parameters(), false});
    } else {
      add_linear(fc2(p, "fc2", m_.ffn_hidden));
      ops.push_back(act_bwd(p, activation_name(m_), d_.T, m_.ffn_hidden / d_.t));
      add_linear(fc1(p, "fc1", m_.ffn_hidden));
    }
    if (c_.autocast) ops.push_back(elementwise(p + "ln2_cast.bwd", act, (d_.e + d_.r) * act));
    ops.push_back(elementwise(p + "ln2.bwd", norm_flops_bwd() * act, d_.r * 3 * act, m_.norm_parameters()));
    push_residual(ops, p + "residual1.bwd", act, false);
    add_linear(proj(p));
    for (Op& op : attention_core_bwd(p)) ops.push_back(std::move(op));
    const double rotated = d_.T * (d_.q + d_.kvd);
    if (rope()) ops.push_back(elementwise(p + "rope.bwd", 3 * rotated, rope_bytes(false) * rotated));
    add_linear(qkv(p));
    if (c_.autocast) ops.push_back(elementwise(p + "ln1_cast.bwd", act, (d_.e + d_.r) * act));
    ops.push_back(elementwise(p + "ln1.bwd", norm_flops_bwd() * act, d_.r * 3 * act, m_.norm_parameters()));
    return ops;
  }

 private:
  const ModelSpec& m_;
  const OpConfig& c_;
  Dims d_;
};

std::uint32_t last_layer(const ModelSpec& m, const OpConfig& c) {
  const std::uint32_t end = c.layer_count == 0 ? m.layers : std::min(m.layers, c.first_layer + c.layer_count);
  return std::max(end, c.first_layer);
}

Op recomputed(Op op) {
  const std::string suffix = ".fwd";
  if (op.name.size() >= suffix.size() && op.name.compare(op.name.size() - suffix.size(), suffix.size(), suffix) == 0)
    op.name.replace(op.name.size() - suffix.size(), suffix.size(), ".recompute");
  op.recomputed = true;
  return op;
}

}  // namespace

double dispatch_kernels(const std::string& name, bool biases) {
  if (name.starts_with("optimizer.")) return 20;
  // "L3.qkv.dgrad" → base "qkv", pass "dgrad".
  const std::size_t dot = name.rfind('.');
  const std::string pass = dot == std::string::npos ? std::string() : name.substr(dot + 1);
  std::string base = dot == std::string::npos ? name : name.substr(0, dot);
  if (base.size() > 1 && base[0] == 'L' && std::isdigit(static_cast<unsigned char>(base[1])))
    base = base.substr(base.find('.') + 1);
  if (base.ends_with("_cast")) return 1;  // FP8 cast(-transpose), any pass: one kernel
  double forward = 1;  // norms, projections, MLP GEMMs and activations, bias-dropout-add, LM head
  if (base == "qkv") forward = biases ? 2 : 1;
  else if (base == "softmax" || base == "attn_values") forward = 2;
  else if (base == "flash_attn" || base == "router" || base == "moe_combine") forward = 3;
  else if (base == "moe_dispatch" || base == "embed") forward = 4;
  else if (base == "loss") forward = 12;
  else if (base == "rope")
    return 2;  // fused RoPE: one kernel for Q, one for K, either pass
  if (pass == "bwd") return 2 * forward;
  return forward;  // fwd, recompute, dgrad, wgrad
}

// The cross-entropy over the vocabulary as Megatron-LM's vocab-parallel cross-entropy runs it: unfused passes over
// the T x V/t logits in fp32 (eager PyTorch's F.cross_entropy: eager_cross_entropy_bytes_per_logit below).
// Bytes per logit, for logits of e bytes from the LM head GEMM:
//   forward  logits.float() (read e, write 4; none when e = 4) + row max (read 4) + subtract the max (read 4,
//            write 4) + exp in place (read 4, write 4) + row sum (read 4) + divide in place, kept for backward
//            (read 4, write 4) = cast + 32 B: 38 B with 16-bit logits, 32 B in fp32
//   backward softmax · dloss in place (read 4, write 4) + the cast's backward (read 4, write e; none when
//            e = 4) = 8 B + cast: 14 B with 16-bit logits, 8 B in fp32
// (the gather of the target logit and the one-hot subtraction touch T elements, not T·V). The logits' memory
// (memory_model.h, "output layer and loss (fp32 logits)") is the same fp32 copy.
namespace {

double cross_entropy_cast_bytes_per_logit(double element_bytes) { return element_bytes < 4 ? element_bytes + 4 : 0; }
double cross_entropy_fwd_bytes_per_logit(double element_bytes) {
  return cross_entropy_cast_bytes_per_logit(element_bytes) + 32;
}
double cross_entropy_bwd_bytes_per_logit(double element_bytes) {
  return 8 + cross_entropy_cast_bytes_per_logit(element_bytes);
}

// PyTorch's F.cross_entropy as eager PyTorch runs it (OpConfig::eager) under autocast (cross_entropy is one of
// autocast's fp32 ops) or without it (Hugging Face's causal-LM loss upcasts the logits with .float() first, the
// same kernels; fp32 logits need no cast: 2 and 3 kernels): forward the cast of the 16-bit logits (read e, write
// 4) and one log_softmax kernel (read 4, write 4, kept for backward), nll_loss reading the T target entries only: e +
// 12 B per logit (14 with e = 2), 3 kernels; backward nll_loss's gradient, a zeroed fp32 T x V tensor with the targets
// scattered in (write 4), log_softmax's backward (read 4 + 4, write 4) and the cast's (read 4, write e): 20 + e B (22),
// 4 kernels.
double eager_cross_entropy_bytes_per_logit(double element_bytes, bool forward) {
  return forward ? cross_entropy_cast_bytes_per_logit(element_bytes) + 8
                 : 4 + 12 + cross_entropy_cast_bytes_per_logit(element_bytes);
}

// Op::kernels: dispatch_kernels' count (Megatron-LM's fused kernels), or in eager PyTorch (OpConfig::eager) the
// eager kernels of the ops whose fusion eager PyTorch does not have: the explicit attention's softmax part, dropout
// and residual add, and the cross-entropy.
double eager_kernels(const Op& op, const OpConfig& config, const LayerBuilder& builder, bool biases) {
  const double megatron = dispatch_kernels(op.name, biases);
  if (!config.eager) return megatron;
  auto is = [&](std::string_view suffix) { return op.name.ends_with(suffix); };
  if (is("softmax.fwd") || is("softmax.bwd")) return builder.eager_softmax_kernels();
  if (is("residual1.fwd") || is("residual2.fwd")) return builder.eager_residual_kernels(true);
  if (is("residual1.bwd") || is("residual2.bwd")) return builder.eager_residual_kernels(false);
  if (is("rope.fwd") || is("rope.bwd")) return builder.rope_kernels(is("rope.fwd"));
  const double cast = builder.dims().e < 4 ? 1 : 0;  // no cast of fp32 logits
  if (op.name == "loss.fwd") return 2 + cast;
  if (op.name == "loss.bwd") return 3 + cast;
  return megatron;
}

}  // namespace

std::vector<Op> forward_ops(const ModelSpec& model, const OpConfig& config) {
  const LayerBuilder builder(model, config);
  const Dims& d = builder.dims();
  const double act = d.T * d.h;  // one [B, s, h] activation
  std::vector<Op> ops;
  // The word-embedding gather (read the rows, write the output), plus with learned positions the read of the
  // position rows and their add.
  const double embed_bytes = (model.position == Position::kLearned ? 3 : 2) * d.r * act;
  if (config.embedding) ops.push_back(elementwise("embed.fwd", act, embed_bytes));
  for (std::uint32_t l = config.first_layer; l < last_layer(model, config); ++l)
    for (Op& op : builder.forward(l)) ops.push_back(std::move(op));
  if (config.head) {
    const double act_n = d.Tn * d.h;
    ops.push_back(elementwise("final_ln.fwd", builder.norm_flops_fwd() * act_n, d.r * 2 * act_n));
    // The LM head is a 16-bit GEMM under every precision: autocast casts its input.
    if (config.autocast) ops.push_back(elementwise("final_ln_cast.fwd", act_n, (d.r + d.e) * act_n));
    ops.push_back(gemm("lm_head.fwd", d.T, d.h, d.V_r, d.e));
    const double per_logit =
        config.eager ? eager_cross_entropy_bytes_per_logit(d.e, true) : cross_entropy_fwd_bytes_per_logit(d.e);
    ops.push_back(elementwise("loss.fwd", 5 * d.T * d.V_r, per_logit * d.T * d.V_r));
  }
  for (Op& op : ops) op.kernels = eager_kernels(op, config, builder, model.biases);
  return ops;
}

std::vector<Op> backward_ops(const ModelSpec& model, const OpConfig& config) {
  const LayerBuilder builder(model, config);
  const Dims& d = builder.dims();
  const double act = d.T * d.h;
  const double word_embedding = d.V_r * d.h;
  std::vector<Op> ops;
  if (config.head) {
    const double act_n = d.Tn * d.h;
    const double per_logit =
        config.eager ? eager_cross_entropy_bytes_per_logit(d.e, false) : cross_entropy_bwd_bytes_per_logit(d.e);
    ops.push_back(elementwise("loss.bwd", 3 * d.T * d.V_r, per_logit * d.T * d.V_r));
    // An untied head owns its weight; a tied one shares the word embedding, whose gradient
    // completes in embed.bwd — or here, on a last pipeline stage that holds its own copy.
    const double head_params = (!model.tied_embeddings || !config.embedding) ? word_embedding : 0;
    ops.push_back(gemm("lm_head.dgrad", d.T, d.V_r, d.h, d.e));
    ops.push_back(gemm("lm_head.wgrad", d.h, d.T, d.V_r, d.e, head_params));
    if (config.autocast) ops.push_back(elementwise("final_ln_cast.bwd", act_n, (d.e + d.r) * act_n));
    ops.push_back(
        elementwise("final_ln.bwd", builder.norm_flops_bwd() * act_n, d.r * 3 * act_n, model.norm_parameters()));
  }
  for (std::uint32_t i = last_layer(model, config); i-- > config.first_layer;) {
    if (config.recompute == Recompute::kFull) {
      for (Op& op : builder.forward(i)) ops.push_back(recomputed(std::move(op)));
    } else if (config.recompute == Recompute::kSelective) {
      for (Op& op : builder.forward(i))
        if (op.attention_core) ops.push_back(recomputed(std::move(op)));
    }
    for (Op& op : builder.backward(i)) ops.push_back(std::move(op));
  }
  if (config.embedding) {
    const double position = model.position == Position::kLearned ? double(model.seq_len) * model.hidden : 0.0;
    ops.push_back(elementwise("embed.bwd", act, d.r * 2 * act + 4 * word_embedding, word_embedding + position));
  }
  for (Op& op : ops) op.kernels = eager_kernels(op, config, builder, model.biases);
  return ops;
}

namespace {

// The whole model on one GPU, one micro-batch; under eager PyTorch (`eager`) with autocast below fp32.
OpConfig whole_model_config(std::uint32_t micro_batch, Precision precision, bool eager,
                            AttentionKernel attention = AttentionKernel::kExplicit,
                            FlashKernel flash_kernel = FlashKernel::kGeneric) {
  OpConfig c;
  c.micro_batch = micro_batch;
  c.precision = precision;
  c.eager = eager;
  c.autocast = eager && eager_autocast(precision);
  c.attention = attention;
  c.flash_kernel = flash_kernel;
  return c;
}

}  // namespace

bool eager_autocast(Precision precision) {
  return element_bytes(precision) < 4;
}

std::vector<Op> forward_ops(const ModelSpec& model, std::uint32_t micro_batch, Precision precision) {
  return forward_ops(model, whole_model_config(micro_batch, precision, false));
}

std::vector<Op> backward_ops(const ModelSpec& model, std::uint32_t micro_batch, Precision precision) {
  return backward_ops(model, whole_model_config(micro_batch, precision, false));
}

std::vector<Op> eager_forward_ops(const ModelSpec& model, std::uint32_t micro_batch, Precision precision,
                                  AttentionKernel attention, FlashKernel flash_kernel) {
  return forward_ops(model, whole_model_config(micro_batch, precision, true, attention, flash_kernel));
}

std::vector<Op> eager_backward_ops(const ModelSpec& model, std::uint32_t micro_batch, Precision precision,
                                   AttentionKernel attention, FlashKernel flash_kernel) {
  return backward_ops(model, whole_model_config(micro_batch, precision, true, attention, flash_kernel));
}

ExpertLoad expert_load(const ModelSpec& model, std::uint32_t ep, double capacity_factor, double skew) {
  ExpertLoad out;
  if (model.experts < 2 || (capacity_factor <= 0 && skew <= 0)) {
    if (capacity_factor > 0) out.busiest_rank = out.other_rank = std::min(1.0, capacity_factor);
    return out;
  }
  const double E = model.experts, local = E / std::max(ep, 1u);
  auto cap = [&](double load) { return capacity_factor > 0 ? std::min(load, capacity_factor) : load; };
  const double busiest = cap(1 + skew), other = cap(std::max(0.0, 1 - skew / (E - 1)));
  out.busiest_rank = (busiest + (local - 1) * other) / local;
  out.other_rank = other;
  return out;
}

Bytes ring_kv_bytes(const ModelSpec& model, const OpConfig& config) {
  const Dims d = dims_of(model, config);
  return bytes(2 * d.T * d.kvd * d.e);
}

Bytes moe_alltoall_bytes(const ModelSpec& model, const OpConfig& config, double load) {
  const Dims d = dims_of(model, config);
  return bytes(d.Tn * model.top_k * d.h * d.e * load);
}

Bytes moe_tp_gather_bytes(const ModelSpec& model, const OpConfig& config, double load) {
  const Dims d = dims_of(model, config);
  return bytes(d.T * model.top_k * d.h * d.e * load);
}

double routed_fraction_computed(const ModelSpec& model, double capacity_factor, double skew) {
  // One rank holding every expert computes the mean of their capped loads.
  return expert_load(model, 1, capacity_factor, skew).busiest_rank;
}

Op copy_op(std::string name, Bytes size) {
  Op op;
  op.name = std::move(name);
  op.kind = OpKind::kElementwise;
  op.bytes = size * 2.0;
  return op;
}

Op optimizer_op(double parameters, Optimizer optimizer, double gradient_bytes, bool half_weight_copy) {
  const double states = optimizer == Optimizer::kAdam ? 2 : optimizer == Optimizer::kSgdMomentum ? 1 : 0;
  const double flops = optimizer == Optimizer::kAdam ? 12 : optimizer == Optimizer::kSgdMomentum ? 4 : 2;
  const double bytes_per_parameter = gradient_bytes + 8 + 8 * states + (half_weight_copy ? 2 : 0);
  const char* name = optimizer == Optimizer::kAdam          ? "optimizer.adam"
                     : optimizer == Optimizer::kSgdMomentum ? "optimizer.sgd_momentum"
                                                            : "optimizer.sgd";
  Op op = elementwise(name, flops * parameters, bytes_per_parameter * parameters);
  op.kernels = dispatch_kernels(op.name, true);
  return op;
}

namespace {

Flops gemm_flops(const ModelSpec& model, const OpConfig& config, AttentionFlops convention, bool with_recompute) {
  Flops total;
  auto add = [&](const std::vector<Op>& ops) {
    for (const Op& op : ops) {
      if (op.kind != OpKind::kGemm || (op.recomputed && !with_recompute)) continue;
      // Full-square FLOPs of the op: ring-attention steps already leave out the masked half.
      const Flops full = op.causal_skipped ? op.flops * 2.0 : op.flops;
      total += (op.attention_core && convention == AttentionFlops::kCausalHalf) ? full * 0.5 : full;
    }
  };
  add(forward_ops(model, config));
  add(backward_ops(model, config));
  return total;
}

}  // namespace

Flops model_flops(const ModelSpec& model, const OpConfig& config, AttentionFlops convention) {
  return gemm_flops(model, config, convention, false);
}

Flops hardware_flops(const ModelSpec& model, const OpConfig& config, AttentionFlops convention) {
  return gemm_flops(model, config, convention, true);
}

Flops model_flops(const ModelSpec& model, std::uint32_t micro_batch, double routed_fraction) {
  OpConfig c;
  c.micro_batch = micro_batch;
  c.expert_load = routed_fraction;
  return model_flops(model, c);
}

}  // namespace clustersim::workloads
