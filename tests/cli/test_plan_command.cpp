// `clustersim plan`: Young's interval and waste, the cost and energy arithmetic, the deadline search,
// and input errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "cli/command_line.h"
#include "cli/plan_command.h"
#include "cli/scenario_loader.h"
#include "tests/test_support.h"

using namespace clustersim;

namespace {

// 1 node of 8 A100s; a 4-layer model with 8 heads; global batch 16 (= 1 · 2 · 8).
const std::string kSmall = clustersim::testing::kTinyA100Scenario;

workloads::Scenario small() { return cli::load_scenario_text(kSmall, "small.textproto", false, ""); }

}  // namespace

TEST_CASE("plan: Young's interval and expected waste at the Llama 3 failure rate") {
  // λ = 419 / (54 · 24 · 16,384) = 1.97328e-5 per GPU-hour. On 16,384 GPUs: MTBF = 1 / (16,384 λ)
  // = 54 · 24 / 419 = 3.09308 h. δ = 60 s = 1/60 h: τ = √(2 · (1/60) · 3.09308) = 0.321096 h (19.27 min).
  // Waste = δ/τ + τ/(2M) + R/M = 0.0519056 + 0.0519056 + (1/6)/3.09308 = 0.0538837 → 0.157695;
  // effective ratio 0.842305. (At the optimum the first two terms are equal, as Young's derivation says.)
  CHECK(cli::kLlama3FailuresPerGpuHour == doctest::Approx(1.97328e-5).epsilon(1e-5));
  const cli::Goodput g = cli::goodput(16384, cli::kLlama3FailuresPerGpuHour, seconds(60), seconds(600));
  CHECK(g.mtbf_h == doctest::Approx(3.093079).epsilon(1e-6));
  CHECK(g.interval_h == doctest::Approx(0.3210960).epsilon(1e-6));
  CHECK(g.waste_fraction == doctest::Approx(0.1576949).epsilon(1e-6));
  CHECK(g.effective_ratio == doctest::Approx(0.8423051).epsilon(1e-6));
  // 1,024 GPUs: M = 49.4893 h, τ = √(2 · (1/60) · 49.4893) = 1.28438 h, waste 0.0293205.
  const cli::Goodput k = cli::goodput(1024, cli::kLlama3FailuresPerGpuHour, seconds(60), seconds(600));
  CHECK(k.mtbf_h == doctest::Approx(49.48926).epsilon(1e-6));
  CHECK(k.interval_h == doctest::Approx(1.284384).epsilon(1e-6));
  CHECK(k.waste_fraction == doctest::Approx(0.0293205).epsilon(1e-5));
  // No failures: no waste.
  CHECK(cli::goodput(8, 0, seconds(60), seconds(600)).effective_ratio == 1);
}

TEST_CASE("plan: GPU power defaults from the datasheets") {
  CHECK(*cli::default_gpu_power_w("A100-SXM4-80GB") == 400);
  CHECK(*cli::default_gpu_power_w("A100-PCIe-40GB") == 300);
  CHECK(*cli::default_gpu_power_w("H100-SXM5-80GB") == 700);
  CHECK(*cli::default_gpu_power_w("H200-SXM-141GB") == 700);
  CHECK(*cli::default_gpu_power_w("GB200") == 1200);  // the gpu of the gb200 profile and gb200-nvl72 preset
  CHECK(!cli::default_gpu_power_w("MI300X").has_value());
}

TEST_CASE("plan: steps, GPU-hours, cost and energy on a fixed GPU count") {
  // 1,638,400 tokens / (16 · 1,024 tokens per step) = 100 steps exactly. GPU-hours = 100 · T · 8 / 3600;
  // cost at 2.5 per GPU-hour = 2.5 · that; energy = 400 W · 8 · 100 · T / 3.6e6 kWh.
  cli::PlanOptions o;
  o.tokens = 1638400;
  o.gpus = 8u;
  o.price_per_gpu_hour = 2.5;
  const auto p = cli::plan_for_gpus(small(), 8, o);
  REQUIRE(p.has_value());
  const double t = p->iteration_time.raw();
  CHECK(p->optimizer_steps == 100);
  CHECK(p->train_time.raw() == doctest::Approx(100 * t).epsilon(1e-12));
  CHECK(p->gpu_hours == doctest::Approx(100 * t * 8 / 3600).epsilon(1e-12));
  CHECK(*p->cost == doctest::Approx(2.5 * 100 * t * 8 / 3600).epsilon(1e-12));
  CHECK(*p->energy_kwh == doctest::Approx(400.0 * 8 * 100 * t / 3.6e6).epsilon(1e-12));
  // With failures on 8 GPUs: M = 1 / (8 λ) = 6334.6 h, ratio = 1 − waste; the wall time is train / ratio.
  CHECK(p->wall_time.raw() == doctest::Approx(p->train_time.raw() / p->goodput.effective_ratio).epsilon(1e-12));
  // The best layout is the analytical ranking's first (--top 0), the fastest that fits.
  CHECK(!p->simulated);
  // No node power and no PUE given: no facility figure.
  CHECK(!p->facility_energy_kwh.has_value());
}

