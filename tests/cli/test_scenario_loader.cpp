// Scenario loading: values and unit conversions of a good scenario, text/JSON/resolved-text
// agreement, and the exact error (FILE:LINE:COL: field.path: message) for each kind of bad input.
#include "cli/scenario_loader.h"
#include "workloads/iteration_result.h"

#include <doctest/doctest.h>

#include "tests/test_support.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>

#include "sim/input_error.h"

namespace {

using clustersim::InputError;
using clustersim::workloads::Precision;
using clustersim::workloads::Scenario;
namespace cli = clustersim::cli;

const std::string kSourceDir = CLUSTERSIM_SOURCE_DIR;
const std::string kBad = kSourceDir + "/tests/data/bad/";

std::string error_of(const std::function<void()>& call) { return clustersim::testing::input_error_of(call); }

std::string file_error(const std::string& fixture) {
  return error_of([&] { cli::load_scenario_file(kBad + fixture); });
}

std::string text_error(const std::string& text, bool json = false) {
  return error_of([&] { cli::load_scenario_text(text, "inline.textproto", json, ""); });
}

// Every field of the value types except where the scenario came from.
void check_same(const Scenario& a, const Scenario& b) {
  CHECK(a.name == b.name);
  CHECK(a.cluster.nodes == b.cluster.nodes);
  CHECK(a.cluster.gpus_per_node == b.cluster.gpus_per_node);
  CHECK(a.cluster.gpu == b.cluster.gpu);
  CHECK(a.cluster.nvlink_per_direction == b.cluster.nvlink_per_direction);
  CHECK(a.cluster.nic_per_direction == b.cluster.nic_per_direction);
  CHECK(a.cluster.nvlink_hop_latency == b.cluster.nvlink_hop_latency);
  CHECK(a.cluster.network_hop_latency == b.cluster.network_hop_latency);
  CHECK(a.profile_ref == b.profile_ref);
  CHECK(a.profile.name == b.profile.name);
  CHECK(a.profile.origin == b.profile.origin);
  CHECK(a.profile.gpu.gpu == b.profile.gpu.gpu);
  CHECK(a.profile.gpu.peak_bf16 == b.profile.gpu.peak_bf16);
  CHECK(a.profile.collectives.nvlink_bus_efficiency == b.profile.collectives.nvlink_bus_efficiency);
  CHECK(a.jobs[0].model.name == b.jobs[0].model.name);
  CHECK(a.jobs[0].model.layers == b.jobs[0].model.layers);
  CHECK(a.jobs[0].model.hidden == b.jobs[0].model.hidden);
  CHECK(a.jobs[0].model.heads == b.jobs[0].model.heads);
  CHECK(a.jobs[0].model.ffn_hidden == b.jobs[0].model.ffn_hidden);
  CHECK(a.jobs[0].model.vocab == b.jobs[0].model.vocab);
  CHECK(a.jobs[0].model.seq_len == b.jobs[0].model.seq_len);
  CHECK(a.jobs[0].parallel.dp == b.jobs[0].parallel.dp);
  CHECK(a.jobs[0].parallel.micro_batch == b.jobs[0].parallel.micro_batch);
  CHECK(a.jobs[0].parallel.grad_accum == b.jobs[0].parallel.grad_accum);
  CHECK(a.jobs[0].parallel.ddp_bucket == b.jobs[0].parallel.ddp_bucket);
  CHECK(a.jobs[0].training.samples_per_epoch == b.jobs[0].training.samples_per_epoch);
  CHECK(a.jobs[0].training.epochs == b.jobs[0].training.epochs);
  CHECK(a.jobs[0].training.global_batch == b.jobs[0].training.global_batch);
  CHECK(a.jobs[0].training.precision == b.jobs[0].training.precision);
}

// A good scenario (GPT-3 2.7B shape, DDP on 2 x 8 A100), independent of the shipped scenarios/.
const char* const kGood = R"(# comment
name: "GPT 2.7B, DDP on 2 x 8 A100-SXM4-80GB"
cluster {
  nodes: 2
  gpus_per_node: 8
  gpu: "A100-SXM4-80GB"
  nvlink_gbytes_per_s_per_direction: 300
  nic_gbits_per_s_per_direction: 200
}
profile: "a100-sxm4-80gb"
model {
  name: "gpt-2.7b"
  layers: 32
  hidden: 2560
  heads: 32
  ffn_hidden: 10240
  vocab: 51200
  seq_len: 2048
}
parallel {
  dp: 16
  micro_batch: 4
  grad_accum: 2
  ddp_bucket_mib: 25
}
training {
  tokens: 30000000000
  epochs: 1
  global_batch: 128
  precision: BF16
}
)";

// kGood written as JSON (lowerCamelCase names and 64-bit integers as strings, as programs write them).
const char* const kGoodAsJson = R"({
  "name": "GPT 2.7B, DDP on 2 x 8 A100-SXM4-80GB",
  "cluster": {"nodes": 2, "gpusPerNode": 8, "gpu": "A100-SXM4-80GB",
              "nvlinkGbytesPerSPerDirection": 300, "nicGbitsPerSPerDirection": 200},
  "profile": "a100-sxm4-80gb",
  "model": {"name": "gpt-2.7b", "layers": 32, "hidden": 2560, "heads": 32, "ffnHidden": 10240,
            "vocab": 51200, "seqLen": 2048},
  "parallel": {"dp": 16, "microBatch": 4, "gradAccum": 2, "ddpBucketMib": 25},
  "training": {"tokens": "30000000000", "epochs": 1, "globalBatch": "128", "precision": "BF16"}
})";

// A minimal one-GPU scenario for inline error cases; line 1 is "cluster {".
const std::string kMinimal =
    "cluster { nodes: 1 gpus_per_node: 1 gpu: \"A100-SXM4-80GB\"\n"
    "          nvlink_gbytes_per_s_per_direction: 300 nic_gbits_per_s_per_direction: 200 }\n"
    "profile: \"a100-sxm4-80gb\"\n"
    "model { layers: 2 hidden: 64 heads: 4 vocab: 100 seq_len: 16 }\n"
    "parallel { dp: 1 micro_batch: 5 grad_accum: 2 }\n";

}  // namespace

