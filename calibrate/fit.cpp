#include "calibrate/fit.h"

#include <google/protobuf/text_format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "calibrate/hardware_profile.h"
#include "sim/input_error.h"

namespace clustersim::calibrate {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- SHA-256 (FIPS 180-4) -----------------------------------------------------------------------------

constexpr std::array<std::uint32_t, 64> kRoundConstants = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr std::uint32_t rotr(std::uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

void sha256_block(std::array<std::uint32_t, 8>& h, const unsigned char* p) {
  std::array<std::uint32_t, 64> w{};
  for (int i = 0; i < 16; ++i)
    w[i] = (std::uint32_t{p[4 * i]} << 24) | (std::uint32_t{p[4 * i + 1]} << 16) | (std::uint32_t{p[4 * i + 2]} << 8) |
           std::uint32_t{p[4 * i + 3]};
  for (int i = 16; i < 64; ++i) {
    const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
  for (int i = 0; i < 64; ++i) {
    const std::uint32_t s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
    const std::uint32_t ch = (e & f) ^ (~e & g);
    const std::uint32_t t1 = hh + s1 + ch + kRoundConstants[i] + w[i];
    const std::uint32_t s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
    const std::uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
    const std::uint32_t t2 = s0 + maj;
    hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

// ---- names ----------------------------------------------------------------------------------------------

constexpr std::array<std::string_view, 7> kOps = {"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                                  "reduce",     "alltoall",       "sendrecv"};
constexpr std::array<std::string_view, 9> kAlgorithms = {"ring", "tree",         "nvls", "nvlstree", "collnet",
                                                         "pat",  "hierarchical", "p2p",  "default"};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

template <std::size_t N>
std::string list_of(const std::array<std::string_view, N>& names) {
  std::string out;
  for (std::string_view n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

// nccl-tests' names; "allreduce", "AllReduce", "all_reduce_perf" also accepted. "" when unknown.
std::string canonical_op(std::string_view name) {
  std::string key = lower(name);
  for (std::string_view suffix : {"_perf_mpi", "_perf"})
    if (key.size() > suffix.size() && key.substr(key.size() - suffix.size()) == suffix)
      key.resize(key.size() - suffix.size());
  std::string bare = key;
  bare.erase(std::remove(bare.begin(), bare.end(), '_'), bare.end());
  for (std::string_view op : kOps) {
    std::string b(op);
    b.erase(std::remove(b.begin(), b.end(), '_'), b.end());
    if (bare == b) return std::string(op);
  }
  return {};
}

std::string canonical_algorithm(std::string_view name) {
  const std::string key = lower(name);
  if (key.empty()) return "default";
  if (key == "collnetdirect" || key == "collnet_direct") return "collnet";
  if (key == "nvls_tree") return "nvlstree";
  for (std::string_view a : kAlgorithms)
    if (key == a) return std::string(a);
  return {};
}

// NCCL algorithms (NCCL_ALGO names, nccl.md) that clustersim does not model, so that no band can stand for them:
// CollNetChain. clustersim-bench measures it when asked. "" for any other name.
std::string unmodelled_algorithm(std::string_view name) {
  const std::string key = lower(name);
  if (key == "collnetchain" || key == "collnet_chain") return "collnetchain";
  return {};
}

std::string canonical_protocol(std::string_view name) {
  const std::string key = lower(name);
  if (key.empty() || key == "default") return "default";
  if (key == "ll") return "LL";
  if (key == "ll128") return "LL128";
  if (key == "simple") return "Simple";
  return {};
}

double busbw_factor(const std::string& op, std::uint32_t ranks) {  // nccl-tests PERFORMANCE.md
  const double n = ranks;
  if (op == "all_reduce") return n > 1 ? 2 * (n - 1) / n : 1;
  if (op == "reduce_scatter" || op == "all_gather" || op == "alltoall") return n > 1 ? (n - 1) / n : 1;
  return 1;
}

std::vector<std::string> tokens(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      cur += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    } else if (!cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(cur);
  out.erase(std::remove(out.begin(), out.end(), "NVIDIA"), out.end());
  return out;
}

std::string builtin_choices() {
  std::string out;
  for (const std::string& n : builtin_profile_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}


}  // namespace

std::string sha256_hex(std::string_view bytes) {
  std::array<std::uint32_t, 8> h = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t full = bytes.size() / 64;
  for (std::size_t i = 0; i < full; ++i) sha256_block(h, data + 64 * i);
  // Padding: 0x80, zeros, then the message length in bits, big-endian, to a multiple of 64 bytes.
  std::array<unsigned char, 128> tail{};
  const std::size_t rest = bytes.size() - 64 * full;
  std::copy(data + 64 * full, data + bytes.size(), tail.begin());
  tail[rest] = 0x80;
  const std::size_t tail_len = rest + 1 + 8 <= 64 ? 64 : 128;
  const std::uint64_t bits = static_cast<std::uint64_t>(bytes.size()) * 8;
  for (int i = 0; i < 8; ++i) tail[tail_len - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  for (std::size_t off = 0; off < tail_len; off += 64) sha256_block(h, tail.data() + off);
  std::string out;
  char buf[9];
  for (std::uint32_t v : h) {
    std::snprintf(buf, sizeof buf, "%08x", v);
    out += buf;
  }
  return out;
}

// ---- import ---------------------------------------------------------------------------------------------

std::string import_skip_reason(const MeasuredRun& run) {
  if (run.rows.empty()) return "printed no result rows (it failed, or the log is cut off)";
  if (!run.op) return "does not say which collective it measured";
  if (canonical_op(*run.op).empty()) return "measured " + *run.op + ", which clustersim does not model";
  return "";
}

schema::RawMeasurements import_measured_runs(const std::vector<MeasuredRun>& runs, const ImportOptions& options) {
  std::string algorithm = canonical_algorithm(options.algorithm);
  if (algorithm.empty()) algorithm = unmodelled_algorithm(options.algorithm);  // imported; `fit` skips it
  if (algorithm.empty())
    throw InputError("command line", 0, 0, "--algo",
                     "\"" + options.algorithm + "\" is not an algorithm; one of " + list_of(kAlgorithms));
  const std::string protocol = canonical_protocol(options.protocol);
  if (protocol.empty())
    throw InputError("command line", 0, 0, "--proto",
                     "\"" + options.protocol + "\" is not a protocol; one of LL, LL128, Simple, default");
  schema::RawMeasurements out;
  schema::RawProvenance& prov = *out.mutable_provenance();
  std::string sources, gpu_source;
  // A test of a log of several that cannot be imported (no rows, no name, a collective clustersim does not model)
  // is left out with a note (import_skip_reason) as long as another run can be; alone, it is an error below.
  const bool any_importable =
      std::any_of(runs.begin(), runs.end(), [](const MeasuredRun& r) { return import_skip_reason(r).empty(); });
  for (const MeasuredRun& run : runs) {
    const std::string& file = run.source_file;
    const int line = run.test_line;  // where the test begins in a log of several, else 0
    if (run.test_line > 0 && any_importable && !import_skip_reason(run).empty()) continue;
    if (run.rows.empty())
      throw InputError(file, line, 0, "",
                       "printed no result rows (it failed, or the log is cut off); nothing to import");
    if (!run.op)
      throw InputError(file, line, 0, "",
                       "does not say which collective it measured (no \"Collective test\" line, "
                       "\"collective=\" or *_perf command); nothing to import");
    const std::string op = canonical_op(*run.op);
    if (op.empty())
      throw InputError(file, line, 0, "", "measured " + *run.op + "; known collectives: " + list_of(kOps));
    if (!run.gpus)
      throw InputError(file, line, 0, "",
                       "does not say how many GPUs took part (no \"# Rank\" lines or \"GPUs=\"); the bus bandwidth "
                       "needs it");
    if (sources != file && !sources.ends_with(", " + file)) sources += (sources.empty() ? "" : ", ") + file;
    if (prov.nccl_version().empty() && run.nccl_version) prov.set_nccl_version(*run.nccl_version);
    if (prov.gpus() == 0) prov.set_gpus(*run.gpus);
    if (prov.hosts() == 0 && run.nodes) prov.set_hosts(*run.nodes);
    prov.set_hosts_per_nvlink_domain(options.hosts_per_nvlink_domain);
    if (prov.launch_mode().empty() && run.gpus_per_process)
      prov.set_launch_mode(*run.gpus_per_process == 1
                               ? "one process per GPU"
                               : "one process, " + std::to_string(*run.gpus_per_process) + " GPUs");
    // One GPU type per raw file, as `fit` wants it: its provenance names one GPU.
    const std::string gpu = options.gpu.empty() ? gpu_name_from_headers(run.header_lines) : options.gpu;
    if (prov.gpu().empty()) {
      prov.set_gpu(gpu);
      gpu_source = run_label(run);
    } else if (!gpu.empty() && gpu != prov.gpu()) {
      throw InputError(file, line, 0, "",
                       "measured on \"" + gpu + "\" but " + gpu_source + " on \"" + prov.gpu() +
                           "\"; import one GPU type at a time");
    }
    for (const MeasuredRow& row : run.rows) {
      if (row.size_bytes == 0) continue;  // nothing ran (AG/RS sizes below ranks·16 B)
      for (const bool in_place : {false, true}) {
        const double time = in_place ? row.time_us_ip : row.time_us_oop;
        if (!std::isfinite(time) || has_wrong(row, in_place)) continue;  // not run, or broken (wrong_rows_note)
        schema::CollectiveSample& s = *out.add_collectives();
        s.set_op(op);
        s.set_algorithm(algorithm);
        s.set_protocol(protocol);
        s.set_ranks(*run.gpus);
        s.set_nodes(run.nodes.value_or(0));
        s.set_size_bytes(row.size_bytes);
        s.set_count(row.count);
        s.set_type(row.type);
        s.set_in_place(in_place);
        s.set_time_us(time);
        const double algbw = in_place ? row.algbw_ip : row.algbw_oop, busbw = in_place ? row.busbw_ip : row.busbw_oop;
        const double computed = static_cast<double>(row.size_bytes) / 1e3 / time;  // nccl-tests: B / 1e9 / s
        s.set_algbw_gbytes_per_s(std::isfinite(algbw) ? algbw : computed);
        s.set_busbw_gbytes_per_s(std::isfinite(busbw) ? busbw : computed * busbw_factor(op, *run.gpus));
      }
    }
  }
  prov.set_source(sources);
  return out;
}

std::string message_text(const google::protobuf::Message& message, const std::string& header) {
  google::protobuf::TextFormat::Printer printer;
  std::string body;
  printer.PrintToString(message, &body);
  std::string out;
  std::size_t begin = 0;
  while (begin < header.size()) {
    std::size_t end = header.find('\n', begin);
    if (end == std::string::npos) end = header.size();
    out += "# " + header.substr(begin, end - begin) + "\n";
    begin = end + 1;
  }
  return out + body;
}

// ---- reading raw files ----------------------------------------------------------------------------------

void RawInput::fail(const std::string& field_path, const std::string& message) const {
  if (parsed) parsed->fail(field_path, message);
  throw InputError(path, 0, 0, field_path, message);
}

RawInput parse_raw(std::string bytes, const std::string& path) {
  RawInput in;
  in.path = path;
  in.bytes = std::move(bytes);
  in.raw = std::make_unique<schema::RawMeasurements>();
  const std::string ext = lower(std::filesystem::path(path).extension().string());
  const bool control = std::any_of(in.bytes.begin(), in.bytes.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 && c != '\n' && c != '\r' && c != '\t';
  });
  if (ext == ".pb" || ext == ".binpb" || ext == ".bin" || control) {
    if (!in.raw->ParseFromString(in.bytes))
      throw InputError(path, 0, 0, "", "not a RawMeasurements binary protobuf (calibrate/raw.proto), nor text");
    return in;
  }
  in.parsed = std::make_unique<ParsedText>(parse_message(in.bytes, path, syntax_for_path(path), *in.raw));
  return in;
}

RawInput read_raw(const std::string& path) {
  return parse_raw(read_text_file(path), path);
}

// ---- base profile ---------------------------------------------------------------------------------------

std::string gpu_name_from_headers(const std::vector<std::string>& lines) {
  for (const std::string& line : lines) {
    const std::size_t at = line.find("NVIDIA ");
    if (at == std::string::npos) continue;
    std::size_t end = line.find_first_of("(,;\"", at);
    if (end == std::string::npos) end = line.size();
    std::string name = line.substr(at, end - at);
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
    if (name.size() > 7) return name;
  }
  return {};
}

bool same_chip(const std::string& device_name, const std::string& gpu_type) {
  const std::vector<std::string> device = tokens(device_name), gpu = tokens(gpu_type);
  return !gpu.empty() && std::find(device.begin(), device.end(), gpu.front()) != device.end();
}

std::optional<std::string> builtin_profile_for_gpu(const std::string& device_name) {
  const std::vector<std::string> device = tokens(device_name);
  if (device.empty()) return std::nullopt;
  std::optional<std::string> best;
  int best_score = -1;
  bool tie = false;
  for (const std::string& name : builtin_profile_names()) {
    const std::optional<HardwareProfile> p = load_builtin_profile(name);
    // A built-in fitted to one cluster's measurements (vtrain-a100) describes that cluster, not the GPU type:
    // never the base for another cluster's fit.
    if (!p || !p->provenance.raw_sha256.empty()) continue;
    if (!p->provenance.gpu.empty() && tokens(p->provenance.gpu) == device) return name;
    const std::vector<std::string> gpu = tokens(p->gpu.gpu);
    if (gpu.empty() || std::find(device.begin(), device.end(), gpu.front()) == device.end()) continue;
    int score = 0;
    for (const std::string& t : gpu) score += std::find(device.begin(), device.end(), t) != device.end() ? 1 : 0;
    if (score > best_score) {
      best = name, best_score = score, tie = false;
    } else if (score == best_score) {
      tie = true;
    }
  }
  if (tie) return std::nullopt;
  return best;
}

namespace {

struct Base {
  std::string name, reason, text, file;
};

Base choose_base(const std::vector<RawInput>& raws, const FitOptions& options) {
  Base b;
  if (!options.base.empty()) {
    b.name = options.base;
    b.reason = "--base";
    if (std::optional<std::string> text = builtin_profile_source(options.base)) {
      // Measurements of one GPU on another GPU's built-in base would mix two machines' figures (an H100's
      // bands on a TPU's peaks): refused when the measured GPU has a built-in profile of its own.
      for (const RawInput& r : raws) {
        const std::string& gpu = r.raw->provenance().gpu();
        const std::optional<std::string> own = gpu.empty() ? std::nullopt : builtin_profile_for_gpu(gpu);
        if (!own || *own == options.base) continue;
        const std::optional<HardwareProfile> mine = load_builtin_profile(*own);
        const std::optional<HardwareProfile> base = load_builtin_profile(options.base);
        if (mine && base && mine->gpu.gpu != base->gpu.gpu)
          throw InputError("command line", 0, 0, "--base",
                           options.base + " is a profile of " + base->gpu.gpu + ", but " + r.path +
                               " measured \"" + gpu + "\" (built-in profile " + *own + ")");
      }
      b.text = *text;
      b.file = "<built-in profile " + options.base + ">";
      return b;
    }
    std::error_code ec;
    if (!std::filesystem::exists(options.base, ec))
      throw InputError("command line", 0, 0, "--base",
                       "\"" + options.base + "\" is not a built-in profile (" + builtin_choices() + ") or a file");
    b.text = read_text_file(options.base);
    b.file = options.base;
    return b;
  }
  std::string gpu;
  for (const RawInput& r : raws)
    if (!r.raw->provenance().gpu().empty()) {
      gpu = r.raw->provenance().gpu();
      break;
    }
  if (gpu.empty())
    throw InputError("command line", 0, 0, "--base",
                     "the raw measurements do not name their GPU (provenance.gpu); choose the base profile for "
                     "everything not measured with --base: " +
                         builtin_choices());
  const std::optional<std::string> name = builtin_profile_for_gpu(gpu);
  if (!name)
    throw InputError("command line", 0, 0, "--base",
                     "no built-in profile matches the measured GPU \"" + gpu +
                         "\"; choose the base profile with --base: " + builtin_choices() +
                         ", or a profile file (or name the GPU when importing: import-nccl-tests --gpu NAME)");
  // The same chip in another form factor is another machine: an H100 PCIe card has 756 dense BF16 TFLOP/s and
  // 2.0 TB/s of HBM2e, not the SXM part's 989 and 3.35 TB/s; an H100 NVL has 94 GB. The chip token alone would
  // pick the SXM profile and quietly keep its peaks for everything not measured, so the user must choose.
  const std::vector<std::string> device = tokens(gpu);
  const std::vector<std::string> profile_gpu = tokens(load_builtin_profile(*name)->gpu.gpu);
  for (const std::string form : {"PCIE", "NVL"})
    if (std::find(device.begin(), device.end(), form) != device.end() &&
        std::find(profile_gpu.begin(), profile_gpu.end(), form) == profile_gpu.end())
      throw InputError("command line", 0, 0, "--base",
                       "the measured GPU \"" + gpu + "\" is " + (form == "PCIE" ? "a PCIe" : "an NVL") +
                           " part, but the nearest built-in profile, " + *name + ", is " +
                           load_builtin_profile(*name)->gpu.gpu +
                           " (other peak TFLOP/s, memory bandwidth or capacity, which the fit keeps for everything "
                           "not measured); choose the base with --base: " + *name +
                           " to accept it, or a profile file of this GPU");
  b.name = *name;
  b.reason = "the measured GPU \"" + gpu + "\"";
  b.text = *builtin_profile_source(*name);
  b.file = "<built-in profile " + *name + ">";
  return b;
}

double peak_tflops(const schema::GpuProfile& g, schema::GemmSample::DataType dtype) {
  switch (dtype) {
    case schema::GemmSample::FP16:
      return g.peak_fp16_tflops();
    case schema::GemmSample::BF16:
      return g.peak_bf16_tflops();
    case schema::GemmSample::FP32:
      return g.peak_fp32_tflops();
    case schema::GemmSample::TF32:
      return g.peak_tf32_tflops();
    case schema::GemmSample::FP8:
      return g.peak_fp8_tflops();  // 0 when the base profile's GPU has no FP8 tensor cores
    default:
      return 0;
  }
}

struct Point {
  double x = 0;  // size · busbw factor, bytes
  double t = 0;  // µs
  std::uint64_t size = 0;
};

// op, algorithm, protocol, link, ranks (the communicator size: NCCL's latency and busbw differ with it).
using BandKey = std::tuple<std::string, std::string, std::string, int, std::uint32_t>;

// Weighted least squares of t = α + γx with w = 1/t² (see the header).
BandFit fit_band(const std::vector<Point>& pts) {
  BandFit f;
  f.points = static_cast<std::uint32_t>(pts.size());
  std::set<std::uint64_t> sizes;
  for (const Point& p : pts) sizes.insert(p.size);
  if (sizes.size() < 2) {
    f.note = sizes.empty() ? "no samples" : "one size only: a line needs two";
    return f;
  }
  double sw = 0, swx = 0, swt = 0;
  for (const Point& p : pts) {
    const double w = 1 / (p.t * p.t);
    sw += w, swx += w * p.x, swt += w * p.t;
  }
  const double xm = swx / sw, tm = swt / sw;
  double sxx = 0, sxt = 0;
  for (const Point& p : pts) {
    const double w = 1 / (p.t * p.t);
    sxx += w * (p.x - xm) * (p.x - xm), sxt += w * (p.x - xm) * (p.t - tm);
  }
  double gamma = sxt / sxx, alpha = tm - gamma * xm;
  if (gamma <= 0) {
    gamma = 0, alpha = tm;
    f.note = "times do not grow with size: latency only";
  } else if (alpha < 0) {
    double swxt = 0, swxx = 0;
    for (const Point& p : pts) {
      const double w = 1 / (p.t * p.t);
      swxt += w * p.x * p.t, swxx += w * p.x * p.x;
    }
    gamma = swxt / swxx, alpha = 0;
    f.note = "negative intercept: refitted with alpha = 0";
  }
  // A slope so small that the rate passes 1e12 GB/s (times equal but for rounding: the profile refuses such a
  // rate) is no bandwidth term: latency only, as when the times do not grow.
  if (gamma > 0 && 1e-3 / gamma > 1e12) {
    gamma = 0, alpha = tm;
    f.note = "times do not grow with size: latency only";
  }
  f.fitted = true;
  f.alpha_us = alpha;
  f.busbw_GBps = gamma > 0 ? 1e-3 / gamma : kInf;  // γ in µs per byte: 1/γ B/µs = 1e-3/γ GB/s
  double sum = 0, mx = 0;
  for (const Point& p : pts) {
    const double e = std::fabs(alpha + gamma * p.x - p.t) / p.t;
    sum += e, mx = std::max(mx, e);
  }
  f.mean_relative_error = std::min(sum / static_cast<double>(pts.size()), mx);  // sum / n can round past the max
  f.max_relative_error = mx;
  return f;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void check_finite_positive(const RawInput& in, const std::string& path, double v, const char* unit) {
  if (!std::isfinite(v) || v <= 0) in.fail(path, format_number(v) + " must be a number > 0 (" + unit + ")");
}

// A measured time in microseconds: at least 1 ns (nothing a benchmark times is faster; 1e-300 made the fit's
// sums NaN) and at most 1e12 µs, the profile's cap on latencies.
void check_measured_us(const RawInput& in, const std::string& path, double v) {
  if (!std::isfinite(v) || v < 1e-3 || v > 1e12)
    in.fail(path, format_number(v) + " must be a number of microseconds in [1e-3, 1e12]");
}

}  // namespace

FitResult fit_profile(const std::vector<RawInput>& raws, const FitOptions& options) {
  if (raws.empty()) throw InputError("command line", 0, 0, "RAW", "no raw measurement files given");
  for (std::size_t i = 1; i < options.band_edges.size(); ++i)
    if (options.band_edges[i] <= options.band_edges[i - 1])
      throw InputError("command line", 0, 0, "--bands", "band edges must increase");
  FitResult result;
  const Base base = choose_base(raws, options);
  result.base_name = base.name;
  result.base_reason = base.reason;
  // The base must be a valid profile; its message is the starting point.
  if (base.reason == "--base" && !builtin_profile_source(base.name))
    (void)load_profile_file(base.file);
  else
    (void)load_builtin_profile(base.name);
  schema::HardwareProfile& out = result.profile;
  (void)parse_message(base.text, base.file, syntax_for_path(base.file), out);

  // Provenance of the measurements: the first file that states each fact; GPUs must agree.
  schema::RawProvenance prov;
  std::string all_bytes, files;
  std::vector<std::string> raw_files;
  for (const RawInput& r : raws) {
    const schema::RawProvenance& p = r.raw->provenance();
    if (!p.gpu().empty() && !prov.gpu().empty() && tokens(p.gpu()) != tokens(prov.gpu()))
      r.fail("provenance.gpu",
             "\"" + p.gpu() + "\" differs from \"" + prov.gpu() + "\" of an earlier file; fit one GPU type at a time");
    auto take = [](std::string* into, const std::string& v) {
      if (into->empty()) *into = v;
    };
    take(prov.mutable_gpu(), p.gpu());
    take(prov.mutable_driver_version(), p.driver_version());
    take(prov.mutable_cuda_version(), p.cuda_version());
    take(prov.mutable_nccl_version(), p.nccl_version());
    take(prov.mutable_date(), p.date());
    if (prov.hosts() == 0) prov.set_hosts(p.hosts());
    all_bytes += r.bytes;
    raw_files.push_back(sha256_hex(r.bytes) + "  " + r.path);
    files += (files.empty() ? "" : ", ") + r.path;
  }
  result.raw_sha256 = sha256_hex(all_bytes);

  schema::GpuProfile& gpu = *out.mutable_gpu();

  // ---- launch overhead (first: the GEMM and memory samples below are periods that include it)
  std::vector<double> b2b, any;
  for (const RawInput& r : raws)
    for (int i = 0; i < r.raw->launch_size(); ++i) {
      const schema::LaunchSample& l = r.raw->launch(i);
      const std::string p = "launch[" + std::to_string(i) + "].overhead_us";
      if (!std::isfinite(l.overhead_us()) || l.overhead_us() < 0 || l.overhead_us() > 1e12)
        r.fail(p, format_number(l.overhead_us()) + " must be a number of microseconds in [0, 1e12]");
      any.push_back(l.overhead_us());
      if (l.kind() == "empty_kernel_back_to_back") b2b.push_back(l.overhead_us());
    }
  if (!any.empty()) {
    gpu.set_kernel_launch_us(median(b2b.empty() ? any : b2b));
    result.launch_samples = b2b.empty() ? any.size() : b2b.size();
  }

  // The simulator times a kernel as its execution plus kernel_launch_us (compute_model.cpp), while the GEMM and
  // memory samples are back-to-back periods that hold the launch gap already: the execution is the period less
  // the launch, so that the fitted profile gives each sample's measured period back.
  const double launch_us = gpu.kernel_launch_us();

  // ---- GEMM table
  std::map<std::tuple<int, std::uint64_t, std::uint64_t, std::uint64_t>, std::vector<double>> gemm;
  for (const RawInput& r : raws)
    for (int i = 0; i < r.raw->gemm_size(); ++i) {
      const schema::GemmSample& g = r.raw->gemm(i);
      const std::string p = "gemm[" + std::to_string(i) + "]";
      if (g.m() == 0 || g.n() == 0 || g.k() == 0) r.fail(p, "m, n and k must all be >= 1");
      if (std::max({g.m(), g.n(), g.k()}) > kMaxGemmDimension)
        r.fail(p, "m, n and k must be at most 2^31 - 1 (cuBLAS's int)");
      const double peak = peak_tflops(gpu, g.dtype());
      if (g.dtype() == schema::GemmSample::FP8 && peak <= 0)
        r.fail(p + ".dtype", "FP8, but the base profile has no FP8 peak (gpu.peak_fp8_tflops)");
      if (peak <= 0) r.fail(p + ".dtype", "missing; one of FP16, BF16, FP32, TF32, FP8");
      const double flop = 2.0 * static_cast<double>(g.m()) * static_cast<double>(g.n()) * static_cast<double>(g.k());
      double tflops = g.tflops();
      if (tflops == 0 && g.time_us() > 0) tflops = flop / (g.time_us() * 1e-6) / 1e12;
      check_finite_positive(r, p + ".tflops", tflops, "1e12 FLOP/s; or give time_us");
      gemm[{g.dtype(), g.m(), g.n(), g.k()}].push_back(flop / (tflops * 1e12) * 1e6);  // the period, µs
    }
  if (!gemm.empty()) {
    gpu.clear_gemm_table();
    for (const auto& [key, periods] : gemm) {
      const auto [dtype, m, n, k] = key;
      double period_us = 0;
      for (double v : periods) period_us += v;
      period_us /= static_cast<double>(periods.size());
      const double exec_us = period_us - launch_us;
      const double flop = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
      double e = exec_us > 0 ? flop / (exec_us * 1e-6) / 1e12 /
                                   peak_tflops(gpu, static_cast<schema::GemmSample::DataType>(dtype))
                             : kInf;
      if (e > 1) {
        result.notes.push_back(
            "GEMM " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " " +
            schema::GemmSample::DataType_Name(static_cast<schema::GemmSample::DataType>(dtype)) + ": " +
            (std::isfinite(e) ? "measured " + fmt("%.3f", e) + " of the base's peak"
                              : "a period no longer than the kernel launch (" + fmt("%.2f", launch_us) + " us)") +
            "; capped at 1");
        e = 1;
      }
      schema::GemmEfficiency& entry = *gpu.add_gemm_table();
      entry.set_m(m), entry.set_n(n), entry.set_k(k);
      entry.set_dtype(static_cast<schema::GemmSample::DataType>(dtype));
      entry.set_efficiency(e);
    }
    result.gemm_entries = gemm.size();
  }

  // ---- HBM curve
  std::map<std::uint64_t, std::vector<double>> stream, copy;  // periods (µs) per size
  for (const RawInput& r : raws)
    for (int i = 0; i < r.raw->memory_size(); ++i) {
      const schema::MemorySample& m = r.raw->memory(i);
      const std::string p = "memory[" + std::to_string(i) + "]";
      if (m.bytes() == 0) r.fail(p + ".bytes", "missing or zero; bytes moved must be >= 1");
      double bw = m.gbytes_per_s();
      if (bw == 0 && m.time_us() > 0) bw = static_cast<double>(m.bytes()) / 1e3 / m.time_us();
      check_finite_positive(r, p + ".gbytes_per_s", bw, "decimal GB/s; or give time_us");
      const double period_us = static_cast<double>(m.bytes()) / 1e3 / bw;
      if (m.kind() == "hbm_stream")
        stream[m.bytes()].push_back(period_us);
      else if (m.kind() == "d2d_copy")
        copy[m.bytes()].push_back(period_us);
      else
        r.fail(p + ".kind", "\"" + m.kind() + "\" is not hbm_stream or d2d_copy");
    }
  const auto& curve = stream.empty() ? copy : stream;
  if (!curve.empty()) {
    gpu.clear_hbm_curve();
    double last = 0;
    const double peak = gpu.hbm_gbytes_per_s();
    std::string capped;  // sizes whose execution bandwidth exceeds the peak
    for (const auto& [size, periods] : curve) {
      double period_us = 0;
      for (double x : periods) period_us += x;
      period_us /= static_cast<double>(periods.size());
      const double exec_us = period_us - launch_us;
      double v = exec_us > 0 ? static_cast<double>(size) / 1e3 / exec_us : kInf;
      if (v > peak) {
        capped += (capped.empty() ? "" : ", ") + std::to_string(size);
        v = peak;
      }
      schema::HbmBandwidthPoint& pt = *gpu.add_hbm_curve();
      pt.set_bytes(size);
      pt.set_gbytes_per_s(v);
      last = v;
    }
    if (!capped.empty())
      result.notes.push_back("HBM: at " + capped + " B the period less the kernel launch (" + fmt("%.2f", launch_us) +
                             " us) moves the bytes faster than the base's peak " + fmt("%.1f", peak) +
                             " GB/s; those points are capped at the peak");
    // The largest copy measured sets the streaming efficiency; copies so small that they reach under 0.1 % of the
    // peak (a sweep of a few KiB only) say nothing about streaming, and the base's efficiency stays.
    if (last / peak >= kMinEfficiency)
      gpu.set_hbm_efficiency(last / peak);
    else
      result.notes.push_back("HBM: the largest copy measured reaches " + fmt("%.3g", last) + " GB/s, under 0.1 % of " +
                             "the base's peak: too small to set hbm_efficiency, which stays the base's");
    result.hbm_points = curve.size();
  }

  // ---- collective bands
  std::map<BandKey, std::vector<Point>> samples;
  std::map<std::string, std::size_t> unmodelled;  // algorithm → samples skipped
  std::size_t empty_samples = 0;                  // samples of size 0 skipped
  bool domains_unknown = false;                   // a multi-host sample without hosts_per_nvlink_domain
  for (const RawInput& r : raws) {
    const schema::RawProvenance& p = r.raw->provenance();
    for (int i = 0; i < r.raw->collectives_size(); ++i) {
      const schema::CollectiveSample& s = r.raw->collectives(i);
      const std::string path = "collectives[" + std::to_string(i) + "]";
      const std::string op = canonical_op(s.op());
      if (op.empty()) r.fail(path + ".op", "\"" + s.op() + "\" is not a collective; one of " + list_of(kOps));
      const std::string algo = canonical_algorithm(s.algorithm());
      if (algo.empty() && !unmodelled_algorithm(s.algorithm()).empty()) {
        ++unmodelled[unmodelled_algorithm(s.algorithm())];
        continue;
      }
      if (algo.empty())
        r.fail(path + ".algorithm", "\"" + s.algorithm() + "\" is not an algorithm; one of " + list_of(kAlgorithms));
      const std::string proto = canonical_protocol(s.protocol());
      if (proto.empty())
        r.fail(path + ".protocol", "\"" + s.protocol() + "\" is not a protocol; one of LL, LL128, Simple, default");
      const std::uint32_t ranks = s.ranks() ? s.ranks() : p.gpus();
      if (ranks < 2) r.fail(path + ".ranks", "missing (and no provenance.gpus); a collective needs >= 2 ranks");
      if (s.size_bytes() > kMaxCollectiveBytes)
        r.fail(path + ".size_bytes", std::to_string(s.size_bytes()) + " B is more than 2^50 B (1 PiB)");
      if (s.size_bytes() == 0) {  // nothing ran: a launch, not a sample of the collective
        ++empty_samples;
        continue;
      }
      check_measured_us(r, path + ".time_us", s.time_us());
      // The link kind the simulator asks for: NVLINK while the ranks stay inside one NVLink domain, which on
      // multi-node NVLink (GB200 NVL72: 18 hosts) spans hosts; NET once they cross domains.
      const std::uint32_t nodes = s.nodes() ? s.nodes() : p.hosts();
      const std::uint32_t per_domain = std::max<std::uint32_t>(1, p.hosts_per_nvlink_domain());
      const std::uint32_t domains = nodes == 0 ? 1 : (nodes + per_domain - 1) / per_domain;
      if (nodes > 1 && p.hosts_per_nvlink_domain() == 0) domains_unknown = true;
      const int link = domains > 1 ? schema::AlphaBetaBand::NET : schema::AlphaBetaBand::NVLINK;
      samples[{op, algo, proto, link, ranks}].push_back(
          Point{static_cast<double>(s.size_bytes()) * busbw_factor(op, ranks), s.time_us(), s.size_bytes()});
    }
  }
  for (const auto& [algo, n] : unmodelled)
    result.notes.push_back(std::to_string(n) + " " + algo + " sample" + (n == 1 ? "" : "s") +
                           " skipped: clustersim does not model NCCL's " + algo + " algorithm, so no band is fitted");
  if (empty_samples > 0)
    result.notes.push_back(std::to_string(empty_samples) + " sample" + (empty_samples == 1 ? "" : "s") +
                           " of size 0 skipped: nothing ran (the launch alone), so " +
                           (empty_samples == 1 ? "it fits" : "they fit") + " no band");
  // Only rack-scale NVLink parts say so: elsewhere every host is its own NVLink domain, and the note is noise.
  const std::string gpu_names = lower(out.gpu().gpu() + " " + raws.front().raw->provenance().gpu());
  if (domains_unknown && (gpu_names.find("gb200") != std::string::npos ||
                          gpu_names.find("gb300") != std::string::npos || gpu_names.find("nvl72") != std::string::npos))
    result.notes.push_back(
        "samples from several hosts are fitted as NET bands (each host its own NVLink domain); on multi-node NVLink "
        "such as GB200 NVL72, import or measure with --hosts-per-nvlink-domain (18 per NVL72 rack), so that runs "
        "inside one rack fit the NVLINK bands the simulator uses there");
  std::vector<std::uint64_t> edges = {0};
  edges.insert(edges.end(), options.band_edges.begin(), options.band_edges.end());
  schema::CollectiveProfile& coll = *out.mutable_collectives();
  std::vector<schema::AlphaBetaBand> kept;  // base bands of kinds not measured here
  for (const schema::AlphaBetaBand& b : coll.bands())
    if (!samples.count({b.op(), b.algorithm(), b.protocol(), static_cast<int>(b.link()), b.ranks()})) kept.push_back(b);
  coll.clear_bands();
  for (const schema::AlphaBetaBand& b : kept) *coll.add_bands() = b;
  for (const auto& [key, pts] : samples) {
    const auto& [op, algo, proto, link, ranks] = key;
    for (std::size_t e = 0; e < edges.size(); ++e) {
      const std::uint64_t lo = edges[e];
      const std::optional<std::uint64_t> hi =
          e + 1 < edges.size() ? std::optional<std::uint64_t>(edges[e + 1]) : std::nullopt;
      std::vector<Point> in;
      for (const Point& p : pts)
        if (p.size >= lo && (!hi || p.size < *hi)) in.push_back(p);
      if (in.empty()) continue;
      BandFit f = fit_band(in);
      f.op = op, f.algorithm = algo, f.protocol = proto;
      f.link = link == schema::AlphaBetaBand::NET ? "NET" : "NVLINK";
      f.min_bytes = lo, f.max_bytes = hi;
      f.ranks = ranks;
      if (f.fitted) {
        schema::AlphaBetaBand& b = *coll.add_bands();
        b.set_op(op), b.set_algorithm(algo), b.set_protocol(proto);
        b.set_link(static_cast<schema::AlphaBetaBand::Link>(link));
        b.set_min_bytes(lo);
        if (hi) b.set_max_bytes(*hi);
        b.set_ranks(ranks);
        b.set_alpha_us(f.alpha_us);
        b.set_busbw_gbytes_per_s(f.busbw_GBps);
        b.set_points(f.points);
        b.set_mean_relative_error(f.mean_relative_error);
        b.set_max_relative_error(f.max_relative_error);
      }
      result.bands.push_back(std::move(f));
    }
  }
  const bool any_band =
      std::any_of(result.bands.begin(), result.bands.end(), [](const BandFit& f) { return f.fitted; });
  if (!any_band && result.gemm_entries == 0 && result.hbm_points == 0 && result.launch_samples == 0)
    throw InputError(raws.front().path, 0, 0, "collectives",
                     "no usable samples: nothing to fit (collectives need two sizes per band; GEMM, memory and launch "
                     "samples need values > 0)");

  // ---- name and provenance
  const std::string base_display = std::filesystem::path(base.name).stem().string();
  out.set_name(options.name.empty() ? base_display + "-fitted" : options.name);
  schema::Provenance& pv = *out.mutable_provenance();
  const std::string base_source = pv.source();
  std::string measured;
  if (any_band) measured += "alpha-beta bands";
  if (result.gemm_entries) measured += std::string(measured.empty() ? "" : ", ") + "GEMM table";
  if (result.hbm_points) measured += std::string(measured.empty() ? "" : ", ") + "HBM curve, hbm_efficiency";
  if (result.launch_samples) measured += std::string(measured.empty() ? "" : ", ") + "kernel_launch_us";
  pv.Clear();
  pv.set_source("clustersim calibrate fit of " + files + " (measured: " + measured +
                "); everything else from base profile " + base.name + ": " + base_source);
  pv.set_date(prov.date());
  pv.set_notes("raw provenance source: " + (raws.front().raw->provenance().source().empty()
                                                ? std::string("(not stated)")
                                                : raws.front().raw->provenance().source()));
  pv.set_gpu(prov.gpu());
  pv.set_driver_version(prov.driver_version());
  pv.set_cuda_version(prov.cuda_version());
  pv.set_nccl_version(prov.nccl_version());
  pv.set_hosts(prov.hosts());
  pv.set_raw_sha256(result.raw_sha256);
  for (const std::string& f : raw_files) pv.add_raw_files(f);

  result.profile_text = message_text(out,
                                     "Hardware profile fitted by `clustersim calibrate fit` (schema: "
                                     "calibrate/profile.proto).\nBase profile: " +
                                         base.name + " (" + base.reason + ").");
  (void)parse_profile(result.profile_text, "<fitted profile>");  // what we write must load
  return result;
}

std::string fit_report(const FitResult& r) {
  std::string out = "# base profile: " + r.base_name + " (chosen by " + r.base_reason + ")\n";
  out += "# raw sha256: " + r.raw_sha256 + "\n";
  out += "# GEMM table entries: " + std::to_string(r.gemm_entries) +
         ", HBM curve points: " + std::to_string(r.hbm_points) +
         ", launch samples: " + std::to_string(r.launch_samples) + "\n";
  if (r.gemm_entries || r.hbm_points)
    out += "# GEMM and memory samples are back-to-back periods: the tables hold period - kernel_launch_us " +
           fmt("%.2f", r.profile.gpu().kernel_launch_us()) + " us, which the simulator adds per kernel\n";
  out += "#\n# alpha-beta bands: t = alpha + size * busbw_factor / busbw; relative error |pred - meas| / meas\n";
  char line[320];
  std::snprintf(line, sizeof line, "# %-14s %-8s %-7s %-6s %5s %-22s %6s %8s %8s %10s %11s  %s\n", "op", "algo",
                "proto", "link", "ranks", "band", "points", "mean err", "max err", "alpha(us)", "busbw(GB/s)", "note");
  out += line;
  for (const BandFit& b : r.bands) {
    const std::string band =
        "[" + size_text(b.min_bytes) + ", " + (b.max_bytes ? size_text(*b.max_bytes) : "inf") + ")";
    std::snprintf(
        line, sizeof line, "  %-14s %-8s %-7s %-6s %5u %-22s %6u %8s %8s %10s %11s  %s\n", b.op.c_str(),
        b.algorithm.c_str(), b.protocol.c_str(), b.link.c_str(), b.ranks, band.c_str(), b.points,
        b.fitted ? (fmt("%.1f", 100 * b.mean_relative_error) + "%").c_str() : "-",
        b.fitted ? (fmt("%.1f", 100 * b.max_relative_error) + "%").c_str() : "-",
        b.fitted ? fmt("%.2f", b.alpha_us).c_str() : "-",
        b.fitted ? (std::isfinite(b.busbw_GBps) ? fmt("%.1f", b.busbw_GBps) : std::string("inf")).c_str() : "-",
        b.fitted ? b.note.c_str() : ("skipped: " + b.note).c_str());
    out += line;
  }
  for (const std::string& n : r.notes) out += "# note: " + n + "\n";
  return out;
}

std::string size_text(std::uint64_t b) {
  if (b == 0) return "0";
  if (b % (1ull << 30) == 0) return std::to_string(b >> 30) + " GiB";
  if (b % (1ull << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b % (1ull << 10) == 0) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " B";
}

}  // namespace clustersim::calibrate
