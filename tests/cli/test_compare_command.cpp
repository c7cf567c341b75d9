// End-to-end tests of `clustersim compare`: the binary as a user runs it, checked against `run --json` of each
// scenario and against the delta arithmetic.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_support.h"

namespace fs = std::filesystem;

namespace {

using clustersim::testing::BinaryRun;
using clustersim::testing::scratch_dir;
using clustersim::testing::slurp;

BinaryRun run(const std::string& args, const fs::path& dir) {
  return clustersim::testing::run_clustersim(args, dir);
}

const std::string kOneNode = "scenarios/compare-example/dp-1-node.textproto";
const std::string kTwoNodes = "scenarios/compare-example/dp-2-nodes.textproto";

// Every value of `"key": value` in document order, as the text written.
std::vector<std::string> json_texts(const std::string& json, const std::string& key) {
  const std::regex re("\"" + key + "\": (null|[-0-9.eE+]+)");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(json.begin(), json.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}
std::string json_text(const std::string& json, const std::string& key) {
  const auto all = json_texts(json, key);
  REQUIRE_MESSAGE(!all.empty(), "key " << key << " missing");
  return all.front();
}
double json_number(const std::string& json, const std::string& key) {
  return std::stod(json_text(json, key));
}

// The line of the terminal table whose row name is `name` (after the two-space indent).
std::string table_line(const std::string& out, const std::string& name) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("  " + name + "  ", 0) == 0) return line;
  FAIL("no table row " << name);
  return "";
}

int lines_of(const std::string& s) {
  int n = 0;
  for (const char c : s) n += c == '\n';
  return n;
}

}  // namespace

