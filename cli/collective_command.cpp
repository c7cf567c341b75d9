#include "cli/collective_command.h"

#include <algorithm>
#include <array>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <ostream>
#include <set>
#include <tuple>

#include "calibrate/fit.h"
#include "calibrate/nccl_tests_log.h"
#include "cli/command_line.h"
#include "cli/report.h"
#include "sim/input_error.h"
#include "sim/trace.h"
#include "topology/torus.h"
#include "workloads/collective_engine.h"

namespace po = boost::program_options;

namespace clustersim::cli {
namespace {

using workloads::Algorithm;
using workloads::CollectiveOp;
using workloads::Protocol;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::uint64_t kFloatBytes = 4;  // nccl-tests' default type, float
constexpr std::uint64_t kMiB = 1048576;
constexpr std::uint64_t kSmallLimit = 65536;  // "small message": < 64 KiB
constexpr std::uint64_t kLargeLimit = 64 * kMiB;

[[noreturn]] void fail_option(const std::string& option, const std::string& message) {
  throw InputError("command line", 0, 0, option, message);
}

bool is_reduction(CollectiveOp op) {
  return op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduceScatter || op == CollectiveOp::kReduce;
}
bool has_root(CollectiveOp op) {
  return op == CollectiveOp::kBroadcast || op == CollectiveOp::kReduce;
}
// Collectives whose nccl-tests "size" is the total over ranks and whose count is per rank.
bool size_is_total(CollectiveOp op) {
  return op == CollectiveOp::kAllGather || op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllToAll;
}

std::string names_of_ops() {
  std::string out;
  for (CollectiveOp op :
       {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather, CollectiveOp::kBroadcast,
        CollectiveOp::kReduce, CollectiveOp::kAllToAll, CollectiveOp::kSendRecv})
    out += std::string(out.empty() ? "" : ", ") + workloads::to_string(op);
  return out;
}

CollectiveOp parse_op_option(const std::string& text) {
  const auto op = workloads::parse_collective_op(text);
  if (!op)
    fail_option("--op", "\"" + text + "\" is not a collective; valid: " + names_of_ops() +
                            " (nccl-tests' names such as all_reduce also work)");
  return *op;
}

// "8", "64K", "8G": bytes with binary suffixes, as nccl-tests' -b/-e take them (1K = 1024).
std::uint64_t parse_size(const std::string& text, const std::string& whole) {
  const std::string bad =
      "\"" + whole + "\" is not MIN:MAX with sizes such as 8, 64K, 1M, 8G, 1T (binary: 1K = 1024 B)";
  if (text.empty()) fail_option("--sizes", bad);
  std::uint64_t value = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (value > (std::numeric_limits<std::uint64_t>::max() - 9) / 10)
      fail_option("--sizes", "\"" + whole + "\" is too large");
    value = value * 10 + static_cast<std::uint64_t>(text[i] - '0');
  }
  if (i == 0) fail_option("--sizes", bad);
  std::uint64_t unit = 1;
  if (i < text.size()) {
    switch (text[i]) {
      case 'K':
      case 'k':
        unit = 1ull << 10;
        break;
      case 'M':
      case 'm':
        unit = 1ull << 20;
        break;
      case 'G':
      case 'g':
        unit = 1ull << 30;
        break;
      case 'T':
      case 't':
        unit = 1ull << 40;
        break;
      default:
        fail_option("--sizes", bad);
    }
    ++i;
  }
  if (i != text.size()) fail_option("--sizes", bad);
  // 1 PiB: far beyond any GPU's memory, and below the sizes (2^59 B and more) whose times overflow the
  // simulator's clock.
  if (value > calibrate::kMaxCollectiveBytes / unit)
    fail_option("--sizes", "\"" + whole + "\" is too large: at most 1024T (2^50 bytes)");
  return value * unit;
}

std::string fidelity_name(workloads::Fidelity f) {
  return f == workloads::Fidelity::kFlow ? "FLOW" : "ANALYTICAL";
}

std::string padded(const std::string& s, int width) {  // right-aligned like printf's %*s
  return s.size() >= static_cast<std::size_t>(width) ? s
                                                     : std::string(static_cast<std::size_t>(width) - s.size(), ' ') + s;
}

std::string number_text(double v, const char* format) {
  return std::isfinite(v) ? fmt(format, v) : "n/a";
}

// "8 GPUs (0-7) on 1 node"
std::string communicator_text(const workloads::Scenario& scenario, const std::vector<std::uint32_t>& gpus) {
  std::set<std::uint32_t> nodes;
  for (std::uint32_t g : gpus) nodes.insert(scenario.cluster.node_of(g));
  return std::to_string(gpus.size()) + " GPUs (" + gpu_ranges_text(gpus) + ") on " + std::to_string(nodes.size()) +
         (nodes.size() == 1 ? " node" : " nodes");
}

std::string preamble(const workloads::Scenario& scenario, CollectiveOp op, const std::vector<std::uint32_t>& gpus) {
  std::string out = "# clustersim collective: " + std::string(workloads::to_string(op)) + " on " +
                    communicator_text(scenario, gpus) + "\n";
  out += "# scenario: " + scenario.name + (scenario.source_file.empty() ? "" : " (" + scenario.source_file + ")") +
         ", profile " + scenario.profile_ref + ", fidelity " + fidelity_name(scenario.fidelity) + "\n";
  out += std::string("# NCCL_ALGO ") +
         (scenario.nccl.algorithm ? workloads::to_string(*scenario.nccl.algorithm) : "(NCCL's choice)") +
         ", NCCL_PROTO " +
         (scenario.nccl.protocol ? workloads::to_string(*scenario.nccl.protocol) : "(NCCL's choice)") +
         "; type float, nccl-tests conventions (size in B, time in us, GB/s = 1e9 B/s)\n";
  return out;
}

// The predicted time of one collective of `size` bytes. Send/Recv runs nccl-tests' pattern, rank r to r+1
// (mod n) all at once, so its time is the slowest of those pairs; pairs in the same position of their nodes
// take the same route class and are timed once.
struct Prediction {
  double time_us = 0;
  std::string algorithm, protocol;
};
Prediction predict_time(const workloads::Scenario& scenario, CollectiveOp op, const std::vector<std::uint32_t>& gpus,
                        std::uint64_t size) {
  workloads::CollectiveRequest request;
  request.op = op;
  request.size = bytes(static_cast<double>(size));
  request.root = 0;
  if (op != CollectiveOp::kSendRecv) {
    request.gpus = gpus;
    const workloads::CollectiveRun run = workloads::run_collective(scenario, request);
    return Prediction{to_us(run.time), workloads::to_string(run.plan.algorithm),
                      workloads::to_string(run.plan.protocol)};
  }
  Prediction worst{-1, "", ""};
  // Pairs that take the same time are timed once: on a switched cluster the same local GPUs within a node or
  // across two; on a torus the same hops along each axis.
  std::set<std::array<std::uint32_t, 4>> timed;
  const std::uint32_t per_node = scenario.cluster.gpus_per_node;
  const bool torus = scenario.cluster.is_torus();
  for (std::size_t r = 0; r < gpus.size(); ++r) {
    const std::uint32_t src = gpus[r], dst = gpus[(r + 1) % gpus.size()];
    std::array<std::uint32_t, 4> key{src % per_node, dst % per_node,
                                     scenario.cluster.node_of(src) == scenario.cluster.node_of(dst) ? 1u : 0u, 0};
    if (torus) {
      const auto& dims = scenario.cluster.node.torus;
      const topology::TorusCoords a = topology::torus_coords(dims, src), b = topology::torus_coords(dims, dst);
      for (std::size_t x = 0; x < 3; ++x)
        key[x] = topology::axis_distance(dims[x], scenario.cluster.node.torus_wraps, a[x], b[x]);
      key[3] = 1;
    }
    if (!timed.insert(key).second) continue;
    request.gpus = {src, dst};
    const workloads::CollectiveRun run = workloads::run_collective(scenario, request);
    if (to_us(run.time) > worst.time_us)
      worst = Prediction{to_us(run.time), workloads::to_string(run.plan.algorithm),
                         workloads::to_string(run.plan.protocol)};
  }
  return worst;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

std::string json_number(double v) {
  return sim::format_number(v);
}  // NaN and inf → null
std::string json_optional(const std::optional<double>& v) {
  return v ? sim::format_number(*v) : "null";
}

// The nccl-tests table of predictions (out-of-place half, plus NCCL's choice).
std::string table_text(const std::vector<CollectivePoint>& points) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "# %10s  %12s  %8s  %6s  %6s           out-of-place           NCCL's choice\n", "",
                "", "", "", "");
  out += line;
  std::snprintf(line, sizeof line, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %12s  %8s\n", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "algorithm", "protocol");
  out += line;
  std::snprintf(line, sizeof line, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s\n", "(B)", "(elements)", "", "", "",
                "(us)", "(GB/s)", "(GB/s)");
  out += line;
  for (const CollectivePoint& p : points) {
    std::snprintf(line, sizeof line, "%12llu  %12llu  %8s  %6s  %6lld  %7s  %6s  %6s  %12s  %8s\n",
                  static_cast<unsigned long long>(p.size_bytes), static_cast<unsigned long long>(p.count), "float",
                  p.redop.c_str(), static_cast<long long>(p.root), nccl_tests_float(p.time_us, 7).c_str(),
                  nccl_tests_float(p.algbw_GBps, 6).c_str(), nccl_tests_float(p.busbw_GBps, 6).c_str(),
                  p.algorithm.c_str(), p.protocol.c_str());
    out += line;
  }
  std::vector<double> busbw;
  for (const CollectivePoint& p : points) busbw.push_back(p.busbw_GBps);
  std::snprintf(line, sizeof line, "# %-20s : %g\n", "Avg bus bandwidth", busbw.empty() ? 0.0 : mean_of(busbw));
  out += line;
  return out;
}

std::string points_csv(const std::vector<CollectivePoint>& points) {
  std::string out = "size_bytes,count,type,redop,root,time_us,algbw_GBps,busbw_GBps,algorithm,protocol\n";
  for (const CollectivePoint& p : points)
    out += std::to_string(p.size_bytes) + "," + std::to_string(p.count) + ",float," + p.redop + "," +
           std::to_string(p.root) + "," + sim::format_number(p.time_us) + "," + sim::format_number(p.algbw_GBps) + "," +
           sim::format_number(p.busbw_GBps) + "," + p.algorithm + "," + p.protocol + "\n";
  return out;
}

std::string points_json(const workloads::Scenario& scenario, CollectiveOp op, const std::vector<std::uint32_t>& gpus,
                        const std::vector<CollectivePoint>& points) {
  std::string out = "{\n";
  out += "  \"scenario\": \"" + sim::json_escape(scenario.name) + "\",\n";
  out += "  \"op\": \"" + std::string(workloads::to_string(op)) + "\",\n";
  out += "  \"gpus\": " + std::to_string(gpus.size()) + ",\n";
  out += "  \"ranks\": \"" + gpu_ranges_text(gpus) + "\",\n";
  out += "  \"fidelity\": \"" + fidelity_name(scenario.fidelity) + "\",\n";
  out += "  \"rows\": [";
  std::vector<double> busbw;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const CollectivePoint& p = points[i];
    busbw.push_back(p.busbw_GBps);
    out += std::string(i ? "," : "") + "\n    {\"size_bytes\": " + std::to_string(p.size_bytes) +
           ", \"count\": " + std::to_string(p.count) + ", \"type\": \"float\", \"redop\": \"" + p.redop +
           "\", \"root\": " + std::to_string(p.root) + ", \"time_us\": " + json_number(p.time_us) +
           ", \"algbw_GBps\": " + json_number(p.algbw_GBps) + ", \"busbw_GBps\": " + json_number(p.busbw_GBps) +
           ", \"algorithm\": \"" + p.algorithm + "\", \"protocol\": \"" + p.protocol + "\"}";
  }
  out += points.empty() ? "],\n" : "\n  ],\n";
  out += "  \"avg_busbw_GBps\": " + json_number(busbw.empty() ? 0.0 : mean_of(busbw)) + "\n}\n";
  return out;
}

