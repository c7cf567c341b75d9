#include "calibrate/proto_text.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <vector>

#include "calibrate/json_text.h"
#include "sim/input_error.h"

namespace clustersim::calibrate {
namespace {

namespace pb = google::protobuf;

// protobuf's io::Tokenizer advances a tab to the next multiple of 8 columns; positions computed
// here must agree with the ones its parser reports.
constexpr int kTabWidth = 8;

bool is_identifier_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Walks text keeping protobuf's 0-based line and column.
struct Cursor {
  std::string_view text;
  std::size_t pos = 0;
  int line = 0;
  int column = 0;

  bool done() const { return pos >= text.size(); }
  char peek(std::size_t ahead = 0) const { return pos + ahead < text.size() ? text[pos + ahead] : '\0'; }
  void advance() {
    const char c = text[pos++];
    if (c == '\n') {
      ++line;
      column = 0;
    } else if (c == '\t') {
      column += kTabWidth - column % kTabWidth;
    } else {
      ++column;
    }
  }
  bool before(int l, int c) const { return line < l || (line == l && column < c); }
};

enum class TokenKind { kEnd, kIdentifier, kNumber, kString, kSymbol };

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string_view text;
  int line = 0;
  int column = 0;
};

// A text-format tokenizer just good enough to follow field nesting (text format's '#' comments,
// quoted strings with escapes, identifiers, numbers, one-character symbols).
Token next_token(Cursor& c) {
  while (!c.done()) {
    const char ch = c.peek();
    if (ch == '#') {
      while (!c.done() && c.peek() != '\n') c.advance();
    } else if (std::isspace(static_cast<unsigned char>(ch))) {
      c.advance();
    } else {
      break;
    }
  }
  Token t{TokenKind::kEnd, {}, c.line, c.column};
  if (c.done()) return t;
  const std::size_t start = c.pos;
  const char ch = c.peek();
  if (is_identifier_start(ch)) {
    t.kind = TokenKind::kIdentifier;
    while (is_identifier_char(c.peek())) c.advance();
  } else if (std::isdigit(static_cast<unsigned char>(ch)) ||
             (ch == '.' && std::isdigit(static_cast<unsigned char>(c.peek(1))))) {
    t.kind = TokenKind::kNumber;
    char prev = '\0';
    for (char n = c.peek(); is_identifier_char(n) || n == '.' ||
                            ((n == '+' || n == '-') && (prev == 'e' || prev == 'E'));
         n = c.peek()) {
      prev = n;
      c.advance();
    }
  } else if (ch == '"' || ch == '\'') {
    t.kind = TokenKind::kString;
    c.advance();
    while (!c.done() && c.peek() != '\n') {
      const char n = c.peek();
      c.advance();
      if (n == '\\' && !c.done()) {
        c.advance();
      } else if (n == ch) {
        break;
      }
    }
  } else {
    t.kind = TokenKind::kSymbol;
    c.advance();
  }
  t.text = c.text.substr(start, c.pos - start);
  return t;
}

// The field a text-format parse error is about: protobuf reports a position but not the field,
// so follow the nesting of the text up to that position.
struct ErrorContext {
  std::string path;          // dotted path of the field being parsed, or of its enclosing message
  bool at_field_name = false;  // the position is just after a field name (unknown/duplicate field)
  int name_line = 0;         // 0-based position of that field name
  int name_column = 0;
  std::string value_path;    // the field whose value was read last, and where that value starts
  int value_line = 0;
  int value_column = 0;
};

ErrorContext context_at(std::string_view text, int line, int column) {
  enum class State { kName, kAfterName, kValue, kAfterValue, kList };
  struct Frame {
    std::string name;
    bool in_list;
    int index;  // how many messages of this name its parent opened before it (repeated fields: the element)
  };
  std::vector<Frame> stack;
  std::vector<std::map<std::string, int>> opened(1);  // per open message: messages opened in it, by field name
  const auto path_of = [](const std::vector<Frame>& frames) {
    std::string out;
    for (const Frame& f : frames) out += (out.empty() ? "" : ".") + f.name + "[" + std::to_string(f.index) + "]";
    return out;
  };
  std::string value_path;
  int value_line = 0, value_column = 0;
  std::string field;
  int field_line = 0, field_column = 0;
  State state = State::kName;
  Cursor c{text};
  for (Token t = next_token(c); t.kind != TokenKind::kEnd; t = next_token(c)) {
    if (!(t.line < line || (t.line == line && t.column < column))) break;
    const bool is_symbol = t.kind == TokenKind::kSymbol;
    const bool opens = is_symbol && (t.text == "{" || t.text == "<");
    const bool closes = is_symbol && (t.text == "}" || t.text == ">");
    const bool is_value = !is_symbol;
    auto push = [&](bool in_list) {
      stack.push_back({field, in_list, opened.back()[field]++});
      opened.emplace_back();
      state = State::kName;
    };
    for (bool again = true; again;) {
      again = false;
      switch (state) {
        case State::kName:
          if (t.kind == TokenKind::kIdentifier) {
            field = std::string(t.text);
            field_line = t.line;
            field_column = t.column;
            state = State::kAfterName;
          } else if (closes && !stack.empty()) {
            field = stack.back().name;
            state = stack.back().in_list ? State::kList : State::kName;
            stack.pop_back();
            opened.pop_back();
          }
          break;
        case State::kAfterName:
          if (t.text == ":") {
            state = State::kValue;
          } else if (opens) {
            push(false);
          } else {
            state = State::kName;
            again = true;
          }
          break;
        case State::kValue:
          if (opens) {
            push(false);
          } else if (t.text == "[") {
            state = State::kList;
          } else if (is_value) {
            state = State::kAfterValue;
            value_path = path_of(stack) + (stack.empty() ? "" : ".") + field;
            value_line = t.line;
            value_column = t.column;
          } else if (t.text != "-") {
            state = State::kName;
            again = true;
          }
          break;
        case State::kAfterValue:  // adjacent strings concatenate; anything else starts a field
          if (t.kind != TokenKind::kString) {
            state = State::kName;
            again = true;
          }
          break;
        case State::kList:
          if (t.text == "]") {
            state = State::kAfterValue;
          } else if (opens) {
            push(true);
          }
          break;
      }
    }
  }
  ErrorContext out;
  out.path = path_of(stack);
  if (state == State::kAfterName || state == State::kValue || state == State::kList) {
    out.path += (out.path.empty() ? "" : ".") + field;
  }
  out.at_field_name = state == State::kAfterName;
  out.name_line = field_line;
  out.name_column = field_column;
  out.value_path = value_path;
  out.value_line = value_line;
  out.value_column = value_column;
  return out;
}

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> out;
  while (!path.empty()) {
    const std::size_t dot = path.find('.');
    out.emplace_back(path.substr(0, dot));
    if (dot == std::string_view::npos) break;
    path.remove_prefix(dot + 1);
  }
  return out;
}

