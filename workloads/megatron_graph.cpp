#include "workloads/megatron_graph.h"

#include <algorithm>
#include <map>
#include <string>

#include "workloads/collective_engine.h"
#include "workloads/compute_model.h"
#include "workloads/input_pipeline.h"
#include "workloads/pipeline_schedule.h"
#include "workloads/transformer_ops.h"

namespace clustersim::workloads {
namespace {

bool ends_with(const std::string& s, const char* suffix) { return s.ends_with(suffix); }

// The ops of a virtual stage on one rank, in execution order, for one direction, and where the TP
// collectives go.
struct StageOps {
  std::vector<Op> ops;
  struct Sync {
    std::size_t after;  // the collective follows op `after − 1`
    CollectiveOp op;
  };
  std::vector<Sync> syncs;
  double parameters = 0;  // this rank's parameters of the chunk
};

StageOps stage_ops(const ModelSpec& model, const OpConfig& config, bool forward) {
  StageOps out;
  out.ops = forward ? forward_ops(model, config) : backward_ops(model, config);
  for (std::size_t i = 0; i < out.ops.size(); ++i) {
    const Op& op = out.ops[i];
    out.parameters += op.grad_parameters;
    if (config.tp < 2) continue;
    // Megatron's g/f operators: the forward reduces after the row-parallel GEMMs (also when a backward
    // recomputes them), the backward after the data gradients of the column-parallel ones. With sequence
    // parallelism the reduction is a reduce-scatter and an all-gather precedes the next column-parallel
    // GEMM: the same volume, counted here as the pair after the same op.
    const bool sync = ends_with(op.name, ".proj.fwd") || ends_with(op.name, ".fc2.fwd") ||
                      ends_with(op.name, ".shared_fc2.fwd") || ends_with(op.name, ".qkv.dgrad") ||
                      ends_with(op.name, ".fc1.dgrad") || ends_with(op.name, ".shared_fc1.dgrad");
    if (!sync) continue;
    if (config.sequence_parallel) {
      out.syncs.push_back({i + 1, CollectiveOp::kReduceScatter});
      out.syncs.push_back({i + 1, CollectiveOp::kAllGather});
    } else {
      out.syncs.push_back({i + 1, CollectiveOp::kAllReduce});
    }
  }
  return out;
}

std::vector<sim::TaskArg> op_args(const Op& op, std::uint32_t micro_batch, std::uint32_t chunk) {
  return {{"flops", op.flops.raw(), {}},
          {"bytes", op.bytes.raw(), {}},
          {"micro_batch", double(micro_batch), {}},
          {"chunk", double(chunk), {}}};
}

}  // namespace

JobGraph build_megatron_job(const Scenario& sc, const Job& job, sim::TaskGraph& graph, CollectiveEngine& collectives) {
  const ParallelPlan& par = job.parallel;
  const RankLayout layout(par.tp, par.dp, par.pp, par.rank_order);
  const std::uint32_t ranks = layout.size();
  const std::uint32_t t = par.tp, p = par.pp, v = par.vp, m = par.grad_accum;
  const Precision prec = job.training.precision;
  const std::uint32_t virtual_stages = p * v;
  const std::uint32_t layers_per_chunk = job.model.layers / virtual_stages;
  const Bytes activation = bytes(double(par.micro_batch) * job.model.seq_len * job.model.hidden * element_bytes(prec));
  const Bytes tp_message = activation;  // AllReduce, or RS/AG with SP: the total buffer is b·s·h either way
  // A pipeline send carries the whole activation, or 1/t of it when sequence parallelism already splits it
  // or the scatter/gather optimisation splits it (the receiving TP group then all-gathers it).
  const Bytes pp_message = (par.sequence_parallel || par.pp_scatter_gather) ? activation / double(t) : activation;
  const double gradient_bytes = job.training.gradients == GradientDtype::kFp32 ? 4.0 : element_bytes(prec);

  // Per virtual stage: ops and syncs, forward and backward.
  std::vector<StageOps> fwd(virtual_stages), bwd(virtual_stages);
  for (std::uint32_t vs = 0; vs < virtual_stages; ++vs) {
    OpConfig oc;
    oc.micro_batch = par.micro_batch;
    oc.precision = prec;
    oc.tp = t;
    oc.sequence_parallel = par.sequence_parallel;
    oc.recompute = par.recompute;
    oc.attention = par.attention;
    oc.first_layer = vs * layers_per_chunk;
    oc.layer_count = layers_per_chunk;
    oc.embedding = vs == 0;
    oc.head = vs + 1 == virtual_stages;
    fwd[vs] = stage_ops(job.model, oc, true);
    bwd[vs] = stage_ops(job.model, oc, false);
  }

  JobGraph it;
  it.compute_stream.resize(ranks);
  it.comm_stream.resize(ranks);
  it.other_comm_streams.resize(ranks);
  std::vector<std::array<sim::StreamId, 4>> pp_streams(ranks);  // send-fwd, recv-fwd, send-bwd, recv-bwd
  for (std::uint32_t r = 0; r < ranks; ++r) {
    const std::uint32_t gpu = job.gpus[r];
    it.compute_stream[r] = graph.add_stream(gpu, kComputeStream);
    it.comm_stream[r] = graph.add_stream(gpu, kDpCommStream);
    if (p > 1) {
      pp_streams[r] = {graph.add_stream(gpu, "pp-send-fwd"), graph.add_stream(gpu, "pp-recv-fwd"),
                       graph.add_stream(gpu, "pp-send-bwd"), graph.add_stream(gpu, "pp-recv-bwd")};
      it.other_comm_streams[r].assign(pp_streams[r].begin(), pp_streams[r].end());
    }
  }

  const auto order = pipeline_order(par.schedule, p, m, v);

  // Input: the loader and the host-to-device copy on tensor rank 0 of the first and the last stage of
  // every replica (input_pipeline.h); the whole TP group waits for it (get_batch broadcasts the batch).
  std::vector<std::uint32_t> readers;
  for (std::uint32_t d = 0; d < par.dp; ++d) {
    readers.push_back(layout.rank({0, d, 0}));
    if (p > 1) readers.push_back(layout.rank({0, d, p - 1}));
  }
  InputPipeline input = add_input_pipeline(sc, job, graph, readers, m);
  // Labels per (virtual stage, direction, op, micro-batch) would be many; share one per (vs, dir, op).
  std::map<std::tuple<std::uint32_t, bool, std::size_t>, sim::LabelId> labels;
  auto label_of = [&](std::uint32_t vs, bool forward, std::size_t i, const Op& op, std::uint32_t chunk) {
    const auto key = std::make_tuple(vs, forward, i);
    auto found = labels.find(key);
    if (found != labels.end()) return found->second;
    const sim::LabelId id = graph.add_label({op.name, kCategoryCompute, op_args(op, 0, chunk)});
    labels.emplace(key, id);
    return id;
  };

  // first_task[(dir, mb, vs, rank)] / last_task: to wire pipeline sends.
  std::map<std::tuple<bool, std::uint32_t, std::uint32_t, std::uint32_t>, sim::TaskId> first_task, last_task;
  // Last backward op of each chunk per rank, and where each DP bucket of that chunk becomes ready.
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<sim::TaskId>> chunk_backward;  // (rank, vs)
  // The all-gather of a scatter/gather pipeline receive, per (direction, micro-batch, vs, replica).
  std::map<std::tuple<bool, std::uint32_t, std::uint32_t, std::uint32_t>, sim::TaskId> gather_task;
  std::vector<sim::TaskId> last_compute(ranks, 0);  // each rank's last backward kernel of the step

  for (std::uint32_t stage = 0; stage < p; ++stage) {
    for (std::uint32_t d = 0; d < par.dp; ++d) {
      // The TP group of this (stage, replica) runs in lockstep: add each step for all its ranks together.
      std::vector<std::uint32_t> group;
      for (std::uint32_t tr = 0; tr < t; ++tr) group.push_back(layout.rank({tr, d, stage}));
      std::vector<sim::StreamId> group_compute;
      std::vector<std::uint32_t> group_gpus;
      for (std::uint32_t r : group) {
        group_compute.push_back(it.compute_stream[r]);
        group_gpus.push_back(job.gpus[r]);
      }
      for (const PipelineStep& step : order[stage]) {
        const bool forward = step.kind == PipelineStep::Kind::kForward;
        const std::uint32_t vs = step.chunk * p + stage;
        const StageOps& so = forward ? fwd[vs] : bwd[vs];
        std::size_t next_sync = 0;
        std::vector<sim::TaskId> last(group.size(), 0);
        std::vector<bool> any(group.size(), false);
        // Scatter/gather: the received 1/t shards are all-gathered by the group before the step's kernels.
        const bool receives = forward ? vs > 0 : vs + 1 < virtual_stages;
        if (par.pp_scatter_gather && receives)
          gather_task[{forward, step.micro_batch, vs, d}] =
              collectives.add(graph, forward ? "allgather.pp_activation" : "allgather.pp_gradient", kCategoryPpComm,
                              CollectiveRequest{CollectiveOp::kAllGather, group_gpus, activation, 0}, group_compute, {});
        // The input of this micro-batch, where this virtual stage reads it (the first and the last).
        std::vector<sim::TaskId> input_deps;
        if (forward && (vs == 0 || vs + 1 == virtual_stages))
          if (auto f = input.ready.find({layout.rank({0, d, stage}), step.micro_batch}); f != input.ready.end())
            input_deps.push_back(f->second);
        for (std::size_t i = 0; i <= so.ops.size(); ++i) {
          // TP collectives that follow op i−1.
          while (next_sync < so.syncs.size() && so.syncs[next_sync].after == i) {
            collectives.add(graph, std::string(to_string(so.syncs[next_sync].op)) + ".tp", kCategoryTpComm,
                            CollectiveRequest{so.syncs[next_sync].op, group_gpus, tp_message, 0}, group_compute, {});
            ++next_sync;
          }
          if (i == so.ops.size()) break;
          const Op& op = so.ops[i];
          const sim::LabelId label = label_of(vs, forward, i, op, step.chunk);
          for (std::size_t g = 0; g < group.size(); ++g) {
            const std::uint32_t r = group[g];
            const sim::StreamId lane[] = {it.compute_stream[r]};
            const sim::TaskId id =
                graph.add(label, lane, op_time(op, sc.profile.gpu, prec) * sc.cluster.compute_slowdown(job.gpus[r]),
                          any[g] ? std::span<const sim::TaskId>{} : std::span<const sim::TaskId>(input_deps));
            if (!any[g]) first_task[{forward, step.micro_batch, vs, r}] = id;
            any[g] = true;
            last[g] = id;
            if (!forward && step.micro_batch + 1 == m && op.grad_parameters > 0)
              chunk_backward[{r, vs}].push_back(id);
          }
        }
        for (std::size_t g = 0; g < group.size(); ++g)
          if (any[g]) {
            last_task[{forward, step.micro_batch, vs, group[g]}] = last[g];
            last_compute[group[g]] = last[g];
          }
      }
    }
  }

  // Pipeline sends: forward activations vs → vs+1, backward gradients vs → vs−1, between equal TP ranks.
  if (p > 1) {
    for (std::uint32_t d = 0; d < par.dp; ++d)
      for (std::uint32_t tr = 0; tr < t; ++tr)
        for (std::uint32_t s = 0; s < p; ++s)
          for (const PipelineStep& step : order[s]) {
            const bool forward = step.kind == PipelineStep::Kind::kForward;
            const std::uint32_t vs = step.chunk * p + s;
            if (forward ? vs + 1 == virtual_stages : vs == 0) continue;
            const std::uint32_t to_vs = forward ? vs + 1 : vs - 1;
            const std::uint32_t src = layout.rank({tr, d, s}), dst = layout.rank({tr, d, to_vs % p});
            const sim::StreamId lanes[] = {pp_streams[src][forward ? 0 : 2], pp_streams[dst][forward ? 1 : 3]};
            const sim::TaskId after = last_task.at({forward, step.micro_batch, vs, src});
            const sim::TaskId send = collectives.add(
                graph, forward ? "send.activation" : "send.gradient", kCategoryPpComm,
                CollectiveRequest{CollectiveOp::kSendRecv, {job.gpus[src], job.gpus[dst]}, pp_message, 0}, lanes,
                std::span<const sim::TaskId>(&after, 1));
            const auto gather = gather_task.find({forward, step.micro_batch, to_vs, d});
            graph.add_dependency(gather != gather_task.end() ? gather->second
                                                             : first_task.at({forward, step.micro_batch, to_vs, dst}),
                                 send);
          }
  }

  // Data parallelism. With overlap_grad_reduce (Megatron-Core's --overlap-grad-reduce) each chunk's
  // gradients go in DDP-sized buckets as soon as its last backward produced them, overlapping the rest of
  // the backward; without it (Megatron-LM's default) each chunk's whole gradient buffer is reduced in one
  // call after the rank's backward ends (finalize_model_grads). The distributed optimizer reduce-scatters
  // instead of all-reducing; each rank then steps its 1/dp shard and the updated 16-bit parameters are
  // all-gathered, one call per chunk, before the step ends.
  const CollectiveOp grad_op = par.distributed_optimizer ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
  const char* grad_name = par.distributed_optimizer ? "reducescatter.dp.chunk" : "allreduce.dp.chunk";
  std::vector<sim::TaskId> last_dp(ranks, 0);
  std::vector<bool> has_dp(ranks, false);
  if (par.dp > 1) {
    for (std::uint32_t s = 0; s < p; ++s)
      for (std::uint32_t tr = 0; tr < t; ++tr)
        for (std::uint32_t c = v; c-- > 0;) {  // the last chunk's backward ends first
          const std::uint32_t vs = c * p + s;
          const std::vector<std::uint32_t> dp_group = layout.group(ParallelDim::kData, layout.rank({tr, 0, s}));
          std::vector<GradientBucket> buckets;
          if (par.overlap_grad_reduce) {
            buckets = ddp_buckets(bwd[vs].ops, bytes(gradient_bytes), kFirstBucketCap, par.ddp_bucket);
          } else {
            GradientBucket whole;
            whole.parameters = bwd[vs].parameters;
            whole.size = bytes(bwd[vs].parameters * gradient_bytes);
            for (std::size_t i = 0; i < bwd[vs].ops.size(); ++i)
              if (bwd[vs].ops[i].grad_parameters > 0) {
                if (whole.first_op.empty()) whole.first_op = bwd[vs].ops[i].name;
                whole.last_op = bwd[vs].ops[i].name;
                whole.ready_after_op = i;
              }
            if (whole.parameters > 0) buckets.push_back(whole);
          }
          std::vector<std::uint32_t> gpus;
          std::vector<sim::StreamId> lanes;
          for (std::uint32_t r : dp_group) {
            gpus.push_back(job.gpus[r]);
            lanes.push_back(it.comm_stream[r]);
          }
          for (const GradientBucket& b : buckets) {
            std::vector<sim::TaskId> deps;
            if (par.overlap_grad_reduce) {
              // The op that completes the bucket, on every member: the k-th gradient-producing op of the chunk.
              std::size_t k = 0;
              for (std::size_t i = 0; i <= b.ready_after_op; ++i)
                if (bwd[vs].ops[i].grad_parameters > 0) ++k;
              for (std::uint32_t r : dp_group) deps.push_back(chunk_backward.at({r, vs})[k - 1]);
            } else {
              for (std::uint32_t r : dp_group) deps.push_back(last_compute[r]);
            }
            const sim::TaskId ar = collectives.add(graph, grad_name + std::to_string(vs), kCategoryDpComm,
                                                   CollectiveRequest{grad_op, gpus, b.size, 0}, lanes, deps);
            it.bucket_allreduce.push_back(ar);
            for (std::uint32_t r : dp_group) {
              last_dp[r] = ar;
              has_dp[r] = true;
            }
            if (s == 0 && tr == 0) it.buckets.push_back(b);
          }
        }
  }
  // Tied word embeddings with a pipeline: the first stage's embedding and the last stage's copy used by
  // the output layer each hold gradients; Megatron all-reduces them between the two stages (tensor rank
  // by tensor rank, V·h/t parameters) after the data-parallel reduction, before the optimizer
  // (finalize_model_grads → _allreduce_word_embedding_grads), on the compute stream.
  if (p > 1 && job.model.tied_embeddings) {
    const Bytes embedding_grads = bytes(double(job.model.vocab) * job.model.hidden / t * gradient_bytes);
    for (std::uint32_t d = 0; d < par.dp; ++d)
      for (std::uint32_t tr = 0; tr < t; ++tr) {
        const std::uint32_t first = layout.rank({tr, d, 0}), last = layout.rank({tr, d, p - 1});
        std::vector<sim::TaskId> deps = {last_compute[first], last_compute[last]};
        for (std::uint32_t r : {first, last})
          if (has_dp[r]) deps.push_back(last_dp[r]);
        const sim::StreamId lanes[] = {it.compute_stream[first], it.compute_stream[last]};
        collectives.add(graph, "allreduce.embedding_grads", kCategoryDpComm,
                        CollectiveRequest{CollectiveOp::kAllReduce, {job.gpus[first], job.gpus[last]}, embedding_grads, 0},
                        lanes, deps);
      }
  }
  // Optimizer: each rank over its parameters (its 1/dp shard with the distributed optimizer), after its
  // gradients are reduced.
  const bool half_weights = prec == Precision::kBF16 || prec == Precision::kFP16;
  for (std::uint32_t r = 0; r < ranks; ++r) {
    const RankCoord c = layout.coord(r);
    double params = 0;
    for (std::uint32_t ch = 0; ch < v; ++ch) params += bwd[ch * p + c.pp].parameters;
    if (par.distributed_optimizer) params /= double(par.dp);
    const Op opt = optimizer_op(params, job.training.optimizer, gradient_bytes, half_weights);
    const sim::LabelId label = graph.add_label({opt.name, kCategoryCompute, op_args(opt, 0, 0)});
    const sim::StreamId lane[] = {it.compute_stream[r]};
    std::vector<sim::TaskId> deps;
    if (has_dp[r]) deps.push_back(last_dp[r]);
    it.optimizer_task.push_back(
        graph.add(label, lane, op_time(opt, sc.profile.gpu, prec) * sc.cluster.compute_slowdown(job.gpus[r]), deps));
  }
  // Distributed optimizer: all-gather the updated 16-bit (or fp32) parameters of each chunk over the
  // data-parallel group; the step ends when they are back.
  if (par.distributed_optimizer) {
    for (std::uint32_t s = 0; s < p; ++s)
      for (std::uint32_t tr = 0; tr < t; ++tr)
        for (std::uint32_t c = 0; c < v; ++c) {
          const std::uint32_t vs = c * p + s;
          const std::vector<std::uint32_t> dp_group = layout.group(ParallelDim::kData, layout.rank({tr, 0, s}));
          std::vector<std::uint32_t> gpus;
          std::vector<sim::StreamId> lanes;
          std::vector<sim::TaskId> deps;
          for (std::uint32_t r : dp_group) {
            gpus.push_back(job.gpus[r]);
            lanes.push_back(it.comm_stream[r]);
            deps.push_back(it.optimizer_task[r]);
          }
          it.step_end_task.push_back(collectives.add(
              graph, "allgather.dp.params.chunk" + std::to_string(vs), kCategoryDpComm,
              CollectiveRequest{CollectiveOp::kAllGather, gpus, bytes(bwd[vs].parameters * element_bytes(prec)), 0},
              lanes, deps));
        }
  }
  it.input_streams = std::move(input.streams);
  return it;
}

}  // namespace clustersim::workloads
