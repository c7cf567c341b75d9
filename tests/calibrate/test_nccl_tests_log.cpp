// Measured collective runs (calibrate/nccl_tests_log.h): the five validation CSVs read as CSVs and, rebuilt
// line by line in nccl-tests' own output format (src/util.cu, ../shared/reference/nccl.md §2.1), read back as
// logs with every value intact; the older layout without a root column; N/A fields; and exact errors
// (file:line:col) for cut-off and foreign input.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "calibrate/nccl_tests_log.h"
#include "sim/input_error.h"
#include "tests/test_support.h"

namespace {

namespace calibrate = clustersim::calibrate;
using calibrate::MeasuredRow;
using calibrate::MeasuredRun;

const std::string kValidation = std::string(CLUSTERSIM_SOURCE_DIR) + "/validation/nccl/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A row of the 13-column layout with the data type "bogus" (at column 32: 12 + 14 + 5 spaces before it).
std::string bad_type_row() {
  return "           8             2     bogus     sum      -1    37.33    0.00    0.00       0    37.79    0.00    "
         "0.00  "
         "     0\n";
}

std::string error_of(const std::function<void()>& call) {
  return clustersim::testing::input_error_of(call);
}

// nccl-tests' number formatting of the time (width 7) and bandwidth (width 6) columns: the most decimals of
// %.2f, %.1f, %.0f that fit the width, else %.1e (width >= 7) or %.0e. Written from the description in
// nccl.md §2.1, independently of the command's own formatter.
std::string nccl_float(double v, int width) {
  char buf[64];
  for (const char* f : {"%*.2f", "%*.1f", "%*.0f"}) {
    const int n = std::snprintf(buf, sizeof buf, f, width, v);
    if (n <= width) return buf;
  }
  std::snprintf(buf, sizeof buf, width >= 7 ? "%*.1e" : "%*.0e", width, v);
  return buf;
}

// What the parser should read back for a value nccl-tests printed: the printed text as a number.
double as_printed(double v, int width) {
  return std::strtod(nccl_float(v, width).c_str(), nullptr);
}

// The rows of a validation CSV, split by hand (the oracle for the CSV reader).
struct CsvRow {
  std::uint64_t size, count;
  std::string type;
  double v[6];  // time_oop, algbw_oop, busbw_oop, time_ip, algbw_ip, busbw_ip
};
std::vector<CsvRow> csv_rows(const std::string& text) {
  std::vector<CsvRow> out;
  std::istringstream in(text);
  std::string line;
  bool header = false;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (!header) {
      header = true;
      continue;
    }
    CsvRow r{};
    char type[32] = {};
    unsigned long long size = 0, count = 0;
    REQUIRE(std::sscanf(line.c_str(), "%llu,%llu,%31[^,],%lf,%lf,%lf,%lf,%lf,%lf", &size, &count, type, &r.v[0],
                        &r.v[1], &r.v[2], &r.v[3], &r.v[4], &r.v[5]) == 9);
    r.size = size, r.count = count, r.type = type;
    out.push_back(r);
  }
  return out;
}

struct FileFacts {
  const char* stem;
  const char* test;   // nccl-tests binary
  const char* op;     // MeasuredRun::op
  const char* redop;  // as nccl-tests prints it
  unsigned gpus, nodes, gpus_per_process;
  unsigned version_code;  // nccl-library=
  const char* version;
};

// From the CSV headers: -g 8 single-process runs for the 8-GPU files, one GPU per MPI rank otherwise.
// The A100 log prints no NCCL version; 21903 (2.19.3) stands in for the rebuilt log.
const FileFacts kFiles[] = {
    {"h100_8gpu_nvswitch_allreduce_ring", "all_reduce_perf", "all_reduce", "sum", 8, 1, 8, 22602, "2.26.2"},
    {"h100_8gpu_nvswitch_allgather_ring", "all_gather_perf", "all_gather", "none", 8, 1, 8, 22602, "2.26.2"},
    {"a100_8gpu_nvswitch_allreduce", "all_reduce_perf", "all_reduce", "sum", 8, 1, 8, 21903, "2.19.3"},
    {"h100x4_2node_ib_hdr_allreduce", "all_reduce_perf", "all_reduce", "sum", 8, 2, 1, 22203, "2.22.3"},
    {"h100_80gpu_10node_allreduce", "all_reduce_perf", "all_reduce", "sum", 80, 10, 1, 22902, "2.29.2"},
};

