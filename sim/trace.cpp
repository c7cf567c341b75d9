#include "sim/trace.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string_view>
#include <tuple>
#include <utility>

namespace clustersim::sim {

std::string format_us(SimTime t) {
  const bool negative = t < 0;
  const std::uint64_t v = negative ? static_cast<std::uint64_t>(-t) : static_cast<std::uint64_t>(t);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%llu.%06llu", negative ? "-" : "",
                static_cast<unsigned long long>(v / 1000000), static_cast<unsigned long long>(v % 1000000));
  return buf;
}

namespace {

// Length of the well-formed UTF-8 sequence starting at s[i] (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF), or 0 when it is not one.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned b0 = byte(0);
  const auto continuation = [&](std::size_t k) { return (byte(k) & 0xC0u) == 0x80u; };
  if (b0 >= 0xC2 && b0 <= 0xDF) return continuation(1) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    const unsigned b1 = byte(1);
    if ((b0 == 0xE0 && b1 < 0xA0) || (b0 == 0xED && b1 > 0x9F)) return 0;  // overlong; surrogate
    return continuation(1) && continuation(2) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    const unsigned b1 = byte(1);
    if ((b0 == 0xF0 && b1 < 0x90) || (b0 == 0xF4 && b1 > 0x8F)) return 0;  // overlong; above U+10FFFF
    return continuation(1) && continuation(2) && continuation(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

std::string json_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      // JSON text is UTF-8: a byte that starts no well-formed sequence becomes U+FFFD, the replacement
      // character, so a stray byte in a scenario's name cannot make the output unreadable.
      const std::size_t n = utf8_length(s, i);
      if (n == 0) {
        out += "\\ufffd";
      } else {
        out.append(s.substr(i, n));
        i += n - 1;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string format_number(double v) {
  if (!std::isfinite(v)) return "null";
  std::array<char, 64> buf{};
  auto res = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), res.ptr);
}

std::string format_arg(std::string_view key, double v) {
  if (!std::isfinite(v)) return "null";
  // Bytes and FLOPs are whole counts (a mean expert load makes fractions of them); anything else keeps 15
  // significant digits, so the same quantity reached by two roundings (280179507.2 and 280179507.20000005)
  // prints the same.
  if (key == "bytes" || key == "flops") v = std::round(v);
  std::array<char, 32> buf{};
  std::snprintf(buf.data(), buf.size(), "%.15g", v);
  return format_number(std::strtod(buf.data(), nullptr));
}

ChromeTraceWriter::ChromeTraceWriter(std::vector<std::string> gpu_labels)
    : gpu_labels_(std::move(gpu_labels)), streams_(gpu_labels_.size()) {}

std::uint32_t ChromeTraceWriter::stream_index(std::uint32_t gpu, std::string_view stream) {
  if (gpu >= streams_.size()) {
    streams_.resize(gpu + 1);
    gpu_labels_.resize(gpu + 1);
  }
  auto& names = streams_[gpu];
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == stream) return static_cast<std::uint32_t>(i);
  names.emplace_back(stream);
  return static_cast<std::uint32_t>(names.size() - 1);
}

std::uint32_t ChromeTraceWriter::label_index(const TaskRecord& r) {
  static const std::vector<TaskArg> kNoArgs;
  const std::vector<TaskArg>& args = r.args ? *r.args : kNoArgs;
  const auto key = std::make_tuple(r.name.data(), r.category.data(), static_cast<const void*>(r.args));
  const auto hit = label_cache_.find(key);
  if (hit != label_cache_.end()) {
    const Label& l = labels_[hit->second];
    if (l.name == r.name && l.category == r.category && l.args == args) return hit->second;
  }
  Label l{std::string(r.name), std::string(r.category), args, {}};
  std::string args_json;
  for (const TaskArg& a : args) {
    if (!args_json.empty()) args_json += ",";
    args_json += "\"" + json_escape(a.key) + "\":";
    args_json += a.text.empty() ? format_arg(a.key, a.number) : "\"" + json_escape(a.text) + "\"";
  }
  // Split around the per-event fields at the '\x1f' (no escaped JSON holds a raw control character).
  l.json = "{\"ph\":\"X\",\"name\":\"" + json_escape(l.name) + "\",\"cat\":\"" + json_escape(l.category) +
           "\",\"pid\":\x1f,\"args\":{" + args_json + "}}";
  labels_.push_back(std::move(l));
  const auto index = static_cast<std::uint32_t>(labels_.size() - 1);
  label_cache_[key] = index;
  return index;
}

void ChromeTraceWriter::keep_only(const std::vector<std::uint32_t>& gpus) {
  keep_.clear();
  for (std::uint32_t g : gpus) {
    if (g >= keep_.size()) keep_.resize(g + 1, false);
    keep_[g] = true;
  }
}

void ChromeTraceWriter::on_task(const TaskRecord& r) {
  if (!keep_.empty() && (r.gpu >= keep_.size() || !keep_[r.gpu])) return;
  events_.push_back(Event{r.gpu, stream_index(r.gpu, r.stream), r.start, r.end, r.task, label_index(r)});
}

