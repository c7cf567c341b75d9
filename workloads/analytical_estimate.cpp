#include "workloads/analytical_estimate.h"

#include <algorithm>
#include <cassert>
#include <tuple>
#include <unordered_map>

#include "workloads/compute_model.h"
#include "workloads/ddp_graph.h"
#include "workloads/rank_layout.h"
#include "workloads/transformer_ops.h"

namespace clustersim::workloads {
namespace {

// The graph's rule for where Megatron's g/f operators put a TP collective (megatron_graph.cpp stage_ops).
bool tp_sync_after(const std::string& name) {
  return name.ends_with(".proj.fwd") || name.ends_with(".fc2.fwd") || name.ends_with(".shared_fc2.fwd") ||
         name.ends_with(".proj.recompute") || name.ends_with(".fc2.recompute") ||
         name.ends_with(".shared_fc2.recompute") ||
         name.ends_with(".qkv.dgrad") || name.ends_with(".fc1.dgrad") || name.ends_with(".shared_fc1.dgrad");
}

// One piece of a virtual stage (one layer, the embedding, the head) for one micro-batch on one rank.
struct Segment {
  double fwd_compute = 0, fwd_tp = 0;
  double bwd_compute = 0, bwd_tp = 0;
  double params = 0;                 // parameters whose gradients its backward produces
  std::vector<double> grad_end;      // per gradient-producing backward op: its end, from the segment's start
  std::vector<double> grad_params;
  double fwd() const { return fwd_compute + fwd_tp; }
  double bwd() const { return bwd_compute + bwd_tp; }
};

struct OpsKey {
  std::uint32_t tp, mb;
  bool sp;
  Recompute rc;
  AttentionKernel attention;
  bool operator==(const OpsKey&) const = default;
};
struct OpsKeyHash {
  std::size_t operator()(const OpsKey& k) const {
    return ((std::size_t{k.tp} * 1000003u + k.mb) * 4u + (k.sp ? 1u : 0u)) * 16u +
           static_cast<std::size_t>(k.rc) * 4u + static_cast<std::size_t>(k.attention);
  }
};

struct Segments {
  Segment dense, moe, embedding, head, head_with_embedding;
};

// Collective times by (kind of group, op, size); the group follows from (tp, pp) and the rank order.
enum class Group : std::uint8_t { kTensor, kData, kPipeline, kWrap, kEmbedding };
struct CommKey {
  std::uint32_t tp, pp;
  Group group;
  CollectiveOp op;
  double size;
  bool operator==(const CommKey&) const = default;
};
struct CommKeyHash {
  std::size_t operator()(const CommKey& k) const {
    const std::size_t h = std::hash<double>()(k.size);
    return h ^ (((std::size_t{k.tp} * 131u + k.pp) * 8u + static_cast<std::size_t>(k.group)) * 16u +
                static_cast<std::size_t>(k.op));
  }
};

}  // namespace

struct AnalyticalEstimator::Impl {
  const Scenario& sc;
  const Job& job;
  CollectiveModel collectives;
  Precision prec;
  double slowdown = 1;
  double element = 2;
  std::vector<std::uint32_t> moe_prefix;  // MoE layers among layers [0, l)
  std::uint32_t first_dense = 0, first_moe = 0;
  std::unordered_map<OpsKey, Segments, OpsKeyHash> segments;
  std::unordered_map<CommKey, double, CommKeyHash> comm;
  std::unordered_map<std::uint32_t, double> model_flops_by_mb;

  Impl(const Scenario& s, const Job& j)
      : sc(s), job(j), collectives(s.cluster, s.profile, s.nccl), prec(j.training.precision) {
    for (std::uint32_t g : job.gpus) slowdown = std::max(slowdown, sc.cluster.compute_slowdown(g));
    element = element_bytes(prec);
    moe_prefix.assign(job.model.layers + 1, 0);
    bool dense_seen = false, moe_seen = false;
    for (std::uint32_t l = 0; l < job.model.layers; ++l) {
      const bool moe = job.model.is_moe_layer(l);
      moe_prefix[l + 1] = moe_prefix[l] + (moe ? 1 : 0);
      if (moe && !moe_seen) first_moe = l, moe_seen = true;
      if (!moe && !dense_seen) first_dense = l, dense_seen = true;
    }
  }

  double op_seconds(const Op& op) const { return op_time(op, sc.profile.gpu, prec).raw() * slowdown; }

