// `clustersim validate`: the CSV parser (quotes, embedded commas and line breaks, errors with line and
// column), the scenario a measurement row becomes (assumptions, skip reasons), one row predicted end to end
// against simulate_scenario, the FLOP convention of Narayanan et al. (Eq. 3), the MAPE arithmetic, the JSON
// document and the command's exit status. Rows used here are small (2 GPUs, 16 layers) so the file runs in
// well under a second; the full Narayanan run is a skipped test (minutes: 1,000 to 3,000 GPUs).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "calibrate/hardware_profile.h"
#include "cli/scenario_loader.h"
#include "cli/validate_command.h"
#include "sim/input_error.h"
#include "tests/test_support.h"
#include "workloads/iteration_result.h"
#include "workloads/transformer_ops.h"

namespace fs = std::filesystem;

namespace {

namespace cli = clustersim::cli;
namespace workloads = clustersim::workloads;
using clustersim::InputError;

InputError csv_error(const std::string& text) {
  try {
    cli::parse_csv(text, "t.csv");
  } catch (const InputError& e) {
    return e;
  }
  return InputError("", 0, 0, "", "<no InputError thrown>");
}

const cli::CsvTable& builtin_table() {
  static const cli::CsvTable table = [] {
    cli::CsvTable t = cli::parse_csv(cli::builtin_training_measurements(), cli::kBuiltinMeasurementsName);
    cli::check_measurements(t);
    return t;
  }();
  return table;
}

const cli::CsvRecord& record_of(const cli::CsvTable& t, const std::string& id) {
  const int col = t.column_index("row_id");
  for (const cli::CsvRecord& r : t.records)
    if (r.fields[static_cast<std::size_t>(col)].text == id) return r;
  FAIL("row " << id << " not in the table");
  return t.records.front();
}

bool has_text(const std::vector<std::string>& v, const std::string& part) {
  for (const std::string& s : v)
    if (s.find(part) != std::string::npos) return true;
  return false;
}

// A small measurement file: the columns validate requires plus the ones it reads for these rows.
const std::string kHeader =
    "row_id,source_group,model,model_type,layers,hidden,heads,seq_len,vocab,ffn_hidden,gbs,mbs,tp,pp,dp,"
    "num_gpus,gpu_type,gpus_per_node,precision,recompute,iter_time_s,tflops_per_gpu,trust\n";

}  // namespace

TEST_CASE("validate: CSV fields with quotes, embedded commas, doubled quotes, line breaks and CRLF") {
  const std::string text =
      "a,b,c\r\n"
      "1,\"x, y\",\"say \"\"hi\"\"\"\r\n"
      "\r\n"
      "2,\"two\nlines\",\r\n"
      "3,,last";
  const cli::CsvTable t = cli::parse_csv(text, "t.csv");
  REQUIRE(t.header == std::vector<std::string>{"a", "b", "c"});
  REQUIRE(t.records.size() == 3);  // the blank line is no record
  CHECK(t.records[0].fields[1].text == "x, y");
  CHECK(t.records[0].fields[2].text == "say \"hi\"");
  CHECK(t.records[0].line == 2);
  CHECK(t.records[0].fields[2].column == 10);  // 1,"x, y", is 9 bytes
  CHECK(t.records[1].fields[1].text == "two\nlines");
  CHECK(t.records[1].fields[2].text.empty());
  CHECK(t.records[1].line == 4);
  CHECK(t.records[2].line == 6);  // the quoted line break counts
  CHECK(t.records[2].fields[2].text == "last");
  CHECK(t.column_index("c") == 2);
  CHECK(t.column_index("d") == -1);
}

TEST_CASE("validate: bad CSV names file, line, column and the column's name") {
  SUBCASE("unterminated quote: at the opening quote") {
    const InputError e = csv_error("a,b\n1,2\n3,\"open\n");
    CHECK(e.line() == 3);
    CHECK(e.column() == 3);
    CHECK(e.field_path() == "b");
    CHECK(std::string(e.what()).find("t.csv:3:3: b: quoted field is not closed") == 0);
  }
  SUBCASE("quote inside an unquoted field") {
    const InputError e = csv_error("a,b\n1,x\"y\n");
    CHECK(e.line() == 2);
    CHECK(e.column() == 4);
    CHECK(e.field_path() == "b");
  }
  SUBCASE("text after a closing quote") {
    const InputError e = csv_error("a,b\n\"x\"y,2\n");
    CHECK(e.line() == 2);
    CHECK(e.column() == 4);
    CHECK(e.field_path() == "a");
  }
  SUBCASE("too many fields: at the first extra one") {
    const InputError e = csv_error("a,b\n1,2\n1,2,3\n");
    CHECK(e.line() == 3);
    CHECK(e.column() == 5);
    CHECK(e.message().find("3 fields, but the header has 2 columns") != std::string::npos);
  }
  SUBCASE("too few fields: names the missing column") {
    const InputError e = csv_error("a,b,c\n1,2\n");
    CHECK(e.line() == 2);
    CHECK(e.field_path() == "c");
  }
  SUBCASE("duplicate header") {
    const InputError e = csv_error("a,b,a\n");
    CHECK(e.line() == 1);
    CHECK(e.column() == 5);
    CHECK(e.field_path() == "header");
  }
}

