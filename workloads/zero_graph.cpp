#include "workloads/zero_graph.h"

#include <algorithm>
#include <map>
#include <string>

#include "workloads/collective_engine.h"
#include "workloads/compute_model.h"
#include "workloads/input_pipeline.h"
#include "workloads/transformer_ops.h"

namespace clustersim::workloads {

std::uint32_t zero_unit_of(const std::string& name) {
  if (name.size() < 3 || name[0] != 'L') return 0;
  const std::size_t dot = name.find('.');
  if (dot == std::string::npos || dot < 2) return 0;
  std::uint32_t layer = 0;
  for (std::size_t i = 1; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return 0;
    layer = layer * 10 + static_cast<std::uint32_t>(name[i] - '0');
  }
  return layer + 1;
}

namespace {

// DeepSpeed's reduce_bucket_size and allgather_bucket_size default: 5e8 elements.
constexpr double kDeepSpeedBucketElements = 5e8;

struct Groups {
  std::vector<std::vector<std::uint32_t>> shard;    // ranks sharing a shard group
  std::vector<std::vector<std::uint32_t>> replica;  // ranks holding the same shard (hybrid only)
  std::vector<std::uint32_t> shard_of;              // rank -> index into shard
};

Groups groups_of(const Scenario& sc, const Job& job) {
  Groups g;
  const auto ranks = static_cast<std::uint32_t>(job.gpus.size());
  g.shard_of.resize(ranks);
  if (!job.parallel.hybrid_shard) {
    g.shard.emplace_back();
    for (std::uint32_t r = 0; r < ranks; ++r) g.shard[0].push_back(r);
    return g;
  }
  std::map<std::uint32_t, std::uint32_t> index_of_node;
  for (std::uint32_t r = 0; r < ranks; ++r) {
    const std::uint32_t node = sc.cluster.node_of(job.gpus[r]);
    auto [it, fresh] = index_of_node.emplace(node, static_cast<std::uint32_t>(g.shard.size()));
    if (fresh) g.shard.emplace_back();
    g.shard_of[r] = it->second;
    g.shard[it->second].push_back(r);
  }
  // Replicas: the i-th rank of every node (hybrid sharding needs equal ranks per node; the loader checks).
  const std::size_t per = g.shard[0].size();
  for (std::size_t i = 0; i < per; ++i) {
    g.replica.emplace_back();
    for (const auto& s : g.shard)
      if (i < s.size()) g.replica.back().push_back(s[i]);
  }
  return g;
}

std::vector<sim::TaskArg> op_args(const Op& op, std::uint32_t micro_batch) {
  return {{"flops", op.flops.raw(), {}}, {"bytes", op.bytes.raw(), {}}, {"micro_batch", double(micro_batch), {}}};
}

}  // namespace

OpConfig zero_op_config(const Job& job) {
  OpConfig c;
  c.micro_batch = job.parallel.micro_batch;
  c.precision = job.training.precision;
  c.recompute = job.parallel.recompute;
  c.attention = job.parallel.attention;
  c.flash_kernel = job.parallel.flash_kernel;
  c.eager = true;  // an eager nn.Module in the training dtype (MixedPrecision(param_dtype), DeepSpeed's bf16/fp16)
  return c;  // tp 1, no SP/CP/EP, every layer, embedding and head: the whole model on each rank
}

std::uint32_t zero_shard_ranks(const Scenario& sc, const Job& job) {
  return static_cast<std::uint32_t>(groups_of(sc, job).shard[0].size());
}

JobGraph build_zero_job(const Scenario& sc, const Job& job, sim::TaskGraph& graph, CollectiveEngine& collectives) {
  const ParallelPlan& par = job.parallel;
  const auto ranks = static_cast<std::uint32_t>(job.gpus.size());
  const Precision prec = job.training.precision;
  const double e = element_bytes(prec);
  const std::uint32_t m = par.grad_accum;
  const bool fsdp = par.effective_framework() == Framework::kFsdp;
  const std::uint32_t stage = par.zero_stage;
  const bool gather_forward = stage == 3 || (fsdp && stage == 2);  // parameters sharded between steps
  const bool gather_backward = stage == 3;                         // resharded after the forward
  // FULL_SHARD (and ZeRO-3): unit u's all-gather waits for the forward of unit u − 2 to end (FSDP's
  // limit_all_gathers: at most two all-gathers ahead of the frees). SHARD_GRAD_OP frees nothing in the forward,
  // so FSDP's rate limiter, which waits on the frees' events, never holds its all-gathers: the host issues them
  // all as it runs ahead.
  const bool rate_limited = stage == 3;
  const bool per_unit_reduce = stage == 3 || fsdp;                 // reduce-scatter per unit, every micro-batch
  // DeepSpeed stage 2 partitions the gradients, so each micro-batch's are reduced into the rank's partition
  // (the engine's allreduce_gradients: "ZeRO stage >= 2 communicates during non gradient accumulation
  // boundaries as well"); stage 1 keeps whole gradients and reduces at the accumulation boundary only.
  const bool bucket_reduce_every_micro_batch = !per_unit_reduce && stage == 2;
  const Groups groups = groups_of(sc, job);

  const OpConfig config = zero_op_config(job);
  const std::vector<Op> fwd = forward_ops(job.model, config);
  const std::vector<Op> bwd = backward_ops(job.model, config);
  const std::uint32_t units = job.model.layers + 1;
  std::vector<double> unit_params(units, 0.0);
  std::vector<std::uint32_t> fwd_unit, bwd_unit;
  for (const Op& op : fwd) fwd_unit.push_back(zero_unit_of(op.name));
  for (const Op& op : bwd) {
    bwd_unit.push_back(zero_unit_of(op.name));
    unit_params[bwd_unit.back()] += op.grad_parameters;
  }
  double parameters = 0;
  for (double p : unit_params) parameters += p;

  JobGraph it;
  // Host dispatch (host_dispatch.h): every rank's tasks are added in its program order (all-gathers where the
  // graph issues them, reduce-scatters after their unit's backward). FSDP's rate limiter (limit_all_gathers)
  // blocks the host in the pre-forward of unit u until unit u − 2's memory is freed; the host is then at most
  // two units ahead of the GPU and the GPU still never waits for it unless it is host-bound, so that wait is
  // not modelled.
  it.host = HostProgram(job.training.host_dispatch_per_kernel, ranks);
  const bool host = it.host.enabled();
  std::vector<sim::StreamId> ag_stream(ranks);
  for (std::uint32_t r = 0; r < ranks; ++r) {
    it.compute_stream.push_back(graph.add_stream(job.gpus[r], kComputeStream));
    it.comm_stream.push_back(graph.add_stream(job.gpus[r], kDpCommStream));
    it.other_comm_streams.emplace_back();
    if (gather_forward) {
      ag_stream[r] = graph.add_stream(job.gpus[r], kFsdpAllGatherStream);
      it.other_comm_streams[r].push_back(ag_stream[r]);
    }
  }
  std::vector<std::uint32_t> readers(ranks);
  for (std::uint32_t r = 0; r < ranks; ++r) readers[r] = r;
  InputPipeline input = add_input_pipeline(sc, job, graph, readers, m);

  std::vector<Seconds> fwd_time, bwd_time;
  for (const Op& op : fwd) fwd_time.push_back(op_time(op, sc.profile.gpu, prec));
  for (const Op& op : bwd) bwd_time.push_back(op_time(op, sc.profile.gpu, prec));

  // A collective over each shard group (lanes on `streams`), waiting for `deps(rank)` of its members.
  auto per_group = [&](const std::string& name, CollectiveOp op, Bytes size, const std::vector<sim::StreamId>& streams,
                       const auto& deps_of) {
    std::vector<sim::TaskId> out(ranks, 0);
    for (const auto& members : groups.shard) {
      std::vector<std::uint32_t> gpus;
      std::vector<sim::StreamId> lanes;
      std::vector<sim::TaskId> deps;
      for (std::uint32_t r : members) {
        gpus.push_back(job.gpus[r]);
        lanes.push_back(streams[r]);
        for (sim::TaskId d : deps_of(r)) deps.push_back(d);
      }
      const sim::TaskId id = members.size() > 1
                                 ? collectives.add(graph, name, kCategoryDpComm, CollectiveRequest{op, gpus, size, 0},
                                                   lanes, deps)
                                 : graph.add(graph.add_label({name, kCategoryDpComm, {}}), lanes, seconds(0), deps);
      for (std::uint32_t r : members) out[r] = id;
      if (host && members.size() > 1)
        for (std::uint32_t r : members) it.host.issue(r, id, kCollectiveKernels, false);
    }
    return out;
  };
  // Hybrid sharding: the reduce-scattered shard all-reduced across the replicas.
  auto across_replicas = [&](const std::string& name, Bytes shard_bytes, const std::vector<sim::TaskId>& after) {
    std::vector<sim::TaskId> out = after;
    for (const auto& members : groups.replica) {
      if (members.size() < 2) continue;
      const sim::TaskId id = collectives.add_over_ranks(graph, name, kCategoryDpComm, CollectiveOp::kAllReduce,
                                                        shard_bytes, job.gpus, members, it.comm_stream, after);
      for (std::uint32_t r : members) out[r] = id;
      if (host)
        for (std::uint32_t r : members) it.host.issue(r, id, kCollectiveKernels, false);
    }
    return out;
  };
  const double shard = double(groups.shard[0].size());

  std::vector<sim::TaskId> last_reduce(ranks, 0);
  std::vector<bool> reduced(ranks, false);
  std::vector<sim::TaskId> last_backward(ranks, 0);
  const Bytes bucket_cap = bytes(kDeepSpeedBucketElements * e);
  auto buckets_of = [&](double total_bytes) {
    std::vector<Bytes> out;
    for (double left = total_bytes; left > 0; left -= bucket_cap.raw()) out.push_back(bytes(std::min(left, bucket_cap.raw())));
    return out;
  };
  // DeepSpeed stages 1–2: the gradients reduce-scattered after the backward in reduce_bucket_size buckets; the
  // last micro-batch's are the step's buckets (`record`).
  auto deepspeed_bucket_reduce = [&](bool record) {
    if (groups.shard[0].size() < 2) return;
    for (const Bytes size : buckets_of(parameters * e)) {
      std::vector<sim::TaskId> rs = per_group("reducescatter.grads.bucket", CollectiveOp::kReduceScatter, size,
                                              it.comm_stream,
                                              [&](std::uint32_t r) { return std::vector<sim::TaskId>{last_backward[r]}; });
      rs = across_replicas("allreduce.replicas.bucket", size / shard, rs);
      for (std::uint32_t r = 0; r < ranks; ++r) {
        last_reduce[r] = rs[r];
        reduced[r] = true;
      }
      if (!record) continue;
      GradientBucket b;
      b.size = size;
      b.parameters = size.raw() / e;
      b.ready_after_op = bwd.size() - 1;
      b.first_op = bwd.front().name;
      b.last_op = bwd.back().name;
      it.buckets.push_back(b);
      it.bucket_allreduce.push_back(rs[0]);
    }
  };
  for (std::uint32_t mb = 0; mb < m; ++mb) {
    // Forward: labels shared by all ranks.
    std::vector<sim::LabelId> fl, bl;
    for (const Op& op : fwd) fl.push_back(graph.add_label({op.name, kCategoryCompute, op_args(op, mb)}));
    for (const Op& op : bwd) bl.push_back(graph.add_label({op.name, kCategoryCompute, op_args(op, mb)}));
    // fwd_end[u][r]: the last forward kernel of unit u on rank r (for the rate limiter).
    std::vector<std::vector<sim::TaskId>> fwd_end(units, std::vector<sim::TaskId>(ranks, 0));
    std::vector<std::vector<sim::TaskId>> gathered(units);  // the unit's all-gather task per rank
    auto gather = [&](std::uint32_t u, const char* phase, const auto& deps_of) {
      return per_group(std::string("allgather.") + phase + ".unit" + std::to_string(u), CollectiveOp::kAllGather,
                       bytes(unit_params[u] * e), ag_stream, deps_of);
    };
    // A micro-batch after the first starts once the previous one's gradients are reduced: FSDP's post-backward
    // final callback makes the compute stream wait for the reduce-scatter (and the replicas' all-reduce) stream
    // whenever gradients sync, which is every micro-batch (no no_sync), and _root_pre_forward makes the
    // all-gather stream wait for the compute stream; DeepSpeed ZeRO-3's gradient epilogue synchronises its reduce
    // stream the same way. start[r]: what rank r's micro-batch waits for (empty for the first).
    std::vector<std::vector<sim::TaskId>> start(ranks);
    if (per_unit_reduce && mb > 0)
      for (std::uint32_t r = 0; r < ranks; ++r) {
        start[r].push_back(last_backward[r]);
        if (reduced[r]) start[r].push_back(last_reduce[r]);
      }
    auto at_start = [&](std::uint32_t r) { return start[r]; };
    // Rate-limited all-gathers are added lazily below, once the kernels of unit u − 2 exist.
    if (gather_forward) gathered[0] = gather(0, "fwd", at_start);
    std::uint32_t next_gather = 1;
    std::vector<sim::TaskId> last_fwd(ranks, 0);
    for (std::size_t i = 0; i < fwd.size(); ++i) {
      const std::uint32_t u = fwd_unit[i];
      if (gather_forward) {
        // Issue every all-gather whose rate-limit condition is already expressible: unit g needs the end of
        // unit g − 2's forward, which exists once the kernels of unit g − 2 were added (i.e. u > g − 2).
        while (next_gather < units && (!rate_limited || next_gather < 2 || next_gather - 2 < u)) {
          const std::uint32_t g = next_gather++;
          gathered[g] = gather(g, "fwd", [&](std::uint32_t r) {
            return rate_limited && g >= 2 ? std::vector<sim::TaskId>{fwd_end[g - 2][r]} : start[r];
          });
        }
      }
      const bool first_of_unit = i == 0 || fwd_unit[i - 1] != u;
      for (std::uint32_t r = 0; r < ranks; ++r) {
        const sim::StreamId lane[] = {it.compute_stream[r]};
        std::vector<sim::TaskId> deps;
        if (i == 0) deps.push_back(input.ready.at({r, mb}));
        if (i == 0) deps.insert(deps.end(), start[r].begin(), start[r].end());
        // DeepSpeed's overlap_comm (default false) reduces on the compute stream: the next forward waits.
        if (i == 0 && bucket_reduce_every_micro_batch && reduced[r]) deps.push_back(last_reduce[r]);
        if (gather_forward && first_of_unit) deps.push_back(gathered[u][r]);
        const sim::TaskId id = graph.add(fl[i], lane, fwd_time[i] * sc.cluster.compute_slowdown(job.gpus[r]), deps);
        if (host) it.host.issue(r, id, fwd[i].kernels);
        fwd_end[u][r] = id;
        last_fwd[r] = id;
      }
    }
    // Backward: units in reverse; all-gather each block again one unit ahead, reduce-scatter after it.
    std::vector<std::vector<sim::TaskId>> bwd_end(units, std::vector<sim::TaskId>(ranks, 0));
    std::vector<std::uint32_t> order;  // block units in backward order
    for (std::uint32_t u = units - 1; u >= 1; --u) order.push_back(u);
    std::map<std::uint32_t, std::vector<sim::TaskId>> gathered_bwd;
    std::size_t next_bwd_gather = 0;
    const bool last_mb = mb + 1 == m;
    for (std::size_t i = 0; i < bwd.size(); ++i) {
      const std::uint32_t u = bwd_unit[i];
      if (gather_backward && u != 0) {
        // Unit order[k] is gathered when the backward of order[k − 2] has ended (one unit of prefetch).
        std::size_t pos = 0;
        while (order[pos] != u) ++pos;
        while (next_bwd_gather < order.size() && next_bwd_gather <= pos + 1) {
          const std::size_t k = next_bwd_gather++;
          const std::uint32_t g = order[k];
          gathered_bwd[g] = gather(g, "bwd", [&](std::uint32_t r) {
            return std::vector<sim::TaskId>{k >= 2 ? bwd_end[order[k - 2]][r] : last_fwd[r]};
          });
        }
      }
      const bool first_of_unit = i == 0 || bwd_unit[i - 1] != u;
      for (std::uint32_t r = 0; r < ranks; ++r) {
        const sim::StreamId lane[] = {it.compute_stream[r]};
        std::vector<sim::TaskId> deps;
        if (gather_backward && u != 0 && first_of_unit) deps.push_back(gathered_bwd.at(u)[r]);
        const sim::TaskId id = graph.add(bl[i], lane, bwd_time[i] * sc.cluster.compute_slowdown(job.gpus[r]), deps);
        if (host) it.host.issue(r, id, bwd[i].kernels);
        bwd_end[u][r] = id;
        last_backward[r] = id;
      }
      // The unit's gradients are complete after its last backward kernel (the root's after the last op).
      const bool unit_done = u != 0 ? (i + 1 == bwd.size() || bwd_unit[i + 1] != u) : i + 1 == bwd.size();
      if (per_unit_reduce && unit_done && unit_params[u] > 0) {
        const Bytes size = bytes(unit_params[u] * e);
        std::vector<sim::TaskId> rs =
            per_group("reducescatter.grads.unit" + std::to_string(u), CollectiveOp::kReduceScatter, size,
                      it.comm_stream, [&](std::uint32_t r) { return std::vector<sim::TaskId>{bwd_end[u][r]}; });
        rs = across_replicas("allreduce.replicas.unit" + std::to_string(u), size / shard, rs);
        for (std::uint32_t r = 0; r < ranks; ++r) {
          last_reduce[r] = rs[r];
          reduced[r] = true;
        }
        if (last_mb) {
          GradientBucket b;
          b.size = size;
          b.parameters = unit_params[u];
          b.ready_after_op = i;
          b.first_op = b.last_op = bwd[i].name;
          it.buckets.push_back(b);
          it.bucket_allreduce.push_back(rs[0]);
        }
      }
    }
    if (bucket_reduce_every_micro_batch) deepspeed_bucket_reduce(last_mb);
  }
  // DeepSpeed stages 1–2: the last micro-batch's gradients (stage 2: every micro-batch's) reduce-scattered after
  // its backward, in reduce_bucket_size buckets.
  if (!per_unit_reduce && !bucket_reduce_every_micro_batch) deepspeed_bucket_reduce(true);
  // Optimizer over the rank's shard: fp32 master weights, fp32 gradients, Adam states.
  const Op opt = optimizer_op(parameters / shard, job.training.optimizer, 4, false);
  const sim::LabelId opt_label = graph.add_label({opt.name, kCategoryCompute, op_args(opt, 0)});
  for (std::uint32_t r = 0; r < ranks; ++r) {
    const sim::StreamId lane[] = {it.compute_stream[r]};
    std::vector<sim::TaskId> deps;
    if (reduced[r]) deps.push_back(last_reduce[r]);
    it.optimizer_task.push_back(
        graph.add(opt_label, lane, op_time(opt, sc.profile.gpu, prec) * sc.cluster.compute_slowdown(job.gpus[r]), deps));
    if (host) it.host.issue(r, it.optimizer_task.back(), opt.kernels);
  }
  // DeepSpeed stages 1–2: the updated 16-bit parameters all-gathered before the next step.
  if (!gather_forward && groups.shard[0].size() > 1) {
    for (const Bytes size : buckets_of(parameters * e)) {
      const std::vector<sim::TaskId> ag =
          per_group("allgather.params.bucket", CollectiveOp::kAllGather, size, it.comm_stream,
                    [&](std::uint32_t r) { return std::vector<sim::TaskId>{it.optimizer_task[r]}; });
      for (const auto& members : groups.shard) it.step_end_task.push_back(ag[members.front()]);
    }
  }
  for (sim::TaskId t : input.refill_end) it.step_end_task.push_back(t);
  it.input_streams = std::move(input.streams);
  return it;
}

MemoryEstimate estimate_zero_memory(const Scenario& sc, const Job& job) {
  const ParallelPlan& par = job.parallel;
  MemoryConfig mc;
  mc.dp = zero_shard_ranks(sc, job);
  mc.micro_batch = par.micro_batch;
  mc.micro_batches = par.grad_accum;
  mc.precision = job.training.precision;
  mc.optimizer = job.training.optimizer;
  // ZeRO's 2 + 2 + 12 with 16-bit weights; fp32 training keeps fp32 gradients (4 B), and says so.
  mc.gradients = sixteen_bit(job.training.precision) ? GradientDtype::k16Bit : GradientDtype::kFp32;
  mc.recompute = par.recompute;          // full: only each block's input is kept (checkpointed)
  mc.attention = par.attention;          // flash: no s² score matrices
  mc.sharding = par.zero_stage == 1   ? Sharding::kOptimizer
                : par.zero_stage == 2 ? Sharding::kOptimizerGradients
                                      : Sharding::kAll;
  MemoryEstimate base = estimate_memory(job.model, mc, sc.profile.gpu.memory_capacity);
  std::vector<MemoryPart> parts = base.parts;
  if (par.zero_stage == 3 && mc.dp > 1) {
    // Whole 16-bit parameters while gathered: the root unit for the whole step and two blocks in flight. A shard
    // group of one rank gathers nothing (FSDP falls back to NO_SHARD): its weights row is the whole model.
    // (Stage 2 needs no such row: its "weights (16-bit)" are the whole model, which DeepSpeed keeps and
    // FSDP SHARD_GRAD_OP gathers in its forward and keeps until the backward; counting both would hold
    // the 16-bit model twice.)
    const std::vector<Op> bwd = backward_ops(job.model, zero_op_config(job));
    std::vector<double> unit(job.model.layers + 1, 0.0);
    for (const Op& op : bwd) unit[zero_unit_of(op.name)] += op.grad_parameters;
    double gathered = unit[0];
    std::vector<double> blocks(unit.begin() + 1, unit.end());
    std::sort(blocks.rbegin(), blocks.rend());
    for (std::size_t i = 0; i < 2 && i < blocks.size(); ++i) gathered += blocks[i];
    parts.push_back({"gathered parameters (root unit + 2 blocks in flight)",
                     bytes(gathered * element_bytes(job.training.precision))});
  }
  return memory_verdict(std::move(parts), sc.profile.gpu.memory_capacity);
}

}  // namespace clustersim::workloads