std::string comparison_csv(const Comparison& c) {
  std::string out =
      "size_bytes,measured_time_us,predicted_time_us,measured_busbw_GBps,predicted_busbw_GBps,busbw_error_pct,"
      "time_ratio,algorithm,protocol\n";
  auto num = [](double v) { return std::isfinite(v) ? sim::format_number(v) : std::string(); };
  for (const ComparisonRow& r : c.rows)
    out += std::to_string(r.size_bytes) + "," + num(r.measured_time_us) + "," + num(r.predicted_time_us) + "," +
           num(r.measured_busbw_GBps) + "," + num(r.predicted_busbw_GBps) + "," + num(r.busbw_error_pct) + "," +
           num(r.time_ratio) + "," + r.algorithm + "," + r.protocol + "\n";
  return out;
}

std::string comparison_json(const workloads::Scenario& scenario, CollectiveOp op,
                            const std::vector<std::uint32_t>& gpus, const calibrate::MeasuredRun& measured,
                            const Comparison& c) {
  std::string out = "{\n";
  out += "  \"scenario\": \"" + sim::json_escape(scenario.name) + "\",\n";
  out += "  \"op\": \"" + std::string(workloads::to_string(op)) + "\",\n";
  out += "  \"gpus\": " + std::to_string(gpus.size()) + ",\n";
  out += "  \"ranks\": \"" + gpu_ranges_text(gpus) + "\",\n";
  out += "  \"fidelity\": \"" + fidelity_name(scenario.fidelity) + "\",\n";
  out += "  \"measured_file\": \"" + sim::json_escape(measured.source_file) + "\",\n";
  // In a log of several tests, the line where the compared test begins (0 when the file holds one).
  out += "  \"measured_test_line\": " + std::to_string(measured.test_line) + ",\n";
  // The NCCL releases of the run and of the profile's tuning constants ("" where not stated).
  out += "  \"measured_nccl_version\": \"" + sim::json_escape(measured.nccl_version.value_or("")) + "\",\n";
  out += "  \"profile_nccl_version\": \"" + sim::json_escape(c.profile_nccl_version) + "\",\n";
  out += "  \"rows\": [";
  for (std::size_t i = 0; i < c.rows.size(); ++i) {
    const ComparisonRow& r = c.rows[i];
    out += std::string(i ? "," : "") + "\n    {\"size_bytes\": " + std::to_string(r.size_bytes) +
           ", \"measured_time_us\": " + json_number(r.measured_time_us) +
           ", \"predicted_time_us\": " + json_number(r.predicted_time_us) +
           ", \"measured_busbw_GBps\": " + json_number(r.measured_busbw_GBps) +
           ", \"predicted_busbw_GBps\": " + json_number(r.predicted_busbw_GBps) +
           ", \"busbw_error_pct\": " + json_number(r.busbw_error_pct) +
           ", \"time_ratio\": " + json_number(r.time_ratio) + ", \"algorithm\": \"" + r.algorithm +
           "\", \"protocol\": \"" + r.protocol + "\"}";
  }
  out += c.rows.empty() ? "],\n" : "\n  ],\n";
  const ComparisonSummary& s = c.summary;
  out += "  \"summary\": {\"busbw_error_mean_pct_ge_1MiB\": " + json_optional(s.busbw_error_mean_pct_ge_1MiB) +
         ", \"busbw_error_max_pct_ge_1MiB\": " + json_optional(s.busbw_error_max_pct_ge_1MiB) +
         ", \"busbw_error_mean_pct_ge_64MiB\": " + json_optional(s.busbw_error_mean_pct_ge_64MiB) +
         ", \"busbw_error_max_pct_ge_64MiB\": " + json_optional(s.busbw_error_max_pct_ge_64MiB) +
         ", \"small_time_ratio_max\": " + json_optional(s.small_time_ratio_max) + "}\n}\n";
  return out;
}

}  // namespace

