#include "calibrate/nccl_tests_log.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <deque>
#include <cmath>
#include <limits>
#include <set>

#include "calibrate/proto_text.h"
#include "sim/input_error.h"

namespace clustersim::calibrate {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::string_view kCsvHeader =
    "size_bytes,count,type,time_us_oop,algbw_oop,busbw_oop,time_us_ip,algbw_ip,busbw_ip";

struct Token {
  std::string_view text;
  int column = 0;  // 1-based
};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r';
}

std::vector<Token> split_whitespace(std::string_view line, int first_column = 1) {
  std::vector<Token> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    if (i == line.size()) break;
    const std::size_t begin = i;
    while (i < line.size() && !is_space(line[i])) ++i;
    out.push_back(Token{line.substr(begin, i - begin), first_column + static_cast<int>(begin)});
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_word(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// One line of the input with its 1-based number; `offset` is how many characters a removed
// launcher prefix took, so columns still count from the start of the line in the file.
struct Line {
  std::string_view text;
  int number = 0;
  int offset = 0;
  int continued_at = 0;  // a row that NCCL's log lines cut in two: the line of its second part (mend_interleaved_rows)
};

std::vector<Line> split_lines(std::string_view text) {
  std::vector<Line> out;
  std::size_t begin = 0;
  int number = 1;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back(Line{line, number, 0});
    begin = end + 1;
    ++number;
  }
  return out;
}

// `mpirun --tag-output` writes "[1,0]<stdout>:" before every line, `srun --label` "0: " (the task number, padded
// to the width of the largest: " 3: " with 10 or more tasks; "P0  3: " with a heterogeneous job's component).
void strip_launcher_prefix(Line& line) {
  const std::string_view t = line.text;
  auto digits_from = [&](std::size_t i) {
    std::size_t j = i;
    while (j < t.size() && j - i < 8 && t[j] >= '0' && t[j] <= '9') ++j;
    return j;
  };
  std::size_t i = 0;
  while (i < t.size() && i < 8 && t[i] == ' ') ++i;
  if (i < t.size() && t[i] == 'P' && digits_from(i + 1) > i + 1) {  // "P0 "
    i = digits_from(i + 1);
    const std::size_t after = i;
    while (i < t.size() && i - after < 8 && t[i] == ' ') ++i;
    if (i == after) i = t.size();  // "P0" must be followed by a space
  }
  const std::size_t j = digits_from(i);
  if (j > i && t.substr(j, 2) == ": ") {  // a result row never has ':' after its first number
    line.text.remove_prefix(j + 2);
    line.offset += static_cast<int>(j + 2);
    return;
  }
  if (line.text.empty() || line.text.front() != '[') return;
  const std::size_t tag = line.text.find("]<stdout>:");
  if (tag == std::string_view::npos || tag > 24) return;
  const std::size_t n = tag + std::string_view("]<stdout>:").size();
  line.text.remove_prefix(n);
  line.offset += static_cast<int>(n);
}

// Where an NCCL log line ("host:pid:tid [dev] NCCL INFO ...", NCCL's own debug output) begins in `t`, else npos.
// It may begin inside the line, glued to what nccl-tests printed before it: "      -1gcn151:1904979:1905073 [0]
// NCCL INFO ...". There the host starts after the leading "-1" (a row's root field: an optional minus and digits):
// where a split leaves a host of `known_hosts` (those the log's own NCCL lines begin with), there; else before the
// first character that is not a digit, which a host name starting with a digit ("10-0-0-1") would defeat.
std::size_t nccl_log_start(std::string_view t, const std::set<std::string, std::less<>>* known_hosts = nullptr) {
  for (std::size_t at = t.find("] NCCL "); at != std::string_view::npos; at = t.find("] NCCL ", at + 1)) {
    std::size_t open = at;
    while (open > 0 && t[open - 1] >= '0' && t[open - 1] <= '9') --open;
    if (open == at || open < 2 || t[open - 1] != '[' || t[open - 2] != ' ') continue;
    const std::size_t end = open - 2;  // the host:pid:tid token ends here
    std::size_t begin = end;
    while (begin > 0 && !is_space(t[begin - 1])) --begin;
    const std::string_view token = t.substr(begin, end - begin);
    const std::size_t c1 = token.find(':');
    const std::size_t c2 = c1 == std::string_view::npos ? c1 : token.find(':', c1 + 1);
    if (c1 == std::string_view::npos || c2 == std::string_view::npos || !all_digits(token.substr(c1 + 1, c2 - c1 - 1)) ||
        !all_digits(token.substr(c2 + 1)))
      continue;
    // Glued to a row's last field: skip "-1" / "0" before a host name that does not start with a digit.
    std::size_t host = 0;
    if (begin > 0 && !trim(t.substr(0, begin)).empty()) {
      const std::size_t sign = token[0] == '-' ? 1 : 0;
      std::size_t i = sign;
      while (i < c1 && token[i] >= '0' && token[i] <= '9') ++i;
      if (i > sign && i < c1) host = i;
      if (known_hosts != nullptr)  // the shortest root that leaves a known host
        for (std::size_t k = sign + 1; k <= i && k < c1; ++k)
          if (known_hosts->contains(token.substr(k, c1 - k))) {
            host = k;
            break;
          }
    }
    return begin + host;
  }
  return std::string_view::npos;
}

// The algorithm an NCCL "Connected ..." line names ("NCCL INFO Connected all rings", "... all trees", "Connected
// NVLS", "Connected collnet + chain", "Connected PAT"), or "" for any other line.
std::string connected_algorithm(std::string_view line) {
  const std::size_t at = line.find("NCCL INFO Connected ");
  if (at == std::string_view::npos || nccl_log_start(line) != 0) return "";
  const std::string_view what = line.substr(at + 20);
  if (what.find("ring") != std::string_view::npos) return "ring";
  if (what.find("tree") != std::string_view::npos) return "tree";
  if (what.find("NVLS") != std::string_view::npos) return "nvls";
  if (what.find("ollnet") != std::string_view::npos || what.find("ollNet") != std::string_view::npos) return "collnet";
  if (what.find("PAT") != std::string_view::npos) return "pat";
  return "";
}

// NCCL's debug lines go to the same stdout as nccl-tests' rows, from NCCL's threads, and nccl-tests prints a row in
// two parts: size, count, type, redop and root before the collective runs, the times when it has. NCCL 2.22 and
// later connect an algorithm's links the first time the algorithm runs, so with NCCL_DEBUG=INFO the "Channel ...
// via NET/IB" and "Connected all rings" lines of a size that first runs a ring land between the two parts:
//       2097152        524288     float     sum      -1gcn151:1904979:1905073 [0] NCCL INFO Channel 00/0 : ...
//   gcn151:1904979:1905073 [0] NCCL INFO Connected all rings
//       87.18   24.05   42.10      0    85.11   24.64   43.12      0
// Such a row is mended: its first part, then the next line that is neither NCCL's nor a `#` line, joined in
// `storage` (the row keeps its first line's number; columns past the first part are those of the joined text).
void mend_interleaved_rows(std::vector<Line>& lines, std::deque<std::string>& storage) {
  std::set<std::string, std::less<>> hosts;  // of the NCCL lines that begin a line
  for (const Line& l : lines) {
    const std::string_view text = trim(l.text);
    if (nccl_log_start(text) == 0) hosts.emplace(text.substr(0, text.find(':')));
  }
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view text = lines[i].text;
    const std::size_t at = nccl_log_start(text, &hosts);
    if (at == std::string_view::npos) continue;
    const std::string_view head = text.substr(0, at);
    const std::vector<Token> fields = split_whitespace(head);
    // Only the first part of a row (5 fields, 4 in older nccl-tests; a whole row has 12 or more) waits for the rest.
    if (fields.empty() || fields.size() >= 10 || !all_digits(fields[0].text) || trim(head).front() == '#') continue;
    std::string joined(head);
    for (std::size_t j = i + 1; j < lines.size(); ++j) {
      const std::string_view next = trim(lines[j].text);
      if (next.empty() || next.front() == '#' || nccl_log_start(next) == 0) continue;
      // The rest of the row: the times, which start with a number (nccl-tests' "%7.2f"), or "N/A".
      const std::vector<Token> rest = split_whitespace(next);
      const char c = rest[0].text.front();
      if ((c >= '0' && c <= '9') || rest[0].text == "N/A") {
        joined += " ";
        joined += next;
        lines[j].text = std::string_view();
        lines[i].continued_at = lines[j].number;
      }
      break;
    }
    storage.push_back(std::move(joined));
    lines[i].text = storage.back();
  }
}