TEST_CASE("a good scenario parses with units converted") {
  const Scenario s = cli::load_scenario_text(kGood, "dir/good.textproto", false, "");
  CHECK(s.name == "GPT 2.7B, DDP on 2 x 8 A100-SXM4-80GB");
  CHECK(s.source_file == "dir/good.textproto");
  CHECK(s.cluster.nodes == 2);
  CHECK(s.cluster.gpus_per_node == 8);
  CHECK(s.cluster.gpu == "A100-SXM4-80GB");
  // 300 GB/s = 300 x 1e9 B/s = 3e11 B/s (decimal); 200 Gbit/s = 200 x 1e9 / 8 = 2.5e10 B/s.
  CHECK(s.cluster.nvlink_per_direction.raw() == doctest::Approx(3e11).epsilon(1e-15));
  CHECK(s.cluster.nic_per_direction.raw() == doctest::Approx(2.5e10).epsilon(1e-15));
  CHECK(s.cluster.nvlink_hop_latency.raw() == 0);  // default
  CHECK(s.cluster.network_hop_latency.raw() == 0);
  CHECK(s.profile_ref == "a100-sxm4-80gb");
  CHECK(s.profile.name == "a100-sxm4-80gb");
  CHECK(s.profile.origin == "built-in");
  CHECK(s.jobs[0].model.name == "gpt-2.7b");
  CHECK(s.jobs[0].model.layers == 32);
  CHECK(s.jobs[0].model.hidden == 2560);
  CHECK(s.jobs[0].model.heads == 32);
  CHECK(s.jobs[0].model.ffn_hidden == 10240);
  CHECK(s.jobs[0].model.vocab == 51200);
  CHECK(s.jobs[0].model.seq_len == 2048);
  CHECK(s.jobs[0].parallel.dp == 16);
  CHECK(s.jobs[0].parallel.micro_batch == 4);
  CHECK(s.jobs[0].parallel.grad_accum == 2);
  // 25 MiB = 25 x 2^20 = 26,214,400 bytes (binary, as PyTorch's bucket_cap_mb).
  CHECK(s.jobs[0].parallel.ddp_bucket.raw() == 26214400.0);
  // tokens 3e10 / seq_len 2048 = 14,648,437.5 samples per epoch (exact in binary floating point).
  CHECK(s.jobs[0].training.samples_per_epoch == 14648437.5);
  CHECK(s.jobs[0].training.epochs == 1);
  CHECK(s.jobs[0].training.global_batch == 128);  // 4 x 2 x 16
  CHECK(s.jobs[0].training.precision == Precision::kBF16);
}

TEST_CASE("JSON form of a scenario gives the same values as text format") {
  check_same(cli::load_scenario_text(kGood, "good.textproto", false, ""),
             cli::load_scenario_text(kGoodAsJson, "good.json", true, ""));
}

TEST_CASE("the built-in default scenario equals scenarios/default.textproto") {
  const std::string path = kSourceDir + "/scenarios/default.textproto";
  const Scenario builtin = cli::load_default_scenario();
  CHECK(builtin.source_file == "<built-in default scenario>");
  const Scenario from_file = cli::load_scenario_file(path);
  CHECK(from_file.source_file == path);
  check_same(builtin, from_file);
}

TEST_CASE("defaults are filled in") {
  const Scenario s = cli::load_scenario_text(kMinimal + "training { samples: 1000 }\n", "dir/my-run.textproto",
                                             false, "");
  CHECK(s.name == "my-run");                 // file stem
  CHECK(s.jobs[0].model.name == "model");
  CHECK(s.jobs[0].model.ffn_hidden == 256);           // 4 x hidden 64
  CHECK(s.jobs[0].parallel.ddp_bucket.raw() == 26214400.0);  // 25 MiB
  CHECK(s.jobs[0].training.epochs == 1);
  CHECK(s.jobs[0].training.global_batch == 10);       // micro_batch 5 x grad_accum 2 x dp 1
  CHECK(s.jobs[0].training.precision == Precision::kBF16);
  CHECK(s.jobs[0].training.samples_per_epoch == 1000);
}

TEST_CASE("resolved text reloads to the same scenario") {
  SUBCASE("tokens that are not a whole number of samples are written as tokens") {
    const Scenario s = cli::load_scenario_text(kGood, "good.textproto", false, "");
    const std::string resolved = cli::resolved_scenario_text(s);
    CHECK(resolved.find("tokens: 30000000000") != std::string::npos);  // 3e10 / 2048 = 14,648,437.5 samples
    // No framework set and no model parallelism, ZeRO, recompute or flash: PyTorch DDP ran, and the file says so.
    CHECK(resolved.find("framework: PYTORCH_DDP") != std::string::npos);
    check_same(s, cli::load_scenario_text(resolved, "resolved.textproto", false, ""));
    // A fixed point: resolving the reloaded scenario (same source name) gives the same bytes.
    CHECK(cli::resolved_scenario_text(cli::load_scenario_text(resolved, s.source_file, false, "")) == resolved);
  }
  SUBCASE("every shipped scenario") {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(kSourceDir + "/scenarios")) {
      if (entry.path().extension() != ".textproto") continue;
      CAPTURE(entry.path().string());
      const Scenario s = cli::load_scenario_file(entry.path().string());
      // Every shipped scenario also simulates: each job finishes an iteration.
      const clustersim::workloads::ScenarioResult r = clustersim::workloads::simulate_scenario(s);
      for (const auto& job : r.jobs) CHECK(job.iteration_time.raw() > 0);
      check_same(s, cli::load_scenario_text(cli::resolved_scenario_text(s), "resolved.textproto", false,
                                            entry.path().parent_path().string()));
    }
  }
  SUBCASE("odd units round-trip exactly") {
    // 0.1 GB/s, 1.1 Gbit/s, 0.3 us and 0.7 MiB are not exact in binary; the resolved numbers must
    // still convert back to the identical doubles.
    const std::string text =
        "cluster { nodes: 1 gpus_per_node: 1 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 0.1\n"
        "          nic_gbits_per_s_per_direction: 1.1 nvlink_hop_latency_us: 0.3 network_hop_latency_us: 1.7 }\n"
        "profile: \"a100-sxm4-80gb\"\n"
        "model { layers: 2 hidden: 64 heads: 4 vocab: 100 seq_len: 16 }\n"
        "parallel { dp: 1 micro_batch: 5 ddp_bucket_mib: 0.7 }\n"
        "training { tokens: 100 epochs: 2.5 precision: FP16 }\n";
    const Scenario s = cli::load_scenario_text(text, "odd.textproto", false, "");
    CHECK(s.jobs[0].training.samples_per_epoch == 6.25);  // 100 tokens / 16
    CHECK(cli::resolved_scenario_text(s).find("tokens: 100\n") != std::string::npos);
    const Scenario again = cli::load_scenario_text(cli::resolved_scenario_text(s), "odd.textproto", false, "");
    check_same(s, again);
  }
}