std::string comparison_text(const Comparison& c, const calibrate::MeasuredRun& measured) {
  std::string out = "# measured: " + calibrate::run_label(measured);
  if (measured.nccl_version) out += ", NCCL " + *measured.nccl_version;
  if (measured.gpus) out += ", " + std::to_string(*measured.gpus) + " GPUs";
  if (measured.nodes) out += " on " + std::to_string(*measured.nodes) + (*measured.nodes == 1 ? " node" : " nodes");
  out += "\n" + calibrate::cut_off_note(measured) +
         calibrate::wrong_rows_note(measured, "left out of the comparison where the out-of-place half was wrong") +
         calibrate::connected_note(measured);
  // Releases differ in their tuning (nccl.md 1.5: the NVLS model was rewritten twice in two years), so the
  // algorithm and protocol the run used may not be the ones the profile's constants choose.
  if (!c.profile_nccl_version.empty() && (!measured.nccl_version || *measured.nccl_version != c.profile_nccl_version))
    out += (measured.nccl_version ? "# the run used NCCL " + *measured.nccl_version
                                  : std::string("# the file does not say which NCCL the run used")) +
           ", the profile's tuning constants are NCCL " + c.profile_nccl_version +
           "'s: where the releases tune\n# differently, the run may have used another algorithm or protocol than "
           "the one shown\n";
  // A log of another chip predicted with this scenario's: allowed (a what-if across hardware), and said.
  if (const std::string device = calibrate::gpu_name_from_headers(measured.header_lines);
      !device.empty() && !c.scenario_gpu.empty() && !calibrate::same_chip(device, c.scenario_gpu))
    out +=
        "# warning: the run measured " + device + " GPUs, the scenario has " + c.scenario_gpu + " (other hardware)\n";
  if (!c.untimed_sizes.empty()) {
    out += "# note: " + std::to_string(c.untimed_sizes.size()) +
           (c.untimed_sizes.size() == 1 ? " size has no out-of-place time (N/A or 0) and is left out:"
                                        : " sizes have no out-of-place time (N/A or 0) and are left out:");
    for (std::uint64_t b : c.untimed_sizes) out += " " + std::to_string(b);
    out += "\n";
  }
  out += "#\n";
  char line[256];
  std::snprintf(line, sizeof line, "# %10s  %9s  %9s  %9s  %9s  %9s  %9s  %12s  %8s\n", "size", "meas time",
                "pred time", "meas busbw", "pred busbw", "busbw err", "time ratio", "algorithm", "protocol");
  out += line;
  std::snprintf(line, sizeof line, "# %10s  %9s  %9s  %9s  %9s  %9s  %9s\n", "(B)", "(us)", "(us)", "(GB/s)", "(GB/s)",
                "(%)", "pred/meas");
  out += line;
  for (const ComparisonRow& r : c.rows) {
    std::snprintf(
        line, sizeof line, "%12llu  %9s  %9s  %9s  %9s  %9s  %9s  %12s  %8s\n",
        static_cast<unsigned long long>(r.size_bytes), padded(nccl_tests_float(r.measured_time_us, 7), 9).c_str(),
        padded(nccl_tests_float(r.predicted_time_us, 7), 9).c_str(),
        padded(nccl_tests_float(r.measured_busbw_GBps, 6), 9).c_str(),
        padded(nccl_tests_float(r.predicted_busbw_GBps, 6), 9).c_str(), number_text(r.busbw_error_pct, "%+.1f").c_str(),
        number_text(r.time_ratio, "%.2f").c_str(), r.algorithm.c_str(), r.protocol.c_str());
    out += line;
  }
  const ComparisonSummary& s = c.summary;
  auto err = [](const std::optional<double>& mean, const std::optional<double>& max, std::size_t n) {
    if (!mean) return std::string("n/a (no measured sizes)");
    return "mean " + fmt("%.1f", *mean) + " %, max " + fmt("%.1f", *max) + " % over " + std::to_string(n) +
           (n == 1 ? " size" : " sizes");
  };
  out += "# busbw error, sizes >= 1 MiB  : " +
         err(s.busbw_error_mean_pct_ge_1MiB, s.busbw_error_max_pct_ge_1MiB, s.rows_ge_1MiB) + "\n";
  out += "# busbw error, sizes >= 64 MiB : " +
         err(s.busbw_error_mean_pct_ge_64MiB, s.busbw_error_max_pct_ge_64MiB, s.rows_ge_64MiB) + "\n";
  out +=
      "# time ratio,  sizes < 64 KiB  : " +
      (s.small_time_ratio_max ? "max " + fmt("%.2f", *s.small_time_ratio_max) + " (max of pred/meas, meas/pred) over " +
                                    std::to_string(s.rows_small) + (s.rows_small == 1 ? " size" : " sizes")
                              : std::string("n/a (no measured sizes)")) +
      "\n";
  return out;
}

