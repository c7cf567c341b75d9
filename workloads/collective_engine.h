// CollectiveEngine: times every collective of a simulation. The task graph holds each collective
// as a dynamic task; when all members have reached it, the executor hands it here.
//
// ANALYTICAL fidelity: the task ends after the closed-form time of its algorithm
// (collective_model.h), whatever else the network carries.
// FLOW fidelity: the collective runs as flows on the cluster's links (network_model.h), sharing
// bandwidth max-min with every other flow in flight; it ends when its flows end.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/executor.h"
#include "sim/simulation.h"
#include "sim/task_graph.h"
#include "workloads/collective_model.h"
#include "workloads/scenario.h"

namespace clustersim::workloads {

class NetworkModel;

enum class CollectiveKind { kAllReduce };

struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  std::vector<std::uint32_t> gpus;  // global GPU indices of the communicator, in rank order
  Bytes size;                       // the buffer (nccl-tests "size")
};

class CollectiveEngine : public sim::TaskRunner {
 public:
  // `network` is used at FLOW fidelity and may be null at ANALYTICAL.
  CollectiveEngine(sim::Simulation& sim, const Scenario& scenario, NetworkModel* network);

  // Adds the collective to the graph as a dynamic task on `lanes` (one stream per member GPU).
  sim::TaskId add(sim::TaskGraph& graph, std::string name, std::string category, CollectiveCall call,
                  std::span<const sim::StreamId> lanes, std::span<const sim::TaskId> deps);

  void run(sim::TaskId task, std::function<void()> done) override;

  // Closed-form cost of a call on this scenario's cluster and profile.
  RingCost analytical_cost(const CollectiveCall& call) const;

 private:
  sim::Simulation& sim_;
  const Scenario& scenario_;
  NetworkModel* network_;
  std::vector<std::int64_t> call_of_task_;  // task id → index in calls_, −1 if none
  std::vector<CollectiveCall> calls_;
};

}  // namespace clustersim::workloads
