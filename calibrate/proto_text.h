// Parsing protobuf inputs (text format or JSON) with errors that name FILE:LINE:COL and the
// field path, for every schema the edges read (scenarios, profiles, later traces and raw
// measurements).
//
// Text format goes through google::protobuf::TextFormat::Parser with an error collector, so a
// syntax error or an unknown field becomes one InputError (the first error protobuf reports, with
// its 0-based line:col made 1-based) and nothing is printed to stderr. Protobuf counts a tab as
// advancing to the next multiple of 8 columns; the column reported here is protobuf's.
// The parser also records a ParseInfoTree, so validation that runs after parsing can place its
// errors at the line:col of the offending field (ParsedText::location / ParsedText::fail).
// JSON goes through google::protobuf::util::JsonStringToMessage with unknown fields rejected and a
// key given twice refused. That parser reports no positions: its errors, and field locations, come
// from reading the text a second time (calibrate/json_text.h; the document read is kept for
// location()), with columns counted in characters.
#pragma once

#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>

#include <memory>
#include <string>
#include <string_view>

namespace clustersim::calibrate {

struct JsonValue;  // calibrate/json_text.h

enum class InputSyntax { kTextFormat, kJson };

// ".json" (any case) selects JSON; everything else is text format.
InputSyntax syntax_for_path(std::string_view path);

// A 1-based line and column; 0 means unknown.
struct TextLocation {
  int line = 0;
  int column = 0;
};

// A parsed message together with where each of its fields was written. Refers to the message
// passed to parse_message(), which must outlive it.
class ParsedText {
 public:
  ParsedText(const google::protobuf::Message& message, std::string file, InputSyntax syntax,
             std::string text, std::unique_ptr<google::protobuf::TextFormat::ParseInfoTree> tree,
             std::shared_ptr<const JsonValue> json = nullptr);

  const google::protobuf::Message& message() const { return *message_; }
  const std::string& file() const { return file_; }
  InputSyntax syntax() const { return syntax_; }

  // Where the field with this dotted path ("parallel.dp"; "a.b[2].c" for repeated fields) was
  // written: the start of its value for a scalar field (the "8" of "dp: 8", which is what value
  // errors talk about), the start of its name for a message field. A field that is absent gives
  // the location of its nearest present enclosing message field; 0:0 when none is present. In JSON, an
  // indexed element ("jobs[1]") is located at its value.
  TextLocation location(std::string_view field_path) const;

  // Throws InputError(file, location(field_path), field_path, message).
  [[noreturn]] void fail(const std::string& field_path, const std::string& message) const;

 private:
  const google::protobuf::Message* message_;
  std::string file_;
  InputSyntax syntax_;
  std::string text_;                                                    // the input, for value positions
  std::unique_ptr<google::protobuf::TextFormat::ParseInfoTree> tree_;  // null for JSON
  std::shared_ptr<const JsonValue> json_;                              // the JSON document; null for text
};

// Clears `message` and parses `text` into it. `file` names the input in errors.
// Throws InputError on syntax errors, unknown fields, repeated singular fields, bad enum names,
// out-of-range numbers, and strings that are not UTF-8 or hold a NUL character.
ParsedText parse_message(std::string_view text, const std::string& file, InputSyntax syntax,
                         google::protobuf::Message& message);

// Reads a whole file. Throws InputError(path, 0, 0, "", "cannot read file: <reason>"), also for a file (or
// device) longer than kMaxInputFileBytes. Remembers each plain file read, for was_read_as_input.
inline constexpr std::size_t kMaxInputFileBytes = std::size_t{256} << 20;
std::string read_text_file(const std::string& path);
// Whether this process read the file `path` names (links followed) with read_text_file: an output written there
// would overwrite an input (a scenario's profile, a fit's base).
bool was_read_as_input(const std::string& path);

// Shortest decimal text that reads back as the same double ("300", "0.77", "-5", "nan").
std::string format_number(double value);

}  // namespace clustersim::calibrate