TEST_CASE("plan: the facility's energy adds the nodes' other power and the PUE") {
  // 8 GPUs of one node at 400 W, the rest of the node 4,600 W, PUE 1.25, 100 steps of T:
  //   (8 · 400 + 1 · 4,600) W · 1.25 · 100 · T / 3.6e6 = 9,750 W · 100 · T / 3.6e6 kWh.
  cli::PlanOptions o;
  o.tokens = 1638400;
  o.gpus = 8u;
  o.node_power_w = 4600;
  o.pue = 1.25;
  const workloads::Scenario sc = small();
  const auto p = cli::plan_for_gpus(sc, 8, o);
  REQUIRE(p.has_value());
  const double t = p->iteration_time.raw();
  REQUIRE(p->facility_energy_kwh.has_value());
  CHECK(*p->facility_energy_kwh == doctest::Approx(9750.0 * 100 * t / 3.6e6).epsilon(1e-12));
  CHECK(*p->energy_kwh == doctest::Approx(3200.0 * 100 * t / 3.6e6).epsilon(1e-12));  // the GPUs' line unchanged
  cli::PlanResult shown;
  shown.point = p;
  CHECK(cli::plan_text(sc, o, shown).find("(8 GPUs x 400 W + 1 node x 4600 W) x PUE 1.25\n") != std::string::npos);
  // Four GPUs still power their whole node: (4 · 400 + 1 · 4,600) · 1.25 = 7,750 W. A PUE alone scales the
  // GPUs' power: 8 · 400 · 1.5 = 4,800 W.
  const auto half = cli::plan_for_gpus(sc, 4, o);
  REQUIRE(half.has_value());
  CHECK(*half->facility_energy_kwh == doctest::Approx(7750.0 * half->train_time.raw() / 3.6e6).epsilon(1e-12));
  o.node_power_w.reset();
  o.pue = 1.5;
  const auto pue_only = cli::plan_for_gpus(sc, 8, o);
  REQUIRE(pue_only.has_value());
  CHECK(*pue_only->facility_energy_kwh == doctest::Approx(4800.0 * 100 * t / 3.6e6).epsilon(1e-12));
  // and says that the nodes' other power is missing from it.
  shown.point = pue_only;
  CHECK(cli::plan_text(sc, o, shown)
            .find("(8 GPUs x 400 W) x PUE 1.5 (GPUs only: --node-power-w adds the rest of each node)\n") !=
        std::string::npos);
}