TEST_CASE("bad scenario files name file, line:col and field") {
  const std::string cluster_fields =
      "nodes, gpus_per_node, gpu, nvlink_gbytes_per_s_per_direction, nic_gbits_per_s_per_direction, "
      "nvlink_hop_latency_us, network_hop_latency_us, node_preset, nics_per_node, fabric, torus, vertices, links, "
      "link_faults, slow_gpus, nvls, cpu_vendor";
  CHECK(file_error("syntax_error.textproto") ==
        kBad + "syntax_error.textproto:12:10: model.layers: Expected \":\", found \"32\".");
  CHECK(file_error("unknown_field.textproto") == kBad + "unknown_field.textproto:7:3: cluster.nvlink_gbps: " +
                                                     "unknown field \"nvlink_gbps\" (Cluster has: " + cluster_fields +
                                                     ")");
  // A missing field is reported at its enclosing message.
  CHECK(file_error("missing_micro_batch.textproto") ==
        kBad + "missing_micro_batch.textproto:18:1: parallel.micro_batch: missing (required, >= 1)");
  CHECK(file_error("missing_layers.textproto") ==
        kBad + "missing_layers.textproto:11:1: model.layers: missing (required, >= 1)");
  // Value errors point at the value: "  nvlink_gbytes_per_s_per_direction: -300" has '-' in column 38.
  CHECK(file_error("negative_bandwidth.textproto") ==
        kBad + "negative_bandwidth.textproto:7:38: cluster.nvlink_gbytes_per_s_per_direction: -300 must be > 0 "
               "(decimal GB/s per GPU per direction)");
  CHECK(file_error("zero_bandwidth.textproto") ==
        kBad + "zero_bandwidth.textproto:8:34: cluster.nic_gbits_per_s_per_direction: 0 must be > 0 "
               "(Gbit/s per GPU per direction)");
  CHECK(file_error("dp_mismatch.textproto") ==
        kBad + "dp_mismatch.textproto:19:7: parallel.dp: 8 does not equal the cluster's 16 GPUs "
               "(2 nodes x 8 GPUs per node)");
  CHECK(file_error("global_batch_mismatch.textproto") ==
        kBad + "global_batch_mismatch.textproto:25:17: training.global_batch: 130 is not micro_batch 4 x "
               "grad_accum 2 x dp 16 = 128");
  CHECK(file_error("heads_not_dividing.textproto") ==
        kBad + "heads_not_dividing.textproto:14:10: model.heads: 7 does not divide hidden 2560");
  CHECK(file_error("gpu_mismatch.textproto") ==
        kBad + "gpu_mismatch.textproto:6:8: cluster.gpu: \"A100-SXM4-80GB\" does not match the GPU of profile "
               "\"h100-sxm5-80gb\", which is \"H100-SXM5-80GB\"");
  CHECK(file_error("unknown_profile.textproto") ==
        kBad + "unknown_profile.textproto:10:10: profile: \"b200\" is not a built-in profile (a100-sxm4-80gb, "
               "h100-sxm5-80gb, tpu-v4, a100-sxm4-40gb, h200-sxm-141gb, gb200, vtrain-a100) and there is no file " + kBad + "b200");
  // A UTF-8 byte order mark is no character: the file loads as without it (it used to be "non ascii codepoint
  // 239"). The tokenizer's own words are said plainly: a byte that is not ASCII outside a string, a control
  // character, a string not closed, a file cut off after a "{".
  {
    const std::string scenario = clustersim::testing::slurp(kSourceDir + "/scenarios/default.textproto");
    CHECK(cli::load_scenario_text("\xEF\xBB\xBF" + scenario, "bom.textproto", false, kSourceDir + "/scenarios").name ==
          "GPT 2.7B, DDP on 2 x 8 A100-SXM4-80GB");
    const auto text_error = [&](const std::string& text) {
      return error_of([&] { cli::load_scenario_text(text, "t.textproto", false, ""); });
    };
    CHECK(text_error("name: \"x\"\ncluster \x82 {") ==
          "t.textproto:2:9: cluster: byte 0x82 is not ASCII: outside quoted strings, text format takes ASCII names and "
          "numbers only (is this a text file in UTF-8?)");
    CHECK(text_error("name: \"x\"\ncluster \x02 {") ==
          "t.textproto:2:9: cluster: a control character (a byte below 0x20 other than tab or a line end): is this a "
          "text file?");
    CHECK(text_error("name: \"GPT") ==
          "t.textproto:1:11: the quoted string is not closed on its line (a string ends at its closing \" on the same "
          "line)");
    CHECK(text_error("name: \"x\"\nmodel {") ==
          "t.textproto:2:8: model: Expected identifier, got: the end of the file: the file is cut off");
  }
  // JSON: an object where one value belongs is said at the value, with its path; text that is not UTF-8 and a
  // lone surrogate escape at their position (protobuf's parser gave neither, nor the field).
  {
    const auto json_error = [&](const std::string& text) {
      return error_of([&] { cli::load_scenario_text(text, "j.json", true, ""); });
    };
    CHECK(json_error("{\"name\": {}, \"cluster\": {\"nodes\": 2}}") ==
          "j.json:1:10: name: expected one value, found an object");
    CHECK(json_error("{\"name\": \"x\",\n \"cluster\": {\n  \"nodes\": {}, \"gpusPerNode\": 8}}") ==
          "j.json:3:12: cluster.nodes: expected one value, found an object");
    CHECK(json_error("{\"name\": \"GPT \xff x\"}") == "j.json:1:15: byte 0xFF is not UTF-8, which JSON text must be");
    // Well-formed sequences only: an overlong NUL, an encoded surrogate.
    CHECK(json_error("{\"name\": \"\xc0\x80\", \"x\": 1}") ==
          "j.json:1:11: byte 0xC0 is not UTF-8, which JSON text must be");
    CHECK(json_error("{\"name\": \"\xed\xa0\x80\"}") == "j.json:1:11: byte 0xED is not UTF-8, which JSON text must be");
    CHECK(json_error("{\"name\": \"GPT \\ud800 x\"}") ==
          "j.json:1:15: \\ud800 is half of a surrogate pair, not followed by its low half: no character");
  }
  // A folder where the profile file should be: the scenario's field says so (it used to name the folder alone).
  {
    std::string text = clustersim::testing::slurp(kBad + "unknown_profile.textproto");
    text.replace(text.find("\"b200\""), 6, "\"subdir\"");
    const auto dir = clustersim::testing::scratch_dir("profile-folder");
    std::filesystem::create_directory(dir / "subdir");
    CHECK(error_of([&] { cli::load_scenario_text(text, "s.textproto", false, dir.string()); }) ==
          "s.textproto:10:10: profile: \"subdir\" is a folder, not a profile file (" + (dir / "subdir").string() + ")");
    std::filesystem::remove_all(dir);
  }
  // An error inside a profile file names the profile file, not the scenario.
  CHECK(file_error("profile_file_unknown_field.textproto") ==
        kBad + "profile_unknown_field.textproto:14:3: gpu.tensor_tflops: unknown field \"tensor_tflops\" "
               "(GpuProfile has: gpu, peak_bf16_tflops, peak_fp16_tflops, peak_tf32_tflops, peak_fp32_tflops, "
               "hbm_gbytes_per_s, memory_capacity_gib, gemm_efficiency, hbm_efficiency, kernel_launch_us, gemm_table, "
               "hbm_curve, compute_slowdown_during_comm, sm_count, gemm_tile_m, gemm_tile_n, peak_fp8_tflops, "
        "flash_attention_fa2, flash_attention_fa3, flash_attention_triton)");
  // JSON: protobuf's parser gives no position; reading the text again finds the key, on line 3 at
  // column 70 (`  "cluster": {"nodes": 2, "gpusPerNode": 8, "gpu": "A100-SXM4-80GB", "nvlinkGbps"`).
  CHECK(file_error("unknown_field.json") == kBad + "unknown_field.json:3:70: cluster.nvlinkGbps: unknown field "
                                                   "\"nvlinkGbps\" (Cluster has: " + cluster_fields + ")");
  CHECK(file_error("no_such_file.textproto") ==
        kBad + "no_such_file.textproto: cannot read file: No such file or directory");
}