// Bytes per element of nccl-tests' data type names (src/common.cu test_typenames); 0 for a name it does not print.
std::uint64_t element_bytes(std::string_view type) {
  if (type == "int8" || type == "uint8" || type == "f8e4m3" || type == "f8e5m2") return 1;
  if (type == "half" || type == "bfloat16") return 2;
  if (type == "int32" || type == "uint32" || type == "float") return 4;
  if (type == "int64" || type == "uint64" || type == "double") return 8;
  return 0;
}

class Reader {
 public:
  explicit Reader(const std::string& file) : file_(file) {}

  [[noreturn]] void fail(int line, int column, const std::string& message) const {
    throw InputError(file_, line, column, "", message);
  }

  std::uint64_t unsigned_field(const Token& t, int line, const char* what) const {
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec != std::errc() || end != t.text.data() + t.text.size())
      fail(line, t.column,
           std::string(what) + ": \"" + std::string(t.text) + "\" is not a whole number of " +
               (std::string_view(what) == "size" ? "bytes" : "elements"));
    // Refused here: the prediction of such a row would fail later on the scenario instead of on this line.
    if (std::string_view(what) == "size" && v > kMaxCollectiveBytes)
      fail(line, t.column, "size: " + std::string(t.text) + " B is more than 2^50 B (1 PiB)");
    return v;
  }

  std::int64_t signed_field(const Token& t, int line, const char* what) const {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec != std::errc() || end != t.text.data() + t.text.size())
      fail(line, t.column, std::string(what) + ": \"" + std::string(t.text) + "\" is not an integer");
    return v;
  }

  // A number, or NaN for "N/A" (and for an empty CSV field when `empty_is_na`).
  double number_field(const Token& t, int line, const char* what, bool empty_is_na = false) const {
    if (t.text == "N/A" || (empty_is_na && t.text.empty())) return kNaN;
    double v = 0;
    const auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec != std::errc() || end != t.text.data() + t.text.size() || t.text.empty())
      fail(line, t.column, std::string(what) + ": \"" + std::string(t.text) + "\" is not a number or N/A");
    // Times, bandwidths and error counts: a negative, infinite or NaN value is no measurement.
    if (!std::isfinite(v) || v < 0)
      fail(line, t.column, std::string(what) + ": \"" + std::string(t.text) + "\" must be a finite number >= 0 or N/A");
    return v;
  }

  // A time: a number > 0 (no collective takes no time; a printed 0.00 is no measurement) and at most 1e12 us
  // (11.6 days, calibrate fit's bound), or NaN for N/A.
  double time_field(const Token& t, int line, const char* what, bool empty_is_na = false) const {
    const double v = number_field(t, line, what, empty_is_na);
    if (v == 0) fail(line, t.column, std::string(what) + ": \"" + std::string(t.text) + "\" must be > 0 or N/A");
    if (v > 1e12)
      fail(line, t.column,
           std::string(what) + ": \"" + std::string(t.text) + "\" us is more than 1e12 us (11.6 days): no measurement");
    return v;
  }

  // nccl-tests' data type name: the count check and the byte sizes need it.
  std::string type_field(const Token& t, int line) const {
    if (element_bytes(t.text) == 0)
      fail(line, t.column,
           "type: \"" + std::string(t.text) +
               "\" is not a data type nccl-tests prints (int8, uint8, int32, uint32, int64, uint64, half, float, "
               "double, bfloat16, f8e4m3, f8e5m2)");
    return std::string(t.text);
  }

 private:
  const std::string& file_;
};

