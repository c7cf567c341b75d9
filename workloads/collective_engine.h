// CollectiveEngine: times every collective of a simulation. The task graph holds each collective
// as a dynamic task; when all members have reached it, the executor hands it here.
//
// Each call is planned once, when the graph is built: NCCL's choice of algorithm and protocol for
// that operation, communicator and size (nccl_model.h). At ANALYTICAL fidelity the task then ends
// after the plan's closed-form time, whatever else the network carries; at FLOW fidelity the
// algorithm runs as flows on the cluster's links (network_model.h), sharing bandwidth max-min with
// every other flow in flight, and ends when its flows end.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/executor.h"
#include "sim/simulation.h"
#include "sim/task_graph.h"
#include "workloads/nccl_model.h"
#include "workloads/scenario.h"

namespace clustersim::workloads {

class NetworkModel;

class CollectiveEngine : public sim::TaskRunner {
 public:
  // `network` is used at FLOW fidelity and may be null at ANALYTICAL.
  CollectiveEngine(sim::Simulation& sim, const Scenario& scenario, NetworkModel* network);

  // Adds the collective to the graph as a dynamic task on `lanes` (one stream per member GPU); the
  // trace shows its operation, algorithm, protocol, bytes and bus bandwidth (at FLOW fidelity the contention-free
  // one and the one achieved, from the time it took among the other traffic). The graph must outlive the run. `lanes`
  // may name fewer streams than the request has members (at least one): under the symmetry reduction (megatron_graph.h)
  // only the simulated ranks take part in the graph, while the request — and so the plan and its time — keeps the whole
  // communicator. The executor counts lanes only, so the task starts when the simulated members have reached it.
  // `extra_args` go after the collective's own (a pipeline send's micro-batch and GPUs).
  sim::TaskId add(sim::TaskGraph& graph, std::string name, std::string category, CollectiveRequest request,
                  std::span<const sim::StreamId> lanes, std::span<const sim::TaskId> deps,
                  std::vector<sim::TaskArg> extra_args = {});

  // The same over a job's ranks: the collective of the GPUs `gpus_of_rank[r]` of `members`, on each
  // member's stream `stream_of_rank[r]`, after each member's `after_of_rank[r]` (or nothing when empty).
  sim::TaskId add_over_ranks(sim::TaskGraph& graph, std::string name, std::string category, CollectiveOp op,
                             Bytes size, std::span<const std::uint32_t> gpus_of_rank,
                             std::span<const std::uint32_t> members, std::span<const sim::StreamId> stream_of_rank,
                             std::span<const sim::TaskId> after_of_rank);

  void run(sim::TaskId task, std::function<void()> done) override;

  const CollectiveModel& model() const { return model_; }

 private:
  struct Call {
    CollectiveRequest request;
    CollectivePlan plan;
  };
  sim::Simulation& sim_;
  const Scenario& scenario_;
  NetworkModel* network_;
  CollectiveModel model_;
  // Whether each call's label gets the bus bandwidth it achieved: at FLOW fidelity, when a trace records the labels.
  bool achieved_bandwidth_arg() const { return scenario_.fidelity != Fidelity::kAnalytical && sim_.has_sinks(); }
  sim::TaskGraph* graph_ = nullptr;         // the graph of the calls (for the achieved bandwidth at FLOW)
  std::vector<std::int64_t> call_of_task_;  // task id → index in calls_, −1 if none
  std::vector<Call> calls_;
};

// One collective on its own at the scenario's fidelity (what nccl-tests measures): NCCL's choice of
// algorithm and protocol, and the time — closed form at ANALYTICAL, flows on the topology at FLOW. The request
// runs alone (CollectiveRequest::alone): a NIC shared by several GPUs is shared by the communicator's ranks only.
struct CollectiveRun {
  CollectivePlan plan;
  Seconds time;
};
CollectiveRun run_collective(const Scenario& scenario, const CollectiveRequest& request);

}  // namespace clustersim::workloads
