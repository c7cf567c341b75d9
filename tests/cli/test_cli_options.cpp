// Command-line options that change what a command computes, each run through the binary and held against a
// number derived here: run --no-symmetry, collective --proto, calibrate fit --bands, calibrate import-nccl-tests
// --proto and --hosts-per-nvlink-domain, sweep --allow-tp-across-nodes, validate --data.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "tests/test_support.h"

namespace fs = std::filesystem;
using clustersim::testing::json_number;
using clustersim::testing::run_clustersim;
using clustersim::testing::scratch_dir;
using clustersim::testing::slurp;

namespace {

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

}  // namespace

TEST_CASE("run --no-symmetry simulates every data-parallel replica and changes no figure") {
  // tp 4 x dp 2 on one 8-GPU node at ANALYTICAL fidelity: the two replicas (GPUs 0-3 and 4-7) are identical, so
  // by default one stands for both, and in it tensor rank 1 for ranks 2 and 3: the summary says so and the trace
  // holds 2 GPUs (0 and 1); --no-symmetry simulates all 8.
  const fs::path dir = scratch_dir("no-symmetry");
  std::string text = clustersim::testing::kTinyA100Scenario;
  const std::string data_parallel = "dp: 8 micro_batch: 1 grad_accum: 2";
  text.replace(text.find(data_parallel), data_parallel.size(), "tp: 4 dp: 2 micro_batch: 1 grad_accum: 8");
  std::ofstream(dir / "tp.textproto") << text;
  const std::string sc = (dir / "tp.textproto").string();
  const auto reduced = run_clustersim("run " + sc + " --trace " + (dir / "a.json").string(), dir);
  const auto full = run_clustersim("run " + sc + " --no-symmetry --trace " + (dir / "b.json").string(), dir);
  REQUIRE(reduced.status == 0);
  REQUIRE(full.status == 0);
  const std::string note =
      "  symmetry   simulated 2 of 8 GPUs: the 2 data-parallel replicas are identical and tensor ranks 1-3 of each TP "
      "group run alike (ANALYTICAL fidelity)\n";
  CHECK(reduced.out.find(note) != std::string::npos);
  // With pp 1 no pipeline schedule applies, and the summary names none.
  CHECK(reduced.out.find("Megatron 3D: TP 4 x PP 1 x DP 2, no pipeline, rank order tp-dp-pp;") != std::string::npos);
  CHECK(full.out.find("  symmetry ") == std::string::npos);
  // Everything else is the same: the reduction is exact.
  std::string without = reduced.out;
  without.erase(without.find(note), note.size());
  CHECK(without == full.out);
  CHECK(count_of(slurp(dir / "a.json"), "\"name\":\"process_name\"") == 2);
  CHECK(count_of(slurp(dir / "b.json"), "\"name\":\"process_name\"") == 8);
  fs::remove_all(dir);
}

TEST_CASE("collective --proto forces the protocol at the times NCCL's model gives each") {
  // 8 A100 on one NVSwitch (DGX A100), 1 MiB AllReduce, ring (test_nccl_model.cpp, "NCCL's choice on an 8-GPU
  // A100 node": busbw 300 GB/s x 0.77 = 231 GB/s, ring algbw = busbw x 8/14):
  //   LL:     15.0 us + 1,048,576 / 50.114e3  = 35.92 us, below the scenario's 36 us launch floor -> 36.00
  //   LL128:  40.6 us + 1,048,576 / 121.44e3  = 49.23 us
  //   Simple: 56.0 us + 1,048,576 / 132.0e3   = 63.94 us
  // NCCL's choice without --proto is the least: LL.
  const fs::path dir = scratch_dir("collective-proto");
  const std::string base =
      "collective scenarios/nccl/a100_8gpu_nvswitch_allreduce.textproto --op allreduce --sizes 1048576:1048576";
  auto row = [&](const std::string& extra) {
    const auto r = run_clustersim(base + extra, dir);
    REQUIRE(r.status == 0);
    std::istringstream in(r.out);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("     1048576 ", 0) == 0) return line;
    FAIL("no 1 MiB row in:\n" << r.out);
    return std::string();
  };
  auto time_and_protocol = [](const std::string& line) {
    std::istringstream in(line);
    std::string size, count, type, redop, root, time, algbw, busbw, algo, proto;
    in >> size >> count >> type >> redop >> root >> time >> algbw >> busbw >> algo >> proto;
    return std::make_pair(std::stod(time), algo + " " + proto);
  };
  CHECK(time_and_protocol(row("")) == std::make_pair(36.00, std::string("ring LL")));
  CHECK(time_and_protocol(row(" --proto LL")) == std::make_pair(36.00, std::string("ring LL")));
  CHECK(time_and_protocol(row(" --proto LL128")) == std::make_pair(49.23, std::string("ring LL128")));
  CHECK(time_and_protocol(row(" --proto Simple")) == std::make_pair(63.94, std::string("ring Simple")));
  fs::remove_all(dir);
}

