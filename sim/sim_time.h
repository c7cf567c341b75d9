// Simulated time: an integer count of picoseconds since the start of the simulation.
//
// Integer time makes event order exact and output byte-identical across runs and machines;
// int64 picoseconds cover +-106 days of simulated time, far more than one training iteration.
// Durations computed in floating-point Seconds are rounded to the nearest picosecond once,
// when they enter the engine.
#pragma once

#include <cmath>
#include <cstdint>

#include "sim/units.h"

namespace clustersim::sim {

using SimTime = std::int64_t;  // picoseconds

constexpr SimTime kPicosecondsPerSecond = 1'000'000'000'000;

inline SimTime to_sim_time(Seconds s) { return static_cast<SimTime>(std::llround(s.raw() * 1e12)); }
constexpr Seconds to_seconds(SimTime t) { return Seconds::from_raw(static_cast<double>(t) * 1e-12); }

}  // namespace clustersim::sim
