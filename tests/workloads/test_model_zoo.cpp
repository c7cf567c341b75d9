// The model zoo (scenarios/models/*.txtpb): every model loads by preset name, its parameter count
// agrees with the published one, presets can be overridden inline, the resolved scenario reloads to
// the same model, and bad model fields are input errors at file:line:col with the field path.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "cli/scenario_loader.h"
#include "tests/test_support.h"
#include "workloads/transformer_ops.h"

using namespace clustersim;
using namespace clustersim::workloads;

namespace {

std::string scenario_with(const std::string& model_block) {
  return "cluster { nodes: 1 gpus_per_node: 1 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300\n"
         "          nic_gbits_per_s_per_direction: 200 }\n"
         "profile: \"a100-sxm4-80gb\"\n"
         "model {\n" +
         model_block +
         "}\n"
         "parallel { dp: 1 micro_batch: 1 }\n"
         "training { samples: 100 }\n";
}

ModelSpec load(const std::string& model_block) {
  return cli::load_scenario_text(scenario_with(model_block), "zoo.textproto", false, "").jobs[0].model;
}

ModelSpec preset(const std::string& name) { return load("  preset: \"" + name + "\"\n"); }

std::string model_error(const std::string& model_block) {
  return clustersim::testing::input_error_of([&] { load(model_block); });
}

struct Published {
  const char* preset;
  double parameters;  // the published count
  double rounding;    // half a unit of its last published digit (0 for an exact count)
};

// Published counts. GPT rows: Narayanan et al. 2021 (SC'21) Table 1, which prints one decimal
// (so "1.7" means 1.65–1.75 B; those two-digit rows get their rounding as tolerance). GPT-3 175B:
// Brown et al. 2020 Table 2.1. LLaMA, Mixtral, DeepSeekMoE: the exact counts of the released
// checkpoints (Hugging Face safetensors metadata: meta-llama/Llama-2-{7,13,70}b-hf,
// meta-llama/Llama-3.1-{8,70,405}B, mistralai/Mixtral-8x7B-v0.1, deepseek-ai/deepseek-moe-16b-base);
// the papers' nominal sizes (7/13/70 B, 8/70/405 B, 47 B, 16.4 B) are in the zoo files.
const Published kZoo[] = {
    {"gpt-1p7b", 1.7e9, 0.05e9},     {"gpt-3p6b", 3.6e9, 0.05e9},          {"gpt-7p5b", 7.5e9, 0.05e9},
    {"gpt-18b", 18.4e9, 0.05e9},     {"gpt-39b", 39.1e9, 0.05e9},          {"gpt-76b", 76.1e9, 0.05e9},
    {"gpt-145b", 145.6e9, 0.05e9},   {"gpt-310b", 310.1e9, 0.05e9},        {"gpt-530b", 529.6e9, 0.05e9},
    {"gpt-1t", 1008.0e9, 0.5e9},     {"gpt3-175b", 175.0e9, 0.05e9},       {"llama2-7b", 6738415616, 0},
    {"llama2-13b", 13015864320, 0},  {"llama2-70b", 68976648192, 0},       {"llama3-8b", 8030261248, 0},
    {"llama3-70b", 70553706496, 0},  {"llama3-405b", 405853388800, 0},     {"mixtral-8x7b", 46702792704, 0},
    {"deepseek-moe-16b", 16375728128, 0},
};

}  // namespace

TEST_CASE("every zoo model's parameter count agrees with the published count within 1%") {
  // Tolerance: 1 %, or the rounding of the published figure where that is wider (gpt-1p7b:
  // 0.05/1.7 = 2.9 %, gpt-3p6b: 1.4 %).
  for (const Published& z : kZoo) {
    CAPTURE(z.preset);
    const ModelSpec m = preset(z.preset);
    const double tolerance = std::max(0.01, z.rounding / z.parameters);
    char line[160];
    std::snprintf(line, sizeof line, "%-17s computed %17.0f published %17.0f (%+.3f %%)", z.preset, m.parameter_count(),
                  z.parameters, 100 * (m.parameter_count() / z.parameters - 1));
    MESSAGE(line);
    CHECK(m.parameter_count() == doctest::Approx(z.parameters).epsilon(tolerance));
  }
}

