#include "sim/simulation.h"

#include <cstdio>
#include <string>

namespace clustersim::sim {

namespace {
std::string time_range_message(double seconds, const std::string& what) {
  char amount[64], limit[32];
  std::snprintf(amount, sizeof amount, "%.6g s (%.3g days)", seconds, seconds / 86400.0);
  std::snprintf(limit, sizeof limit, "%.0f days", double(kMaxSimTime) * 1e-12 / 86400.0);
  return std::string("simulated time out of range: ") + amount + (what.empty() ? "" : " for " + what) +
         " is beyond the " + limit +
         " the simulator counts in picoseconds; a bandwidth, rate, size or slowdown in the inputs is far outside "
         "what hardware does";
}
}  // namespace

TimeRangeError::TimeRangeError(double seconds)
    : std::runtime_error(time_range_message(seconds, "")), seconds_(seconds), names_what_(false) {}
TimeRangeError::TimeRangeError(double seconds, const std::string& what)
    : std::runtime_error(time_range_message(seconds, what)), seconds_(seconds), names_what_(!what.empty()) {}

std::uint64_t Simulation::run() {
  const std::uint64_t before = queue_.executed();
  while (queue_.run_next()) {
  }
  return queue_.executed() - before;
}

}  // namespace clustersim::sim
