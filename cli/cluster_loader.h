// The cluster part of a scenario (schema topology/cluster.proto) to and from its value type
// (topology::ClusterSpec), and the built-in node presets (topology/presets/*.textproto, schema
// topology/topology.proto), which are parsed here because topology/ never sees protobuf.
//
// Validation covers every field: ranges and units, the form (simple, preset, explicit: never two of them),
// preset overrides (no NVLink override on a PCIe-only preset; a torus must hold nodes x gpus_per_node chips),
// the fabric's sizing (the topology is built once to check it), fault selectors (unknown vertices, a pattern
// that matches no link, faults that leave a GPU without a route) and slow GPUs. Errors name the field's
// FILE:LINE:COL through ParsedText::fail, e.g.
//   scenario.textproto:9:14: cluster.link_faults[2].pattern: "n9/*" matches no link
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "calibrate/proto_text.h"
#include "topology/cluster.pb.h"
#include "topology/cluster_spec.h"

namespace clustersim::cli {

// Validates `c`, found at field path `path` ("cluster"; "" when `c` is the parsed root) of `in`.
topology::ClusterSpec to_cluster(const calibrate::ParsedText& in, const schema::Cluster& c, const std::string& path);

// Writes the cluster with every default filled in (for --resolved); to_cluster() of it gives an equal spec.
void write_cluster(const topology::ClusterSpec& cluster, schema::Cluster& c);

// Names of the built-in node presets ("dgx-a100", ...).
std::vector<std::string_view> node_preset_names();

// Parses a cluster given as text-format schema::Cluster (the body of a scenario's `cluster { ... }`); for
// tests and tools. `file` names it in errors; field paths are relative to the cluster ("link_faults[0].to").
topology::ClusterSpec load_cluster_text(const std::string& text, const std::string& file);

}  // namespace clustersim::cli
