// The report builder (cli/html_report.h): escaping, terminal/Markdown/HTML tables, chart geometry derived
// by hand; and the reports of `run --report` end to end: sections, well-formed HTML without any external
// URL, Markdown tables, per-stage breakdown, and a screenshot in headless Chromium when one is installed.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/html_report.h"
#include "cli/scenario_loader.h"
#include "tests/test_support.h"

namespace fs = std::filesystem;
using namespace clustersim::cli;

namespace {

using clustersim::testing::BinaryRun;
using clustersim::testing::scratch_dir;
using clustersim::testing::slurp;

BinaryRun run(const std::string& args, const fs::path& dir) {
  return clustersim::testing::run_clustersim(args, dir);
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

// "" when every element opened is closed in order (void elements and "/>" excepted), else what is wrong.
std::string unbalanced_tags(const std::string& html) {
  static const std::vector<std::string> kVoid = {"meta", "br", "hr", "img", "input", "link", "col", "wbr"};
  std::vector<std::string> open;
  for (std::size_t p = html.find('<'); p != std::string::npos; p = html.find('<', p + 1)) {
    const std::size_t end = html.find('>', p);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(p);
    const std::string tag = html.substr(p + 1, end - p - 1);
    if (tag.empty()) return "empty tag at " + std::to_string(p);
    if (tag[0] == '!') continue;  // <!DOCTYPE html>
    if (tag.back() == '/') continue;
    const bool closing = tag[0] == '/';
    const std::string name = tag.substr(closing ? 1 : 0, tag.find_first_of(" \n", closing ? 1 : 0) - (closing ? 1 : 0));
    if (std::find(kVoid.begin(), kVoid.end(), name) != kVoid.end()) continue;
    if (!closing) {
      open.push_back(name);
    } else {
      if (open.empty() || open.back() != name)
        return "</" + name + "> closes <" + (open.empty() ? std::string("nothing") : open.back()) + ">";
      open.pop_back();
    }
  }
  return open.empty() ? "" : "<" + open.back() + "> never closed";
}

// Checks that a report needs nothing from the network: no URL but the SVG namespace, no scripts,
// no linked resources.
void check_self_contained(const std::string& html) {
  std::string rest = html;
  const std::string ns = "xmlns=\"http://www.w3.org/2000/svg\"";
  for (std::size_t p = rest.find(ns); p != std::string::npos; p = rest.find(ns)) rest.erase(p, ns.size());
  CHECK(rest.find("http://") == std::string::npos);
  CHECK(rest.find("https://") == std::string::npos);
  for (const char* s : {"<script", " src=", " href=", "url(", "@import", "<link"})
    CHECK_MESSAGE(rest.find(s) == std::string::npos, s);
}

// Cells of the Markdown table row whose first cell is `first`.
std::vector<std::string> md_row(const std::string& md, const std::string& first) {
  std::istringstream in(md);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| " + first + " |", 0) != 0) continue;
    std::vector<std::string> cells;
    std::size_t p = 1;
    for (std::size_t q = line.find(" |", p); q != std::string::npos; q = line.find(" |", p)) {
      cells.push_back(line.substr(p + 1, q - p - 1));
      p = q + 2;
    }
    return cells;
  }
  FAIL("no Markdown row " << first);
  return {};
}

std::string on_path(const char* name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  std::istringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path p = fs::path(dir) / name;
    struct stat st {};
    if (!dir.empty() && ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & S_IXUSR)) return p.string();
  }
  return "";
}

std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"})
    if (const std::string p = on_path(name); !p.empty()) return p;
  return "";
}

}  // namespace

