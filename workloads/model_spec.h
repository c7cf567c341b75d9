// ModelSpec: a dense GPT-style decoder-only transformer (validated value of workloads/model.proto).
//
// Parameter count (Narayanan et al. 2021, SC'21 §5.1, with f = 4h):
//   P = 12·l·h²·(1 + 13/(12h) + (V + s)/(12·l·h))
// generalised here to any FFN width f: per layer 4h² + 4h (attention QKV+proj with biases)
// + 2hf + f + h (MLP with biases) + 4h (two LayerNorms); plus V·h tied embedding, s·h positions,
// 2h final LayerNorm.
#pragma once

#include <cstdint>
#include <string>

namespace clustersim::workloads {

struct ModelSpec {
  std::string name;
  std::uint32_t layers = 0;
  std::uint32_t hidden = 0;
  std::uint32_t heads = 0;
  std::uint32_t ffn_hidden = 0;
  std::uint32_t vocab = 0;
  std::uint32_t seq_len = 0;

  double parameters_per_layer() const {
    const double h = hidden, f = ffn_hidden;
    return 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;
  }
  double embedding_parameters() const { return double(vocab) * hidden + double(seq_len) * hidden; }
  double parameter_count() const {
    return layers * parameters_per_layer() + embedding_parameters() + 2.0 * hidden;
  }
};

}  // namespace clustersim::workloads
