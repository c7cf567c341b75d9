#include "calibrate/json_text.h"

#include <cmath>
#include <cstdlib>

namespace clustersim::calibrate {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_';
}
bool is_number_char(char c) { return is_digit(c) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'; }
int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, unsigned code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  std::optional<JsonSyntaxError> document(JsonValue& out) {
    skip_space();
    if (!value(out, 0)) return error_;
    skip_space();
    if (!done()) {
      fail("text after the end of the JSON value");
      return error_;
    }
    return std::nullopt;
  }

 private:
  bool done() const { return pos_ >= text_.size(); }
  char peek() const { return done() ? '\0' : text_[pos_]; }
  JsonPosition here() const { return {line_, column_}; }

  void advance() {
    const char c = text_[pos_++];
    if (c == '\n') {
      ++line_;
      column_ = 1;
    } else if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) {  // not a UTF-8 continuation byte
      ++column_;
    }
  }

  void skip_space() {
    while (!done() && is_space(peek())) advance();
  }

  std::string path() const {
    std::string out;
    for (const std::string& segment : path_) {
      if (!out.empty() && (segment.empty() || segment.front() != '[')) out += '.';
      out += segment;
    }
    return out;
  }

  bool fail(const std::string& what, std::optional<JsonPosition> at = std::nullopt) {
    error_.at = at.value_or(here());
    error_.path = path();
    error_.message = done() && !at ? what + " (the file ends here)" : what;
    return false;
  }

  bool value(JsonValue& out, int depth) {
    out.at = here();
    const char c = peek();
    if (c == '{' || c == '[') {
      if (depth >= kMaxJsonDepth) {
        path_.clear();  // a path as deep as the nesting would not fit on the error's line
        return fail("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      }
      return c == '{' ? object(out, depth + 1) : array(out, depth + 1);
    }
    out.kind = JsonValue::Kind::kScalar;
    if (c == '"' || c == '\'') return string(nullptr);
    if (is_digit(c) || c == '-') return number();
    if (c >= 'a' && c <= 'z') {
      const std::size_t start = pos_;
      while (is_word_char(peek())) advance();
      const std::string_view word = text_.substr(start, pos_ - start);
      if (word == "true" || word == "false" || word == "null") return true;
      return fail("expected a value, found \"" + std::string(word) + "\" (strings are quoted)", out.at);
    }
    return fail(done() ? "expected a value" : std::string("expected a value, found '") + c + "'");
  }

  bool object(JsonValue& out, int depth) {
    out.kind = JsonValue::Kind::kObject;
    advance();  // '{'
    skip_space();
    while (peek() != '}') {
      JsonMember member;
      member.key_at = here();
      if (peek() == '"' || peek() == '\'') {
        if (!string(&member.key)) return false;
      } else if (is_word_char(peek())) {
        while (is_word_char(peek())) member.key += text_[pos_], advance();
      } else {
        return fail(done() ? "expected a key or '}'" : std::string("expected a key or '}', found '") + peek() + "'");
      }
      path_.push_back(member.key);
      skip_space();
      if (peek() != ':') return fail("expected ':' after the key");
      advance();
      skip_space();
      if (!value(member.value, depth)) return false;
      path_.pop_back();
      out.members.push_back(std::move(member));
      if (!separator('}', "expected ',' or '}' after a member")) return false;
    }
    advance();  // '}'
    return true;
  }

  // After a member or element: a ',' (and the space after it) or the closing `close`, left for the caller.
  bool separator(char close, const char* message) {
    skip_space();
    if (peek() == ',') {
      advance();
      skip_space();
      return true;
    }
    return peek() == close || fail(message);
  }

  bool array(JsonValue& out, int depth) {
    out.kind = JsonValue::Kind::kArray;
    advance();  // '['
    skip_space();
    while (peek() != ']') {
      if (path_.empty()) path_.emplace_back();  // a top-level array's elements are "[i]"
      path_.back() += "[" + std::to_string(out.elements.size()) + "]";
      JsonValue element;
      if (!value(element, depth)) return false;
      path_.back().erase(path_.back().rfind('['));
      if (path_.size() == 1 && path_.back().empty()) path_.pop_back();
      out.elements.push_back(std::move(element));
      if (!separator(']', "expected ',' or ']' after an element")) return false;
    }
    advance();  // ']'
    return true;
  }

  // A quoted string; its unescaped content goes to `out` when not null.
  bool string(std::string* out) {
    const JsonPosition start = here();
    const char quote = peek();
    advance();
    while (true) {
      if (done()) return fail("string not closed", start);
      const char c = peek();
      if (c == quote) break;
      if (c != '\\') {
        if (out != nullptr) *out += c;
        advance();
        continue;
      }
      advance();
      if (done()) return fail("string not closed", start);
      const char e = peek();
      const JsonPosition escape_at = here();
      advance();
      char plain = '\0';
      switch (e) {
        case '"': case '\'': case '\\': case '/': plain = e; break;
        case 'b': plain = '\b'; break;
        case 'f': plain = '\f'; break;
        case 'n': plain = '\n'; break;
        case 'r': plain = '\r'; break;
        case 't': plain = '\t'; break;
        case 'u': {
          unsigned code = 0;
          for (int i = 0; i < 4; ++i) {
            const int h = hex_value(peek());
            if (h < 0) return fail("\\u needs four hexadecimal digits", escape_at);
            code = code * 16 + static_cast<unsigned>(h);
            advance();
          }
          if (out != nullptr) append_utf8(*out, code);
          continue;
        }
        default:
          return fail(std::string("unknown escape \\") + e + " in a string", escape_at);
      }
      if (out != nullptr) *out += plain;
    }
    advance();  // closing quote
    return true;
  }

  bool number() {
    const JsonPosition start = here();
    const std::size_t first = pos_;
    while (is_number_char(peek())) advance();
    const std::string token(text_.substr(first, pos_ - first));
    const std::size_t digits = token[0] == '-' ? 1 : 0;
    if (token.size() > digits + 1 && token[digits] == '0' && is_digit(token[digits + 1]))
      return fail("\"" + token + "\" starts with 0: octal and hex numbers are not JSON", start);
    char* end = nullptr;
    const double value = std::strtod(token.c_str(), &end);
    if (end != token.c_str() + token.size()) return fail("\"" + token + "\" is not a number", start);
    if (std::isinf(value)) return fail("\"" + token + "\" is beyond the range of a double (about 1.8e308)", start);
    return true;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  int line_ = 1;
  int column_ = 1;
  std::vector<std::string> path_;  // keys, each with the indices of the arrays below it: "jobs[1]"
  JsonSyntaxError error_;
};

}  // namespace

std::optional<JsonSyntaxError> read_json(std::string_view text, JsonValue& out) {
  out = JsonValue{};
  return Reader(text).document(out);
}

}  // namespace clustersim::calibrate
