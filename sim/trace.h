// Observers of a simulation. Models emit typed records to sinks attached at the edge; the engine
// never formats output itself. ChromeTraceWriter turns task records into Chrome trace-event JSON
// (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKvTp0fAw — the format
// Perfetto and chrome://tracing open): one process per GPU, one thread per stream of that GPU,
// one complete ("X") event per task and lane, timestamps in microseconds printed exactly from
// integer picoseconds so files are byte-identical across runs.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "sim/sim_time.h"

namespace clustersim::sim {

struct TaskArg {
  std::string key;
  double number = 0;        // used when text is empty
  std::string text;
  bool operator==(const TaskArg&) const = default;
};

struct TaskRecord {
  std::uint32_t task = 0;
  std::string_view name;
  std::string_view category;
  std::uint32_t gpu = 0;             // the lane this record is for
  std::string_view stream;
  SimTime start = 0;
  SimTime end = 0;
  const std::vector<TaskArg>* args = nullptr;
};

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void on_task(const TaskRecord& record) = 0;
};

class ChromeTraceWriter : public TraceSink {
 public:
  // gpu_labels[g] names GPU g's process (e.g. "node 0 / gpu 3").
  explicit ChromeTraceWriter(std::vector<std::string> gpu_labels);
  void on_task(const TaskRecord& record) override;
  // Keeps the events of these GPUs only (a large run's trace outgrows what viewers load); by default all.
  void keep_only(const std::vector<std::uint32_t>& gpus);
  std::size_t event_count() const { return events_.size(); }
  // A sample of a counter track (e.g. a link's throughput in GB/s) at time t; the track holds its
  // value until the next sample. Counter tracks appear under one extra process, "network links".
  void add_counter_sample(std::string_view track, SimTime t, double value);
  // The complete JSON document, events sorted by (gpu, stream, start, task) for stable output.
  std::string json() const;
  // The same document written to `out` as it is formatted (a large trace is never held twice in memory).
  void write_json(std::ostream& out) const;

 private:
  // What many events share (the same kernel on every GPU and micro-batch): name, category and arguments,
  // kept once with their JSON text. An event is 32 bytes and an index into these.
  struct Label {
    std::string name;
    std::string category;
    std::vector<TaskArg> args;
    std::string json;  // "name":"…","cat":"…" … "args":{…} around the per-event fields, see write_json
  };
  std::vector<bool> keep_;  // per GPU, when keep_only() was called
  struct Event {
    std::uint32_t gpu;
    std::uint32_t stream_index;
    SimTime start;
    SimTime end;
    std::uint32_t task;
    std::uint32_t label;
  };
  static_assert(sizeof(Event) == 32);
  std::uint32_t stream_index(std::uint32_t gpu, std::string_view stream);
  std::uint32_t label_index(const TaskRecord& r);
  std::vector<std::string> gpu_labels_;
  std::vector<std::vector<std::string>> streams_;  // per GPU, in first-seen order
  std::vector<Event> events_;
  std::vector<Label> labels_;
  // Records of one task label carry the same name, category and argument storage: the cache finds its
  // Label by those addresses, then compares the contents (a record's storage may be reused for others).
  std::map<std::tuple<const char*, const char*, const void*>, std::uint32_t> label_cache_;
  struct CounterSample {
    std::uint32_t track;
    SimTime time;
    std::uint64_t seq;
    double value;
  };
  std::vector<std::string> counter_tracks_;
  std::vector<CounterSample> counters_;
};

// Formats picoseconds as microseconds with exactly six decimals ("12.345678"), no rounding.
std::string format_us(SimTime t);
// JSON string escaping; a byte that starts no well-formed UTF-8 sequence becomes \ufffd (U+FFFD).
std::string json_escape(std::string_view s);
// Shortest round-trip decimal for a double, locale-independent ("%.17g"-free, via to_chars).
std::string format_number(double v);
// A task argument as the trace prints it: "bytes" and "flops" rounded to whole counts, any other number to 15
// significant digits, then format_number ("280179507.20000005" prints as "280179507.2").
std::string format_arg(std::string_view key, double v);

}  // namespace clustersim::sim
