// Measured collective runs: nccl-tests text logs and the validation CSV layout, read into plain value
// types for `clustersim collective --compare` and, later, `clustersim calibrate import-nccl-tests`.
//
// Two inputs, detected from the content (not the file name):
//  * nccl-tests output exactly as printed (NVIDIA/nccl-tests src/util.cu; ../shared/reference/nccl.md §2.1):
//    `#` preamble lines (`# nccl-tests version … nccl-library=22602`, `# nThread 1 nGpus 8 minBytes …`,
//    `# Using devices` and one `#  Rank …` line per rank), a three-line `#` table header, one row per size
//      size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
//    (out-of-place, then in-place; `N/A` where a value is not reported), and a footer
//    (`# Avg bus bandwidth : X`, `# Collective test concluded: all_reduce_perf`). Older nccl-tests builds
//    print no `root` column and an `error` column (`0e+00`) in place of `#wrong`; the header line, when
//    present, names the columns, otherwise the field count (13 or 12) tells the two apart. Lines that are
//    not part of the table (NCCL INFO lines, launcher noise) are skipped; `[1,0]<stdout>:` prefixes that
//    `mpirun --tag-output` adds are removed.
//  * The CSV layout of validation/nccl/: `#` lines (source, hardware, `GPUs=8 nodes=1`, NCCL version,
//    `collective=all_reduce`), then the header
//    `size_bytes,count,type,time_us_oop,algbw_oop,busbw_oop,time_us_ip,algbw_ip,busbw_ip` and one row per size.
//
// Units are nccl-tests': size in bytes (nccl-tests' "size": the total buffer for AllGather/ReduceScatter/
// AlltoAll, whose "count" is per rank), time in microseconds (the mean over `iters` back-to-back calls,
// §2.3), algbw and busbw in GB/s = 1e9 B/s. Values printed as `N/A` (or empty in the CSV) are NaN.
//
// Input that is not one of the two layouts, or is cut off mid-row, throws InputError(file, line, column, "",
// what is wrong); nothing here asserts on input.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace clustersim::calibrate {

// The largest collective size clustersim reads or sweeps, in bytes: 2^50 B (1 PiB), more than any GPU holds. Logs,
// CSVs and raw files refuse larger rows at their line; `collective --sizes` refuses larger sizes.
inline constexpr std::uint64_t kMaxCollectiveBytes = std::uint64_t{1} << 50;

struct MeasuredRow {
  int line = 0;                  // where the row is in its file (1-based)
  std::uint64_t size_bytes = 0;  // nccl-tests "size" (bytes)
  std::uint64_t count = 0;       // elements, as printed (per rank for AllGather/ReduceScatter/AlltoAll)
  int count_column = 0;          // where the count is on its line (1-based; 0 where unknown)
  std::string type;              // "float", "double", "bfloat16", ...
  std::string redop;             // "sum", "none", ...; empty when the input does not say (CSV layout)
  std::int64_t root = -1;        // -1 where none, or where the input has no root column
  double time_us_oop = 0;        // out-of-place time, µs
  double algbw_oop = 0;          // GB/s
  double busbw_oop = 0;          // GB/s
  double time_us_ip = 0;         // in-place; NaN when N/A
  double algbw_ip = 0;
  double busbw_ip = 0;
  // nccl-tests' "#wrong" columns (-c 1 checks every result): elements that came out wrong, out-of-place and
  // in-place; NaN where not checked (N/A, the CSV layout, older logs whose "error" column is a max deviation).
  // A row with wrong elements measured a broken collective: its times are no measurement of the hardware.
  double wrong_oop = std::numeric_limits<double>::quiet_NaN();
  double wrong_ip = std::numeric_limits<double>::quiet_NaN();
};

// True when nccl-tests found wrong elements in that half of the row.
inline bool has_wrong(const MeasuredRow& row, bool in_place) {
  return (in_place ? row.wrong_ip : row.wrong_oop) > 0;
}

enum class MeasuredFormat { kNcclTestsLog, kValidationCsv };

