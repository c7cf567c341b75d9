// Simulated time: an integer count of picoseconds since the start of the simulation.
//
// Integer time makes event order exact and output byte-identical across runs and machines;
// int64 picoseconds cover +-106 days of simulated time, far more than one training iteration; the engine
// accepts +-53 days (kMaxSimTime) and refuses more with TimeRangeError instead of wrapping around.
// Durations computed in floating-point Seconds are rounded to the nearest picosecond once,
// when they enter the engine.
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "sim/units.h"

namespace clustersim::sim {

using SimTime = std::int64_t;  // picoseconds

constexpr SimTime kPicosecondsPerSecond = 1'000'000'000'000;

// The range the engine accepts for a duration or a point in time: 2^62 ps (about 53 days), so that the
// sum of two stays representable.
constexpr SimTime kMaxSimTime = SimTime{1} << 62;

// A duration or time outside ±kMaxSimTime, or not a number: the inputs ask for something far outside what
// hardware does (a bandwidth of bits per hour, a slowdown of 10^8). Reported as bad input (exit status 2).
class TimeRangeError : public std::runtime_error {
 public:
  explicit TimeRangeError(double seconds);
  // The same, naming what asked for that time (a task and its GPU: the executor adds it).
  TimeRangeError(double seconds, const std::string& what);
  double seconds() const { return seconds_; }
  bool names_what() const { return names_what_; }

 private:
  double seconds_;
  bool names_what_;
};

inline SimTime to_sim_time(Seconds s) {
  const double ps = s.raw() * 1e12;
  if (!(std::fabs(ps) < double(kMaxSimTime))) throw TimeRangeError(s.raw());
  return static_cast<SimTime>(std::llround(ps));
}
constexpr Seconds to_seconds(SimTime t) { return Seconds::from_raw(static_cast<double>(t) * 1e-12); }

}  // namespace clustersim::sim