TEST_CASE("plan: the deadline search returns the smallest whole-node count that meets it") {
  // Two nodes of the same model: from the per-count wall times W(8), W(16) (computed by plan_for_gpus), a
  // deadline between them must give 16 when W(16) < W(8) ≤ ... and 8 for a deadline at W(8) itself. The
  // compute bound of this tiny model is far below one node, so the search starts at 8.
  std::string text = kSmall;
  text.replace(text.find("nodes: 1"), 8, "nodes: 2");
  text.replace(text.find("dp: 8 micro_batch: 1 grad_accum: 2"), 34, "dp: 16 micro_batch: 1 grad_accum: 1");
  const workloads::Scenario sc = cli::load_scenario_text(text, "two.textproto", false, "");
  cli::PlanOptions o;
  o.tokens = 1e9;
  const auto w8 = cli::plan_for_gpus(sc, 8, o), w16 = cli::plan_for_gpus(sc, 16, o);
  REQUIRE(w8.has_value());
  REQUIRE(w16.has_value());
  REQUIRE(w16->wall_time < w8->wall_time);
  o.deadline_days = (w8->wall_time.raw() + w16->wall_time.raw()) / 2 / 86400;
  const cli::PlanResult r = cli::run_plan(sc, o);
  CHECK(r.search_from == 8);
  REQUIRE(r.point.has_value());
  CHECK(r.point->gpus == 16);
  CHECK(r.searched == 2);
  o.deadline_days = w8->wall_time.raw() * 1.000001 / 86400;
  CHECK(cli::run_plan(sc, o).point->gpus == 8);
  o.deadline_days = w16->wall_time.raw() * 0.5 / 86400;
  o.max_gpus = 16;
  const cli::PlanResult none = cli::run_plan(sc, o);
  CHECK(!none.point.has_value());
  CHECK(cli::plan_text(sc, o, none).find("No GPU count up to 16 meets the deadline") != std::string::npos);
  // How close it came: of the two counts tried (8 and 16), 16 has the shorter wall time W(16), twice the deadline.
  REQUIRE(none.closest.has_value());
  CHECK(none.closest->gpus == 16);
  CHECK(none.closest->wall_time == w16->wall_time);
  const std::string closest = "Closest: 16 GPUs (2 nodes), " + w16->layout + ", " +
                              cli::human_duration(w16->wall_time) + " with failures (" +
                              cli::human_duration(w16->train_time) + " without)";
  CHECK(cli::plan_text(sc, o, none).find(closest) != std::string::npos);
  CHECK(cli::plan_text(sc, o, none).find("Raise --max-gpus or the deadline.") != std::string::npos);
  // What holding the GPUs for the whole run costs: GPUs x wall time with failures (16 GPUs: wall_time · 16 / 3600 s),
  // at 2 per GPU-hour; the cost without failures is GPUs x training time (the failure-free part).
  o.price_per_gpu_hour = 2;
  const auto priced = cli::plan_for_gpus(sc, 16, o);
  REQUIRE(priced.has_value());
  CHECK(priced->held_gpu_hours == doctest::Approx(priced->wall_time.raw() * 16 / 3600).epsilon(1e-12));
  CHECK(*priced->held_cost == doctest::Approx(2 * priced->held_gpu_hours).epsilon(1e-12));
  CHECK(*priced->cost == doctest::Approx(2 * priced->train_time.raw() * 16 / 3600).epsilon(1e-12));
  CHECK(*priced->held_cost > *priced->cost);
  // A failure rate whose MTBF (1 / (16 x 1) h = 225 s) is below the 600 s restart: waste > 100 %, never finishes.
  o.failures_per_gpu_hour = 1;
  const auto hopeless = cli::plan_for_gpus(sc, 16, o);
  REQUIRE(hopeless.has_value());
  CHECK(std::isinf(hopeless->wall_time.raw()));
  cli::PlanResult shown;
  shown.point = hopeless;
  // The MTBF below an hour in minutes: 225 s = 3.75 minutes; the waste (above 100 %) is not printed as a number.
  CHECK(cli::plan_text(sc, o, shown).find("wall time          never: failures come faster (MTBF 3.75 minutes)") !=
        std::string::npos);
  CHECK(cli::plan_text(sc, o, shown).find("waste              100 % or more: the job never finishes") !=
        std::string::npos);
}