  // The GPUs of a group of the layout with degrees (tp, dp, pp): the one holding rank 0.
  std::vector<std::uint32_t> group_gpus(std::uint32_t tp, std::uint32_t pp, Group group) const {
    const auto n = static_cast<std::uint32_t>(job.gpus.size());
    const RankLayout layout(tp, n / (tp * pp), pp, job.parallel.rank_order);
    std::vector<std::uint32_t> ranks;
    switch (group) {
      case Group::kTensor:
        ranks = layout.group(ParallelDim::kTensor, 0);
        break;
      case Group::kData:
        ranks = layout.group(ParallelDim::kData, 0);
        break;
      case Group::kPipeline:
        ranks = {layout.rank({0, 0, 0}), layout.rank({0, 0, std::min(1u, pp - 1)})};
        break;
      case Group::kWrap:  // interleaving: the last stage sends to the first
      case Group::kEmbedding:
        ranks = {layout.rank({0, 0, pp - 1}), layout.rank({0, 0, 0})};
        break;
    }
    std::vector<std::uint32_t> gpus;
    for (std::uint32_t r : ranks) gpus.push_back(job.gpus[r]);
    return gpus;
  }

  double comm_time(std::uint32_t tp, std::uint32_t pp, Group group, CollectiveOp op, double size) {
    const CommKey key{tp, pp, group, op, size};
    if (const auto it = comm.find(key); it != comm.end()) return it->second;
    const double t = collectives.plan(CollectiveRequest{op, group_gpus(tp, pp, group), bytes(size), 0}).time.raw();
    comm.emplace(key, t);
    return t;
  }

  Segment summarize(const std::vector<Op>& fwd, const std::vector<Op>& bwd, const OpsKey& k, bool want_embedding,
                    bool split) {
    Segment s;
    const double activation = double(k.mb) * job.model.seq_len * job.model.hidden * element;
    double sync = 0;
    if (k.tp > 1) {
      sync = k.sp ? comm_time(k.tp, 1, Group::kTensor, CollectiveOp::kReduceScatter, activation) +
                        comm_time(k.tp, 1, Group::kTensor, CollectiveOp::kAllGather, activation)
                  : comm_time(k.tp, 1, Group::kTensor, CollectiveOp::kAllReduce, activation);
    }
    auto keep = [&](const Op& op) { return !split || op.name.starts_with("embed.") == want_embedding; };
    for (const Op& op : fwd) {
      if (!keep(op)) continue;
      s.fwd_compute += op_seconds(op);
      if (k.tp > 1 && tp_sync_after(op.name)) s.fwd_tp += sync;
    }
    for (const Op& op : bwd) {
      if (!keep(op)) continue;
      s.bwd_compute += op_seconds(op);
      if (op.grad_parameters > 0) {
        s.grad_end.push_back(s.bwd_compute + s.bwd_tp);
        s.grad_params.push_back(op.grad_parameters);
        s.params += op.grad_parameters;
      }
      if (k.tp > 1 && tp_sync_after(op.name)) s.bwd_tp += sync;
    }
    return s;
  }

  const Segments& segments_of(const OpsKey& k) {
    if (const auto it = segments.find(k); it != segments.end()) return it->second;
    OpConfig oc;
    oc.micro_batch = k.mb;
    oc.precision = prec;
    oc.tp = k.tp;
    oc.sequence_parallel = k.sp;
    oc.recompute = k.rc;
    oc.attention = k.attention;
    oc.embedding = false;
    oc.head = false;
    oc.layer_count = 1;
    Segments out;
    oc.first_layer = first_dense;
    if (moe_prefix.back() < job.model.layers) out.dense = summarize(forward_ops(job.model, oc), backward_ops(job.model, oc), k, false, false);
    if (moe_prefix.back() > 0) {
      oc.first_layer = first_moe;
      out.moe = summarize(forward_ops(job.model, oc), backward_ops(job.model, oc), k, false, false);
    }
    oc.first_layer = job.model.layers;  // no layers: the embedding and the head alone
    oc.layer_count = 0;
    oc.embedding = true;
    oc.head = true;
    {
      const std::vector<Op> f = forward_ops(job.model, oc), b = backward_ops(job.model, oc);
      out.embedding = summarize(f, b, k, true, true);
      out.head_with_embedding = summarize(f, b, k, false, true);
    }
    oc.embedding = false;
    out.head = summarize(forward_ops(job.model, oc), backward_ops(job.model, oc), k, false, false);
    return segments.emplace(k, std::move(out)).first->second;
  }

  double model_flops_of(std::uint32_t mb) {
    if (const auto it = model_flops_by_mb.find(mb); it != model_flops_by_mb.end()) return it->second;
    const double f = model_flops(job.model, mb).raw();
    model_flops_by_mb.emplace(mb, f);
    return f;
  }