TEST_CASE("line ends: CRLF and a lone CR (old Mac files) read as LF") {
  // A file of CR line ends used to be one line whose first '#' comment hid the rest: "cluster: missing".
  const std::string text = "# a comment\n" + kMinimal + "training { samples: 1000 }\n";
  std::string crlf, cr;
  for (const char c : text) {
    crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    cr += c == '\n' ? '\r' : c;
  }
  const Scenario lf_scenario = cli::load_scenario_text(text, "s.textproto", false, "");
  check_same(lf_scenario, cli::load_scenario_text(crlf, "s.textproto", false, ""));
  check_same(lf_scenario, cli::load_scenario_text(cr, "s.textproto", false, ""));
  // Errors count the lines the same way: `layers: 0` on line 5 of each.
  std::string bad = text;
  bad.replace(bad.find("layers: 2"), 9, "layers: 0");
  std::string bad_cr = bad;
  std::replace(bad_cr.begin(), bad_cr.end(), '\n', '\r');
  CHECK(text_error(bad).rfind("inline.textproto:5:", 0) == 0);
  CHECK(text_error(bad_cr).rfind("inline.textproto:5:", 0) == 0);
}

TEST_CASE("an error is one line: control characters escaped, a huge echoed value shortened") {
  // A NUL in what() would end the message early, a newline would split it.
  const InputError e("f.textproto", 3, 4, "model.preset", std::string("\"llama2-7b\0zzz\"\nnext", 20));
  CHECK(std::string(e.what()) == "f.textproto:3:4: model.preset: \"llama2-7b\\x00zzz\"\\x0anext");
  // 2,000 characters at most: the first 1,600, how many were left out, the last 300.
  const InputError huge("f", 0, 0, "name", std::string(5000, 'A'));
  const std::string what = huge.what();
  CHECK(what.size() < 2000);
  CHECK(what.find(" ... (3109 characters left out) ... ") == 1600);  // "f: name: " + 5000 = 5009; 5009 − 1900
}

TEST_CASE("bad JSON scenarios: line:col and field path") {
  // Columns count characters; a tab is one.
  SUBCASE("a syntax error, where the reader stops, with the member being read") {
    CHECK(text_error("{\n  \"cluster\": {\"nodes\": 2\n  \"gpu\": 1}}\n", true) ==
          "inline.textproto:3:3: cluster: not valid JSON: expected ',' or '}' after a member");
    CHECK(text_error("{\"cluster\": {\"nodes\": 2", true) ==
          "inline.textproto:1:24: cluster: not valid JSON: expected ',' or '}' after a member (the file ends here)");
    CHECK(text_error("{\"name\": \"x\"} trailing", true) ==
          "inline.textproto:1:15: not valid JSON: text after the end of the JSON value");
    CHECK(text_error("{\"name\": x}", true) ==
          "inline.textproto:1:10: name: not valid JSON: expected a value, found \"x\" (strings are quoted)");
    // A number no double holds: protobuf said "Number exceeds the range of double." with no position or field.
    CHECK(text_error("{\"cluster\": {\"nodes\": 1, \"nvlinkGbytesPerSPerDirection\": 1e400}}", true) ==
          "inline.textproto:1:58: cluster.nvlink_gbytes_per_s_per_direction: not valid JSON: \"1e400\" is beyond the "
          "range of a double (about 1.8e308)");
    CHECK(text_error("{\"jobs\": [{}, {\"name\": \"a}]}", true) ==
          "inline.textproto:1:24: jobs[1].name: not valid JSON: string not closed");
    CHECK(text_error("", true) == "inline.textproto:1:1: not valid JSON: expected a value (the file ends here)");
    CHECK(text_error("{\"cluster\": {\"nodes\": 012}}", true) ==
          "inline.textproto:1:23: cluster.nodes: not valid JSON: \"012\" starts with 0: octal and hex numbers are not "
          "JSON");
    CHECK(text_error("[1]", true) == "inline.textproto:1:1: the JSON value must be an object (a Scenario)");
    // A list where one value or an object belongs: protobuf said "training: Proto field is not repeating, cannot
    // start list." with no position (at the top level) and its own words.
    CHECK(text_error("{\"name\": \"x\",\n \"training\": []}", true) ==
          "inline.textproto:2:2: training: expected an object (a Training), found a list");
    CHECK(text_error("{\"cluster\": {\"nodes\": [1]}}", true) ==
          "inline.textproto:1:23: cluster.nodes: expected one value, found a list");
    // An enum name in the wrong case: the names it takes, not "expected an object".
    CHECK(text_error("{\"training\": {\"precision\": \"bf16\"}}", true) ==
          "inline.textproto:1:28: training.precision: \"bf16\" is not one of BF16, FP16, FP32, TF32, FP8");
  }
  SUBCASE("nesting is bounded, so no input exhausts the stack") {
    const std::string deep(100000, '[');
    CHECK(text_error("{\"name\": " + deep, true) ==
          "inline.textproto:1:265: not valid JSON: nested deeper than 256 levels");  // '[' 256 at 10 + 255
  }
  SUBCASE("the dialect protobuf accepts: single quotes, bare keys, a trailing comma") {
    CHECK(text_error("{'name': 'x', cluster: {nodes: 0,},}", true) ==
          "inline.textproto:1:32: cluster.nodes: 0 must be >= 1");
  }
  SUBCASE("a value protobuf refuses, at the value; camelCase keys give the schema's names") {
    CHECK(text_error("{\n\t\"cluster\": {\"gpusPerNode\": \"eight\"}}", true) ==
          "inline.textproto:2:29: cluster.gpus_per_node: invalid value \"eight\" for type TYPE_UINT32");
    CHECK(text_error("{\"jobs\": [{\"name\": \"a\"}, {\"model\": {\"layers\": -1}}]}", true) ==
          "inline.textproto:1:47: jobs[1].model.layers: invalid value -1 for type TYPE_UINT32");
  }
  SUBCASE("an unknown key holding '.' is found at the key itself, not at its object") {
    // The key "a.b" is on line 2 at column 4 (`   "a.b"`) inside jobs[1]; it was reported at jobs' key (1:3).
    CHECK(text_error("{\"jobs\": [{\"name\": \"a\"}, {\"name\": \"b\",\n   \"a.b\": 1}]}", true)
              .starts_with("inline.textproto:2:4: jobs[1].a.b: unknown field \"a.b\" (Job has: name,"));
  }
  SUBCASE("a scalar where an object belongs names the message type, not protobuf's type URL") {
    CHECK(text_error("{\"training\": 5}", true) ==
          "inline.textproto:1:2: training: expected an object (a Training), found 5");
  }
  SUBCASE("a key given twice (protobuf would keep the last), at the second") {
    CHECK(text_error("{\"cluster\": {\"nodes\": 2, \"nodes\": 3}}", true) ==
          "inline.textproto:1:26: cluster.nodes: given twice (first at 1:14)");
    CHECK(text_error("{\"cluster\": {\"gpus_per_node\": 2, \"gpusPerNode\": 3}}", true) ==
          "inline.textproto:1:34: cluster.gpus_per_node: given twice (first at 1:14)");
  }
}