// "layers[2]" -> ("layers", 2); "layers" -> ("layers", -1).
std::pair<std::string, int> split_index(const std::string& segment) {
  const std::size_t open = segment.find('[');
  if (open == std::string::npos || segment.back() != ']') return {segment, -1};
  int index = -1;
  const char* first = segment.data() + open + 1;
  const char* last = segment.data() + segment.size() - 1;
  if (std::from_chars(first, last, index).ptr != last) index = -1;
  return {segment.substr(0, open), index};
}

const pb::FieldDescriptor* find_field(const pb::Descriptor* d, const std::string& name) {
  if (d == nullptr) return nullptr;
  const pb::FieldDescriptor* f = d->FindFieldByName(name);
  return f != nullptr ? f : d->FindFieldByCamelcaseName(name);  // JSON spells names lowerCamelCase
}

// The field at a dotted path below `root`, or null.
const pb::FieldDescriptor* field_at_path(const pb::Descriptor* root, std::string_view path) {
  const pb::FieldDescriptor* field = nullptr;
  const pb::Descriptor* d = root;
  for (const std::string& segment : split_path(path)) {
    field = find_field(d, split_index(segment).first);
    if (field == nullptr) return nullptr;
    d = field->message_type();
  }
  return field;
}

// Rewrites a JSON path ("cluster.nvlinkGbytesPerSPerDirection", "jobs[1].model") with the schema's
// field names.
std::string canonical_path(const pb::Descriptor* root, std::string_view path) {
  std::string out;
  const pb::Descriptor* d = root;
  for (const std::string& segment : split_path(path)) {
    const std::size_t open = segment.find('[');
    const std::string name = segment.substr(0, open);
    const pb::FieldDescriptor* f = find_field(d, name);
    out += (out.empty() ? "" : ".") + (f != nullptr ? f->name() : name);
    if (open != std::string::npos) out += segment.substr(open);
    d = f != nullptr ? f->message_type() : nullptr;
  }
  return out;
}

