#include "workloads/collective_engine.h"

#include <cassert>

#include "sim/trace.h"
#include "workloads/network_model.h"

namespace clustersim::workloads {

CollectiveEngine::CollectiveEngine(sim::Simulation& sim, const Scenario& scenario, NetworkModel* network)
    : sim_(sim), scenario_(scenario), network_(network) {
  assert((scenario.fidelity == Fidelity::kAnalytical || network) && "FLOW fidelity needs a network model");
}

RingCost CollectiveEngine::analytical_cost(const CollectiveCall& call) const {
  return ring_allreduce_cost(scenario_.cluster, scenario_.profile.collectives, call.gpus, call.size);
}

sim::TaskId CollectiveEngine::add(sim::TaskGraph& graph, std::string name, std::string category, CollectiveCall call,
                                  std::span<const sim::StreamId> lanes, std::span<const sim::TaskId> deps) {
  const RingCost cost = analytical_cost(call);
  const double n = static_cast<double>(call.gpus.size());
  // nccl-tests convention: algbw = size / time, busbw = algbw · 2(n−1)/n for AllReduce.
  const double busbw = cost.total().raw() > 0 ? call.size.raw() / cost.total().raw() * 2 * (n - 1) / n / 1e9 : 0;
  std::vector<sim::TaskArg> args = {
      {"bytes", call.size.raw(), {}},
      {"ranks", n, {}},
      {"algorithm", 0, "ring"},
      {"protocol", 0, "simple"},
      {"fidelity", 0, to_string(scenario_.fidelity)},
      {scenario_.fidelity == Fidelity::kAnalytical ? "bus_bandwidth_GBps" : "contention_free_bus_bandwidth_GBps",
       busbw,
       {}}};
  const sim::LabelId label = graph.add_label({std::move(name), std::move(category), std::move(args)});
  const sim::TaskId id = graph.add_dynamic(label, lanes, deps);
  if (call_of_task_.size() <= id) call_of_task_.resize(id + 1, -1);
  call_of_task_[id] = static_cast<std::int64_t>(calls_.size());
  calls_.push_back(std::move(call));
  return id;
}

void CollectiveEngine::run(sim::TaskId task, std::function<void()> done) {
  assert(task < call_of_task_.size() && call_of_task_[task] >= 0 && "not a collective of this engine");
  const CollectiveCall& call = calls_[static_cast<std::size_t>(call_of_task_[task])];
  if (scenario_.fidelity == Fidelity::kAnalytical || call.gpus.size() <= 1) {
    sim_.schedule_after(sim::to_sim_time(analytical_cost(call).total()), std::move(done));
    return;
  }
  network_->run_allreduce(call, std::move(done));
}

}  // namespace clustersim::workloads
