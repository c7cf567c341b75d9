#include "workloads/input_pipeline.h"

#include <algorithm>
#include <string>

namespace clustersim::workloads {

Bytes micro_batch_input_bytes(const ModelSpec& model, std::uint32_t micro_batch) {
  return bytes(double(micro_batch) * (double(model.seq_len) + 1.0) * 8.0);
}

InputPipeline add_input_pipeline(const Scenario& sc, const Job& job, sim::TaskGraph& graph,
                                 const std::vector<std::uint32_t>& readers, std::uint32_t micro_batches) {
  InputPipeline out;
  out.streams.resize(job.gpus.size());
  const TrainingJob& tr = job.training;
  const Bytes input = micro_batch_input_bytes(job.model, job.parallel.micro_batch);
  const Seconds copy = input / tr.host_to_device;

  // Loader tasks per node: one per micro-batch not yet in the queue at the start of the step.
  std::map<std::uint32_t, std::vector<std::uint32_t>> readers_by_node;  // node -> ranks
  for (std::uint32_t r : readers) readers_by_node[sc.cluster.node_of(job.gpus[r])].push_back(r);
  std::map<std::pair<std::uint32_t, std::uint32_t>, sim::TaskId> loaded;  // (node, micro-batch)
  struct Loader {
    sim::StreamId lane;
    double samples;   // per micro-batch, for the node's readers
    Seconds produce;  // one micro-batch's production
  };
  std::map<std::uint32_t, Loader> loaders;  // node -> its loader
  if (tr.loader_samples_per_s_per_node > 0) {
    for (const auto& [node, ranks] : readers_by_node) {
      const double samples = double(ranks.size()) * job.parallel.micro_batch;
      const Seconds produce = seconds(samples / tr.loader_samples_per_s_per_node);
      const sim::StreamId lane[] = {graph.add_stream(job.gpus[ranks.front()], "loader")};
      loaders[node] = Loader{lane[0], samples, produce};
      for (std::uint32_t r = 0; r < job.gpus.size(); ++r)
        if (sc.cluster.node_of(job.gpus[r]) == node) out.streams[r].push_back(lane[0]);
      for (std::uint32_t k = tr.loader_prefetch; k < micro_batches; ++k) {
        const sim::LabelId label = graph.add_label(
            {"loader.micro_batch", kCategoryInput,
             {{"micro_batch", double(k), {}}, {"samples", samples, {}}, {"node", double(node), {}}}});
        loaded[{node, k}] = graph.add(label, lane, produce);
      }
    }
  }
  const sim::LabelId h2d = graph.add_label({"h2d.tokens", kCategoryInput, {{"bytes", input.raw(), {}}}});
  for (std::uint32_t r : readers) {
    const std::uint32_t node = sc.cluster.node_of(job.gpus[r]);
    const sim::StreamId lane[] = {graph.add_stream(job.gpus[r], "h2d")};
    out.streams[r].push_back(lane[0]);
    for (std::uint32_t k = 0; k < micro_batches; ++k) {
      std::vector<sim::TaskId> deps;
      if (auto f = loaded.find({node, k}); f != loaded.end()) deps.push_back(f->second);
      out.ready[{r, k}] = graph.add(h2d, lane, copy, deps);
    }
  }
  // Steady state: the queue full at the step's start must be full again at the next one's, so the loader also
  // produces the next step's first min(q, m) micro-batches within this step. Each needs a free slot: the
  // micro-batch q places before it (this step's m − q + j) taken from the queue by its copy to the GPU. The
  // step ends no earlier than the refill: a loader slower than the step sets the period to m micro-batches'
  // production, not the m − q the step itself waits for.
  for (const auto& [node, loader] : loaders) {
    const std::uint32_t refill = std::min(tr.loader_prefetch, micro_batches);
    const sim::StreamId lane[] = {loader.lane};
    for (std::uint32_t j = 0; j < refill; ++j) {
      std::vector<sim::TaskId> deps;
      if (micro_batches + j >= tr.loader_prefetch) {
        const std::uint32_t freed = micro_batches + j - tr.loader_prefetch;
        for (std::uint32_t r : readers_by_node.at(node)) deps.push_back(out.ready.at({r, freed}));
      }
      const sim::LabelId label = graph.add_label(
          {"loader.next_step_prefetch", kCategoryInput,
           {{"micro_batch", double(j), {}}, {"samples", loader.samples, {}}, {"node", double(node), {}}}});
      const sim::TaskId id = graph.add(label, lane, loader.produce, deps);
      if (j + 1 == refill) out.refill_end.push_back(id);
    }
  }
  return out;
}

}  // namespace clustersim::workloads