TEST_CASE("validate: measurement checks (missing column, duplicate row_id, non-number in a numeric column)") {
  auto check_error = [](const std::string& text) {
    return clustersim::testing::input_error_of([&] { cli::check_measurements(cli::parse_csv(text, "m.csv")); });
  };
  const std::string row = "1,G,m,dense,2,64,2,16,128,256,4,1,1,1,4,4,A100-SXM4-80GB,8,bf16,none,1.0,,A\n";
  CHECK(check_error(kHeader + row) == "<no InputError thrown>");
  CHECK(check_error("row_id,model\n1,m\n").find("m.csv:1: source_group: missing column") == 0);
  // A header alone: nothing to validate (it printed an empty table and exit status 0).
  CHECK(check_error(kHeader) == "m.csv:2: no measurement rows after the header");
  CHECK(check_error(kHeader + row + row).find("m.csv:3:1: row_id: \"1\" already names the row on line 2") == 0);
  CHECK(check_error(kHeader + "2,G,m,dense,two,64,2,16,128,256,4,1,1,1,4,4,A100,8,bf16,none,1.0,,A\n")
            .find("m.csv:2:13: layers: \"two\" is not a whole number") == 0);
  CHECK(check_error(kHeader + "2,G,m,dense,2,64,2,16,128,256,4,1,1,1,4,4,A100,8,bf16,none,fast,,A\n")
            .find("iter_time_s: \"fast\" is not a number") != std::string::npos);
}

TEST_CASE("validate: the built-in copy is the validation file, unchanged") {
  const std::string on_disk =
      clustersim::testing::slurp(fs::path(CLUSTERSIM_SOURCE_DIR) / "validation/training/training_measurements.csv");
  CHECK(on_disk == std::string(cli::builtin_training_measurements()));
  CHECK(builtin_table().records.size() == 951);
}

TEST_CASE("validate: one row end to end equals simulate_scenario of the same layout written by hand") {
  // Row 2306 (vTrain single node): 16 layers, hidden 1024, 16 heads, seq 1024, gbs 4, mbs 2, TP 2 PP 1
  // DP 1 on 2 of a node's 8 A100s, full recompute, measured 0.125463 s. m = gbs / (mbs·dp) = 4 / 2 = 2.
  cli::ValidationRow row =
      cli::plan_row(builtin_table(), record_of(builtin_table(), "2306"), workloads::Fidelity::kAnalytical);
  REQUIRE_FALSE(row.skipped());
  CHECK(row.metric == "iter_time_s");
  CHECK(row.measured.value() == doctest::Approx(0.125463));
  CHECK(row.gpus == 2);
  CHECK(row.layout == "TP2 PP1 DP1, mb 2 x 2, no pipeline, full recompute");
  // Not stated by the row: vocab, FFN width, precision, the GPU's memory size.
  CHECK(has_text(row.assumptions, "vocab not stated: 51200"));
  CHECK(has_text(row.assumptions, "ffn_hidden not stated: 4 x hidden = 4096"));
  CHECK(has_text(row.assumptions, "precision not stated"));
  cli::predict_row(row);
  REQUIRE(row.predicted.has_value());

  const std::string by_hand = R"(name: "by hand"
cluster { node_preset: "dgx-a100" nodes: 1 }
profile: "vtrain-a100"
fidelity: ANALYTICAL
jobs {
  name: "row" gpus: "0-1"
  model { name: "gpt" layers: 16 hidden: 1024 heads: 16 ffn_hidden: 4096 vocab: 51200 seq_len: 1024 }
  parallel { dp: 1 tp: 2 pp: 1 micro_batch: 2 grad_accum: 2 recompute: FULL }
  training { samples: 4 precision: BF16 host_dispatch_us_per_kernel: 52 }
}
)";
  // Megatron-DeepSpeed's host dispatch cost, calibrated on the vTrain rows with hidden 1024 and micro-batch 1.
  CHECK(has_text(row.assumptions, "host dispatch 52 us per kernel (Megatron-DeepSpeed"));
  // vTrain's machine: the profile with AllReduce bands fitted on vTrain's own AllReduce measurements.
  CHECK(has_text(row.assumptions, "profile vtrain-a100: a100-sxm4-80gb with AllReduce alpha-beta bands"));
  const workloads::Scenario sc = cli::load_scenario_text(by_hand, "by_hand.textproto", false, "");
  const double t = workloads::simulate_scenario(sc).jobs.at(0).iteration_time.raw();
  CHECK(*row.predicted == doctest::Approx(t).epsilon(1e-12));
  // error % = (pred − meas) / meas · 100
  CHECK(*row.error_pct == doctest::Approx((t - 0.125463) / 0.125463 * 100).epsilon(1e-12));
}

TEST_CASE("validate: Narayanan TFLOP/s use Eq. 3, the FLOPs of a step with full recompute") {
  // Eq. 3 for GPT-1.7B of Table 1 (l 24, h 2304, s 2048, V 51200, B 512):
  //   96·512·2048·24·2304² · (1 + 2048/13824 + 51200/884736)
  //   = 1.2837e16 · (1 + 0.148148 + 0.057870) = 1.5467e16 FLOPs.
  const workloads::ModelSpec gpt{"gpt-1.7b", 24, 2304, 24, 9216, 51200, 2048};
  CHECK(cli::narayanan_eq3_flops(gpt, 512) == doctest::Approx(1.54668e16).epsilon(1e-4));
  // The same count as the op model's hardware FLOPs with full recompute (GEMMs incl. attention scores, the
  // recomputed forward, the LM head): the convention is clustersim's, not only a formula.
  workloads::OpConfig config;
  config.recompute = workloads::Recompute::kFull;
  CHECK(workloads::hardware_flops(gpt, config).raw() * 512 ==
        doctest::Approx(cli::narayanan_eq3_flops(gpt, 512)).epsilon(1e-9));

  // Row 2 (GPT-3.6B, TP 2, 64 GPUs): predicted TFLOP/s = Eq. 3 / (T · 64) / 1e12 for the simulated T.
  cli::ValidationRow row =
      cli::plan_row(builtin_table(), record_of(builtin_table(), "2"), workloads::Fidelity::kAnalytical);
  REQUIRE_FALSE(row.skipped());
  CHECK(row.metric == "tflops_per_gpu");
  CHECK(row.convention.find("Eq. 3") != std::string::npos);
}