std::string nccl_tests_float(double value, int width) {
  char buf[64];
  for (const char* format : {"%*.2f", "%*.1f", "%*.0f"}) {
    const int n = std::snprintf(buf, sizeof buf, format, width, value);
    if (n >= 0 && n <= width) return buf;
  }
  std::snprintf(buf, sizeof buf, width >= 7 ? "%*.1e" : "%*.0e", width, value);
  return buf;
}

std::vector<std::uint64_t> sweep_sizes(std::uint64_t min_bytes, std::uint64_t max_bytes, std::uint64_t factor) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t s = min_bytes; s <= max_bytes && s > 0;) {
    out.push_back(s);
    if (s > max_bytes / factor) break;  // the next size would pass max (or overflow)
    s *= factor;
  }
  return out;
}

CollectivePoint predict_point(const workloads::Scenario& scenario, CollectiveOp op,
                              const std::vector<std::uint32_t>& gpus, std::uint64_t requested_bytes) {
  const std::uint64_t n = gpus.size();
  CollectivePoint p;
  p.redop = is_reduction(op) ? "sum" : "none";
  p.root = has_root(op) ? 0 : -1;
  std::uint64_t count = requested_bytes / kFloatBytes;
  if (size_is_total(op)) {
    // nccl-tests src/all_gather.cu etc.: per-rank count = (count / nranks) rounded down to 16 B of elements.
    count = (count / n) & ~(16 / kFloatBytes - 1);
    p.size_bytes = count * n * kFloatBytes;
  } else {
    p.size_bytes = count * kFloatBytes;
  }
  p.count = count;
  if (p.size_bytes == 0) {  // NCCL returns without launching a kernel for 0 elements
    p.algorithm = p.protocol = "-";
    return p;
  }
  const Prediction pred = predict_time(scenario, op, gpus, p.size_bytes);
  p.time_us = pred.time_us;
  p.algorithm = pred.algorithm;
  p.protocol = pred.protocol;
  // nccl-tests: algbw = bytes / 1e9 / seconds = bytes / 1e3 / us.
  p.algbw_GBps = static_cast<double>(p.size_bytes) / 1e3 / p.time_us;
  p.busbw_GBps = p.algbw_GBps * workloads::busbw_factor(op, static_cast<std::uint32_t>(n));
  return p;
}