// The member of a JSON object that sets field `f`, found by the field's proto name or its JSON name
// (protobuf accepts both), or by `name` when f is null (a key the schema lacks). Of two such keys, the
// last: the one whose value protobuf keeps.
const JsonMember* json_member(const JsonValue& object, const pb::FieldDescriptor* f, const std::string& name) {
  const JsonMember* found = nullptr;
  for (const JsonMember& m : object.members) {
    const bool match = f != nullptr ? (m.key == f->name() || m.key == f->json_name()) : m.key == name;
    if (match) found = &m;
  }
  return found;
}

TextLocation at(JsonPosition p) { return {p.line, p.column}; }

// ParsedText::location for JSON text: the start of a scalar's value (or of a repeated field's element
// when the path indexes it), the start of a message field's key (or of its indexed element), the key of
// a field the schema lacks; the nearest enclosing field written when the path's own field is absent.
TextLocation json_location(const JsonValue& doc, const pb::Descriptor* root, std::string_view field_path) {
  TextLocation best;
  const JsonValue* node = &doc;
  const pb::Descriptor* d = root;
  for (const std::string& segment : split_path(field_path)) {
    if (node->kind != JsonValue::Kind::kObject) break;
    const auto [name, index] = split_index(segment);
    const pb::FieldDescriptor* f = find_field(d, name);
    const JsonMember* member = json_member(*node, f, name);
    if (member == nullptr) break;
    best = at(member->key_at);
    if (f == nullptr) break;
    const JsonValue* value = &member->value;
    if (index >= 0) {
      if (value->kind != JsonValue::Kind::kArray || static_cast<std::size_t>(index) >= value->elements.size()) break;
      value = &value->elements[static_cast<std::size_t>(index)];
      best = at(value->at);
    }
    if (f->message_type() == nullptr) {
      if (!f->is_repeated() || index >= 0) best = at(value->at);
      break;
    }
    node = value;
    d = f->message_type();
  }
  return best;
}

// The JSON value that sets the message field at `path` (a path without indexes into a repeated message
// field names its array), or null.
const JsonValue* json_value_at(const JsonValue& doc, const pb::Descriptor* root, std::string_view path) {
  const JsonValue* node = &doc;
  const pb::Descriptor* d = root;
  for (const std::string& segment : split_path(path)) {
    if (node->kind != JsonValue::Kind::kObject) return nullptr;
    const auto [name, index] = split_index(segment);
    const pb::FieldDescriptor* f = find_field(d, name);
    const JsonMember* member = f != nullptr ? json_member(*node, f, name) : nullptr;
    if (member == nullptr) return nullptr;
    node = &member->value;
    if (index >= 0) {
      if (node->kind != JsonValue::Kind::kArray || static_cast<std::size_t>(index) >= node->elements.size())
        return nullptr;
      node = &node->elements[static_cast<std::size_t>(index)];
    }
    d = f->message_type();
  }
  return node;
}

// protobuf's JSON parser keeps the last of two keys that set one field (or fails with a message about
// oneofs); text format refuses the second. Refuse it here too, at the second key.
void check_json_duplicates(const std::string& file, const JsonValue& object, const pb::Descriptor* d,
                           const std::string& path) {
  if (object.kind != JsonValue::Kind::kObject || d == nullptr) return;
  for (std::size_t i = 0; i < object.members.size(); ++i) {
    const JsonMember& m = object.members[i];
    const pb::FieldDescriptor* f = find_field(d, m.key);
    if (f == nullptr) continue;
    const std::string field_path = path + (path.empty() ? "" : ".") + f->name();
    for (std::size_t j = 0; j < i; ++j) {
      if (find_field(d, object.members[j].key) != f) continue;
      const JsonPosition first = object.members[j].key_at;
      throw InputError(file, m.key_at.line, m.key_at.column, field_path,
                       "given twice (first at " + std::to_string(first.line) + ":" +
                           std::to_string(first.column) + ")");
    }
    if (f->message_type() == nullptr) continue;
    if (m.value.kind == JsonValue::Kind::kArray) {
      for (std::size_t k = 0; k < m.value.elements.size(); ++k) {
        check_json_duplicates(file, m.value.elements[k], f->message_type(),
                              field_path + "[" + std::to_string(k) + "]");
      }
    } else {
      check_json_duplicates(file, m.value, f->message_type(), field_path);
    }
  }
}

std::string field_names(const pb::Descriptor* d) {
  std::string out;
  for (int i = 0; i < d->field_count(); ++i) out += (i == 0 ? "" : ", ") + d->field(i)->name();
  return out;
}

