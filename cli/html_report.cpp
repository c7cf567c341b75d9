#include "cli/html_report.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <utility>

#include "cli/command_line.h"
#include "cli/report.h"
#include "sim/input_error.h"
#include "topology/topology.h"
#include "workloads/compute_model.h"
#include "workloads/rank_layout.h"
#include "workloads/transformer_ops.h"

namespace clustersim::cli {
namespace {

// Fixed decimals, locale-independent for the C locale the program runs in; never "-0.0".
std::string fixed(double v, int decimals) {
  if (v == 0 || !std::isfinite(v)) v = 0;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (s.find_first_not_of("-0.") == std::string::npos && s[0] == '-') s.erase(0, 1);
  return s;
}

// A readable number for labels: four significant digits.
std::string short_number(double v) {
  return fmt("%.4g", v);
}

// Display width of UTF-8 text: code points (continuation bytes do not count).
std::size_t display_width(std::string_view s) {
  std::size_t n = 0;
  for (const char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

// At most `max_chars` code points, "..." appended when cut (never inside a UTF-8 sequence).
std::string truncated(const std::string& s, std::size_t max_chars) {
  if (display_width(s) <= max_chars) return s;
  std::size_t chars = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (chars == max_chars - 3) break;
      ++chars;
    }
  }
  return s.substr(0, i) + "...";
}

// Tick spacing of 1, 2 or 5 times a power of ten giving about `target` intervals over `range`.
double nice_step(double range, int target) {
  if (!(range > 0)) return 1;
  const double raw = range / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / magnitude;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * magnitude;
}

struct Axis {
  double min = 0, max = 1, step = 1;
};
Axis nice_axis(double lo, double hi, int target) {
  if (!(hi > lo)) {
    const double pad = hi == 0 ? 1 : std::abs(hi) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double step = nice_step(hi - lo, target);
  return {std::floor(lo / step) * step, std::ceil(hi / step) * step, step};
}
std::vector<double> ticks(const Axis& a) {
  std::vector<double> out;
  const auto n = static_cast<int>(std::llround((a.max - a.min) / a.step));
  for (int i = 0; i <= n; ++i) out.push_back(a.min + i * a.step);
  return out;
}
std::string tick_label(double v) {
  return fmt("%g", std::abs(v) < 1e-12 ? 0.0 : v);
}

std::string px(double v) {
  return fixed(v, 1);
}

std::string svg_open(double width, double height, const std::string& label) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + px(width) + "\" height=\"" + px(height) +
         "\" viewBox=\"0 0 " + px(width) + " " + px(height) + "\" role=\"img\" aria-label=\"" + html_escape(label) +
         "\" font-family=\"sans-serif\" font-size=\"11\">\n";
}
std::string svg_text(double x, double y, const std::string& text, const char* anchor = "start",
                     const char* extra = "") {
  return "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\" text-anchor=\"" + anchor + "\"" + extra + ">" +
         html_escape(text) + "</text>\n";
}
std::string svg_rect(double x, double y, double w, double h, const std::string& fill, const std::string& title) {
  return "<rect x=\"" + px(x) + "\" y=\"" + px(y) + "\" width=\"" + px(w) + "\" height=\"" + px(h) + "\" fill=\"" +
         html_escape(fill) + "\">" + (title.empty() ? "" : "<title>" + html_escape(title) + "</title>") + "</rect>\n";
}
std::string svg_line(double x1, double y1, double x2, double y2, const char* stroke, double width,
                     const char* extra = "") {
  return "<line x1=\"" + px(x1) + "\" y1=\"" + px(y1) + "\" x2=\"" + px(x2) + "\" y2=\"" + px(y2) + "\" stroke=\"" +
         stroke + "\" stroke-width=\"" + px(width) + "\"" + extra + "/>\n";
}

struct LegendEntry {
  std::string label;
  std::string colour;
  bool line = false;  // a dashed line instead of a square
};
// Legend rows starting at y; returns the markup and advances y past it.
std::string legend(const std::vector<LegendEntry>& entries, double x0, double width, double& y) {
  std::string out;
  double x = x0;
  for (const LegendEntry& e : entries) {
    const double w = 18 + 6.5 * static_cast<double>(display_width(e.label)) + 16;
    if (x > x0 && x + w > width) {
      x = x0;
      y += 16;
    }
    if (e.line)
      out += svg_line(x, y - 4, x + 12, y - 4, "#222", 2, " stroke-dasharray=\"4 2\"");
    else
      out += svg_rect(x, y - 10, 12, 12, e.colour, "");
    out += svg_text(x + 16, y, e.label);
    x += w;
  }
  y += 16;
  return out;
}

std::uint32_t stable_hash(std::string_view s) {
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return h;
}

constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

constexpr const char* kCss =
    R"(body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1000px;color:#222;padding:0 1em}
h1{font-size:1.6em;border-bottom:2px solid #4e79a7;padding-bottom:.2em}
h2{font-size:1.3em;margin-top:1.6em;border-bottom:1px solid #ddd}
h3{font-size:1.1em;margin-top:1.3em}
h4{font-size:1em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em;vertical-align:top}
thead th{background:#f0f3f7;text-align:left}
table.kv th{background:#f7f7f7;text-align:left;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td.best{font-weight:700;background:#fff4c2}
td.better{color:#1a7f37}
td.worse{color:#b42318}
figure{margin:.8em 0}
figcaption{font-size:.85em;color:#555}
svg{max-width:100%;height:auto}
footer{margin-top:2em;font-size:.8em;color:#777}
)";

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string markdown_escape(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n' || c == '\r') {
      out += ' ';
      continue;
    }
    // A name like "A&amp;B [x](http://e)" must stay text: an '&' that starts an entity and a '[' that opens a
    // link (a later "](" or "][") are escaped; "a & b" and "capacity [GB/s]" read as they are.
    const bool entity = c == '&' && i + 1 < text.size() &&
                        (std::isalnum(static_cast<unsigned char>(text[i + 1])) != 0 || text[i + 1] == '#');
    const std::size_t close = c == '[' ? text.find(']', i) : std::string_view::npos;
    const bool link = close != std::string_view::npos && close + 1 < text.size() &&
                      (text[close + 1] == '(' || text[close + 1] == '[');
    if (std::string_view("\\`*_<>|#").find(c) != std::string_view::npos || entity || link) out += '\\';
    out += c;
  }
  return out;
}

std::string text_table(const ReportTable& table, bool ansi_colour, const std::string& indent) {
  const std::size_t columns = table.header.size();
  std::vector<bool> has_best(columns, false);
  for (const auto& row : table.rows)
    for (std::size_t c = 0; c < row.size() && c < columns; ++c) has_best[c] = has_best[c] || row[c].best;
  auto shown = [&](const ReportCell& cell, std::size_t c) {
    return cell.text + (has_best[c] ? (cell.best ? " *" : "  ") : "");
  };
  std::vector<std::size_t> width(columns, 0);
  for (std::size_t c = 0; c < columns; ++c) width[c] = display_width(table.header[c]);
  for (const auto& row : table.rows)
    for (std::size_t c = 0; c < row.size() && c < columns; ++c)
      width[c] = std::max(width[c], display_width(shown(row[c], c)));
  auto right = [&](std::size_t c) { return c < table.right_aligned.size() && table.right_aligned[c]; };
  auto line = [&](const std::vector<ReportCell>& cells, bool header) {
    std::string out = indent;
    for (std::size_t c = 0; c < columns; ++c) {
      const ReportCell cell = c < cells.size() ? cells[c] : ReportCell();
      const std::string text = header ? cell.text : shown(cell, c);
      const std::size_t pad = width[c] - display_width(text);
      std::string code;
      if (ansi_colour && !header) {
        std::string attrs;
        if (cell.best) attrs += "1";
        if (cell.tone == ReportCell::Tone::kBetter) attrs += attrs.empty() ? "32" : ";32";
        if (cell.tone == ReportCell::Tone::kWorse) attrs += attrs.empty() ? "31" : ";31";
        if (!attrs.empty()) code = "\033[" + attrs + "m";
      }
      if (c) out += "  ";
      if (right(c)) out += std::string(pad, ' ');
      out += code.empty() ? text : code + text + "\033[0m";
      if (!right(c) && c + 1 < columns) out += std::string(pad, ' ');
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::vector<ReportCell> header(table.header.begin(), table.header.end());
  std::string out = line(header, true);
  std::size_t total = 0;
  for (std::size_t c = 0; c < columns; ++c) total += width[c] + (c ? 2 : 0);
  out += indent + std::string(total, '-') + "\n";
  for (const auto& row : table.rows) out += line(row, false);
  return out;
}

Svg svg_stacked_bars(const std::vector<StackedBar>& bars, const std::string& unit, const std::string& limit_name,
                     double axis_at_least) {
  constexpr double kWidth = 960, kLabel = 250, kRight = 120, kRowH = 20, kGap = 8, kTop = 10;
  constexpr double kPlot = kWidth - kLabel - kRight;
  double hi = axis_at_least;
  bool any_limit = false;
  for (const StackedBar& b : bars) {
    double total = 0;
    for (const BarSegment& s : b.segments) total += std::max(0.0, s.value);
    hi = std::max(hi, total);
    if (b.limit) {
      hi = std::max(hi, *b.limit);
      any_limit = true;
    }
  }
  const Axis axis = nice_axis(0, hi > 0 ? hi : 1, 6);
  const double scale = kPlot / (axis.max - axis.min);
  std::vector<LegendEntry> entries;
  for (const StackedBar& b : bars)
    for (const BarSegment& s : b.segments)
      if (std::none_of(entries.begin(), entries.end(), [&](const LegendEntry& e) { return e.label == s.label; }))
        entries.push_back({s.label, s.colour, false});
  if (any_limit) entries.push_back({limit_name, "#222", true});

  std::string body;
  double y = kTop;
  for (const StackedBar& b : bars) {
    body += svg_text(kLabel - 8, y + kRowH / 2 + 4, truncated(b.label, 38), "end");
    double x = kLabel, total = 0;
    for (const BarSegment& s : b.segments) {
      const double v = std::max(0.0, s.value);
      total += v;
      const double w = v * scale;
      if (w > 0) body += svg_rect(x, y, w, kRowH, s.colour, s.label + ": " + short_number(v) + " " + unit);
      x += w;
    }
    body += svg_text(x + 6, y + kRowH / 2 + 4, short_number(total) + " " + unit);
    if (b.limit) {
      const double lx = kLabel + *b.limit * scale;
      body += "<g><title>" + html_escape(limit_name + ": " + short_number(*b.limit) + " " + unit) + "</title>" +
              svg_line(lx, y - 4, lx, y + kRowH + 4, "#222", 2, " stroke-dasharray=\"4 2\"") + "</g>\n";
    }
    y += kRowH + kGap;
  }
  // Axis.
  const double axis_y = y;
  body += svg_line(kLabel, axis_y, kLabel + kPlot, axis_y, "#888", 1);
  for (const double t : ticks(axis)) {
    const double tx = kLabel + (t - axis.min) * scale;
    body += svg_line(tx, kTop - 4, tx, axis_y + 4, "#ddd", 1);
    body += svg_text(tx, axis_y + 16, tick_label(t), "middle");
  }
  body += svg_text(kLabel + kPlot + 24, axis_y + 16, unit);
  double legend_y = axis_y + 40;
  body += legend(entries, kLabel, kWidth, legend_y);
  return {svg_open(kWidth, legend_y, "stacked bar chart in " + unit) + body + "</svg>"};
}

Svg svg_timeline(const std::vector<std::string>& rows, const std::vector<TimelineInterval>& intervals, double span_s) {
  constexpr double kWidth = 960, kLabel = 170, kRight = 30, kRowH = 14, kGap = 4, kTop = 8;
  constexpr double kPlot = kWidth - kLabel - kRight;
  const double span = span_s > 0 ? span_s : 1;
  const double unit_scale = span < 1e-3 ? 1e6 : span < 1 ? 1e3 : 1;
  const std::string unit = span < 1e-3 ? "us" : span < 1 ? "ms" : "s";
  const double scale = kPlot / span;
  const double merge_gap = span / kPlot;  // one pixel

  std::map<std::string, std::size_t> row_index;
  for (std::size_t i = 0; i < rows.size(); ++i) row_index.emplace(rows[i], i);
  std::vector<std::vector<const TimelineInterval*>> per_row(rows.size());
  for (const TimelineInterval& iv : intervals) {
    const auto it = row_index.find(iv.row);
    if (it != row_index.end()) per_row[it->second].push_back(&iv);
  }
  std::vector<std::string> categories;
  std::string body;
  double y = kTop;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    body += svg_text(kLabel - 8, y + kRowH - 3, truncated(rows[r], 28), "end");
    body += svg_rect(kLabel, y, kPlot, kRowH, "#f4f4f4", "");
    auto& list = per_row[r];
    std::stable_sort(list.begin(), list.end(),
                     [](const TimelineInterval* a, const TimelineInterval* b) { return a->start_s < b->start_s; });
    for (std::size_t i = 0; i < list.size();) {
      const TimelineInterval& first = *list[i];
      double end = first.end_s;
      std::size_t j = i + 1;
      while (j < list.size() && list[j]->category == first.category && list[j]->start_s <= end + merge_gap) {
        end = std::max(end, list[j]->end_s);
        ++j;
      }
      const std::size_t count = j - i;
      const std::string when = fixed(first.start_s * unit_scale, 3) + "-" + fixed(end * unit_scale, 3) + " " + unit;
      const std::string title = count == 1 ? first.name + " (" + first.category + "): " + when
                                           : first.category + ": " + std::to_string(count) + " tasks, " + when;
      body += svg_rect(kLabel + first.start_s * scale, y + 1, std::max((end - first.start_s) * scale, 0.5), kRowH - 2,
                       category_colour(first.category), title);
      if (std::find(categories.begin(), categories.end(), first.category) == categories.end())
        categories.push_back(first.category);
      i = j;
    }
    y += kRowH + kGap;
  }
  const Axis axis = nice_axis(0, span * unit_scale, 8);
  const double axis_y = y;
  body += svg_line(kLabel, axis_y, kLabel + kPlot, axis_y, "#888", 1);
  for (const double t : ticks(axis)) {
    if (t > span * unit_scale * (1 + 1e-9)) break;
    const double tx = kLabel + t / unit_scale * scale;
    body += svg_line(tx, axis_y, tx, axis_y + 4, "#888", 1);
    body += svg_text(tx, axis_y + 16, tick_label(t), "middle");
  }
  body += svg_text(kLabel + kPlot + 14, axis_y + 16, unit);
  std::sort(categories.begin(), categories.end());
  std::vector<LegendEntry> entries;
  for (const std::string& c : categories) entries.push_back({c, category_colour(c), false});
  double legend_y = axis_y + 40;
  body += legend(entries, kLabel, kWidth, legend_y);
  return {svg_open(kWidth, legend_y, "timeline") + body + "</svg>"};
}

Svg svg_scatter(const std::vector<ScatterPoint>& points, const std::string& x_label, const std::string& y_label,
                bool connect_highlighted) {
  constexpr double kWidth = 720, kHeight = 420, kLeft = 80, kBottom = 50, kTop = 20, kRight = 20;
  constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;
  double xlo = 0, xhi = 1, ylo = 0, yhi = 1;
  if (!points.empty()) {
    xlo = xhi = points[0].x;
    ylo = yhi = points[0].y;
    for (const ScatterPoint& p : points) {
      xlo = std::min(xlo, p.x);
      xhi = std::max(xhi, p.x);
      ylo = std::min(ylo, p.y);
      yhi = std::max(yhi, p.y);
    }
  }
  const Axis ax = nice_axis(xlo, xhi, 6), ay = nice_axis(ylo, yhi, 6);
  auto X = [&](double v) { return kLeft + (v - ax.min) / (ax.max - ax.min) * kPlotW; };
  auto Y = [&](double v) { return kTop + kPlotH - (v - ay.min) / (ay.max - ay.min) * kPlotH; };
  std::string body;
  body += svg_rect(kLeft, kTop, kPlotW, kPlotH, "#fafafa", "");
  for (const double t : ticks(ax)) {
    body += svg_line(X(t), kTop, X(t), kTop + kPlotH, "#e4e4e4", 1);
    body += svg_text(X(t), kTop + kPlotH + 16, tick_label(t), "middle");
  }
  for (const double t : ticks(ay)) {
    body += svg_line(kLeft, Y(t), kLeft + kPlotW, Y(t), "#e4e4e4", 1);
    body += svg_text(kLeft - 6, Y(t) + 4, tick_label(t), "end");
  }
  body += svg_text(kLeft + kPlotW / 2, kHeight - 12, x_label, "middle");
  body += "<text x=\"16\" y=\"" + px(kTop + kPlotH / 2) + "\" text-anchor=\"middle\" transform=\"rotate(-90 16 " +
          px(kTop + kPlotH / 2) + ")\">" + html_escape(y_label) + "</text>\n";
  if (connect_highlighted) {
    std::vector<const ScatterPoint*> front;
    for (const ScatterPoint& p : points)
      if (p.highlighted) front.push_back(&p);
    std::stable_sort(front.begin(), front.end(), [](const ScatterPoint* a, const ScatterPoint* b) {
      return a->x != b->x ? a->x < b->x : a->y < b->y;
    });
    if (front.size() > 1) {
      body += "<polyline fill=\"none\" stroke=\"#e15759\" stroke-width=\"1.5\" points=\"";
      for (std::size_t i = 0; i < front.size(); ++i)
        body += (i ? " " : "") + px(X(front[i]->x)) + "," + px(Y(front[i]->y));
      body += "\"/>\n";
    }
  }
  for (const ScatterPoint& p : points)
    body += "<circle cx=\"" + px(X(p.x)) + "\" cy=\"" + px(Y(p.y)) + "\" r=\"4\" fill=\"" +
            (p.highlighted ? "#e15759" : "#4e79a7") + "\" fill-opacity=\"0.8\"><title>" +
            html_escape(p.label + " (" + short_number(p.x) + ", " + short_number(p.y) + ")") + "</title></circle>\n";
  return {svg_open(kWidth, kHeight, "scatter plot of " + y_label + " against " + x_label) + body + "</svg>"};
}

std::vector<BarSegment> breakdown_segments(const workloads::TimeBreakdown& b, double to_unit) {
  std::vector<BarSegment> out = {{"compute", b.compute.raw() * to_unit, kComputeColour},
                                 {"exposed communication", b.exposed_comm.raw() * to_unit, kExposedCommColour}};
  out.push_back({"input stall", b.exposed_input.raw() * to_unit, kInputStallColour});
  if (b.exposed_host.raw() > 0)
    out.push_back({"host dispatch stall", b.exposed_host.raw() * to_unit, kHostStallColour});
  out.push_back({"idle", b.idle.raw() * to_unit, kIdleColour});
  return out;
}

std::string category_colour(std::string_view category) {
  if (category == "compute") return "#4e79a7";
  if (category == "dp_comm") return "#e15759";
  if (category == "tp_comm") return "#f28e2b";
  if (category == "pp_comm") return "#59a14f";
  return kPalette[3 + stable_hash(category) % 7];
}

ReportDocument::ReportDocument(std::string title) : title_(std::move(title)) {}

void ReportDocument::heading(int level, std::string text) {
  blocks_.push_back({Kind::kHeading, std::clamp(level, 2, 4), std::move(text), {}, {}});
}
void ReportDocument::paragraph(std::string text) {
  blocks_.push_back({Kind::kParagraph, 0, std::move(text), {}, {}});
}
void ReportDocument::key_values(std::vector<std::pair<std::string, std::string>> rows) {
  ReportTable t;
  t.header = {"setting", "value"};
  for (auto& [k, v] : rows) t.rows.push_back({ReportCell(std::move(k)), ReportCell(std::move(v))});
  blocks_.push_back({Kind::kKeyValues, 0, {}, std::move(t), {}});
}
void ReportDocument::table(ReportTable table) {
  blocks_.push_back({Kind::kTable, 0, {}, std::move(table), {}});
}
void ReportDocument::figure(Svg svg, std::string caption) {
  blocks_.push_back({Kind::kFigure, 0, std::move(caption), {}, std::move(svg.markup)});
}

std::string ReportDocument::html() const {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" << html_escape(title_)
    << "</title>\n<style>\n"
    << kCss << "</style>\n</head>\n<body>\n<h1>" << html_escape(title_) << "</h1>\n";
  for (const Block& b : blocks_) {
    switch (b.kind) {
      case Kind::kHeading:
        o << "<h" << b.level << ">" << html_escape(b.text) << "</h" << b.level << ">\n";
        break;
      case Kind::kParagraph:
        o << "<p>" << html_escape(b.text) << "</p>\n";
        break;
      case Kind::kKeyValues:
        o << "<table class=\"kv\">\n<tbody>\n";
        for (const auto& row : b.table.rows)
          o << "<tr><th scope=\"row\">" << html_escape(row[0].text) << "</th><td>" << html_escape(row[1].text)
            << "</td></tr>\n";
        o << "</tbody>\n</table>\n";
        break;
      case Kind::kTable: {
        const ReportTable& t = b.table;
        auto right = [&](std::size_t c) { return c < t.right_aligned.size() && t.right_aligned[c]; };
        o << "<table>\n<thead>\n<tr>";
        for (std::size_t c = 0; c < t.header.size(); ++c)
          o << (right(c) ? "<th class=\"num\">" : "<th>") << html_escape(t.header[c]) << "</th>";
        o << "</tr>\n</thead>\n<tbody>\n";
        for (const auto& row : t.rows) {
          o << "<tr>";
          for (std::size_t c = 0; c < t.header.size(); ++c) {
            const ReportCell cell = c < row.size() ? row[c] : ReportCell();
            std::string cls = right(c) ? "num" : "";
            if (cell.best) cls += cls.empty() ? "best" : " best";
            if (cell.tone == ReportCell::Tone::kBetter) cls += cls.empty() ? "better" : " better";
            if (cell.tone == ReportCell::Tone::kWorse) cls += cls.empty() ? "worse" : " worse";
            o << (cls.empty() ? "<td>" : "<td class=\"" + cls + "\">") << html_escape(cell.text)
              << (cell.best ? " *" : "") << "</td>";
          }
          o << "</tr>\n";
        }
        o << "</tbody>\n</table>\n";
        break;
      }
      case Kind::kFigure:
        o << "<figure>\n" << b.svg << "\n<figcaption>" << html_escape(b.text) << "</figcaption>\n</figure>\n";
        break;
    }
  }
  o << "<footer>Written by clustersim 0.1.0. Best values of a row are marked * (and bold).</footer>\n"
    << "</body>\n</html>\n";
  return o.str();
}

std::string ReportDocument::markdown() const {
  std::ostringstream o;
  o << "# " << markdown_escape(title_) << "\n";
  auto table = [&](const ReportTable& t) {
    auto right = [&](std::size_t c) { return c < t.right_aligned.size() && t.right_aligned[c]; };
    o << "\n|";
    for (const std::string& h : t.header) o << " " << markdown_escape(h) << " |";
    o << "\n|";
    for (std::size_t c = 0; c < t.header.size(); ++c) o << (right(c) ? " ---: |" : " --- |");
    o << "\n";
    for (const auto& row : t.rows) {
      o << "|";
      for (std::size_t c = 0; c < t.header.size(); ++c) {
        const ReportCell cell = c < row.size() ? row[c] : ReportCell();
        const std::string text = markdown_escape(cell.text);
        o << " " << (cell.best ? "**" + text + " \\***" : text) << " |";
      }
      o << "\n";
    }
  };
  for (const Block& b : blocks_) {
    switch (b.kind) {
      case Kind::kHeading:
        o << "\n" << std::string(static_cast<std::size_t>(b.level), '#') << " " << markdown_escape(b.text) << "\n";
        break;
      case Kind::kParagraph:
        o << "\n" << markdown_escape(b.text) << "\n";
        break;
      case Kind::kKeyValues:
      case Kind::kTable:
        table(b.table);
        break;
      case Kind::kFigure:
        o << "\n_Chart in the HTML report: " << markdown_escape(b.text) << "_\n";
        break;
    }
  }
  return o.str();
}

ReportFormat report_format(const std::string& path) {
  auto ends_with = [&](const char* suffix) {
    const std::string s = suffix;
    if (path.size() < s.size()) return false;
    for (std::size_t i = 0; i < s.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(path[path.size() - s.size() + i])) != s[i]) return false;
    return true;
  };
  if (ends_with(".html") || ends_with(".htm")) return ReportFormat::kHtml;
  if (ends_with(".md") || ends_with(".markdown")) return ReportFormat::kMarkdown;
  throw InputError("command line", 0, 0, "--report",
                   "\"" + path + "\": the report file must end in .html (HTML with charts) or .md (Markdown)");
}

TimelineRecorder::TimelineRecorder(std::vector<std::uint32_t> gpus) : gpus_(std::move(gpus)) {
  std::sort(gpus_.begin(), gpus_.end());
  gpus_.erase(std::unique(gpus_.begin(), gpus_.end()), gpus_.end());
}

void TimelineRecorder::on_task(const sim::TaskRecord& r) {
  if (!std::binary_search(gpus_.begin(), gpus_.end(), r.gpu)) return;
  records_.push_back({r.gpu, std::string(r.stream), std::string(r.category), std::string(r.name), r.start, r.end});
}

std::vector<std::uint32_t> timeline_gpus(const workloads::Scenario& sc) {
  constexpr std::size_t kPerJob = 4, kTotal = 8;
  std::vector<std::uint32_t> out;
  for (const workloads::Job& job : sc.jobs) {
    const auto ranks = static_cast<std::uint32_t>(job.gpus.size());
    if (ranks == 0) continue;
    std::vector<std::uint32_t> picked;
    const workloads::ParallelPlan& p = job.parallel;
    // Where the simulation may stand one data-parallel replica for all, the GPUs come from replica 0, which is
    // always simulated, and of its TP groups tensor ranks 0 and 1 (rank 1 may stand for the others).
    const bool may_reduce = workloads::symmetry_may_apply(sc) && p.gpus() == ranks;
    if (may_reduce && p.pp == 1) {
      const workloads::RankLayout layout(p.tp, p.dp, p.pp, p.rank_order, p.cp, p.ep);
      const std::uint32_t n = std::min<std::uint32_t>({p.tp, 2, kPerJob});
      for (std::uint32_t i = 0; i < n; ++i) picked.push_back(job.gpus[layout.rank({i, 0, 0})]);
    } else if (p.megatron() && p.pp > 1 && p.gpus() == ranks) {
      const workloads::RankLayout layout(p.tp, p.dp, p.pp, p.rank_order, p.cp, p.ep);
      const std::uint32_t n = std::min<std::uint32_t>(p.pp, kPerJob);
      for (std::uint32_t i = 0; i < n; ++i) {
        const std::uint32_t stage = n == 1 ? 0 : i * (p.pp - 1) / (n - 1);
        picked.push_back(job.gpus[layout.rank({0, 0, stage})]);
      }
    } else {
      const std::uint32_t n = std::min<std::uint32_t>(ranks, kPerJob);
      for (std::uint32_t i = 0; i < n; ++i) picked.push_back(job.gpus[n == 1 ? 0 : i * (ranks - 1) / (n - 1)]);
    }
    for (const std::uint32_t g : picked)
      if (out.size() < kTotal && std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string layout_text(const workloads::ParallelPlan& p) {
  std::string s;
  if (p.megatron()) {
    s = "TP " + std::to_string(p.tp) + (p.sequence_parallel ? " (+SP)" : "") +
        (p.cp > 1 ? " x CP " + std::to_string(p.cp) : "") + " x PP " + std::to_string(p.pp) +
        (p.vp > 1 ? " (vp " + std::to_string(p.vp) + ")" : "") + " x DP " + std::to_string(p.dp) +
        (p.ep > 1 ? " (EP " + std::to_string(p.ep) + " within DP)" : "") +
        (p.pp > 1 ? std::string(", ") + workloads::to_string(p.schedule) : std::string(", no pipeline")) +
        ", micro-batch " + std::to_string(p.micro_batch) + " x " + std::to_string(p.grad_accum);
  } else {
    // The framework by name, as the run summary gives it: Horovod, FSDP and nn.DataParallel are no DDP.
    const workloads::Framework fw = p.effective_framework();
    s = std::string(workloads::to_string(fw)) + ": DP " + std::to_string(p.dp) + ", micro-batch " +
        std::to_string(p.micro_batch) + " x grad-accum " + std::to_string(p.grad_accum);
    if (fw == workloads::Framework::kFsdp || fw == workloads::Framework::kDeepSpeed)
      s += ", ZeRO stage " + std::to_string(p.zero_stage) + (p.hybrid_shard ? " (hybrid shard)" : "");
    if (fw == workloads::Framework::kHorovod)
      s += ", fusion buffer " + fmt("%g", p.horovod_fusion.raw() / 1048576.0) + " MiB" +
           (p.horovod_hierarchical ? ", hierarchical AllReduce" : "");
  }
  if (p.recompute != workloads::Recompute::kNone) s += std::string(", recompute ") + workloads::to_string(p.recompute);
  if (p.attention == workloads::AttentionKernel::kFlash)
    s += std::string(", FlashAttention") + (p.flash_kernel != workloads::FlashKernel::kGeneric
                                                ? std::string(" (") + workloads::to_string(p.flash_kernel) + ")"
                                                : std::string());
  return s;
}

std::string cluster_text(const workloads::Scenario& sc) {
  // The scale-up link by its kind (a TPU's ICI is no NVLink; a PCIe-only node has none), the NIC where there is one.
  const auto& c = sc.cluster;
  const bool torus = c.node.scale_up == topology::ScaleUp::kTorus;
  const std::string unit = std::string(" ") + accelerator_noun(c);
  std::vector<std::string> links;
  if (c.node.scale_up != topology::ScaleUp::kPcieOnly)
    links.push_back(std::string(torus ? "ICI " : "NVLink ") + fmt("%g", to_GBps(c.nvlink_per_direction)) + " GB/s");
  if (c.nic_per_direction.raw() > 0)
    links.push_back("NIC " + fmt("%g", c.nic_per_direction.raw() * 8 / 1e9) + " Gbit/s");
  std::string s = std::to_string(c.nodes) + (c.nodes == 1 ? " node x " : " nodes x ") +
                  std::to_string(c.gpus_per_node) + " " + c.gpu + " = " + std::to_string(c.gpu_count()) + unit +
                  (c.gpu_count() == 1 ? "" : "s");
  if (!links.empty())
    s += "; " + links[0] + (links.size() > 1 ? " and " + links[1] : "") + " per" + unit + " per direction";
  // The network between NVLink domains, where there is one, and how its switches route (FLOW's contention).
  if (!c.is_explicit() && topology::has_fabric(c)) {
    const double o = c.fabric.oversubscription;
    s += std::string("; ") + topology::to_string(c.fabric.kind) +
         (o > 1 ? " at " + fmt("%g", o) + ":1" : std::string(", non-blocking")) + ", routed " +
         (c.fabric.routing == topology::FabricRouting::kDestinationModK ? "by destination (D-mod-k)"
          : c.fabric.routing == topology::FabricRouting::kEcmpHash      ? "by ECMP hash"
                                                                        : "adaptively (over every equal-cost path)");
  }
  // NCCL's tuning reads the hosts' CPU vendor across nodes (cluster.proto cpu_vendor).
  if (c.node.cpu_vendor != topology::CpuVendor::kUnspecified)
    s += std::string("; ") + topology::to_string(c.node.cpu_vendor) + " hosts";
  return s;
}

namespace {

std::string duration_text(Seconds s) {
  const double v = s.raw();
  if (v >= 86400) return fmt("%.2f days", v / 86400);
  if (v >= 3600) return fmt("%.2f hours", v / 3600);
  if (v >= 60) return fmt("%.2f minutes", v / 60);
  return fmt("%.3f s", v);
}

std::string pct_text(double part, double whole) {
  return fixed(whole > 0 ? 100 * part / whole : 0, 1);
}

struct BreakdownRow {
  std::string label;
  workloads::TimeBreakdown b;
};

workloads::TimeBreakdown mean_breakdown(const workloads::TimeBreakdown& sum, double n) {
  workloads::TimeBreakdown mean;
  mean.compute = sum.compute / n;
  mean.compute_eager = sum.compute_eager / n;
  mean.exposed_comm = sum.exposed_comm / n;
  for (std::size_t k = 0; k < workloads::kCommKinds; ++k) mean.exposed_by_kind[k] = sum.exposed_by_kind[k] / n;
  mean.exposed_input = sum.exposed_input / n;
  mean.exposed_host = sum.exposed_host / n;
  mean.idle = sum.idle / n;
  return mean;
}

// Per pipeline stage: the mean breakdown over the stage's GPUs (Megatron jobs with PP > 1).
std::vector<BreakdownRow> stage_rows(const workloads::Job& job, const workloads::IterationResult& r) {
  std::vector<BreakdownRow> out;
  const workloads::ParallelPlan& p = job.parallel;
  if (!p.megatron() || p.pp < 2 || r.per_gpu.size() != p.gpus()) return out;
  const workloads::RankLayout layout(p.tp, p.dp, p.pp, p.rank_order, p.cp, p.ep);
  std::vector<workloads::TimeBreakdown> sum(p.pp);
  std::vector<std::uint32_t> count(p.pp, 0);
  for (std::uint32_t rank = 0; rank < r.per_gpu.size(); ++rank) {
    const std::uint32_t s = layout.coord(rank).pp;
    sum[s].compute += r.per_gpu[rank].compute;
    sum[s].compute_eager += r.per_gpu[rank].compute_eager;
    sum[s].exposed_comm += r.per_gpu[rank].exposed_comm;
    for (std::size_t k = 0; k < workloads::kCommKinds; ++k)
      sum[s].exposed_by_kind[k] += r.per_gpu[rank].exposed_by_kind[k];
    sum[s].exposed_input += r.per_gpu[rank].exposed_input;
    sum[s].exposed_host += r.per_gpu[rank].exposed_host;
    sum[s].idle += r.per_gpu[rank].idle;
    ++count[s];
  }
  for (std::uint32_t s = 0; s < p.pp; ++s) {
    const double n = count[s];
    out.push_back(
        {"stage " + std::to_string(s) + " (mean of " + std::to_string(count[s]) + " GPUs)", mean_breakdown(sum[s], n)});
  }
  return out;
}

std::string job_prefix(const workloads::Scenario& sc, const workloads::Job& job) {
  return sc.jobs.size() > 1 ? "job " + job.name + ": " : "";
}

}  // namespace

void add_scenario_sections(ReportDocument& doc, int level, const workloads::Scenario& sc,
                           const workloads::ScenarioResult& result, const TimelineRecorder* timeline) {
  using workloads::to_string;
  // Configuration.
  doc.heading(level, "Configuration");
  std::vector<std::pair<std::string, std::string>> config = {
      {"scenario", sc.name},
      {"file", sc.source_file},
      {"profile", sc.profile.name + " (" + sc.profile.origin + ")"},
      {"cluster", cluster_text(sc)},
      {"fidelity", to_string(sc.fidelity)},
  };
  for (const workloads::Job& job : sc.jobs) {
    const std::string pre = job_prefix(sc, job);
    const auto& m = job.model;
    const auto& t = job.training;
    if (sc.jobs.size() > 1) config.push_back({pre + "GPUs", gpu_ranges_text(job.gpus)});
    config.push_back({pre + "model", m.name + ": " + fmt("%.3f", m.parameter_count() / 1e9) + " B parameters, " +
                                         std::to_string(m.layers) + " layers, hidden " + std::to_string(m.hidden) +
                                         ", " + std::to_string(m.heads) + " heads, sequence " +
                                         std::to_string(m.seq_len)});
    config.push_back({pre + "parallel layout", layout_text(job.parallel)});
    config.push_back({pre + "training", "global batch " + std::to_string(t.global_batch) + " samples, " +
                                            fmt("%g", t.epochs) + " epoch(s) of " + fmt("%.10g", t.samples_per_epoch) +
                                            " samples, " + to_string(t.precision)});
  }
  doc.key_values(std::move(config));

  // Results.
  doc.heading(level, "Results");
  ReportTable res;
  res.header = {"job",       "GPUs",    "iteration time [s]", "tokens/s",
                "samples/s", "MFU [%]", "optimizer steps",    "time to train",
                "GPU-hours", "memory"};
  res.right_aligned = {false, true, true, true, true, true, true, true, true, false};
  std::string oom_jobs;
  for (std::size_t j = 0; j < sc.jobs.size(); ++j) {
    const auto& r = result.jobs[j];
    res.rows.push_back({sc.jobs[j].name, std::to_string(sc.jobs[j].gpus.size()), fmt("%.6f", r.iteration_time.raw()),
                        fmt("%.0f", r.tokens_per_s), fmt("%.2f", r.samples_per_s), fixed(100 * r.mfu, 1),
                        std::to_string(r.training.optimizer_steps), duration_text(r.training.time_to_train),
                        fmt("%.1f", r.training.gpu_hours), r.memory.oom ? "OUT OF MEMORY" : "fits"});
    if (r.memory.oom) oom_jobs += (oom_jobs.empty() ? "" : ", ") + sc.jobs[j].name;
  }
  doc.table(std::move(res));
  if (!oom_jobs.empty())
    doc.paragraph((sc.jobs.size() > 1 ? "Job " + oom_jobs + " runs" : std::string("The job runs")) +
                  " OUT OF MEMORY as configured: its times are those it would take if it fitted (see Memory per "
                  "GPU).");

  // Time breakdown.
  doc.heading(level, "Time breakdown");
  doc.paragraph(std::string("On each GPU compute + exposed communication + input stall + host dispatch stall + ") +
                "idle = the iteration time. compute: the compute stream is busy; exposed communication: a "
                "communication stream is busy while compute is not; " +
                "input stall: only the data loader or host-to-device copy runs; " +
                "host dispatch stall: the GPU waits for the host thread to issue kernels; " +
                "idle: the rest (waiting on other GPUs, the pipeline bubble). \"of which\" columns are parts of "
                "the column before them; exposed communication by kind counts an instant where kinds overlap "
                "for the first of TP, CP, EP, PP, DP. A job row is its GPU with the most "
                "exposed communication; a stage row is the mean over that pipeline stage's GPUs. Where a job runs "
                "PyTorch eager mixed precision (DDP, Horovod, DataParallel), \"of which eager\" is the part of the "
                "compute spent on autocast's weight and gradient casts and the accumulation into .grad.");
  std::vector<BreakdownRow> rows;
  for (std::size_t j = 0; j < sc.jobs.size(); ++j) {
    const auto& r = result.jobs[j];
    rows.push_back(
        {job_prefix(sc, sc.jobs[j]) + "GPU " + std::to_string(r.breakdown_gpu) + " (most exposed comm)", r.breakdown});
    for (BreakdownRow& s : stage_rows(sc.jobs[j], r)) {
      s.label = job_prefix(sc, sc.jobs[j]) + s.label;
      rows.push_back(std::move(s));
    }
  }
  // Host dispatch (host_dispatch.h) gets its columns only when some row has any, as in the text summary.
  bool any_host = false, any_eager = false;
  std::array<bool, workloads::kCommKinds> any_kind{};  // exposed comm by kind: the kinds some row has
  for (const BreakdownRow& row : rows) {
    any_host = any_host || row.b.exposed_host.raw() > 0;
    any_eager = any_eager || row.b.compute_eager.raw() > 0;  // and its column, as `run` prints "of which eager"
    for (std::size_t k = 0; k < workloads::kCommKinds; ++k)
      any_kind[k] = any_kind[k] || row.b.exposed_by_kind[k].raw() > 0;
  }
  ReportTable bt;
  bt.header = {"where", "compute [s]"};
  if (any_eager) bt.header.push_back("of which eager [s]");
  bt.header.push_back("exposed comm [s]");
  for (std::size_t k = 0; k < workloads::kCommKinds; ++k)
    if (any_kind[k])
      bt.header.push_back(std::string("of which ") + workloads::label(static_cast<workloads::CommKind>(k)) + " [s]");
  bt.header.push_back("input stall [s]");
  if (any_host) bt.header.push_back("host dispatch [s]");
  for (const char* h : {"idle [s]", "compute [%]", "exposed comm [%]", "input stall [%]"}) bt.header.push_back(h);
  if (any_host) bt.header.push_back("host dispatch [%]");
  bt.header.push_back("idle [%]");
  bt.right_aligned.assign(bt.header.size(), true);
  bt.right_aligned[0] = false;
  double longest = 0;
  for (const BreakdownRow& row : rows) {
    const workloads::TimeBreakdown& b = row.b;
    const double total =
        b.compute.raw() + b.exposed_comm.raw() + b.exposed_input.raw() + b.exposed_host.raw() + b.idle.raw();
    longest = std::max(longest, total);
    std::vector<ReportCell> cells = {row.label, fmt("%.6f", b.compute.raw())};
    if (any_eager) cells.emplace_back(fmt("%.6f", b.compute_eager.raw()));
    cells.emplace_back(fmt("%.6f", b.exposed_comm.raw()));
    for (std::size_t k = 0; k < workloads::kCommKinds; ++k)
      if (any_kind[k]) cells.emplace_back(fmt("%.6f", b.exposed_by_kind[k].raw()));
    cells.emplace_back(fmt("%.6f", b.exposed_input.raw()));
    if (any_host) cells.emplace_back(fmt("%.6f", b.exposed_host.raw()));
    cells.emplace_back(fmt("%.6f", b.idle.raw()));
    cells.emplace_back(pct_text(b.compute.raw(), total));
    cells.emplace_back(pct_text(b.exposed_comm.raw(), total));
    cells.emplace_back(pct_text(b.exposed_input.raw(), total));
    if (any_host) cells.emplace_back(pct_text(b.exposed_host.raw(), total));
    cells.emplace_back(pct_text(b.idle.raw(), total));
    bt.rows.push_back(std::move(cells));
  }
  doc.table(std::move(bt));
  // Where a job stalls on its input, or sets a loader rate: the input model, as the text summary prints it.
  for (std::size_t j = 0; j < sc.jobs.size(); ++j)
    if (result.jobs[j].breakdown.exposed_input.raw() > 0 || sc.jobs[j].training.loader_samples_per_s_per_node > 0) {
      const InputModelText input = input_model_text(sc.jobs[j]);
      doc.paragraph(job_prefix(sc, sc.jobs[j]) + "Input model: " + input.loader + "; " + input.copy + ".");
    }
  const bool in_ms = longest < 1;
  const double to_unit = in_ms ? 1e3 : 1;
  std::vector<StackedBar> bars;
  for (const BreakdownRow& row : rows) bars.push_back({row.label, breakdown_segments(row.b, to_unit), std::nullopt});
  doc.figure(svg_stacked_bars(bars, in_ms ? "ms" : "s"), "Where the time of one iteration goes");

  // Memory.
  doc.heading(level, "Memory per GPU");
  std::vector<StackedBar> memory_bars;
  for (std::size_t j = 0; j < sc.jobs.size(); ++j) {
    const workloads::MemoryEstimate& m = result.jobs[j].memory;
    if (sc.jobs.size() > 1) doc.heading(level + 1, "Job " + sc.jobs[j].name);
    doc.paragraph("Peak " + fmt("%.2f", to_GiB(m.peak)) + " GiB of " + fmt("%.2f", to_GiB(m.capacity)) + " GiB: " +
                  (m.oom ? "OUT OF MEMORY (capacity exceeded when adding: " + m.breaking_part +
                               "; largest part: " + m.largest_part + ")"
                         : "fits") +
                  (result.jobs[j].stage_peak_memory.size() > 1
                       ? ". Parts of the most loaded pipeline stage, " + std::to_string(result.jobs[j].memory_stage) +
                             " of " + std::to_string(result.jobs[j].stage_peak_memory.size()) + "."
                       : "."));
    ReportTable mt;
    mt.header = {"part", "GiB", "share of capacity [%]"};
    mt.right_aligned = {false, true, true};
    StackedBar bar{sc.jobs.size() > 1 ? sc.jobs[j].name : "GPU", {}, to_GiB(m.capacity)};
    for (std::size_t i = 0; i < m.parts.size(); ++i) {
      const auto& part = m.parts[i];
      mt.rows.push_back({part.name, fmt("%.2f", to_GiB(part.size)), pct_text(part.size.raw(), m.capacity.raw())});
      bar.segments.push_back({part.name, to_GiB(part.size), kPalette[i % 10]});
    }
    mt.rows.push_back({"peak", fmt("%.2f", to_GiB(m.peak)), pct_text(m.peak.raw(), m.capacity.raw())});
    mt.rows.push_back({"capacity", fmt("%.2f", to_GiB(m.capacity)), "100.0"});
    doc.table(std::move(mt));
    memory_bars.push_back(std::move(bar));
  }
  doc.figure(svg_stacked_bars(memory_bars, "GiB"), "Peak memory per GPU by part, against the GPU's capacity");

  // Timeline.
  if (timeline != nullptr) {
    doc.heading(level, "Timeline of one iteration");
    std::vector<std::string> row_names;
    std::vector<TimelineInterval> intervals;
    for (const std::uint32_t g : timeline->gpus()) {
      std::vector<std::string> streams;
      for (const auto& r : timeline->records())
        if (r.gpu == g && std::find(streams.begin(), streams.end(), r.stream) == streams.end())
          streams.push_back(r.stream);
      for (const std::string& s : streams) row_names.push_back("GPU " + std::to_string(g) + " " + s);
    }
    for (const auto& r : timeline->records())
      intervals.push_back({"GPU " + std::to_string(r.gpu) + " " + r.stream, r.category, r.name,
                           sim::to_seconds(r.start).raw(), sim::to_seconds(r.end).raw()});
    if (intervals.empty()) {
      doc.paragraph("No task ran on the GPUs chosen for the timeline.");
    } else {
      std::string gpus;
      for (const std::uint32_t g : timeline->gpus()) gpus += (gpus.empty() ? "" : ", ") + std::to_string(g);
      doc.paragraph("GPUs " + gpus + " of " + std::to_string(sc.cluster.gpu_count()) +
                    ", one row per stream, from the start of the iteration to the end of the last job's optimizer "
                    "step (" +
                    fmt("%.6f", result.makespan.raw()) +
                    " s). Tasks of one kind closer than a pixel are drawn as one bar; hover for names and times.");
      doc.figure(svg_timeline(row_names, intervals, result.makespan.raw()),
                 "Timeline excerpt (Gantt) of one iteration");
    }
  }

  // Links.
  doc.heading(level, "Link utilisation");
  if (sc.fidelity != workloads::Fidelity::kFlow) {
    doc.paragraph("Per-link utilisation needs fidelity FLOW; this scenario runs ANALYTICAL (closed-form collectives).");
  } else if (result.links.empty()) {
    doc.paragraph("No traffic crossed a link (nothing to communicate).");
  } else {
    constexpr std::size_t kLinks = 10;
    const double span = result.makespan.raw();
    const std::size_t shown = std::min(kLinks, result.links.size());
    doc.paragraph("The " + std::to_string(shown) + " busiest of " + std::to_string(result.links.size()) +
                  " links that carried traffic, by bytes. busy: time with at least one flow, as a share of the "
                  "iteration; utilisation: bytes carried / (capacity x iteration time).");
    ReportTable lt;
    lt.header = {
        "link",      "kind", "capacity [GB/s]", "carried [GB]", "busy [%]", "utilisation [%]", "mean while busy [GB/s]",
        "peak flows"};
    lt.right_aligned = {false, false, true, true, true, true, true, true};
    std::vector<StackedBar> link_bars;
    for (std::size_t i = 0; i < shown; ++i) {
      const workloads::LinkUsage& l = result.links[i];
      const double busy = span > 0 ? 100 * l.busy.raw() / span : 0;
      const double util =
          span > 0 && l.capacity.raw() > 0 ? 100 * l.bytes_carried.raw() / (l.capacity.raw() * span) : 0;
      lt.rows.push_back({l.name, l.kind, fmt("%.1f", to_GBps(l.capacity)), fmt("%.3f", l.bytes_carried.raw() / 1e9),
                         fixed(busy, 1), fixed(util, 1),
                         fmt("%.1f", l.busy.raw() > 0 ? l.bytes_carried.raw() / l.busy.raw() / 1e9 : 0),
                         std::to_string(l.peak_flows)});
      link_bars.push_back(
          {l.name,
           {{"utilisation", util, "#4e79a7"}, {"busy below capacity", std::max(0.0, busy - util), "#a0cbe8"}},
           std::nullopt});
    }
    doc.table(std::move(lt));
    doc.figure(svg_stacked_bars(link_bars, "% of the iteration", "capacity", 100),
               "Busiest links: utilisation and busy time");
  }
}

std::string run_report(const workloads::Scenario& sc, const workloads::ScenarioResult& result,
                       const TimelineRecorder* timeline, ReportFormat format) {
  ReportDocument doc("clustersim run: " + sc.name);
  doc.paragraph(
      "One training iteration (optimizer step) simulated by clustersim; the numbers are the same as "
      "those of `clustersim run` and its --json.");
  add_scenario_sections(doc, 2, sc, result, timeline);
  return format == ReportFormat::kHtml ? doc.html() : doc.markdown();
}

}  // namespace clustersim::cli