TEST_CASE("validate: a row without micro-batch size records the assumption, interleaving without pipeline") {
  const cli::ValidationRow row =
      cli::plan_row(builtin_table(), record_of(builtin_table(), "1"), workloads::Fidelity::kAnalytical);
  REQUIRE_FALSE(row.skipped());
  CHECK(has_text(row.assumptions, "micro-batch size not stated: 1"));
  CHECK(row.scenario_text.find("micro_batch: 1 grad_accum: 16") != std::string::npos);  // 512 / (1·32)
  CHECK(has_text(row.assumptions, "with pp 1 there is nothing to interleave: vp = 1"));
  // 145.6B: 80 layers over PP 8 = 10 per stage; the smallest vp >= 2 dividing 10 is 2;
  // m = 2304 / (1·24) = 96 is a multiple of pp 8, so interleaved 1F1B stays.
  const cli::ValidationRow big =
      cli::plan_row(builtin_table(), record_of(builtin_table(), "7"), workloads::Fidelity::kAnalytical);
  CHECK(has_text(big.assumptions, "interleaving degree not stated: vp = 2"));
  CHECK(big.scenario_text.find("vp: 2 schedule: INTERLEAVED_ONE_F_ONE_B") != std::string::npos);
  // The rows name Selene's three-level fat tree: applied as stated (row 1's 4 nodes would fit two levels).
  CHECK(big.scenario_text.find("node_preset: \"dgx-a100\" nodes: 192 fabric { kind: CLOS_THREE_LEVEL } }") !=
        std::string::npos);
  CHECK(has_text(
      big.assumptions,
      "3-level fat tree (Selene)\": a three-level Clos of radix-40 switches (the dgx-a100 preset's), as stated"));
  CHECK(row.scenario_text.find("fabric { kind: CLOS_THREE_LEVEL }") != std::string::npos);  // 4 nodes
}

TEST_CASE("validate: LLaMA and Nemotron rows are simulated with their own architecture") {
  // LLaMA 2 7B (row 149): the project's LLaMA presets run without dropout, so no 1-byte masks are activations.
  const cli::ValidationRow llama =
      cli::plan_row(builtin_table(), record_of(builtin_table(), "149"), workloads::Fidelity::kAnalytical);
  CHECK(llama.scenario_text.find("tied_embeddings: false biases: false dropout: false") != std::string::npos);
  // Nemotron-4 8B (row 152): RoPE, no biases, untied output layer, no dropout. Untied, the output layer is a
  // second V·h = 256,000 · 4,096 = 1,048,576,000 parameters besides the input embedding (tied, as GPT, the
  // model came out at 7.5 B):
  const cli::ValidationRow nemotron =
      cli::plan_row(builtin_table(), record_of(builtin_table(), "152"), workloads::Fidelity::kAnalytical);
  CHECK(nemotron.scenario_text.find("position: ROPE tied_embeddings: false biases: false dropout: false") !=
        std::string::npos);
  CHECK(has_text(nemotron.assumptions, "Nemotron-4 architecture: squared-ReLU MLP"));
  const workloads::Scenario sc = cli::load_scenario_text(nemotron.scenario_text, "row-152.textproto", false, "");
  const workloads::ModelSpec& m = sc.jobs.at(0).model;
  // Per layer, no biases, GELU MLP of ffn 16,384: attention 4h² = 67,108,864, MLP 2·h·f = 134,217,728, two
  // LayerNorms 4h = 16,384 → 201,342,976; 32 layers 6,442,975,232; embeddings 2·V·h = 2,097,152,000 (RoPE: no
  // position table); final LayerNorm 2h = 8,192. Total 8,540,135,424: the "8B" of Nemotron-4's 8.5B.
  CHECK(m.parameter_count() == doctest::Approx(8540135424.0));
}

TEST_CASE("validate: skipped rows say why, every row of the built-in file is planned or explained") {
  const cli::CsvTable& t = builtin_table();
  auto reason = [&](const std::string& id) {
    return cli::plan_row(t, record_of(t, id), workloads::Fidelity::kAnalytical).skipped_reason;
  };
  CHECK(reason("145").empty());                                        // NeMo, FP8 on H100: planned as FP8
  CHECK(reason("11").find("ZeRO-3") != std::string::npos);             // Narayanan Table 2, ZeRO-3
  CHECK(reason("23").find("is not one number") != std::string::npos);  // "113 (unfused) -> 135 (fused)"
  CHECK(reason("25").find("trust C") != std::string::npos);
  CHECK(reason("557").empty());                           // MosaicML FSDP: planned (see the MosaicML cases)
  CHECK(reason("625").empty());                           // MosaicML amp_fp8 on H100: planned as FP8
  // Megatron-Core strong scaling: an MFU of 47 %, no layout (its tp and pp cells are empty).
  CHECK(reason("45") ==
        "only an MFU is measured (no iter_time_s or tflops_per_gpu), without the tensor and pipeline "
        "layout it was measured with");
  std::size_t planned = 0;
  for (const cli::CsvRecord& r : t.records) {
    const cli::ValidationRow row = cli::plan_row(t, r, workloads::Fidelity::kAnalytical);
    if (row.skipped()) {
      CHECK(row.predicted == std::nullopt);
    } else {
      CHECK_FALSE(row.scenario_text.empty());
      CHECK((row.metric == "iter_time_s" || row.metric == "tflops_per_gpu"));
      ++planned;
    }
  }
  CHECK(planned > 800);
}

