// `clustersim topo [SCENARIO] [--dot FILE]`: what the cluster of a scenario looks like.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace clustersim::cli {

int topo_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace clustersim::cli
