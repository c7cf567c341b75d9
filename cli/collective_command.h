// `clustersim collective [SCENARIO] --op OP [--ranks 0-7] [--sizes 8:8G] [--factor 2] [--algo A] [--proto P]
//                        [--csv FILE] [--compare FILE] [--json FILE]`
//
// nccl-tests, simulated: one collective on its own over a sweep of sizes (-b/-e/-f as nccl-tests takes them),
// printed as nccl-tests prints its out-of-place half (../shared/reference/nccl.md §2.1, nccl-tests src/util.cu),
// plus the algorithm and protocol NCCL chose (workloads/nccl_model.h; run at the scenario's fidelity by
// workloads::run_collective). Every column follows nccl-tests' conventions, so a prediction and a measurement
// can be laid side by side:
//   size   = max(send, recv) bytes of one rank: count·4 for AllReduce/Broadcast/Reduce/SendRecv, the total
//            count·4·n for AllGather/ReduceScatter/AlltoAll, whose per-rank count nccl-tests rounds down to a
//            multiple of 16 B ((size/4/n) & ~3 elements of float), so small requested sizes print as 0;
//   count  = elements of float per rank;  redop = sum for reductions, none otherwise;  root = 0 for
//            Broadcast/Reduce, -1 otherwise;
//   algbw  = size / time / 1e9 (GB/s, decimal);  busbw = algbw · busbw_factor(op, n) (nccl-tests PERFORMANCE.md);
//   time, algbw, busbw printed with nccl-tests' getFloatStr: %.2f, else %.1f, %.0f, %.1e to fit widths 7 and 6.
// A size of 0 is not launched by NCCL; it is printed with time 0 and no algorithm.
//
// --compare FILE reads a measured run (an nccl-tests log or the validation CSV layout, calibrate/nccl_tests_log.h),
// predicts each measured size (size-0 rows skipped) and reports the error: busbw error % = (pred − meas)/meas·100
// against the measured out-of-place busbw, time ratio = pred/meas; summaries are the mean and max |busbw error|
// for sizes ≥ 1 MiB and ≥ 64 MiB and the max of max(pred/meas, meas/pred) for sizes < 64 KiB.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "calibrate/nccl_tests_log.h"
#include "workloads/nccl_model.h"
#include "workloads/scenario.h"

namespace clustersim::cli {

// One row of the simulated nccl-tests table.
struct CollectivePoint {
  std::uint64_t size_bytes = 0;  // nccl-tests "size"
  std::uint64_t count = 0;       // float elements per rank
  std::string redop;             // "sum" or "none"
  std::int64_t root = -1;        // 0 for Broadcast/Reduce, else -1
  double time_us = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  std::string algorithm;  // NCCL's choice ("ring", …); "-" for size 0
  std::string protocol;   // "LL", "LL128", "Simple"; "-" for size 0
};

// One measured size against its prediction.
struct ComparisonRow {
  std::uint64_t size_bytes = 0;
  double measured_time_us = 0;  // out-of-place
  double predicted_time_us = 0;
  double measured_busbw_GBps = 0;  // out-of-place, as the file gives it
  double predicted_busbw_GBps = 0;
  double busbw_error_pct = 0;  // (pred − meas)/meas·100; NaN when the measured busbw is 0 or missing
  double time_ratio = 0;       // pred/meas
  std::string algorithm;
  std::string protocol;
};

struct ComparisonSummary {
  // Over rows with a finite busbw error; nullopt when no such row.
  std::optional<double> busbw_error_mean_pct_ge_1MiB, busbw_error_max_pct_ge_1MiB;
  std::optional<double> busbw_error_mean_pct_ge_64MiB, busbw_error_max_pct_ge_64MiB;
  std::optional<double> small_time_ratio_max;  // max(pred/meas, meas/pred) over sizes < 64 KiB
  std::size_t rows_ge_1MiB = 0, rows_ge_64MiB = 0, rows_small = 0;
};

struct Comparison {
  std::vector<ComparisonRow> rows;
  ComparisonSummary summary;
  std::string profile_nccl_version;  // the release of the profile's NCCL tuning constants; empty = not stated
  std::string scenario_gpu;          // the scenario's GPU type ("A100-SXM4-80GB"), to set beside the measured one
  std::vector<std::uint64_t> untimed_sizes;  // measured sizes without an out-of-place time (N/A or 0): left out
};

// nccl-tests' sizes for -b min -e max -f factor: min, min·factor, … while ≤ max.
std::vector<std::uint64_t> sweep_sizes(std::uint64_t min_bytes, std::uint64_t max_bytes, std::uint64_t factor);

// The row nccl-tests prints for a requested size (rounded as nccl-tests rounds it), with the prediction.
CollectivePoint predict_point(const workloads::Scenario& scenario, workloads::CollectiveOp op,
                              const std::vector<std::uint32_t>& gpus, std::uint64_t requested_bytes);

// Predicts each measured size. Throws InputError when the file names another collective, GPU count or node
// count than `op` and `gpus` on this scenario.
Comparison compare_collective(const workloads::Scenario& scenario, workloads::CollectiveOp op,
                              const std::vector<std::uint32_t>& gpus, const calibrate::MeasuredRun& measured);

// The comparison as `--compare` prints it: the measured run's facts, one row per size, the summary lines.
std::string comparison_text(const Comparison& comparison, const calibrate::MeasuredRun& measured);

// nccl-tests' getFloatStr: `value` in `width` characters with as many of 2, 1, 0 decimals as fit, else %.1e
// (width ≥ 7) or %.0e.
std::string nccl_tests_float(double value, int width);

// Runs the command with its arguments (after "collective"). Returns the exit status; throws InputError for bad
// input. Output files are written, each atomically, only after every prediction succeeded.
int collective_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace clustersim::cli