TEST_CASE("validate: MosaicML rows become FSDP scenarios of llm-foundry's MPT models") {
  const cli::CsvTable& t = builtin_table();
  // Row 565: MPT-7b, 256 H100, seq 2048, gbs 1536, mbs 6, FULL_SHARD, no activation checkpointing.
  const cli::ValidationRow r = cli::plan_row(t, record_of(t, "565"), workloads::Fidelity::kAnalytical);
  REQUIRE_FALSE(r.skipped());
  CHECK(r.metric == "iter_time_s");
  CHECK(r.group == "MosaicML llm-foundry MPT benchmarks / H100-80GB");
  CHECK(r.scenario_text.find("node_preset: \"dgx-h100\" nodes: 32 }") != std::string::npos);
  CHECK(r.scenario_text.find("profile: \"h100-sxm5-80gb\"") != std::string::npos);
  CHECK(r.scenario_text.find("layers: 32 hidden: 4096 heads: 32 ffn_hidden: 16384 vocab: 50368 seq_len: 2048 }") !=
        std::string::npos);
  // m = gbs / (mbs · GPUs) = 1536 / (6 · 256) = 1 (the notes' GradAccum=1).
  CHECK(r.scenario_text.find("parallel { dp: 256 framework: FSDP zero_stage: 3 micro_batch: 6 grad_accum: 1 "
                             "recompute: NONE flash_attention: true flash_kernel: TRITON }") != std::string::npos);
  // The architecture's parameters equal the row's NumParams=6658859008: V·h + s·h + l·(12h² + 13h) + 2h
  //   = 50368·4096 + 2048·4096 + 32·(12·4096² + 13·4096) + 2·4096
  //   = 206,307,328 + 8,388,608 + 6,444,154,880 + 8,192 = 6,658,859,008.
  CHECK(has_text(r.assumptions, "parameters = the row's NumParams exactly"));
  CHECK(has_text(r.assumptions, "MPT-7b: d_model 4096, n_heads 32, n_layers 32"));
  CHECK(has_text(r.assumptions, "FlashAttention"));
  const workloads::Scenario sc = cli::load_scenario_text(r.scenario_text, "row 565", false, "");
  CHECK(sc.jobs.at(0).model.parameter_count() == 6658859008.0);
  CHECK(sc.jobs.at(0).parallel.effective_framework() == workloads::Framework::kFsdp);
  CHECK(sc.jobs.at(0).parallel.attention == workloads::AttentionKernel::kFlash);

  // Row 568: SHARD_GRAD_OP is ZeRO stage 2.
  const cli::ValidationRow grad_op = cli::plan_row(t, record_of(t, "568"), workloads::Fidelity::kAnalytical);
  CHECK(grad_op.scenario_text.find("framework: FSDP zero_stage: 2 micro_batch: 8") != std::string::npos);

  // Row 694: MPT-70b on 64 A100-40GB with activation checkpointing, mbs 2, gbs 128 → m = 1; the 40 GB GPUs
  // are the a100-sxm4-40gb profile (39.59 GiB allocatable = floor(39.59 x 2^30) = 42,509,438,812 B; HBM2
  // 1,555 GB/s) on DGX A100 nodes.
  const cli::ValidationRow a40 = cli::plan_row(t, record_of(t, "694"), workloads::Fidelity::kAnalytical);
  REQUIRE_FALSE(a40.skipped());
  CHECK(a40.group == "MosaicML llm-foundry MPT benchmarks / A100-40GB");
  CHECK(a40.scenario_text.find("node_preset: \"dgx-a100\" nodes: 8 gpu: \"A100-SXM4-40GB\" }") != std::string::npos);
  CHECK(a40.scenario_text.find("recompute: FULL flash_attention: true") != std::string::npos);
  const workloads::Scenario sc40 = cli::load_scenario_text(a40.scenario_text, "row 694", false, "");
  CHECK(sc40.profile.gpu.memory_capacity.raw() == 42509438812.0);
  CHECK(sc40.profile.gpu.hbm_bandwidth.raw() == doctest::Approx(1.555e12).epsilon(1e-15));
  const auto a80 = clustersim::calibrate::load_profile("a100-sxm4-80gb");
  CHECK(sc40.profile.gpu.peak_bf16 == a80.gpu.peak_bf16);
  CHECK(sc40.profile.gpu.gemm_efficiency == a80.gpu.gemm_efficiency);

  // Row 687: MPT-125m on 8 A100-80GB (mbs 8 x 2) runs end to end; the prediction is the simulated step time.
  cli::ValidationRow small = cli::plan_row(t, record_of(t, "687"), workloads::Fidelity::kAnalytical);
  REQUIRE_FALSE(small.skipped());
  CHECK(small.scenario_text.find("micro_batch: 8 grad_accum: 2") != std::string::npos);
  cli::predict_row(small);
  REQUIRE(small.predicted);
  const workloads::Scenario sc_small = cli::load_scenario_text(small.scenario_text, "row 687", false, "");
  CHECK(*small.predicted ==
        doctest::Approx(workloads::simulate_scenario(sc_small).jobs.at(0).iteration_time.raw()).epsilon(1e-12));
  CHECK(*small.error_pct == doctest::Approx((*small.predicted - 1.45) / 1.45 * 100).epsilon(1e-12));
}

TEST_CASE("validate: MosaicML's FLOP convention reproduces the row's Model TFLOP") {
  // llm-foundry's MFU numerator per sequence: 3·(2·N·s + 4·l·h·s²). Row 565: MPT-7b, N = 6,658,859,008,
  // s 2048, l 32, h 4096, gbs 1536, 1.214 s per step on 256 GPUs:
  //   2·N·s = 2.72747e13, 4·l·h·s² = 2.19902e12 → 3·(2.94737e13) = 8.84211e13 per sequence;
  //   · 1536 = 1.358149e17 FLOPs per step; / (1.214 s · 256) = 437.0 TFLOP/s — the row's 436 (44.15 % MFU
  //   of 989.4), 0.2 % apart from rounding the step time to 1.214 s.
  const workloads::ModelSpec mpt7b{"MPT-7b", 32, 4096, 32, 16384, 50368, 2048};
  CHECK(cli::mosaicml_flops(mpt7b, 1536) == doctest::Approx(1.358149e17).epsilon(1e-6));
  CHECK(cli::mosaicml_flops(mpt7b, 1536) / (1.214 * 256) / 1e12 == doctest::Approx(436).epsilon(0.003));
}