// The CSV's rows as nccl-tests prints them (preamble, device lines, header, rows, footer).
std::string rebuild_log(const FileFacts& f, const std::vector<CsvRow>& rows) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "# nccl-tests version 2.17.9 nccl-headers=%u nccl-library=%u\n", f.version_code,
                f.version_code);
  out += line;
  out += std::string("# Collective test starting: ") + f.test + "\n";
  std::snprintf(line, sizeof line,
                "# nThread 1 nGpus %u minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg "
                "iters: 1 validation: 1 graph: 0 unalign: 0\n",
                f.gpus_per_process);
  out += line;
  out += "#\n# Using devices\n";
  const unsigned per_node = f.gpus / f.nodes;
  for (unsigned r = 0; r < f.gpus; ++r) {
    const std::string host = "node" + std::to_string(r / per_node);
    std::snprintf(line, sizeof line, "#  Rank %2u Group %2d Pid %6u on %10s device %2u [%04x:%02x:%02x] %s\n", r, 0,
                  1000 + r / f.gpus_per_process, host.c_str(), r % per_node, 0, 0x18 + r % per_node, 0,
                  "NVIDIA H100 80GB HBM3");
    out += line;
  }
  out += "#\n";
  std::snprintf(line, sizeof line,
                "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "",
                "", "", "");
  out += line;
  std::snprintf(line, sizeof line, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n", "size",
                "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
                "#wrong");
  out += line;
  std::snprintf(line, sizeof line, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  out += line;
  double sum = 0;
  for (const CsvRow& r : rows) {
    std::snprintf(line, sizeof line, "%12lu  %12lu  %8s  %6s  %6s", static_cast<unsigned long>(r.size),
                  static_cast<unsigned long>(r.count), r.type.c_str(), f.redop, "    -1");
    out += line;
    for (int p = 0; p < 2; ++p) {
      std::snprintf(line, sizeof line, "  %7s  %6s  %6s  %6g", nccl_float(r.v[3 * p], 7).c_str(),
                    nccl_float(r.v[3 * p + 1], 6).c_str(), nccl_float(r.v[3 * p + 2], 6).c_str(), 0.0);
      out += line;
    }
    out += "\n";
    sum += r.v[2];
  }
  std::snprintf(line, sizeof line, "# %-20s : %d %s\n", "Out of bounds values", 0, "OK");
  out += line;
  std::snprintf(line, sizeof line, "# %-20s : %g %s\n", "Avg bus bandwidth", sum / double(rows.size()), "");
  out += line;
  out += "#\n";
  out += std::string("# Collective test concluded: ") + f.test + "\n\n";
  return out;
}

}  // namespace

TEST_CASE("nccl-tests log: each validation CSV rebuilt as nccl-tests output reads back value for value") {
  for (const FileFacts& f : kFiles) {
    const std::string stem = f.stem;
    CAPTURE(stem);
    const std::vector<CsvRow> rows = csv_rows(slurp(kValidation + f.stem + ".csv"));
    REQUIRE(rows.size() >= 10);
    const std::string log = rebuild_log(f, rows);
    const MeasuredRun run = calibrate::parse_measured_run(log, std::string(f.stem) + ".log");
    CHECK(run.format == calibrate::MeasuredFormat::kNcclTestsLog);
    CHECK(run.source_file == std::string(f.stem) + ".log");
    REQUIRE(run.op.has_value());
    CHECK(*run.op == f.op);
    REQUIRE(run.gpus.has_value());
    CHECK(*run.gpus == f.gpus);  // one "#  Rank" line per rank
    REQUIRE(run.nodes.has_value());
    CHECK(*run.nodes == f.nodes);  // distinct hosts on those lines
    REQUIRE(run.gpus_per_process.has_value());
    CHECK(*run.gpus_per_process == f.gpus_per_process);  // nThread 1 × nGpus
    REQUIRE(run.nccl_version.has_value());
    CHECK(*run.nccl_version == f.version);
    // Every '#' line is kept: 5 preamble + one per rank + "#" + 3 header + 4 footer.
    CHECK(run.header_lines.size() == 5 + f.gpus + 1 + 3 + 4);
    REQUIRE(run.rows.size() == rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      CAPTURE(i);
      const MeasuredRow& m = run.rows[i];
      CHECK(m.size_bytes == rows[i].size);
      CHECK(m.count == rows[i].count);
      CHECK(m.type == rows[i].type);
      CHECK(m.redop == f.redop);
      CHECK(m.root == -1);
      // The CSVs were transcribed from such logs, so printing and reading back gives the same numbers.
      CHECK(m.time_us_oop == as_printed(rows[i].v[0], 7));
      CHECK(m.algbw_oop == as_printed(rows[i].v[1], 6));
      CHECK(m.busbw_oop == as_printed(rows[i].v[2], 6));
      CHECK(m.time_us_ip == as_printed(rows[i].v[3], 7));
      CHECK(m.algbw_ip == as_printed(rows[i].v[4], 6));
      CHECK(m.busbw_ip == as_printed(rows[i].v[5], 6));
      CHECK(m.time_us_oop == doctest::Approx(rows[i].v[0]).epsilon(1e-12));  // and they are the CSV's values
    }
  }
}

