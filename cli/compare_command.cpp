#include "cli/compare_command.h"

#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>

#include "cli/command_line.h"
#include "cli/html_report.h"
#include "cli/report.h"
#include "cli/scenario_loader.h"
#include "sim/input_error.h"
#include "sim/trace.h"
#include "workloads/iteration_result.h"

namespace po = boost::program_options;

namespace clustersim::cli {
namespace {

enum class Better { kNone, kLower, kHigher };

// One simulated scenario of the comparison.
struct Entry {
  std::string label;  // "A", "B", ...
  workloads::Scenario scenario;
  workloads::ScenarioResult result;
  std::unique_ptr<TimelineRecorder> timeline;
};

// One row of the side-by-side table: a value per scenario.
struct Row {
  std::string name;      // with its unit
  std::string json_key;  // empty: not in the JSON's per-job values
  Better better = Better::kNone;
  bool numeric = true;             // text rows have no delta
  std::vector<double> values;      // numeric rows
  std::vector<std::string> texts;  // as shown
  std::vector<bool> runnable;      // per scenario: the job fits in memory (an OOM layout is never "best")
};

// "A".."Z", "AA".., as spreadsheet columns.
std::string label_of(std::size_t i) {
  std::string s;
  for (std::size_t n = i + 1; n > 0; n = (n - 1) / 26) s.insert(s.begin(), static_cast<char>('A' + (n - 1) % 26));
  return s;
}

std::optional<double> delta_pct(double value, double baseline) {
  if (baseline == 0) return value == 0 ? std::optional<double>(0.0) : std::nullopt;
  return 100 * (value - baseline) / baseline;
}

std::string delta_text(std::optional<double> d) {
  if (!d) return "n/a";
  std::string s = fmt("%+.1f", *d);
  if (s == "-0.0") s = "+0.0";
  // -99.98 % is not all of it: as many digits as tell it from -100 (-99.998 needs 5).
  for (int digits = 4; s.starts_with("-100") && *d != -100 && digits <= 17; ++digits)
    s = fmt(("%+." + std::to_string(digits) + "g").c_str(), *d);
  return s + "%";
}

// A row's number: its fixed format (`decimals` places) while that shows 3 significant digits, else 3
// significant digits, so a short run beside a long one in the row's unit (0.000184 days) is not rounded to 0; with
// its trailing zeros (6.80 beside 8.74, not 6.8).
std::string row_number(const char* format, int decimals, double v) {
  if (decimals == 0 && v == std::round(v)) return fmt(format, v);  // a count: 8 GPUs, not 8.00
  if (v != 0 && std::fabs(v) < std::pow(10.0, 2 - decimals)) return fmt("%#.3g", v);
  return fmt(format, v);
}

ReportCell::Tone delta_tone(std::optional<double> d, Better better) {
  if (!d || std::abs(*d) < 0.05 || better == Better::kNone) return ReportCell::Tone::kPlain;
  const bool lower = *d < 0;
  return lower == (better == Better::kLower) ? ReportCell::Tone::kBetter : ReportCell::Tone::kWorse;
}

// Indices of the best values of a row among the scenarios whose job fits in memory (a layout that runs out of
// memory cannot be trained, so none of its values is best); none when fewer than two fit (nothing to choose
// between) or their values are equal.
std::vector<bool> best_of(const Row& row) {
  std::vector<bool> best(row.texts.size(), false);
  if (!row.numeric || row.better == Better::kNone || row.values.empty()) return best;
  std::optional<double> target, first;
  bool all_equal = true;
  for (std::size_t i = 0; i < row.values.size(); ++i) {
    if (!row.runnable[i]) continue;
    const double v = row.values[i];
    if (!first) first = v;
    all_equal = all_equal && v == *first;
    target = !target ? v : row.better == Better::kLower ? std::min(*target, v) : std::max(*target, v);
  }
  const auto runnable = std::count(row.runnable.begin(), row.runnable.end(), true);
  if (!target || runnable < 2 || all_equal) return best;
  for (std::size_t i = 0; i < row.values.size(); ++i) best[i] = row.runnable[i] && row.values[i] == *target;
  return best;
}

// The unit in which a row of durations reads best: days, hours, or seconds, by the largest value.
std::pair<std::string, double> duration_unit(double largest_s) {
  if (largest_s >= 2 * 86400) return {"days", 86400};
  if (largest_s >= 2 * 3600) return {"hours", 3600};
  return {"s", 1};
}

std::vector<Row> rows_for_job(const std::vector<Entry>& entries, std::size_t j, std::optional<double> price) {
  using workloads::IterationResult;
  using workloads::Job;
  std::vector<Row> rows;
  auto add = [&](std::string name, std::string key, Better better, const char* format,
                 const std::function<double(const Job&, const IterationResult&)>& value) {
    Row row{std::move(name), std::move(key), better, true, {}, {}, {}};
    const char* point = std::strchr(format, '.');
    const int decimals = point ? std::atoi(point + 1) : 0;
    for (const Entry& e : entries) {
      const double v = value(e.scenario.jobs[j], e.result.jobs[j]);
      row.values.push_back(v);
      row.texts.push_back(row_number(format, decimals, v));
      row.runnable.push_back(!e.result.jobs[j].memory.oom);
    }
    rows.push_back(std::move(row));
  };
  auto add_text = [&](std::string name, const std::function<std::string(const Entry&)>& text) {
    Row row{std::move(name), "", Better::kNone, false, {}, {}, {}};
    for (const Entry& e : entries) {
      row.texts.push_back(text(e));
      row.runnable.push_back(!e.result.jobs[j].memory.oom);
    }
    rows.push_back(std::move(row));
  };
  auto gpus = [](const Job& job) { return static_cast<double>(job.gpus.size()); };

  add("GPUs", "gpus", Better::kNone, "%.0f", [&](const Job& job, const IterationResult&) { return gpus(job); });
  add("iteration time [s]", "iteration_time_s", Better::kLower, "%.6f",
      [](const Job&, const IterationResult& r) { return r.iteration_time.raw(); });
  add("  compute [s]", "compute_s", Better::kLower, "%.6f",
      [](const Job&, const IterationResult& r) { return r.breakdown.compute.raw(); });
  bool any_eager = false;  // PyTorch eager mixed-precision work, part of the compute (DDP, Horovod, DataParallel)
  for (const Entry& e : entries) any_eager = any_eager || e.result.jobs[j].breakdown.compute_eager.raw() > 0;
  if (any_eager)
    add("    of which eager [s]", "compute_eager_s", Better::kLower, "%.6f",
        [](const Job&, const IterationResult& r) { return r.breakdown.compute_eager.raw(); });
  add("  exposed comm [s]", "exposed_comm_s", Better::kLower, "%.6f",
      [](const Job&, const IterationResult& r) { return r.breakdown.exposed_comm.raw(); });
  // By kind (TP, CP, EP, PP, DP), the kinds some scenario exposes, as `run` prints them.
  for (std::size_t k = 0; k < workloads::kCommKinds; ++k) {
    bool any = false;
    for (const Entry& e : entries) any = any || e.result.jobs[j].breakdown.exposed_by_kind[k].raw() > 0;
    if (!any) continue;
    const auto kind = static_cast<workloads::CommKind>(k);
    add(std::string("    of which ") + workloads::label(kind) + " [s]",
        std::string("exposed_") + workloads::to_string(kind) + "_s", Better::kLower, "%.6f",
        [k](const Job&, const IterationResult& r) { return r.breakdown.exposed_by_kind[k].raw(); });
  }
  add("  input stall [s]", "input_stall_s", Better::kLower, "%.6f",
      [](const Job&, const IterationResult& r) { return r.breakdown.exposed_input.raw(); });
  bool any_host = false;
  for (const Entry& e : entries) any_host = any_host || e.result.jobs[j].breakdown.exposed_host.raw() > 0;
  if (any_host)
    add("  host dispatch [s]", "host_dispatch_s", Better::kLower, "%.6f",
        [](const Job&, const IterationResult& r) { return r.breakdown.exposed_host.raw(); });
  add("  idle [s]", "idle_s", Better::kLower, "%.6f",
      [](const Job&, const IterationResult& r) { return r.breakdown.idle.raw(); });
  add("tokens/s", "tokens_per_s", Better::kHigher, "%.0f",
      [](const Job&, const IterationResult& r) { return r.tokens_per_s; });
  add("tokens/s per GPU", "tokens_per_s_per_gpu", Better::kHigher, "%.0f",
      [&](const Job& job, const IterationResult& r) { return r.tokens_per_s / gpus(job); });
  // MFU is of each scenario's own peak (FP8 runs: the FP8 peak, twice BF16's); the model TFLOP/s per GPU compare
  // across precisions.
  add("model TFLOP/s per GPU", "model_TFLOPps_per_gpu", Better::kHigher, "%.1f",
      [&](const Job& job, const IterationResult& r) {
        return r.model_flops_per_step.raw() / r.iteration_time.raw() / gpus(job) / 1e12;
      });
  add("MFU [%]", "mfu_pct", Better::kHigher, "%.1f",
      [](const Job&, const IterationResult& r) { return 100 * r.mfu; });
  add("peak memory per GPU [GiB]", "peak_memory_GiB", Better::kLower, "%.2f",
      [](const Job&, const IterationResult& r) { return to_GiB(r.memory.peak); });
  add("memory capacity [GiB]", "memory_capacity_GiB", Better::kNone, "%.2f",
      [](const Job&, const IterationResult& r) { return to_GiB(r.memory.capacity); });
  add_text("memory verdict", [&](const Entry& e) {
    return e.result.jobs[j].memory.oom ? std::string("OUT OF MEMORY") : std::string("fits");
  });
  add("optimizer steps", "optimizer_steps", Better::kNone, "%.0f",
      [](const Job&, const IterationResult& r) { return static_cast<double>(r.training.optimizer_steps); });
  double longest = 0;
  for (const Entry& e : entries) longest = std::max(longest, e.result.jobs[j].training.time_to_train.raw());
  const auto [unit, unit_s] = duration_unit(longest);
  add("time to train [" + unit + "]", "time_to_train", Better::kLower, unit == "s" ? "%.1f" : "%.2f",
      [unit_s = unit_s](const Job&, const IterationResult& r) { return r.training.time_to_train.raw() / unit_s; });
  add("GPU-hours", "gpu_hours", Better::kLower, "%.1f",
      [](const Job&, const IterationResult& r) { return r.training.gpu_hours; });
  if (price)
    add("cost [USD]", "cost_usd", Better::kLower, "%.2f",
        [p = *price](const Job&, const IterationResult& r) { return r.training.gpu_hours * p; });
  return rows;
}

ReportTable compare_table(const std::vector<Entry>& entries, const std::vector<Row>& rows) {
  ReportTable t;
  t.header = {"", entries[0].label};
  t.right_aligned = {false, true};
  for (std::size_t i = 1; i < entries.size(); ++i) {
    t.header.push_back(entries[i].label);
    t.header.push_back("vs " + entries[0].label);
    t.right_aligned.push_back(true);
    t.right_aligned.push_back(true);
  }
  for (const Row& row : rows) {
    const std::vector<bool> best = best_of(row);
    std::vector<ReportCell> cells{ReportCell(row.name)};
    for (std::size_t i = 0; i < entries.size(); ++i) {
      ReportCell value(row.texts[i]);
      value.best = best[i];
      cells.push_back(value);
      if (i == 0) continue;
      if (!row.numeric) {
        cells.emplace_back("");
        continue;
      }
      const std::optional<double> d = delta_pct(row.values[i], row.values[0]);
      ReportCell delta(delta_text(d));
      // A scenario that runs out of memory (or a baseline that does) is no better or worse option: no colour.
      delta.tone = row.runnable[i] && row.runnable[0] ? delta_tone(d, row.better) : ReportCell::Tone::kPlain;
      cells.push_back(delta);
    }
    t.rows.push_back(std::move(cells));
  }
  return t;
}

std::string legend_text(const std::vector<Entry>& entries) {
  std::string out;
  for (const Entry& e : entries) {
    out += "  " + e.label + "  " + e.scenario.name + "  (" + e.scenario.source_file + ")\n";
    out += std::string(4 + e.label.size(), ' ') + std::to_string(e.scenario.cluster.gpu_count()) + " x " +
           e.scenario.cluster.gpu;
    for (const workloads::Job& job : e.scenario.jobs)
      out += (e.scenario.jobs.size() > 1 ? "; " + job.name + ": " : "; ") + layout_text(job.parallel);
    out += "\n";
  }
  return out;
}

// The notes under the table, one paragraph each (wrapped for the terminal by compare_text).
std::vector<std::string> notes(std::optional<double> price) {
  // The baseline is always labelled A.
  std::vector<std::string> n = {
      "vs A: 100 % x (value - A) / A. * marks the best value of a row among the scenarios that fit in memory "
      "(when two or more do): lower time, memory, GPU-hours and cost, higher tokens/s and MFU. A scenario that "
      "runs out of memory has its differences shown uncoloured: it is no option as configured.",
      "The breakdown (compute + exposed comm + input stall [+ host dispatch] + idle = iteration time) is of the "
      "GPU with the most exposed communication; \"of which\" rows are parts of the row above them (exposed comm "
      "by kind: where kinds overlap, the first of TP, CP, EP, PP, DP).",
      "MFU is of each scenario's own precision peak (FP8: the FP8 peak); model TFLOP/s per GPU compare across "
      "precisions."};
  if (price) n.push_back("Cost = GPU-hours x " + fmt("%.2f", *price) + " USD per GPU-hour.");
  return n;
}

// Greedy word wrap of one paragraph at `width` columns.
std::vector<std::string> wrap(const std::string& paragraph, std::size_t width) {
  std::vector<std::string> lines;
  std::istringstream words(paragraph);
  std::string line;
  for (std::string word; words >> word;) {
    if (!line.empty() && line.size() + 1 + word.size() > width) lines.push_back(std::move(line)), line.clear();
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) lines.push_back(std::move(line));
  return lines;
}

std::string job_heading(const std::vector<Entry>& entries, std::size_t j) {
  std::string names;
  for (const Entry& e : entries) {
    const std::string& name = e.scenario.jobs[j].name;
    if (names.find(name) == std::string::npos) names += (names.empty() ? "" : " / ") + name;
  }
  return "Job " + std::to_string(j + 1) + " of " + std::to_string(entries[0].scenario.jobs.size()) + ": " + names;
}

std::string compare_text(const std::vector<Entry>& entries, const std::vector<std::vector<Row>>& per_job,
                         std::optional<double> price, bool colour) {
  std::ostringstream o;
  o << "clustersim compare: " << entries.size() << " scenarios, baseline " << entries[0].label << "\n";
  o << legend_text(entries) << "\n";
  for (std::size_t j = 0; j < per_job.size(); ++j) {
    if (per_job.size() > 1) o << (j ? "\n" : "") << job_heading(entries, j) << "\n";
    o << text_table(compare_table(entries, per_job[j]), colour, "  ");
  }
  o << "\n";
  for (const std::string& paragraph : notes(price))
    for (const std::string& line : wrap(paragraph, 110)) o << "  " << line << "\n";
  return o.str();
}

std::string compare_json(const std::vector<Entry>& entries, const std::vector<std::vector<Row>>& per_job,
                         std::optional<double> price) {
  using sim::format_number;
  using sim::json_escape;
  std::ostringstream o;
  o << "{\n  \"baseline\": \"" << entries[0].label << "\",\n";
  o << "  \"price_per_gpu_hour_usd\": " << (price ? format_number(*price) : "null") << ",\n";
  o << "  \"scenarios\": [";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    o << (i ? ",\n" : "\n") << "    {\n";
    o << "      \"label\": \"" << e.label << "\",\n";
    o << "      \"scenario\": \"" << json_escape(e.scenario.name) << "\",\n";
    o << "      \"scenario_file\": \"" << json_escape(e.scenario.source_file) << "\",\n";
    o << "      \"profile\": \"" << json_escape(e.scenario.profile.name) << "\",\n";
    o << "      \"fidelity\": \"" << workloads::to_string(e.scenario.fidelity) << "\",\n";
    o << "      \"gpus\": " << e.scenario.cluster.gpu_count() << ",\n";
    o << "      \"jobs\": [";
    for (std::size_t j = 0; j < per_job.size(); ++j) {
      const workloads::IterationResult& r = e.result.jobs[j];
      o << (j ? ",\n" : "\n") << "        {\n";
      o << "          \"job\": \"" << json_escape(e.scenario.jobs[j].name) << "\",\n";
      o << "          \"layout\": \"" << json_escape(layout_text(e.scenario.jobs[j].parallel)) << "\",\n";
      // The same numbers, printed the same way, as `run --json` of the scenario.
      o << "          \"iteration_time_s\": " << format_number(r.iteration_time.raw()) << ",\n";
      o << "          \"breakdown_gpu\": " << r.breakdown_gpu << ",\n";
      o << "          \"breakdown_s\": {\"compute\": " << format_number(r.breakdown.compute.raw())
        << ", \"exposed_comm\": " << format_number(r.breakdown.exposed_comm.raw());
      for (std::size_t k = 0; k < workloads::kCommKinds; ++k)
        o << ", \"exposed_" << workloads::to_string(static_cast<workloads::CommKind>(k))
          << "\": " << format_number(r.breakdown.exposed_by_kind[k].raw());
      o << ", \"exposed_input\": " << format_number(r.breakdown.exposed_input.raw())
        << ", \"exposed_host\": " << format_number(r.breakdown.exposed_host.raw())
        << ", \"idle\": " << format_number(r.breakdown.idle.raw()) << "},\n";
      o << "          \"compute_eager_s\": " << format_number(r.breakdown.compute_eager.raw()) << ",\n";
      o << "          \"tokens_per_s\": " << format_number(r.tokens_per_s) << ",\n";
      o << "          \"mfu\": " << format_number(r.mfu) << ",\n";
      o << "          \"memory\": {\"peak_bytes\": " << format_number(r.memory.peak.raw())
        << ", \"capacity_bytes\": " << format_number(r.memory.capacity.raw())
        << ", \"oom\": " << (r.memory.oom ? "true" : "false") << "},\n";
      o << "          \"training\": {\"optimizer_steps\": " << r.training.optimizer_steps
        << ", \"time_to_train_s\": " << format_number(r.training.time_to_train.raw())
        << ", \"gpu_hours\": " << format_number(r.training.gpu_hours) << "},\n";
      o << "          \"cost_usd\": " << (price ? format_number(r.training.gpu_hours * *price) : "null") << ",\n";
      // Percentage differences to the baseline's job, by the table's rows (null: baseline 0, value not).
      o << "          \"delta_pct\": {";
      bool first = true;
      for (const Row& row : per_job[j]) {
        if (!row.numeric || row.json_key.empty()) continue;
        const std::optional<double> d = delta_pct(row.values[i], row.values[0]);
        o << (first ? "" : ", ") << "\"" << row.json_key << "\": " << (d ? format_number(*d) : "null");
        first = false;
      }
      o << "},\n";
      o << "          \"best\": [";
      first = true;
      for (const Row& row : per_job[j]) {
        if (!row.numeric || !best_of(row)[i]) continue;
        o << (first ? "" : ", ") << "\"" << row.json_key << "\"";
        first = false;
      }
      o << "]\n        }";
    }
    o << "\n      ]\n    }";
  }
  o << "\n  ]\n}\n";
  return o.str();
}

std::string compare_report(const std::vector<Entry>& entries, const std::vector<std::vector<Row>>& per_job,
                           std::optional<double> price, ReportFormat format) {
  std::string title = "clustersim compare:";
  for (std::size_t i = 0; i < entries.size(); ++i) title += (i ? " vs " : " ") + entries[i].label;
  ReportDocument doc(title);
  doc.heading(2, "Scenarios");
  ReportTable st;
  st.header = {"", "scenario", "file", "profile", "cluster", "layout"};
  for (const Entry& e : entries) {
    std::string layouts;
    for (const workloads::Job& job : e.scenario.jobs)
      layouts += (layouts.empty() ? "" : "; ") + (e.scenario.jobs.size() > 1 ? job.name + ": " : "") +
                 layout_text(job.parallel);
    st.rows.push_back(
        {e.label, e.scenario.name, e.scenario.source_file, e.scenario.profile.name, cluster_text(e.scenario), layouts});
  }
  doc.table(std::move(st));

  doc.heading(2, "Side by side");
  for (const std::string& paragraph : notes(price)) doc.paragraph(paragraph);
  for (std::size_t j = 0; j < per_job.size(); ++j) {
    if (per_job.size() > 1) doc.heading(3, job_heading(entries, j));
    doc.table(compare_table(entries, per_job[j]));
  }

  // The breakdown and memory of every scenario on one axis each.
  double longest = 0;
  for (const Entry& e : entries)
    for (const auto& r : e.result.jobs) longest = std::max(longest, r.iteration_time.raw());
  const bool in_ms = longest < 1;
  const double to_unit = in_ms ? 1e3 : 1;
  std::vector<StackedBar> time_bars, memory_bars;
  std::map<std::string, std::size_t> part_colour;
  constexpr const char* kPartColours[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                          "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  for (const Entry& e : entries) {
    for (std::size_t j = 0; j < e.result.jobs.size(); ++j) {
      const auto& r = e.result.jobs[j];
      const std::string name =
          e.label + ": " + e.scenario.name + (per_job.size() > 1 ? " / " + e.scenario.jobs[j].name : "");
      time_bars.push_back({name, breakdown_segments(r.breakdown, to_unit), std::nullopt});
      StackedBar bar{name, {}, to_GiB(r.memory.capacity)};
      for (const auto& part : r.memory.parts) {
        const std::size_t c = part_colour.emplace(part.name, part_colour.size()).first->second;
        bar.segments.push_back({part.name, to_GiB(part.size), kPartColours[c % 10]});
      }
      memory_bars.push_back(std::move(bar));
    }
  }
  doc.heading(2, "Time breakdown");
  doc.figure(svg_stacked_bars(time_bars, in_ms ? "ms" : "s"),
             "Iteration time of each scenario: compute, exposed communication and idle time of the GPU with the "
             "most exposed communication");
  doc.heading(2, "Memory per GPU");
  doc.figure(svg_stacked_bars(memory_bars, "GiB"), "Peak memory per GPU by part; dashed: the GPU's capacity");

  for (const Entry& e : entries) {
    doc.heading(2, "Scenario " + e.label + ": " + e.scenario.name);
    add_scenario_sections(doc, 3, e.scenario, e.result, e.timeline.get());
  }
  return format == ReportFormat::kHtml ? doc.html() : doc.markdown();
}

}  // namespace

