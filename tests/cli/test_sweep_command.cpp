// `clustersim sweep`: the layout enumeration against a hand count, OOM rejection with the breaking part,
// determinism across thread counts, the CSV columns, and input errors (exit status 2).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "cli/scenario_loader.h"
#include "cli/sweep_command.h"
#include "tests/test_support.h"

using namespace clustersim;

namespace {

// 1 node of 8 A100s; a 4-layer model with 8 heads; global batch 16 (= 1 · 2 · 8).
const char* kSmall =
    "cluster { nodes: 1 gpus_per_node: 8 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 "
    "nic_gbits_per_s_per_direction: 200 }\n"
    "profile: \"a100-sxm4-80gb\"\nfidelity: ANALYTICAL\n"
    "model { name: \"tiny\" layers: 4 hidden: 1024 heads: 8 vocab: 32000 seq_len: 1024 }\n"
    "parallel { dp: 8 micro_batch: 1 grad_accum: 2 }\ntraining { samples: 1000 global_batch: 16 }\n";

workloads::Scenario small() { return cli::load_scenario_text(kSmall, "small.textproto", false, ""); }

}  // namespace

TEST_CASE("sweep: the layouts of a 4-layer, 8-head model on 8 GPUs, counted by hand") {
  // N = 8, l = 4, a = n_kv = 8, B = 16. tp ∈ {1, 2, 4, 8} (all divide 8 heads, all fit the 8-GPU node);
  // pp divides 4 and 8/tp; dp = 8/(tp·pp) always divides 16. For each (tp, pp, dp): micro-batches mb | 16/dp
  // (m = 16/(mb·dp)); vp ∈ divisors of 4/pp when pp > 1, vp > 1 needing m a multiple of pp; then
  // × 3 recompute modes × (2 with tp > 1: SP) × (2 with dp > 1: distributed optimizer).
  //   tp1 pp1 dp8: mb {1,2}                     2 × 3 × 1 × 2 = 12
  //   tp1 pp2 dp4: mb {1,2,4} m {4,2,1}; vp1 3 + vp2 (m even) 2 = 5 × 3 × 1 × 2 = 30
  //   tp1 pp4 dp2: mb {1,2,4,8}                 4 × 3 × 1 × 2 = 24
  //   tp2 pp1 dp4: mb {1,2,4}                   3 × 3 × 2 × 2 = 36
  //   tp2 pp2 dp2: m {8,4,2,1}; vp1 4 + vp2 3 = 7 × 3 × 2 × 2 = 84
  //   tp2 pp4 dp1: mb {1,2,4,8,16}              5 × 3 × 2 × 1 = 30
  //   tp4 pp1 dp2: mb {1,2,4,8}                 4 × 3 × 2 × 2 = 48
  //   tp4 pp2 dp1: m {16,8,4,2,1}; vp1 5 + vp2 4 = 9 × 3 × 2 × 1 = 54
  //   tp8 pp1 dp1: mb {1,2,4,8,16}              5 × 3 × 2 × 1 = 30
  // Total 12 + 30 + 24 + 36 + 84 + 30 + 48 + 54 + 30 = 348. Rejected on the way: pp 8 for tp 1 (8 ∤ 4
  // layers), and vp 2 with m = 1 for (tp1 pp2), (tp2 pp2), (tp4 pp2): 3.
  std::map<std::string, std::size_t> rejected;
  const auto plans = cli::enumerate_layouts(small(), false, &rejected);
  CHECK(plans.size() == 348);
  CHECK(rejected["pp does not divide the layers"] == 1);
  CHECK(rejected["interleaving needs grad_accum a multiple of pp"] == 3);
  std::set<std::string> names;
  for (const auto& p : plans) {
    CHECK(p.gpus() == 8);
    CHECK(std::uint64_t{p.micro_batch} * p.grad_accum * p.dp == 16);
    names.insert(cli::layout_name(p));
  }
  CHECK(names.size() == 348);  // the names tell the layouts apart (and so break ties uniquely)
  CHECK(names.count("tp2 pp2 dp2 vp2 mb1 sp sel dopt") == 1);
  // On two nodes (--gpus 16) a 16-head model could take tp 16, across the two NVLink domains: rejected
  // unless --allow-tp-across-nodes. With the rule lifted, tp 16 (pp 1, dp 1) adds mb | 16 (5 choices) × 3
  // recompute × 2 SP = 30 layouts.
  std::string text = kSmall;
  text.replace(text.find("heads: 8"), 8, "heads: 16");
  const workloads::Scenario two_nodes =
      cli::sweep_scenario(cli::load_scenario_text(text, "small16.textproto", false, ""), 16u);
  CHECK(two_nodes.cluster.nodes == 2);
  CHECK(two_nodes.jobs[0].gpus.size() == 16);
  std::map<std::string, std::size_t> r16;
  const auto within = cli::enumerate_layouts(two_nodes, false, &r16);
  const auto across = cli::enumerate_layouts(two_nodes, true);
  CHECK(r16["tp spans more than one NVLink domain"] == 1);
  CHECK(across.size() == within.size() + 30);
}