Comparison compare_collective(const workloads::Scenario& scenario, CollectiveOp op,
                              const std::vector<std::uint32_t>& gpus, const calibrate::MeasuredRun& measured) {
  const std::string& file = measured.source_file;
  if (measured.op) {
    const auto file_op = workloads::parse_collective_op(*measured.op);
    if (!file_op)
      throw InputError(file, 0, 0, "", "the file measured " + *measured.op + ", which clustersim does not model");
    if (*file_op != op)
      throw InputError(file, 0, 0, "",
                       "the file measured " + std::string(workloads::to_string(*file_op)) + " but --op is " +
                           workloads::to_string(op));
  }
  const std::string label = calibrate::run_label(measured);  // the file, and in a log of several tests which one
  if (measured.gpus && *measured.gpus != gpus.size())
    throw InputError("command line", 0, 0, "--ranks",
                     label + " measured " + std::to_string(*measured.gpus) + " GPUs but the communicator has " +
                         communicator_text(scenario, gpus) + "; choose " + std::to_string(*measured.gpus) +
                         " GPUs with --ranks or a scenario of that size");
  if (measured.nodes) {
    std::set<std::uint32_t> nodes;
    for (std::uint32_t g : gpus) nodes.insert(scenario.cluster.node_of(g));
    if (nodes.size() != *measured.nodes)
      throw InputError("command line", 0, 0, "--ranks",
                       label + " measured " + std::to_string(*measured.nodes) + " node" +
                           (*measured.nodes == 1 ? "" : "s") + " but the communicator has " +
                           communicator_text(scenario, gpus) + "; the scenario's nodes must match the measurement's");
  }
  const double factor = workloads::busbw_factor(op, static_cast<std::uint32_t>(gpus.size()));
  Comparison c;
  c.profile_nccl_version = scenario.profile.collectives.nccl.nccl_version;
  c.scenario_gpu = scenario.cluster.gpu;
  std::vector<double> err_1mib, err_64mib;
  for (const calibrate::MeasuredRow& m : measured.rows) {
    if (m.size_bytes == 0) continue;  // nccl-tests prints 0 for AG/RS sizes below n·16 B: nothing ran
    if (calibrate::has_wrong(m, false)) continue;  // a broken run's time (wrong_rows_note says which)
    if (!(m.time_us_oop > 0)) {                    // N/A or 0: nothing to compare with
      c.untimed_sizes.push_back(m.size_bytes);
      continue;
    }
    ComparisonRow r;
    r.size_bytes = m.size_bytes;
    r.measured_time_us = m.time_us_oop;
    // From the measured time, as nccl-tests computes it: its busbw column has two decimals, which at small sizes
    // (0.01 GB/s for 128 B in 39.53 us, computed 0.00567) would make the error's sign and size meaningless.
    r.measured_busbw_GBps = static_cast<double>(m.size_bytes) / 1e3 / m.time_us_oop * factor;
    const Prediction pred = predict_time(scenario, op, gpus, m.size_bytes);
    r.predicted_time_us = pred.time_us;
    r.predicted_busbw_GBps = static_cast<double>(m.size_bytes) / 1e3 / pred.time_us * factor;
    r.busbw_error_pct = r.measured_busbw_GBps > 0
                            ? (r.predicted_busbw_GBps - r.measured_busbw_GBps) / r.measured_busbw_GBps * 100.0
                            : kNaN;
    r.time_ratio = r.predicted_time_us / r.measured_time_us;
    r.algorithm = pred.algorithm;
    r.protocol = pred.protocol;
    if (std::isfinite(r.busbw_error_pct)) {
      if (r.size_bytes >= kMiB) err_1mib.push_back(std::fabs(r.busbw_error_pct));
      if (r.size_bytes >= kLargeLimit) err_64mib.push_back(std::fabs(r.busbw_error_pct));
    }
    if (r.size_bytes < kSmallLimit && std::isfinite(r.time_ratio) && r.time_ratio > 0) {
      const double worst = std::max(r.time_ratio, 1.0 / r.time_ratio);
      c.summary.small_time_ratio_max = std::max(c.summary.small_time_ratio_max.value_or(0.0), worst);
      ++c.summary.rows_small;
    }
    c.rows.push_back(std::move(r));
  }
  ComparisonSummary& s = c.summary;
  if (!err_1mib.empty()) {
    s.busbw_error_mean_pct_ge_1MiB = mean_of(err_1mib);
    s.busbw_error_max_pct_ge_1MiB = *std::max_element(err_1mib.begin(), err_1mib.end());
  }
  if (!err_64mib.empty()) {
    s.busbw_error_mean_pct_ge_64MiB = mean_of(err_64mib);
    s.busbw_error_max_pct_ge_64MiB = *std::max_element(err_64mib.begin(), err_64mib.end());
  }
  s.rows_ge_1MiB = err_1mib.size();
  s.rows_ge_64MiB = err_64mib.size();
  return c;
}