// "./build/all_reduce_perf" or "all_reduce_perf_mpi" → "all_reduce"; "" when it is not a test name.
std::string test_name_to_op(std::string_view word) {
  const std::size_t slash = word.find_last_of('/');
  if (slash != std::string_view::npos) word.remove_prefix(slash + 1);
  for (std::string_view suffix : {"_perf_mpi", "_perf"}) {
    if (word.size() > suffix.size() && word.substr(word.size() - suffix.size()) == suffix) {
      const std::string_view stem = word.substr(0, word.size() - suffix.size());
      return is_word(stem) ? std::string(stem) : std::string();
    }
  }
  return {};
}

// The value after `key` ("GPUs=" → 8), if digits follow it.
std::optional<std::uint64_t> number_after(std::string_view line, std::string_view key) {
  const std::size_t at = line.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  std::size_t i = at + key.size();
  std::size_t j = i;
  while (j < line.size() && line[j] >= '0' && line[j] <= '9') ++j;
  if (j == i) return std::nullopt;
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(line.data() + i, line.data() + j, v);
  if (ec != std::errc() || end != line.data() + j) return std::nullopt;
  return v;
}

// "2.22.3+cuda12.6" → "2.22.3" (digits and dots from the start), or "" when none.
std::string leading_version(std::string_view s) {
  std::size_t j = 0;
  int dots = 0;
  while (j < s.size() && ((s[j] >= '0' && s[j] <= '9') || (s[j] == '.' && j > 0))) {
    if (s[j] == '.') ++dots;
    ++j;
  }
  while (j > 0 && s[j - 1] == '.') --j, --dots;
  return dots >= 1 ? std::string(s.substr(0, j)) : std::string();
}

// What the `#` lines and the rest of the file say about the run. Strong sources of the collective
// (nccl-tests' own "Collective test starting/concluded" lines, the CSV's "collective=") must agree;
// weak ones (a command line naming all_reduce_perf) are used only when no strong one exists.
class RunFacts {
 public:
  explicit RunFacts(const Reader& reader) : reader_(reader) {}

  void comment_line(std::string_view body, int line) {
    const std::vector<Token> t = split_whitespace(body);
    for (std::string_view key : {"Collective test starting:", "Collective test concluded:"}) {
      const std::size_t at = body.find(key);
      if (at != std::string_view::npos) {
        const std::vector<Token> rest = split_whitespace(body.substr(at + key.size()));
        if (!rest.empty()) strong_op(test_name_to_op(rest[0].text), line);
      }
    }
    const std::size_t coll = body.find("collective=");
    if (coll != std::string_view::npos) {
      std::size_t i = coll + std::string_view("collective=").size(), j = i;
      while (j < body.size() && (is_word(body.substr(j, 1)))) ++j;
      strong_op(std::string(body.substr(i, j - i)), line);
    }
    // nccl-tests device lines: "#  Rank  3 Group  0 Pid 1234 on host device  3 [0000:1b:00] NVIDIA H100 …"
    if (t.size() >= 2 && t[0].text == "Rank" && all_digits(t[1].text)) {
      ++rank_lines_;
      for (std::size_t i = 2; i + 1 < t.size(); ++i)
        if (t[i].text == "on") {
          hosts_.insert(std::string(t[i + 1].text));
          break;
        }
    }
    if (t.size() >= 4 && t[0].text == "nThread" && t[2].text == "nGpus" && all_digits(t[1].text) &&
        all_digits(t[3].text)) {
      std::uint64_t threads = 0, gpus = 0;
      std::from_chars(t[1].text.data(), t[1].text.data() + t[1].text.size(), threads);
      std::from_chars(t[3].text.data(), t[3].text.data() + t[3].text.size(), gpus);
      if (threads * gpus > 0 && threads * gpus < (1u << 31))
        gpus_per_process_ = static_cast<std::uint32_t>(threads * gpus);
    }
    if (const auto g = number_after(body, "GPUs="); g && *g > 0 && *g < (1u << 31))
      stated_gpus_ = static_cast<std::uint32_t>(*g);
    if (const auto n = number_after(body, "nodes="); n && *n > 0 && *n < (1u << 31))
      stated_nodes_ = static_cast<std::uint32_t>(*n);
    if (const auto code = number_after(body, "nccl-library="); code && *code > 0)
      library_version_ = nccl_version_from_code(*code);
    other_line(body);
  }

  // Any line: command lines that name a test, NCCL INFO "NCCL version 2.22.3+cuda12.6".
  void other_line(std::string_view body) {
    for (const Token& tok : split_whitespace(body)) {
      const std::string op = test_name_to_op(tok.text);
      if (!op.empty()) weak_ops_.insert(op);
    }
    for (std::string_view key : {"NCCL version ", "NCCL "}) {
      const std::size_t at = body.find(key);
      if (at == std::string_view::npos || printed_version_) continue;
      const std::string v = leading_version(body.substr(at + key.size()));
      if (!v.empty()) printed_version_ = v;
    }
  }

  void fill(MeasuredRun& run) const {
    if (strong_op_)
      run.op = strong_op_;
    else if (weak_ops_.size() == 1)
      run.op = *weak_ops_.begin();
    if (rank_lines_ > 0)
      run.gpus = rank_lines_;
    else if (stated_gpus_)
      run.gpus = stated_gpus_;
    if (!hosts_.empty())
      run.nodes = static_cast<std::uint32_t>(hosts_.size());
    else if (stated_nodes_)
      run.nodes = stated_nodes_;
    run.gpus_per_process = gpus_per_process_;
    if (library_version_)
      run.nccl_version = library_version_;
    else if (printed_version_)
      run.nccl_version = printed_version_;
  }

