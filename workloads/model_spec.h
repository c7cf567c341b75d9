// ModelSpec: a decoder-only transformer (validated value of workloads/model.proto): dense GPT
// (GPT-2/3, Megatron's GPT), LLaMA-style (GQA, SwiGLU, RMSNorm, RoPE, no biases, untied output
// layer) and mixture-of-experts (Mixtral; DeepSeekMoE with shared experts and leading dense layers).
//
// Parameter count. Symbols: l layers, h hidden, a heads, n_kv key/value heads, d head dimension
// (default h/a), f FFN width, V vocabulary, s sequence length, E routed experts, S shared experts,
// f_e expert FFN width.
//  * attention: Q h·a·d, K and V h·n_kv·d each, output a·d·h; biases a·d + 2·n_kv·d + h.
//    With n_kv = a and d = h/a this is 4h² + 4h.
//  * MLP of width f: 2·h·f (3·h·f gated: gate, up, down) with biases f + h (2f + h gated).
//  * norms: two per layer; LayerNorm has a scale and a bias (2h), RMSNorm a scale only (h).
//  * MoE layer: the MLP is replaced by a router h·E (no bias) and (E + S) MLPs of width f_e.
//  * embeddings: word V·h, learned positions s·h; an untied output layer adds V·h; a final norm.
// This is the generalised count of Megatron-LM (`theoretical_memory_usage.py:
// compute_weight_and_optimizer_memory`: per layer 2h·(f·g + norm) + 2h²·(1 + n_kv/a)·(d·a/h),
// g = 3/2 for SwiGLU, MoE FFN × experts) with biases and norms counted exactly; for a GPT with
// f = 4h it equals Narayanan et al. 2021 (SC'21 §5.1) P = 12·l·h²·(1 + 13/(12h) + (V + s)/(12·l·h))
// plus the final LayerNorm (2h).
// Which layers are MoE follows DeepSeek's `first_k_dense_replace` / `moe_layer_freq`
// (HF `modeling_deepseek.py`): layer i (0-based) is MoE iff experts > 0, i ≥ first_dense_layers and
// i mod moe_layer_frequency = 0.
//
// Zero in kv_heads, head_dim or moe_ffn_hidden means "the default" (heads, hidden/heads,
// ffn_hidden), so aggregate initialisation of the first seven fields keeps describing a GPT.
#pragma once

#include <cstdint>
#include <string>

namespace clustersim::workloads {

enum class Activation { kGelu, kSwiglu };
enum class Norm { kLayerNorm, kRmsNorm };
enum class Position { kLearned, kRope };

const char* to_string(Activation a);
const char* to_string(Norm n);
const char* to_string(Position p);

struct ModelSpec {
  std::string name;
  std::uint32_t layers = 0;
  std::uint32_t hidden = 0;
  std::uint32_t heads = 0;
  std::uint32_t ffn_hidden = 0;
  std::uint32_t vocab = 0;
  std::uint32_t seq_len = 0;
  // Architecture (defaults: GPT-2/3).
  std::uint32_t kv_heads = 0;          // GQA groups; 0 = heads (multi-head attention)
  std::uint32_t head_dim = 0;          // 0 = hidden / heads
  bool gated_mlp = false;              // gate and up projections (3 matrices)
  Activation activation = Activation::kGelu;
  Norm norm = Norm::kLayerNorm;
  Position position = Position::kLearned;
  bool tied_embeddings = true;         // LM head shares the word embedding
  bool biases = true;                  // linear layers carry biases
  bool dropout = true;                 // trained with dropout: its masks are stored (workloads/memory_model.h)
  // Mixture of experts (experts = 0: dense).
  std::uint32_t experts = 0;           // routed experts per MoE layer
  std::uint32_t top_k = 0;             // routed experts per token
  std::uint32_t shared_experts = 0;    // always-active experts per MoE layer
  std::uint32_t moe_ffn_hidden = 0;    // FFN width of one expert; 0 = ffn_hidden
  std::uint32_t moe_layer_frequency = 1;
  std::uint32_t first_dense_layers = 0;

  bool operator==(const ModelSpec&) const = default;

  std::uint32_t n_kv() const { return kv_heads ? kv_heads : heads; }
  std::uint32_t d_head() const { return head_dim ? head_dim : (heads ? hidden / heads : 0); }
  std::uint32_t expert_ffn() const { return moe_ffn_hidden ? moe_ffn_hidden : ffn_hidden; }
  bool is_moe() const { return experts > 0; }
  bool is_moe_layer(std::uint32_t layer) const;
  std::uint32_t moe_layer_count() const;

  // Parameters of one norm, one attention block, and one MLP of FFN width f.
  double norm_parameters() const;
  double attention_parameters() const;
  double mlp_parameters(double f) const;
  double router_parameters() const { return double(hidden) * experts; }
  // Whole layers: a dense one, an MoE one; layer_parameters(i) picks by index.
  double dense_layer_parameters() const;
  double moe_layer_parameters() const;
  double layer_parameters(std::uint32_t layer) const;
  // Dense layer (kept name of the GPT-only model).
  double parameters_per_layer() const { return dense_layer_parameters(); }
  // Input side: word embedding V·h plus learned positions s·h.
  double embedding_parameters() const;
  // The untied output layer V·h (0 when tied).
  double output_parameters() const { return tied_embeddings ? 0.0 : double(vocab) * hidden; }
  double parameter_count() const;
  // Parameters one token passes through: routed experts count top_k of E.
  double active_parameter_count() const;
};

}  // namespace clustersim::workloads