TEST_CASE("exact architectures: LLaMA and the HF checkpoints agree to the parameter") {
  // Llama 2 7B: per layer attention 4·4096² = 67,108,864, SwiGLU 3·4096·11,008 = 135,266,304, two
  // RMSNorms 8,192 → 202,383,360 × 32 = 6,476,267,520; embedding + untied head 2·32,000·4,096 =
  // 262,144,000; final norm 4,096 → 6,738,415,616, the released count.
  CHECK(preset("llama2-7b").parameter_count() == 6738415616.0);
  // Llama 3 70B (GQA): attention 2·8192² + 2·8192·(8·128) = 150,994,944, SwiGLU 3·8192·28,672 =
  // 704,643,072, norms 16,384 → 855,654,400 × 80 = 68,452,352,000; 2·128,256·8,192 = 2,101,346,304;
  // + 8,192 → 70,553,706,496.
  CHECK(preset("llama3-70b").parameter_count() == 70553706496.0);
  CHECK(preset("llama3-405b").parameter_count() == 405853388800.0);
  // Mixtral: 8 experts of 3·4096·14,336 = 176,160,768, router 4096·8 per layer. Active (2 of 8
  // experts): 46,702,792,704 − 32·6·176,160,768 = 12,879,925,248 — the paper's "13 B active".
  const ModelSpec mixtral = preset("mixtral-8x7b");
  CHECK(mixtral.parameter_count() == 46702792704.0);
  CHECK(mixtral.active_parameter_count() == 12879925248.0);
  // DeepSeekMoE 16B: layer 0 dense (10,944), layers 1–27 MoE with 64 + 2 experts of 1,408; active:
  // 6 routed + 2 shared → 2,828,650,496 (the paper's 2.8 B).
  const ModelSpec deepseek = preset("deepseek-moe-16b");
  CHECK(deepseek.moe_layer_count() == 27);
  CHECK(!deepseek.is_moe_layer(0));
  CHECK(deepseek.parameter_count() == 16375728128.0);
  CHECK(deepseek.active_parameter_count() == 2828650496.0);
}

TEST_CASE("the GPT rows equal Narayanan et al.'s closed form (which their Table 1 rounds)") {
  // P = 12·l·h²·(1 + 13/(12h) + (V + s)/(12·l·h)); clustersim also counts the final LayerNorm 2h.
  for (const char* name : {"gpt-1p7b", "gpt-3p6b", "gpt-7p5b", "gpt-18b", "gpt-39b", "gpt-76b", "gpt-145b",
                           "gpt-310b", "gpt-530b", "gpt-1t", "gpt3-175b"}) {
    CAPTURE(name);
    const ModelSpec m = preset(name);
    const double l = m.layers, h = m.hidden, V = m.vocab, s = m.seq_len;
    const double narayanan = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
    CHECK(m.parameter_count() == doctest::Approx(narayanan + 2 * h).epsilon(1e-12));
  }
}

TEST_CASE("a preset fills the model, inline fields override it") {
  const ModelSpec base = preset("llama3-70b");
  CHECK(base.name == "llama3-70b");
  CHECK(base.layers == 80);
  CHECK(base.kv_heads == 8);
  CHECK(base.head_dim == 128);
  CHECK(base.activation == Activation::kSwiglu);
  CHECK(base.gated_mlp);
  CHECK(base.norm == Norm::kRmsNorm);
  CHECK(base.position == Position::kRope);
  CHECK(!base.tied_embeddings);
  CHECK(!base.biases);
  CHECK(!base.dropout);  // Llama recipes train at dropout 0: no masks in the activations
  CHECK(base.vocab == 128256);
  CHECK(base.seq_len == 8192);
  const ModelSpec shorter = load("  preset: \"llama3-70b\"\n  seq_len: 4096\n  layers: 40\n  name: \"half\"\n");
  CHECK(shorter.seq_len == 4096);
  CHECK(shorter.layers == 40);
  CHECK(shorter.name == "half");
  CHECK(shorter.hidden == base.hidden);
  CHECK(shorter.kv_heads == 8);
  CHECK(load("  preset: \"gpt3-175b\"\n  dropout: false\n").dropout == false);
  CHECK(load("  preset: \"llama3-70b\"\n  dropout: true\n").dropout == true);
  // A GPT written out in full still defaults to the GPT layout.
  const ModelSpec gpt = load("  layers: 2 hidden: 64 heads: 4 vocab: 100 seq_len: 16\n");
  CHECK(gpt.kv_heads == 4);
  CHECK(gpt.head_dim == 16);
  CHECK(gpt.ffn_hidden == 256);
  CHECK(gpt.tied_embeddings);
  CHECK(gpt.biases);
  CHECK(gpt.dropout);  // Megatron's default 0.1
  CHECK(!gpt.gated_mlp);
  CHECK(gpt.norm == Norm::kLayerNorm);
  CHECK(gpt.position == Position::kLearned);
  CHECK(!gpt.is_moe());
}