 private:
  void strong_op(const std::string& op, int line) {
    if (op.empty()) return;
    if (strong_op_ && *strong_op_ != op)
      reader_.fail(line, 0,
                   "one test names two collectives (" + *strong_op_ + " at line " + std::to_string(strong_op_line_) +
                       ", " + op +
                       " here) without a line that opens a new test between them (\"# nccl-tests "
                       "version\", \"# Collective test starting\" or \"# nThread\")");
    if (!strong_op_) strong_op_line_ = line;
    strong_op_ = op;
  }

  const Reader& reader_;
  std::optional<std::string> strong_op_;
  int strong_op_line_ = 0;
  std::set<std::string> weak_ops_;
  std::uint32_t rank_lines_ = 0;
  std::set<std::string> hosts_;
  std::optional<std::uint32_t> stated_gpus_, stated_nodes_, gpus_per_process_;
  std::optional<std::string> library_version_, printed_version_;
};

// Where each value sits in a row of the nccl-tests table.
struct Columns {
  std::size_t fields = 13;
  bool timestamp = false;  // -S 1: one more column whose value is "YYYY-MM-DD HH:MM:SS" (two tokens)
  int size = 0, count = 1, type = 2, redop = 3, root = 4;
  int time_oop = 5, algbw_oop = 6, busbw_oop = 7;
  int time_ip = 9, algbw_ip = 10, busbw_ip = 11;
  std::vector<int> numeric_extras{8, 12};  // #wrong/error, #bitdiff, i_* columns: numbers or N/A
  int wrong_oop = 8, wrong_ip = 12;         // "#wrong" (a count of wrong elements); -1 where none
};

Columns modern_columns() {
  return Columns{};
}

Columns legacy_columns() {  // older nccl-tests: no root, "error" instead of "#wrong"
  Columns c;
  c.fields = 12;
  c.root = -1;
  c.time_oop = 4, c.algbw_oop = 5, c.busbw_oop = 6, c.time_ip = 8, c.algbw_ip = 9, c.busbw_ip = 10;
  c.numeric_extras = {7, 11};
  c.wrong_oop = c.wrong_ip = -1;  // "error" is the largest deviation, within tolerance when non-zero
  return c;
}

// From the table header "#       size         count      type   redop    root     time   algbw …".
std::optional<Columns> columns_from_header(const std::vector<Token>& names) {
  if (names.size() < 3 || names[0].text != "size" || names[1].text != "count" || names[2].text != "type")
    return std::nullopt;
  Columns c;
  c.fields = 0;
  c.redop = c.root = c.time_oop = c.algbw_oop = c.busbw_oop = c.time_ip = c.algbw_ip = c.busbw_ip = -1;
  c.numeric_extras.clear();
  c.wrong_oop = c.wrong_ip = -1;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string_view n = names[i].text;
    const int at = static_cast<int>(i);
    if (n == "timestamp") {
      c.timestamp = true;
      continue;
    }
    ++c.fields;
    if (i < 3) continue;
    if (n == "redop")
      c.redop = at;
    else if (n == "root")
      c.root = at;
    else if (n == "time" || n == "cputime")
      (c.time_oop < 0 ? c.time_oop : c.time_ip) = at;
    else if (n == "algbw")
      (c.algbw_oop < 0 ? c.algbw_oop : c.algbw_ip) = at;
    else if (n == "busbw")
      (c.busbw_oop < 0 ? c.busbw_oop : c.busbw_ip) = at;
    else {
      c.numeric_extras.push_back(at);
      if (n == "#wrong") (c.wrong_oop < 0 ? c.wrong_oop : c.wrong_ip) = at;
    }
  }
  if (c.time_oop < 0 || c.algbw_oop < 0 || c.busbw_oop < 0) return std::nullopt;
  return c;
}

MeasuredRow parse_log_row(const Reader& r, const std::vector<Token>& t, const Columns& c, int line) {
  MeasuredRow row;
  row.line = line;
  row.size_bytes = r.unsigned_field(t[static_cast<std::size_t>(c.size)], line, "size");
  row.count = r.unsigned_field(t[static_cast<std::size_t>(c.count)], line, "count");
  row.count_column = t[static_cast<std::size_t>(c.count)].column;
  row.type = r.type_field(t[static_cast<std::size_t>(c.type)], line);
  if (c.redop >= 0) {
    const Token& op = t[static_cast<std::size_t>(c.redop)];
    if (!is_word(op.text) || all_digits(op.text))
      r.fail(line, op.column, "redop: \"" + std::string(op.text) + "\" is not a reduction name such as sum or none");
    row.redop = std::string(op.text);
  }
  if (c.root >= 0) row.root = r.signed_field(t[static_cast<std::size_t>(c.root)], line, "root");
  auto num = [&](int index, const char* what) {
    return index < 0 ? kNaN : r.number_field(t[static_cast<std::size_t>(index)], line, what);
  };
  auto time = [&](int index, const char* what) {
    return index < 0 ? kNaN : r.time_field(t[static_cast<std::size_t>(index)], line, what);
  };
  row.time_us_oop = time(c.time_oop, "out-of-place time");
  row.algbw_oop = num(c.algbw_oop, "out-of-place algbw");
  row.busbw_oop = num(c.busbw_oop, "out-of-place busbw");
  row.time_us_ip = time(c.time_ip, "in-place time");
  row.algbw_ip = num(c.algbw_ip, "in-place algbw");
  row.busbw_ip = num(c.busbw_ip, "in-place busbw");
  for (int extra : c.numeric_extras)
    if (static_cast<std::size_t>(extra) < t.size()) (void)num(extra, "#wrong/error");
  if (c.wrong_oop >= 0) row.wrong_oop = num(c.wrong_oop, "#wrong");
  if (c.wrong_ip >= 0) row.wrong_ip = num(c.wrong_ip, "#wrong");
  return row;
}

// Whether a line (trimmed, not a `#` line) looks like a result row: digits first and 12 or more fields.
bool row_like(std::string_view text) {
  const std::vector<Token> t = split_whitespace(text);
  return t.size() >= 12 && all_digits(t[0].text);
}