std::string unknown_field_message(const pb::Descriptor* d, const std::string& name) {
  std::string out = "unknown field \"" + name + "\"";
  if (d != nullptr) out += " (" + d->name() + " has: " + field_names(d) + ")";
  return out;
}

std::string enum_values(const pb::EnumDescriptor* e) {
  std::string out;
  for (int i = 0; i < e->value_count(); ++i) out += (i == 0 ? "" : ", ") + e->value(i)->name();
  return out;
}

// A byte as messages show it: "0x82".
std::string hex_byte(unsigned char b) {
  char out[8];
  std::snprintf(out, sizeof out, "0x%02X", b);
  return out;
}

// Keeps the first error protobuf reports; the parser stops there anyway.
class FirstErrorCollector : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (has_error_) return;
    has_error_ = true;
    line_ = line;
    column_ = column;
    message_ = message;
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string&) override {}

  bool has_error() const { return has_error_; }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  bool has_error_ = false;
  int line_ = 0;
  int column_ = 0;
  std::string message_;
};

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// Text between the first pair of double quotes after `after`, e.g. the type in
// `Message type "clustersim.schema.Cluster" has no field named "foo".`
std::string quoted_part(std::string_view message, std::size_t after = 0) {
  const std::size_t open = message.find('"', after);
  if (open == std::string_view::npos) return {};
  const std::size_t close = message.find('"', open + 1);
  if (close == std::string_view::npos) return {};
  return std::string(message.substr(open + 1, close - open - 1));
}

// context_at's path ("jobs[1].parallel[0].dpp") with the index kept only on repeated fields the schema has
// ("jobs[1].parallel.dpp"), as the loaders name fields.
std::string schema_path(const pb::Descriptor* root, std::string_view indexed) {
  std::string out;
  const pb::Descriptor* d = root;
  for (const std::string& segment : split_path(indexed)) {
    const auto [name, index] = split_index(segment);
    const pb::FieldDescriptor* f = find_field(d, name);
    out += (out.empty() ? "" : ".") + name;
    if (f != nullptr && f->is_repeated() && index >= 0) out += "[" + std::to_string(index) + "]";
    d = f != nullptr ? f->message_type() : nullptr;
  }
  return out;
}

[[noreturn]] void throw_text_error(std::string_view text, const std::string& file, const pb::Descriptor* root,
                                   const FirstErrorCollector& errors) {
  ErrorContext context = context_at(text, errors.line(), errors.column());
  context.path = schema_path(root, context.path);
  context.value_path = schema_path(root, context.value_path);
  int line = errors.line();
  int column = errors.column();
  std::string message = errors.message();
  const bool about_name = message.find("has no field named") != std::string::npos ||
                          message.find("is specified") != std::string::npos;
  if (about_name && context.at_field_name) {
    // protobuf reports these at the token after the name; point at the name itself.
    line = context.name_line;
    column = context.name_column;
  }
  if (starts_with(message, "Message type \"")) {
    const std::string type = quoted_part(message);
    const std::string name = quoted_part(message, message.find("has no field named"));
    message = unknown_field_message(root->file()->pool()->FindMessageTypeByName(type), name);
  } else if (starts_with(message, "Unknown enumeration value")) {
    // Reported after the value has been read: point at the value.
    if (!context.value_path.empty()) {
      context.path = context.value_path;
      line = context.value_line;
      column = context.value_column;
    }
    const pb::FieldDescriptor* f = field_at_path(root, context.path);
    if (f != nullptr && f->enum_type() != nullptr) message += " Valid values: " + enum_values(f->enum_type()) + ".";
  }
  // The tokenizer's own words, which name no cause a reader of a scenario would know, said plainly.
  if (starts_with(message, "Interpreting non ascii codepoint ")) {
    message = "byte " + hex_byte(static_cast<unsigned char>(std::atoi(message.c_str() + 33))) +
              " is not ASCII: outside quoted strings, text format takes ASCII names and numbers only (is this a "
              "text file in UTF-8?)";
  } else if (message == "Invalid control characters encountered in text.") {
    message = "a control character (a byte below 0x20 other than tab or a line end): is this a text file?";
  } else if (message == "Unexpected end of string.") {
    message = "the quoted string is not closed on its line (a string ends at its closing \" on the same line)";
  } else if (message.ends_with("got: ")) {  // the tokenizer's token is empty at the end of the input only
    message += "the end of the file: the file is cut off";
  }
  throw InputError(file, line + 1, column + 1, context.path, message);
}