namespace {

// The table (or comparison) of one communicator, printed to `out` and written to --csv/--json.
int run_collective(const workloads::Scenario& scenario, CollectiveOp op, const std::vector<std::uint32_t>& gpus,
                   const po::variables_map& vm, std::ostream& out, std::uint64_t min_bytes, std::uint64_t max_bytes,
                   std::uint64_t factor);

}  // namespace

int collective_command(const std::vector<std::string>& args, std::ostream& out) {
  po::options_description named(
      "clustersim collective [SCENARIO] --op OP [options]\n\n"
      "nccl-tests, simulated: times one collective over a sweep of sizes on SCENARIO's cluster\n"
      "(default: the built-in scenario) at its fidelity, and prints the table nccl-tests prints\n"
      "(out-of-place) with the algorithm and protocol NCCL would choose. With --compare, predicts\n"
      "each size of a measured run (nccl-tests log or validation CSV) and reports the error.\n\nOptions");
  named.add_options()("help,h", "show this help")(
      "op", po::value<std::string>()->value_name("OP"),
      "the collective (required): allreduce, reducescatter, allgather, broadcast, reduce, alltoall, sendrecv; "
      "nccl-tests' names (all_reduce, ...) also work")(
      "ranks", po::value<std::string>()->value_name("RANGES"),
      "the communicator's GPUs, e.g. 0-7 or 0-3,8-11 (default: every GPU of the cluster)")(
      "sizes", po::value<std::string>()->value_name("MIN:MAX"),
      "sizes in bytes, K/M/G/T = 2^10/2^20/2^30/2^40, like nccl-tests -b/-e (default 8:8G; one size: 1M)")(
      "factor", po::value<std::string>()->value_name("F"),
      "multiply the size by F each step, like nccl-tests -f (default 2)")(
      "algo", po::value<std::string>()->value_name("ALGO"),
      "force the algorithm, like NCCL_ALGO (ring, tree, nvls, ...)")(
      "proto", po::value<std::string>()->value_name("PROTO"),
      "force the protocol, like NCCL_PROTO (LL, LL128, Simple)")("csv", po::value<std::string>()->value_name("FILE"),
                                                                 "write the rows as CSV")(
      "compare", po::value<std::string>()->value_name("FILE"),
      "compare with a measured run: an nccl-tests log (from a log of several tests, the one of --op) or a CSV in "
      "the layout of validation/nccl/")("json", po::value<std::string>()->value_name("FILE"),
                                        "write the rows (and the comparison summary) as JSON");
  const ParsedCommand parsed = parse_command(args, named, "collective");
  const po::variables_map& vm = parsed.options;
  if (vm.count("help")) {
    out << named << "\n";
    return 0;
  }
  if (!vm.count("op")) fail_option("--op", "missing (required): one of " + names_of_ops());
  const CollectiveOp op = parse_op_option(vm["op"].as<std::string>());
  if (vm.count("compare") && vm.count("sizes"))
    fail_option("--sizes", "--compare takes the sizes of the measured run; give --sizes or --compare, not both");
  if (vm.count("compare") && vm.count("factor"))
    fail_option("--factor", "--compare takes the sizes of the measured run; give --factor or --compare, not both");

  std::uint64_t min_bytes = 8, max_bytes = 8ull << 30, factor = 2;
  if (vm.count("sizes")) {
    const std::string text = vm["sizes"].as<std::string>();
    const std::size_t colon = text.find(':');
    if (colon == std::string::npos) {
      min_bytes = max_bytes = parse_size(text, text);
    } else {
      min_bytes = parse_size(text.substr(0, colon), text);
      max_bytes = parse_size(text.substr(colon + 1), text);
    }
    if (min_bytes == 0) fail_option("--sizes", "\"" + text + "\": the smallest size must be at least 1 byte");
    if (min_bytes > max_bytes) fail_option("--sizes", "\"" + text + "\": MIN is larger than MAX");
  }
  if (vm.count("factor")) {
    const std::string text = vm["factor"].as<std::string>();
    std::uint64_t f = 0;
    bool ok = !text.empty() && text.size() <= 9;
    for (char ch : text) {
      if (ch < '0' || ch > '9')
        ok = false;
      else
        f = f * 10 + static_cast<std::uint64_t>(ch - '0');
    }
    if (!ok || f < 2) fail_option("--factor", "\"" + text + "\" is not a whole number >= 2");
    factor = f;
  }

  check_output_options(parsed, {"csv", "json"},
                       vm.count("compare") ? std::vector<std::string>{vm["compare"].as<std::string>()}
                                           : std::vector<std::string>{});
  workloads::Scenario scenario = load_scenario_argument(parsed, "collective");
  if (vm.count("algo")) {
    const std::string text = vm["algo"].as<std::string>();
    const auto a = workloads::parse_algorithm(text);
    if (!a) {
      std::string valid;
      for (Algorithm x :
           {Algorithm::kRing, Algorithm::kTree, Algorithm::kNvls, Algorithm::kCollNet, Algorithm::kHierarchical,
            Algorithm::kTorus, Algorithm::kPointToPoint, Algorithm::kPat, Algorithm::kNvlsTree})
        valid += std::string(valid.empty() ? "" : ", ") + workloads::to_string(x);
      fail_option("--algo", "\"" + text + "\" is not an algorithm; valid: " + valid);
    }
    // AlltoAll and Send/Recv are point-to-point: NCCL_ALGO does not choose among algorithms for them (a training
    // scenario's nccl.algorithm leaves them alone); asked for here explicitly, another algorithm is an error.
    // On a torus their default is the per-dimension schedule over the ICI links (algorithm torus), which may be
    // named too.
    const bool torus = scenario.cluster.is_torus();
    if ((op == CollectiveOp::kAllToAll || op == CollectiveOp::kSendRecv) && *a != Algorithm::kPointToPoint &&
        !(torus && *a == Algorithm::kTorus))
      fail_option("--algo", "\"" + text + "\": " + workloads::to_string(op) +
                                " is point-to-point (NCCL_ALGO does not apply to it); the only algorithm is p2p" +
                                (torus ? " (or torus, on this torus)" : ""));
    scenario.nccl.algorithm = *a;
  }
  if (vm.count("proto")) {
    const std::string text = vm["proto"].as<std::string>();
    const auto p = workloads::parse_protocol(text);
    if (!p) {
      std::string valid;
      for (Protocol x : {Protocol::kLL, Protocol::kLL128, Protocol::kSimple})
        valid += std::string(valid.empty() ? "" : ", ") + workloads::to_string(x);
      fail_option("--proto", "\"" + text + "\" is not a protocol; valid: " + valid);
    }
    scenario.nccl.protocol = *p;
  }
  const std::uint32_t total = scenario.cluster.gpu_count();
  std::vector<std::uint32_t> gpus;
  if (vm.count("ranks")) {
    gpus = parse_gpu_ranges(vm["ranks"].as<std::string>(), total, "--ranks");
  } else {
    for (std::uint32_t g = 0; g < total; ++g) gpus.push_back(g);
  }
  if (gpus.size() < 2)
    fail_option("--ranks", "a collective needs at least 2 GPUs; the communicator has " + std::to_string(gpus.size()));

  // The model names the scenario's nccl field when a forced algorithm or protocol cannot run here; one that
  // --algo or --proto forced is named as that option.
  const bool algo_option = vm.count("algo") > 0, proto_option = vm.count("proto") > 0;
  try {
    return run_collective(scenario, op, gpus, vm, out, min_bytes, max_bytes, factor);
  } catch (const InputError& e) {
    if (e.field_path() != "nccl.algorithm" && e.field_path() != "nccl.protocol") throw;
    const bool from_option = e.field_path() == "nccl.algorithm" ? algo_option : proto_option;
    if (from_option)
      throw InputError("command line", 0, 0, e.field_path() == "nccl.algorithm" ? "--algo" : "--proto", e.message());
    throw;
  }
}