TEST_CASE("plan: the compute bound counts what every layout executes, the fabric's size ends the search") {
  // The small model (GPT-style, l = 4, h = 1024, s = 1024, V = 32000, FFN 4h). GEMM FLOPs per token, forward:
  // per layer QKV 6h² + projection 2h² + MLP 16h² = 24h² = 25,165,824, attention scores and ·V over the causal
  // half of the square 2·s·h = 2,097,152 (a flash kernel computes no more; the full square, MFU's convention,
  // would be twice that); the LM head 2·h·V = 65,536,000. Forward + backward = 3x: 3 · (4 · 27,262,976 +
  // 65,536,000) = 523,763,712 FLOPs per token. 1e9 tokens are ⌈1e9 / (16 · 1024)⌉ = 61,036 whole optimizer
  // steps of 16,384 tokens, 1,000,013,824 tokens, in 0.01 days at the A100's 312 TFLOP/s BF16 peak:
  // 523,763,712 · 1,000,013,824 / (312e12 · 864 s) = 1.9430 GPUs.
  cli::PlanOptions o;
  o.tokens = 1e9;
  o.deadline_days = 0.01;
  o.max_gpus = 8;
  const cli::PlanResult r = cli::run_plan(small(), o);
  CHECK(r.compute_bound == doctest::Approx(523763712.0 * 1000013824.0 / (312e12 * 864)).epsilon(1e-9));
  // A deadline no count meets, on a fabric of radix-32 switches. Non-blocking, a leaf has 16 uplinks and 16
  // downlinks; the rail-optimised tree has one leaf per rail (8 NICs per node) per 16 nodes, and a two-level
  // tree at most 32 leaves (the spine's ports): 8 · ceil(nodes / 16) ≤ 32 → at most 64 nodes = 512 GPUs. The
  // search ends there with a sentence naming it, not an error.
  std::string text = kSmall;
  text.replace(text.find("nic_gbits_per_s_per_direction: 200 }"), 36,
               "nic_gbits_per_s_per_direction: 200 fabric { switch_radix: 32 } }");
  const workloads::Scenario narrow = cli::load_scenario_text(text, "narrow.textproto", false, "");
  o.deadline_days = 1e-4;  // compute bound 1.9430 · 100 = 194.3 GPUs: from 200 up
  o.max_gpus = 32768;
  const cli::PlanResult capped = cli::run_plan(narrow, o);
  CHECK(!capped.point.has_value());
  CHECK(capped.search_from == 200);
  CHECK(capped.fabric_limit == 512);
  CHECK(capped.searched == (512 - 200) / 8 + 1);  // 200, 208, …, 512
  const std::string text_out = cli::plan_text(narrow, o, capped);
  CHECK(text_out.find("No GPU count up to 512, the most the scenario's fabric holds, meets the deadline") !=
        std::string::npos);
  CHECK(text_out.find("Give a larger fabric or raise the deadline.") != std::string::npos);
  // A deadline whose compute bound alone is beyond the fabric: 1.9430 · 1e4 = 19,430.01, so 19,431 GPUs at 1e-6 days,
  // more than the 512 the fabric holds. Nothing is searched, and the sentence says why instead of naming a search from
  // 32,768 (the cap) that tried no count.
  o.deadline_days = 1e-6;
  const cli::PlanResult beyond = cli::run_plan(narrow, o);
  CHECK(beyond.searched == 0);
  const std::string beyond_out = cli::plan_text(narrow, o, beyond);
  CHECK(beyond_out.find("No GPU count can meet the deadline: the compute bound alone, 19431 GPUs (the training FLOPs "
                        "at the dense peak within the deadline), is more than the 512 the scenario's fabric holds. "
                        "Raise the deadline or give the scenario a larger fabric.\n") != std::string::npos);
  CHECK(beyond_out.find("No layout runs on any GPU count tried") == std::string::npos);
}

TEST_CASE("plan: a torus cluster is not resized, the deadline is judged on its own chips") {
  // The TPU v4 4x4x4 slice of 64 chips: the search resizes clusters in whole nodes, which a torus cannot
  // be, so its only count is 64 (the run used to fail with an error about --gpus, which was not given).
  const workloads::Scenario tpu = cli::load_scenario_file(std::string(CLUSTERSIM_SOURCE_DIR) +
                                                          "/scenarios/tpu-vs-gpu/tpu-v4-4x4x4.textproto");
  cli::PlanOptions o;
  o.tokens = 1e9;
  o.price_per_gpu_hour = 2;  // for the cost and energy lines at the end
  o.gpu_power_w = 200;
  const auto own = cli::plan_for_gpus(tpu, 64, o);
  REQUIRE(own.has_value());
  o.deadline_days = own->wall_time.raw() * 2 / 86400;  // twice its wall time: met
  const cli::PlanResult met = cli::run_plan(tpu, o);
  CHECK(met.fixed_size);
  CHECK(met.searched == 1);
  REQUIRE(met.point.has_value());
  CHECK(met.point->gpus == 64);
  o.deadline_days = own->wall_time.raw() * 0.5 / 86400;  // half of it: not met, and said why
  const cli::PlanResult missed = cli::run_plan(tpu, o);
  CHECK(!missed.point.has_value());
  CHECK(cli::plan_text(tpu, o, missed).find("a torus or explicit cluster is not resized") != std::string::npos);
  // Its own 64 chips are the closest, at twice the deadline; raising --max-gpus would not help a torus.
  REQUIRE(missed.closest.has_value());
  CHECK(missed.closest->gpus == 64);
  CHECK(missed.closest->wall_time == own->wall_time);
  CHECK(cli::plan_text(tpu, o, missed).find("Closest: 64 chips") != std::string::npos);
  CHECK(cli::plan_text(tpu, o, missed).find("The cluster's 64 chips do not meet") != std::string::npos);
  CHECK(cli::plan_text(tpu, o, missed).find("--max-gpus") == std::string::npos);
  // A torus's accelerators are TPU chips, counted and priced in chip-hours (Cloud TPU's unit): the plan says
  // "chip" wherever it would say "GPU" on a GPU cluster, in the text and in the report alike.
  const std::string text = cli::plan_text(tpu, o, met),
                    md = cli::plan_report(tpu, o, met, cli::ReportFormat::kMarkdown);
  for (const char* line : {"chips                64 (16 nodes)\n", "chip-hours           ", " USD per chip-hour\n",
                           "energy (chips)       ", " W per chip\n", " per chip-hour -> MTBF ", " on 64 chips\n"})
    CHECK_MESSAGE(text.find(line) != std::string::npos, "plan text lacks '" << line << "':\n" << text);
  CHECK_MESSAGE(text.find("GPU") == std::string::npos, text);
  for (const char* cell : {"| chips |", "| chip-hours without failures |", "| price per chip-hour [USD] |",
                           "| chip board power [W] |", "| failure rate [per chip-hour] |"})
    CHECK_MESSAGE(md.find(cell) != std::string::npos, "plan report lacks '" << cell << "':\n" << md);
  CHECK_MESSAGE(md.find("GPU") == std::string::npos, md);
}

