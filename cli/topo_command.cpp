#include "cli/topo_command.h"

#include <boost/program_options.hpp>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "cli/command_line.h"
#include "cli/report.h"
#include "cli/scenario_loader.h"
#include "sim/input_error.h"
#include "topology/topology.h"

namespace po = boost::program_options;

namespace clustersim::cli {
namespace {

// Left-aligned in a column of `width` characters (at least one space after).
std::string fmt_name(const std::string& name, std::size_t width) {
  return name + std::string(name.size() < width ? width - name.size() : 1, ' ');
}

}  // namespace

int topo_command(const std::vector<std::string>& args, std::ostream& out) {
  po::options_description named(
      "clustersim topo [SCENARIO] [options]\n\n"
      "Prints the cluster of SCENARIO (default: the built-in scenario): GPUs, switches,\n"
      "links per kind, NVLink domain size, bisection bandwidth, oversubscription, diameter.\n\n"
      "Options");
  named.add_options()("help,h", "show this help")("dot", po::value<std::string>()->value_name("FILE"),
                                                  "write the graph in Graphviz format");
  const ParsedCommand parsed = parse_command(args, named, "topo");
  const po::variables_map& vm = parsed.options;
  if (vm.count("help")) {
    out << named << "\n";
    return 0;
  }
  check_output_options(parsed, {"dot"});
  const workloads::Scenario sc = load_scenario_argument(parsed, "topo");

  const topology::Topology topo(sc.cluster);
  const topology::TopologyStats st = topo.stats();
  const auto& c = sc.cluster;
  out << "clustersim topo: " << sc.name << "\n";
  out << "  GPUs              " << st.gpus << " (" << c.nodes << (c.nodes == 1 ? " node" : " nodes") << " x "
      << c.gpus_per_node << " " << c.gpu << (c.node.preset.empty() ? "" : ", preset " + c.node.preset) << ")\n";
  if (c.is_torus()) {
    const auto& d = c.node.torus;
    const std::string shape = std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
    out << "  ICI               "
        << (c.node.torus_wraps ? shape + " torus: wraparound on every axis of 3 or more chips"
                               : shape +
                                     " mesh: no wraparound (a TPU v4 slice wraps around only when every side is "
                                     "a multiple of 4)")
        << "\n";
  } else {
    out << "  NVLink domain     " << st.nvlink_domain_size << " GPUs (" << st.nvlink_domains
        << (st.nvlink_domains == 1 ? " domain" : " domains") << ")\n";
  }
  // NCCL's tuning reads the hosts' CPU vendor across NVLink domains (cluster.proto cpu_vendor).
  if (c.node.cpu_vendor != topology::CpuVendor::kUnspecified)
    out << "  host CPUs         " << topology::to_string(c.node.cpu_vendor) << "\n";
  out << "  vertices         ";
  for (const auto& [kind, count] : st.vertices) out << " " << topology::to_string(kind) << " " << count;
  out << "\n";
  if (!c.is_explicit() && topology::has_fabric(c)) {
    // The graph has one logical spine per leaf uplink (and cores to match), each using a few of its ports; the
    // switches to buy carry the same cables at full radix: ceil(ports in use / radix) per tier.
    const topology::FabricShape shape = topology::fabric_shape(c);
    const std::uint64_t k = c.fabric.switch_radix, up = shape.ports.uplinks, down = shape.ports.downlinks;
    auto boxes = [&](std::uint64_t ports, std::uint64_t per_switch) { return (ports + per_switch - 1) / per_switch; };
    // Uplinks a leaf needs for the NICs it holds: a full leaf's `up` for its `down` NIC ports, in proportion (a
    // rail leaf of a 2-node cluster holds 2 NICs and needs 2 uplinks at 1:1, not a full leaf's 32). Leaves are
    // numbered as the graph builds them: rail by rail, then in node order.
    auto needed_uplinks = [&](std::uint32_t leaf) -> std::uint64_t {
      std::uint64_t nics = 0;
      if (c.fabric.kind == topology::FabricKind::kRailOptimizedFatTree) {
        const std::uint64_t i = leaf % shape.leaves_per_rail;  // one NIC of each node, `down` nodes per leaf
        nics = std::min<std::uint64_t>(c.nodes, (i + 1) * down) - i * down;
      } else {
        const std::uint64_t first = std::uint64_t{leaf} * shape.nodes_per_leaf;
        nics = (std::min<std::uint64_t>(c.nodes, first + shape.nodes_per_leaf) - first) * c.node.nics_per_node;
      }
      return (nics * up + down - 1) / down;
    };
    out << "  switches to buy   leaf " << shape.leaves;
    if (shape.leaves > 1 && c.fabric.kind != topology::FabricKind::kClosThreeLevel) {
      std::uint64_t cables = 0;
      for (std::uint32_t l = 0; l < shape.leaves; ++l) cables += needed_uplinks(l);
      out << ", spine " << boxes(cables, k);
    } else if (shape.leaves > 1) {
      // A spine spends half its ports on its pod's leaves and half on the cores (with more than one pod); every
      // pod is built like the fullest one.
      std::uint64_t fullest = 0;
      for (std::uint32_t p = 0; p < shape.pods; ++p) {
        std::uint64_t cables = 0;
        for (std::uint32_t l = p * shape.leaves_per_pod; l < std::min(shape.leaves, (p + 1) * shape.leaves_per_pod);
             ++l)
          cables += needed_uplinks(l);
        fullest = std::max(fullest, cables);
      }
      const std::uint64_t per_pod = boxes(fullest, shape.pods > 1 ? k / 2 : k);
      out << ", spine " << per_pod * shape.pods;
      if (shape.pods > 1) out << ", core " << boxes(std::uint64_t{shape.pods} * per_pod * (k / 2), k);
    }
    out << " (" << k << "-port switches"
        << (c.fabric.switch_model.empty() ? std::string()
                                          : ": " + c.fabric.switch_model + ", the " + c.node.preset + " preset's")
        << "; each leaf with the uplinks its NICs need at the fabric's oversubscription)\n";
  }
  out << "  links (directed; a cable is two)\n";
  for (const auto& [kind, s] : st.links)
    out << "    " << fmt_name(topology::to_string(kind), 14) << fmt("%6.0f", double(s.count)) << " links, "
        << fmt("%12.1f", to_GBps(s.total)) << " GB/s in total\n";
  if (c.is_torus()) {
    out << "  bisection         " << fmt("%.1f", to_GBps(st.bisection))
        << " GB/s per direction (the least max-flow over the cuts across each axis)\n";
  } else {
    out << "  bisection         " << fmt("%.1f", to_GBps(st.bisection)) << " GB/s per direction (GPUs 0.."
        << (st.gpus / 2 ? st.gpus / 2 - 1 : 0) << " to the rest, max-flow)\n";
  }
  if (st.oversubscription.empty()) {
    out << "  oversubscription  none (no switched fabric)\n";
  } else {
    for (const auto& t : st.oversubscription) {
      if (t.ratio == 0)  // no uplinks (topology.h): nothing is oversubscribed as built
        out << "  oversubscription  " << t.tier << ": non-blocking\n";
      else
        out << "  oversubscription  " << t.tier << " " << fmt("%.2f", t.ratio) << ":1 (downlink / uplink bandwidth)\n";
    }
  }
  if (!st.oversubscription.empty()) {
    const char* how = "";
    switch (c.fabric.routing) {
      case topology::FabricRouting::kDestinationModK:
        how = " (one path per destination NIC, as an InfiniBand subnet manager programs it)\n";
        break;
      case topology::FabricRouting::kEcmpHash:
        how = " (each flow hashed onto one of the equal-cost paths; flows may collide)\n";
        break;
      case topology::FabricRouting::kAdaptive:
        how = " (each flow spread evenly over all its equal-cost paths)\n";
        break;
    }
    out << "  routing           " << topology::to_string(c.fabric.routing) << how;
  }
  out << "  diameter          " << st.diameter_hops << " hops (longest GPU-to-GPU route)\n";
  if (vm.count("dot")) {
    std::ostringstream dot;
    topo.write_graphviz(dot);
    write_file_atomically(vm["dot"].as<std::string>(), dot.str());
  }
  return 0;
}

}  // namespace clustersim::cli