TEST_CASE("validate: MosaicML's rows are summarised per GPU type") {
  // The same source group on three GPU types gives three summary groups; other groups keep their name.
  const cli::CsvTable& t = builtin_table();
  std::vector<cli::ValidationRow> rows;
  for (const char* id : {"565", "694", "687", "593", "2"})
    rows.push_back(cli::plan_row(t, record_of(t, id), workloads::Fidelity::kAnalytical));
  // Errors: H100 rows 565 +10 %, 593 -20 % → 15 %; A100-40GB 694 -4 % → 4 %; A100-80GB 687 +6 % → 6 %.
  for (auto [i, e] : {std::pair{0, 10.0}, {1, -4.0}, {2, 6.0}, {3, -20.0}, {4, 1.0}}) rows[i].error_pct = e;
  const std::vector<cli::GroupSummary> g = cli::mape_by_group(rows);
  REQUIRE(g.size() == 4);
  CHECK(g[0].group == "MosaicML llm-foundry MPT benchmarks / H100-80GB");
  CHECK(g[0].rows == 2);
  CHECK(g[0].mape_pct.value() == doctest::Approx(15.0));
  CHECK(g[1].group == "MosaicML llm-foundry MPT benchmarks / A100-40GB");
  CHECK(g[1].mape_pct.value() == doctest::Approx(4.0));
  CHECK(g[2].group == "MosaicML llm-foundry MPT benchmarks / A100-80GB");
  CHECK(g[2].mape_pct.value() == doctest::Approx(6.0));
  CHECK(g[3].group == rows[4].source_group);  // Narayanan et al.: not split
}

TEST_CASE("validate: MAPE per group") {
  // Group A: errors +10 % and -30 % → MAPE (10 + 30) / 2 = 20 %. Group B: one skipped row, one -5 % → 5 %
  // over 1 row. Group C: only skipped rows → no MAPE.
  auto row = [](const std::string& group, std::optional<double> error, const std::string& skip = "") {
    cli::ValidationRow r;
    r.source_group = group;
    r.error_pct = error;
    r.skipped_reason = skip;
    return r;
  };
  const std::vector<cli::ValidationRow> rows = {row("A", 10.0), row("B", std::nullopt, "FP8"), row("A", -30.0),
                                                row("B", -5.0), row("C", std::nullopt, "MoE")};
  const std::vector<cli::GroupSummary> g = cli::mape_by_group(rows);
  REQUIRE(g.size() == 3);
  CHECK(g[0].group == "A");
  CHECK(g[0].mape_pct.value() == doctest::Approx(20.0));
  CHECK(g[0].rows == 2);
  CHECK(g[1].group == "B");
  CHECK(g[1].mape_pct.value() == doctest::Approx(5.0));
  CHECK(g[1].rows == 1);
  CHECK(g[1].skipped == 1);
  CHECK(g[2].mape_pct == std::nullopt);
  CHECK(g[2].skipped == 1);
}

TEST_CASE("validate: MAPE of a hand-made CSV, and its JSON document") {
  // Rows 1 and 2 have the same layout (2 layers, hidden 64, 4 GPUs of one A100 node, DP 4, gbs 4, mbs 1), so
  // the same predicted time P. Measured 2P and P/2 would give errors -50 % and +100 %; here measured are
  // fixed, so with e_i = (P - m_i)/m_i · 100 the MAPE is (|e_1| + |e_2|) / 2. Row 3 is FP8 on an A100, which has
  // no FP8 tensor cores: skipped, not counted.
  const std::string text = kHeader +
                           "1,G,tiny,dense,2,64,2,128,512,256,4,1,1,1,4,4,A100-SXM4-80GB,8,bf16,none,0.010,,A\n"
                           "2,G,tiny,dense,2,64,2,128,512,256,4,1,1,1,4,4,A100-SXM4-80GB,8,bf16,none,0.001,,A\n"
                           "3,G,tiny,dense,2,64,2,128,512,256,4,1,1,1,4,4,A100-SXM4-80GB,8,FP8,none,0.001,,A\n";
  const cli::CsvTable t = cli::parse_csv(text, "hand.csv");
  cli::check_measurements(t);
  const cli::ValidationReport report = cli::validate_measurements(t, workloads::Fidelity::kAnalytical);
  REQUIRE(report.rows.size() == 3);
  const double p = report.rows[0].predicted.value();
  CHECK(report.rows[1].predicted.value() == p);
  CHECK(report.rows[2].skipped_reason.find("FP8") != std::string::npos);
  const double e1 = (p - 0.010) / 0.010 * 100, e2 = (p - 0.001) / 0.001 * 100;
  CHECK(report.rows[0].error_pct.value() == doctest::Approx(e1));
  REQUIRE(report.groups.size() == 1);
  CHECK(report.groups[0].rows == 2);
  CHECK(report.groups[0].skipped == 1);
  CHECK(report.groups[0].mape_pct.value() == doctest::Approx((std::abs(e1) + std::abs(e2)) / 2));

  const std::string json = cli::validation_json(report);
  for (const char* key :
       {"\"rows\": [", "\"row_id\": \"1\"", "\"source_group\": \"G\"", "\"metric\": \"iter_time_s\"",
        "\"measured\": 0.01", "\"predicted\": ", "\"error_pct\": ", "\"assumptions\": [", "\"skipped_reason\": null",
        "\"mape_by_group\": {", "\"G\": {\"mape_pct\": ", "\"rows\": 2, \"skipped\": 1}"})
    CHECK_MESSAGE(json.find(key) != std::string::npos, key);
  CHECK(json.find("\"skipped_reason\": \"FP8") != std::string::npos);
  CHECK(json.find("\"predicted\": null, \"error_pct\": null") != std::string::npos);
  // Threads do not change the result.
  CHECK(cli::validation_json(cli::validate_measurements(t, workloads::Fidelity::kAnalytical, {}, 3)) == json);
}