TEST_CASE("plan command: power, PUE, failure rate, checkpoint and restart options reach the plan, --top re-simulates") {
  // 8 GPUs at λ = 1e-3 per GPU-hour: M = 1 / (8 · 1e-3) = 125 h. δ = 30 s = 1/120 h: τ = √(2 · (1/120) · 125) =
  // √2.08333 = 1.44338 h. Waste = δ/τ + τ/(2M) + R/M = 0.0057735 + 0.0057735 + (300/3600)/125 = 0.0006667
  // → 0.0122137 (1.22 %), ratio 0.98779. Power 500 W per GPU, PUE 1.2 with no node power: 8 x 500 x 1.2 W.
  const auto dir = testing::scratch_dir("plan-options");
  { std::ofstream(dir / "small.textproto") << kSmall; }
  const std::string base = "plan " + (dir / "small.textproto").string() +
                           " --tokens 1638400 --gpus 8 --gpu-power-w 500 --checkpoint-write-s 30 --restart-s 300 "
                           "--failure-rate-per-gpu-hour 1e-3 --pue 1.2 --top 1";
  const auto r = testing::run_clustersim(base, dir);
  REQUIRE(r.status == 0);
  for (const char* line : {"(event-driven time)", " at 500 W per GPU\n", "(8 GPUs x 500 W) x PUE 1.2 (GPUs only",
                           "  failure rate       0.001 per GPU-hour -> MTBF 125.00 h on 8 GPUs\n",
                           "  checkpoint         write 30 s, restart 300 s; Young interval 1.44 hours\n",
                           "  waste              1.22 %, effective training time ratio 0.9878\n"})
    CHECK_MESSAGE(r.out.find(line) != std::string::npos, "plan output lacks '" << line << "':\n" << r.out);
  // The same plan with the library: the waste to six digits.
  cli::PlanOptions o;
  o.tokens = 1638400;
  o.gpus = 8u;
  o.failures_per_gpu_hour = 1e-3;
  o.checkpoint_write = seconds(30);
  o.restart = seconds(300);
  const auto p = cli::plan_for_gpus(small(), 8, o);
  REQUIRE(p.has_value());
  CHECK(p->goodput.interval_h == doctest::Approx(1.443376).epsilon(1e-6));
  CHECK(p->goodput.waste_fraction == doctest::Approx(0.0122137).epsilon(1e-5));
  // Threads change nothing in the output.
  CHECK(testing::run_clustersim(base + " --jobs 2", dir).out == r.out);
  std::filesystem::remove_all(dir);
}

