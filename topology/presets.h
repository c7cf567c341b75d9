// Built-in node presets: topology/presets/<name>.textproto compiled into the binary as text
// (cmake/EmbedFiles.cmake). Each file is a text-format clustersim.schema.NodePreset (topology/topology.proto)
// with its figures and their sources. topology never parses them (it sees no protobuf): the scenario loader
// (cli/cluster_loader.cpp) does, and fills ClusterSpec::node from them.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace clustersim::topology {

// The preset's text by name ("dgx-a100"), or nullopt.
std::optional<std::string_view> builtin_preset_text(std::string_view name);
// Every preset name, in the order topology/CMakeLists.txt lists them.
std::vector<std::string_view> builtin_preset_text_names();

}  // namespace clustersim::topology
