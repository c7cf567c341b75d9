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