// The length of the well-formed UTF-8 sequence at s[i] (no overlong forms, surrogates or code points above
// U+10FFFF), or 0 where none starts.
std::size_t utf8_length_at(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned>(static_cast<unsigned char>(s[k])); };
  const unsigned c = byte(i);
  std::size_t len = 0;
  unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c < 0x80) {
    return 1;
  } else if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    const unsigned d = byte(i + k);
    if (k == 1 ? (d < lo || d > hi) : (d < 0x80 || d > 0xBF)) return 0;
  }
  return len;
}

// Where JSON text breaks UTF-8, which protobuf's parser reports without a position: the first byte that starts
// no valid sequence (or a sequence cut short), or the first \uD800-\uDBFF escape not followed by a \uDC00-\uDFFF
// one (a lone surrogate). Columns count characters, as the JSON reader's do. (line, column, what) or none.
std::optional<std::tuple<int, int, std::string>> json_encoding_error(std::string_view text) {
  int line = 1, column = 1;
  auto hex_at = [&](std::size_t i) -> int {  // the 4 hex digits of a \u escape at i, or -1
    if (i + 6 > text.size() || text[i] != '\\' || (text[i + 1] != 'u' && text[i + 1] != 'U')) return -1;
    int v = 0;
    for (std::size_t k = i + 2; k < i + 6; ++k) {
      const char c = text[k];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    return v;
  };
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b == '\n') {
      ++line, column = 1, ++i;
      continue;
    }
    if (b == '\\' && i + 1 < text.size() && text[i + 1] != 'u' && text[i + 1] != 'U') {  // \" or \\: skip both
      column += 2, i += 2;
      continue;
    }
    if (const int u = hex_at(i); u >= 0) {
      if (u >= 0xD800 && u <= 0xDBFF) {
        const int low = hex_at(i + 6);
        if (low < 0xDC00 || low > 0xDFFF)
          return std::tuple{line, column,
                            "\\u" + std::string(text.substr(i + 2, 4)) +
                                " is half of a surrogate pair, not followed by its low half: no character"};
        column += 12, i += 12;
        continue;
      }
      if (u >= 0xDC00 && u <= 0xDFFF)
        return std::tuple{line, column,
                          "\\u" + std::string(text.substr(i + 2, 4)) +
                              " is the low half of a surrogate pair without its high half: no character"};
      column += 6, i += 6;
      continue;
    }
    const std::size_t n = utf8_length_at(text, i);
    if (n == 0) {
      return std::tuple{line, column, "byte " + hex_byte(b) + " is not UTF-8, which JSON text must be"};
    }
    ++column, i += n;
  }
  return std::nullopt;
}

