#include "cli/calibrate_command.h"

#include <algorithm>
#include <array>
#include <boost/program_options.hpp>
#include <charconv>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <ostream>

#include "calibrate/fit.h"
#include "calibrate/nccl_tests_log.h"
#include "cli/command_line.h"
#include "cli/report.h"
#include "sim/input_error.h"

namespace po = boost::program_options;

namespace clustersim::cli {
namespace {

constexpr const char* kUsage =
    "usage: clustersim calibrate <subcommand> ...\n"
    "\n"
    "  import-nccl-tests LOG... -o RAW.textproto [--algo ring] [--proto simple] [--gpu NAME]\n"
    "        nccl-tests logs or validation CSVs -> raw measurements (calibrate/raw.proto)\n"
    "  fit RAW... -o PROFILE.textproto [--base NAME|PATH] [--bands 64K,1M,64M] [--name NAME]\n"
    "        raw measurements -> a hardware profile; prints the fit's residuals\n"
    "  show PROFILE\n"
    "        a profile (built-in name or file) as tables\n"
    "\n"
    "clustersim calibrate <subcommand> --help shows its options.\n";

[[noreturn]] void fail_option(const std::string& option, const std::string& message) {
  throw InputError("command line", 0, 0, option, message);
}

std::string line(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string line(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string out(static_cast<std::size_t>(n > 0 ? n : 0) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), format, again);
  va_end(again);
  out.pop_back();
  return out;
}

// The same file named twice (by any spelling, links followed) would count its measurements twice in the fit.
void refuse_repeated_inputs(const std::vector<std::string>& paths, const char* what) {
  std::vector<std::filesystem::path> seen;
  for (const std::string& path : paths) {
    std::error_code ec;
    const std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
    const std::filesystem::path file = ec ? std::filesystem::path(path).lexically_normal() : p;
    if (std::find(seen.begin(), seen.end(), file) != seen.end())
      fail_option(what, path + " is given twice: its measurements would count twice");
    seen.push_back(file);
  }
}

std::string number(double v, const char* format = "%g") {
  return std::isinf(v) ? std::string(v > 0 ? "inf" : "-inf") : fmt(format, v);
}


// "64K,1M,64M" → {65536, 1048576, 67108864}.
std::vector<std::uint64_t> parse_bands(const std::string& text) {
  std::vector<std::uint64_t> out;
  std::size_t begin = 0;
  const std::string bad =
      "\"" + text +
      "\" is not a comma-separated list of increasing sizes in bytes, with units K, M or G, such as "
      "64K,1M,64M";
  while (begin <= text.size()) {
    std::size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    std::uint64_t v = 0;
    std::size_t i = 0;
    for (; i < item.size() && item[i] >= '0' && item[i] <= '9'; ++i) {
      if (v > (1ull << 50)) fail_option("--bands", bad);
      v = v * 10 + static_cast<std::uint64_t>(item[i] - '0');
    }
    if (i == 0) fail_option("--bands", bad);
    if (i < item.size()) {
      const char u = item[i++];
      const int shift = u == 'K' || u == 'k' ? 10 : u == 'M' || u == 'm' ? 20 : u == 'G' || u == 'g' ? 30 : -1;
      if (shift < 0 || v > (std::numeric_limits<std::uint64_t>::max() >> shift)) fail_option("--bands", bad);
      v <<= shift;
    }
    if (i != item.size() || v == 0 || (!out.empty() && v <= out.back())) fail_option("--bands", bad);
    out.push_back(v);
    begin = end + 1;
  }
  return out;
}

// A whole number in [1, max] ("18"); boost's own conversion would take "-1" as 4294967295.
std::uint32_t parse_count_option(const std::string& text, const std::string& option, std::uint32_t max = 4096) {
  std::uint32_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v == 0 || v > max)
    fail_option(option, "\"" + text + "\" is not a whole number from 1 to " + std::to_string(max));
  return v;
}

std::string output_option(const ParsedCommand& parsed, const std::string& what) {
  const po::variables_map& vm = parsed.options;
  if (!vm.count("output")) fail_option("-o", "missing (required): the " + what + " file to write");
  check_output_options(parsed, {"output"});  // not one of the inputs
  return vm["output"].as<std::string>();
}

int import_command(const std::vector<std::string>& args, std::ostream& out) {
  po::options_description named(
      "clustersim calibrate import-nccl-tests LOG... -o RAW.textproto [options]\n\n"
      "Reads nccl-tests text logs (any collective; out-of-place and in-place columns become two samples; a log of\n"
      "several tests gives each of them) or CSVs in the layout of validation/nccl/, and writes raw measurements\n"
      "(calibrate/raw.proto).\n\nOptions");
  named.add_options()("help,h", "show this help")("output,o", po::value<std::string>()->value_name("RAW"),
                                                  "the raw measurements file to write (text format)")(
      "algo", po::value<std::string>()->value_name("ALGO"),
      "the algorithm NCCL_ALGO forced when measuring (ring, tree, nvls, ...; default: NCCL's choice)")(
      "proto", po::value<std::string>()->value_name("PROTO"),
      "the protocol NCCL_PROTO forced when measuring (LL, LL128, Simple; default: NCCL's choice)")(
      "gpu", po::value<std::string>()->value_name("NAME"),
      "the GPU's device name, when the logs do not say (e.g. \"NVIDIA H100 80GB HBM3\")")(
      "hosts-per-nvlink-domain", po::value<std::string>()->value_name("N"),
      "hosts that share one NVLink domain, on multi-node NVLink (18 per GB200 NVL72 rack; default: each host its "
      "own), so that `fit` labels runs inside one domain as NVLINK bands");
  const ParsedCommand parsed = parse_command(args, named, "calibrate import-nccl-tests");
  const po::variables_map& vm = parsed.options;
  if (vm.count("help")) {
    out << named << "\n";
    return 0;
  }
  if (parsed.scenarios.empty()) fail_option("LOG", "missing: give one or more nccl-tests logs or CSVs");
  const std::string output = output_option(parsed, "raw measurements");
  calibrate::ImportOptions options;
  if (vm.count("algo")) options.algorithm = vm["algo"].as<std::string>();
  if (vm.count("proto")) options.protocol = vm["proto"].as<std::string>();
  if (vm.count("gpu")) options.gpu = vm["gpu"].as<std::string>();
  if (vm.count("hosts-per-nvlink-domain"))
    options.hosts_per_nvlink_domain =
        parse_count_option(vm["hosts-per-nvlink-domain"].as<std::string>(), "--hosts-per-nvlink-domain");
  refuse_repeated_inputs(parsed.scenarios, "LOG");
  std::vector<calibrate::MeasuredRun> runs;
  for (const std::string& path : parsed.scenarios)
    for (calibrate::MeasuredRun& run : calibrate::read_measured_runs(path)) runs.push_back(std::move(run));
  const schema::RawMeasurements raw = calibrate::import_measured_runs(runs, options);
  std::map<std::string, int> per_op;
  for (const schema::CollectiveSample& s : raw.collectives()) ++per_op[s.op()];
  const std::size_t files = parsed.scenarios.size();
  std::string summary = "# imported " + std::to_string(raw.collectives_size()) + " collective samples from " +
                        std::to_string(files) + (files == 1 ? " file" : " files") +
                        (runs.size() != files ? " (" + std::to_string(runs.size()) + " tests)" : std::string()) + ":";
  for (const auto& [op, n] : per_op) summary += " " + op + " " + std::to_string(n);
  summary += "\n# GPU " + (raw.provenance().gpu().empty() ? std::string("(not stated)") : raw.provenance().gpu()) +
             ", " + std::to_string(raw.provenance().gpus()) + " GPUs, " +
             (raw.provenance().hosts() ? std::to_string(raw.provenance().hosts()) : std::string("?")) +
             (raw.provenance().hosts() == 1 ? " host" : " hosts") + ", NCCL " +
             (raw.provenance().nccl_version().empty() ? std::string("?") : raw.provenance().nccl_version()) + "\n";
  std::map<std::string, std::vector<const calibrate::MeasuredRun*>> per_file_op;  // file and collective → tests
  for (const calibrate::MeasuredRun& run : runs) {
    if (const std::string why = calibrate::import_skip_reason(run); run.test_line > 0 && !why.empty()) {
      summary += "# note: " + calibrate::run_label(run) + " " + why + ": not imported\n";
      continue;
    }
    summary += calibrate::cut_off_note(run) + calibrate::wrong_rows_note(run, "not imported");
    // Where NCCL_DEBUG=INFO shows which algorithms the run connected, and at which row: the samples are labelled
    // with the algorithm --algo names (else NCCL's choice), and this says what that choice was.
    if (const std::string note = calibrate::connected_note(run); !note.empty())
      summary += (runs.size() > 1 ? "# " + calibrate::run_label(run) + ":\n" : std::string()) + note;
    if (run.test_line > 0 && run.op) per_file_op[run.source_file + "\n" + *run.op].push_back(&run);
  }
  // Rows of size 0 (AllGather, ReduceScatter or AlltoAll sizes below ranks x one element: nothing ran, the time is
  // the launch alone) are not samples of the collective; say how many were left out.
  std::size_t empty_rows = 0;
  for (const calibrate::MeasuredRun& run : runs)
    if (run.test_line == 0 || calibrate::import_skip_reason(run).empty())
      for (const calibrate::MeasuredRow& row : run.rows) empty_rows += row.size_bytes == 0 ? 1 : 0;
  if (empty_rows > 0)
    summary += "# note: " + std::to_string(empty_rows) + (empty_rows == 1 ? " row" : " rows") +
               " of size 0 (below ranks x one element: nothing ran) not imported\n";
  // One log measured the same collective twice: both runs are imported, and `fit` sees their samples together.
  for (const auto& [key, tests] : per_file_op) {
    if (tests.size() < 2) continue;
    std::string lines;
    for (const calibrate::MeasuredRun* t : tests) lines += (lines.empty() ? "" : ", ") + std::to_string(t->test_line);
    summary += "# note: " + tests.front()->source_file + " holds " + std::to_string(tests.size()) + " " +
               *tests.front()->op + " tests (lines " + lines + "): all imported; fit takes their samples together\n";
  }
  write_file_atomically(output, calibrate::message_text(raw,
                                                        "Raw measurements imported by `clustersim calibrate "
                                                        "import-nccl-tests` (schema: calibrate/raw.proto)."));
  out << summary << "# wrote " << output << "\n";
  return 0;
}

int fit_command(const std::vector<std::string>& args, std::ostream& out) {
  po::options_description named(
      "clustersim calibrate fit RAW... -o PROFILE.textproto [options]\n\n"
      "Fits a hardware profile to raw measurements (clustersim-bench output or import-nccl-tests; text, JSON\n"
      "or binary calibrate/raw.proto): alpha-beta per collective, algorithm, protocol, link kind and size band,\n"
      "GEMM efficiency table, HBM curve, launch overhead. Everything not measured comes from the base.\n\nOptions");
  named.add_options()("help,h", "show this help")("output,o", po::value<std::string>()->value_name("PROFILE"),
                                                  "the profile file to write (text format)")(
      "base", po::value<std::string>()->value_name("NAME|PATH"),
      "profile for everything not measured (default: the built-in whose GPU matches the raw provenance)")(
      "bands", po::value<std::string>()->value_name("EDGES"),
      "inner edges of the size bands, e.g. 64K,1M,64M (the default: [0,64K) [64K,1M) [1M,64M) [64M,inf))")(
      "name", po::value<std::string>()->value_name("NAME"), "the profile's name (default: <base>-fitted)");
  const ParsedCommand parsed = parse_command(args, named, "calibrate fit");
  const po::variables_map& vm = parsed.options;
  if (vm.count("help")) {
    out << named << "\n";
    return 0;
  }
  if (parsed.scenarios.empty()) fail_option("RAW", "missing: give one or more raw measurement files");
  const std::string output = output_option(parsed, "profile");
  calibrate::FitOptions options;
  if (vm.count("base")) {
    options.base = vm["base"].as<std::string>();
    if (options.base.empty()) fail_option("--base", "empty: give a built-in profile name or a profile file");
  }
  if (vm.count("bands")) options.band_edges = parse_bands(vm["bands"].as<std::string>());
  if (vm.count("name")) {
    options.name = vm["name"].as<std::string>();
    if (options.name.empty()) fail_option("--name", "empty: give the fitted profile a name");
  }
  refuse_repeated_inputs(parsed.scenarios, "RAW");
  std::vector<calibrate::RawInput> raws;
  for (const std::string& path : parsed.scenarios) raws.push_back(calibrate::read_raw(path));
  const calibrate::FitResult result = calibrate::fit_profile(raws, options);
  write_file_atomically(output, result.profile_text);
  out << calibrate::fit_report(result) << "# wrote " << output << "\n";
  return 0;
}

int show_command(const std::vector<std::string>& args, std::ostream& out) {
  po::options_description named(
      "clustersim calibrate show PROFILE\n\nPrints a profile (built-in name or file) as tables.\n\nOptions");
  named.add_options()("help,h", "show this help");
  const ParsedCommand parsed = parse_command(args, named, "calibrate show");
  if (parsed.options.count("help")) {
    out << named << "\n";
    return 0;
  }
  if (parsed.scenarios.size() != 1)
    fail_option(
        "PROFILE", "give exactly one profile (built-in: " + [] {
          std::string s;
          for (const std::string& n : calibrate::builtin_profile_names()) s += (s.empty() ? "" : ", ") + n;
          return s;
        }() + ", or a file)");
  out << profile_tables(calibrate::load_profile(parsed.scenarios[0]));
  return 0;
}

std::string per_protocol(const calibrate::NcclTuning::PerProtocol& v) {
  return number(v[0]) + " / " + number(v[1]) + " / " + number(v[2]);
}

std::string per_nodes(const std::array<double, 3>& v) {
  return number(v[0]) + " / " + number(v[1]) + " / " + number(v[2]);
}

}  // namespace

