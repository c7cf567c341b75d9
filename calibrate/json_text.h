// Positions in JSON inputs, for errors. The JSON parser of the protobuf that Debian 12 ships (3.21)
// reports neither line nor column, so proto_text reads the text a second time with this reader when
// an error is to be reported: to place a syntax error, and to find where a field was written.
//
// The reader accepts the dialect protobuf's parser accepts: RFC 8259 JSON plus single-quoted strings,
// bare-word keys (letters, digits, '_') and a comma before a closing '}' or ']'. Lines and columns are
// 1-based; a column counts characters (UTF-8 code points; a tab is one character).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace clustersim::calibrate {

struct JsonPosition {
  int line = 0;
  int column = 0;
};

struct JsonMember;

// A value with where it starts; objects keep their members in order, arrays their elements.
struct JsonValue {
  enum class Kind { kScalar, kObject, kArray };
  Kind kind = Kind::kScalar;
  JsonPosition at;
  std::vector<JsonMember> members;  // kObject
  std::vector<JsonValue> elements;  // kArray
};

struct JsonMember {
  std::string key;  // unescaped
  JsonPosition key_at;
  JsonValue value;
};

struct JsonSyntaxError {
  JsonPosition at;
  std::string path;     // the member or element being read ("cluster.nodes", "jobs[1]"); empty at the top
  std::string message;  // e.g. "expected ',' or '}' after a member"
};

// Objects and arrays nested deeper than this are refused (a syntax error), so that no input can
// exhaust the stack.
inline constexpr int kMaxJsonDepth = 256;

// Reads one JSON document into `out`; returns the first syntax error, or nullopt when the whole
// text is one JSON value (surrounded by white space only).
std::optional<JsonSyntaxError> read_json(std::string_view text, JsonValue& out);

}  // namespace clustersim::calibrate