TEST_CASE("validation CSV layout: rows, header facts and op read from the project's copies") {
  for (const FileFacts& f : kFiles) {
    const std::string stem = f.stem;
    CAPTURE(stem);
    const std::string path = kValidation + f.stem + ".csv";
    const std::vector<CsvRow> rows = csv_rows(slurp(path));
    const MeasuredRun run = calibrate::read_measured_run(path);
    CHECK(run.format == calibrate::MeasuredFormat::kValidationCsv);
    REQUIRE(run.op.has_value());
    CHECK(*run.op == f.op);  // "collective=all_reduce" in the header
    REQUIRE(run.gpus.has_value());
    CHECK(*run.gpus == f.gpus);  // "GPUs=8"
    REQUIRE(run.nodes.has_value());
    CHECK(*run.nodes == f.nodes);  // "nodes=1"
    CHECK(!run.header_lines.empty());
    CHECK(run.header_lines[0].rfind("# source:", 0) == 0);
    REQUIRE(run.rows.size() == rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const MeasuredRow& m = run.rows[i];
      CHECK(m.size_bytes == rows[i].size);
      CHECK(m.count == rows[i].count);
      CHECK(m.type == rows[i].type);
      CHECK(m.redop.empty());  // the CSV layout has no redop or root column
      CHECK(m.root == -1);
      const double got[6] = {m.time_us_oop, m.algbw_oop, m.busbw_oop, m.time_us_ip, m.algbw_ip, m.busbw_ip};
      for (int k = 0; k < 6; ++k) CHECK(got[k] == rows[i].v[k]);
    }
  }
  // Versions where the header states them: nccl-library=22602 → 2.26.2; "NCCL version 2.22.3+cuda12.6" → 2.22.3;
  // the A100 doc printed none.
  CHECK(calibrate::read_measured_run(kValidation + "h100_8gpu_nvswitch_allreduce_ring.csv").nccl_version == "2.26.2");
  CHECK(calibrate::read_measured_run(kValidation + "h100x4_2node_ib_hdr_allreduce.csv").nccl_version == "2.22.3");
  CHECK(calibrate::read_measured_run(kValidation + "h100_80gpu_10node_allreduce.csv").nccl_version == "2.29.2");
  CHECK(!calibrate::read_measured_run(kValidation + "a100_8gpu_nvswitch_allreduce.csv").nccl_version.has_value());
}

TEST_CASE("nccl-tests log: the older layout without a root column and with an error column") {
  // As older nccl-tests builds print it (cf. the excerpt in NVIDIA/nccl#1244): 12 fields, "error" 0e+00 / 2e-07.
  const std::string log =
      "# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1 \n"
      "#\n"
      "# Using devices\n"
      "#   Rank  0 Pid  40000 on   machine1 device  0 [0x06] Tesla V100-SXM2-32GB\n"
      "#   Rank  1 Pid  40000 on   machine1 device  1 [0x07] Tesla V100-SXM2-32GB\n"
      "#\n"
      "#                                                     out-of-place                       in-place          \n"
      "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
      "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n"
      "           8             2   float     sum    42.18    0.00    0.00  0e+00    41.54    0.00    0.00  0e+00\n"
      "     1048576        262144   float     sum    60.10   17.45   17.45  2e-07    59.87   17.51   17.51  2e-07\n"
      "   134217728      33554432   float     sum   5290.4   25.37   25.37  2e-07   5287.9   25.38   25.38  2e-07\n"
      "# Out of bounds values : 0 OK\n"
      "# Avg bus bandwidth    : 14.27 \n"
      "#\n";
  const MeasuredRun run = calibrate::parse_measured_run(log, "old.log");
  REQUIRE(run.rows.size() == 3);
  CHECK(run.rows[1].size_bytes == 1048576);
  CHECK(run.rows[1].count == 262144);
  CHECK(run.rows[1].type == "float");
  CHECK(run.rows[1].redop == "sum");
  CHECK(run.rows[1].root == -1);  // no root column
  CHECK(run.rows[1].time_us_oop == 60.10);
  CHECK(run.rows[1].algbw_oop == 17.45);
  CHECK(run.rows[1].busbw_oop == 17.45);
  CHECK(run.rows[2].time_us_oop == 5290.4);
  CHECK(run.rows[2].time_us_ip == 5287.9);
  CHECK(run.rows[2].busbw_ip == 25.38);
  CHECK(run.gpus == 2u);
  CHECK(run.nodes == 1u);
  CHECK(run.gpus_per_process == 8u);
  CHECK(!run.op.has_value());  // nothing names the test
  CHECK(!run.nccl_version.has_value());

  // The same rows with no header at all (a pasted excerpt): 12 fields mean the old layout, 13 the new.
  const MeasuredRun bare = calibrate::parse_measured_run(
      "  1048576   262144   float   sum   60.10   17.45   17.45  2e-07   59.87   17.51   17.51  2e-07\n", "bare.log");
  REQUIRE(bare.rows.size() == 1);
  CHECK(bare.rows[0].time_us_ip == 59.87);
  CHECK(bare.rows[0].root == -1);
  const MeasuredRun bare13 = calibrate::parse_measured_run(
      "  1048576   262144   float   sum   0   60.10   17.45   17.45  0   59.87   17.51   17.51  0\n", "bare.log");
  REQUIRE(bare13.rows.size() == 1);
  CHECK(bare13.rows[0].root == 0);
  CHECK(bare13.rows[0].time_us_oop == 60.10);
}

