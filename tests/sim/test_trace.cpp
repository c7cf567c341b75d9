// Tests of the Chrome/Perfetto trace writer (sim/trace.h): metadata (one process per GPU, one
// thread per stream), one complete "X" event per lane of a collective, microsecond timestamps
// printed exactly from integer picoseconds, arguments, JSON escaping, and byte-identical output
// for identical runs.
#include "sim/trace.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "sim/executor.h"
#include "sim/simulation.h"
#include "sim/task_graph.h"

namespace clustersim::sim {
namespace {

std::size_t count(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t pos = haystack.find(needle); pos != std::string::npos; pos = haystack.find(needle, pos + 1)) ++n;
  return n;
}

TEST_CASE("trace: format_us prints picoseconds as microseconds with exactly six decimals") {
  // 1 us = 10^6 ps, so the six decimals are exactly the ps remainder: no rounding ever happens.
  CHECK(format_us(1234567) == "1.234567");          // 1'234'567 ps = 1 us + 234'567 ps
  CHECK(format_us(0) == "0.000000");
  CHECK(format_us(1) == "0.000001");                // 1 ps
  CHECK(format_us(999'999) == "0.999999");          // not rounded up to 1.000000
  CHECK(format_us(1'000'000) == "1.000000");
  CHECK(format_us(10'000'050) == "10.000050");      // inner zeros kept
  CHECK(format_us(3'600'000'000'000'000) == "3600000000.000000");  // 1 h = 3.6e15 ps = 3.6e9 us
  // INT64_MAX = 9'223'372'036'854'775'807 ps = 9'223'372'036'854.775807 us: no overflow, no
  // loss to floating point.
  CHECK(format_us(std::numeric_limits<SimTime>::max()) == "9223372036854.775807");
  CHECK(format_us(-1) == "-0.000001");
  CHECK(format_us(-1'234'567) == "-1.234567");
}

TEST_CASE("trace: format_us round-trips (property)") {
  // Parse "I.FFFFFF" back: I * 10^6 + F must be the input, and F must have six digits.
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<SimTime> dist(0, std::numeric_limits<SimTime>::max());
  int failures = 0;
  for (int i = 0; i < 10'000; ++i) {
    const SimTime t = i < 5'000 ? dist(rng) : dist(rng) % 10'000'000;  // large and small
    const std::string s = format_us(t);
    const std::size_t dot = s.find('.');
    if (dot == std::string::npos || s.size() - dot - 1 != 6) {
      ++failures;
      continue;
    }
    const SimTime back = std::stoll(s.substr(0, dot)) * 1'000'000 + std::stoll(s.substr(dot + 1));
    if (back != t) ++failures;
  }
  CHECK(failures == 0);
}

TEST_CASE("trace: json_escape") {
  CHECK(json_escape("plain text") == "plain text");
  CHECK(json_escape("") == "");
  CHECK(json_escape("say \"hi\"") == "say \\\"hi\\\"");
  CHECK(json_escape("back\\slash") == "back\\\\slash");
  CHECK(json_escape("line1\nline2") == "line1\\nline2");
  CHECK(json_escape("a\tb\rc") == "a\\tb\\rc");
  // Other control characters (< 0x20) become \u00XX with four hex digits.
  CHECK(json_escape("\x01") == "\\u0001");
  CHECK(json_escape("\x1f") == "\\u001f");
  CHECK(json_escape("\b\f") == "\\u0008\\u000c");
  // UTF-8: well-formed sequences pass (é 2 bytes, € 3, 😀 4); a stray byte, an overlong form (C0 AF for '/'),
  // a surrogate (ED A0 80) or a cut sequence becomes \ufffd, one per byte that starts nothing.
  CHECK(json_escape("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  CHECK(json_escape("bad\xff name") == "bad\\ufffd name");
  CHECK(json_escape("\xc0\xaf") == "\\ufffd\\ufffd");
  CHECK(json_escape("\xed\xa0\x80") == "\\ufffd\\ufffd\\ufffd");
  CHECK(json_escape("cut \xe2\x82") == "cut \\ufffd\\ufffd");
  CHECK(json_escape(std::string_view("a\0b", 3)) == "a\\u0000b");  // an embedded NUL
  // DEL and UTF-8 bytes are valid inside JSON strings and pass through unchanged.
  CHECK(json_escape("\x7f") == "\x7f");
  CHECK(json_escape("\xc2\xb5s") == "\xc2\xb5s");  // "µs"
  CHECK(json_escape("/") == "/");
}

TEST_CASE("trace: format_number is the shortest round-trip form") {
  CHECK(format_number(1048576) == "1048576");
  CHECK(format_number(0) == "0");
  CHECK(format_number(0.5) == "0.5");
  CHECK(format_number(-2.5) == "-2.5");
  CHECK(format_number(0.1) == "0.1");
  CHECK(format_number(1e9) == "1e+09");  // shorter than "1000000000"; valid JSON
  CHECK(format_number(1.0 / 3.0) == "0.3333333333333333");
  CHECK(std::stod(format_number(1.0 / 3.0)) == 1.0 / 3.0);  // round-trips exactly
  CHECK(format_number(std::numeric_limits<double>::quiet_NaN()) == "null");
  CHECK(format_number(std::numeric_limits<double>::infinity()) == "null");
  CHECK(format_number(-std::numeric_limits<double>::infinity()) == "null");
  // Trace arguments: whole bytes and FLOPs (a mean expert load gives 40265318.4 B), 15 significant digits for the
  // rest, so two roundings of one quantity print alike.
  CHECK(format_arg("bytes", 40265318.4) == "40265318");
  CHECK(format_arg("flops", 577243604582.4) == "577243604582");
  CHECK(format_arg("flops", 1.5e9) == "1.5e+09");
  CHECK(format_arg("x", 280179507.20000005) == "280179507.2");
  CHECK(format_arg("x", 280179507.2) == "280179507.2");
  CHECK(format_arg("x", 1.0 / 3.0) == "0.333333333333333");
  CHECK(format_arg("x", std::numeric_limits<double>::quiet_NaN()) == "null");
}

// Runs `graph` to the end and returns its Chrome trace, GPU g's process named gpu_labels[g].
std::string traced_json(const TaskGraph& graph, std::vector<std::string> gpu_labels) {
  Simulation sim;
  ChromeTraceWriter writer(std::move(gpu_labels));
  sim.add_sink(&writer);
  Executor ex(sim, graph);
  ex.start();
  sim.run();
  ex.finish();
  return writer.json();
}

// Two GPUs; a forward pass on each compute stream, then an all-reduce over both dp-comm
// streams. Names and args include characters that need escaping.
struct SmallRun {
  TaskGraph graph;
  std::string json;
  SmallRun() {
    const StreamId c0 = graph.add_stream(0, "compute");
    const StreamId d0 = graph.add_stream(0, "dp-comm");
    const StreamId c1 = graph.add_stream(1, "compute");
    const StreamId d1 = graph.add_stream(1, "dp-comm");
    TaskSpec f0{"fwd0", "compute", {c0}, microseconds(1.234567), {}, {}};
    f0.args = {TaskArg{"flops", 1.5e9, ""}, TaskArg{"layer", 0, "attn \"qkv\""}};
    TaskSpec f1{"fwd1\n", "compute", {c1}, microseconds(2), {}, {}};
    TaskSpec ar{"allreduce", "dp_comm", {d0, d1}, microseconds(3), {0, 1}, {}};
    ar.args = {TaskArg{"bytes", 1048576, ""}, TaskArg{"algo", 0, "ring"}};
    graph.add(f0);
    graph.add(f1);
    graph.add(ar);
    json = traced_json(graph, {"node 0 / gpu 0", "node \"0\" / gpu 1"});
  }
};

TEST_CASE("trace: the complete document for a small run") {
  // Times: fwd0 [0, 1'234'567] ps, fwd1 [0, 2'000'000] ps, allreduce starts at
  // max(1'234'567, 2'000'000) = 2'000'000 ps and lasts 3 us: [2'000'000, 5'000'000] ps.
  // Threads are numbered per GPU by stream name, the same on every GPU: compute = 0, then the others in name
  // order (dp-comm = 1), each with a thread_sort_index of its id. Events are sorted by (gpu, thread, start,
  // task). 1.5e9 prints as 1.5e+09 (shortest form); 1048576 as an integer.
  const std::string expected =
      "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n"
      "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"node 0 / gpu 0\"}},\n"
      "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":0,\"tid\":0,\"args\":{\"sort_index\":0}},\n"
      "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"compute\"}},\n"
      "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":0,\"tid\":0,\"args\":{\"sort_index\":0}},\n"
      "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":1,\"args\":{\"name\":\"dp-comm\"}},\n"
      "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":0,\"tid\":1,\"args\":{\"sort_index\":1}},\n"
      "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"node \\\"0\\\" / gpu 1\"}},\n"
      "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":1,\"tid\":0,\"args\":{\"sort_index\":1}},\n"
      "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"compute\"}},\n"
      "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":1,\"tid\":0,\"args\":{\"sort_index\":0}},\n"
      "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":1,\"args\":{\"name\":\"dp-comm\"}},\n"
      "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":1,\"tid\":1,\"args\":{\"sort_index\":1}},\n"
      "{\"ph\":\"X\",\"name\":\"fwd0\",\"cat\":\"compute\",\"pid\":0,\"tid\":0,\"ts\":0.000000,\"dur\":1.234567,"
      "\"args\":{\"flops\":1.5e+09,\"layer\":\"attn \\\"qkv\\\"\"}},\n"
      "{\"ph\":\"X\",\"name\":\"allreduce\",\"cat\":\"dp_comm\",\"pid\":0,\"tid\":1,\"ts\":2.000000,\"dur\":3.000000,"
      "\"args\":{\"bytes\":1048576,\"algo\":\"ring\"}},\n"
      "{\"ph\":\"X\",\"name\":\"fwd1\\n\",\"cat\":\"compute\",\"pid\":1,\"tid\":0,\"ts\":0.000000,\"dur\":2.000000,"
      "\"args\":{}},\n"
      "{\"ph\":\"X\",\"name\":\"allreduce\",\"cat\":\"dp_comm\",\"pid\":1,\"tid\":1,\"ts\":2.000000,\"dur\":3.000000,"
      "\"args\":{\"bytes\":1048576,\"algo\":\"ring\"}}\n"
      "]}\n";
  const SmallRun run;
  CHECK(run.json == expected);
  // The structure, independently of the exact bytes:
  CHECK(count(run.json, "\"process_name\"") == 2);  // one per GPU
  CHECK(count(run.json, "\"thread_name\"") == 4);   // one per stream
  CHECK(count(run.json, "\"ph\":\"X\"") == 4);      // 2 forwards + 2 lanes of the all-reduce
  CHECK(count(run.json, "\"name\":\"allreduce\"") == 2);
}

TEST_CASE("trace: a stream's thread id does not depend on which of its GPU's streams finishes a task first") {
  // GPU 0's "a-send" finishes its task (1 us) before "compute" (2 us), GPU 1's "compute" (1 us) before "a-send"
  // (2 us). Numbered in completion order, GPU 0 had a-send = 0 and GPU 1 compute = 0, so the compute row moved
  // between GPUs in Perfetto; by name both have compute = 0 and a-send = 1.
  TaskGraph graph;
  const StreamId c0 = graph.add_stream(0, "compute");
  const StreamId s0 = graph.add_stream(0, "a-send");
  const StreamId c1 = graph.add_stream(1, "compute");
  const StreamId s1 = graph.add_stream(1, "a-send");
  graph.add(TaskSpec{"k0", "compute", {c0}, microseconds(2), {}, {}});
  graph.add(TaskSpec{"x0", "pp_comm", {s0}, microseconds(1), {}, {}});
  graph.add(TaskSpec{"k1", "compute", {c1}, microseconds(1), {}, {}});
  graph.add(TaskSpec{"x1", "pp_comm", {s1}, microseconds(2), {}, {}});
  const std::string json = traced_json(graph, {"gpu 0", "gpu 1"});
  for (const char* pid : {"0", "1"}) {
    CAPTURE(pid);
    CHECK(json.find(std::string("\"thread_name\",\"pid\":") + pid + ",\"tid\":0,\"args\":{\"name\":\"compute\"}") !=
          std::string::npos);
    CHECK(json.find(std::string("\"thread_name\",\"pid\":") + pid + ",\"tid\":1,\"args\":{\"name\":\"a-send\"}") !=
          std::string::npos);
  }
  CHECK(json.find("\"name\":\"k0\",\"cat\":\"compute\",\"pid\":0,\"tid\":0,") != std::string::npos);
  CHECK(json.find("\"name\":\"x1\",\"cat\":\"pp_comm\",\"pid\":1,\"tid\":1,") != std::string::npos);
}

TEST_CASE("trace: one X event per lane of a collective") {
  TaskGraph g;
  std::vector<StreamId> lanes;
  for (std::uint32_t gpu = 0; gpu < 8; ++gpu) lanes.push_back(g.add_stream(gpu, "tp"));
  g.add(TaskSpec{"tp_allgather", "tp_comm", lanes, microseconds(7.5), {}, {}});
  Simulation sim;
  std::vector<std::string> labels;
  for (int i = 0; i < 8; ++i) labels.push_back("gpu " + std::to_string(i));
  ChromeTraceWriter writer(labels);
  sim.add_sink(&writer);
  Executor ex(sim, g);
  ex.start();
  sim.run();
  ex.finish();
  const std::string json = writer.json();
  CHECK(count(json, "\"ph\":\"X\"") == 8);
  CHECK(count(json, "\"process_name\"") == 8);
  for (int gpu = 0; gpu < 8; ++gpu) {
    // 7.5 us = 7'500'000 ps -> "7.500000".
    const std::string ev = "{\"ph\":\"X\",\"name\":\"tp_allgather\",\"cat\":\"tp_comm\",\"pid\":" +
                           std::to_string(gpu) + ",\"tid\":0,\"ts\":0.000000,\"dur\":7.500000,\"args\":{}}";
    CHECK(count(json, ev) == 1);
  }
}

TEST_CASE("trace: records fed directly are sorted by (gpu, stream, start, task)") {
  ChromeTraceWriter writer({"g0", "g1", "g2"});
  const std::vector<TaskArg> args{TaskArg{"n", 3, ""}, TaskArg{"zero", 0, ""}};
  // Fed out of order: GPU 1 first, later starts first. GPU 2 never appears (no metadata).
  writer.on_task(TaskRecord{5, "late", "c", 1, "s", 2'000'000, 3'000'000, nullptr});
  writer.on_task(TaskRecord{4, "early", "c", 1, "s", 1'000'000, 1'500'000, &args});
  writer.on_task(TaskRecord{9, "same_start_hi", "c", 0, "x", 10, 20, nullptr});
  writer.on_task(TaskRecord{8, "same_start_lo", "c", 0, "x", 10, 30, nullptr});
  writer.on_task(TaskRecord{1, "other_stream", "c", 0, "y", 0, 5, nullptr});
  const std::string json = writer.json();
  INFO(json);
  // Order of X events: gpu 0 stream x (tid 0): task 8 then 9 (same start, by task id);
  // gpu 0 stream y (tid 1): task 1; gpu 1 stream s: early (1 us) then late (2 us).
  const std::size_t p8 = json.find("same_start_lo");
  const std::size_t p9 = json.find("same_start_hi");
  const std::size_t p1 = json.find("other_stream");
  const std::size_t pe = json.find("\"early\"");
  const std::size_t pl = json.find("\"late\"");
  REQUIRE(p8 != std::string::npos);
  REQUIRE(pl != std::string::npos);
  CHECK(p8 < p9);
  CHECK(p9 < p1);
  CHECK(p1 < pe);
  CHECK(pe < pl);
  CHECK(json.find("\"name\":\"g2\"") == std::string::npos);
  CHECK(count(json, "\"process_name\"") == 2);
  // dur = end - start: 30 - 10 = 20 ps = "0.000020"; 1.5 us - 1 us = 0.5 us = "0.500000".
  CHECK(json.find("\"name\":\"same_start_lo\",\"cat\":\"c\",\"pid\":0,\"tid\":0,\"ts\":0.000010,\"dur\":0.000020")
        != std::string::npos);
  CHECK(json.find("\"ts\":1.000000,\"dur\":0.500000,\"args\":{\"n\":3,\"zero\":0}}") != std::string::npos);
  CHECK(json.find("\"tid\":1,\"args\":{\"name\":\"y\"}") != std::string::npos);
}

TEST_CASE("trace: records that reuse one name and argument storage keep their own contents") {
  // The writer keeps one Label per (name, category, args) storage and checks the contents on each hit: a
  // producer that rewrites its buffers between records must still see each record's own text.
  ChromeTraceWriter writer({"gpu 0"});
  std::string name = "first";
  name.reserve(64);  // the same data() for both names
  std::vector<TaskArg> args = {{"bytes", 1, ""}};
  writer.on_task({0, name, "c", 0, "s", 0, 1000000, &args});
  name.assign("again");
  args[0].number = 2;
  writer.on_task({1, name, "c", 0, "s", 2000000, 3000000, &args});
  writer.on_task({2, name, "c", 0, "s", 4000000, 5000000, &args});  // a hit: same storage, same contents
  const std::string json = writer.json();
  CHECK(json.find("\"name\":\"first\",\"cat\":\"c\",\"pid\":0,\"tid\":0,\"ts\":1.000000") == std::string::npos);
  CHECK(json.find("\"name\":\"first\",\"cat\":\"c\",\"pid\":0,\"tid\":0,\"ts\":0.000000,\"dur\":1.000000,"
                  "\"args\":{\"bytes\":1}}") != std::string::npos);
  CHECK(json.find("\"name\":\"again\",\"cat\":\"c\",\"pid\":0,\"tid\":0,\"ts\":2.000000,\"dur\":1.000000,"
                  "\"args\":{\"bytes\":2}}") != std::string::npos);
  CHECK(json.find("\"name\":\"again\",\"cat\":\"c\",\"pid\":0,\"tid\":0,\"ts\":4.000000,\"dur\":1.000000,"
                  "\"args\":{\"bytes\":2}}") != std::string::npos);
  // write_json gives the bytes json() returns.
  std::ostringstream streamed;
  writer.write_json(streamed);
  CHECK(streamed.str() == json);
}

TEST_CASE("trace: an empty run is a valid empty document") {
  ChromeTraceWriter writer({"gpu 0"});
  CHECK(writer.json() == "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n\n]}\n");
}

// A random graph (collectives, many equal start times) written twice must give identical bytes.
std::string random_run_json(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  TaskGraph g;
  constexpr std::uint32_t kGpus = 4;
  std::vector<std::vector<StreamId>> streams(kGpus);
  for (std::uint32_t gpu = 0; gpu < kGpus; ++gpu)
    for (const char* name : {"compute", "tp", "dp"}) streams[gpu].push_back(g.add_stream(gpu, name));
  std::uniform_int_distribution<int> percent(0, 99);
  std::uniform_int_distribution<std::uint32_t> pick(0, 2);
  std::uniform_int_distribution<std::uint32_t> pick_gpu(0, kGpus - 1);
  for (TaskId i = 0; i < 500; ++i) {
    TaskSpec spec;
    spec.name = "task" + std::to_string(i);
    spec.category = percent(rng) < 50 ? "compute" : "comm";
    if (percent(rng) < 25) {
      const std::uint32_t s = pick(rng);
      for (std::uint32_t gpu = 0; gpu < kGpus; ++gpu) spec.lanes.push_back(streams[gpu][s]);
    } else {
      spec.lanes.push_back(streams[pick_gpu(rng)][pick(rng)]);
    }
    spec.duration = seconds(std::uniform_int_distribution<int>(0, 4)(rng) * 1e-6);  // many ties
    if (i > 0 && percent(rng) < 50) spec.deps.push_back(std::uniform_int_distribution<TaskId>(0, i - 1)(rng));
    spec.args = {TaskArg{"i", static_cast<double>(i), ""}};
    g.add(std::move(spec));
  }
  return traced_json(g, {"a", "b", "c", "d"});
}

TEST_CASE("trace: identical runs give identical bytes") {
  const SmallRun first;
  const SmallRun second;
  CHECK(first.json == second.json);

  const std::string a = random_run_json(77);
  const std::string b = random_run_json(77);
  CHECK(a.size() > 1000);
  CHECK(a == b);
  CHECK(random_run_json(78) != a);  // the seed matters: the test compares real content
}

}  // namespace
}  // namespace clustersim::sim

TEST_CASE("counter tracks: one process for links, samples sorted by track and time") {
  clustersim::sim::ChromeTraceWriter w({"GPU 0"});
  w.add_counter_sample("n0/nic0->leaf0", 2'000'000, 12.5);
  w.add_counter_sample("n0/nic0->leaf0", 1'000'000, 25);
  w.add_counter_sample("a-link", 0, 1);
  const std::string j = w.json();
  // No GPU has tasks, so the links process takes pid 1 (after GPU 0's slot).
  CHECK(j.find("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"network links\"}}") !=
        std::string::npos);
  const auto first = j.find("\"name\":\"n0/nic0->leaf0\",\"pid\":1,\"ts\":1.000000,\"args\":{\"GB/s\":25}");
  const auto second = j.find("\"name\":\"n0/nic0->leaf0\",\"pid\":1,\"ts\":2.000000,\"args\":{\"GB/s\":12.5}");
  const auto other = j.find("\"name\":\"n0/nic0->leaf0\"");
  CHECK(first != std::string::npos);
  CHECK(second != std::string::npos);
  CHECK(first < second);
  // Tracks keep first-seen order: n0/nic0->leaf0 was added first.
  CHECK(other < j.find("\"name\":\"a-link\""));
}