TEST_CASE("sweep: OOM layouts are rejected with the memory part that breaks them") {
  // GPT-3 175B (P ≈ 174.6e9) on 8 × 80 GiB: nothing fits. The DDP layout (tp1 pp1 dp8) keeps fp32 weights,
  // 4·P ≈ 698 GB > 85.9 GB: its first part, the weights, already breaks it. tp8 holds P/8 ≈ 21.8e9
  // parameters: 16-bit weights 43.7 GB fit, adding fp32 gradients (87.3 GB) exceeds: "gradients".
  const workloads::Scenario sc = cli::load_scenario_text(
      "cluster { nodes: 1 gpus_per_node: 8 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 "
      "nic_gbits_per_s_per_direction: 200 }\nprofile: \"a100-sxm4-80gb\"\nmodel { preset: \"gpt3-175b\" }\n"
      "parallel { dp: 8 micro_batch: 1 grad_accum: 1 }\ntraining { samples: 1000 }\n",
      "big.textproto", false, "");
  cli::SweepOptions options;
  options.top = 3;
  const cli::SweepResult r = cli::run_sweep(sc, options);
  CHECK(r.valid == 0);
  CHECK(r.ranked.empty());
  CHECK(r.pareto.empty());
  std::size_t oom = 0;
  for (const auto& [why, count] : r.rejected)
    if (why.starts_with("out of memory: ")) oom += count;
  CHECK(oom == r.layouts.size());
  for (const auto& l : r.layouts) {
    if (l.name == "tp1 pp1 dp8 mb1") CHECK(l.estimate.oom_part.starts_with("weights"));
    if (l.name == "tp8 pp1 dp1 mb8") CHECK(l.estimate.oom_part.starts_with("gradients"));
  }
  CHECK(cli::sweep_text(r).find("no layout fits in memory") != std::string::npos);
}

TEST_CASE("sweep: the same output with 1 and 2 threads; ranking by simulated time; CSV columns") {
  cli::SweepOptions one;
  one.top = 4;
  cli::SweepOptions two = one;
  two.jobs = 2;
  const cli::SweepResult a = cli::run_sweep(small(), one), b = cli::run_sweep(small(), two);
  CHECK(cli::sweep_text(a) == cli::sweep_text(b));
  CHECK(cli::sweep_csv(a) == cli::sweep_csv(b));
  CHECK(cli::sweep_json(a) == cli::sweep_json(b));
  REQUIRE(a.ranked.size() == 4);
  for (std::size_t i = 1; i < a.ranked.size(); ++i)
    CHECK(a.layouts[a.ranked[i - 1]].simulated->iteration_time <= a.layouts[a.ranked[i]].simulated->iteration_time);
  // The Pareto front gets strictly slower and strictly roomier.
  for (std::size_t i = 1; i < a.pareto.size(); ++i) {
    const auto& x = a.layouts[a.pareto[i - 1]].estimate;
    const auto& y = a.layouts[a.pareto[i]].estimate;
    CHECK(x.iteration_time <= y.iteration_time);
    CHECK(x.peak_memory > y.peak_memory);
  }
  const std::string csv = cli::sweep_csv(a);
  CHECK(csv.starts_with(
      "layout,tp,pp,dp,vp,micro_batch,grad_accum,sequence_parallel,recompute,distributed_optimizer,status,oom_part,"
      "analytical_iteration_s,analytical_tokens_per_s,analytical_mfu,peak_memory_gib,headroom_gib,bubble_fraction,"
      "exposed_comm_fraction,simulated_iteration_s,rank\n"));
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 348 + 1);
}

TEST_CASE("sweep command: files written, bad input is one line and exit status 2") {
  const auto dir = testing::scratch_dir("sweep");
  {
    std::ofstream(dir / "small.textproto") << kSmall;
  }
  const std::string scenario = (dir / "small.textproto").string();
  const auto ok = testing::run_clustersim("sweep " + scenario + " --top 2 --jobs 2 --csv " + (dir / "s.csv").string() +
                                              " --json " + (dir / "s.json").string() + " --report " + (dir / "s.html").string(),
                                          dir);
  CHECK(ok.status == 0);
  CHECK(ok.out.find("Ranked by simulated iteration time") != std::string::npos);
  CHECK(std::filesystem::exists(dir / "s.csv"));
  CHECK(std::filesystem::exists(dir / "s.json"));
  const std::string html = testing::slurp(dir / "s.html");
  CHECK(html.find("<svg") != std::string::npos);
  CHECK(html.find("Pareto front") != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);  // self-contained: no scripts

  auto one_line_error = [&](const std::string& args, const std::string& what) {
    const auto r = testing::run_clustersim(args, dir);
    CAPTURE(args);
    CHECK(r.status == 2);
    CHECK(r.err.starts_with("error: "));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find(what) != std::string::npos);
  };
  one_line_error("sweep", "takes one scenario");
  one_line_error("sweep " + scenario + " --jobs 0", "--jobs");
  one_line_error("sweep " + scenario + " --gpus 12", "--gpus: 12 is not a whole number of 8-GPU nodes");
  one_line_error("sweep " + scenario + " --top many", "sweep");
  one_line_error("sweep " + scenario + " --report " + (dir / "r.txt").string(), "--report");
  one_line_error("sweep " + scenario + " --csv " + (dir / "missing" / "s.csv").string(), "cannot write output file");
  CHECK(!std::filesystem::exists(dir / "missing"));
  std::filesystem::remove_all(dir);
}
