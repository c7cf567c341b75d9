// The cluster part of a scenario (schema topology/cluster.proto) to and from its value type.
#pragma once

#include <string>

#include "calibrate/proto_text.h"
#include "topology/cluster.pb.h"
#include "topology/cluster_spec.h"

namespace clustersim::cli {

// Validates `c`, found at field path `path` ("cluster") of the parsed input `in`.
topology::ClusterSpec to_cluster(const calibrate::ParsedText& in, const schema::Cluster& c, const std::string& path);

// Writes the cluster with every default filled in (for --resolved).
void write_cluster(const topology::ClusterSpec& cluster, schema::Cluster& c);

}  // namespace clustersim::cli