TEST_CASE("bad inline scenarios") {
  const std::string good_training = "training { samples: 1000 }\n";
  SUBCASE("unknown top-level field") {
    CHECK(text_error(kMinimal + good_training + "seed: 3\n") ==
          "inline.textproto:7:1: seed: unknown field \"seed\" (Scenario has: name, cluster, profile, model, "
          "parallel, training, fidelity, jobs, nccl)");
  }
  SUBCASE("strings: a NUL character or bytes that are not UTF-8 are refused where the string is written") {
    // "profile: \"a\\000.x\"" would open the file "a" (a C path ends at the NUL); a name of raw bytes 0xFF 0xFE
    // would go as such into outputs that say they are UTF-8. Line 7, the value's opening quote at column 7/10.
    CHECK(text_error(kMinimal + good_training + "name: \"a\\000.x\"\n") ==
          "inline.textproto:7:7: name: contains a NUL character (at byte 1 of the string)");
    CHECK(text_error(kMinimal + good_training + "name: \"ok \xff\xfe\"\n") ==
          "inline.textproto:7:7: name: is not UTF-8 text (byte 0xFF at byte 3 of the string)");
    // JSON: "\u0000" in a nested string, and UTF-8 itself passes ("é" is 0xC3 0xA9).
    CHECK(text_error("{\"model\": {\"name\": \"x\\u0000\"}}", true) ==
          "inline.textproto:1:20: model.name: contains a NUL character (at byte 1 of the string)");
    CHECK(clustersim::cli::load_scenario_text(kMinimal + good_training + "name: \"caf\xc3\xa9\"\n", "ok.textproto",
                                              false, "")
              .name == "caf\xc3\xa9");
  }
  SUBCASE("text format: a parse error inside a repeated message names its element, as JSON and the loader do") {
    // The second `jobs` block (jobs[1]), in block and list syntax; a non-repeated message gets no index.
    const std::string a = "jobs { name: \"a\" parallel { dp: 1 } }\n";
    CHECK(text_error(a + "jobs { name: \"b\" parallel { dpp: 1 } }\n")
              .starts_with("inline.textproto:2:29: jobs[1].parallel.dpp: unknown field \"dpp\" (Parallelism has: dp,"));
    CHECK(text_error(a + "jobs { name: \"b\" model { layers: -1 } }\n") ==
          "inline.textproto:2:34: jobs[1].model.layers: Expected integer, got: -");
    CHECK(text_error("jobs: [ { name: \"a\" }, { name: \"b\" }, { model < layers: x > } ]\n") ==
          "inline.textproto:1:57: jobs[2].model.layers: Expected integer, got: x");
  }
  SUBCASE("an empty model preset is refused, as an empty node_preset is (it ran as no preset)") {
    std::string model = kMinimal;
    model.replace(model.find("model { "), 8, "model { preset: \"\" ");
    CHECK(text_error(model + good_training)
              .starts_with("inline.textproto:4:17: model.preset: empty: a built-in model ("));
  }
  SUBCASE("a name with a control character: printed in one-line rows and terminals, so refused") {
    // Text format's "\x1b" escape is ESC (U+001B), "\n" a newline; names are checked where they are read.
    CHECK(text_error("name: \"red\\x1b[31m\"\n" + kMinimal + good_training) ==
          "inline.textproto:1:7: name: contains the control character U+001B (names are printed in one-line rows)");
    std::string model = kMinimal;
    model.replace(model.find("model { "), 8, "model { name: \"a\\nb\" ");
    CHECK(text_error(model + good_training)
              .starts_with("inline.textproto:4:15: model.name: contains the control "
                           "character U+000A"));
  }
  SUBCASE("protobuf counts a tab as reaching the next multiple of 8 columns") {
    CHECK(text_error("cluster {\n\tnodes: x }\n") ==
          "inline.textproto:2:16: cluster.nodes: Expected integer, got: x");
  }
  SUBCASE("a query width beyond 2^20: 4 heads x 4294967295 would overflow the GEMM counts") {
    std::string text = kMinimal + good_training;
    text.replace(text.find("heads: 4 "), 9, "heads: 4 head_dim: 4294967295 ");
    CHECK(text_error(text) == "inline.textproto:4:49: model.head_dim: 4294967295 x heads 4 = 17179869180 is more "
                              "than the 1048576 (2^20) query width clustersim models");
  }
  SUBCASE("values no hardware or training run comes near are refused at their field, not simulated for months") {
    // Each replaces one value of kMinimal (lines 1-5) or appends a field; the error names the line and the field.
    struct Case {
      std::string from, to, expected;
    };
    const Case cases[] = {
        {"hidden: 64 heads: 4", "hidden: 2097152 heads: 4",
         "inline.textproto:4:27: model.hidden: 2097152 is above 1048576 (no model is that wide"},
        {"seq_len: 16", "seq_len: 268435456",
         "inline.textproto:4:59: model.seq_len: 268435456 tokens is above 134217728 tokens (no training sequence"},
        // 2^16 sequences of 2^15 tokens = 2^31 tokens in one micro-batch.
        {"seq_len: 16 }\nparallel { dp: 1 micro_batch: 5", "seq_len: 32768 }\nparallel { dp: 1 micro_batch: 65536",
         "inline.textproto:5:31: parallel.micro_batch: 65536 x seq_len 32768 is above 2^30 tokens per micro-batch"},
        {"parallel { dp: 1", "nccl { launch_overhead_us: 2e6 }\nparallel { dp: 1",
         "inline.textproto:5:28: nccl.launch_overhead_us: 2e+06 us is above 1e+06 us"},
        {"parallel { dp: 1", "parallel { framework: HOROVOD horovod_cycle_ms: 0.001 dp: 1",
         "inline.textproto:5:49: parallel.horovod_cycle_ms: 0.001 ms is below 0.01 ms (Horovod's default is 1 ms"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.to);
      std::string text = kMinimal + good_training;
      REQUIRE(text.find(c.from) != std::string::npos);
      text.replace(text.find(c.from), c.from.size(), c.to);
      CHECK(text_error(text).starts_with(c.expected));
    }
    // A dataset of less than one sequence (8 tokens at seq_len 16), or epochs covering less than one sample
    // (1e-9 x 1000 samples): the step count rounded up to a whole step billed a full one for nothing.
    CHECK(text_error(kMinimal + "training { tokens: 8 }\n") ==
          "inline.textproto:6:20: training.tokens: 8 is less than one sequence of seq_len 16 tokens");
    CHECK(text_error(kMinimal + "training { samples: 1000 epochs: 1e-9 }\n") ==
          "inline.textproto:6:34: training.epochs: 1e-09 epochs of 1000 samples is less than one sample");
    // Training-side rates: a loader under 0.01 samples/s, a host link under 1 kB/s.
    CHECK(text_error(kMinimal + "training { samples: 1000 loader_samples_per_s_per_node: 0.001 }\n")
              .starts_with("inline.textproto:6:57: training.loader_samples_per_s_per_node: 0.001 samples/s is below "
                           "0.01 samples/s"));
    CHECK(text_error(kMinimal + "training { samples: 1000 host_to_device_GBps: 1e-7 }\n")
              .starts_with("inline.textproto:6:47: training.host_to_device_GBps: 1e-07 GB/s is below 1e-06 GB/s"));
  }
  SUBCASE("negative number for an unsigned field") {
    CHECK(text_error("model {\n  layers: -2\n}\n") == "inline.textproto:2:11: model.layers: Expected integer, got: -");
  }
  SUBCASE("unknown enum value lists the valid ones") {
    CHECK(text_error(kMinimal + "training { samples: 1 precision: BF17 }\n") ==
          "inline.textproto:6:34: training.precision: Unknown enumeration value of \"BF17\" for field "
          "\"precision\". Valid values: PRECISION_UNSPECIFIED, BF16, FP16, FP32, TF32, FP8.");
  }
  SUBCASE("a field given twice") {
    CHECK(text_error("cluster { nodes: 1 nodes: 2 }\n") ==
          "inline.textproto:1:20: cluster.nodes: Non-repeated field \"nodes\" is specified multiple times.");
  }
  SUBCASE("samples and tokens together") {
    CHECK(text_error(kMinimal + "training { samples: 1 tokens: 2 }\n") ==
          "inline.textproto:6:23: training.tokens: Field \"tokens\" is specified along with field \"samples\", "
          "another member of oneof \"dataset\".");
  }
  SUBCASE("neither samples nor tokens") {
    CHECK(text_error(kMinimal + "training { epochs: 2 }\n") ==
          "inline.textproto:6:1: training: missing samples or tokens (exactly one is required)");
  }
  SUBCASE("missing message") {
    CHECK(text_error(kMinimal) == "inline.textproto: training: missing (required: samples or tokens per epoch)");
  }
  SUBCASE("global batch on one GPU") {
    CHECK(text_error(kMinimal + "training { samples: 1000 global_batch: 12 }\n") ==
          "inline.textproto:6:40: training.global_batch: 12 is not micro_batch 5 x grad_accum 2 x dp 1 = 10");
  }
  SUBCASE("a count too large to simulate fails before anything is built") {
    // The bound: simulated GPUs x grad_accum x layers per stage x 16 tasks per layer at least; on 1 GPU with 2
    // layers that is 32 x grad_accum, and 32 x 2,097,152 = 2^26 is the most: 2,097,153 micro-batches (bound
    // 67,108,896) are refused.
    const std::string cluster = kMinimal.substr(0, kMinimal.find("model {"));
    CHECK(text_error(cluster +
                     "model { layers: 2 hidden: 64 heads: 4 vocab: 100 seq_len: 16 }\n"
                     "parallel { dp: 1 micro_batch: 5 grad_accum: 2097153 }\n" +
                     good_training) ==
          "inline.textproto:5:45: parallel.grad_accum: 2097153 micro-batches x 2 layers per pipeline stage x 1 "
          "simulated GPU x 16 tasks per layer need at least 67108896 tasks, more than the 67108864 clustersim builds");
    CHECK(text_error(cluster +
                     "model { layers: 2 hidden: 64 heads: 4 vocab: 100 seq_len: 16 }\n"
                     "parallel { dp: 1 micro_batch: 5 grad_accum: 2097152 }\n" +
                     good_training)
              .find("grad_accum") == std::string::npos);
    // 99,999,999 layers x 2 micro-batches x 16 = 3,199,999,968: the layers are the larger factor and are named.
    CHECK(text_error(cluster +
                     "model { layers: 99999999 hidden: 64 heads: 4 vocab: 100 seq_len: 16 }\n"
                     "parallel { dp: 1 micro_batch: 5 grad_accum: 2 }\n" +
                     good_training) ==
          "inline.textproto:4:17: model.layers: 2 micro-batches x 99999999 layers per pipeline stage x 1 simulated "
          "GPU x 16 tasks per layer need at least 3199999968 tasks, more than the 67108864 clustersim builds");
    // DDP simulates every GPU, not one per replica: 16 GPUs x 4 micro-batches x 1,000,000 layers x 16 = 1.024e9
    // (one replica's GPU alone would be 6.4e7, under the bound, and the run took minutes and gigabytes).
    CHECK(text_error("cluster { nodes: 2 gpus_per_node: 8 gpu: \"A100-SXM4-80GB\"\n"
                     "          nvlink_gbytes_per_s_per_direction: 300 nic_gbits_per_s_per_direction: 200 }\n"
                     "profile: \"a100-sxm4-80gb\"\n"
                     "model { layers: 1000000 hidden: 64 heads: 4 vocab: 100 seq_len: 16 }\n"
                     "parallel { dp: 16 micro_batch: 1 grad_accum: 4 }\n" +
                     good_training) ==
          "inline.textproto:4:17: model.layers: 4 micro-batches x 1000000 layers per pipeline stage x 16 simulated "
          "GPUs x 16 tasks per layer need at least 1.024e+09 tasks, more than the 67108864 clustersim builds");
  }
  SUBCASE("more training steps than clustersim counts") {
    // 1e15 epochs x 1000 samples / global batch 10 x grad_accum 2 = 2e17 micro-batch steps > 2^53.
    CHECK(text_error(kMinimal + "training { samples: 1000 epochs: 1e15 }\n") ==
          "inline.textproto:6:34: training.epochs: training would take 2e+17 micro-batch steps, more than the "
          "9007199254740992 clustersim counts");
  }
  SUBCASE("non-finite and non-positive numbers") {
    CHECK(text_error(kMinimal + "training { samples: 1000 epochs: nan }\n") ==
          "inline.textproto:6:34: training.epochs: nan is not a finite number");
    CHECK(text_error(kMinimal + "training { samples: 1000 epochs: -1 }\n") ==
          "inline.textproto:6:34: training.epochs: -1 must be > 0 (epochs)");
    CHECK(text_error(kMinimal + "training { tokens: 0 }\n") == "inline.textproto:6:20: training.tokens: 0 must be > 0");
  }
  SUBCASE("missing profile") {
    CHECK(text_error("cluster { nodes: 1 gpus_per_node: 1 gpu: \"A100-SXM4-80GB\" "
                     "nvlink_gbytes_per_s_per_direction: 300 nic_gbits_per_s_per_direction: 200 }\n") ==
          "inline.textproto: profile: missing (required: a built-in profile (a100-sxm4-80gb, h100-sxm5-80gb, tpu-v4, "
          "a100-sxm4-40gb, h200-sxm-141gb, gb200, vtrain-a100) "
          "or a path to a profile file, relative to the scenario file)");
  }
  SUBCASE("an enum number that names no value, in text and JSON, at any depth") {
    // Protobuf enums are open: fidelity 99 was run as FLOW, schedule 99 as the automatic one, nccl.algorithm 99
    // ignored. Each now names the field and the values there are.
    CHECK(text_error(kMinimal + good_training + "fidelity: 99\n") ==
          "inline.textproto:7:11: fidelity: 99 is not one of FLOW, ANALYTICAL");
    CHECK(
        text_error(kMinimal + good_training + "nccl { algorithm: 42 }\n") ==
        "inline.textproto:7:19: nccl.algorithm: 42 is not one of RING, TREE, NVLS, COLLNET, HIERARCHICAL, TORUS, PAT, "
        "NVLS_TREE");
    const std::string one_f_one_b = "parallel { dp: 1 micro_batch: 5 grad_accum: 2 schedule: 7 }\n";
    CHECK(text_error(kMinimal.substr(0, kMinimal.find("parallel {")) + one_f_one_b + good_training) ==
          "inline.textproto:5:57: parallel.schedule: 7 is not one of GPIPE, ONE_F_ONE_B, INTERLEAVED_ONE_F_ONE_B");
    CHECK(
        text_error(R"({"fidelity": 99})", true).starts_with("inline.textproto:1:14: fidelity: 99 is not one of FLOW"));
  }
  SUBCASE("products of layout numbers are 64-bit: pp 2 x vp 2^31 is not 0") {
    // pp x vp in 32 bits wrapped to 0, and layers % 0 killed every command with SIGFPE.
    const std::string cluster =
        "cluster { nodes: 1 gpus_per_node: 2 gpu: \"A100-SXM4-80GB\"\n"
        "          nvlink_gbytes_per_s_per_direction: 300 nic_gbits_per_s_per_direction: 200 }\n"
        "profile: \"a100-sxm4-80gb\"\n"
        "model { layers: 4 hidden: 64 heads: 4 vocab: 100 seq_len: 16 }\n";
    CHECK(text_error(cluster + "parallel { dp: 1 pp: 2 vp: 2147483648 micro_batch: 1 grad_accum: 2 }\n" + good_training)
              .find("parallel.pp: pp 2 x vp 2147483648 does not divide 4 layers") != std::string::npos);
  }
  SUBCASE("host dispatch on a framework whose graph has no host thread is set but unused") {
    const std::string horovod = kMinimal.substr(0, kMinimal.find("parallel {")) +
                                "parallel { dp: 1 micro_batch: 5 grad_accum: 2 framework: HOROVOD }\n";
    CHECK(text_error(horovod + "training { samples: 1000 host_dispatch_us_per_kernel: 200 }\n") ==
          "inline.textproto:6:55: training.host_dispatch_us_per_kernel: not modelled for Horovod (its graph has no "
          "host thread); the DDP, FSDP, DeepSpeed and Megatron graphs take it");
  }
  SUBCASE("a finite value too large for its units, and more GPUs than clustersim models") {
    // 1e308 Gbit/s is finite, but x 1e9 / 8 in bytes per second it is not.
    std::string nic = kMinimal;
    nic.replace(nic.find("nic_gbits_per_s_per_direction: 200"), 34, "nic_gbits_per_s_per_direction: 1e308");
    CHECK(text_error(nic + good_training) ==
          "inline.textproto:2:81: cluster.nic_gbits_per_s_per_direction: 1e+308 is too large (at most 1e+18)");
    // 2 nodes x 2^20 GPUs: 2^21 GPUs, past the 2^20 bound (the per-node count is the larger one, and named).
    std::string big = kMinimal;
    big.replace(big.find("nodes: 1 gpus_per_node: 1"), 25, "nodes: 2 gpus_per_node: 1048576");
    CHECK(text_error(big + good_training) ==
          "inline.textproto:1:35: cluster.gpus_per_node: 2 nodes x 1048576 GPUs per node is more GPUs than clustersim "
          "models (1048576)");
  }
  SUBCASE("MoE figures on a dense model are set but unused") {
    CHECK(text_error(kMinimal.substr(0, kMinimal.find("parallel {")) +
                     "parallel { dp: 1 micro_batch: 5 grad_accum: 2 moe_token_skew: 0.5 }\n" + good_training) ==
          "inline.textproto:5:63: parallel.moe_token_skew: the model is dense (no experts): nothing is routed");
    CHECK(text_error(kMinimal.substr(0, kMinimal.find("parallel {")) +
                     "parallel { dp: 1 micro_batch: 5 grad_accum: 2 moe_capacity_factor: 1.25 }\n" + good_training) ==
          "inline.textproto:5:68: parallel.moe_capacity_factor: the model is dense (no experts): nothing is routed");
  }
  SUBCASE("JSON errors") {
    CHECK(text_error(R"({"parallel": {"dp": -1}})", true) ==
          "inline.textproto:1:21: parallel.dp: invalid value -1 for type TYPE_UINT32");
    CHECK(text_error(R"({"seed": 1})", true) ==
          "inline.textproto:1:2: seed: unknown field \"seed\" (Scenario has: name, cluster, profile, model, parallel, "
          "training, fidelity, jobs, nccl)");
    CHECK(text_error(R"({"cluster": {"nodes": 1},)", true) ==
          "inline.textproto:1:26: not valid JSON: expected a key or '}' (the file ends here)");
  }
}