// JsonStringToMessage reports "(a.b) name: Cannot find field." or "(a.b): what", without positions,
// and syntax errors with a multi-line caret display. Reading the text again gives the positions: a
// syntax error where the reader finds it, any other error at the field it names.
[[noreturn]] void throw_json_error(const std::string& file, const pb::Descriptor* root, std::string_view text,
                                   std::string status) {
  JsonValue doc;
  if (const std::optional<JsonSyntaxError> syntax = read_json(text, doc)) {
    throw InputError(file, syntax->at.line, syntax->at.column, canonical_path(root, syntax->path),
                     "not valid JSON: " + syntax->message);
  }
  check_json_duplicates(file, doc, root, "");
  if (const auto bad = json_encoding_error(text)) {
    const auto& [line, column, what] = *bad;
    throw InputError(file, line, column, "", what);
  }
  status = status.substr(0, status.find('\n'));
  while (!status.empty() && std::isspace(static_cast<unsigned char>(status.back()))) status.pop_back();
  std::string path;
  std::string message = status;
  if (starts_with(status, "(")) {
    const std::size_t close = status.find(')');
    if (close != std::string::npos) {
      path = status.substr(1, close - 1);
      std::string rest = status.substr(close + 1);
      if (starts_with(rest, ":")) rest.erase(0, 1);
      while (starts_with(rest, " ")) rest.erase(0, 1);
      message = rest;
    }
  }
  // A scalar where a message belongs: "invalid value 5 for type type.googleapis.com/clustersim.schema.Training".
  constexpr std::string_view kValue = "invalid value ", kForType = " for type type.googleapis.com/";
  // The same words for an enum name protobuf does not know ("bf16" for BF16): list the names it takes.
  if (const std::size_t type_at = message.find(kForType); starts_with(message, kValue) && type_at != std::string::npos) {
    const std::string value = message.substr(kValue.size(), type_at - kValue.size());
    const std::string full = message.substr(type_at + kForType.size());
    const std::string type = full.substr(full.rfind('.') + 1);
    const pb::EnumDescriptor* e = root->file()->pool()->FindEnumTypeByName(full);
    std::string names;  // the values a scenario sets (not the unset 0 of proto3, e.g. PRECISION_UNSPECIFIED)
    for (int i = 0; e != nullptr && i < e->value_count(); ++i)
      if (e->value(i)->number() != 0 || !e->value(i)->name().ends_with("_UNSPECIFIED"))
        names += (names.empty() ? "" : ", ") + e->value(i)->name();
    message = e != nullptr ? value + " is not one of " + names : "expected an object (a " + type + "), found " + value;
  }
  // An object where one value belongs: "invalid value Starting an object on a scalar field for type nodes" (the
  // field's name, after the path of its object).
  constexpr std::string_view kObjectOnScalar = "invalid value Starting an object on a scalar field for type ";
  if (starts_with(message, ": ") && message.find(kObjectOnScalar) == 2) message.erase(0, 2);  // at the top level
  if (starts_with(message, kObjectOnScalar)) {
    const std::string name = message.substr(kObjectOnScalar.size());
    // In a list of values protobuf's path ends with the field itself, indexed by the element before the object
    // (none for the first): the object is the element after it.
    const std::size_t dot = path.rfind('.');
    const std::string last = path.substr(dot == std::string::npos ? 0 : dot + 1);
    const auto [last_name, last_index] = split_index(last);
    if (last_name == name) {
      path = path.substr(0, path.size() - last.size()) + name + "[" + std::to_string(last_index + 1) + "]";
    } else {
      path = path.empty() ? name : path + "." + name;
    }
    message = "expected one value, found an object";
  }
  // A list where one value belongs: "nodes: Proto field is not repeating, cannot start list." (the field's name
  // after the path of its object, which is empty at the top level).
  constexpr std::string_view kNotRepeating = ": Proto field is not repeating, cannot start list.";
  if (message.size() > kNotRepeating.size() && message.ends_with(kNotRepeating)) {
    const std::string name = message.substr(0, message.size() - kNotRepeating.size());
    path = path.empty() ? name : path + "." + name;
    const pb::FieldDescriptor* f = field_at_path(root, path);
    message = f != nullptr && f->message_type() != nullptr
                  ? "expected an object (a " + f->message_type()->name() + "), found a list"
                  : "expected one value, found a list";
  }
  if (doc.kind != JsonValue::Kind::kObject) {
    throw InputError(file, doc.at.line, doc.at.column, "", "the JSON value must be an object (a " + root->name() + ")");
  }
  constexpr std::string_view kUnknown = ": Cannot find field.";
  if (message.size() > kUnknown.size() && message.ends_with(kUnknown)) {
    const std::string name = message.substr(0, message.size() - kUnknown.size());
    const pb::Descriptor* parent = root;
    if (!path.empty()) {
      const pb::FieldDescriptor* f = field_at_path(root, path);
      parent = f != nullptr ? f->message_type() : nullptr;
    }
    // The key itself, looked up in its object (a key may hold '.', which a dotted path cannot carry).
    const JsonValue* object = json_value_at(doc, root, canonical_path(root, path));
    const JsonMember* key = object != nullptr && object->kind == JsonValue::Kind::kObject
                                ? json_member(*object, nullptr, name) : nullptr;
    path = canonical_path(root, path.empty() ? name : path + "." + name);
    const TextLocation where = key != nullptr ? at(key->key_at) : json_location(doc, root, path);
    throw InputError(file, where.line, where.column, path, unknown_field_message(parent, name));
  }
  path = canonical_path(root, path);
  const TextLocation where = json_location(doc, root, path);
  throw InputError(file, where.line, where.column, path, message);
}

}  // namespace

InputSyntax syntax_for_path(std::string_view path) {
  constexpr std::string_view kJson = ".json";
  if (path.size() < kJson.size()) return InputSyntax::kTextFormat;
  const std::string_view ext = path.substr(path.size() - kJson.size());
  for (std::size_t i = 0; i < ext.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(ext[i])) != kJson[i]) return InputSyntax::kTextFormat;
  }
  return InputSyntax::kJson;
}