struct MeasuredRun {
  std::string source_file;
  MeasuredFormat format = MeasuredFormat::kNcclTestsLog;
  // The collective as nccl-tests names its test without "_perf": "all_reduce", "all_gather",
  // "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv", ... (the names
  // workloads::parse_collective_op accepts). Empty when the input does not say.
  std::optional<std::string> op;
  std::vector<std::string> header_lines;          // every `#` line, verbatim, in order
  std::optional<std::uint32_t> gpus;              // ranks in the communicator, where stated
  std::optional<std::uint32_t> nodes;             // distinct hosts, where stated
  std::optional<std::uint32_t> gpus_per_process;  // nccl-tests nThread × nGpus
  std::optional<std::string> nccl_version;        // "2.26.2"
  std::vector<MeasuredRow> rows;                  // in file order
  // nccl-tests ends each test with "# Avg bus bandwidth : …" after the rows; a text log without it may have been
  // cut off between two rows (a CSV has no such line: always true).
  bool complete = true;
  // nccl-tests' closing "# Out of bounds values : N FAILED" (N wrong elements over the whole run), else 0.
  std::uint64_t out_of_bounds = 0;
  // In a log of several tests (a script running all_reduce_perf, all_gather_perf, … into one file): the line where
  // this test begins (1-based). 0 when the file holds one test.
  int test_line = 0;
  // With NCCL_DEBUG=INFO, NCCL 2.22 and later log "Connected all rings" (trees, NVLS, CollNet, PAT) when an
  // algorithm first runs: which algorithm the run first used at which size. size_bytes 0: before the first row
  // (nccl-tests' warm-up runs the largest and the smallest size first). In file order.
  struct Connected {
    std::uint64_t size_bytes = 0;
    std::string algorithm;  // "ring", "tree", "nvls", "collnet", "pat"
    int line = 0;
  };
  std::vector<Connected> connected;
};

// "" when the log names no connection; else a `#` line saying which algorithm the run first used at which size.
std::string connected_note(const MeasuredRun& run);

// The file's name, and in a log of several tests which one: "x.log (its all_gather test, from line 40)".
std::string run_label(const MeasuredRun& run);

// "" for a complete run; else a `#` line saying that the log may be cut off after its last row.
std::string cut_off_note(const MeasuredRun& run);

// "" for a run with rows; else a `#` line saying that the test (one of a log of several) printed none, and `what`
// happens to it ("not imported").
std::string no_rows_note(const MeasuredRun& run, const std::string& what);

// "" when nccl-tests found no wrong results; else `#` lines naming the rows (sizes and lines) whose results were
// wrong, after `what` says what happens to them ("not imported").
std::string wrong_rows_note(const MeasuredRun& run, const std::string& what);

// Parses `text` (read from `file`, which is used only in errors and as source_file): every test in it, in file
// order. A log may hold several tests one after the other, as a script that runs all_reduce_perf, all_gather_perf,
// … into one file writes them; each begins at nccl-tests' "# nccl-tests version", "# Collective test starting" or
// "# nThread" line after the previous test's rows (the lines after those rows and their footer, such as the
// script's echo of the next command, are the next test's). Facts a test does not restate (the NCCL version, the
// ranks) are the previous test's. A test of such a log that printed no rows (it failed, or the log is cut off) is a
// run without rows (no_rows_note). A CSV holds one run.
std::vector<MeasuredRun> parse_measured_runs(std::string_view text, const std::string& file);

// The same for a file that must hold one test (InputError naming the tests when it holds several).
MeasuredRun parse_measured_run(std::string_view text, const std::string& file);

// Reads and parses a file (InputError when it cannot be read).
std::vector<MeasuredRun> read_measured_runs(const std::string& path);
MeasuredRun read_measured_run(const std::string& path);

// "all_reduce at line 2, all_gather at line 40": the tests of one file, for messages.
std::string tests_text(const std::vector<MeasuredRun>& runs);

// The test of `runs` (one file's, as parse_measured_runs returns them) that measured `op` (nccl-tests' name without
// "_perf": "all_gather"): the only run of a one-test file whatever it measured (the caller checks), else the one
// test of that collective. InputError naming `option` when none is, or naming the file when two are.
const MeasuredRun& select_run(const std::vector<MeasuredRun>& runs, const std::string& op, const std::string& option);

// NCCL's version code as nccl-tests prints it (`nccl-library=22602`) → "2.26.2". Codes since 2.9 are
// major·10000 + minor·100 + patch; older ones major·1000 + minor·100 + patch (NCCL_VERSION_CODE, nccl.h).
std::string nccl_version_from_code(std::uint64_t code);

}  // namespace clustersim::calibrate