namespace {

int run_collective(const workloads::Scenario& scenario, CollectiveOp op, const std::vector<std::uint32_t>& gpus,
                   const po::variables_map& vm, std::ostream& out, std::uint64_t min_bytes, std::uint64_t max_bytes,
                   std::uint64_t factor) {
  std::string text = preamble(scenario, op, gpus);
  std::string csv, json;
  if (vm.count("compare")) {
    const std::vector<calibrate::MeasuredRun> runs = calibrate::read_measured_runs(vm["compare"].as<std::string>());
    const calibrate::MeasuredRun& measured = calibrate::select_run(runs, workloads::nccl_tests_name(op), "--op");
    const Comparison c = compare_collective(scenario, op, gpus, measured);
    text += comparison_text(c, measured);
    csv = comparison_csv(c);
    json = comparison_json(scenario, op, gpus, measured, c);
  } else {
    std::vector<CollectivePoint> points;
    for (std::uint64_t size : sweep_sizes(min_bytes, max_bytes, factor))
      points.push_back(predict_point(scenario, op, gpus, size));
    text += "#\n" + table_text(points);
    csv = points_csv(points);
    json = points_json(scenario, op, gpus, points);
  }
  out << text;
  if (vm.count("csv")) write_file_atomically(vm["csv"].as<std::string>(), csv);
  if (vm.count("json")) write_file_atomically(vm["json"].as<std::string>(), json);
  return 0;
}

}  // namespace

}  // namespace clustersim::cli