void ChromeTraceWriter::add_counter_sample(std::string_view track, SimTime t, double value) {
  std::uint32_t index = 0;
  while (index < counter_tracks_.size() && counter_tracks_[index] != track) ++index;
  if (index == counter_tracks_.size()) counter_tracks_.emplace_back(track);
  counters_.push_back(CounterSample{index, t, counters_.size(), value});
}

std::string ChromeTraceWriter::json() const {
  std::ostringstream out;
  write_json(out);
  return std::move(out).str();
}

void ChromeTraceWriter::write_json(std::ostream& out) const {
  // Thread ids by stream name, the same on every GPU: "compute" first, the rest in name order (streams are met in
  // the order their first task ends, which differs from GPU to GPU and moved the compute row up and down).
  std::vector<std::vector<std::uint32_t>> by_tid(streams_.size());  // per GPU: thread id -> stream index
  std::vector<std::vector<std::uint32_t>> tid(streams_.size());     // per GPU: stream index -> thread id
  for (std::size_t g = 0; g < streams_.size(); ++g) {
    std::vector<std::uint32_t>& by_name = by_tid[g];
    by_name.resize(streams_[g].size());
    for (std::size_t s = 0; s < by_name.size(); ++s) by_name[s] = static_cast<std::uint32_t>(s);
    std::sort(by_name.begin(), by_name.end(), [&](std::uint32_t x, std::uint32_t y) {
      const std::string& a = streams_[g][x];
      const std::string& b = streams_[g][y];
      return std::make_pair(a != "compute", std::string_view(a)) < std::make_pair(b != "compute", std::string_view(b));
    });
    tid[g].resize(by_name.size());
    for (std::size_t t = 0; t < by_name.size(); ++t) tid[g][by_name[t]] = static_cast<std::uint32_t>(t);
  }
  std::vector<std::uint32_t> order(events_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
  std::sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) {
    const Event& a = events_[x];
    const Event& b = events_[y];
    return std::make_tuple(a.gpu, tid[a.gpu][a.stream_index], a.start, a.task) <
           std::make_tuple(b.gpu, tid[b.gpu][b.stream_index], b.start, b.task);
  });
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto line = [&](const std::string& s) {
    if (!first) out << ",\n";
    first = false;
    out << s;
  };
  for (std::size_t g = 0; g < streams_.size(); ++g) {
    if (streams_[g].empty()) continue;
    const std::string pid = std::to_string(g);
    line("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid + ",\"tid\":0,\"args\":{\"name\":\"" +
         json_escape(gpu_labels_[g]) + "\"}}");
    line("{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid + ",\"tid\":0,\"args\":{\"sort_index\":" +
         pid + "}}");
    for (std::size_t t = 0; t < by_tid[g].size(); ++t) {
      const std::string id = std::to_string(t);
      line("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":" + id + ",\"args\":{\"name\":\"" +
           json_escape(streams_[g][by_tid[g][t]]) + "\"}}");
      line("{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" + pid + ",\"tid\":" + id +
           ",\"args\":{\"sort_index\":" + id + "}}");
    }
  }
  // Events: the label's JSON with pid, tid, ts and dur in place of its '\x1f'.
  std::vector<std::size_t> cut(labels_.size());
  for (std::size_t i = 0; i < labels_.size(); ++i) cut[i] = labels_[i].json.find('\x1f');
  std::string text;
  for (const std::uint32_t i : order) {
    const Event& e = events_[i];
    const std::string& l = labels_[e.label].json;
    const std::size_t c = cut[e.label];
    text.assign(l, 0, c);
    text += std::to_string(e.gpu);
    text += ",\"tid\":";
    text += std::to_string(tid[e.gpu][e.stream_index]);
    text += ",\"ts\":";
    text += format_us(e.start);
    text += ",\"dur\":";
    text += format_us(e.end - e.start);
    text.append(l, c + 1, std::string::npos);
    line(text);
  }
  if (!counters_.empty()) {
    const std::string pid = std::to_string(streams_.size());
    line("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid +
         ",\"tid\":0,\"args\":{\"name\":\"network links\"}}");
    line("{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid + ",\"tid\":0,\"args\":{\"sort_index\":" +
         pid + "}}");
    std::vector<const CounterSample*> samples;
    for (const CounterSample& c : counters_) samples.push_back(&c);
    std::sort(samples.begin(), samples.end(), [](const CounterSample* a, const CounterSample* b) {
      return std::tie(a->track, a->time, a->seq) < std::tie(b->track, b->time, b->seq);
    });
    for (const CounterSample* c : samples)
      line("{\"ph\":\"C\",\"name\":\"" + json_escape(counter_tracks_[c->track]) + "\",\"pid\":" + pid +
           ",\"ts\":" + format_us(c->time) + ",\"args\":{\"GB/s\":" + format_number(c->value) + "}}");
  }
  out << "\n]}\n";
}

}  // namespace clustersim::sim