// Whether a `#` line (its text after the '#') opens a test: nccl-tests prints "# nccl-tests version …" and
// "# Collective test starting: all_gather_perf" (since 2.13) and "# nThread 1 nGpus 8 …" (every build) first.
enum class TestMarker { kNone, kVersion, kStarting, kThreads };
TestMarker test_marker(std::string_view body) {
  if (body.find("Collective test starting:") != std::string_view::npos) return TestMarker::kStarting;
  const std::vector<Token> t = split_whitespace(body);
  if (t.empty()) return TestMarker::kNone;
  if (t[0].text == "nccl-tests") return TestMarker::kVersion;
  if (t[0].text == "nThread") return TestMarker::kThreads;
  return TestMarker::kNone;
}

// Whether a `#` line closes a test's table: "# Out of bounds values : 0 OK", "# Avg bus bandwidth : …",
// "# Collective test concluded: all_gather_perf".
bool test_footer(std::string_view body) {
  return body.find("Avg bus bandwidth") != std::string_view::npos ||
         body.find("Out of bounds values") != std::string_view::npos ||
         body.find("Collective test concluded:") != std::string_view::npos;
}

// A log that a script wrote by running several tests one after the other (all_reduce_perf; all_gather_perf; …),
// cut into one piece per test. A new test begins at a line that opens one (test_marker) once the current piece has
// result rows (a line that starts with digits and has 12 or more fields), or at a second line of the same kind (a
// test that printed no rows: it failed). The lines between the current test's last row or footer line (without
// rows: its last `#` line) and the opening line (the script's echo of the next command, launcher noise) go to the
// next test. A file of one test stays one piece.
std::vector<std::vector<Line>> split_tests(const std::vector<Line>& lines) {
  std::vector<std::vector<Line>> tests(1);
  bool rows = false;
  std::set<TestMarker> seen;
  std::size_t end = 0;  // with rows: the current piece's lines up to its last row or footer line
  for (const Line& l : lines) {
    const std::string_view text = trim(l.text);
    if (!text.empty() && text.front() == '#') {
      const std::string_view body = text.substr(1);
      const TestMarker m = test_marker(body);
      if (m != TestMarker::kNone && (rows || seen.contains(m))) {
        // Without rows (a test that failed), the lines after its last `#` line go to the next test.
        if (!rows) {
          end = tests.back().size();
          while (end > 0 && trim(tests.back()[end - 1].text).substr(0, 1) != "#") --end;
        }
        std::vector<Line> next(tests.back().begin() + static_cast<std::ptrdiff_t>(end), tests.back().end());
        tests.back().resize(end);
        tests.push_back(std::move(next));
        rows = false;
        seen.clear();
      }
      if (m != TestMarker::kNone) seen.insert(m);
      if (rows && test_footer(body)) end = tests.back().size() + 1;
    } else if (row_like(text)) {
      rows = true;
      end = tests.back().size() + 1;
    }
    tests.back().push_back(l);
  }
  return tests;
}

// Whether a piece of a log has a result row.
bool has_rows(const std::vector<Line>& test) {
  return std::any_of(test.begin(), test.end(), [](const Line& l) {
    const std::string_view text = trim(l.text);
    return !text.empty() && text.front() != '#' && row_like(text);
  });
}

// Where a piece of a log begins, for messages: its first `#` line or line that names a *_perf command (a script's
// echo of it), else its first line that is not blank.
int test_first_line(const std::vector<Line>& test) {
  for (const Line& l : test) {
    const std::string_view text = trim(l.text);
    if (!text.empty() && text.front() == '#') return l.number;
    for (const Token& tok : split_whitespace(text))
      if (!test_name_to_op(tok.text).empty()) return l.number;
  }
  for (const Line& l : test)
    if (!trim(l.text).empty()) return l.number;
  return test.front().number;
}

