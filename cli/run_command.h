// `clustersim run [SCENARIO] [--json FILE] [--trace FILE] [--resolved FILE]`
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace clustersim::cli {

// Runs the command with its arguments (after "run"). Returns the exit status; throws InputError
// for bad input. Output files are written only after the simulation succeeded, each atomically.
int run_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace clustersim::cli
