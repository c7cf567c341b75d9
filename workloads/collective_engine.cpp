#include "workloads/collective_engine.h"

#include <cassert>
#include <memory>
#include <stdexcept>

#include "sim/input_error.h"
#include "sim/trace.h"
#include "workloads/network_model.h"

namespace clustersim::workloads {

CollectiveEngine::CollectiveEngine(sim::Simulation& sim, const Scenario& scenario, NetworkModel* network)
    : sim_(sim), scenario_(scenario), network_(network), model_(scenario.cluster, scenario.profile, scenario.nccl) {
  assert((scenario.fidelity == Fidelity::kAnalytical || network) && "FLOW fidelity needs a network model");
}

sim::TaskId CollectiveEngine::add_over_ranks(sim::TaskGraph& graph, std::string name, std::string category,
                                             CollectiveOp op, Bytes size, std::span<const std::uint32_t> gpus_of_rank,
                                             std::span<const std::uint32_t> members,
                                             std::span<const sim::StreamId> stream_of_rank,
                                             std::span<const sim::TaskId> after_of_rank) {
  std::vector<std::uint32_t> gpus;
  std::vector<sim::StreamId> lanes;
  std::vector<sim::TaskId> deps;
  for (std::uint32_t r : members) {
    gpus.push_back(gpus_of_rank[r]);
    lanes.push_back(stream_of_rank[r]);
    if (!after_of_rank.empty()) deps.push_back(after_of_rank[r]);
  }
  return add(graph, std::move(name), std::move(category), CollectiveRequest{op, std::move(gpus), size, 0}, lanes,
             deps);
}

sim::TaskId CollectiveEngine::add(sim::TaskGraph& graph, std::string name, std::string category,
                                  CollectiveRequest request, std::span<const sim::StreamId> lanes,
                                  std::span<const sim::TaskId> deps, std::vector<sim::TaskArg> extra_args) {
  assert(!lanes.empty() && lanes.size() <= request.gpus.size() && "a collective's lanes are some of its members'");
  const CollectivePlan plan = model_.plan(request);
  const double n = static_cast<double>(request.gpus.size());
  std::vector<sim::TaskArg> args = {
      {"op", 0, to_string(request.op)},
      {"bytes", request.size.raw(), {}},
      {"ranks", n, {}},
      {"algorithm", 0, to_string(plan.algorithm)},
      {"protocol", 0, to_string(plan.protocol)},
      {"channels", double(plan.channels), {}},
      {"fidelity", 0, to_string(scenario_.fidelity)},
      // nccl-tests convention (busbw = size / time · factor); at FLOW the contention-free value.
      {scenario_.fidelity == Fidelity::kAnalytical ? "bus_bandwidth_GBps" : "contention_free_bus_bandwidth_GBps",
       plan.time.raw() > 0 ? request.size.raw() / plan.time.raw() *
                                 busbw_factor(request.op, static_cast<std::uint32_t>(request.gpus.size())) / 1e9
                           : 0,
       {}}};
  // At FLOW with a trace, run() appends the achieved bus bandwidth: room for it now, so that the append does not
  // reallocate (a vector's growth doubled every collective's arguments: +3.3 GB on a 144-GPU cp ring run).
  args.reserve(args.size() + extra_args.size() + (achieved_bandwidth_arg() ? 1 : 0));
  for (sim::TaskArg& a : extra_args) args.push_back(std::move(a));
  assert((!graph_ || graph_ == &graph) && "one engine, one graph");
  graph_ = &graph;
  const sim::LabelId label = graph.add_label({std::move(name), std::move(category), std::move(args)});
  const sim::TaskId id = graph.add_dynamic(label, lanes, deps);
  if (call_of_task_.size() <= id) call_of_task_.resize(id + 1, -1);
  call_of_task_[id] = static_cast<std::int64_t>(calls_.size());
  calls_.push_back(Call{std::move(request), plan});
  return id;
}

void CollectiveEngine::run(sim::TaskId task, std::function<void()> done) {
  assert(task < call_of_task_.size() && call_of_task_[task] >= 0 && "not a collective of this engine");
  const Call& call = calls_[static_cast<std::size_t>(call_of_task_[task])];
  if (scenario_.fidelity == Fidelity::kAnalytical || call.request.gpus.size() <= 1) {
    sim_.schedule_after(sim::to_sim_time(call.plan.time), std::move(done));
    return;
  }
  // The bus bandwidth it achieved among the other traffic, on its label before the trace records it (nccl-tests'
  // convention, as the contention-free one). Only a trace shows it: without one, nothing is added.
  if (achieved_bandwidth_arg())
    done = [this, task, start = sim_.now(), size = call.request.size, op = call.request.op,
            ranks = static_cast<std::uint32_t>(call.request.gpus.size()), done = std::move(done)] {
      const double took = sim::to_seconds(sim_.now() - start).raw();
      graph_->append_label_arg(
          task, {"bus_bandwidth_GBps", took > 0 ? size.raw() / took * busbw_factor(op, ranks) / 1e9 : 0, {}});
      done();
    };
  // The call ends when both its flows and the host's launch of it are done (see CollectivePlan::time).
  const Seconds launch = scenario_.nccl.launch_overhead;
  if (launch.raw() <= 0) {
    network_->run(call.plan, call.request, std::move(done));
    return;
  }
  auto remaining = std::make_shared<int>(2);
  auto finish = std::make_shared<std::function<void()>>(std::move(done));
  auto one_done = [remaining, finish] {
    if (--*remaining == 0) (*finish)();
  };
  sim_.schedule_after(sim::to_sim_time(launch), one_done);
  network_->run(call.plan, call.request, one_done);
}

namespace {

CollectiveRun run_one(const Scenario& scenario, CollectiveRequest request) {
  request.alone = true;
  sim::Simulation simulation;
  std::unique_ptr<NetworkModel> network;
  if (scenario.fidelity == Fidelity::kFlow) network = std::make_unique<NetworkModel>(simulation, scenario);
  CollectiveEngine engine(simulation, scenario, network.get());
  sim::TaskGraph graph;
  std::vector<sim::StreamId> lanes;
  for (std::uint32_t gpu : request.gpus) lanes.push_back(graph.add_stream(gpu, "comm"));
  const sim::TaskId id = engine.add(graph, "collective", "comm", request, lanes, {});
  sim::Executor executor(simulation, graph, &engine);
  executor.start();
  simulation.run();
  executor.finish();
  return CollectiveRun{engine.model().plan(request), sim::to_seconds(executor.end_time(id) - executor.start_time(id))};
}

}  // namespace

CollectiveRun run_collective(const Scenario& scenario, const CollectiveRequest& request) {
  // No rank has a lane to run it on: the executor would wait for ever (the CLI refuses empty --ranks earlier).
  if (request.gpus.empty()) throw std::invalid_argument("run_collective: the communicator has no GPU");
  try {
    return run_one(scenario, request);
  } catch (const sim::TimeRangeError& e) {
    throw InputError(scenario.source_file, 0, 0, "", e.what());  // as simulate_scenario names it
  }
}

}  // namespace clustersim::workloads
