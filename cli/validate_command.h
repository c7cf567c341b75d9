// `clustersim validate [--data FILE.csv] [--json FILE] [--fidelity analytical|flow] [--rows ID,ID,...]
//                      [--threads N]`
//
// Predicts every row of the published training measurements (validation/training/
// training_measurements.csv, copied unchanged from the project's shared validation set; columns in
// validation/training/README.md) and reports the error. The CSV is compiled into the binary
// (cmake/EmbedFiles.cmake), so the command works from any directory; --data reads another file in the
// same layout.
//
// Per row: a scenario is written as text (node preset dgx-a100 / dgx-h100 from gpu_type, nodes =
// num_gpus / gpus_per_node, profile a100-sxm4-80gb / h100-sxm5-80gb, or a100-sxm4-40gb with cluster.gpu
// "A100-SXM4-40GB" for A100-40GB; model from the row's layers,
// hidden, heads, kv_heads, ffn_hidden, seq_len, vocab; layout tp, pp, dp, vp, sequence_parallel,
// recompute; micro-batch mbs and m = gbs / (mbs · dp) micro-batches per step) and loaded with
// load_scenario_text, so the scenario validation of `run` applies. MosaicML llm-foundry rows (FSDP, no
// architecture columns) become `framework: FSDP` scenarios: the MPT model of the row's name from
// llm-foundry's yamls with MPTConfig's defaults (learned positions of max_seq_len, biases, LayerNorm with
// bias, tied embeddings, vocab 50368; checked against the row's NumParams within 1 %), FULL_SHARD → zero
// stage 3, SHARD_GRAD_OP → 2, dp = num_gpus, m = gbs / (mbs · dp) (= the notes' GradAccum), activation
// checkpointing → recompute FULL, FlashAttention (attn_impl triton), amp_bf16/bf16 → BF16; their MAPE is
// summarised per GPU type (group "MosaicML llm-foundry MPT benchmarks / H100-80GB"). Then simulate_scenario gives the
// iteration time T. The metric is what the row measured:
//   iter_time_s      predicted = T (tokens/s and iteration time are the same measurement:
//                    tokens per step = gbs · seq_len is fixed);
//   tflops_per_gpu   predicted = F / (T · num_gpus) / 1e12 with F the step's FLOPs in the SOURCE's
//                    convention:
//                      Narayanan et al. 2021 (SC'21) Eq. 3, which counts the recomputed forward:
//                        F = 96 · B · s · l · h² · (1 + s/(6h) + V/(16 · l · h)), B = gbs;
//                      Megatron-Core (num_floating_point_operations): model FLOPs without recompute,
//                        full s² attention: workloads::model_flops (72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h))
//                        for a GPT with f = 4h);
//                      MosaicML llm-foundry (benchmarking README, "MFU includes attention FLOPs"): model FLOPs,
//                        no recompute, 3 · (2·N·s + 4·l·h·s²) per sequence (mosaicml_flops) — unused while
//                        every MosaicML row has iter_time_s (GlobalBatchSize(T) / Throughput(T/s)).
//   error % = (predicted − measured) / measured · 100;  MAPE of a group = mean |error %| over its rows
//   that ran (skipped rows do not count).
// Rows that cannot run say why (skipped_reason: FP8 on a GPU without an FP8 peak, DeepSpeed ZeRO-3, expert
// parallelism, MoE, missing architecture or layout, a degree, batch or node size stated as 0, trust C); every guess is
// listed in the row's assumptions (micro-batch not stated → 1; interleaving degree not stated → the smallest vp ≥ 2
// that divides the layers of a stage, 1 without a pipeline; m not a multiple of pp for interleaving → 1F1B; vocabulary,
// FFN width, precision, node shape not stated → the stated defaults).
//
// Cost (measured on the 2-core development machine, one thread, ANALYTICAL): the 734 single-node vTrain
// rows 1.4 s; the 56 multi-node vTrain rows (64-512 GPUs) 165 s, 3 GB; Narayanan rows 1-10 about 6 min,
// of which row 10 (3,072 GPUs, 512 micro-batches, vp 2) takes 187 s and 21 GB, row 9 98 s and 14 GB; the
// remaining runnable rows (Table 2 PTD-P, Megatron README, Megatron-Core up to 6,144 H100s) 8 min, 10 GB.
// The whole file: about 6 minutes with --threads 2 (5 min 48 s and 6 min 44 s in two runs, 2026-12). FLOW costs
// about 1.3x as much (row 6, 1,024 GPUs: 21 s instead of 16 s) and gives the same single-node results. Memory grows
// with GPUs x micro-batches (the task graph holds every rank), and --threads N holds N rows at once.
//
// Errors: a malformed CSV (unterminated quote, stray quote, wrong field count, duplicate row_id, a
// non-number in a numeric column) throws InputError(file, line, column, column name, ...): exit 2.
// Output is deterministic (rows in CSV order, groups in order of first appearance, --threads does not
// change it); --json is written atomically after every row succeeded.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/model_spec.h"
#include "workloads/scenario.h"

