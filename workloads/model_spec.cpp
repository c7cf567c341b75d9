#include "workloads/model_spec.h"

namespace clustersim::workloads {

const char* to_string(Activation a) { return a == Activation::kSwiglu ? "SWIGLU" : "GELU"; }
const char* to_string(Norm n) { return n == Norm::kRmsNorm ? "RMSNORM" : "LAYERNORM"; }
const char* to_string(Position p) { return p == Position::kRope ? "ROPE" : "LEARNED"; }

bool ModelSpec::is_moe_layer(std::uint32_t layer) const {
  const std::uint32_t every = moe_layer_frequency ? moe_layer_frequency : 1;
  return experts > 0 && layer >= first_dense_layers && layer % every == 0;
}

std::uint32_t ModelSpec::moe_layer_count() const {
  std::uint32_t n = 0;
  for (std::uint32_t i = 0; i < layers; ++i) n += is_moe_layer(i) ? 1 : 0;
  return n;
}

double ModelSpec::norm_parameters() const { return (norm == Norm::kLayerNorm ? 2.0 : 1.0) * hidden; }

double ModelSpec::attention_parameters() const {
  const double h = hidden, q = double(heads) * d_head(), kv = double(n_kv()) * d_head();
  const double weights = h * q + 2 * h * kv + q * h;
  return weights + (biases ? q + 2 * kv + h : 0.0);
}

double ModelSpec::mlp_parameters(double f) const {
  const double h = hidden;
  const double weights = (gated_mlp ? 3.0 : 2.0) * h * f;
  return weights + (biases ? (gated_mlp ? 2 * f : f) + h : 0.0);
}

double ModelSpec::dense_layer_parameters() const {
  return attention_parameters() + mlp_parameters(ffn_hidden) + 2 * norm_parameters();
}

double ModelSpec::moe_layer_parameters() const {
  return attention_parameters() + router_parameters() + double(experts + shared_experts) * mlp_parameters(expert_ffn()) +
         2 * norm_parameters();
}

double ModelSpec::layer_parameters(std::uint32_t layer) const {
  return is_moe_layer(layer) ? moe_layer_parameters() : dense_layer_parameters();
}

double ModelSpec::embedding_parameters() const {
  return double(vocab) * hidden + (position == Position::kLearned ? double(seq_len) * hidden : 0.0);
}

double ModelSpec::parameter_count() const {
  const double moe = moe_layer_count();
  return (layers - moe) * dense_layer_parameters() + moe * moe_layer_parameters() + embedding_parameters() +
         output_parameters() + norm_parameters();
}

double ModelSpec::active_parameter_count() const {
  if (!is_moe()) return parameter_count();
  const double inactive = double(experts - top_k) * mlp_parameters(expert_ffn());
  return parameter_count() - moe_layer_count() * inactive;
}

}  // namespace clustersim::workloads