  // The backward of one chunk as a sequence of segments (head, layers last to first, embedding), for the
  // buckets of overlap_grad_reduce.
  struct ChunkView {
    const Segment* head = nullptr;
    std::uint32_t dense = 0, moe = 0;  // layer counts; order inside the chunk from moe_prefix
    std::uint32_t first_layer = 0, layers = 0;
    const Segment* embedding = nullptr;
  };

  // Runs the DDP-style buckets of a chunk's last backward (starting at `start`) on a comm stream free at
  // `free`; returns when the stream is free again.
  double overlapped_buckets(const ChunkView& cv, const Segments& segs, double start, double free, double grad_bytes,
                            double first_cap, double cap, std::uint32_t tp, std::uint32_t pp, CollectiveOp op) {
    double offset = start, size = 0;
    bool first_bucket = true;
    auto flush = [&](double ready) {
      free = std::max(free, ready) + comm_time(tp, pp, Group::kData, op, size);
      size = 0;
      first_bucket = false;
    };
    auto walk = [&](const Segment& s) {
      for (std::size_t i = 0; i < s.grad_end.size(); ++i) {
        size += grad_bytes * s.grad_params[i];
        if (size >= (first_bucket ? first_cap : cap)) flush(offset + s.grad_end[i]);
      }
      offset += s.bwd();
    };
    double last_ready = start;
    auto track = [&](const Segment& s) {
      if (!s.grad_end.empty()) last_ready = offset + s.grad_end.back();
      walk(s);
    };
    if (cv.head) track(*cv.head);
    for (std::uint32_t l = cv.first_layer + cv.layers; l-- > cv.first_layer;)
      track(job.model.is_moe_layer(l) ? segs.moe : segs.dense);
    if (cv.embedding) track(*cv.embedding);
    if (size > 0) flush(last_ready);
    return free;
  }

  MemoryEstimate memory_of(const ParallelPlan& p, std::uint32_t stage) const {
    MemoryConfig mc;
    mc.tp = p.tp;
    mc.pp = p.pp;
    mc.stage = stage;
    mc.dp = p.dp;
    mc.sequence_parallel = p.sequence_parallel;
    mc.schedule = p.schedule;
    mc.micro_batch = p.micro_batch;
    mc.micro_batches = p.grad_accum;
    mc.virtual_stages = p.vp;
    mc.precision = prec;
    mc.recompute = p.recompute;
    mc.attention = p.attention;
    mc.optimizer = job.training.optimizer;
    mc.gradients = job.training.gradients;
    mc.sharding = p.distributed_optimizer ? Sharding::kOptimizer : Sharding::kNone;
    return estimate_memory(job.model, mc, sc.profile.gpu.memory_capacity);
  }