TEST_CASE("html report: escaping of HTML and Markdown") {
  CHECK(html_escape("<a href=\"x\">&'") == "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
  CHECK(markdown_escape("a|b*c_d\nE<x> [%]") == "a\\|b\\*c\\_d E\\<x\\> [%]");
  // An entity or a link in a scenario name stays text: "A&amp;B [x](http://e)" rendered as "A&B" and a live link.
  CHECK(markdown_escape("A&amp;B [x](http://e) & [y]") == "A\\&amp;B \\[x](http://e) & [y]");
}

TEST_CASE("html report: the layout and cluster lines name the framework and the links as the run summary does") {
  // Horovod, nn.DataParallel and FSDP were all "DDP", with no ZeRO stage; a TPU slice had "GPUs", "NVLink" and
  // "NIC 0 Gbit/s".
  const std::string dir = std::string(CLUSTERSIM_SOURCE_DIR) + "/scenarios/";
  const auto horovod = load_scenario_file(dir + "frameworks-8gpu/horovod.textproto");
  CHECK(layout_text(horovod.jobs.at(0).parallel) ==
        "Horovod: DP 8, micro-batch 1 x grad-accum 4, fusion buffer 128 MiB");
  const auto dp = load_scenario_file(dir + "frameworks-8gpu/data_parallel.textproto");
  CHECK(layout_text(dp.jobs.at(0).parallel).starts_with("torch.nn.DataParallel: DP 8"));
  auto fsdp_plan = horovod.jobs.at(0).parallel;
  fsdp_plan.framework = clustersim::workloads::Framework::kFsdp;
  fsdp_plan.zero_stage = 3;
  CHECK(layout_text(fsdp_plan) == "PyTorch FSDP: DP 8, micro-batch 1 x grad-accum 4, ZeRO stage 3");
  const auto tpu = load_scenario_file(dir + "tpu-vs-gpu/tpu-v4-4x4x4.textproto");
  CHECK(cluster_text(tpu) == "16 nodes x 4 TPUv4 = 64 chips; ICI 300 GB/s per chip per direction");
  // A DGX A100 preset: its hosts' CPUs (AMD EPYC 7742), which NCCL's multi-node tuning reads, close the line.
  CHECK(cluster_text(horovod) ==
        "1 node x 8 A100-SXM4-80GB = 8 GPUs; NVLink 300 GB/s and NIC 200 Gbit/s per GPU per direction; AMD hosts");
  // More than one NVLink domain: the fabric between them, its oversubscription and how its switches route.
  const auto ecmp = load_scenario_file(dir + "fabric-rail-vs-oversubscribed/clos-4to1-ecmp.textproto");
  CHECK(cluster_text(ecmp) ==
        "16 nodes x 8 H100-SXM5-80GB = 128 GPUs; NVLink 450 GB/s and NIC 400 Gbit/s per GPU per direction; "
        "two-level Clos at 4:1, routed by ECMP hash; Intel hosts");
  const auto by_destination = load_scenario_file(dir + "fabric-rail-vs-oversubscribed/clos-4to1.textproto");
  CHECK(cluster_text(by_destination).find("two-level Clos at 4:1, routed by destination (D-mod-k);") !=
        std::string::npos);
  const auto adaptive = load_scenario_file(dir + "fabric-rail-vs-oversubscribed/clos-4to1-adaptive.textproto");
  CHECK(cluster_text(adaptive).find("two-level Clos at 4:1, routed adaptively (over every equal-cost path);") !=
        std::string::npos);
  const auto rail = load_scenario_file(dir + "fabric-rail-vs-oversubscribed/rail-optimized.textproto");
  CHECK(cluster_text(rail).find("; rail-optimised fat tree, non-blocking, routed adaptively") != std::string::npos);
}

TEST_CASE("html report: text_table aligns columns, marks the best value and colours only on request") {
  ReportTable t;
  t.header = {"", "A", "B"};
  t.right_aligned = {false, true, true};
  ReportCell best("1.5");
  best.best = true;
  ReportCell worse("10.25");
  worse.tone = ReportCell::Tone::kWorse;
  t.rows = {{"x", best, worse}, {"longer name", "2", "3"}};
  // Widths: column 0 = "longer name" = 11; column 1 has a best cell, so "1.5 *" and "2  " → 5; column 2 = 5.
  const std::string expected = std::string(11, ' ') + "      A      B\n" + std::string(11 + 2 + 5 + 2 + 5, '-') + "\n" +
                               "x            1.5 *  10.25\n" + "longer name    2        3\n";
  CHECK(text_table(t, false) == expected);
  const std::string coloured = text_table(t, true);
  CHECK(coloured.find("\033[1m1.5 *\033[0m") != std::string::npos);
  CHECK(coloured.find("\033[31m10.25\033[0m") != std::string::npos);
}

TEST_CASE("html report: document renders the same blocks as HTML and Markdown, escaping user text") {
  ReportDocument d("T|1 <script>alert(1)</script>");
  d.heading(2, "H");
  d.paragraph("a*b & c");
  ReportTable t;
  t.header = {"k", "v"};
  t.right_aligned = {false, true};
  ReportCell one("1");
  one.best = true;
  t.rows = {{"x", one}};
  d.table(t);
  d.figure(Svg{"<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>"}, "cap");
  CHECK(d.markdown() ==
        "# T\\|1 \\<script\\>alert(1)\\</script\\>\n\n## H\n\na\\*b & c\n\n| k | v |\n| --- | ---: |\n"
        "| x | **1 \\*** |\n\n_Chart in the HTML report: cap_\n");
  const std::string html = d.html();
  CHECK(html.find("<script>") == std::string::npos);
  CHECK(html.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
  CHECK(html.find("<p>a*b &amp; c</p>") != std::string::npos);
  CHECK(html.find("<td class=\"num best\">1 *</td>") != std::string::npos);
  CHECK(html.find("<figcaption>cap</figcaption>") != std::string::npos);
  CHECK(unbalanced_tags(html) == "");
  check_self_contained(html);
}

TEST_CASE("html report: stacked bars are proportional on a 1-2-5 axis, with the capacity line") {
  // Plot width 960 - 250 (labels) - 120 (totals) = 590 px. Bar 1 + 3 = 4: axis step 1 (4/6 → 1), max 4,
  // 147.5 px per unit: widths 147.5 and 442.5, the second from x = 250 + 147.5 = 397.5.
  const std::string a =
      svg_stacked_bars({{"job <1>", {{"compute", 1, "#111"}, {"idle", 3, "#222"}}, std::nullopt}}, "s").markup;
  CHECK(a.find("x=\"250.0\" y=\"10.0\" width=\"147.5\"") != std::string::npos);
  CHECK(a.find("x=\"397.5\" y=\"10.0\" width=\"442.5\"") != std::string::npos);
  CHECK(a.find("job &lt;1&gt;") != std::string::npos);
  CHECK(a.find("<title>idle: 3 s</title>") != std::string::npos);
  CHECK(unbalanced_tags(a) == "");
  // Capacity 8 > total 2: axis step 2 (8/6 → 2), max 8, 73.75 px per unit: bar 147.5 px, line at 250 + 590 = 840.
  const std::string b = svg_stacked_bars({{"GPU", {{"weights", 2, "#111"}}, 8.0}}, "GiB").markup;
  CHECK(b.find("width=\"147.5\"") != std::string::npos);
  CHECK(b.find("x1=\"840.0\"") != std::string::npos);
  CHECK(b.find(">capacity<") != std::string::npos);  // legend entry
}

TEST_CASE("html report: timeline merges tasks closer than a pixel, per category") {
  // Span 4 ms over 960 - 170 - 30 = 760 px: two back-to-back compute tasks (0-1, 1-2 ms) are one bar of
  // 2/4 x 760 = 380 px; the dp_comm task (2-3 ms) stays its own bar of 190 px at 170 + 380 = 550.
  const std::vector<TimelineInterval> iv = {{"GPU 0 compute", "compute", "fwd", 0, 1e-3},
                                            {"GPU 0 compute", "compute", "bwd", 1e-3, 2e-3},
                                            {"GPU 0 dp-comm", "dp_comm", "allreduce", 2e-3, 3e-3}};
  const std::string s = svg_timeline({"GPU 0 compute", "GPU 0 dp-comm"}, iv, 4e-3).markup;
  CHECK(s.find("width=\"380.0\"") != std::string::npos);
  CHECK(s.find("<title>compute: 2 tasks, 0.000-2.000 ms</title>") != std::string::npos);
  CHECK(s.find("x=\"550.0\"") != std::string::npos);
  CHECK(s.find("<title>allreduce (dp_comm): 2.000-3.000 ms</title>") != std::string::npos);
  CHECK(unbalanced_tags(s) == "");
}

TEST_CASE("html report: scatter plot connects the highlighted points (a Pareto front)") {
  const std::string s = svg_scatter({{1, 3, "a", true}, {2, 2, "b", false}, {3, 1, "c", true}}, "headroom [GiB]",
                                    "iteration time [s]", true)
                            .markup;
  CHECK(count(s, "<circle") == 3);
  CHECK(count(s, "<polyline") == 1);
  CHECK(count(s, "fill=\"#e15759\"") == 2);
  CHECK(unbalanced_tags(s) == "");
}

TEST_CASE("run --report: a self-contained HTML file with every section, and Markdown with the same tables") {
  const fs::path dir = scratch_dir("run-report");
  const BinaryRun r = run("run --report " + (dir / "r.html").string() + " --json " + (dir / "r.json").string(), dir);
  REQUIRE(r.status == 0);
  const std::string html = slurp(dir / "r.html");
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(unbalanced_tags(html) == "");
  check_self_contained(html);
  for (const char* s : {"<h2>Configuration</h2>", "<h2>Results</h2>", "<h2>Time breakdown</h2>",
                        "<h2>Memory per GPU</h2>", "<h2>Timeline of one iteration</h2>", "<h2>Link utilisation</h2>",
                        "<svg", "capacity [GB/s]", "exposed communication"})
    CHECK_MESSAGE(html.find(s) != std::string::npos, s);
  // The default scenario: DP 16 on GPUs 0-15; the timeline shows 4 evenly spread ranks, i x 15 / 3 = 0, 5, 10, 15.
  CHECK(html.find("GPUs 0, 5, 10, 15 of 16") != std::string::npos);
  CHECK(html.find(">GPU 15 dp-comm<") != std::string::npos);

  REQUIRE(run("run --report " + (dir / "r.md").string(), dir).status == 0);
  const std::string md = slurp(dir / "r.md");
  CHECK(md.find("<svg") == std::string::npos);
  CHECK(md.find("## Memory per GPU") != std::string::npos);
  CHECK(md.find("| part | GiB | share of capacity [%] |") != std::string::npos);
  CHECK(md.find("| link | kind | capacity [GB/s] |") != std::string::npos);
  // Under the breakdown, the input model the (small) input stall comes from, as `run` prints it: micro-batch 2,
  // s = 1024: 2·1025·8 = 16,400 B of int64 tokens per copy at the default 24 GB/s, no loader rate.
  CHECK(md.find("Input model: no loader rate (the data loader is never the bottleneck); host-to-device copy 16,400 B "
                "per micro-batch (int64 tokens) at 24 GB/s") != std::string::npos);
  // Peak memory = the sum of its parts (memory_verdict), each printed to 0.01 GiB.
  std::istringstream in(md.substr(md.find("| part | GiB |")));
  double sum = 0;
  int parts = 0;
  std::string line;
  std::getline(in, line);
  std::getline(in, line);
  while (std::getline(in, line) && line.rfind("| peak |", 0) != 0) {
    const std::size_t a = line.find(" | ") + 3;
    sum += std::stod(line.substr(a, line.find(" |", a) - a));
    ++parts;
  }
  REQUIRE(parts > 0);
  CHECK(std::abs(sum - std::stod(md_row(md, "peak")[1])) <= 0.005 * (parts + 1));
  // The report's numbers are run's: the iteration time of the Results table is --json's, to 6 decimals.
  const std::string json = slurp(dir / "r.json");
  std::smatch m, job;
  REQUIRE(std::regex_search(json, m, std::regex("\"iteration_time_s\": ([-0-9.eE+]+)")));
  REQUIRE(std::regex_search(json, job, std::regex("\"job\": \"([^\"]+)\"")));
  char it[32];
  std::snprintf(it, sizeof it, "%.6f", std::stod(m[1]));
  CHECK(md_row(md, job[1])[2] == it);
  // The default scenario runs PyTorch DDP under autocast: the breakdown has the eager part of the compute, as
  // `run` prints "of which eager", --json's compute_eager_s (of GPU 0, the job's breakdown GPU), to 6 decimals.
  CHECK(md.find("| where | compute [s] | of which eager [s] | exposed comm [s] |") != std::string::npos);
  REQUIRE(std::regex_search(json, m, std::regex("\"compute_eager_s\": ([-0-9.eE+]+)")));
  REQUIRE(std::stod(m[1]) > 0);
  std::snprintf(it, sizeof it, "%.6f", std::stod(m[1]));
  CHECK(md_row(md, "GPU 0 (most exposed comm)")[2] == it);
  fs::remove_all(dir);
}

TEST_CASE("run --report: a pipeline-parallel job has a breakdown row per stage, the mean of its GPUs") {
  const fs::path dir = scratch_dir("stage-report");
  {
    std::ofstream(dir / "pp.textproto")
        << "name: \"pp report\"\n"
           "cluster { nodes: 1 gpus_per_node: 8 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 "
           "nic_gbits_per_s_per_direction: 200 }\n"
           "profile: \"a100-sxm4-80gb\"\n"
           "model { layers: 4 hidden: 1024 heads: 16 vocab: 32000 seq_len: 1024 }\n"
           "parallel { dp: 2 tp: 2 pp: 2 micro_batch: 1 grad_accum: 4 }\n"
           "training { samples: 1000 }\n";
  }
  const BinaryRun r = run("run " + (dir / "pp.textproto").string() + " --json " + (dir / "pp.json").string() +
                              " --report " + (dir / "pp.md").string() + " --report " + (dir / "pp.html").string(),
                          dir);
  // --report takes one file: given twice it is a command-line error, and nothing is written.
  CHECK(r.status == 2);
  CHECK(!fs::exists(dir / "pp.json"));
  CHECK(!fs::exists(dir / "pp.md"));
  REQUIRE(run("run " + (dir / "pp.textproto").string() + " --json " + (dir / "pp.json").string() + " --report " +
                  (dir / "pp.md").string(),
              dir)
              .status == 0);
  REQUIRE(run("run " + (dir / "pp.textproto").string() + " --report " + (dir / "pp.html").string(), dir).status == 0);
  const std::string md = slurp(dir / "pp.md"), json = slurp(dir / "pp.json"), html = slurp(dir / "pp.html");
  // rank = tp + 2 (dp + 2 pp) (Megatron's tp-dp-pp order): stage 0 = ranks 0-3, stage 1 = ranks 4-7.
  std::vector<double> compute;
  const std::regex per_gpu("\\{\"gpu\": (\\d+), \"s\": \\{\"compute\": ([-0-9.eE+]+),");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), per_gpu); it != std::sregex_iterator(); ++it)
    compute.push_back(std::stod((*it)[2]));
  // A one-job document lists the job's GPUs twice: at the top level and under "jobs".
  REQUIRE(compute.size() == 16);
  std::smatch m;
  REQUIRE(std::regex_search(json, m, std::regex("\"iteration_time_s\": ([-0-9.eE+]+)")));
  const double iteration = std::stod(m[1]);
  for (int stage = 0; stage < 2; ++stage) {
    const auto row = md_row(md, "stage " + std::to_string(stage) + " (mean of 4 GPUs)");
    // where; compute, exposed comm, its k kinds (of which TP, PP, DP, ...), input stall, idle in s; compute,
    // exposed comm, input stall, idle in %.
    REQUIRE(row.size() >= 9);
    const std::size_t k = row.size() - 9;
    CHECK(k >= 1);  // the pipeline sends at least
    double mean = 0;
    for (int rank = 4 * stage; rank < 4 * stage + 4; ++rank) mean += compute[static_cast<std::size_t>(rank)] / 4;
    CHECK(std::abs(std::stod(row[1]) - mean) <= 0.5e-6);
    // Each GPU's compute + exposed comm + input stall + idle = the iteration time, so their means add up to it
    // too (four values rounded to 1e-6 s); the kinds add up to the exposed comm (k + 1 values rounded).
    CHECK(std::abs(std::stod(row[1]) + std::stod(row[2]) + std::stod(row[3 + k]) + std::stod(row[4 + k]) - iteration) <=
          2e-6);
    double kinds = 0;
    for (std::size_t i = 3; i < 3 + k; ++i) kinds += std::stod(row[i]);
    CHECK(std::abs(kinds - std::stod(row[2])) <= 0.5e-6 * double(k + 1));
  }
  // The timeline shows the first rank of each stage: rank(0, 0, 0) = 0 and rank(0, 0, 1) = 4.
  CHECK(html.find("GPUs 0, 4 of 8") != std::string::npos);
  CHECK(html.find(">GPU 4 pp-recv-fwd<") != std::string::npos);
  CHECK(unbalanced_tags(html) == "");
  fs::remove_all(dir);
}