TEST_CASE("link faults: a GPU cut off from the other nodes is named at load time, ANALYTICAL refuses them") {
  // kGood's 2 x 8 DGX-like nodes, one NIC per GPU on rail leaves. GPU 3's only NIC (n0/nic3) down: GPU 3 still
  // reaches node 0's GPUs over NVLink (GPUs do not forward), but no GPU of node 1 — the second anchor, GPU 15.
  std::string cut = kGood;
  cut.replace(cut.find("  nodes: 2\n"), 11, "  nodes: 2\n  link_faults { from: \"n0/nic3\" to: \"rail3/leaf0\" down: true }\n");
  CHECK(error_of([&] { cli::load_scenario_text(cut, "cut.textproto", false, ""); }) ==
        "cut.textproto:5:3: cluster.link_faults: no route from GPU 3 (n0/gpu3) to GPU 15 (n1/gpu7) with these links "
        "down");
  // Half its bandwidth instead: FLOW loads it; ANALYTICAL's closed forms would ignore it, so it is refused at
  // the fidelity field: kGood's 31 lines + the fault's = 32, so the appended field is on line 33, its value at 11.
  std::string half = kGood;
  half.replace(half.find("  nodes: 2\n"), 11,
               "  nodes: 2\n  link_faults { from: \"n0/nic3\" to: \"rail3/leaf0\" bandwidth_factor: 0.5 }\n");
  CHECK(cli::load_scenario_text(half, "half.textproto", false, "").cluster.link_faults.size() == 1);
  CHECK(error_of([&] { cli::load_scenario_text(half + "fidelity: ANALYTICAL\n", "half.textproto", false, ""); }) ==
        "half.textproto:33:11: fidelity: ANALYTICAL ignores cluster.link_faults (its closed-form collectives use the "
        "nominal bandwidths): use fidelity FLOW with link faults");
  // Faults on one link multiply: 1e-3 · 1e-3 = 1e-6 is the slowest allowed, a third 1e-3 makes it 1e-9 (each
  // factor alone passes the 1e-6 check; 60 of 1e-6 underflowed to a link that never delivered). Lines 5-7.
  std::string slow = kGood;
  std::string faults = "  nodes: 2\n";
  for (int i = 0; i < 3; ++i)
    faults += "  link_faults { from: \"n0/nic3\" to: \"rail3/leaf0\" bandwidth_factor: 0.001 }\n";
  slow.replace(slow.find("  nodes: 2\n"), 11, faults);
  CHECK(error_of([&] { cli::load_scenario_text(slow, "slow.textproto", false, ""); }) ==
        "slow.textproto:7:69: cluster.link_faults[2].bandwidth_factor: with the faults before it, link "
        "n0/nic3->rail3/leaf0 runs at 1e-09 of its bandwidth, below 1e-6: a link that slow is down for any training "
        "step (use down: true)");
}

