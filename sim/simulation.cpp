#include "sim/simulation.h"

namespace clustersim::sim {

std::uint64_t Simulation::run() {
  const std::uint64_t before = queue_.executed();
  while (queue_.run_next()) {
  }
  return queue_.executed() - before;
}

}  // namespace clustersim::sim