std::string profile_tables(const calibrate::HardwareProfile& p) {
  std::string o = "profile " + p.name + " (" + p.origin + ")\n\nprovenance\n";
  const calibrate::Provenance& v = p.provenance;
  auto field = [&](const char* name, const std::string& value) {
    if (!value.empty()) o += line("  %-14s %s\n", name, value.c_str());
  };
  field("source", v.source);
  field("date", v.date);
  field("notes", v.notes);
  field("gpu", v.gpu);
  field("driver", v.driver_version);
  field("cuda", v.cuda_version);
  field("nccl", v.nccl_version);
  field("hosts", v.hosts ? std::to_string(v.hosts) : "");
  field("raw sha256", v.raw_sha256.empty() ? "(none: not fitted from raw measurements)" : v.raw_sha256);
  for (const std::string& f : v.raw_files) field("raw file", f);

  const calibrate::GpuPerformance& g = p.gpu;
  o += "\ngpu " + g.gpu + "\n";
  o += line("  %-30s BF16 %s  FP16 %s  TF32 %s  FP32 %s  FP8 %s\n", "dense peak (TFLOP/s)",
            number(to_TFLOPps(g.peak_bf16)).c_str(), number(to_TFLOPps(g.peak_fp16)).c_str(),
            number(to_TFLOPps(g.peak_tf32)).c_str(), number(to_TFLOPps(g.peak_fp32)).c_str(),
            g.peak_fp8.raw() > 0 ? number(to_TFLOPps(g.peak_fp8)).c_str() : "- (none)");
  o += line("  %-30s %s GB/s x efficiency %s\n", "HBM", number(g.hbm_bandwidth.raw() / 1e9).c_str(),
            number(g.hbm_efficiency).c_str());
  o += line("  %-30s %s GiB\n", "memory capacity", number(g.memory_capacity.raw() / 1073741824.0).c_str());
  o += line("  %-30s %s\n", "gemm efficiency (no table)", number(g.gemm_efficiency).c_str());
  if (g.sm_count > 0)
    o += line("  %-30s %u SMs, tile %u x %u (either way round; without a table entry of the dtype)\n",
              "tile and wave quantisation", g.sm_count, g.gemm_tile_m, g.gemm_tile_n);
  else
    o += line("  %-30s not modelled (no sm_count)\n", "tile and wave quantisation");
  o += line("  %-30s %s us\n", "kernel launch", number(to_us(g.kernel_launch)).c_str());
  o += line("  %-30s %s (compute runs at 1/factor speed while communication runs)\n", "compute slowdown during comm",
            number(g.compute_slowdown_during_comm).c_str());
  auto rate = [&](const calibrate::GpuPerformance::AttentionRate& r) {
    return r.present() ? number(r.forward) + " / " + number(r.backward) : std::string("- (none)");
  };
  o += line("  %-30s FA2 %s  FA3 %s  TRITON %s (forward / backward, of the BF16 peak, over executed FLOPs)\n",
            "flash attention kernels", rate(g.flash_fa2).c_str(), rate(g.flash_fa3).c_str(),
            rate(g.flash_triton).c_str());

  o += "\nGEMM efficiency table (nearest entry of the dtype in log(M, N, K))\n";
  if (g.gemm_table.empty()) {
    o += "  (empty: gemm efficiency " + number(g.gemm_efficiency) + " for every GEMM" +
         (g.sm_count > 0 ? std::string(", times its tile and wave utilisation") : std::string()) + ")\n";
  } else {
    o += line("  %8s %8s %8s  %-5s  %10s  %9s\n", "M", "N", "K", "dtype", "efficiency", "TFLOP/s");
    for (const calibrate::GemmEfficiencyPoint& e : g.gemm_table) {
      const FlopsPerSecond peak = calibrate::dense_peak(g, e.dtype);
      o += line("  %8llu %8llu %8llu  %-5s  %10.3f  %9.1f\n", static_cast<unsigned long long>(e.m),
                static_cast<unsigned long long>(e.n), static_cast<unsigned long long>(e.k), to_string(e.dtype),
                e.efficiency, to_TFLOPps(peak) * e.efficiency);
    }
  }

  o += "\nHBM bandwidth curve (linear in log(bytes), clamped)\n";
  if (g.hbm_curve.empty()) {
    o += "  (empty: " + number(g.hbm_bandwidth.raw() / 1e9 * g.hbm_efficiency) + " GB/s at every size)\n";
  } else {
    o += line("  %14s  %10s\n", "bytes", "GB/s");
    for (const calibrate::HbmBandwidthPoint& h : g.hbm_curve)
      o += line("  %14.0f  %10.1f\n", h.size.raw(), h.bandwidth.raw() / 1e9);
  }

  const calibrate::CollectiveConstants& c = p.collectives;
  o += "\nalpha-beta bands (t = alpha + size * busbw_factor / busbw)\n";
  if (c.bands.empty()) {
    o += "  (none: collectives use the physical model)\n";
  } else {
    o += line("  %-14s %-8s %-7s %-6s %5s %-22s %10s %10s %6s %8s %8s\n", "op", "algo", "proto", "link", "ranks", "band",
              "alpha(us)", "busbw", "points", "mean err", "max err");
    for (const calibrate::AlphaBetaBand& b : c.bands) {
      const std::string band =
          "[" + calibrate::size_text(b.min_bytes) + ", " + (b.max_bytes ? calibrate::size_text(*b.max_bytes) : "inf") + ")";
      o += line("  %-14s %-8s %-7s %-6s %5s %-22s %10.2f %10s %6u %7.1f%% %7.1f%%\n", b.op.c_str(), b.algorithm.c_str(),
                b.protocol.c_str(), to_string(b.link), b.ranks ? std::to_string(b.ranks).c_str() : "any", band.c_str(),
                to_us(b.alpha),
                number(b.busbw.raw() / 1e9, "%.1f").c_str(), b.points, 100 * b.mean_relative_error,
                100 * b.max_relative_error);
    }
  }

  o += "\ncollective constants\n";
  o += line("  %-30s %s us\n", "ring base latency", number(to_us(c.ring_base_latency)).c_str());
  o += line("  %-30s %s us\n", "NVLink step latency", number(to_us(c.nvlink_step_latency)).c_str());
  o += line("  %-30s %s us\n", "network step latency", number(to_us(c.network_step_latency)).c_str());
  o += line("  %-30s %s\n", "NVLink bus efficiency", number(c.nvlink_bus_efficiency).c_str());
  if (c.nvlink_allgather_bus_efficiency > 0)
    o += line("  %-30s %s\n", "NVLink bus efficiency, AllGather", number(c.nvlink_allgather_bus_efficiency).c_str());
  o += line("  %-30s %s\n", "network bus efficiency", number(c.network_bus_efficiency).c_str());
  o += line("  %-30s %s GB/s\n", "NVLS per GPU", number(c.nvls_bandwidth.raw() / 1e9).c_str());

  const calibrate::NcclTuning& t = c.nccl;
  o += "\nNCCL tuning constants";
  if (!t.present) {
    o += "\n  (none: ring/Simple only)\n";
    return o;
  }
  o += " (LL / LL128 / Simple; per node count 1 / 2 / >2)\n";
  o += line("  %-30s %s\n", "source", t.source.c_str());
  if (!t.nccl_version.empty()) o += line("  %-30s %s\n", "NCCL version", t.nccl_version.c_str());
  o += line("  %-30s %u\n", "channels", t.channels);
  o += line("  %-30s %s us\n", "ring base latency", per_protocol(t.ring_base_us).c_str());
  o += line("  %-30s %s us\n", "tree base latency", per_protocol(t.tree_base_us).c_str());
  o += line("  %-30s %s us\n", "ring NVLink latency", per_protocol(t.ring_nvlink_us).c_str());
  o += line("  %-30s %s us\n", "tree NVLink latency", per_protocol(t.tree_nvlink_us).c_str());
  o += line("  %-30s %s us\n", "NVLS NVLink latency", per_protocol(t.nvls_nvlink_us).c_str());
  o += line("  %-30s %s us\n", "ring NET latency", per_protocol(t.ring_net_us).c_str());
  o += line("  %-30s %s us\n", "tree NET latency", per_protocol(t.tree_net_us).c_str());
  o += line("  %-30s %s GB/s\n", "LL max bus bandwidth", per_nodes(t.ll_max_bus_GBps).c_str());
  o += line("  %-30s - / %s / %s GB/s\n", "  on AMD hosts", number(t.ll_max_bus_amd_GBps[0]).c_str(),
            number(t.ll_max_bus_amd_GBps[1]).c_str());
  o += line("  %-30s %s GB/s\n", "ring LL128 per channel", per_nodes(t.ring_ll128_per_channel_GBps).c_str());
  o += line("  %-30s %s GB/s\n", "tree per channel", per_nodes(t.tree_per_channel_GBps).c_str());
  o += line("  %-30s %s\n", "NVLS efficiency", number(t.nvls_efficiency).c_str());
  o += line("  %-30s %s\n", "CollNetDirect efficiency", number(t.collnet_direct_efficiency).c_str());
  if (t.nvlstree_per_channel_GBps[1] > 0 || t.nvlstree_per_channel_GBps[2] > 0)
    o += line("  %-30s base %s us, NVLink %s us, NET %s us, per channel %s GB/s\n", "NVLSTree (Simple)",
              number(t.nvlstree_base_us[2]).c_str(), number(t.nvlstree_nvlink_us[2]).c_str(),
              number(t.nvlstree_net_us[2]).c_str(), per_nodes(t.nvlstree_per_channel_GBps).c_str());
  else
    o += line("  %-30s none\n", "NVLSTree");
  if (t.pat_bus_efficiency > 0)
    o += line("  %-30s base %s us, NET %s us, bus efficiency %s\n", "PAT (Simple)", number(t.pat_base_us[2]).c_str(),
              number(t.pat_net_us[2]).c_str(), number(t.pat_bus_efficiency).c_str());
  else
    o += line("  %-30s none (NCCL before 2.23)\n", "PAT");
  o += line("  %-30s %s us (AMD hosts %s us)\n", "net overhead", number(t.net_overhead_us).c_str(),
            number(t.net_overhead_amd_us).c_str());
  return o;
}

int calibrate_command(const std::vector<std::string>& args, std::ostream& out) {
  if (args.empty()) {
    throw InputError("command line", 0, 0, "calibrate",
                     "missing subcommand: one of fit, import-nccl-tests, show (clustersim calibrate --help)");
  }
  const std::string sub = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "-h" || sub == "--help" || sub == "help") {
    out << kUsage;
    return 0;
  }
  if (sub == "fit") return fit_command(rest, out);
  if (sub == "import-nccl-tests") return import_command(rest, out);
  if (sub == "show") return show_command(rest, out);
  throw InputError("command line", 0, 0, "calibrate",
                   "unknown subcommand '" + sub + "'; one of fit, import-nccl-tests, show");
}

}  // namespace clustersim::cli
