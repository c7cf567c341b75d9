#include "sim/simulation.h"

#include <cstdio>
#include <string>

namespace clustersim::sim {

namespace {
std::string time_range_message(double seconds) {
  char buffer[320];
  std::snprintf(buffer, sizeof buffer,
                "simulated time out of range: %.6g s (%.3g days) is beyond the %.0f days the simulator counts in "
                "picoseconds; a bandwidth, rate, size or slowdown in the inputs is far outside what hardware does",
                seconds, seconds / 86400.0, double(kMaxSimTime) * 1e-12 / 86400.0);
  return buffer;
}
}  // namespace

TimeRangeError::TimeRangeError(double seconds) : std::runtime_error(time_range_message(seconds)) {}

std::uint64_t Simulation::run() {
  const std::uint64_t before = queue_.executed();
  while (queue_.run_next()) {
  }
  return queue_.executed() - before;
}

}  // namespace clustersim::sim