TEST_CASE("validate: stated zeros and degrees past num_gpus are skipped with the reason, never divided by") {
  // The tiny layout of the hand-made CSV above, with one field changed per row. tp 65,536 x pp 65,536 is 2^32:
  // in 32 bits it wrapped to 0 and num_gpus / 0 stopped the program (SIGFPE); it is more than the 8 GPUs.
  // A stated 0 (mbs, gpus_per_node, cp, vp) is not "not stated": the row is skipped, not run as 1 or 8.
  const std::string header =
      "row_id,source_group,model,model_type,layers,hidden,heads,seq_len,vocab,ffn_hidden,gbs,mbs,tp,pp,dp,cp,vp,"
      "num_gpus,gpu_type,gpus_per_node,precision,recompute,framework,iter_time_s,tflops_per_gpu,trust\n";
  const std::string text =
      header +
      "wrap,G,tiny,dense,2,64,2,128,512,256,4,1,65536,65536,,,,8,A100-SXM4-80GB,8,bf16,none,,0.01,,A\n"
      "mbs0,G,tiny,dense,2,64,2,128,512,256,4,0,1,1,4,,,4,A100-SXM4-80GB,8,bf16,none,,0.01,,A\n"
      "node0,G,tiny,dense,2,64,2,128,512,256,4,1,1,1,4,,,4,A100-SXM4-80GB,0,bf16,none,,0.01,,A\n"
      "cp0,G,tiny,dense,2,64,2,128,512,256,4,1,1,1,4,0,,4,A100-SXM4-80GB,8,bf16,none,,0.01,,A\n"
      "vp0,G,tiny,dense,2,64,2,128,512,256,4,1,1,1,4,,0,4,A100-SXM4-80GB,8,bf16,none,,0.01,,A\n"
      // 8 layers over pp 8: 1 layer a stage, no interleaving degree >= 2 divides it.
      "one,G,tiny,dense,8,64,2,128,512,256,8,1,1,8,1,,interleaved,8,A100-SXM4-80GB,8,bf16,none,,0.01,,A\n"
      // dp 1 x cp 4 >= 2: the distributed optimizer the framework names shards over the cp ranks.
      "cp4,G,tiny,dense,2,64,2,128,512,256,4,1,1,1,1,4,,4,A100-SXM4-80GB,8,bf16,none,"
      "Megatron-Core (--overlap-param-gather),0.01,,A\n";
  const cli::CsvTable t = cli::parse_csv(text, "zeros.csv");
  cli::check_measurements(t);
  auto plan = [&](const std::string& id) {
    return cli::plan_row(t, record_of(t, id), workloads::Fidelity::kAnalytical);
  };
  CHECK(plan("wrap").skipped_reason == "tp 65536 x pp 65536 is more than num_gpus 8");
  CHECK(plan("mbs0").skipped_reason == "mbs 0: a micro-batch holds at least one sample");
  CHECK(plan("node0").skipped_reason == "gpus_per_node 0: a node has at least one GPU");
  CHECK(plan("cp0").skipped_reason == "cp 0: the context-parallel degree is at least 1");
  CHECK(plan("vp0").skipped_reason == "vp 0: the interleaving degree is at least 1");
  const cli::ValidationRow one = plan("one");
  REQUIRE_FALSE(one.skipped());
  CHECK(has_text(one.assumptions, "the 1 layers of a stage have no divisor >= 2: vp = 1"));
  CHECK(!has_text(one.assumptions, "the smallest >= 2"));
  const cli::ValidationRow cp4 = plan("cp4");
  REQUIRE_FALSE(cp4.skipped());
  CHECK(has_text(cp4.assumptions, "distributed optimizer not stated: on"));
  CHECK(cp4.scenario_text.find("distributed_optimizer: true overlap_param_gather: true") != std::string::npos);
  // The command on the file: exit 0, every row accounted for.
  CHECK(cli::validate_measurements(t, workloads::Fidelity::kAnalytical).rows.size() == 7);
}