namespace clustersim::cli {

// ---- CSV (RFC 4180: fields separated by ',', records by LF or CRLF; a field in double quotes may hold
// commas, line breaks and doubled quotes "" standing for one quote).
struct CsvField {
  std::string text;
  int line = 0;  // 1-based line and column (bytes) where the field starts
  int column = 0;
};
struct CsvRecord {
  int line = 0;  // line where the record starts
  std::vector<CsvField> fields;
};
struct CsvTable {
  std::string file;  // for error messages
  std::vector<std::string> header;
  std::vector<CsvRecord> records;                 // data records (blank lines skipped), each with header.size() fields
  int column_index(std::string_view name) const;  // -1 when absent
};

// Throws InputError(file, line, column, column name or "header", message) for an unterminated quoted
// field, a quote inside an unquoted field, text after a closing quote, an empty or duplicate header
// name, or a record with another number of fields than the header.
CsvTable parse_csv(std::string_view text, const std::string& file);

// ---- Measurements and their predictions.

// The built-in copy of validation/training/training_measurements.csv.
std::string_view builtin_training_measurements();
constexpr const char* kBuiltinMeasurementsName = "validation/training/training_measurements.csv";

// Checks the columns validate needs (row_id, source_group, model, layers, hidden, heads, seq_len, gbs,
// tp, pp, num_gpus, gpu_type must exist; the other columns it reads may be absent = empty), that every
// row_id is present and unique, and that numeric columns hold numbers. Throws InputError at the field.
void check_measurements(const CsvTable& table);

struct ValidationRow {
  std::string row_id;
  std::string source_group;
  std::string model;
  std::string gpu_type;  // as the row states it
  std::string group;     // the MAPE summary's group: source_group, or "source_group / gpu_type" (MosaicML)
  std::uint32_t gpus = 0;
  std::string layout;      // "TP8 PP16 DP8, micro-batch 1 x 96, 1F1B, full recompute"
  std::string metric;      // "iter_time_s" or "tflops_per_gpu"; "" when skipped before one was chosen
  std::string convention;  // how a TFLOP/s metric counts FLOPs ("" for iter_time_s)
  std::optional<double> measured;
  std::optional<double> predicted;
  std::optional<double> error_pct;       // (predicted − measured) / measured · 100
  std::vector<std::string> assumptions;  // every value not taken from the row as published
  std::vector<std::string> notes;        // what the prediction says besides the metric (e.g. a predicted OOM)
  std::string skipped_reason;            // empty when the row ran
  std::string scenario_text;             // the scenario simulated (empty when skipped before building it)
  bool skipped() const { return !skipped_reason.empty(); }
  const std::string& summary_group() const { return group.empty() ? source_group : group; }
};

// The scenario of one row, without simulating it: skipped_reason set, or scenario_text ready.
ValidationRow plan_row(const CsvTable& table, const CsvRecord& record, workloads::Fidelity fidelity);

// Simulates a planned row (no-op when skipped) and fills predicted and error_pct. A layout the scenario
// loader rejects becomes a skipped row with the loader's message.
void predict_row(ValidationRow& row);

struct GroupSummary {
  std::string group;
  std::optional<double> mape_pct;  // nullopt when no row of the group ran
  std::size_t rows = 0;            // rows that ran
  std::size_t skipped = 0;
};

// Groups in order of first appearance among `rows`.
std::vector<GroupSummary> mape_by_group(const std::vector<ValidationRow>& rows);

struct ValidationReport {
  std::string data;  // the CSV's display name
  workloads::Fidelity fidelity = workloads::Fidelity::kAnalytical;
  std::vector<ValidationRow> rows;  // CSV order
  std::vector<GroupSummary> groups;
};

// Plans and predicts the rows whose row_id is in `only` (all when empty; an unknown id is an InputError
// naming --rows), on `threads` worker threads (results do not depend on it).
ValidationReport validate_measurements(const CsvTable& table, workloads::Fidelity fidelity,
                                       const std::vector<std::string>& only = {}, unsigned threads = 1);

// MosaicML's MFU numerator (llm-foundry scripts/train/benchmarking/README.md, "MFU includes attention FLOPs"):
// 3 · (2·N·s + 4·l·h·s²) per sequence — N all parameters including the embeddings, the attention core
// 4·l·h·s² forward (full square), backward twice the forward, no recompute — times `global_batch` sequences.
double mosaicml_flops(const workloads::ModelSpec& model, double global_batch);

// Narayanan et al. 2021 Eq. 3: FLOPs of one step of `global_batch` sequences with full recompute.
double narayanan_eq3_flops(const workloads::ModelSpec& model, double global_batch);

std::string validation_text(const ValidationReport& report);
std::string validation_json(const ValidationReport& report);

int validate_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace clustersim::cli
