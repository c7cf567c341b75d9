// NetworkModel: collectives as flows on the cluster's links (FLOW fidelity).
//
// The cluster's topology (topology/) becomes a FlowNetwork (sim/): one link per directed topology
// link, with capacity = link bandwidth × the profile's bus efficiency for its kind (NVLink, or
// network for NIC, PCIe and fabric links), so a contention-free collective matches the analytical
// model, and contention between concurrent collectives — DP rings of other jobs, later TP/PP/EP —
// emerges from max-min sharing. Each transfer takes its route (topology::Topology::route); under adaptive
// routing it loads every link of its equal-cost paths at its share instead (Topology::spread).
//
// Ring AllReduce (NCCL's ring, pipelined): NCCL splits the buffer over channels; across nodes it
// builds one ring per NIC rail, so k = (ranks per node) rings run at once, each carrying S/k.
// Inside a node, ring c visits the node's ranks starting at local rank c; the hop from the last
// rank of a node to the first rank of the next node is routed through the fabric. The 2(n−1) steps
// of a ring are pipelined chunks with no barrier between them, so a ring runs as one rate-coupled
// flow: each of its n edges must move 2(n−1)/n · S/k bytes, all at the same rate, over the union
// of the edges' routed links (a link used by two edges of the ring counts twice). After the ring's
// latency — NCCL's base latency plus per-step latencies along the pipeline (collective_model.h)
// plus the links' own latencies — its bytes flow at the max-min rate the network grants.
//
// Torus (Algorithm::kTorus, nccl_model.h torus_phases): the stages run one after another, the phases of a stage
// (one per part of a split buffer, each on its own axis) as one set of flows after the longest of their
// latencies. A reduce-scatter or all-gather phase along an axis runs, on every line of the box along that axis,
// two rate-coupled ring flows — clockwise and counter-clockwise over the line's members in coordinate order,
// each carrying (k−1)/k · S'/2 per edge — so each direction of each ICI link carries one ring where the members
// are neighbours. Broadcast/Reduce phases are two chain flows per line that holds (or receives) the data.
// AlltoAll is one flow per directed link with the share of the buffer that every pair's dimension-order route
// puts on it (ties split over both ways; topology::axis_loads); Send/Recv takes its one route. Each phase's
// latency is its steps' latency plus the routed links' latencies along the steps; the profile's base latency
// opens the first.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sim/flow_network.h"
#include "sim/simulation.h"
#include "workloads/collective_engine.h"
#include "workloads/scenario.h"

namespace clustersim::topology {
class Topology;
}

namespace clustersim::workloads {

struct LinkUsage {
  std::string name;         // topology link name, "from->to"
  std::string kind;         // "nvlink", "pcie", "network", ...
  BytesPerSecond capacity;  // as shared in the flow network (bandwidth × efficiency)
  Bytes bytes_carried;
  Seconds busy;  // time with at least one flow on it
  std::uint32_t peak_flows = 0;
};

class NetworkModel {
 public:
  NetworkModel(sim::Simulation& sim, const Scenario& scenario);
  ~NetworkModel();

  // Runs a planned collective as flows; `done` is called when its last flow ends.
  void run(const CollectivePlan& plan, const CollectiveRequest& request, std::function<void()> done);

  // Utilisation of every link that carried traffic, busiest (by bytes) first; ties by name.
  std::vector<LinkUsage> link_usage() const;

  // Keep every link's aggregate rate over time (for trace counter tracks). Call before running.
  void record_rates();
  // (time, bytes/s) samples of a link by name; empty unless record_rates() was called.
  std::vector<std::pair<sim::SimTime, double>> rate_samples(const std::string& link_name) const;

  const topology::Topology& topology() const;

 private:
  struct Impl;
  struct Path;
  struct Coflow;
  void append_route(Path& path, std::uint32_t a, std::uint32_t b, std::uint64_t key, int times, Seconds* latency,
                    double share = 1.0) const;
  void ring_path(const std::vector<std::uint32_t>& gpus, std::size_t channel, bool chain, Path& path, Seconds& intra,
                 Seconds& inter, std::size_t& intra_edges, std::size_t& inter_edges) const;
  void start_phase(std::vector<Coflow> flows, Seconds latency, std::function<void()> done);
  void run_torus(const CollectivePlan& plan, const CollectiveRequest& request, std::function<void()> done);
  using Phases = std::vector<std::pair<std::vector<Coflow>, Seconds>>;  // flows and latency, in order
  void run_phases(std::shared_ptr<Phases> phases, std::size_t next, std::shared_ptr<std::function<void()>> done);
  std::unique_ptr<Impl> impl_;
};

}  // namespace clustersim::workloads
