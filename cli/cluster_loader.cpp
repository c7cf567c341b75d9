#include "cli/cluster_loader.h"

#include "cli/validate.h"

namespace clustersim::cli {

topology::ClusterSpec to_cluster(const ParsedText& in, const schema::Cluster& c, const std::string& path) {
  topology::ClusterSpec out;
  out.nodes = at_least_one(in, path + ".nodes", c.has_nodes(), c.nodes());
  out.gpus_per_node = at_least_one(in, path + ".gpus_per_node", c.has_gpus_per_node(), c.gpus_per_node());
  if (std::uint64_t{out.nodes} * out.gpus_per_node > std::numeric_limits<std::uint32_t>::max()) {
    in.fail(path + ".gpus_per_node", plural(out.nodes, "node") + " x " + plural(out.gpus_per_node, "GPU") +
                                         " per node is more GPUs than 2^32 - 1");
  }
  if (!c.has_gpu() || c.gpu().empty()) {
    in.fail(path + ".gpu", "missing (required: the GPU type, e.g. \"A100-SXM4-80GB\", as the profile names it)");
  }
  out.gpu = c.gpu();
  out.nvlink_per_direction =
      GBps(positive(in, path + ".nvlink_gbytes_per_s_per_direction", c.has_nvlink_gbytes_per_s_per_direction(),
                    c.nvlink_gbytes_per_s_per_direction(), "decimal GB/s per GPU per direction"));
  out.nic_per_direction =
      Gbitps(positive(in, path + ".nic_gbits_per_s_per_direction", c.has_nic_gbits_per_s_per_direction(),
                      c.nic_gbits_per_s_per_direction(), "Gbit/s per GPU per direction"));
  out.nvlink_hop_latency = microseconds(non_negative(in, path + ".nvlink_hop_latency_us",
                                                     c.has_nvlink_hop_latency_us(), c.nvlink_hop_latency_us(), "us"));
  out.network_hop_latency = microseconds(non_negative(
      in, path + ".network_hop_latency_us", c.has_network_hop_latency_us(), c.network_hop_latency_us(), "us"));
  return out;
}

void write_cluster(const topology::ClusterSpec& cluster, schema::Cluster& c) {
  c.set_nodes(cluster.nodes);
  c.set_gpus_per_node(cluster.gpus_per_node);
  c.set_gpu(cluster.gpu);
  const double nvlink = cluster.nvlink_per_direction.raw();
  c.set_nvlink_gbytes_per_s_per_direction(invert(nvlink, nvlink / 1e9, [](double v) { return GBps(v).raw(); }));
  const double nic = cluster.nic_per_direction.raw();
  c.set_nic_gbits_per_s_per_direction(invert(nic, nic * 8 / 1e9, [](double v) { return Gbitps(v).raw(); }));
  const auto us = [](double v) { return microseconds(v).raw(); };
  c.set_nvlink_hop_latency_us(invert(cluster.nvlink_hop_latency.raw(), to_us(cluster.nvlink_hop_latency), us));
  c.set_network_hop_latency_us(invert(cluster.network_hop_latency.raw(), to_us(cluster.network_hop_latency), us));

}

}  // namespace clustersim::cli