TEST_CASE("gradient_dtype: Megatron's choice, the other frameworks' is fixed, and the other value is refused") {
  // DDP, Horovod and DataParallel under autocast keep fp32 gradients; FSDP and DeepSpeed reduce 16-bit ones.
  // kMinimal's line 5 is parallel (1 GPU, DDP); line 6 the training below, its value at column
  // 1 + len("training { ") 11 + len("samples: 10 ") 12 + len("gradient_dtype: ") 16 = 40.
  const std::string half = "training { samples: 10 gradient_dtype: HALF_GRADIENTS }\n";
  CHECK(text_error(kMinimal + half) ==
        "inline.textproto:6:40: training.gradient_dtype: PyTorch DDP under autocast keeps fp32 gradients; "
        "HALF_GRADIENTS is modelled for MEGATRON (FSDP and DEEPSPEED reduce 16-bit gradients)");
  std::string fsdp = kMinimal;
  fsdp.replace(fsdp.find("grad_accum: 2"), 13, "grad_accum: 2 framework: FSDP");
  CHECK(text_error(fsdp + "training { samples: 10 gradient_dtype: FP32_GRADIENTS }\n") ==
        "inline.textproto:6:40: training.gradient_dtype: PyTorch FSDP reduces 16-bit gradients (the model's dtype); "
        "FP32_GRADIENTS is modelled for MEGATRON only");
  CHECK(cli::load_scenario_text(fsdp + half, "f.textproto", false, "").jobs[0].training.gradients ==
        clustersim::workloads::GradientDtype::k16Bit);
  CHECK(cli::load_scenario_text(kMinimal + "training { samples: 10 gradient_dtype: FP32_GRADIENTS }\n", "d.textproto",
                                false, "").jobs[0].training.gradients == clustersim::workloads::GradientDtype::kFp32);
}