TEST_CASE("validate: NeMo rows: cp, the launcher configs' optimizer, SP and vocab, Megatron-Core's distopt") {
  const cli::CsvTable& t = builtin_table();
  // Row 155, LLAMA3-8B on 8 H100: tp 1 x pp 1 x cp 2 x dp 4 = 8 GPUs; gbs 128 / (mbs 1 x dp 4) = 32
  // micro-batches. Context parallelism is a scenario field now (cp 2: 2 x cp = 4 divides seq 8192).
  const cli::ValidationRow llama3 = cli::plan_row(t, record_of(t, "155"), workloads::Fidelity::kAnalytical);
  REQUIRE(llama3.skipped_reason.empty());
  CHECK(llama3.layout.find("TP1 PP1 CP2 DP4, mb 1 x 32") == 0);
  CHECK(llama3.scenario_text.find("parallel { dp: 4 tp: 1 pp: 1 cp: 2 schedule: ONE_F_ONE_B micro_batch: 1 "
                                  "grad_accum: 32") != std::string::npos);
  // NeMo-Framework-Launcher's llama3_8b.yaml: distributed_fused_adam with overlap_grad_sync; tp 1, so no SP.
  CHECK(llama3.scenario_text.find("overlap_grad_reduce: true distributed_optimizer: true") != std::string::npos);
  CHECK(llama3.scenario_text.find("sequence_parallel") == std::string::npos);
  CHECK(llama3.scenario_text.find("vocab: 128256") != std::string::npos);  // Llama 3's tokenizer, not 51200
  const workloads::Scenario sc = cli::load_scenario_text(llama3.scenario_text, "row 155", false, "");
  CHECK(sc.jobs.at(0).parallel.cp == 2);
  CHECK(sc.jobs.at(0).parallel.dp == 4);
  // Row 151, LLAMA2-70B, tp 4: sequence parallelism on (the launcher's configs), vocab 32,000.
  const cli::ValidationRow llama2 = cli::plan_row(t, record_of(t, "151"), workloads::Fidelity::kAnalytical);
  CHECK(llama2.scenario_text.find("sequence_parallel: true") != std::string::npos);
  CHECK(llama2.scenario_text.find("vocab: 32000") != std::string::npos);
  CHECK(llama2.layout.find(", SP,") != std::string::npos);
  // NeMo's GPT-3: GPT-2 BPE's 50,257 padded to a multiple of 128 x tp; tp 4 (row 147): ceil(50,257 / 512) = 99,
  // 99 x 512 = 50,688.
  const cli::ValidationRow gpt3 = cli::plan_row(t, record_of(t, "147"), workloads::Fidelity::kAnalytical);
  CHECK(gpt3.scenario_text.find("vocab: 50688") != std::string::npos);
  // Nemotron: Nemotron-4's 256,000-token vocabulary.
  const cli::ValidationRow nemotron = cli::plan_row(t, record_of(t, "152"), workloads::Fidelity::kAnalytical);
  CHECK(nemotron.scenario_text.find("vocab: 256000") != std::string::npos);
  // Megatron-Core r0.8.0 rows name --overlap-param-gather, which Megatron-LM only accepts with the distributed
  // optimizer (row 39: tp 8 x dp 48 on 384 GPUs).
  const cli::ValidationRow mcore = cli::plan_row(t, record_of(t, "39"), workloads::Fidelity::kAnalytical);
  CHECK(mcore.scenario_text.find("overlap_grad_reduce: true tp_comm_overlap: true distributed_optimizer: true") !=
        std::string::npos);  // --tp-comm-overlap, with the SP it needs
  CHECK(mcore.layout.find(", SP, TP overlap, flash") != std::string::npos);
  CHECK(has_text(mcore.assumptions, "--overlap-param-gather needs --use-distributed-optimizer"));
  // A Megatron-LM row states its own settings: no NeMo defaults (row 2306, vTrain, Megatron-DeepSpeed).
  const cli::ValidationRow vtrain = cli::plan_row(t, record_of(t, "2306"), workloads::Fidelity::kAnalytical);
  CHECK(vtrain.scenario_text.find("distributed_optimizer") == std::string::npos);
  CHECK(vtrain.scenario_text.find("overlap_grad_reduce") == std::string::npos);
}

TEST_CASE("validate: an FP8 row on H100 runs as precision FP8, faster than the same row in BF16") {
  // The same layout twice on H100 (2 layers, hidden 4096, FFN 16384, 8 GPUs, DP 8), BF16 and FP8: FP8 runs the
  // linear-layer GEMMs (2048 x 4096 x 16384: 2.7e11 FLOPs, about 400 us in BF16) at twice the peak and adds
  // their casts, so it predicts less time, but more than half (attention, LM head and element-wise ops stay
  // BF16, communication is the same). With hidden 512 FP8 would be slower: GEMMs of a few microseconds gain
  // less than the casts' launches and HBM passes cost.
  const std::string text = kHeader +
                           "1,G,tiny,dense,2,4096,32,2048,1024,16384,8,1,1,1,8,8,H100-80GB,8,bf16,none,0.010,,A\n"
                           "2,G,tiny,dense,2,4096,32,2048,1024,16384,8,1,1,1,8,8,H100-80GB,8,FP8,none,0.010,,A\n";
  const cli::CsvTable t = cli::parse_csv(text, "fp8.csv");
  cli::check_measurements(t);
  const cli::ValidationReport report = cli::validate_measurements(t, workloads::Fidelity::kAnalytical);
  REQUIRE(report.rows.size() == 2);
  REQUIRE(report.rows[0].predicted.has_value());
  REQUIRE(report.rows[1].predicted.has_value());
  CHECK(*report.rows[1].predicted < *report.rows[0].predicted);
  CHECK(*report.rows[1].predicted > 0.5 * *report.rows[0].predicted);
  CHECK(report.rows[1].scenario_text.find("precision: FP8") != std::string::npos);
  bool named = false;
  for (const std::string& a : report.rows[1].assumptions)
    named = named || a.find("Transformer Engine") != std::string::npos;
  CHECK(named);
}