ParsedText::ParsedText(const pb::Message& message, std::string file, InputSyntax syntax, std::string text,
                       std::unique_ptr<pb::TextFormat::ParseInfoTree> tree, std::shared_ptr<const JsonValue> json)
    : message_(&message), file_(std::move(file)), syntax_(syntax), text_(std::move(text)), tree_(std::move(tree)),
      json_(std::move(json)) {}

TextLocation ParsedText::location(std::string_view field_path) const {
  TextLocation best;
  if (syntax_ == InputSyntax::kJson) return json_ ? json_location(*json_, message_->GetDescriptor(), field_path) : best;
  if (tree_ == nullptr) return best;
  const pb::Descriptor* d = message_->GetDescriptor();
  const pb::TextFormat::ParseInfoTree* tree = tree_.get();
  for (const std::string& segment : split_path(field_path)) {
    if (d == nullptr || tree == nullptr) break;
    const auto [name, index] = split_index(segment);
    const pb::FieldDescriptor* f = d->FindFieldByName(name);
    if (f == nullptr) break;
    const int i = f->is_repeated() ? std::max(index, 0) : -1;
    pb::TextFormat::ParseLocation at = tree->GetLocation(f, i);
    // A repeated scalar in list syntax (`x: [1, 2, 3]`) has its name once: protobuf records element 0 only.
    int list_element = 0;
    if (at.line < 0 && i > 0 && f->message_type() == nullptr && tree->GetLocation(f, 0).line >= 0) {
      at = tree->GetLocation(f, 0);
      list_element = i;
    }
    if (at.line < 0) break;
    best = {at.line + 1, at.column + 1};
    if (f->message_type() == nullptr) {
      // A scalar: point at its value, after the name and the colon.
      Cursor c{text_};
      while (!c.done() && c.before(at.line, at.column)) c.advance();
      next_token(c);
      if (next_token(c).text == ":") {
        Token value = next_token(c);
        if (value.text == "[" && list_element > 0) {
          // The element's value follows the list_element-th comma of the list.
          int commas = 0;
          while (commas < list_element) {
            const Token t = next_token(c);
            if (t.kind == TokenKind::kEnd || t.text == "]") break;
            if (t.text == ",") ++commas;
          }
          if (commas == list_element) value = next_token(c);
        }
        if (value.kind != TokenKind::kEnd && value.text != "[" && value.text != "]")
          best = {value.line + 1, value.column + 1};
      }
      break;
    }
    tree = tree->GetTreeForNested(f, i);
    d = f->message_type();
  }
  return best;
}

void ParsedText::fail(const std::string& field_path, const std::string& message) const {
  const TextLocation at = location(field_path);
  throw InputError(file_, at.line, at.column, field_path, message);
}

namespace {

// Where `s` stops being UTF-8 (the offset of the first byte that is not part of a well-formed sequence), or npos
// when all of it is.
std::size_t invalid_utf8_at(const std::string& s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t len = utf8_length_at(s, i);
    if (len == 0) return i;
    i += len;
  }
  return std::string::npos;
}

// Protobuf enums are open: text format and JSON take any number ("fidelity: 99"), which a switch's default
// would then silently read as some other value. Every set enum field, at any depth, must name a value.
// Strings must be UTF-8 without NUL characters: they become file paths (a NUL would cut "a\0.textproto" to
// "a"), names in text, JSON and HTML outputs (which declare UTF-8), and lookup keys.
void check_field_values(const pb::Message& message, const std::string& prefix, const ParsedText& parsed) {
  const pb::Reflection* r = message.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(message, &fields);
  for (const pb::FieldDescriptor* f : fields) {
    const std::string name = prefix + f->name();
    const int n = f->is_repeated() ? r->FieldSize(message, f) : 1;
    for (int i = 0; i < n; ++i) {
      const std::string path = f->is_repeated() ? name + "[" + std::to_string(i) + "]" : name;
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        check_field_values(f->is_repeated() ? r->GetRepeatedMessage(message, f, i) : r->GetMessage(message, f),
                           path + ".", parsed);
      } else if (f->type() == pb::FieldDescriptor::TYPE_STRING) {
        const std::string v = f->is_repeated() ? r->GetRepeatedString(message, f, i) : r->GetString(message, f);
        if (const std::size_t nul = v.find('\0'); nul != std::string::npos)
          parsed.fail(path, "contains a NUL character (at byte " + std::to_string(nul) + " of the string)");
        if (const std::size_t bad = invalid_utf8_at(v); bad != std::string::npos) {
          parsed.fail(path, "is not UTF-8 text (byte " + hex_byte(static_cast<unsigned char>(v[bad])) + " at byte " +
                                std::to_string(bad) + " of the string)");
        }
      } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_ENUM) {
        const int v = f->is_repeated() ? r->GetRepeatedEnumValue(message, f, i) : r->GetEnumValue(message, f);
        const pb::EnumDescriptor* e = f->enum_type();
        if (e->FindValueByNumber(v) != nullptr) continue;
        std::string names;
        for (int k = 0; k < e->value_count(); ++k) {
          const std::string& value = e->value(k)->name();
          if (value.size() >= 12 && value.compare(value.size() - 12, 12, "_UNSPECIFIED") == 0) continue;
          names += (names.empty() ? "" : ", ") + value;
        }
        parsed.fail(path, std::to_string(v) + " is not one of " + names);
      }
    }
  }
}

}  // namespace