  AnalyticalEstimate estimate(const ParallelPlan& p);
};

AnalyticalEstimate AnalyticalEstimator::Impl::estimate(const ParallelPlan& plan) {
  assert(plan.gpus() == job.gpus.size() && "the layout uses the job's GPUs");
  const bool megatron = plan.megatron();
  const std::uint32_t t = plan.tp, p = plan.pp, v = std::max(1u, plan.vp), m = plan.grad_accum, d = plan.dp;
  const std::uint32_t pv = p * v, lpc = job.model.layers / pv;
  const OpsKey key{t, plan.micro_batch, plan.sequence_parallel, megatron ? plan.recompute : Recompute::kNone,
                   megatron ? plan.attention : AttentionKernel::kExplicit};
  const Segments& segs = segments_of(key);
  const double activation = double(plan.micro_batch) * job.model.seq_len * job.model.hidden * element;

  // Per virtual stage and micro-batch: forward and backward time (compute and TP parts) and parameters.
  // Small fixed arrays would do for most layouts; a vector per call is one allocation.
  struct Chunk {
    double f = 0, b = 0, compute = 0, tp = 0, params = 0;
  };
  std::vector<Chunk> chunk(pv);
  const double gather = (megatron && plan.pp_scatter_gather && p > 1)
                            ? comm_time(t, 1, Group::kTensor, CollectiveOp::kAllGather, activation)
                            : 0.0;
  for (std::uint32_t vs = 0; vs < pv; ++vs) {
    const std::uint32_t first = vs * lpc;
    const double n_moe = moe_prefix[first + lpc] - moe_prefix[first], n_dense = lpc - n_moe;
    Chunk& c = chunk[vs];
    auto add = [&](const Segment& s, double k) {
      c.f += k * s.fwd();
      c.b += k * s.bwd();
      c.compute += k * (s.fwd_compute + s.bwd_compute);
      c.tp += k * (s.fwd_tp + s.bwd_tp);
      c.params += k * s.params;
    };
    if (n_dense > 0) add(segs.dense, n_dense);
    if (n_moe > 0) add(segs.moe, n_moe);
    if (vs == 0) add(segs.embedding, 1);
    if (vs + 1 == pv) add(vs == 0 ? segs.head_with_embedding : segs.head, 1);
    if (gather > 0) {
      if (vs > 0) c.f += gather, c.tp += gather;
      if (vs + 1 < pv) c.b += gather, c.tp += gather;
    }
  }
  std::vector<double> stage_time(p, 0.0), stage_compute(p, 0.0), stage_tp(p, 0.0), stage_params(p, 0.0);
  double sum_f = 0, sum_b = 0, max_f = 0, max_b = 0;
  for (std::uint32_t s = 0; s < p; ++s) {
    double f = 0, b = 0;
    for (std::uint32_t c = 0; c < v; ++c) {
      const Chunk& ch = chunk[c * p + s];
      f += ch.f;
      b += ch.b;
      stage_compute[s] += ch.compute;
      stage_tp[s] += ch.tp;
      stage_params[s] += ch.params;
    }
    stage_time[s] = f + b;
    sum_f += f, sum_b += b;
    max_f = std::max(max_f, f), max_b = std::max(max_b, b);
  }

  // Pipeline: when stage 0 ends its last backward, and the sends on the critical path.
  const double pp_message = (plan.sequence_parallel || plan.pp_scatter_gather) ? activation / t : activation;
  const double send = p > 1 ? comm_time(t, p, Group::kPipeline, CollectiveOp::kSendRecv, pp_message) : 0.0;
  double pipeline = 0, pp_exposed = 0;
  const double sum_t = sum_f + sum_b;
  const double t_max = *std::max_element(stage_time.begin(), stage_time.end());
  if (p == 1) {
    pipeline = m * stage_time[0];
  } else if (plan.schedule == PipelineSchedule::kGPipe) {
    pipeline = sum_t + (m - 1) * (std::max(max_f, send) + std::max(max_b, send)) + 2.0 * (p - 1) * send;
    pp_exposed = 2.0 * (p - 1) * send + (m - 1) * (std::max(0.0, send - max_f) + std::max(0.0, send - max_b));
  } else if (v == 1) {
    const double t_last = stage_time[p - 1];
    double loop = 0;
    for (std::uint32_t s = 0; s + 1 < p; ++s) loop = std::max(loop, stage_time[s] + 2 * send);
    const double period = std::max(t_max, loop);
    const double waits = m >= 2 ? (m - 2.0) * (period - t_last) : 0.0;
    pipeline = sum_t + 2.0 * (p - 1) * send + (m - 1.0) * t_last + waits;
    pp_exposed = 2.0 * (p - 1) * send + std::max(0.0, waits - (m >= 2 ? (m - 2.0) * (t_max - t_last) : 0.0));
  } else {
    // Interleaved: the stage's m·v chunk steps plus a bubble of (p − 1)/v stage times; the first
    // micro-batch's forward and the last one's backward cross every virtual-stage boundary with a send.
    pipeline = m * t_max + (sum_t - t_max) / v + 2.0 * (pv - 1) * send;
    pp_exposed = 2.0 * (pv - 1) * send;
  }
  // Stage s ends its last backward the drain below it earlier (chunk 0's backward and a send per stage).
  std::vector<double> end(p, pipeline);
  for (std::uint32_t s = 1; s < p; ++s) end[s] = end[s - 1] - chunk[s - 1].b - send;

  // Data parallelism, tied embeddings, optimizer.
  const bool half = prec == Precision::kBF16 || prec == Precision::kFP16;
  const double grad_bytes =
      megatron ? (job.training.gradients == GradientDtype::kFp32 ? 4.0 : element) : ddp_gradient_bytes(prec).raw();
  const bool distributed = megatron && plan.distributed_optimizer;
  const CollectiveOp grad_op = distributed ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
  const bool overlap = !megatron || plan.overlap_grad_reduce;
  std::vector<double> dp_done(end);
  if (d > 1) {
    for (std::uint32_t s = 0; s < p; ++s) {
      double free = end[s];
      if (overlap) {
        free = 0;
        for (std::uint32_t c = v; c-- > 0;) {
          const std::uint32_t vs = c * p + s;
          ChunkView cv;
          cv.first_layer = vs * lpc;
          cv.layers = lpc;
          if (vs + 1 == pv) cv.head = vs == 0 ? &segs.head_with_embedding : &segs.head;
          if (vs == 0) cv.embedding = &segs.embedding;
          // Chunk c's last backward runs c groups of p backward steps before chunk 0's (interleaved cooldown).
          const double chunk_end = end[s] - c * p * chunk[vs].b;
          free = overlapped_buckets(cv, segs, chunk_end - chunk[vs].b, free, grad_bytes, kFirstBucketCap.raw(),
                                    plan.ddp_bucket.raw(), t, p, grad_op);
        }
        free = std::max(free, end[s]);
      } else {
        for (std::uint32_t c = v; c-- > 0;)
          free += comm_time(t, p, Group::kData, grad_op, chunk[c * p + s].params * grad_bytes);
      }
      dp_done[s] = free;
    }
  }
  std::vector<double> opt_start(p);
  for (std::uint32_t s = 0; s < p; ++s) opt_start[s] = std::max(end[s], dp_done[s]);
  if (megatron && p > 1 && job.model.tied_embeddings) {
    const double size = double(job.model.vocab) * job.model.hidden / t * grad_bytes;
    const double done = std::max(opt_start[0], opt_start[p - 1]) +
                        comm_time(t, p, Group::kEmbedding, CollectiveOp::kAllReduce, size);
    opt_start[0] = opt_start[p - 1] = done;
  }
  double iteration = 0, opt_last = 0, dp_last = 0;
  std::uint32_t last_stage = 0;
  for (std::uint32_t s = 0; s < p; ++s) {
    double opt;
    if (megatron) {
      const double params = distributed ? stage_params[s] / d : stage_params[s];
      opt = op_seconds(optimizer_op(params, job.training.optimizer, grad_bytes, half));
    } else {
      opt = op_seconds(optimizer_op(job.model.parameter_count(), job.training.optimizer, grad_bytes, false));
    }
    double step_end = opt_start[s] + opt;
    if (distributed)
      for (std::uint32_t c = 0; c < v; ++c)
        step_end += comm_time(t, p, Group::kData, CollectiveOp::kAllGather, chunk[c * p + s].params * element);
    if (step_end > iteration) {
      iteration = step_end;
      last_stage = s;
      opt_last = opt;
      dp_last = step_end - opt - end[s];
    }
  }

  AnalyticalEstimate out;
  out.iteration_time = seconds(iteration);
  out.compute = seconds(m * stage_compute[last_stage] + opt_last);
  out.tp_comm = seconds(m * stage_tp[last_stage]);
  out.pp_comm = seconds(pp_exposed);
  out.dp_comm = seconds(dp_last);
  out.bubble = seconds(std::max(0.0, iteration - out.compute.raw() - out.tp_comm.raw() - pp_exposed - dp_last));
  const double samples = double(plan.micro_batch) * m * d;
  out.tokens_per_s = samples * job.model.seq_len / iteration;
  out.mfu = model_flops_of(plan.micro_batch) * m * d /
            (iteration * double(job.gpus.size()) * tensor_peak(sc.profile.gpu, prec).raw());

  // Memory of the most loaded stage.
  MemoryEstimate worst;
  if (megatron) {
    const bool every_stage = job.model.is_moe();
    for (std::uint32_t s = 0; s < p; ++s) {
      if (!every_stage && s != 0 && s + 1 != p) continue;
      MemoryEstimate e = memory_of(plan, s);
      if (s == 0 || e.peak > worst.peak) worst = std::move(e);
    }
  } else {
    Job copy = job;
    copy.parallel = plan;
    worst = estimate_ddp_memory(copy, sc.profile.gpu);
  }
  out.peak_memory = worst.peak;
  out.memory_capacity = worst.capacity;
  out.oom = worst.oom;
  out.oom_part = worst.breaking_part;
  return out;
}

AnalyticalEstimator::AnalyticalEstimator(const Scenario& scenario, const Job& job)
    : impl_(std::make_unique<Impl>(scenario, job)) {}
AnalyticalEstimator::~AnalyticalEstimator() = default;

AnalyticalEstimate AnalyticalEstimator::estimate(const ParallelPlan& plan) { return impl_->estimate(plan); }

AnalyticalEstimate analytical_estimate(const Scenario& scenario, const Job& job) {
  AnalyticalEstimator e(scenario, job);
  return e.estimate(job.parallel);
}

}  // namespace clustersim::workloads