TEST_CASE("validate: the command writes the JSON, and bad input exits with status 2") {
  const fs::path dir = clustersim::testing::scratch_dir("validate");
  std::ostringstream out;
  const std::string json = (dir / "v.json").string();
  CHECK(cli::validate_command({"--rows", "2306,145", "--json", json}, out) == 0);
  const std::string text = out.str();
  CHECK(text.find("2306") != std::string::npos);
  CHECK(text.find("Mean absolute percentage error by source group") != std::string::npos);
  const std::string first = clustersim::testing::slurp(json);
  CHECK(first.find("\"row_id\": \"2306\"") != std::string::npos);
  CHECK(first.find("\"row_id\": \"145\"") != std::string::npos);
  std::ostringstream again;
  CHECK(cli::validate_command({"--rows", "2306,145", "--json", json}, again) == 0);
  CHECK(clustersim::testing::slurp(json) == first);  // deterministic

  // --scenarios writes each row's scenario; `run` on it predicts the row's time.
  std::ostringstream with_scenarios;
  CHECK(cli::validate_command({"--rows", "2306", "--scenarios", (dir / "rows").string()}, with_scenarios) == 0);
  REQUIRE(fs::exists(dir / "rows" / "row-2306.textproto"));
  const workloads::Scenario written = cli::load_scenario_file((dir / "rows" / "row-2306.textproto").string());
  cli::ValidationRow row2306 =
      cli::plan_row(builtin_table(), record_of(builtin_table(), "2306"), workloads::Fidelity::kAnalytical);
  cli::predict_row(row2306);
  CHECK(workloads::simulate_scenario(written).jobs.at(0).iteration_time.raw() ==
        doctest::Approx(*row2306.predicted).epsilon(1e-12));

  // A folder that takes no files fails before the simulation; a row's file name taken by a folder fails before
  // any file is written; neither leaves the JSON behind.
  if (fs::is_directory("/proc")) {
    CHECK(clustersim::testing::input_error_of([&] {
            cli::validate_command({"--rows", "2306", "--scenarios", "/proc", "--json", (dir / "p.json").string()}, out);
          }) == "/proc: --scenarios: cannot write files in this folder");
    CHECK_FALSE(fs::exists(dir / "p.json"));
  }
  fs::create_directories(dir / "taken" / "row-145.textproto");
  CHECK(clustersim::testing::input_error_of([&] {
          cli::validate_command(
              {"--rows", "2306,145", "--scenarios", (dir / "taken").string(), "--json", (dir / "t.json").string()},
              out);
        }) == (dir / "taken" / "row-145.textproto").string() +
                  ": --scenarios: cannot write output file: it exists and is not a file");
  CHECK_FALSE(fs::exists(dir / "taken" / "row-2306.textproto"));
  CHECK_FALSE(fs::exists(dir / "t.json"));
  // A run that fails on its input leaves no folder behind (the probe's folder is removed again).
  CHECK(clustersim::testing::input_error_of([&] {
          cli::validate_command({"--rows", "99999", "--scenarios", (dir / "never").string()}, out);
        }).find("--rows: row \"99999\" is not in") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "never"));

  CHECK(clustersim::testing::input_error_of([&] {
          cli::validate_command({"--rows", "99999"}, out);
        }).find("--rows: row \"99999\" is not in") != std::string::npos);
  CHECK(clustersim::testing::input_error_of([&] {
          cli::validate_command({"--fidelity", "exact"}, out);
        }).find("--fidelity") != std::string::npos);
  // At most 256 threads, as sweep's and plan's --jobs (thousands aborted when the system refused them).
  CHECK(clustersim::testing::input_error_of([&] {
          cli::validate_command({"--threads", "300"}, out);
        }).find("--threads: 300 must be in 1..256") != std::string::npos);

  {
    std::ofstream bad(dir / "bad.csv", std::ios::binary);
    bad << kHeader << "1,G,m,dense,2,64,2,\"16,128,256,4,1,1,1,4,4,A100,8,bf16,none,1.0,,A\n";
  }
  const auto run = clustersim::testing::run_clustersim(
      "validate --data " + (dir / "bad.csv").string() + " --json " + (dir / "never.json").string(), dir);
  CHECK(run.status == 2);
  CHECK(run.err.find("bad.csv:2:20: seq_len: quoted field is not closed") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "never.json"));
  fs::remove_all(dir);
}

// Issue 7's validation target: the MosaicML llm-foundry FSDP rows (H100-80GB, A100-80GB, A100-40GB; 111 rows,
// a few seconds) predicted with the built-in profiles, MAPE per GPU type at most 10 %. The H100 profile's
// gemm_efficiency is fitted to the NeMo 24.07 rows, not to these (calibrate/profiles/h100-sxm5-80gb.textproto).
namespace {

// The row ids of the built-in table whose source group names `source`.
std::vector<std::string> rows_of(const std::string& source) {
  std::vector<std::string> ids;
  const cli::CsvTable& t = builtin_table();
  const int group = t.column_index("source_group"), id = t.column_index("row_id");
  for (const cli::CsvRecord& r : t.records)
    if (r.fields[static_cast<std::size_t>(group)].text.find(source) != std::string::npos)
      ids.push_back(r.fields[static_cast<std::size_t>(id)].text);
  return ids;
}

}  // namespace

TEST_CASE("validate: the MosaicML FSDP rows, MAPE per GPU type at most 10 %") {
  const cli::ValidationReport report =
      cli::validate_measurements(builtin_table(), workloads::Fidelity::kAnalytical, rows_of("MosaicML"), 2);
  MESSAGE(cli::validation_text(report));
  REQUIRE(report.groups.size() == 3);
  std::size_t rows = 0;
  for (const cli::GroupSummary& g : report.groups) {
    CAPTURE(g.group);
    REQUIRE(g.mape_pct.has_value());
    CHECK(*g.mape_pct <= 10.0);
    rows += g.rows;
  }
  CHECK(rows == 111);  // 34 H100-80GB, 31 A100-80GB, 46 A100-40GB: every MosaicML row is usable
}

// Minutes, not seconds: rows 9 and 10 simulate 2,520 and 3,072 GPUs with 280 and 512 micro-batches per
// step (about 6 minutes in all on one core; row 10 alone needs about 20 GB of memory, so one thread). Run with
//   build/tests/clustersim_tests -tc="validate: all usable Narayanan*" --no-skip
// It prints the group's table and checks that every usable row ran; the MAPE itself is reported, not bounded
// (4.9 % when this was written; see `clustersim validate`).
TEST_CASE("validate: all usable Narayanan et al. rows run" * doctest::skip(true)) {
  const cli::ValidationReport report =
      cli::validate_measurements(builtin_table(), workloads::Fidelity::kAnalytical, rows_of("Narayanan"), 1);
  MESSAGE(cli::validation_text(report));
  REQUIRE(report.groups.size() == 1);
  CHECK(report.groups[0].rows == 16);  // rows 1-10 and 17-22; ZeRO-3 (11-16), trust B/C estimates skipped
}
