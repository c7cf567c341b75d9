#include "workloads/megatron_graph.h"

#include <algorithm>
#include <map>
#include <string>

#include "workloads/collective_engine.h"
#include "workloads/compute_model.h"
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
  const Bytes tp_message = par.sequence_parallel ? activation : activation;  // RS/AG: total buffer = b·s·h

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
                graph.add(label, lane, op_time(op, sc.profile.gpu, prec) * sc.cluster.compute_slowdown(job.gpus[r]));
            if (!any[g]) first_task[{forward, step.micro_batch, vs, r}] = id;
            any[g] = true;
            last[g] = id;
            if (!forward && step.micro_batch + 1 == m && op.grad_parameters > 0)
              chunk_backward[{r, vs}].push_back(id);
          }
        }
        for (std::size_t g = 0; g < group.size(); ++g)
          if (any[g]) last_task[{forward, step.micro_batch, vs, group[g]}] = last[g];
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
                CollectiveRequest{CollectiveOp::kSendRecv, {job.gpus[src], job.gpus[dst]}, activation, 0}, lanes,
                std::span<const sim::TaskId>(&after, 1));
            graph.add_dependency(first_task.at({forward, step.micro_batch, to_vs, dst}), send);
          }
  }

  // Data parallelism: each chunk's gradients in DDP-sized buckets after its last backward, on dp-comm.
  std::vector<sim::TaskId> last_dp(ranks, 0);
  std::vector<bool> has_dp(ranks, false);
  if (par.dp > 1) {
    for (std::uint32_t s = 0; s < p; ++s)
      for (std::uint32_t tr = 0; tr < t; ++tr)
        for (std::uint32_t c = v; c-- > 0;) {  // the last chunk's backward ends first
          const std::uint32_t vs = c * p + s;
          const std::vector<std::uint32_t> dp_group = layout.group(ParallelDim::kData, layout.rank({tr, 0, s}));
          const std::vector<GradientBucket> buckets =
              ddp_buckets(bwd[vs].ops, ddp_gradient_bytes(prec), kFirstBucketCap, par.ddp_bucket);
          std::vector<std::uint32_t> gpus;
          std::vector<sim::StreamId> lanes;
          for (std::uint32_t r : dp_group) {
            gpus.push_back(job.gpus[r]);
            lanes.push_back(it.comm_stream[r]);
          }
          for (const GradientBucket& b : buckets) {
            // The op that completes the bucket, on every member: the k-th gradient-producing op of the chunk.
            std::size_t k = 0;
            for (std::size_t i = 0; i <= b.ready_after_op; ++i)
              if (bwd[vs].ops[i].grad_parameters > 0) ++k;
            std::vector<sim::TaskId> deps;
            for (std::uint32_t r : dp_group) deps.push_back(chunk_backward.at({r, vs})[k - 1]);
            const sim::TaskId ar = collectives.add(graph, "allreduce.dp.chunk" + std::to_string(vs), kCategoryDpComm,
                                                   CollectiveRequest{CollectiveOp::kAllReduce, gpus, b.size, 0}, lanes,
                                                   deps);
            it.bucket_allreduce.push_back(ar);
            for (std::uint32_t r : dp_group) {
              last_dp[r] = ar;
              has_dp[r] = true;
            }
            if (s == 0 && tr == 0) it.buckets.push_back(b);
          }
        }
  }
  // Optimizer: each rank over its parameters, after its gradients are reduced.
  for (std::uint32_t r = 0; r < ranks; ++r) {
    const RankCoord c = layout.coord(r);
    double params = 0;
    for (std::uint32_t ch = 0; ch < v; ++ch) params += bwd[ch * p + c.pp].parameters;
    const Op opt = optimizer_op(params);
    const sim::LabelId label = graph.add_label({opt.name, kCategoryCompute, op_args(opt, 0, 0)});
    const sim::StreamId lane[] = {it.compute_stream[r]};
    std::vector<sim::TaskId> deps;
    if (has_dp[r]) deps.push_back(last_dp[r]);
    it.optimizer_task.push_back(
        graph.add(label, lane, op_time(opt, sc.profile.gpu, prec) * sc.cluster.compute_slowdown(job.gpus[r]), deps));
  }
  return it;
}

}  // namespace clustersim::workloads