TEST_CASE("compare: the same scenario twice has 0 % deltas everywhere and no best marker") {
  const fs::path dir = scratch_dir("compare-same");
  const BinaryRun r = run("compare " + kOneNode + " " + kOneNode + " --json " + (dir / "c.json").string(), dir);
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find("clustersim compare: 2 scenarios, baseline A") != std::string::npos);
  // Identical values: every delta is 100 x (v - v) / v = 0, shown as +0.0 %, and no row has a best value.
  const std::size_t table_start = r.out.find("  ---"), table_end = r.out.find("\n\n", table_start);
  REQUIRE(table_end != std::string::npos);
  CHECK(r.out.substr(table_start, table_end - table_start).find(" *") == std::string::npos);
  const std::string line = table_line(r.out, "iteration time [s]");
  CHECK(line.find("+0.0%") != std::string::npos);
  const std::string j = slurp(dir / "c.json");
  const auto deltas = json_texts(j, "iteration_time_s");
  REQUIRE(deltas.size() == 4);  // per scenario: the value and its delta
  std::regex delta_object("\"delta_pct\": \\{([^}]*)\\}");
  int objects = 0;
  for (auto it = std::sregex_iterator(j.begin(), j.end(), delta_object); it != std::sregex_iterator(); ++it) {
    ++objects;
    const std::string body = (*it)[1];
    std::regex value(": ([-0-9.eE+]+|null)");
    for (auto v = std::sregex_iterator(body.begin(), body.end(), value); v != std::sregex_iterator(); ++v)
      CHECK_MESSAGE((*v)[1] == "0", "delta " << (*v)[1] << " in " << body);
  }
  CHECK(objects == 2);
  CHECK(j.find("\"best\": []") != std::string::npos);
  // No colour codes: stdout is a file here.
  CHECK(r.out.find('\033') == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("compare: DP on 1 node vs 2 nodes equals run --json of each, deltas and cost by hand") {
  const fs::path dir = scratch_dir("compare-dp");
  REQUIRE(run("run " + kOneNode + " --json " + (dir / "a.json").string(), dir).status == 0);
  REQUIRE(run("run " + kTwoNodes + " --json " + (dir / "b.json").string(), dir).status == 0);
  const BinaryRun r = run(
      "compare " + kOneNode + " " + kTwoNodes + " --price-per-gpu-hour 2.5 --json " + (dir / "c.json").string(), dir);
  REQUIRE(r.status == 0);
  const std::string a = slurp(dir / "a.json"), b = slurp(dir / "b.json"), c = slurp(dir / "c.json");
  // The comparison prints each number exactly as run --json does (same format, same simulation).
  for (const char* key :
       {"iteration_time_s", "tokens_per_s", "mfu", "time_to_train_s", "gpu_hours", "peak_bytes", "capacity_bytes",
        "compute", "compute_eager_s", "exposed_comm", "exposed_input", "idle", "optimizer_steps"}) {
    const auto values = json_texts(c, key);
    REQUIRE_MESSAGE(values.size() >= 2, key);
    CHECK_MESSAGE(values[0] == json_text(a, key), key);
    // Scenario B's value follows A's value and A's delta where the key also names a delta.
    const std::string b_value = values.size() == 4 ? values[2] : values[1];
    CHECK_MESSAGE(b_value == json_text(b, key), key);
  }
  // Both train 13,107,200,000 tokens / 1,024 = 12,800,000 samples at global batch 128 = 100,000 optimizer steps.
  CHECK(json_number(a, "optimizer_steps") == 100000);
  CHECK(json_number(b, "optimizer_steps") == 100000);
  // delta = 100 x (B - A) / A, from run's own numbers.
  const double it_a = json_number(a, "iteration_time_s"), it_b = json_number(b, "iteration_time_s");
  CHECK(std::stod(json_texts(c, "iteration_time_s")[3]) == doctest::Approx(100 * (it_b - it_a) / it_a).epsilon(1e-12));
  // GPU-hours = 100,000 steps x iteration time x GPUs / 3600; cost = GPU-hours x 2.5 USD.
  const double hours_a = 100000 * it_a * 8 / 3600, hours_b = 100000 * it_b * 16 / 3600;
  const auto costs = json_texts(c, "cost_usd");
  REQUIRE(costs.size() == 4);
  CHECK(std::stod(costs[0]) == doctest::Approx(2.5 * hours_a).epsilon(1e-12));
  CHECK(std::stod(costs[2]) == doctest::Approx(2.5 * hours_b).epsilon(1e-12));
  CHECK(std::stod(costs[3]) == doctest::Approx(100 * (hours_b - hours_a) / hours_a).epsilon(1e-9));
  CHECK(json_number(c, "price_per_gpu_hour_usd") == 2.5);

  // The terminal table: GPUs 8 vs 16 is +100.0 %; the best tokens/s is marked.
  CHECK(table_line(r.out, "GPUs").find("+100.0%") != std::string::npos);
  // A count is printed whole: "8" and "16", not "8.00" and "16.0".
  CHECK(table_line(r.out, "GPUs").find("  8  ") != std::string::npos);
  CHECK(table_line(r.out, "GPUs").find("  16  ") != std::string::npos);
  CHECK(table_line(r.out, "GPUs").find(".0") == table_line(r.out, "GPUs").find(".0%"));
  const double tok_a = json_number(a, "tokens_per_s"), tok_b = json_number(b, "tokens_per_s");
  REQUIRE(tok_a != tok_b);
  char best[64];
  std::snprintf(best, sizeof best, "%.0f *", std::max(tok_a, tok_b));
  CHECK(table_line(r.out, "tokens/s").find(best) != std::string::npos);
  // The faster iteration time is the best of its row and the other one's delta has its sign.
  const std::string it_line = table_line(r.out, "iteration time [s]");
  std::snprintf(best, sizeof best, "%.6f *", std::min(it_a, it_b));
  CHECK(it_line.find(best) != std::string::npos);
  std::snprintf(best, sizeof best, "%+.1f%%", 100 * (it_b - it_a) / it_a);
  CHECK(it_line.find(best) != std::string::npos);
  CHECK(table_line(r.out, "cost [USD]").find(" *") != std::string::npos);
  CHECK(r.out.find("Cost = GPU-hours x 2.50 USD per GPU-hour.") != std::string::npos);
  // DDP under autocast: the eager part of the compute has its row (run's "of which eager").
  for (const char* row : {"  compute [s]", "    of which eager [s]", "  exposed comm [s]", "  idle [s]", "MFU [%]",
                          "peak memory per GPU [GiB]", "memory verdict", "time to train [hours]", "GPU-hours"})
    CHECK_MESSAGE(r.out.find(std::string("  ") + row + "  ") != std::string::npos, row);
  fs::remove_all(dir);
}

TEST_CASE("compare: a change just short of -100 % keeps the digits that show it") {
  // The 64-A100 study against the one-GPU example: GPU-hours 221.3 against 0.00441 to train, a change of
  // 100 x (0.00441 - 221.3) / 221.3 = -99.998 %, which "%+.1f" (and "%+.4g") round to -100: the delta keeps
  // digits until it differs from -100.
  const fs::path dir = scratch_dir("compare-minus-100");
  const BinaryRun r =
      run("compare scenarios/tpu-vs-gpu/a100-64gpu.textproto scenarios/grad-accum-example/one-gpu.textproto", dir);
  REQUIRE(r.status == 0);
  const std::string hours = table_line(r.out, "GPU-hours");
  CHECK(hours.find("-99.998%") != std::string::npos);
  CHECK(hours.find("-100") == std::string::npos);
  CHECK(table_line(r.out, "GPUs").find("-98.4%") != std::string::npos);  // 100 x (1 - 64) / 64
  fs::remove_all(dir);
}

TEST_CASE("compare: output is byte-identical across runs, with three scenarios and a Markdown report") {
  const fs::path dir = scratch_dir("compare-determinism");
  const std::string args = "compare " + kOneNode + " " + kTwoNodes + " " + kOneNode;
  const BinaryRun r1 = run(args + " --json " + (dir / "1.json").string() + " --report " + (dir / "1.md").string(), dir);
  const BinaryRun r2 = run(args + " --json " + (dir / "2.json").string() + " --report " + (dir / "2.md").string(), dir);
  REQUIRE(r1.status == 0);
  REQUIRE(r2.status == 0);
  CHECK(r1.out == r2.out);
  CHECK(slurp(dir / "1.json") == slurp(dir / "2.json"));
  CHECK(slurp(dir / "1.md") == slurp(dir / "2.md"));
  // Three columns A, B, C, each but A with its delta column.
  CHECK(r1.out.find("  C  GPT-3 350M, DDP on 1 x 8 A100") != std::string::npos);
  const std::string md = slurp(dir / "1.md");
  CHECK(md.find("|  | A | B | vs A | C | vs A |") != std::string::npos);
  CHECK(md.find("| ---: | ---: | ---: | ---: | ---: |") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("compare: bad input is one error line, exit 2, and no output file") {
  const fs::path dir = scratch_dir("compare-errors");
  const std::string outputs = " --json " + (dir / "c.json").string() + " --report " + (dir / "c.html").string();
  struct Case {
    std::string args;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"compare " + kOneNode + outputs, "error: command line: compare: needs at least two scenarios to compare, got 1"},
      {"compare" + outputs, "got 0"},
      {"compare " + kOneNode + " " + (dir / "missing.textproto").string() + outputs, "missing.textproto"},
      {"compare " + kOneNode + " " + kTwoNodes + " --frobnicate" + outputs, "error: command line: compare: "},
      {"compare " + kOneNode + " " + kTwoNodes + " --price-per-gpu-hour -1" + outputs, "--price-per-gpu-hour"},
      {"compare " + kOneNode + " " + kTwoNodes + " --report " + (dir / "c.pdf").string(), "--report"},
      {"compare " + kOneNode + " scenarios/multi-job/two-jobs-sharing-spines.textproto" + outputs, "jobs: has 2 jobs"},
      {"run " + kOneNode + " --report " + (dir / "r.txt").string(), "--report"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const BinaryRun r = run(c.args, dir);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err.rfind("error: ", 0) == 0);
    CHECK(lines_of(r.err) == 1);
    CHECK_MESSAGE(r.err.find(c.expect) != std::string::npos, r.err);
  }
  for (const char* name : {"c.json", "c.html", "c.pdf", "r.txt"}) CHECK_MESSAGE(!fs::exists(dir / name), name);
  fs::remove_all(dir);
}

TEST_CASE("compare --help documents the options and the price default") {
  const fs::path dir = scratch_dir("compare-help");
  const BinaryRun r = run("compare --help", dir);
  CHECK(r.status == 0);
  for (const char* s : {"--json", "--report", "--price-per-gpu-hour", "no cost row", "baseline"})
    CHECK_MESSAGE(r.out.find(s) != std::string::npos, s);
  const BinaryRun usage = run("--help", dir);
  CHECK(usage.out.find("compare A B [C ...]") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("compare: a slow data loader shows as input stall, the other rows unchanged") {
  const fs::path dir = scratch_dir("compare-input");
  // The gradient-accumulation example (1 GPU, micro-batch 5 x grad-accum 2) with a loader of 10 samples/s per
  // node and a prefetch queue of 1 micro-batch: the second micro-batch is loaded during the step, 5 / 10 =
  // 0.5 s, far longer than a micro-batch's compute (tens of ms), so the GPU waits on input.
  std::string text = slurp(fs::path(CLUSTERSIM_SOURCE_DIR) / "scenarios/grad-accum-example/one-gpu.textproto");
  const std::size_t training = text.find("training {");
  REQUIRE(training != std::string::npos);
  text.insert(training + 10, " loader_prefetch: 1 loader_samples_per_s_per_node: 10 ");
  std::ofstream(dir / "slow-loader.textproto") << text;
  const BinaryRun r = run("compare scenarios/grad-accum-example/one-gpu.textproto " + (dir / "slow-loader.textproto").string() +
                              " --json " + (dir / "c.json").string(),
                          dir);
  REQUIRE(r.status == 0);
  const std::string json = slurp(dir / "c.json");
  const auto stalls = json_texts(json, "exposed_input");
  REQUIRE(stalls.size() == 2);
  const double a = std::stod(stalls[0]), b = std::stod(stalls[1]);
  CHECK(b > 0.4);
  // The stall row: A's value is the best (lower), B's delta is 100 x (b - a) / a. A's stall is below 1e-4 s, which
  // the row's 6 decimals would show with fewer than 3 significant digits: it is printed with 3 (%.3g).
  char text_a[64], delta[64];
  std::snprintf(text_a, sizeof text_a, a < 1e-4 ? "%.3g *" : "%.6f *", a);
  std::snprintf(delta, sizeof delta, "%+.1f%%", 100 * (b - a) / a);
  const std::string line = table_line(r.out, "  input stall [s]");
  CHECK(line.find(text_a) != std::string::npos);
  CHECK(line.find(delta) != std::string::npos);
  // Loading does not change the work: the same compute and memory (0 % deltas).
  CHECK(table_line(r.out, "  compute [s]").find("+0.0%") != std::string::npos);
  CHECK(table_line(r.out, "peak memory per GPU [GiB]").find("+0.0%") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("compare: a layout that runs out of memory is never marked best, host dispatch has its row") {
  const fs::path dir = scratch_dir("compare-oom");
  // ep4 needs 87.72 GiB per GPU of 79.65 (OUT OF MEMORY) and takes 2.038483 s; ep8 with dropless routing skewed
  // 0.5 (the busiest expert 1.5x its share, no capacity factor) fits (77.15 GiB) and takes 2.359852 s, 15.8 %
  // longer, and skewed 0.3 fits and takes 2.123803 s: of the two that fit, that one gets the *, though ep4 is
  // faster; ep4's differences are not coloured (no option as configured).
  const std::string ep8 = slurp(fs::path(CLUSTERSIM_SOURCE_DIR) / "scenarios/mixtral-8x7b-ep/ep8.textproto");
  for (const char* skew : {"0.5", "0.3"}) {
    std::string skewed = ep8;
    skewed.replace(skewed.find("moe_capacity_factor: 1.25"), 25, "");
    skewed.replace(skewed.find("moe_token_skew: 0.2"), 19, std::string("moe_token_skew: ") + skew);
    std::ofstream(dir / (std::string("ep8-dropless-") + skew + ".textproto")) << skewed;
  }
  const std::string b = (dir / "ep8-dropless-0.5.textproto").string(),
                    c = (dir / "ep8-dropless-0.3.textproto").string();
  BinaryRun r = run("compare scenarios/mixtral-8x7b-ep/ep4.textproto " + b + " " + c, dir);
  REQUIRE(r.status == 0);
  const auto line_of = [](const std::string& text, const std::string& start) {
    const std::size_t at = text.find("\n  " + start);
    REQUIRE(at != std::string::npos);
    return text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  };
  const std::string it = line_of(r.out, "iteration time [s]");
  CHECK(std::regex_search(it, std::regex("2\\.038483 +2\\.359852 +\\+15\\.8% +2\\.123803 \\* ")));
  CHECK(std::regex_search(line_of(r.out, "tokens/s "), std::regex("64299 +55542 +-13\\.6% +61716 \\* ")));
  // With only one scenario that fits there is nothing to choose between: no * at all.
  r = run("compare scenarios/mixtral-8x7b-ep/ep4.textproto " + b, dir);
  REQUIRE(r.status == 0);
  CHECK(line_of(r.out, "iteration time [s]").find('*') == std::string::npos);
  CHECK(line_of(r.out, "tokens/s ").find('*') == std::string::npos);
  // Host dispatch (400 us per kernel on one GPU): its own breakdown row, so that the parts add up.
  std::string text = slurp(fs::path(CLUSTERSIM_SOURCE_DIR) / "scenarios/grad-accum-example/mb1-accum10.textproto");
  text.replace(text.find("training {"), 10, "training {\n  host_dispatch_us_per_kernel: 400");
  { std::ofstream(dir / "host.textproto") << text; }
  r = run("compare scenarios/grad-accum-example/mb1-accum10.textproto " + (dir / "host.textproto").string() +
              " --json " + (dir / "c.json").string(), dir);
  REQUIRE(r.status == 0);
  const std::string host = line_of(r.out, "  host dispatch [s]");
  CHECK(std::regex_search(host, std::regex("0\\.000000 \\* +[1-9][0-9]*\\.[0-9]{6} ")));
  const std::string json = slurp(dir / "c.json");
  // The exposed comm by kind (exposed_tp .. exposed_dp) are parts of exposed_comm, not summed again.
  const std::regex parts(
      "\"iteration_time_s\": ([0-9.e+-]+),\\s*\"breakdown_gpu\": [0-9]+,\\s*\"breakdown_s\": "
      "\\{\"compute\": ([0-9.e+-]+), \"exposed_comm\": ([0-9.e+-]+)(?:, \"exposed_[tcepd]p\": "
      "[0-9.e+-]+){5}, \"exposed_input\": ([0-9.e+-]+), \"exposed_host\": ([0-9.e+-]+), \"idle\": "
      "([0-9.e+-]+)\\}");
  int seen = 0;
  for (auto m = std::sregex_iterator(json.begin(), json.end(), parts); m != std::sregex_iterator(); ++m, ++seen) {
    double sum = 0;
    for (int k = 2; k <= 6; ++k) sum += std::stod((*m)[k]);
    CHECK(sum == doctest::Approx(std::stod((*m)[1])).epsilon(1e-9));
  }
  CHECK(seen == 2);
  fs::remove_all(dir);
}
