// Readable reports: one self-contained HTML file (inline CSS and inline SVG charts, no scripts, no
// external URLs — it opens offline and can be mailed), or Markdown with the same tables and no charts.
//
// Two layers:
//  1. A small document builder, ReportDocument: headings, paragraphs, key/value lists, tables (cells may
//     be marked best / better / worse than a baseline) and figures (SVG from the svg_* functions). One
//     document renders as HTML (html()) or Markdown (markdown(); figures left out), and a ReportTable also
//     renders as an aligned terminal table (text_table(), ANSI colours only on request). Every string
//     that reaches the output is escaped here (html_escape / markdown_escape), so callers pass user text
//     (scenario names, file names, link names) as is.
//  2. The sections of a simulated scenario (add_scenario_sections): configuration, results, stacked
//     time breakdown (compute / exposed communication / input stall / idle) per job and per
//     pipeline stage, memory parts against the GPU's capacity, a Gantt excerpt of the iteration's timeline on a few
//     GPUs (recorded by a TimelineRecorder attached to simulate_scenario as a trace sink), and the utilisation of the
//     busiest links (FLOW fidelity). `run --report` and `compare --report` use them.
//
// Charts are horizontal stacked bars (optional capacity line per bar), a timeline (one row per GPU
// stream; tasks of one category closer than a pixel are merged into one rectangle so a 1,000-layer
// iteration stays a few thousand rectangles), and a scatter plot with an optional connected front.
// Coordinates are printed with fixed decimals and every order is deterministic: the same input gives
// byte-identical files.
//
// How a study command (sweep, plan) adds its own parts, e.g. a ranked table and a Pareto plot:
//
//   ReportDocument doc("clustersim sweep: " + scenario.name);
//   doc.heading(2, "Ranked layouts");
//   ReportTable ranked;
//   ranked.header = {"rank", "layout", "iteration time [s]", "tokens/s", "MFU [%]", "peak memory [GiB]"};
//   ranked.right_aligned = {true, false, true, true, true, true};
//   for (each scored layout, best first) ranked.rows.push_back({std::to_string(rank), layout_text, ...});
//   ranked.rows[0][2].best = true;                           // marks the fastest
//   doc.table(ranked);
//   std::vector<ScatterPoint> points;                        // x = memory headroom [GiB], y = iteration time [s]
//   for (each layout) points.push_back({headroom_GiB, time_s, layout_text, on_pareto_front});
//   doc.figure(svg_scatter(points, "memory headroom [GiB]", "iteration time [s]", true),
//              "Pareto front of iteration time versus memory headroom (red, connected)");
//   add_scenario_sections(doc, 2, "Best layout", best_scenario, best_result, &recorder);   // optional detail
//   write_file_atomically(path, format == ReportFormat::kHtml ? doc.html() : doc.markdown());
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/trace.h"
#include "workloads/iteration_result.h"
#include "workloads/scenario.h"

namespace clustersim::cli {

// &, <, >, " and ' as entities: safe in element content and in quoted attribute values.
std::string html_escape(std::string_view text);
// Markdown punctuation that could start markup (\ ` * _ < > | #) backslash-escaped; line breaks become
// spaces so a value stays in its table cell. Brackets stay: reports define no link references.
std::string markdown_escape(std::string_view text);

struct ReportCell {
  enum class Tone { kPlain, kBetter, kWorse };
  ReportCell() = default;
  ReportCell(std::string t) : text(std::move(t)) {}  // NOLINT: cells are written as strings
  ReportCell(const char* t) : text(t) {}             // NOLINT
  std::string text;
  bool best = false;  // shown with a trailing " *" (bold in HTML and Markdown)
  Tone tone = Tone::kPlain;
};

struct ReportTable {
  std::vector<std::string> header;
  std::vector<bool> right_aligned;  // per column; columns past its end are left-aligned
  std::vector<std::vector<ReportCell>> rows;
};

// The table aligned in columns for a terminal. Best cells get " *"; with `ansi_colour`, best cells are
// bold and better / worse cells green / red (escape codes do not count towards the column widths).
std::string text_table(const ReportTable& table, bool ansi_colour, const std::string& indent = "");

// A complete <svg> element built by the svg_* functions below (which escape the text they put in).
struct Svg {
  std::string markup;
};

struct BarSegment {
  std::string label;   // also the legend entry; segments with the same label share a colour
  double value = 0;    // in the chart's unit
  std::string colour;  // CSS colour, e.g. "#4e79a7"
};
struct StackedBar {
  std::string label;
  std::vector<BarSegment> segments;
  std::optional<double> limit;  // drawn as a vertical line across the bar (e.g. the GPU's capacity)
};
// Horizontal stacked bars, one row each, on a common axis in `unit` from 0 to at least `axis_at_least`
// (e.g. 100 for percentages); a legend of the segment labels (and `limit_name` when a bar has a limit).
Svg svg_stacked_bars(const std::vector<StackedBar>& bars, const std::string& unit,
                     const std::string& limit_name = "capacity", double axis_at_least = 0);

struct TimelineInterval {
  std::string row;       // e.g. "GPU 3 compute"
  std::string category;  // colour and legend ("compute", "tp_comm", ...)
  std::string name;      // the task, shown as a tooltip
  double start_s = 0;
  double end_s = 0;
};
// Gantt chart: one row per entry of `rows` (in that order) from 0 to span_s; intervals of one row and
// category closer than a pixel are merged (the tooltip then counts the tasks).
Svg svg_timeline(const std::vector<std::string>& rows, const std::vector<TimelineInterval>& intervals, double span_s);

struct ScatterPoint {
  double x = 0;
  double y = 0;
  std::string label;         // tooltip
  bool highlighted = false;  // e.g. on the Pareto front: drawn red, and connected when `connect_highlighted`
};
Svg svg_scatter(const std::vector<ScatterPoint>& points, const std::string& x_label, const std::string& y_label,
                bool connect_highlighted);

// The colour of a task category in timelines (compute blue, dp_comm red, tp_comm orange, pp_comm green;
// others from a fixed palette by a stable hash of the name).
std::string category_colour(std::string_view category);

class ReportDocument {
 public:
  explicit ReportDocument(std::string title);
  void heading(int level, std::string text);  // level 2..4 (the title is level 1)
  void paragraph(std::string text);
  void key_values(std::vector<std::pair<std::string, std::string>> rows);
  void table(ReportTable table);
  void figure(Svg svg, std::string caption);  // HTML only

