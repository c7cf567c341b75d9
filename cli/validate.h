// Small validation helpers shared by the loaders of cli/: each checks one field of a parsed
// message and throws InputError at that field's line:col (ParsedText::fail) when it is wrong.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "calibrate/proto_text.h"
#include "sim/input_error.h"

namespace clustersim::cli {

using calibrate::format_number;
using calibrate::ParsedText;

inline std::string plural(std::uint64_t n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

inline std::uint32_t at_least_one(const ParsedText& in, const std::string& path, bool has, std::uint32_t value) {
  if (!has) in.fail(path, "missing (required, >= 1)");
  if (value < 1) in.fail(path, std::to_string(value) + " must be >= 1");
  return value;
}

// No scenario quantity in its field's unit (GB/s, Gbit/s, samples, tokens, us, ...) comes near 1e18; a larger value
// is a typo whose conversion to base units (x 1e9, x 2^30) or products would leave the finite doubles.
inline constexpr double kMaxScenarioValue = 1e18;

inline double finite(const ParsedText& in, const std::string& path, double value) {
  if (!std::isfinite(value)) in.fail(path, format_number(value) + " is not a finite number");
  if (std::abs(value) > kMaxScenarioValue)
    in.fail(path, format_number(value) + " is too large (at most " + format_number(kMaxScenarioValue) + ")");
  return value;
}

inline double positive(const ParsedText& in, const std::string& path, bool has, double value, const char* unit) {
  if (!has) in.fail(path, std::string("missing (required, > 0, ") + unit + ")");
  finite(in, path, value);
  if (value <= 0) in.fail(path, format_number(value) + " must be > 0 (" + unit + ")");
  return value;
}

inline double non_negative(const ParsedText& in, const std::string& path, bool has, double value, const char* unit) {
  if (!has) return 0;
  finite(in, path, value);
  if (value < 0) in.fail(path, format_number(value) + " must be >= 0 (" + unit + ")");
  return value;
}

// Physical ranges. A value no real machine or run comes near is a typo or a unit slip; it is refused at its field
// rather than simulated into a time out of range (53 days) or a meaningless figure. `real` says what real hardware
// or training does, for the message: "x: 1e+12 us is above 1e+06 us (no hop takes a second)".
inline double at_most(const ParsedText& in, const std::string& path, double value, double max, const std::string& unit,
                      const std::string& real) {
  const std::string u = unit.empty() ? "" : " " + unit;
  if (value > max) in.fail(path, format_number(value) + u + " is above " + format_number(max) + u + " (" + real + ")");
  return value;
}

inline double at_least(const ParsedText& in, const std::string& path, double value, double min, const std::string& unit,
                       const std::string& real) {
  const std::string u = unit.empty() ? "" : " " + unit;
  if (value < min) in.fail(path, format_number(value) + u + " is below " + format_number(min) + u + " (" + real + ")");
  return value;
}

// A latency in microseconds: >= 0 and at most a second, which no hop, launch or dispatch comes near (even an
// intercontinental round trip is about 0.2 s).
inline double latency_us(const ParsedText& in, const std::string& path, bool has, double value) {
  if (!has) return 0;
  non_negative(in, path, true, value, "us");
  return at_most(in, path, value, 1e6, "us", "a second; no hop, launch or dispatch takes that long");
}

// The number in the schema's unit that converts back to exactly `raw`: raw / scale is usually it,
// but (x * c) / c can be off by an ulp, and the resolved scenario must reload to equal values.
template <class Forward>
double invert(double raw, double guess, Forward forward) {
  double up = guess;
  double down = guess;
  for (int i = 0; i < 8; ++i) {
    if (forward(up) == raw) return up;
    if (forward(down) == raw) return down;
    up = std::nextafter(up, std::numeric_limits<double>::infinity());
    down = std::nextafter(down, -std::numeric_limits<double>::infinity());
  }
  return guess;
}

}  // namespace clustersim::cli