bool colour_for_stdout() {
  return ::isatty(STDOUT_FILENO) == 1 && std::getenv("NO_COLOR") == nullptr;
}

int compare_command(const std::vector<std::string>& args, std::ostream& out, bool colour) {
  po::options_description named(
      "clustersim compare A B [C ...] [options]\n\n"
      "Simulates each scenario (.textproto or .json) and prints them side by side, A being the baseline:\n"
      "GPUs, iteration time and its breakdown (compute / exposed comm / idle), tokens/s, MFU,\n"
      "peak memory per GPU and the OOM verdict, time to train, GPU-hours and, with a price, cost.\n"
      "Each other scenario gets a column of its difference to A in percent, 100 x (value - A) / A;\n"
      "* marks the best value of a row (lower time, memory, GPU-hours, cost; higher tokens/s, MFU).\n"
      "Colours only on a terminal (and never with NO_COLOR set). Scenarios with several jobs are\n"
      "compared job by job and need the same number of jobs.\n\nOptions");
  named.add_options()("help,h", "show this help")("json", po::value<std::string>()->value_name("FILE"),
                                                  "write the comparison as JSON")(
      "report", po::value<std::string>()->value_name("FILE"),
      "write a report: FILE.html (one self-contained file with charts: the side-by-side table, breakdown "
      "and memory charts, then each scenario's configuration, timeline and links) or FILE.md (Markdown, "
      "the same tables)")("price-per-gpu-hour", po::value<double>()->value_name("USD"),
                          "add a cost row, GPU-hours x USD; default: no price, no cost row");
  const ParsedCommand parsed = parse_command(args, named, "compare");
  const po::variables_map& vm = parsed.options;
  if (vm.count("help")) {
    out << named << "\n";
    return 0;
  }
  if (parsed.scenarios.size() < 2)
    throw InputError("command line", 0, 0, "compare",
                     "needs at least two scenarios to compare, got " + std::to_string(parsed.scenarios.size()) +
                         " (see clustersim compare --help)");
  std::optional<double> price;
  if (vm.count("price-per-gpu-hour")) {
    price = vm["price-per-gpu-hour"].as<double>();
    if (!(*price >= 0) || !(*price <= 1e12))  // the cost products stay finite
      throw InputError("command line", 0, 0, "--price-per-gpu-hour",
                       fmt("%g", *price) + " is not a price (a number >= 0 and <= 1e12 in USD per GPU-hour)");
  }
  std::optional<ReportFormat> format;
  if (vm.count("report")) format = report_format(vm["report"].as<std::string>());
  check_output_options(parsed, {"json", "report"});

  // Load every scenario before simulating any, so a bad file fails at once.
  std::vector<Entry> entries;
  for (std::size_t i = 0; i < parsed.scenarios.size(); ++i)
    entries.push_back({label_of(i), load_scenario_file(parsed.scenarios[i]), {}, nullptr});
  for (const Entry& e : entries)
    if (e.scenario.jobs.size() != entries[0].scenario.jobs.size())
      throw InputError(e.scenario.source_file, 0, 0, "jobs",
                       "has " + std::to_string(e.scenario.jobs.size()) + " jobs and the baseline " +
                           entries[0].scenario.source_file + " " + std::to_string(entries[0].scenario.jobs.size()) +
                           "; compare pairs jobs by position and needs the same number");

  for (Entry& e : entries) {
    std::vector<sim::TraceSink*> sinks;
    if (format) {
      e.timeline = std::make_unique<TimelineRecorder>(timeline_gpus(e.scenario));
      sinks.push_back(e.timeline.get());
    }
    e.result = workloads::simulate_scenario(e.scenario, sinks);
  }

  std::vector<std::vector<Row>> per_job;
  for (std::size_t j = 0; j < entries[0].scenario.jobs.size(); ++j) per_job.push_back(rows_for_job(entries, j, price));

  out << compare_text(entries, per_job, price, colour);
  if (vm.count("json")) write_file_atomically(vm["json"].as<std::string>(), compare_json(entries, per_job, price));
  if (format) write_file_atomically(vm["report"].as<std::string>(), compare_report(entries, per_job, price, *format));
  return 0;
}

}  // namespace clustersim::cli