TEST_CASE("compare --report: the side-by-side table and each scenario's sections in one HTML file") {
  const fs::path dir = scratch_dir("compare-report");
  const BinaryRun r =
      run("compare scenarios/compare-example/dp-1-node.textproto "
          "scenarios/compare-example/dp-2-nodes.textproto --report " +
              (dir / "c.html").string(),
          dir);
  REQUIRE(r.status == 0);
  const std::string html = slurp(dir / "c.html");
  CHECK(unbalanced_tags(html) == "");
  check_self_contained(html);
  for (const char* s : {"<h2>Side by side</h2>", "<h2>Scenario A: GPT-3 350M, DDP on 1 x 8 A100</h2>",
                        "<h2>Scenario B: GPT-3 350M, DDP on 2 x 8 A100</h2>", "<h3>Timeline of one iteration</h3>",
                        "<th class=\"num\">vs A</th>", "<td class=\"num best"})
    CHECK_MESSAGE(html.find(s) != std::string::npos, s);
  // Two scenarios: two timelines, and every scenario's sections.
  CHECK(count(html, "<h3>Configuration</h3>") == 2);
  // The notes are whole paragraphs, not the terminal's wrapped lines.
  CHECK(html.find("<p>vs A: 100 % x (value - A) / A. * marks the best value of a row among the scenarios that fit in "
                  "memory (when two or more do): lower time") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("run --report: a job that runs out of memory says so beside its times to train") {
  // ep4 needs 87.72 GiB per GPU of 79.65: its Results row says OUT OF MEMORY, and a sentence under the table
  // says its times are those it would take if it fitted, as the text summary does.
  const fs::path dir = scratch_dir("report-oom");
  REQUIRE(run("run scenarios/mixtral-8x7b-ep/ep4.textproto --report " + (dir / "r.md").string(), dir).status == 0);
  const std::string md = slurp(dir / "r.md");
  const auto row = md_row(md, "Mixtral 8x7B, tp 2 x ep 4 (dp 8) on 2 x DGX H100");
  REQUIRE(row.size() == 10);
  CHECK(row[9] == "OUT OF MEMORY");
  CHECK(md.find("The job runs OUT OF MEMORY as configured: its times are those it would take if it fitted") !=
        std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("report renders in headless Chromium (skipped without chromium on PATH)" *
          doctest::skip(find_chromium().empty())) {
  const fs::path dir = scratch_dir("chromium");
  REQUIRE(run("run --report " + (dir / "r.html").string(), dir).status == 0);
  // No network at all: every host resolves to nothing, so a fetch would fail rather than leak.
  const std::string cmd = "timeout 120 " + find_chromium() +
                          " --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run "
                          "--host-resolver-rules='MAP * ~NOTFOUND' --user-data-dir=" +
                          (dir / "profile").string() +
                          " --window-size=1200,2400 --screenshot=" + (dir / "shot.png").string() + " file://" +
                          (dir / "r.html").string() + " >" + (dir / "chromium.log").string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  CAPTURE(slurp(dir / "chromium.log"));
  CHECK(status == 0);
  REQUIRE(fs::exists(dir / "shot.png"));
  const std::string png = slurp(dir / "shot.png");
  CHECK(png.rfind("\x89PNG\r\n\x1a\n", 0) == 0);
  // A blank 1200 x 2400 page compresses to a few kB; text, tables and charts make tens of kB.
  CHECK(png.size() > 30000);
  fs::remove_all(dir);
}
