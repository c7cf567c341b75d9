// The one exception type for bad user input (scenario, profile, trace, CLI).
//
// It carries the file, the 1-based line and column where the parser knows them (0 = unknown),
// the dotted field path (e.g. "parallel.dp") and what is wrong. `main` prints what() as
//   error: FILE:LINE:COL: field.path: message
// and exits with status 2. Programming errors are assertions, never InputError.
#pragma once

#include <stdexcept>
#include <string>

namespace clustersim {

class InputError : public std::runtime_error {
 public:
  InputError(std::string file, int line, int column, std::string field_path, std::string message)
      : std::runtime_error(format(file, line, column, field_path, message)),
        file_(std::move(file)), line_(line), column_(column),
        field_path_(std::move(field_path)), message_(std::move(message)) {}

  const std::string& file() const { return file_; }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& field_path() const { return field_path_; }
  const std::string& message() const { return message_; }

 private:
  static std::string format(const std::string& file, int line, int column, const std::string& path,
                            const std::string& message) {
    std::string out = file.empty() ? std::string("<input>") : file;
    if (line > 0) {
      out += ":" + std::to_string(line);
      if (column > 0) out += ":" + std::to_string(column);
    }
    out += ": ";
    if (!path.empty()) out += path + ": ";
    out += message;
    return one_line(out);
  }
  // The error is one line of text: control characters (a NUL would end what() early, a newline would split
  // the line) are written as \xNN, and a line longer than 2,000 characters (a huge value echoed back) keeps
  // its start and end.
  static std::string one_line(const std::string& text) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(text.size());
    for (const char c : text) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7f) {
        out += "\\x";
        out += kHex[u >> 4];
        out += kHex[u & 15];
      } else {
        out += c;
      }
    }
    constexpr std::size_t kMax = 2000, kHead = 1600, kTail = 300;
    if (out.size() > kMax)
      out = out.substr(0, kHead) + " ... (" + std::to_string(out.size() - kHead - kTail) + " characters left out) ... " +
            out.substr(out.size() - kTail);
    return out;
  }
  std::string file_;
  int line_;
  int column_;
  std::string field_path_;
  std::string message_;
};

}  // namespace clustersim