TEST_CASE("nccl-tests log: N/A fields, launcher prefixes, NCCL INFO noise, test name from the command line") {
  const std::string log =
      "$ mpirun -np 2 ./build/alltoall_perf -b 1M -e 2M -f 2 -g 1\n"
      "host1:1234:1234 [0] NCCL INFO NCCL version 2.18.5+cuda12.2\n"
      "[1,0]<stdout>:#\n"
      "[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   "
      "algbw   busbw  #wrong\n"
      "[1,0]<stdout>:#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  "
      "(GB/s)  (GB/s)\n"
      "[1,0]<stdout>:     1048576        131072     float    none      -1    20.00   52.43   26.21       0    19.00   "
      "55.19   27.59     N/A\n"
      "host1:1234:1234 [0] NCCL INFO comm 0x1 rank 0 nranks 2 - Destroy COMPLETE\n"
      "     2097152        262144     float    none      -1    35.00   59.92   29.96       0      N/A     N/A     N/A  "
      "   N/A\n";
  const MeasuredRun run = calibrate::parse_measured_run(log, "a2a.log");
  REQUIRE(run.rows.size() == 2);
  CHECK(run.op == "alltoall");  // from "./build/alltoall_perf" on the command line
  CHECK(run.nccl_version == "2.18.5");
  CHECK(run.rows[0].redop == "none");
  CHECK(run.rows[0].time_us_ip == 19.00);
  CHECK(std::isnan(run.rows[1].time_us_ip));
  CHECK(std::isnan(run.rows[1].algbw_ip));
  CHECK(std::isnan(run.rows[1].busbw_ip));
  CHECK(run.rows[1].busbw_oop == 29.96);
}

TEST_CASE("nccl-tests log: a row cut in two by NCCL's INFO lines is mended, and the algorithms NCCL connected read") {
  // nccl-tests prints a row's size, count, type, redop and root before the collective runs and its times after;
  // NCCL 2.22+ connects an algorithm's links when it first runs one, and with NCCL_DEBUG=INFO its lines (from
  // another thread, to the same stdout) land between the two parts, glued to the root field. The layout of a real
  // 2-node log (odissei-benchmarks/nccl-tests runs/2nodes/all_reduce.log: its 2 MiB row), with made-up hosts and
  // figures. Line numbers: trees connected at line 7, the 2 MiB row's first part at line 13, rings at line 15, its
  // second part at line 16.
  const std::string head =
      "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 5 iters: 20\n"  // 1
      "#\n"                                                                                                 // 2
      "# Using devices\n"                                                                                   // 3
      "#  Rank  0 Group  0 Pid 1 on      hosta device  0 [0000:06:00] NVIDIA H100\n"                      // 4
      "#  Rank  1 Group  0 Pid 2 on      hostb device  0 [0000:06:00] NVIDIA H100\n"                      // 5
      "hosta:1:1 [0] NCCL INFO NCCL version 2.22.3+cuda12.6\n"                                            // 6
      "hosta:1:2 [0] NCCL INFO Connected all trees\n"                                                     // 7
      "hostb:2:2 [0] NCCL INFO Connected all trees\n"                                                     // 8
      "#\n"                                                                                                 // 9
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
      "busbw #wrong\n"  // 10
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  "
      "(GB/s)\n"  // 11
      "     1048576        262144     float     sum      -1    60.00   17.48   17.48      0    59.00   17.77   "
      "17.77      0\n";  // 12
  const std::string split =
      "     2097152        524288     float     sum      -1hosta:1:3 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] "
      "[send] via NET/IB/0/GDRDMA\n"                                                // 13
      "hostb:2:3 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0/GDRDMA\n"  // 14
      "hosta:1:3 [0] NCCL INFO Connected all rings\n"                               // 15
      "    80.00   26.21   26.21      0    79.00   26.55   26.55      0\n";          // 16
  const std::string tail =
      "     4194304       1048576     float     sum      -1   130.00   32.26   32.26      0   129.00   32.51   "
      "32.51      0\n"
      "# Out of bounds values : 0 OK\n"
      "# Avg bus bandwidth    : 25.0\n";
  const MeasuredRun run = calibrate::parse_measured_run(head + split + tail, "split.log");
  REQUIRE(run.rows.size() == 3);
  CHECK(run.rows[1].size_bytes == 2097152);
  CHECK(run.rows[1].line == 13);
  CHECK(run.rows[1].root == -1);  // "-1" before the glued host name
  CHECK(run.rows[1].time_us_oop == 80.00);
  CHECK(run.rows[1].busbw_ip == 26.55);
  CHECK(run.rows[2].time_us_oop == 130.00);
  CHECK(run.complete);
  // Every rank logs its connection; the note names each algorithm once, at its first line.
  REQUIRE(run.connected.size() == 3);
  CHECK(run.connected[0].size_bytes == 0);  // before the first row: nccl-tests' warm-up
  CHECK(run.connected[0].algorithm == "tree");
  CHECK(run.connected[0].line == 7);
  CHECK(run.connected[2].size_bytes == 2097152);  // during the row it interrupted
  CHECK(run.connected[2].algorithm == "ring");
  CHECK(calibrate::connected_note(run) ==
        "# the run's log: NCCL connected trees before the first row (line 7), rings at the 2097152 B row (line 15);\n"
        "# NCCL connects an algorithm the first time it runs one (nccl-tests' warm-up runs the largest and the "
        "smallest size before the first row)\n");
  // A connection between two whole rows belongs to the next row, which ran the algorithm first.
  const std::string between = head + "hosta:1:4 [0] NCCL INFO Connected NVLS\n" + tail;
  const MeasuredRun later = calibrate::parse_measured_run(between, "between.log");
  REQUIRE(later.connected.size() == 3);
  CHECK(later.connected[2].algorithm == "nvls");
  CHECK(later.connected[2].size_bytes == 4194304);
  // Hosts whose names start with a digit (an IP-like "10-0-0-1"): glued to "-1" they read "-110-0-0-1:1:3". The
  // host is the one the log's own NCCL lines begin with, so the root stays -1, not -110.
  auto renamed = [](std::string text) {
    for (const auto& [from, to] : {std::pair{"hosta", "10-0-0-1"}, std::pair{"hostb", "10-0-0-2"}})
      for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at))
        text.replace(at, std::string_view(from).size(), to);
    return text;
  };
  const MeasuredRun digits = calibrate::parse_measured_run(renamed(head + split + tail), "digits.log");
  REQUIRE(digits.rows.size() == 3);
  CHECK(digits.rows[1].root == -1);
  CHECK(digits.rows[1].time_us_oop == 80.00);
  CHECK(digits.connected.size() == 3);
  // A log that ends inside the cut row is cut off: the row has 5 of its 13 fields.
  CHECK(error_of([&] { calibrate::parse_measured_run(head + split.substr(0, split.find("    80.00")), "cut.log"); })
            .starts_with("cut.log:13:"));
}