MeasuredRun parse_log(const std::vector<Line>& lines, const std::string& file) {
  const Reader r(file);
  RunFacts facts(r);
  MeasuredRun run;
  run.source_file = file;
  run.format = MeasuredFormat::kNcclTestsLog;
  run.complete = false;  // until the closing "# Avg bus bandwidth" line follows the rows
  std::optional<Columns> header;
  int header_line = 0;
  std::optional<Columns> inferred;  // without a header: from the first row's field count
  int open_row_until = 0;  // the last row was cut in two by NCCL's lines: its second part's line
  constexpr std::uint64_t kNextRow = ~std::uint64_t{0};  // a connection's size until the next row is read
  // With a table header in the file, only lines after it can be rows ("8 GPUs found" before it is noise).
  int first_header_line = 0;
  for (const Line& l : lines) {
    const std::string_view text = trim(l.text);
    if (!text.empty() && text.front() == '#' && columns_from_header(split_whitespace(text.substr(1)))) {
      first_header_line = l.number;
      break;
    }
  }
  for (const Line& l : lines) {
    const std::string_view text = trim(l.text);
    if (text.empty()) continue;
    if (text.front() == '#') {
      run.header_lines.emplace_back(l.text);
      const std::size_t hash = static_cast<std::size_t>(text.data() - l.text.data());
      const std::string_view body = text.substr(1);
      if (!run.rows.empty() && body.find("Avg bus bandwidth") != std::string_view::npos) run.complete = true;
      // "# Out of bounds values : 3 FAILED"
      if (const std::size_t at = body.find("Out of bounds values"); at != std::string_view::npos) {
        const std::vector<Token> w = split_whitespace(body.substr(at + 20));
        if (w.size() >= 3 && w[0].text == ":" && all_digits(w[1].text) && w[2].text == "FAILED")
          std::from_chars(w[1].text.data(), w[1].text.data() + w[1].text.size(), run.out_of_bounds);
      }
      facts.comment_line(body, l.number);
      const std::vector<Token> names = split_whitespace(body, l.offset + static_cast<int>(hash) + 2);
      if (const auto c = columns_from_header(names)) {
        if (!run.rows.empty())
          r.fail(l.number, 1,
                 "a second result table starts here (the first has " + std::to_string(run.rows.size()) +
                     " rows) without a line that opens a new test before it (\"# nccl-tests version\", \"# "
                     "Collective test starting\" or \"# nThread\"): the log is garbled");
        header = c;
        header_line = l.number;
      }
      continue;
    }
    const std::vector<Token> t = split_whitespace(l.text, 1 + l.offset);
    // An algorithm NCCL connected: at the row it interrupted (run while its first part was printed), else at the
    // next row; before any row, size 0.
    if (const std::string a = connected_algorithm(text); !a.empty() && !run.complete) {
      const bool inside = !run.rows.empty() && l.number < open_row_until;
      run.connected.push_back({inside ? run.rows.back().size_bytes : 0, a, l.number});
      if (!inside && !run.rows.empty()) run.connected.back().size_bytes = kNextRow;
    }
    // After the closing "# Avg bus bandwidth" the table is over: a script's exit code or timestamp is no row.
    if (!all_digits(t[0].text) || l.number < first_header_line || run.complete) {
      // Inside a table, a line with the row's fields whose count and type read as a row's is a row whose size is
      // garbled ("abc", "-1", "1e30"): an error, not noise to skip (NCCL's own INFO or WARN lines, which logs
      // interleave, start "host:pid:tid [rank] NCCL").
      if (header && l.number > header_line && !run.complete &&
          t.size() == header->fields + (header->timestamp ? 2 : 0) && all_digits(t[1].text) &&
          element_bytes(t[2].text) > 0)
        (void)r.unsigned_field(t[0], l.number, "size");
      facts.other_line(text);
      continue;
    }
    // A result row.
    Columns c;
    if (header) {
      c = *header;
    } else {
      if (!inferred) {
        if (t.size() == 13)
          inferred = modern_columns();
        else if (t.size() == 12)
          inferred = legacy_columns();
        else
          r.fail(l.number, 1,
                 "a result row needs 13 fields (size count type redop root, then time algbw busbw #wrong out-of-place "
                 "and in-place) or 12 (older nccl-tests, no root); this line has " +
                     std::to_string(t.size()) + " and no table header precedes it");
      }
      c = *inferred;
    }
    const std::size_t expected = c.fields + (c.timestamp ? 2 : 0);
    if (t.size() < expected) {
      const int col = 1 + l.offset + static_cast<int>(l.text.size());
      r.fail(l.number, col,
             "the row ends after " + std::to_string(t.size()) + " of its " + std::to_string(expected) + " fields" +
                 (header ? " (columns of the header at line " + std::to_string(header_line) + ")" : "") +
                 ": the log is cut off or this is not nccl-tests output");
    }
    if (t.size() > expected)
      r.fail(l.number, t[expected].column,
             "unexpected field \"" + std::string(t[expected].text) + "\" after the row's " + std::to_string(expected) +
                 " fields");
    run.rows.push_back(parse_log_row(r, t, c, l.number));
    open_row_until = l.continued_at;
    for (MeasuredRun::Connected& k : run.connected)
      if (k.size_bytes == kNextRow) k.size_bytes = run.rows.back().size_bytes;
  }
  // Connections after the last row (a later test of the same program) name no size of this one.
  std::erase_if(run.connected, [](const MeasuredRun::Connected& k) { return k.size_bytes == kNextRow; });
  if (run.rows.empty()) {
    if (header) r.fail(header_line, 1, "the result table has no rows: the log is cut off before the first size");
    r.fail(1, 1,
           "not an nccl-tests log or a validation CSV: no result table found (expected rows like "
           "\"1048576  262144  float  sum  -1  …\" or a header \"" +
               std::string(kCsvHeader) + "\")");
  }
  facts.fill(run);
  return run;
}

}  // namespace

std::string run_label(const MeasuredRun& run) {
  if (run.test_line <= 0) return run.source_file;
  return run.source_file + " (its " + run.op.value_or("unnamed") + " test, from line " + std::to_string(run.test_line) +
         ")";
}

std::string connected_note(const MeasuredRun& run) {
  if (run.connected.empty()) return "";
  std::string out = "# the run's log: NCCL connected";
  std::set<std::string> seen;
  bool first = true;
  for (const MeasuredRun::Connected& k : run.connected) {
    if (!seen.insert(k.algorithm).second) continue;  // every rank logs it; the first says when
    out += std::string(first ? " " : ", ") + k.algorithm + (k.algorithm == "nvls" || k.algorithm == "pat" ? "" : "s") +
           (k.size_bytes == 0 ? " before the first row" : " at the " + std::to_string(k.size_bytes) + " B row") +
           " (line " + std::to_string(k.line) + ")";
    first = false;
  }
  return out +
         ";\n# NCCL connects an algorithm the first time it runs one (nccl-tests' warm-up runs the largest and the "
         "smallest size before the first row)\n";
}

std::string cut_off_note(const MeasuredRun& run) {
  if (run.complete || run.rows.empty()) return "";
  return "# note: " + run_label(run) + " ends without nccl-tests' closing \"# Avg bus bandwidth\" line after its " +
         std::to_string(run.rows.size()) + " rows (the last of " + std::to_string(run.rows.back().size_bytes) +
         " B): the run may be cut off\n";
}

std::string no_rows_note(const MeasuredRun& run, const std::string& what) {
  if (!run.rows.empty()) return "";
  return "# note: " + run_label(run) + " printed no result rows (it failed, or the log is cut off); " + what + "\n";
}