TEST_CASE("plan command: output and one-line errors with exit status 2") {
  const auto dir = testing::scratch_dir("plan");
  {
    std::ofstream(dir / "small.textproto") << kSmall;
  }
  const std::string sc = (dir / "small.textproto").string();
  const auto ok = testing::run_clustersim("plan " + sc + " --tokens 1e9 --gpus 8 --price-per-gpu-hour 2", dir);
  CHECK(ok.status == 0);
  CHECK(ok.out.find("Young interval") != std::string::npos);
  CHECK(ok.out.find("cost") != std::string::npos);
  CHECK(ok.out.find(" USD per GPU-hour\n") != std::string::npos);  // the currency compare's cost row names
  auto one_line_error = [&](const std::string& args, const std::string& what) {
    const auto r = testing::run_clustersim(args, dir);
    CAPTURE(args);
    CHECK(r.status == 2);
    CHECK(r.err.starts_with("error: "));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find(what) != std::string::npos);
  };
  one_line_error("plan " + sc + " --gpus 8", "--tokens: missing");
  // A multi-job scenario: plan sizes one job's cluster, and says so instead of planning the first job alone.
  one_line_error("plan scenarios/multi-job/two-jobs-sharing-spines.textproto --tokens 1e9 --gpus 8",
                 "two-jobs-sharing-spines.textproto: jobs: has 2 jobs; plan sizes the cluster of one job");
  one_line_error("plan " + sc + " --tokens 1e9", "exactly one of --deadline-days and --gpus");
  one_line_error("plan " + sc + " --tokens 1e9 --gpus 8 --deadline-days 3", "exactly one");
  one_line_error("plan " + sc + " --tokens=-5 --gpus 8", "--tokens: -5 must be > 0");
  one_line_error("plan " + sc + " --tokens inf --gpus 8", "--tokens: inf is not a finite number");
  // More optimizer steps than the 2^53 clustersim counts (1e30 tokens at any batch here): refused, not wrapped to 0.
  one_line_error("plan " + sc + " --tokens 1e30 --deadline-days 1", "more than the 9007199254740992 clustersim counts");
  one_line_error("plan " + sc + " --tokens 1e9 --gpus 8 --restart-s -1", "--restart-s");
  // A PUE below 1 would have the facility give energy back; the node power is a rate like the others.
  one_line_error("plan " + sc + " --tokens 1e9 --gpus 8 --pue 0.9", "--pue: 0.9 must be in [1, 10]");
  one_line_error("plan " + sc + " --tokens 1e9 --gpus 8 --node-power-w -5", "--node-power-w");
  // The deadline search steps by whole nodes (8 GPUs here): a limit below one node is refused, not tried as 7 GPUs;
  // a negative count is refused, not wrapped to 2^32 - 1.
  one_line_error("plan " + sc + " --tokens 1e9 --deadline-days 3 --max-gpus 7",
                 "--max-gpus: 7 is less than the search step, one NVLink domain of 8 GPUs");
  one_line_error("plan " + sc + " --tokens 1e9 --gpus -8", "--gpus: -8 is negative");
  // Rates and prices above 1e12 would make the goodput arithmetic inf − inf (it printed "waste -nan %").
  one_line_error("plan " + sc + " --tokens 1e9 --gpus 8 --failure-rate-per-gpu-hour 1e308",
                 "--failure-rate-per-gpu-hour: 1e+308 must be >= 0 and <= 1e12");
  one_line_error("plan " + sc + " --tokens 1e9 --gpus 4294967288",
                 "--gpus: 4294967288 is more than the 1048576 GPUs clustersim plans for");
  one_line_error("plan " + sc + " --tokens 1e9 --deadline-days 3 --max-gpus 2000000", "--max-gpus: 2000000 is more");
  // --report: a self-contained HTML file with the plan's numbers and the wall-time chart, or Markdown with the
  // same tables; a bad extension is an error before anything runs, and leaves no file.
  const auto html = testing::run_clustersim(
      "plan " + sc + " --tokens 1e9 --gpus 8 --price-per-gpu-hour 2 --report " + (dir / "plan.html").string(), dir);
  CHECK(html.status == 0);
  const std::string page = testing::slurp(dir / "plan.html");
  CHECK(page.find("<svg") != std::string::npos);
  CHECK(page.find("Young interval") != std::string::npos);
  // No fetches: the only URL is the SVG namespace name.
  auto count = [&](const std::string& needle) {
    std::size_t n = 0;
    for (std::size_t at = page.find(needle); at != std::string::npos; at = page.find(needle, at + 1)) ++n;
    return n;
  };
  CHECK(count("http://") == count("xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK(count("https://") == 0);
  const auto md = testing::run_clustersim(
      "plan " + sc + " --tokens 1e9 --gpus 8 --report " + (dir / "plan.md").string(), dir);
  CHECK(md.status == 0);
  const std::string text = testing::slurp(dir / "plan.md");
  CHECK(text.find("| effective training time ratio |") != std::string::npos);
  one_line_error("plan " + sc + " --tokens 1e9 --gpus 8 --report " + (dir / "plan.txt").string(), "--report");
  CHECK(!std::filesystem::exists(dir / "plan.txt"));
  std::filesystem::remove_all(dir);
}