ParsedText parse_message(std::string_view raw, const std::string& file, InputSyntax syntax, pb::Message& message) {
  // Old Mac line ends (a CR alone) end lines too: text format would read a file of them as one line, whose
  // first '#' comment hides the rest. CRLF needs nothing (the CR is white space).
  std::string with_newlines;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '\r' || (i + 1 < raw.size() && raw[i + 1] == '\n')) continue;
    if (with_newlines.empty()) with_newlines.assign(raw);
    with_newlines[i] = '\n';
  }
  std::string_view text = with_newlines.empty() ? raw : std::string_view(with_newlines);
  // A UTF-8 byte order mark, which some editors write at the start of a file: no character, skipped.
  if (starts_with(text, "\xEF\xBB\xBF")) text.remove_prefix(3);
  message.Clear();
  const pb::Descriptor* root = message.GetDescriptor();
  if (text.size() > static_cast<std::size_t>(INT_MAX)) {
    throw InputError(file, 0, 0, "", "input too large (" + std::to_string(text.size()) + " bytes)");
  }
  if (syntax == InputSyntax::kJson) {
    pb::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;
    const auto status = pb::util::JsonStringToMessage(pb::StringPiece(text.data(), text.size()), &message, options);
    if (!status.ok()) throw_json_error(file, root, text, status.message().ToString());
    auto doc = std::make_shared<JsonValue>();
    if (read_json(text, *doc)) doc.reset();  // protobuf took what this reader refuses: no positions then
    if (doc) check_json_duplicates(file, *doc, root, "");
    ParsedText parsed(message, file, syntax, std::string(text), nullptr, std::move(doc));
    check_field_values(message, "", parsed);
    return parsed;
  }
  auto tree = std::make_unique<pb::TextFormat::ParseInfoTree>();
  FirstErrorCollector errors;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(tree.get());
  pb::io::ArrayInputStream input(text.data(), static_cast<int>(text.size()));
  if (!parser.Parse(&input, &message)) {
    if (errors.has_error()) throw_text_error(text, file, root, errors);
    throw InputError(file, 0, 0, "", "not a valid " + root->name() + " in protobuf text format");
  }
  ParsedText parsed(message, file, syntax, std::string(text), std::move(tree));
  check_field_values(message, "", parsed);
  return parsed;
}

namespace {

std::mutex inputs_mutex;
std::set<std::filesystem::path> inputs_read;  // canonical paths of the plain files read

std::filesystem::path canonical_file(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  return ec ? std::filesystem::path(path).lexically_normal() : p;
}

}  // namespace

std::string read_text_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw InputError(path, 0, 0, "", std::string("cannot read file: ") + std::strerror(errno));
  std::string out;
  char buffer[65536];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) {
    out.append(buffer, n);
    if (out.size() > kMaxInputFileBytes) {  // /dev/zero, or not an input of clustersim's
      std::fclose(f);
      throw InputError(path, 0, 0, "",
                       "cannot read file: longer than " + std::to_string(kMaxInputFileBytes >> 20) +
                           " MiB, more than any scenario, profile, raw measurement or nccl-tests log");
    }
  }
  const int error = std::ferror(f) != 0 ? errno : 0;
  std::fclose(f);
  if (error != 0) throw InputError(path, 0, 0, "", std::string("cannot read file: ") + std::strerror(error));
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    const std::lock_guard<std::mutex> lock(inputs_mutex);
    inputs_read.insert(canonical_file(path));
  }
  return out;
}

bool was_read_as_input(const std::string& path) {
  const std::filesystem::path file = canonical_file(path);
  const std::lock_guard<std::mutex> lock(inputs_mutex);
  return inputs_read.count(file) != 0;
}

std::string format_number(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

}  // namespace clustersim::calibrate