std::string wrong_rows_note(const MeasuredRun& run, const std::string& what) {
  std::string rows;
  std::size_t n = 0;
  for (const MeasuredRow& row : run.rows) {
    if (!has_wrong(row, false) && !has_wrong(row, true)) continue;
    ++n;
    rows += (rows.empty() ? "" : ", ") + std::to_string(row.size_bytes) + " B (line " + std::to_string(row.line) +
            (has_wrong(row, false) && has_wrong(row, true) ? ""
             : has_wrong(row, false)                       ? ", out-of-place"
                                                           : ", in-place") +
            ")";
  }
  if (n > 0)
    return "# note: " + run_label(run) + ": nccl-tests found wrong results (#wrong > 0) in " + std::to_string(n) +
           (n == 1 ? " row" : " rows") + "; " + what + ": " + rows + "\n";
  if (run.out_of_bounds > 0)
    return "# note: " + run_label(run) + " ends with \"Out of bounds values : " + std::to_string(run.out_of_bounds) +
           " FAILED\": some results were wrong, in rows it does not mark; its times may not measure the hardware\n";
  return "";
}

namespace {

MeasuredRun parse_csv(const std::vector<Line>& lines, std::size_t header_index, const std::string& file) {
  const Reader r(file);
  RunFacts facts(r);
  MeasuredRun run;
  run.source_file = file;
  run.format = MeasuredFormat::kValidationCsv;
  const Line& h = lines[header_index];
  if (trim(h.text) != kCsvHeader) r.fail(h.number, 1, "CSV header must be \"" + std::string(kCsvHeader) + "\"");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const Line& l = lines[i];
    const std::string_view text = trim(l.text);
    if (text.empty() || i == header_index) continue;
    if (text.front() == '#') {
      if (i > header_index) r.fail(l.number, 1, "comment line after the CSV header; `#` lines belong before it");
      run.header_lines.emplace_back(l.text);
      facts.comment_line(text.substr(1), l.number);
      continue;
    }
    if (i < header_index) continue;  // unreachable: the header is the first other line
    std::vector<Token> f;
    std::size_t begin = 0;
    while (true) {
      const std::size_t comma = l.text.find(',', begin);
      const std::size_t end = comma == std::string_view::npos ? l.text.size() : comma;
      const std::string_view raw = l.text.substr(begin, end - begin);
      const std::string_view value = trim(raw);
      const std::size_t lead = static_cast<std::size_t>(value.data() - raw.data());
      f.push_back(Token{value, 1 + static_cast<int>(begin + (value.empty() ? 0 : lead))});
      if (comma == std::string_view::npos) break;
      begin = comma + 1;
    }
    if (f.size() < 9)
      r.fail(l.number, 1 + static_cast<int>(l.text.size()),
             "the row ends after " + std::to_string(f.size()) + " of its 9 fields: the file is cut off");
    if (f.size() > 9) r.fail(l.number, f[9].column, "the row has more than 9 fields");
    MeasuredRow row;
    row.line = l.number;
    row.size_bytes = r.unsigned_field(f[0], l.number, "size");
    row.count = r.unsigned_field(f[1], l.number, "count");
    row.count_column = f[1].column;
    row.type = r.type_field(f[2], l.number);
    row.time_us_oop = r.time_field(f[3], l.number, "time_us_oop", true);
    row.algbw_oop = r.number_field(f[4], l.number, "algbw_oop", true);
    row.busbw_oop = r.number_field(f[5], l.number, "busbw_oop", true);
    row.time_us_ip = r.time_field(f[6], l.number, "time_us_ip", true);
    row.algbw_ip = r.number_field(f[7], l.number, "algbw_ip", true);
    row.busbw_ip = r.number_field(f[8], l.number, "busbw_ip", true);
    run.rows.push_back(std::move(row));
  }
  if (run.rows.empty()) r.fail(h.number, 1, "the CSV has a header but no rows: the file is cut off");
  facts.fill(run);
  return run;
}

}  // namespace