TEST_CASE("calibrate fit --bands sets the size bands the alpha-beta lines are fitted over") {
  // tests/data/calibrate/two_points.textproto: ring Simple AllReduce on 8 ranks at 1 KiB and 2 KiB (30 us both),
  // 256 KiB, and two exact points of t = 10 us + size x 1.75 / 100 GB/s at 1 MiB and 32 MiB. Edges 4K,1M give
  // [0, 4 KiB): latency only, alpha 30 us;  [4 KiB, 1 MiB): one size, skipped;  [1 MiB, inf): alpha 10 us,
  // busbw 100 GB/s exactly.
  const fs::path dir = scratch_dir("fit-bands");
  const std::string profile = (dir / "p.textproto").string();
  const auto r =
      run_clustersim("calibrate fit tests/data/calibrate/two_points.textproto --bands 4K,1M -o " + profile, dir);
  REQUIRE(r.status == 0);
  for (const char* line :
       {"  all_reduce     ring     Simple  NVLINK     8 [0, 4 KiB)                  2     0.0%     0.0%      30.00  "
        "       inf  times do not grow with size: latency only\n",
        "  all_reduce     ring     Simple  NVLINK     8 [4 KiB, 1 MiB)              1        -        -          -  "
        "         -  skipped: one size only: a line needs two\n",
        "  all_reduce     ring     Simple  NVLINK     8 [1 MiB, inf)                2     0.0%     0.0%      10.00  "
        "     100.0  \n"})
    CHECK_MESSAGE(r.out.find(line) != std::string::npos, "fit output lacks '" << line << "':\n" << r.out);
  // The profile holds the two fitted bands; the default edges (64K, 1M, 64M) would have given others.
  const std::string p = slurp(profile);
  CHECK(count_of(p, "  bands {") == 2);
  CHECK(p.find("max_bytes: 4096") != std::string::npos);
  CHECK(p.find("min_bytes: 1048576") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("calibrate import-nccl-tests --proto and --hosts-per-nvlink-domain label the runs that fit bands on") {
  // The 2-node H100 run (4 GPUs per host): by default its rows cross the network (link NET) and NCCL chose the
  // protocol (default). --proto LL128 says the run forced LL128; --hosts-per-nvlink-domain 2 says both hosts share
  // one NVLink domain, so the same rows become NVLINK bands. The fitted lines are the same numbers either way.
  const fs::path dir = scratch_dir("import-labels");
  const std::string log = "validation/nccl/h100x4_2node_ib_hdr_allreduce.csv";
  auto fit_table = [&](const std::string& options) {
    const std::string raw = (dir / "raw.textproto").string();
    REQUIRE(run_clustersim("calibrate import-nccl-tests " + log + options + " -o " + raw, dir).status == 0);
    const auto r = run_clustersim("calibrate fit " + raw + " -o " + (dir / "p.textproto").string(), dir);
    REQUIRE(r.status == 0);
    return r.out;
  };
  const std::string plain = fit_table(""), ll128 = fit_table(" --proto LL128"),
                    domain = fit_table(" --hosts-per-nvlink-domain 2");
  const std::string band = "     8 [1 MiB, 64 MiB)            12     2.8%     7.6%      49.75        94.9";
  CHECK(plain.find("  all_reduce     default  default NET   " + band) != std::string::npos);
  CHECK(ll128.find("  all_reduce     default  LL128   NET   " + band) != std::string::npos);
  CHECK(domain.find("  all_reduce     default  default NVLINK" + band) != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("sweep --allow-tp-across-nodes admits tensor parallelism wider than a node") {
  // The tiny model (8 heads) on 2 nodes of 4 A100: tp 8 spans both nodes' NVLink domains, so without the option
  // the sweep rejects it (one tp x pp x dp shape: tp 8 pp 1 dp 1); with it the tp 8 layouts are enumerated and
  // ranked, and nothing else changes in the rejections.
  const fs::path dir = scratch_dir("sweep-tp");
  std::string text = clustersim::testing::kTinyA100Scenario;
  const std::string one_node = "nodes: 1 gpus_per_node: 8";
  text.replace(text.find(one_node), one_node.size(), "nodes: 2 gpus_per_node: 4");
  std::ofstream(dir / "two.textproto") << text;
  const std::string sc = (dir / "two.textproto").string();
  const auto narrow = run_clustersim("sweep " + sc, dir),
             wide = run_clustersim("sweep " + sc + " --allow-tp-across-nodes", dir);
  REQUIRE_MESSAGE(narrow.status == 0, narrow.err);
  REQUIRE_MESSAGE(wide.status == 0, wide.err);
  CHECK(narrow.out.find("         1  tp spans more than one NVLink domain\n") != std::string::npos);
  CHECK(wide.out.find("tp spans more than one NVLink domain") == std::string::npos);
  CHECK(narrow.out.find("tp8 ") == std::string::npos);
  CHECK(wide.out.find("tp8 pp1 dp1 ") != std::string::npos);
  std::smatch a, b;
  const std::regex enumerated("layouts enumerated ([0-9]+)");
  REQUIRE(std::regex_search(narrow.out, a, enumerated));
  REQUIRE(std::regex_search(wide.out, b, enumerated));
  CHECK(std::stoi(b[1].str()) > std::stoi(a[1].str()));
  fs::remove_all(dir);
}

TEST_CASE("validate --data reads the user's measurements: the same prediction against their measured value") {
  // Row 1 (GPT-1.7B on 32 A100, 137 TFLOP/s per GPU in the built-in data) with the measured value changed to 110:
  // the prediction P is the built-in run's, the error (P − 110) / 110 x 100.
  const fs::path dir = scratch_dir("validate-data");
  const auto builtin = run_clustersim("validate --rows 1 --json " + (dir / "a.json").string(), dir);
  REQUIRE(builtin.status == 0);
  const double predicted = json_number(slurp(dir / "a.json"), "predicted");
  CHECK(json_number(slurp(dir / "a.json"), "measured") == 137);
  std::istringstream csv(slurp(fs::path(CLUSTERSIM_SOURCE_DIR) / "validation/training/training_measurements.csv"));
  std::string header, row1;
  std::getline(csv, header);
  std::getline(csv, row1);
  REQUIRE(row1.rfind("1,", 0) == 0);
  // Row 1's quoted fields hold commas: replace the measured value where it sits, the only ",137," in the row.
  REQUIRE(header.find(",tflops_per_gpu,") != std::string::npos);
  REQUIRE(count_of(row1, ",137,") == 1);
  row1.replace(row1.find(",137,"), 5, ",110,");
  std::ofstream(dir / "mine.csv") << header << "\n" << row1 << "\n";
  const auto mine =
      run_clustersim("validate --data " + (dir / "mine.csv").string() + " --json " + (dir / "b.json").string(), dir);
  REQUIRE(mine.status == 0);
  const std::string j = slurp(dir / "b.json");
  CHECK(json_number(j, "measured") == 110);
  CHECK(json_number(j, "predicted") == doctest::Approx(predicted).epsilon(1e-12));
  CHECK(json_number(j, "error_pct") == doctest::Approx((predicted - 110) / 110 * 100).epsilon(1e-9));
  CHECK(mine.out.find("mine.csv") != std::string::npos);
  fs::remove_all(dir);
}