TEST_CASE("precision FP8: accepted on an H100 profile, refused where the profile has no FP8 peak") {
  const std::string h100 =
      "cluster { nodes: 1 gpus_per_node: 8 gpu: \"H100-SXM5-80GB\"\n"
      "          nvlink_gbytes_per_s_per_direction: 450 nic_gbits_per_s_per_direction: 400 }\n"
      "profile: \"h100-sxm5-80gb\"\n"
      "model { layers: 2 hidden: 64 heads: 4 vocab: 100 seq_len: 16 }\n"
      "parallel { tp: 2 dp: 4 micro_batch: 1 }\n"  // Megatron: the gradient dtype is its choice
      "training { samples: 8 precision: FP8 gradient_dtype: HALF_GRADIENTS }\n";
  const Scenario s = cli::load_scenario_text(h100, "h100.textproto", false, "");
  REQUIRE(s.jobs.size() == 1);
  CHECK(s.jobs[0].training.precision == clustersim::workloads::Precision::kFP8);
  CHECK(s.jobs[0].training.gradients == clustersim::workloads::GradientDtype::k16Bit);  // FP8 keeps 16-bit weights
  CHECK(s.profile.gpu.peak_fp8.raw() == 1978.9e12);
  // The A100 has no FP8 tensor cores: its profile has no FP8 peak.
  CHECK(text_error(kMinimal + "training { samples: 10 precision: FP8 }\n") ==
        "inline.textproto:6:35: training.precision: FP8 needs FP8 tensor cores, and profile \"a100-sxm4-80gb\" "
        "(A100-SXM4-80GB) has no FP8 peak (gpu.peak_fp8_tflops); use BF16 or FP16, or a profile of a GPU with FP8 "
        "(Hopper or later)");
}

TEST_CASE("cpu_vendor: from the preset, overridden by the cluster, written by --resolved, a bad value is refused") {
  // DGX A100 has AMD EPYC 7742 hosts, DGX H100 Intel Xeon 8480C (the presets' datasheets); the simple form says
  // nothing (NCCL's non-AMD tables).
  auto vendor = [](const std::string& cluster) {
    const std::string text = "cluster { " + cluster +
                             " }\nprofile: \"a100-sxm4-80gb\"\n"
                             "model { layers: 2 hidden: 64 heads: 4 vocab: 100 seq_len: 16 }\n"
                             "parallel { dp: 8 micro_batch: 1 grad_accum: 1 }\n"
                             "training { samples: 1000 }\n";
    const Scenario s = cli::load_scenario_text(text, "v.textproto", false, "");
    const Scenario again = cli::load_scenario_text(cli::resolved_scenario_text(s), "v.textproto", false, "");
    CHECK(again.cluster.node.cpu_vendor == s.cluster.node.cpu_vendor);
    return s.cluster.node.cpu_vendor;
  };
  using clustersim::topology::CpuVendor;
  CHECK(vendor("node_preset: \"dgx-a100\" nodes: 1") == CpuVendor::kAmd);
  CHECK(vendor("node_preset: \"dgx-a100\" nodes: 1 cpu_vendor: INTEL") == CpuVendor::kIntel);
  CHECK(vendor("nodes: 1 gpus_per_node: 8 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 "
               "nic_gbits_per_s_per_direction: 200") == CpuVendor::kUnspecified);
  CHECK(vendor("nodes: 1 gpus_per_node: 8 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 "
               "nic_gbits_per_s_per_direction: 200 cpu_vendor: ARM") == CpuVendor::kArm);
  CHECK(text_error("cluster { nodes: 1 gpus_per_node: 1 gpu: \"A100-SXM4-80GB\" cpu_vendor: POWER }\n")
            .find("inline.textproto:1:") == 0);
  CHECK(text_error("cluster { nodes: 1 gpus_per_node: 1 gpu: \"A100-SXM4-80GB\" cpu_vendor: 7 }\n")
            .find("inline.textproto:1:") == 0);
}