std::string nccl_version_from_code(std::uint64_t code) {
  const std::uint64_t major = code >= 10000 ? code / 10000 : code / 1000;
  const std::uint64_t minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

namespace {

// Every test in the file, in file order (parse_measured_runs, before the rows' counts are checked).
std::vector<MeasuredRun> parse_runs(std::string_view text, const std::string& file) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // a UTF-8 byte-order mark (spreadsheet exports)
  std::vector<Line> lines = split_lines(text);
  for (const Line& l : lines)
    if (l.text.find('\0') != std::string_view::npos)
      throw InputError(file, l.number, static_cast<int>(l.text.find('\0')) + 1, "",
                       "binary data: not an nccl-tests log or a validation CSV");
  for (Line& l : lines) strip_launcher_prefix(l);
  std::deque<std::string> mended;  // rows that NCCL's log lines cut in two, joined (mend_interleaved_rows)
  // The CSV layout: its first line that is neither empty nor a comment is the column header.
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view t = trim(lines[i].text);
    if (t.empty() || t.front() == '#') continue;
    if (t.substr(0, std::min<std::size_t>(t.size(), 10)) == "size_bytes") return {parse_csv(lines, i, file)};
    break;
  }
  mend_interleaved_rows(lines, mended);
  const std::vector<std::vector<Line>> tests = split_tests(lines);
  if (tests.size() == 1) return {parse_log(lines, file)};
  std::vector<MeasuredRun> runs;
  for (const std::vector<Line>& test : tests) {
    const int first = test_first_line(test);
    MeasuredRun run;
    if (has_rows(test)) {
      run = parse_log(test, file);
    } else {
      // A test that printed its preamble and no rows (it failed, or the log ends there): a run without rows, with
      // what its lines say (RunFacts), which select_run and import leave out with a note (no_rows_note).
      const Reader r(file);
      RunFacts facts(r);
      run.source_file = file;
      run.complete = false;
      for (const Line& l : test) {
        const std::string_view body = trim(l.text);
        if (!body.empty() && body.front() == '#') {
          run.header_lines.emplace_back(l.text);
          facts.comment_line(body.substr(1), l.number);
        } else {
          facts.other_line(body);
        }
      }
      facts.fill(run);
    }
    run.test_line = first;
    // What a test does not restate (NCCL prints its version once per process), it shares with the test before it.
    if (!runs.empty()) {
      const MeasuredRun& before = runs.back();
      if (!run.nccl_version) run.nccl_version = before.nccl_version;
      if (!run.gpus) run.gpus = before.gpus;
      if (!run.nodes) run.nodes = before.nodes;
      if (!run.gpus_per_process) run.gpus_per_process = before.gpus_per_process;
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

// nccl-tests prints count = size / element size: of the whole buffer for AllReduce, Broadcast, Reduce and SendRecv,
// of one rank's share for AllGather, ReduceScatter and AlltoAll (size = ranks x count x element size; the
// 80-GPU all_gather log: 10 x 419430 x 8 B = 33554400 B). A row that breaks this was mis-transcribed, or its
// columns are not where the header says: its time would be compared at the wrong size, so it is an error.
// Without the collective or the rank count, what the row allows either way is accepted.
void check_counts(const MeasuredRun& run, const std::string& file) {
  const std::string op = run.op.value_or("");
  const bool per_rank = op == "all_gather" || op == "reduce_scatter" || op == "alltoall";
  const bool whole = op == "all_reduce" || op == "broadcast" || op == "reduce" || op == "sendrecv";
  for (const MeasuredRow& row : run.rows) {
    const std::uint64_t w = element_bytes(row.type);
    if (w == 0 || (row.count == 0 && row.size_bytes == 0)) continue;
    const bool as_whole = row.size_bytes % w == 0 && row.size_bytes / w == row.count;
    // count x w <= size, so the product does not wrap (a garbage count of 2^61 doubles would wrap to 0).
    const bool within = row.count > 0 && row.count <= row.size_bytes / w;
    bool as_share = false;
    if (within && row.size_bytes % (row.count * w) == 0)
      as_share = !run.gpus || row.size_bytes / (row.count * w) == *run.gpus;
    if (as_whole && !per_rank) continue;
    if (as_share && !whole) continue;
    if (per_rank && run.gpus && *run.gpus == 1 && as_whole) continue;
    // Products in the message as numbers of bytes, or "more than 2^64 - 1" where they would wrap.
    auto product = [](std::uint64_t a, std::uint64_t b) {
      return b != 0 && a > std::numeric_limits<std::uint64_t>::max() / b
                 ? "more than " + std::to_string(std::numeric_limits<std::uint64_t>::max())
                 : std::to_string(a * b);
    };
    const std::string elements = std::to_string(row.count) + " " + row.type + " elements (" + std::to_string(w) +
                                 " B each) are " + product(row.count, w) + " B";
    std::string rule;
    if (whole)
      rule = op + "'s count is the whole buffer's";
    else if (per_rank)
      rule = op + "'s count is one rank's share" +
             (run.gpus ? ": " + std::to_string(*run.gpus) + " ranks make " + product(row.count, w * *run.gpus) + " B"
                       : std::string());
    else
      rule = "nor a share of it" + (run.gpus ? " on " + std::to_string(*run.gpus) + " ranks" : std::string());
    throw InputError(file, row.line, row.count_column, "",
                     "count: " + elements + ", not the row's size " + std::to_string(row.size_bytes) + " B (" + rule +
                         "; nccl-tests prints count = size / element size): the row is mis-transcribed or its "
                         "columns are shifted");
  }
}

}  // namespace

std::vector<MeasuredRun> parse_measured_runs(std::string_view text, const std::string& file) {
  std::vector<MeasuredRun> runs = parse_runs(text, file);
  for (const MeasuredRun& run : runs) check_counts(run, file);
  return runs;
}

MeasuredRun parse_measured_run(std::string_view text, const std::string& file) {
  std::vector<MeasuredRun> runs = parse_measured_runs(text, file);
  if (runs.size() > 1)
    throw InputError(file, runs[1].test_line, 0, "",
                     "this file holds results of " + std::to_string(runs.size()) + " tests (" + tests_text(runs) +
                         "); one is expected here");
  return std::move(runs.front());
}

std::vector<MeasuredRun> read_measured_runs(const std::string& path) {
  return parse_measured_runs(read_text_file(path), path);
}

MeasuredRun read_measured_run(const std::string& path) {
  return parse_measured_run(read_text_file(path), path);
}

std::string tests_text(const std::vector<MeasuredRun>& runs) {
  std::string out;
  for (const MeasuredRun& run : runs)
    out += (out.empty() ? "" : ", ") + run.op.value_or("an unnamed test") + " at line " +
           std::to_string(run.test_line > 0 ? run.test_line : 1);
  return out;
}

const MeasuredRun& select_run(const std::vector<MeasuredRun>& runs, const std::string& op, const std::string& option) {
  if (runs.size() == 1) return runs.front();
  auto key = [](std::string_view name) {  // "all_reduce", "allreduce" and "AllReduce" name the same collective
    std::string k;
    for (char c : name)
      if (c != '_') k += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return k;
  };
  std::vector<const MeasuredRun*> matching;
  for (const MeasuredRun& run : runs)
    if (run.op && key(*run.op) == key(op)) matching.push_back(&run);
  const std::string& file = runs.front().source_file;
  if (matching.empty()) {
    const bool unnamed = std::any_of(runs.begin(), runs.end(), [](const MeasuredRun& r) { return !r.op; });
    throw InputError("command line", 0, 0, option,
                     file + " holds " + std::to_string(runs.size()) + " tests (" + tests_text(runs) + "), none of " +
                         op +
                         (unnamed ? std::string("; a test is named by its \"# Collective test starting\" line or "
                                                "the *_perf command before it")
                                  : std::string()));
  }
  if (matching.size() > 1)
    throw InputError(file, matching[1]->test_line, 0, "",
                     "a second " + op + " test starts here (the first at line " +
                         std::to_string(matching[0]->test_line) + "); keep the one to compare with");
  if (matching.front()->rows.empty())
    throw InputError(file, matching.front()->test_line, 0, "",
                     "the " + op + " test that starts here printed no result rows (it failed, or the log is cut off)");
  return *matching.front();
}

}  // namespace clustersim::calibrate