TEST_CASE("resolved scenarios of zoo models reload to the same model") {
  for (const Published& z : kZoo) {
    CAPTURE(z.preset);
    const Scenario s = cli::load_scenario_text(scenario_with("  preset: \"" + std::string(z.preset) + "\"\n"),
                                               "zoo.textproto", false, "");
    const std::string resolved = cli::resolved_scenario_text(s);
    CHECK(resolved.find("preset") == std::string::npos);  // resolved = every field written out
    const Scenario again = cli::load_scenario_text(resolved, "resolved.textproto", false, "");
    CHECK(again.jobs[0].model == s.jobs[0].model);
  }
}

TEST_CASE("bad model fields are input errors at the field") {
  // "model {\n" is line 4 of scenario_with(); the first model line is line 5.
  CHECK(model_error("  preset: \"llama9\"\n") ==
        "zoo.textproto:5:11: model.preset: \"llama9\" is not a built-in model (deepseek-moe-16b, gpt-145b, gpt-18b, "
        "gpt-1p7b, gpt-1t, gpt-310b, gpt-39b, gpt-3p6b, gpt-530b, gpt-76b, gpt-7p5b, gpt3-175b, llama2-13b, "
        "llama2-70b, llama2-7b, llama3-405b, llama3-70b, llama3-8b, mixtral-8x7b)");
  CHECK(model_error("  layers: 2 hidden: 64 heads: 8 kv_heads: 3 vocab: 100 seq_len: 16\n") ==
        "zoo.textproto:5:43: model.kv_heads: 3 does not divide heads 8 (each key/value head serves a whole group "
        "of query heads)");
  // Overriding heads against the preset's kv_heads: the message says where the other value came from.
  CHECK(model_error("  preset: \"llama3-8b\"\n  heads: 12\n  head_dim: 128\n") ==
        "zoo.textproto:4:1: model.kv_heads: 8 does not divide heads 12 (each key/value head serves a whole group "
        "of query heads) (with values from preset \"llama3-8b\")");
  CHECK(model_error("  layers: 2 hidden: 64 heads: 4 vocab: 100 seq_len: 16 activation: SWIGLU gated_mlp: false\n") ==
        "zoo.textproto:5:86: model.gated_mlp: false, but activation SWIGLU is a gated MLP (gate and up projections)");
  CHECK(model_error("  layers: 2 hidden: 64 heads: 4 vocab: 100 seq_len: 16 top_k: 2\n") ==
        "zoo.textproto:5:63: model.top_k: set, but the model has no experts (set experts for a mixture of experts)");
  CHECK(model_error("  layers: 2 hidden: 64 heads: 4 vocab: 100 seq_len: 16 experts: 8\n") ==
        "zoo.textproto:4:1: model.top_k: missing (required, >= 1)");
  CHECK(model_error("  layers: 2 hidden: 64 heads: 4 vocab: 100 seq_len: 16 experts: 8 top_k: 9\n") ==
        "zoo.textproto:5:74: model.top_k: 9 exceeds experts 8");
  CHECK(model_error("  layers: 2 hidden: 64 heads: 4 vocab: 100 seq_len: 16 experts: 8 top_k: 2 "
                    "first_dense_layers: 2\n") ==
        "zoo.textproto:5:96: model.first_dense_layers: 2 dense layers and moe_layer_frequency 1 leave no MoE layer "
        "among 2");
  // head_dim frees heads from dividing hidden (Gemma-style 8 x 256 on 2048).
  const ModelSpec wide = load("  layers: 2 hidden: 2048 heads: 8 head_dim: 256 vocab: 100 seq_len: 16\n");
  CHECK(wide.attention_parameters() == doctest::Approx(4.0 * 2048 * 2048 + 4 * 2048));
  CHECK(model_error("  layers: 2 hidden: 64 heads: 7 vocab: 100 seq_len: 16\n") ==
        "zoo.textproto:5:31: model.heads: 7 does not divide hidden 64");
}

TEST_CASE("zoo models run through the per-op model: backward yields every parameter's gradient once") {
  // One micro-batch of 2 tokens keeps this fast; the parameter sum does not depend on it.
  for (const char* name : {"llama3-8b", "mixtral-8x7b", "deepseek-moe-16b", "gpt3-175b"}) {
    CAPTURE(name);
    ModelSpec m = preset(name);
    m.seq_len = 2;
    double grads = 0;
    for (const Op& op : backward_ops(m, 1, Precision::kBF16)) grads += op.grad_parameters;
    CHECK(grads == doctest::Approx(m.parameter_count()).epsilon(1e-12));
  }
}