TEST_CASE("nccl_version_from_code follows NCCL_VERSION_CODE") {
  CHECK(calibrate::nccl_version_from_code(22602) == "2.26.2");  // 2·10000 + 26·100 + 2
  CHECK(calibrate::nccl_version_from_code(22902) == "2.29.2");
  CHECK(calibrate::nccl_version_from_code(2708) == "2.7.8");  // before 2.9: 2·1000 + 7·100 + 8
}

TEST_CASE("measured runs: cut-off and foreign input are InputErrors with file:line:col") {
  const std::string header =
      "# nThread 1 nGpus 8 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 "
      "graph: 0\n"
      "#\n"
      "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  "
      "#wrong\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  "
      "(GB/s)\n";
  const std::string row1 =
      "           8             2     float     sum      -1    37.33    0.00    0.00       0    37.79    0.00    0.00  "
      "     0\n";
  // Line 6 stops after the out-of-place time (6 of 13 fields); the column is just past its last character (62).
  const std::string cut = "          16             4     float     sum      -1    34.96";
  CHECK(error_of([&] { calibrate::parse_measured_run(header + row1 + cut, "cut.log"); }) ==
        "cut.log:6:62: the row ends after 6 of its 13 fields (columns of the header at line 3): the log is cut off or "
        "this is not nccl-tests output");
  // A negative or NaN time is no measurement: the field "-3.00" starts at column 57 (52 characters before it and
  // 4 spaces), "nan" at 59.
  const std::string negative =
      "          16             4     float     sum      -1    -3.00    0.00    0.00       0    35.10    0.00    0.00  "
      "     0\n";
  CHECK(error_of([&] { calibrate::parse_measured_run(header + row1 + negative, "neg.log"); }) ==
        "neg.log:6:57: out-of-place time: \"-3.00\" must be a finite number >= 0 or N/A");
  const std::string nan_time =
      "          16             4     float     sum      -1      nan    0.00    0.00       0    35.10    0.00    0.00  "
      "     0\n";
  CHECK(error_of([&] { calibrate::parse_measured_run(header + row1 + nan_time, "nan.log"); }) ==
        "nan.log:6:59: out-of-place time: \"nan\" must be a finite number >= 0 or N/A");
  // A size beyond 2^50 B, which `collective --sizes` refuses too, is refused at its line: 2^60 B at column 1, and in
  // a validation CSV alike (it used to pass import and fail `--compare` on the scenario).
  const std::string huge =
      "1152921504606846976 288230376151711744 float sum -1 40848.8 368.00 368.49 0 40848.8 368.00 368.49 0\n";
  CHECK(error_of([&] { calibrate::parse_measured_run(header + row1 + huge, "huge.log"); }) ==
        "huge.log:6:1: size: 1152921504606846976 B is more than 2^50 B (1 PiB)");
  CHECK(error_of([&] {
          calibrate::parse_measured_run("size_bytes,count,type,time_us_oop,algbw_oop,busbw_oop,time_us_ip,algbw_ip,"
                                        "busbw_ip\n2251799813685248,562949953421312,float,1,1,1,1,1,1\n",
                                        "huge.csv");
        }) == "huge.csv:2:1: size: 2251799813685248 B is more than 2^50 B (1 PiB)");
  // Nor is a time of 0 (no collective takes no time): refused here, at the log's line, not later by `fit`.
  const std::string zero_time =
      "          16             4     float     sum      -1     0.00    0.00    0.00       0    35.10    0.00    0.00  "
      "     0\n";
  CHECK(error_of([&] { calibrate::parse_measured_run(header + row1 + zero_time, "zero.log"); }) ==
        "zero.log:6:58: out-of-place time: \"0.00\" must be > 0 or N/A");
  // Cut off between two rows: it reads, and says that it may be cut off; with nccl-tests' closing line it is whole.
  const calibrate::MeasuredRun open_ended = calibrate::parse_measured_run(header + row1, "open.log");
  CHECK_FALSE(open_ended.complete);
  CHECK(calibrate::cut_off_note(open_ended) ==
        "# note: open.log ends without nccl-tests' closing \"# Avg bus bandwidth\" line after its 1 rows "
        "(the last of 8 B): the run may be cut off\n");
  const calibrate::MeasuredRun whole = calibrate::parse_measured_run(
      header + row1 + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.00\n", "whole.log");
  CHECK(whole.complete);
  CHECK(calibrate::cut_off_note(whole).empty());
  // The header and nothing else: cut off before the first row.
  CHECK(error_of([&] { calibrate::parse_measured_run(header, "empty.log"); }) ==
        "empty.log:3:1: the result table has no rows: the log is cut off before the first size");
  // A bad number names its field and column: "3x.96" starts at column 57.
  const std::string bad =
      "          16             4     float     sum      -1    3x.96    0.00    0.00       0    35.10    0.00    0.00  "
      "     0\n";
  CHECK(error_of([&] { calibrate::parse_measured_run(header + bad, "bad.log"); }) ==
        "bad.log:5:57: out-of-place time: \"3x.96\" is not a number or N/A");
  // A scenario given by mistake.
  CHECK(error_of([&] {
          calibrate::parse_measured_run("name: \"x\"\ncluster { nodes: 1 }\n", "x.textproto");
        }).rfind("x.textproto:1:1: not an nccl-tests log or a validation CSV: no result table found", 0) == 0);
  CHECK(error_of([&] {
          calibrate::parse_measured_run(std::string("\x7f"
                                                    "ELF\0\x01",
                                                    6),
                                        "a.out");
        }) == "a.out:1:5: binary data: not an nccl-tests log or a validation CSV");
  // Two tests one after the other: the second (line 7) printed its start and nothing else. It is a run without
  // rows, which a note names and select_run refuses.
  const std::vector<calibrate::MeasuredRun> two = calibrate::parse_measured_runs(
      "# Collective test starting: all_reduce_perf\n" + header + row1 + "# Collective test starting: all_gather_perf\n",
      "two.log");
  REQUIRE(two.size() == 2);
  CHECK(two[0].rows.size() == 1);
  CHECK(two[1].rows.empty());
  CHECK(two[1].test_line == 7);
  CHECK(calibrate::no_rows_note(two[1], "not imported") ==
        "# note: two.log (its all_gather test, from line 7) printed no result rows (it failed, or the log is cut off); "
        "not imported\n");
  CHECK(calibrate::no_rows_note(two[0], "not imported").empty());
  CHECK(error_of([&] { calibrate::select_run(two, "all_gather", "--op"); }) ==
        "two.log:7: the all_gather test that starts here printed no result rows (it failed, or the log is cut off)");
  CHECK(calibrate::select_run(two, "all_reduce", "--op").rows.size() == 1);
  // Two tests of an older nccl-tests (each opens with "# nThread"): two runs, which a one-test reader refuses.
  CHECK(calibrate::parse_measured_runs(header + row1 + header + row1, "twice.log").size() == 2);
  CHECK(error_of([&] { calibrate::parse_measured_run(header + row1 + header + row1, "twice.log"); }) ==
        "twice.log:6: this file holds results of 2 tests (an unnamed test at line 1, an unnamed test at line 6); one "
        "is expected here");
  // A second table header after rows, with no line that opens a test before it, is no second test.
  const std::string table = header.substr(header.find("#\n"));
  CHECK(error_of([&] { calibrate::parse_measured_runs(header + row1 + table + row1, "twice.log"); }) ==
        "twice.log:7:1: a second result table starts here (the first has 1 rows) without a line that opens a new test "
        "before it (\"# nccl-tests version\", \"# Collective test starting\" or \"# nThread\"): the log is garbled");
  // Without a header, a row's field count must be one of the two layouts.
  CHECK(error_of([&] {
          calibrate::parse_measured_run("8 2 float sum -1 37.33\n", "frag.log");
        }).rfind("frag.log:1:1: a result row needs 13 fields", 0) == 0);

  // The CSV layout: a cut-off row, a wrong header, a header without rows, a bad value.
  const std::string csv_header =
      "# source: test\nsize_bytes,count,type,time_us_oop,algbw_oop,busbw_oop,time_us_ip,algbw_ip,busbw_ip\n";
  CHECK(error_of([&] {
          calibrate::parse_measured_run(csv_header + "8,2,float,37.33,0.00,0.00,37.79,0.00,0.00\n16,4,flo", "cut.csv");
        }) == "cut.csv:4:9: the row ends after 3 of its 9 fields: the file is cut off");
  CHECK(error_of([&] { calibrate::parse_measured_run("size_bytes,time_us\n8,37.33\n", "h.csv"); }) ==
        "h.csv:1:1: CSV header must be \"size_bytes,count,type,time_us_oop,algbw_oop,busbw_oop,time_us_ip,algbw_ip,"
        "busbw_ip\"");
  CHECK(error_of([&] { calibrate::parse_measured_run(csv_header, "n.csv"); }) ==
        "n.csv:2:1: the CSV has a header but no rows: the file is cut off");
  CHECK(error_of([&] {
          calibrate::parse_measured_run(csv_header + "8,2,float,fast,0.00,0.00,37.79,0.00,0.00\n", "v.csv");
        }) == "v.csv:3:11: time_us_oop: \"fast\" is not a number or N/A");
  CHECK(error_of([&] {
          calibrate::read_measured_run("/nonexistent/x.log");
        }).rfind("/nonexistent/x.log: cannot read file:", 0) == 0);

  // Values no measurement has: a time above 1e12 us (calibrate fit's bound; it would give an error of 1e30 %
  // in --compare), a data type nccl-tests does not print (the count check needs its size).
  CHECK(error_of([&] {
          calibrate::parse_measured_run(csv_header + "8,2,float,1e30,0.00,0.00,37.79,0.00,0.00\n", "t.csv");
        }) == "t.csv:3:11: time_us_oop: \"1e30\" us is more than 1e12 us (11.6 days): no measurement");
  CHECK(error_of([&] {
          calibrate::parse_measured_run(csv_header + "8,2,bogus,37.33,0.00,0.00,37.79,0.00,0.00\n", "y.csv");
        }) ==
        "y.csv:3:5: type: \"bogus\" is not a data type nccl-tests prints (int8, uint8, int32, uint32, int64, "
        "uint64, half, float, double, bfloat16, f8e4m3, f8e5m2)");
  CHECK(error_of([&] { calibrate::parse_measured_run(header + bad_type_row(), "y.log"); }) ==
        "y.log:5:32: type: \"bogus\" is not a data type nccl-tests prints (int8, uint8, int32, uint32, int64, "
        "uint64, half, float, double, bfloat16, f8e4m3, f8e5m2)");
  // A row inside the table whose size is garbled ("abc" at column 10) is an error, not a line to skip: before,
  // the row vanished and the run read with one size fewer. NCCL's INFO lines inside a table are still skipped.
  const std::string garbled =
      "         abc             4     float     sum      -1    34.96    0.00    0.00       0    35.10    0.00    0.00  "
      "     0\n";
  CHECK(error_of([&] { calibrate::parse_measured_run(header + row1 + garbled, "g.log"); }) ==
        "g.log:6:10: size: \"abc\" is not a whole number of bytes");
  const std::string negative_size =
      "          -1             4     float     sum      -1    34.96    0.00    0.00       0    35.10    0.00    0.00  "
      "     0\n";
  CHECK(error_of([&] { calibrate::parse_measured_run(header + row1 + negative_size, "g.log"); }) ==
        "g.log:6:11: size: \"-1\" is not a whole number of bytes");
  CHECK(calibrate::parse_measured_run(
            header + row1 + "node1:4242:4242 [0] NCCL INFO Channel 00/16 : 0 1 2 3 4 5 6 7\n" + row1, "info.log")
            .rows.size() == 2);
}

TEST_CASE("measured runs: a row whose count does not make its size is an error at the count") {
  // nccl-tests prints count = size / element size, of the whole buffer for all_reduce and of one rank's share for
  // all_gather: 8 float elements are 32 B; on 8 ranks a share of 1 float is 8 x 4 = 32 B.
  const std::string preamble =
      "# nThread 1 nGpus 8 minBytes 32 maxBytes 32 step: 2(factor) warmup iters: 5 iters: 20\n"
      "#  Rank  0 Group  0 Pid 1 on host device  0 [0x01] NVIDIA H100\n"
      "#  Rank  1 Group  0 Pid 1 on host device  1 [0x02] NVIDIA H100\n"
      "#  Rank  2 Group  0 Pid 1 on host device  2 [0x03] NVIDIA H100\n"
      "#  Rank  3 Group  0 Pid 1 on host device  3 [0x04] NVIDIA H100\n"
      "#  Rank  4 Group  0 Pid 1 on host device  4 [0x05] NVIDIA H100\n"
      "#  Rank  5 Group  0 Pid 1 on host device  5 [0x06] NVIDIA H100\n"
      "#  Rank  6 Group  0 Pid 1 on host device  6 [0x07] NVIDIA H100\n"
      "#  Rank  7 Group  0 Pid 1 on host device  7 [0x08] NVIDIA H100\n";
  auto log = [&](const std::string& test, const std::string& count, const std::string& redop) {
    return "# Collective test starting: " + test + "\n" + preamble + "          32  " + count + "     float  " + redop +
           "      -1    37.33    0.00    0.00       0    37.79    0.00    0.00       0\n";
  };
  // Consistent rows read: all_reduce 8 elements, all_gather 1 per rank.
  CHECK(calibrate::parse_measured_run(log("all_reduce_perf", "           8", "   sum"), "ar.log").rows.size() == 1);
  const calibrate::MeasuredRun ag =
      calibrate::parse_measured_run(log("all_gather_perf", "           1", "  none"), "ag.log");
  CHECK(ag.gpus == 8u);
  CHECK(ag.rows.front().count == 1);
  // all_reduce with a per-rank count: line 11 (1 + 9 preamble lines + the row), the count at column 26 (14 + 12
  // characters before it).
  CHECK(error_of([&] { calibrate::parse_measured_run(log("all_reduce_perf", "           1", "   sum"), "ar.log"); }) ==
        "ar.log:11:26: count: 1 float elements (4 B each) are 4 B, not the row's size 32 B (all_reduce's count is "
        "the whole buffer's; nccl-tests prints count = size / element size): the row is mis-transcribed or its "
        "columns are shifted");
  // all_gather with the whole buffer's count: 8 ranks x 8 x 4 B = 256 B, not 32.
  CHECK(error_of([&] { calibrate::parse_measured_run(log("all_gather_perf", "           8", "  none"), "ag.log"); }) ==
        "ag.log:11:26: count: 8 float elements (4 B each) are 32 B, not the row's size 32 B (all_gather's count is "
        "one rank's share: 8 ranks make 256 B; nccl-tests prints count = size / element size): the row is "
        "mis-transcribed or its columns are shifted");
  // The CSV layout: a row of the 80-GPU all_reduce file with count + 1 (its count at column 10).
  const std::string csv =
      "# GPUs=80 nodes=10\n# collective=all_reduce\n"
      "size_bytes,count,type,time_us_oop,algbw_oop,busbw_oop,time_us_ip,algbw_ip,busbw_ip\n"
      "67108864,8388609,double,939.84,71.40,141.02,962.96,69.69,137.64\n";
  CHECK(error_of([&] { calibrate::parse_measured_run(csv, "x.csv"); }) ==
        "x.csv:4:10: count: 8388609 double elements (8 B each) are 67108872 B, not the row's size 67108864 B "
        "(all_reduce's count is the whole buffer's; nccl-tests prints count = size / element size): the row is "
        "mis-transcribed or its columns are shifted");
  // A count whose bytes overflow 64 bits (2^61 doubles: 2^64 B, which wraps to 0) is the same error, not a division
  // by zero.
  CHECK(error_of([&] {
          calibrate::parse_measured_run(csv.substr(0, csv.rfind("67108864")) +
                                            "67108864,2305843009213693952,double,939.84,71.40,141.02,962.96,69.69,"
                                            "137.64\n",
                                        "z.csv");
        })
            .rfind("z.csv:4:10: count: 2305843009213693952 double elements (8 B each) are more than "
                   "18446744073709551615 B, not the row's size 67108864 B",
                   0) == 0);
  // A type nccl-tests does not print is refused (its element size is unknown, so the count could not be checked).
  CHECK(error_of([&] {
          calibrate::parse_measured_run(csv.substr(0, csv.rfind("67108864")) +
                                            "67108864,8388609,mytype,939.84,71.40,141.02,962.96,69.69,137.64\n",
                                        "y.csv");
        }).rfind("y.csv:4:18: type: \"mytype\" is not a data type nccl-tests prints", 0) == 0);
}

TEST_CASE("logs of several tests: a script's echo lines, a failed test, srun labels and stray lines") {
  // An older nccl-tests (each test opens with "# nThread"), run by a `set -x` script that echoes each command
  // ("+ ./build/all_reduce_perf ...") before it: all_reduce (lines 1-5), the script's exit code "0" (line 6), then
  // alltoall, which failed after its preamble (lines 7-9), then all_gather (lines 10-14).
  const std::string pre = "# nThread 1 nGpus 8 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20\n";
  const std::string table =
      "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  "
      "#wrong\n";
  const std::string row =
      "           8             2     float     sum      -1    37.33    0.00    0.00       0    37.79    0.00    0.00  "
      "     0\n";
  const std::string text = "+ ./build/all_reduce_perf -b 8 -e 8 -g 8\n" + pre + table + row +  // 1-4
                           "# Avg bus bandwidth    : 0 \n"                                     // 5
                           "0\n"                                                               // 6: exit code
                           "+ ./build/alltoall_perf -b 8 -e 8 -g 8\n" +                        // 7
                           pre +                                                               // 8
                           "NCCL WARN Cuda failure 'out of memory'\n"                          // 9
                           "+ ./build/all_gather_perf -b 8 -e 8 -g 8\n" +                      // 10
                           pre +
                           table + row + "# Avg bus bandwidth    : 0 \n";  // 11-14
  const std::vector<calibrate::MeasuredRun> runs = calibrate::parse_measured_runs(text, "script.log");
  REQUIRE(runs.size() == 3);
  // The exit code after the first footer is no row; each test begins at the script's echo of its command (the
  // failed test's own error line, after its last `#` line, goes to the next test, which begins at its echo).
  CHECK(runs[0].op == std::optional<std::string>("all_reduce"));
  CHECK(runs[0].rows.size() == 1);
  CHECK(runs[0].complete);
  CHECK(runs[1].op == std::optional<std::string>("alltoall"));
  CHECK(runs[1].rows.empty());
  CHECK(runs[1].test_line == 7);
  CHECK(runs[2].op == std::optional<std::string>("all_gather"));
  CHECK(runs[2].test_line == 10);
  CHECK(runs[2].rows.size() == 1);
  CHECK(runs[2].rows[0].line == 13);
  CHECK(calibrate::tests_text(runs) == "all_reduce at line 1, alltoall at line 7, all_gather at line 10");
  CHECK(calibrate::select_run(runs, "allgather", "--op").test_line == 10);
  CHECK(error_of([&] { calibrate::select_run(runs, "alltoall", "--op"); }) ==
        "script.log:7: the alltoall test that starts here printed no result rows (it failed, or the log is cut off)");
  // `srun --label` pads the task number to the width of the largest (" 3: " with 10 or more tasks) and prefixes a
  // heterogeneous job's component ("P0  3: "): the same rows.
  for (const std::string label : {" 3: ", "P0  3: ", "12: "}) {
    CAPTURE(label);
    std::string labelled;
    for (std::size_t b = 0, e; b < text.size(); b = e + 1) {
      e = text.find('\n', b);
      labelled += label + text.substr(b, e - b) + "\n";
    }
    const std::vector<calibrate::MeasuredRun> l = calibrate::parse_measured_runs(labelled, "srun.log");
    REQUIRE(l.size() == 3);
    CHECK(l[2].rows.size() == 1);
    CHECK(l[2].rows[0].time_us_oop == 37.33);
  }
}