  std::string html() const;
  std::string markdown() const;

 private:
  enum class Kind { kHeading, kParagraph, kKeyValues, kTable, kFigure };
  struct Block {
    Kind kind;
    int level = 0;
    std::string text;
    ReportTable table;
    std::string svg;
  };
  std::string title_;
  std::vector<Block> blocks_;
};

enum class ReportFormat { kHtml, kMarkdown };
// By the file name: ".html"/".htm" → HTML, ".md"/".markdown" → Markdown. Anything else throws
// InputError("command line", 0, 0, "--report", ...).
ReportFormat report_format(const std::string& path);

// Keeps the task records of a few GPUs (timeline_gpus) for the report's timeline excerpt.
class TimelineRecorder : public sim::TraceSink {
 public:
  explicit TimelineRecorder(std::vector<std::uint32_t> gpus);
  void on_task(const sim::TaskRecord& record) override;

  struct Record {
    std::uint32_t gpu = 0;
    std::string stream;
    std::string category;
    std::string name;
    sim::SimTime start = 0;
    sim::SimTime end = 0;
  };
  const std::vector<std::uint32_t>& gpus() const { return gpus_; }
  const std::vector<Record>& records() const { return records_; }

 private:
  std::vector<std::uint32_t> gpus_;  // ascending
  std::vector<Record> records_;      // in the order the simulation reported them
};

// The GPUs a report's timeline shows: per job up to 4 ranks — the first rank of evenly spread pipeline
// stages when PP > 1, else evenly spread ranks (first and last included) — at most 8 in all, ascending.
std::vector<std::uint32_t> timeline_gpus(const workloads::Scenario& scenario);

// Appends the sections of one simulated scenario; headings start at `level` (2 for a run report, 3 under
// a compare report's per-scenario heading). `timeline` may be null (no timeline section).
void add_scenario_sections(ReportDocument& doc, int level, const workloads::Scenario& scenario,
                           const workloads::ScenarioResult& result, const TimelineRecorder* timeline);

// The report of `clustersim run`: the scenario's sections under its title.
std::string run_report(const workloads::Scenario& scenario, const workloads::ScenarioResult& result,
                       const TimelineRecorder* timeline, ReportFormat format);

// Shared short descriptions, also used by compare.
std::string layout_text(const workloads::ParallelPlan& plan);
std::string cluster_text(const workloads::Scenario& scenario);

// Time-breakdown colours (compute, exposed communication, idle), the same in every chart.
inline constexpr const char* kComputeColour = "#4e79a7";
inline constexpr const char* kExposedCommColour = "#e15759";
inline constexpr const char* kIdleColour = "#bab0ac";
inline constexpr const char* kInputStallColour = "#edc948";
inline constexpr const char* kHostStallColour = "#b07aa1";

// The segments of a time-breakdown bar in the chart's unit (seconds x to_unit): compute, exposed
// communication, input stall, idle.
std::vector<BarSegment> breakdown_segments(const workloads::TimeBreakdown& breakdown, double to_unit);

}  // namespace clustersim::cli
