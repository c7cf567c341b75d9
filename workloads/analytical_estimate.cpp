#include "workloads/analytical_estimate.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

#include "workloads/compute_model.h"
#include "workloads/ddp_graph.h"
#include "workloads/host_dispatch.h"
#include "workloads/input_pipeline.h"
#include "workloads/megatron_graph.h"
#include "workloads/rank_layout.h"
#include "workloads/transformer_ops.h"
#include "workloads/zero_graph.h"

namespace clustersim::workloads {
namespace {

bool is_expert_op(const Op& op) { return op.name.find(".expert_fc") != std::string::npos; }

// An MoE layer's communication with expert parallelism: the all-to-all, and with tp > 1 the TP group's
// all-gather and reduce-scatter of the routed tokens (megatron_graph.h), each call's time.
struct MoeComm {
  double a2a = 0, gather = 0, scatter = 0;
  double tp_after(const std::string& name) const {
    if (gather <= 0 && scatter <= 0) return 0;  // no EP x TP: skip the name checks (sweep scoring's hot path)
    switch (expert_tp_sync_after(name)) {
      case ExpertTpSync::kAllGather:
        return gather;
      case ExpertTpSync::kReduceScatter:
        return scatter;
      case ExpertTpSync::kNone:
        break;
    }
    return 0;
  }
};

// One piece of a virtual stage (one layer, the embedding, the head) for one micro-batch on one rank.
// Times in seconds from the piece's start; *_cp and *_ep are the exposed ring transfers and all-to-alls.
struct Segment {
  double fwd_compute = 0, fwd_tp = 0, fwd_cp = 0, fwd_ep = 0;
  double bwd_compute = 0, bwd_tp = 0, bwd_cp = 0, bwd_ep = 0;
  double params = 0, expert_params = 0;  // parameters whose gradients its backward produces; the routed experts'
  std::vector<double> grad_end;          // per gradient-producing backward op: its end, from the segment's start
  std::vector<double> grad_params;
  std::vector<char> grad_expert;
  // Host dispatch (host_dispatch.h): the forward and the backward as segments of a host/GPU stretch.
  HostSegment fwd_host, bwd_host;
  double fwd() const { return fwd_compute + fwd_tp + fwd_cp + fwd_ep; }
  double bwd() const { return bwd_compute + bwd_tp + bwd_cp + bwd_ep; }
};

struct OpsKey {
  std::uint32_t tp, mb, cp, ep;
  std::uint32_t pp;  // places the CP and EP groups when pp is not the outermost dimension, else 1
  bool sp;
  Recompute rc;
  AttentionKernel attention;
  double load;  // the busiest EP rank's expert load
  std::uint32_t ring_layers;  // with context parallelism the layers of a chunk (run_ops reps), else 0
  bool eager;                 // PyTorch DDP's eager kernels (OpConfig::eager)
  bool autocast;              // and its autocast around fp32 parameters (OpConfig::autocast)
  bool operator==(const OpsKey&) const = default;
};
struct OpsKeyHash {
  std::size_t operator()(const OpsKey& k) const {
    std::size_t h = (((std::size_t{k.tp} * 1000003u + k.mb) * 4099u + k.cp) * 257u + k.ep) * 131u + k.pp;
    h = (h * 4u + (k.sp ? 1u : 0u)) * 16u + static_cast<std::size_t>(k.rc) * 4u + static_cast<std::size_t>(k.attention);
    return ((h ^ (std::hash<double>()(k.load) << 1)) * 31u + k.ring_layers) * 4u + (k.eager ? 2u : 0u) +
           (k.autocast ? 1u : 0u);
  }
};

struct Segments {
  Segment dense, moe, embedding, head, head_with_embedding;
};

// Collective times by (kind of group, op, size); the group follows from (tp, pp, cp, ep) and the rank order.
enum class Group : std::uint8_t {
  kTensor,
  kData,        // dense gradients: the dp·cp ranks of the data-and-context group
  kExpertData,  // expert gradients: the (dp/ep)·cp ranks holding the same experts
  kExpert,      // the EP group (all-to-alls)
  kRing,        // the ring-attention edges of the CP ring of rank 0 (ring_edges)
  kPipeline,    // a key tag only: pipeline_sends() times every boundary
  kEmbedding,
  kShard,    // ZeRO: all ranks, or one node's with hybrid sharding
  kReplica,  // ZeRO hybrid sharding: the ranks holding the same shard, one per node
};
struct CommKey {
  std::uint32_t tp, pp, cp, ep;
  Group group;
  CollectiveOp op;
  double size;
  bool hybrid;
  bool operator==(const CommKey&) const = default;
};
struct CommKeyHash {
  std::size_t operator()(const CommKey& k) const {
    const std::size_t h = std::hash<double>()(k.size);
    return h ^ (((((std::size_t{k.tp} * 131u + k.pp) * 131u + k.cp) * 131u + k.ep) * 16u +
                 static_cast<std::size_t>(k.group)) * 32u + static_cast<std::size_t>(k.op) * 2u + (k.hybrid ? 1u : 0u));
  }
};

// ZeRO / FSDP: per unit (0 the root, u = l + 1 block l) forward and backward time and parameters, for one
// micro-batch; the root's forward and backward split where the blocks interrupt it.
struct ZeroUnits {
  double root_fwd_front = 0, root_fwd_back = 0, root_bwd_head = 0, root_bwd_embed = 0;
  std::vector<double> fwd, bwd, params;
  // Host dispatches (host_dispatch.h) of the same parts.
  double root_fwd_front_k = 0, root_fwd_back_k = 0, root_bwd_head_k = 0, root_bwd_embed_k = 0, kernels = 0;
  std::vector<double> fwd_k, bwd_k;
  double total_params = 0, compute = 0;
};
struct ZeroKey {
  std::uint32_t mb;
  Recompute rc;
  AttentionKernel attention;
  bool operator==(const ZeroKey&) const = default;
};
struct ZeroKeyHash {
  std::size_t operator()(const ZeroKey& k) const {
    return std::size_t{k.mb} * 64u + static_cast<std::size_t>(k.rc) * 4u + static_cast<std::size_t>(k.attention);
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
  std::unordered_map<ZeroKey, ZeroUnits, ZeroKeyHash> zero_units;
  std::unordered_map<CommKey, double, CommKeyHash> comm;
  std::unordered_map<CommKey, std::vector<double>, CommKeyHash> ring_edge_times;
  std::unordered_map<CommKey, std::vector<double>, CommKeyHash> pipeline_send_times;
  std::vector<double> ring_clock, ring_base, kv_end, dkv_end, scratch, op_cost;  // run_ops scratch
  std::unordered_map<std::uint32_t, double> model_flops_by_mb;
  // PyTorch DDP's eager mixed precision and gradient accumulation per micro-batch size (ddp_graph.h
  // autocast_weights_op): the forward's weight casts, and the backward's gradient epilogues (gradient_epilogue_op)
  // summed over its ops, in the first micro-batch (no accumulation into .grad) and in a later one.
  struct EagerCosts {
    double weight_cast = 0, epilogue_first = 0, epilogue_later = 0;  // GPU seconds
    double weight_cast_kernels = 0, epilogue_first_kernels = 0, epilogue_later_kernels = 0;
  };
  std::unordered_map<std::uint32_t, EagerCosts> eager_by_mb;
  const EagerCosts& eager_costs(std::uint32_t micro_batch) {
    if (const auto it = eager_by_mb.find(micro_batch); it != eager_by_mb.end()) return it->second;
    EagerCosts c;
    const Op cast = autocast_weights_op(eager_forward_ops(job.model, micro_batch, prec), prec);
    c.weight_cast = cast.bytes.raw() > 0 ? op_seconds(cast) : 0;
    c.weight_cast_kernels = cast.bytes.raw() > 0 ? cast.kernels : 0;
    const std::vector<Op> backward = eager_backward_ops(job.model, micro_batch, prec);
    const double tied = tied_head_elements(backward);
    for (const Op& op : backward) {
      const Op first = gradient_epilogue_op(op, prec, false, tied), later = gradient_epilogue_op(op, prec, true, tied);
      if (first.bytes.raw() > 0) c.epilogue_first += op_seconds(first), c.epilogue_first_kernels += first.kernels;
      if (later.bytes.raw() > 0) c.epilogue_later += op_seconds(later), c.epilogue_later_kernels += later.kernels;
    }
    return eager_by_mb.emplace(micro_batch, c).first->second;
  }
  // PyTorch DDP's buckets for a bucket cap (ddp_graph.h; the gradients per op do not depend on the micro-batch).
  std::unordered_map<double, std::size_t> ddp_bucket_count_by_cap;
  std::size_t ddp_bucket_count(Bytes cap) {
    if (const auto it = ddp_bucket_count_by_cap.find(cap.raw()); it != ddp_bucket_count_by_cap.end()) return it->second;
    const std::size_t n =
        ddp_buckets(eager_backward_ops(job.model, 1, prec), ddp_gradient_bytes(prec), kFirstBucketCap, cap).size();
    return ddp_bucket_count_by_cap.emplace(cap.raw(), n).first->second;
  }
  std::vector<std::uint32_t> node_of_rank;  // the node of each rank's GPU (ZeRO hybrid sharding)

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
    for (std::uint32_t g : job.gpus) node_of_rank.push_back(sc.cluster.node_of(g));
  }

  double op_seconds(const Op& op) const { return op_time(op, sc.profile.gpu, prec).raw() * slowdown; }
  // PyTorch DDP's copy of the step's fp32 gradients into its buckets (and, as long, back out; ddp_graph.h).
  double ddp_copy_seconds() const {
    return op_seconds(copy_op("ddp.copy", bytes(job.model.parameter_count() * ddp_gradient_bytes(prec).raw())));
  }

  // The GPUs of a group of the layout with degrees (tp, cp, dp, pp, ep): the one holding rank 0.
  std::vector<std::uint32_t> group_ranks(const CommKey& k) const {
    const auto n = static_cast<std::uint32_t>(job.gpus.size());
    std::vector<std::uint32_t> ranks;
    if (k.group == Group::kShard || k.group == Group::kReplica) {
      // zero_graph.cpp groups_of: the shard group is every rank, or with hybrid sharding the ranks on rank
      // 0's node; the replica group the first rank of every node.
      for (std::uint32_t r = 0; r < n; ++r) {
        if (k.group == Group::kShard && (!k.hybrid || node_of_rank[r] == node_of_rank[0])) ranks.push_back(r);
        if (k.group == Group::kReplica && (r == 0 || node_of_rank[r] != node_of_rank[r - 1])) ranks.push_back(r);
      }
      return ranks;
    }
    const RankLayout layout(k.tp, n / (k.tp * k.pp * k.cp), k.pp, job.parallel.rank_order, k.cp, k.ep);
    switch (k.group) {
      case Group::kTensor: return layout.group(ParallelDim::kTensor, 0);
      case Group::kData: return layout.data_context_group(0);
      case Group::kExpertData: return layout.expert_data_group(0);
      case Group::kExpert: return layout.group(ParallelDim::kExpert, 0);
      case Group::kRing: return layout.group(ParallelDim::kContext, 0);
      case Group::kEmbedding: return {layout.rank({0, 0, k.pp - 1, 0}), layout.rank({0, 0, 0, 0})};
      default: return {};
    }
  }

  double plan_time(CollectiveOp op, const std::vector<std::uint32_t>& ranks, double size) const {
    std::vector<std::uint32_t> gpus;
    for (std::uint32_t r : ranks) gpus.push_back(job.gpus[r]);
    return collectives.plan(CollectiveRequest{op, std::move(gpus), bytes(size), 0}).time.raw();
  }

  // Contention-free time of a collective on a group; 0 on a group of one rank (the graphs add none).
  double comm_time(const CommKey& key) {
    if (const auto it = comm.find(key); it != comm.end()) return it->second;
    const std::vector<std::uint32_t> ranks = group_ranks(key);
    double t = 0;
    assert(key.group != Group::kRing && "ring edges: ring_edges()");
    if (ranks.size() > 1) {
      t = plan_time(key.op, ranks, key.size);
    }
    comm.emplace(key, t);
    return t;
  }
  double comm_time(const ParallelPlan& p, Group group, CollectiveOp op, double size) {
    return comm_time(CommKey{p.tp, p.pp, p.cp, p.ep, group, op, size, false});
  }

  static double latest_of(const std::vector<double>& t) { return *std::max_element(t.begin(), t.end()); }

  // The Send/Recv time of each edge r → r + 1 of the CP ring of rank 0, one period of them: the ring's
  // edges repeat with period P (the members on one node, then the hop to the next node), and so, from an
  // aligned start, do its members' clocks (run_ops is invariant under rotating the ring by P), so P members
  // stand for all; P = 1 when every edge takes as long. Empty without a ring.
  const std::vector<double>& ring_edges(const CommKey& key) {
    if (const auto it = ring_edge_times.find(key); it != ring_edge_times.end()) return it->second;
    const std::vector<std::uint32_t> ranks = group_ranks(key);
    std::vector<double> e;
    for (std::size_t i = 0; ranks.size() > 1 && i < ranks.size(); ++i)
      e.push_back(plan_time(CollectiveOp::kSendRecv, {ranks[i], ranks[(i + 1) % ranks.size()]}, key.size));
    for (std::size_t period = 1; period < e.size(); ++period) {
      if (e.size() % period != 0) continue;
      bool repeats = true;
      for (std::size_t r = period; repeats && r < e.size(); ++r) repeats = e[r] == e[r - period];
      if (repeats) {
        e.resize(period);
        break;
      }
    }
    return ring_edge_times.emplace(key, std::move(e)).first->second;
  }

  // The Send/Recv time across each pipeline boundary of the layout's first replica: element b from stage b to
  // stage (b + 1) mod p. Empty without a pipeline.
  const std::vector<double>& pipeline_sends(const ParallelPlan& plan, double size) {
    const CommKey key{plan.tp, plan.pp, plan.cp, plan.ep, Group::kPipeline, CollectiveOp::kSendRecv, size, false};
    if (const auto it = pipeline_send_times.find(key); it != pipeline_send_times.end()) return it->second;
    const auto n = static_cast<std::uint32_t>(job.gpus.size());
    const RankLayout layout(plan.tp, n / (plan.tp * plan.pp * plan.cp), plan.pp, job.parallel.rank_order, plan.cp,
                            plan.ep);
    std::vector<double> e;
    for (std::uint32_t b = 0; plan.pp > 1 && b < plan.pp; ++b)
      e.push_back(plan_time(CollectiveOp::kSendRecv,
                            {layout.rank({0, 0, b, 0}), layout.rank({0, 0, (b + 1) % plan.pp, 0})}, size));
    return pipeline_send_times.emplace(key, std::move(e)).first->second;
  }

  // One forward or backward op list of a piece, timed as the graph runs it. Every op but the ring steps
  // runs alike on the cp members of the ring; with `edges` (context parallelism) each member r keeps its own
  // clock, and the K/V (and in backward the dK/dV) move hop by hop as megatron_graph.cpp ring_transfer does:
  // transfer j on edge r (member r to r + 1, one transfer at a time per edge and kind) starts when its
  // payload is on r — member r's K/V (j = 1), what r received in step j − 1 (K/V), r's own step j − 1 done
  // and what it received (dK/dV) — and member r's step j waits for the transfer j into it. The piece ends
  // with its slowest member; the exposed ring time is that end less the compute and the other collectives.
  // With `reps` > 1 the list runs that many times back to back (the members' clocks carry over: a member
  // behind a slow edge starts the next layer late while the others' transfers already flow) and the segment
  // is the average of one run, so reps × segment is the time of reps layers from an aligned start. Once a
  // run takes as long as the one before (the recursion's periodic regime) the rest are extrapolated.
  // The TP collectives' times of a layout: a sync point's (RS + AG with sequence parallelism, else AR), and its
  // reduction and all-gather apart.
  struct TpTimes {
    double reduce = 0, gather = 0;
    // tp_comm_overlap's pipelined reduce-scatter: (t − 1)/t of the bytes beside the GEMM, the last 1/t after it.
    double reduce_body = 0, reduce_tail = 0;
    double loss = 0;  // one of the vocabulary-parallel cross-entropy's 3 all-reduces after loss.fwd
    double sync() const { return reduce + gather; }
  };

  void run_ops(const std::vector<Op>& ops, bool backward, const OpsKey& k, const TpTimes& tpt,
               const std::vector<double>& edges, const MoeComm& moe, bool split, bool want_embedding, Segment& s,
               std::uint32_t reps = 1, bool carry = false) {
    const double a2a = moe.a2a;
    constexpr double kNever = -std::numeric_limits<double>::infinity();
    const bool ring = !edges.empty();
    const std::size_t n = ring ? edges.size() : 1;  // one period of the ring's members (ring_edges)
    std::vector<double>& t = ring_clock;  // per member: when its last kernel ends
    if (!carry) {  // else the members' clocks go on from the previous list (the backward after the forward)
      t.assign(n, 0.0);
      ring_base.assign(n, 0.0);
      kv_end.assign(n, kNever);   // the latest K/V transfer on edge r: its end (the edge's streams are free)
      dkv_end.assign(n, kNever);  // the latest dK/dV transfer on edge r
    }
    auto latest = [&] { return latest_of(t); };
    const double start = latest();
    // Transfer j of one kind on every edge; `payload` is when member r holds what it sends on edge r.
    auto transfer = [&](std::vector<double>& end, auto payload) {
      scratch.assign(end.begin(), end.end());  // the previous transfers, per edge
      for (std::size_t r = 0; r < n; ++r) end[r] = std::max(payload(r, scratch), scratch[r]) + edges[r];
    };
    // The TP time op i adds (megatron_graph.cpp): its sync point's collectives and, for a column-parallel data
    // gradient under sequence parallelism, the all-gather of the layer's input again (`regather`).
    //  * async_tp_grad_reduce or tp_comm_overlap, a column-parallel data gradient: the re-gather beside op i,
    //    the reduction beside the weight gradient after it (op i + 1): max(0, G − t_i) + max(0, R − t_i+1);
    //  * tp_comm_overlap, a row-parallel GEMM's reduce-scatter: (t − 1)/t of it beside op i, the last 1/t after:
    //    max(0, R_body − t_i) + R_tail (the embedding's: R, Transformer Engine does not run it);
    //  * tp_comm_overlap, the pair's all-gather: beside the op that reads it, max(0, A − t_j), or before it
    //    (the output layer, the embedding's backward, a stage's end): A (tp_gather_consumer);
    //  * else every one between the kernels (the async pair's all-gather after the weight gradient).
    const bool overlap = k.sp && job.parallel.tp_comm_overlap;
    const bool async = job.parallel.async_tp_grad_reduce || overlap;
    auto gather_cost = [&](std::size_t i) {
      if (!overlap) return tpt.gather;
      for (std::size_t j = i + 1; j < ops.size(); ++j) {
        const TpGatherConsumer consumer = tp_gather_consumer(ops[j].name, k.ep);
        if (consumer == TpGatherConsumer::kOverlapped) return std::max(0.0, tpt.gather - std::max(0.0, op_cost[j]));
        if (consumer == TpGatherConsumer::kBlocking) break;
      }
      return tpt.gather;
    };
    auto tp_cost = [&](std::size_t i) {
      const Op& op = ops[i];
      const double c = std::max(0.0, op_cost[i]);
      const bool column = column_parallel_dgrad(op.name, k.ep);
      const double regather = column && k.sp ? tpt.gather : 0.0;
      const double gather = k.sp ? gather_cost(i) : 0.0;
      if (column && async) {
        const double next = i + 1 < op_cost.size() ? std::max(0.0, op_cost[i + 1]) : 0.0;
        return std::max(0.0, regather - c) + std::max(0.0, tpt.reduce - next) + gather;
      }
      if (overlap && tp_reduce_pipelined(op.name, k.ep))
        return std::max(0.0, tpt.reduce_body - c) + tpt.reduce_tail + gather;
      return regather + tpt.reduce + gather;
    };
    // One run of the list: its op costs, and the parts that do not depend on the ring.
    double compute = 0, tp = 0, epc = 0;
    op_cost.clear();
    for (const Op& op : ops) {
      if (split && op.name.starts_with("embed.") != want_embedding) {
        op_cost.push_back(-1);
        continue;
      }
      op_cost.push_back(op_seconds(op));
      compute += op_cost.back();
      tp += moe.tp_after(op.name);
      if (a2a > 0 && ep_sync_after(op.name)) epc += a2a;
    }
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (op_cost[i] >= 0 && k.tp > 1 && tp_sync_after(ops[i].name, k.ep)) tp += tp_cost(i);
      if (op_cost[i] >= 0 && k.tp > 1 && ops[i].name == "loss.fwd") tp += 3 * tpt.loss;
    }
    constexpr std::uint32_t kMaxRingRuns = 8;
    double before = start, increment = -1;
    std::uint32_t done = 0;
    while (done < reps) {
      s.grad_end.clear(), s.grad_params.clear(), s.grad_expert.clear(), s.params = 0, s.expert_params = 0;
      for (std::size_t i = 0; i < ops.size(); ++i) {
        const Op& op = ops[i];
        const double c = op_cost[i];
        if (c < 0) continue;
        if (op.ring_step >= 0 && ring) {
          const bool gradients = backward && op.name.ends_with(".bwd");
          const auto j = static_cast<std::uint32_t>(op.ring_step);
          if (j == 0) {
            ring_base = t;
          } else {
            transfer(kv_end, [&](std::size_t r, const std::vector<double>& prev) {
              return j == 1 ? ring_base[r] : prev[(r + n - 1) % n];
            });
            if (gradients)
              transfer(dkv_end, [&](std::size_t r, const std::vector<double>& prev) {
                return j >= 2 ? std::max(t[r], prev[(r + n - 1) % n]) : t[r];
              });
            for (std::size_t r = 0; r < n; ++r) t[r] = std::max(t[r], kv_end[(r + n - 1) % n]);
          }
          for (double& x : t) x += c;
          if (gradients && j + 1 == k.cp)  // own chunk last: the QKV backward waits for its accumulated dK/dV
            for (std::size_t r = 0; r < n; ++r) t[r] = std::max(t[r], dkv_end[(r + n - 1) % n]);
        } else {
          for (double& x : t) x += c;
        }
        if (backward && op.grad_parameters > 0) {
          s.grad_end.push_back(latest() - before);
          s.grad_params.push_back(op.grad_parameters);
          s.grad_expert.push_back(is_expert_op(op) ? 1 : 0);
          s.params += op.grad_parameters;
          if (is_expert_op(op)) s.expert_params += op.grad_parameters;
        }
        if (k.tp > 1 && tp_sync_after(op.name, k.ep))
          for (double& x : t) x += tp_cost(i);
        if (k.tp > 1 && op.name == "loss.fwd")
          for (double& x : t) x += 3 * tpt.loss;
        // The MoE TP collectives around the all-to-alls (their order does not change the sum).
        if (const double e = moe.tp_after(op.name); e > 0)
          for (double& x : t) x += e;
        if (a2a > 0 && ep_sync_after(op.name))
          for (double& x : t) x += a2a;
      }
      ++done;
      const double now = latest(), inc = now - before;
      before = now;
      // Periodic (the run took as long as the one before), or run long enough: the rest take `inc`. The
      // transient is short (2–3 runs in the tests; the result does not change from 2 runs on there).
      const bool periodic = std::abs(inc - increment) <= 1e-12 * inc;
      increment = inc;
      if (done < reps && (periodic || done == kMaxRingRuns)) break;
    }
    const double span = (before - start) + double(reps - done) * increment;  // done == reps: the runs' sum
    (backward ? s.bwd_compute : s.fwd_compute) = compute;
    (backward ? s.bwd_tp : s.fwd_tp) = tp;
    // Without a ring every member's clock is the sum of the parts; with one, what the sum leaves is the wait.
    (backward ? s.bwd_cp : s.fwd_cp) = ring ? std::max(0.0, span / reps - compute - tp - epc) : 0.0;
    (backward ? s.bwd_ep : s.fwd_ep) = epc;
  }

  Segment summarize(const std::vector<Op>& fwd, const std::vector<Op>& bwd, const OpsKey& k, const OpConfig& oc,
                    bool want_embedding, bool split, bool repeat = false) {
    Segment s;
    const double activation = double(k.mb) * job.model.seq_len / k.cp * job.model.hidden * element;
    const CommKey base{k.tp, 1, 1, 1, Group::kTensor, CollectiveOp::kAllReduce, activation, false};
    TpTimes sync;
    if (k.tp > 1) {
      auto with = [&](CollectiveOp op) {
        CommKey c = base;
        c.op = op;
        return comm_time(c);
      };
      sync.reduce = with(k.sp ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce);
      sync.gather = k.sp ? with(CollectiveOp::kAllGather) : 0.0;
      {
        CommKey c = base;
        c.size = vocab_parallel_loss_bytes(k.mb, job.model.seq_len, k.cp).raw();
        sync.loss = comm_time(c);
      }
      if (k.sp && job.parallel.tp_comm_overlap) {
        CommKey c = base;
        c.op = CollectiveOp::kReduceScatter;
        c.size = activation * (k.tp - 1) / k.tp;
        sync.reduce_body = comm_time(c);
        c.size = activation / k.tp;
        sync.reduce_tail = comm_time(c);
      }
    }
    // The ring and EP groups of rank 0 depend on the layout through (tp, cp, ep) and, unless pp is the
    // outermost dimension, pp (k.pp; with pp outermost, pp = 1 and dp = N/(tp·cp) place them as the first
    // stage of the real layout does). The messages: ring_kv_bytes, and moe_alltoall_bytes at load 1 times
    // the busiest receiver's load, as the graph sizes them.
    static const std::vector<double> kNoRing;
    const std::vector<double>& ring = k.cp > 1 ? ring_edges(CommKey{k.tp, k.pp, k.cp, 1, Group::kRing,
                                                                   CollectiveOp::kSendRecv,
                                                                   ring_kv_bytes(job.model, oc).raw(), false})
                                               : kNoRing;
    MoeComm moe;
    if (k.ep > 1 && job.model.is_moe()) {
      moe.a2a = comm_time(CommKey{k.tp, k.pp, k.cp, k.ep, Group::kExpert, CollectiveOp::kAllToAll,
                                  moe_alltoall_bytes(job.model, oc, k.load).raw(), false});
      if (k.tp > 1) {  // the TP group's all-gather and reduce-scatter of the routed tokens
        CommKey c = base;
        c.size = moe_tp_gather_bytes(job.model, oc, k.load).raw();
        c.op = CollectiveOp::kAllGather;
        moe.gather = comm_time(c);
        c.op = CollectiveOp::kReduceScatter;
        moe.scatter = comm_time(c);
      }
    }
    // Rings of unequal edges desynchronise their members from layer to layer: run the chunk's layers.
    const bool uneven = ring.size() > 1;
    const std::uint32_t reps = uneven && repeat ? std::max(1u, k.ring_layers) : 1u;
    run_ops(fwd, false, k, sync, ring, moe, split, want_embedding, s, reps);
    run_ops(bwd, true, k, sync, ring, moe, split, want_embedding, s, reps, reps > 1);
    return s;
  }

  const Segments& segments_of(const OpsKey& k) {
    if (const auto it = segments.find(k); it != segments.end()) return it->second;
    OpConfig oc;
    oc.micro_batch = k.mb;
    oc.precision = prec;
    oc.tp = k.tp;
    oc.cp = k.cp;
    oc.ep = k.ep;
    oc.sequence_parallel = k.sp;
    oc.recompute = k.rc;
    oc.attention = k.attention;
    oc.flash_kernel = job.parallel.flash_kernel;
    oc.eager = k.eager;
    oc.autocast = k.autocast;
    if (k.ring_layers > 0) {  // a ring of equal edges needs no repeated layers: share the single-layer costs
      const std::vector<double>& ring = ring_edges(CommKey{k.tp, k.pp, k.cp, 1, Group::kRing, CollectiveOp::kSendRecv,
                                                           ring_kv_bytes(job.model, oc).raw(), false});
      if (ring.size() <= 1) {
        OpsKey single = k;
        single.ring_layers = 0;
        Segments copy = segments_of(single);
        return segments.emplace(k, std::move(copy)).first->second;
      }
    }
    OpConfig layer = oc;  // the ops of the rank holding the busiest expert (its load sets the EP group's pace)
    layer.expert_load = k.load;
    layer.embedding = false;
    layer.head = false;
    layer.layer_count = 1;
    Segments out;
    layer.first_layer = first_dense;
    if (moe_prefix.back() < job.model.layers)
      out.dense = summarize(forward_ops(job.model, layer), backward_ops(job.model, layer), k, oc, false, false, true);
    if (moe_prefix.back() > 0) {
      layer.first_layer = first_moe;
      out.moe = summarize(forward_ops(job.model, layer), backward_ops(job.model, layer), k, oc, false, false, true);
    }
    layer.first_layer = job.model.layers;  // no layers: the embedding and the head alone
    layer.layer_count = 0;
    layer.embedding = true;
    layer.head = true;
    {
      const std::vector<Op> f = forward_ops(job.model, layer), b = backward_ops(job.model, layer);
      out.embedding = summarize(f, b, k, oc, true, true);
      out.head_with_embedding = summarize(f, b, k, oc, false, true);
    }
    layer.embedding = false;
    out.head = summarize(forward_ops(job.model, layer), backward_ops(job.model, layer), k, oc, false, false);
    count_host_kernels(out, k, oc);
    return segments.emplace(k, std::move(out)).first->second;
  }

  // The host side of each segment as the graph issues it (host_dispatch.h): per op its kernels, per TP
  // collective (two with sequence parallelism) and all-to-all one more; the GPU time of each op, and of each
  // collective its share of the segment's TP or EP time. Ring-attention transfers are not counted.
  void count_host_kernels(Segments& out, const OpsKey& k, const OpConfig& oc) {
    const double cost = job.training.host_dispatch_per_kernel.raw();
    if (cost <= 0) return;
    // part: 0 every op, 1 the embedding's only, 2 all but the embedding's.
    auto segment = [&](const std::vector<Op>& ops, int part, double tp_time, double ep_time) {
      std::vector<double> host, gpu;
      std::vector<std::size_t> tp_at, ep_at;
      for (const Op& op : ops) {
        const bool embedding = op.name.starts_with("embed.");
        if ((part == 1 && !embedding) || (part == 2 && embedding)) continue;
        host.push_back(op.kernels * cost);
        gpu.push_back(op_seconds(op));
        // With sequence parallelism a column-parallel data gradient also issues its input's all-gather.
        // Under tp_comm_overlap a row-parallel GEMM's reduce-scatter is issued as two collectives (its last chunk
        // apart); the cross-entropy issues 3 all-reduces.
        const bool column = column_parallel_dgrad(op.name, k.ep);
        const int regather = k.sp && column ? 1 : 0;
        const int split = k.sp && job.parallel.tp_comm_overlap && tp_reduce_pipelined(op.name, k.ep) ? 1 : 0;
        if (k.tp > 1 && tp_sync_after(op.name, k.ep))
          for (int c = 0; c < (k.sp ? 2 : 1) + regather + split; ++c)
            tp_at.push_back(host.size()), host.push_back(kCollectiveKernels * cost), gpu.push_back(0);
        if (k.tp > 1 && op.name == "loss.fwd")
          for (int c = 0; c < 3; ++c)
            tp_at.push_back(host.size()), host.push_back(kCollectiveKernels * cost), gpu.push_back(0);
        if (k.tp > 1 && k.ep > 1 && job.model.is_moe() && expert_tp_sync_after(op.name) != ExpertTpSync::kNone)
          tp_at.push_back(host.size()), host.push_back(kCollectiveKernels * cost), gpu.push_back(0);
        if (k.ep > 1 && job.model.is_moe() && ep_sync_after(op.name))
          ep_at.push_back(host.size()), host.push_back(kCollectiveKernels * cost), gpu.push_back(0);
      }
      for (std::size_t i : tp_at) gpu[i] = tp_time / double(tp_at.size());
      for (std::size_t i : ep_at) gpu[i] = ep_time / double(ep_at.size());
      HostSegment h;
      for (std::size_t i = 0; i < host.size(); ++i) h.host += host[i], h.gpu += gpu[i];
      h.excursion = host_excursion(host, gpu);
      return h;
    };
    OpConfig layer = oc;
    layer.expert_load = k.load;
    layer.embedding = false;
    layer.head = false;
    layer.layer_count = 1;
    auto set = [&](Segment& seg, const OpConfig& c, int part) {
      seg.fwd_host = segment(forward_ops(job.model, c), part, seg.fwd_tp, seg.fwd_ep);
      seg.bwd_host = segment(backward_ops(job.model, c), part, seg.bwd_tp, seg.bwd_ep);
      // The segment's GPU time as the graph runs it (ring transfers and waits included).
      seg.fwd_host.gpu = seg.fwd(), seg.bwd_host.gpu = seg.bwd();
    };
    layer.first_layer = first_dense;
    if (moe_prefix.back() < job.model.layers) set(out.dense, layer, 0);
    layer.first_layer = first_moe;
    if (moe_prefix.back() > 0) set(out.moe, layer, 0);
    layer.first_layer = job.model.layers;
    layer.layer_count = 0;
    layer.embedding = true;
    layer.head = true;
    set(out.embedding, layer, 1);
    set(out.head_with_embedding, layer, 2);
    layer.embedding = false;
    set(out.head, layer, 0);
  }

  double model_flops_of(std::uint32_t mb) {
    if (const auto it = model_flops_by_mb.find(mb); it != model_flops_by_mb.end()) return it->second;
    const double f =
        model_flops(job.model, mb,
                    routed_fraction_computed(job.model, job.parallel.moe_capacity_factor, job.parallel.moe_token_skew))
            .raw();
    model_flops_by_mb.emplace(mb, f);
    return f;
  }

  // The backward of one chunk as a sequence of segments (head, layers last to first, embedding), for the
  // buckets of overlap_grad_reduce.
  struct ChunkView {
    const Segment* head = nullptr;
    std::uint32_t first_layer = 0, layers = 0;
    const Segment* embedding = nullptr;
  };
  struct Flush {
    std::size_t op;       // the gradient-producing op that completes the bucket, counted through the chunk
    std::size_t segment;  // its segment, counted in the backward's order (chunk_segments)
    double ready, size;   // when it is complete (from the backward's start + `start`); gradient bytes
    bool experts;
  };
  std::vector<Flush> flushes;  // scratch

  std::vector<const Segment*> walk_;  // scratch of chunk_segments

  // The chunk's segments in the backward's order: head, layers last to first, embedding (valid until the
  // next call).
  const std::vector<const Segment*>& chunk_segments(const ChunkView& cv, const Segments& segs) {
    walk_.clear();
    if (cv.head) walk_.push_back(cv.head);
    for (std::uint32_t l = cv.first_layer + cv.layers; l-- > cv.first_layer;)
      walk_.push_back(job.model.is_moe_layer(l) ? &segs.moe : &segs.dense);
    if (cv.embedding) walk_.push_back(cv.embedding);
    return walk_;
  }

  // Fills `flushes` with the DDP-sized buckets of a chunk's last backward (starting at `start`), in the order
  // they become ready: gradients fill a bucket until it holds `cap` bytes (`first_cap` the first). With
  // `split` (expert parallelism) the dense and the expert gradients fill their own buckets
  // (megatron_graph.cpp gradient_buckets). `per_param` > 0 (PyTorch DDP): the compute stream spends that long per
  // parameter after the op producing its gradient (the gradient's cast, accumulation and copy into its bucket,
  // all proportional to the parameters), so a gradient is ready that much later for each parameter produced
  // up to it.
  void form_buckets(const std::vector<const Segment*>& walk, double start, double grad_bytes, double first_cap,
                    double cap, bool split, double per_param = 0) {
    struct Acc {
      double size = 0, ready = 0;
      std::size_t op = 0, segment = 0;
      bool first = true;
    } acc[2];
    flushes.clear();
    double offset = start, produced = 0;
    std::size_t index = 0;
    for (std::size_t k = 0; k < walk.size(); ++k) {
      const Segment& s = *walk[k];
      for (std::size_t i = 0; i < s.grad_end.size(); ++i, ++index) {
        Acc& a = acc[split && s.grad_expert[i] ? 1 : 0];
        a.size += grad_bytes * s.grad_params[i];
        produced += s.grad_params[i];
        a.ready = offset + s.grad_end[i] + per_param * produced;
        a.op = index;
        a.segment = k;
        if (a.size >= (a.first ? first_cap : cap)) {
          flushes.push_back({index, k, a.ready, a.size, &a == &acc[1]});
          a.size = 0;
          a.first = false;
        }
      }
      offset += s.bwd();
    }
    for (int kind = 0; kind < 2; ++kind)
      if (acc[kind].size > 0)
        flushes.push_back({acc[kind].op, acc[kind].segment, acc[kind].ready, acc[kind].size, kind == 1});
    std::stable_sort(flushes.begin(), flushes.end(), [](const Flush& a, const Flush& b) { return a.op < b.op; });
  }

  // Runs the buckets of a chunk's last backward (starting at `start`, form_buckets) on a comm stream free at
  // `free`, in the order they become ready; returns when the stream is free again. `per_param`: compute-stream
  // time per parameter whose gradient is produced, before the framework sees it (form_buckets).
  double overlapped_buckets(const ChunkView& cv, const Segments& segs, double start, double free, double grad_bytes,
                            double first_cap, double cap, const ParallelPlan& p, CollectiveOp op, bool split,
                            double per_param = 0) {
    form_buckets(chunk_segments(cv, segs), start, grad_bytes, first_cap, cap, split, per_param);
    for (const Flush& f : flushes)
      free = std::max(free, f.ready) + comm_time(p, f.experts ? Group::kExpertData : Group::kData, op, f.size);
    return free;
  }

  // overlap_param_gather (megatron_graph.cpp): the chunk's parameter all-gathers, one per gradient bucket
  // (form_buckets; `element` bytes per gathered parameter), run back to back on the DP stream from `free`
  // (where the chunk's previous all-gathers ended; updated) in forward order, while the chunk's first forward
  // starts at `forward_start`; each bucket's first reader — the forward op of the gradient that completed it —
  // waits for its all-gather. Returns how long the forward waits in all, max over buckets of
  //     (end of its all-gather) − (forward_start + the chunk's forward time before its first reader),
  // the reader taken at the start of its segment.
  double param_gather_wait(const ChunkView& cv, const Segments& segs, double forward_start, double& free,
                           double grad_bytes, double first_cap, double cap, const ParallelPlan& p, bool split) {
    const std::vector<const Segment*>& walk = chunk_segments(cv, segs);
    std::vector<double> before(walk.size());  // forward time before each segment (the forward runs them reversed)
    double f = 0;
    for (std::size_t k = walk.size(); k-- > 0;) {
      before[k] = f;
      f += walk[k]->fwd();
    }
    form_buckets(walk, 0, grad_bytes, first_cap, cap, split);
    std::stable_sort(flushes.begin(), flushes.end(),
                     [](const Flush& a, const Flush& b) { return a.segment > b.segment; });  // forward order
    double wait = 0;
    for (const Flush& b : flushes) {
      free += comm_time(p, b.experts ? Group::kExpertData : Group::kData, CollectiveOp::kAllGather,
                        b.size / grad_bytes * element);
      wait = std::max(wait, free - (forward_start + before[b.segment]));
    }
    return wait;
  }

  MemoryEstimate memory_of(const ParallelPlan& p, std::uint32_t stage) const {
    const MemoryConfig mc = megatron_memory_config(job.model, p, job.training, stage);
    return estimate_memory(job.model, mc, sc.profile.gpu.memory_capacity);
  }

  const ZeroUnits& zero_units_of(const ParallelPlan& p);
  AnalyticalEstimate estimate(const ParallelPlan& p);
  AnalyticalEstimate estimate_zero(const ParallelPlan& p);
  // The data loader's bound on the step (input_pipeline.h), when the scenario sets a loader rate; 0 otherwise.
  // `first` and `later`: how long micro-batch 0 and each later one keep the busiest stage busy.
  double loader_bound(const ParallelPlan& p, double iteration, double first, double later) const;
  void finish(AnalyticalEstimate& out, const ParallelPlan& p, double iteration, double first, double later);
};

AnalyticalEstimate AnalyticalEstimator::Impl::estimate(const ParallelPlan& plan) {
  assert(plan.gpus() == job.gpus.size() && "the layout uses the job's GPUs");
  const Framework framework = plan.effective_framework();
  assert(framework != Framework::kDataParallel && framework != Framework::kHorovod &&
         "the analytical path covers Megatron, DDP, FSDP and DeepSpeed");
  if (framework == Framework::kFsdp || framework == Framework::kDeepSpeed) return estimate_zero(plan);
  const bool megatron = framework == Framework::kMegatron;
  const std::uint32_t t = plan.tp, p = plan.pp, v = std::max(1u, plan.vp), m = plan.grad_accum, d = plan.dp;
  const std::uint32_t cp = plan.cp, ep = plan.ep;
  const std::uint32_t pv = p * v, lpc = job.model.layers / pv;
  const bool moe = job.model.is_moe();
  const double load =
      moe ? expert_load(job.model, ep, plan.moe_capacity_factor, plan.moe_token_skew).busiest_rank : 1.0;
  // The groups of the ring and the all-to-alls depend on pp only when pp is not the outermost dimension.
  const bool pp_outer = job.parallel.rank_order.ends_with("pp");
  const bool grouped = megatron && (cp > 1 || ep > 1);
  const OpsKey key{t,
                   plan.micro_batch,
                   megatron ? cp : 1u,
                   megatron ? ep : 1u,
                   grouped && !pp_outer ? p : 1u,
                   plan.sequence_parallel,
                   megatron ? plan.recompute : Recompute::kNone,
                   plan.attention,  // DDP too: F.scaled_dot_product_attention's fused kernel
                   megatron ? load : 1.0,
                   megatron && cp > 1 ? lpc : 0u,
                   !megatron,  // DDP: the eager ops (eager_forward_ops), as ddp_graph.cpp
                   !megatron && eager_autocast(prec)};
  const Segments& segs = segments_of(key);
  const double activation = double(plan.micro_batch) * job.model.seq_len / cp * job.model.hidden * element;

  // Per virtual stage and micro-batch: forward and backward time (compute, TP, CP and EP parts) and parameters.
  struct Chunk {
    double f = 0, b = 0, compute = 0, tp = 0, cp = 0, ep = 0, params = 0, expert_params = 0;
    double hf = 0, hb = 0;  // host dispatch time of the forward and the backward step
  };
  const double host = job.training.host_dispatch_per_kernel.raw();
  std::vector<Chunk> chunk(pv);
  const double gather = (megatron && plan.pp_scatter_gather && p > 1)
                            ? comm_time(plan, Group::kTensor, CollectiveOp::kAllGather, activation)
                            : 0.0;
  for (std::uint32_t vs = 0; vs < pv; ++vs) {
    const std::uint32_t first = vs * lpc;
    const double n_moe = moe_prefix[first + lpc] - moe_prefix[first], n_dense = lpc - n_moe;
    Chunk& c = chunk[vs];
    auto add = [&](const Segment& s, double k) {
      c.f += k * s.fwd();
      c.b += k * s.bwd();
      c.hf += k * s.fwd_host.host;
      c.hb += k * s.bwd_host.host;
      c.compute += k * (s.fwd_compute + s.bwd_compute);
      c.tp += k * (s.fwd_tp + s.bwd_tp);
      c.cp += k * (s.fwd_cp + s.bwd_cp);
      c.ep += k * (s.fwd_ep + s.bwd_ep);
      c.params += k * s.params;
      c.expert_params += k * s.expert_params;
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
  // Host dispatch (host_dispatch.h): host issuing and GPU running in series over stretches between
  // synchronisations (host_gpu_segments). With a pipeline the host synchronises on each receive (below); without
  // one it runs ahead over all micro-batches (the p = 1 case further down).
  double host_exposed = 0;
  // The chunk's segments in issue order, forward (embedding, layers, head) and backward (reversed).
  auto host_segments = [&](std::uint32_t vs, bool forward) {
    std::vector<const Segment*> order;
    if (vs == 0) order.push_back(&segs.embedding);
    for (std::uint32_t l = vs * lpc; l < (vs + 1) * lpc; ++l)
      order.push_back(moe_prefix[l + 1] > moe_prefix[l] ? &segs.moe : &segs.dense);
    if (vs + 1 == pv) order.push_back(vs == 0 ? &segs.head_with_embedding : &segs.head);
    if (!forward) std::reverse(order.begin(), order.end());
    std::vector<HostSegment> out;
    for (const Segment* sg : order) out.push_back(forward ? sg->fwd_host : sg->bwd_host);
    return out;
  };
  if (host > 0 && p > 1)
    for (std::uint32_t vs = 0; vs < pv; ++vs) {
      Chunk& c = chunk[vs];
      // A step that receives starts a stretch (the host synchronised on the receive; a scatter/gather all-gather
      // runs first). One that does not — the first virtual stage's forward, the last one's backward — continues
      // the stretch of the step before it in 1F1B's steady state (backward then forward on the first stage,
      // forward then backward on the last): it takes what it adds to that stretch.
      const std::vector<HostSegment> fs = host_segments(vs, true), bs = host_segments(vs, false);
      auto joined = [](std::vector<HostSegment> a, const std::vector<HostSegment>& b) {
        a.insert(a.end(), b.begin(), b.end());
        return host_gpu_segments(a);
      };
      double f = gather + host_gpu_segments(fs), b = gather + host_gpu_segments(bs);
      if (vs == 0) f = joined(bs, fs) - host_gpu_segments(bs);
      if (vs + 1 == pv) b = joined(fs, bs) - host_gpu_segments(fs);
      c.hf = std::max(0.0, f - c.f), c.hb = std::max(0.0, b - c.b);  // from here on: the GPU's wait for the host
      c.f = std::max(c.f, f), c.b = std::max(c.b, b);
    }
  struct Stage {
    double time = 0, compute = 0, tp = 0, cp = 0, ep = 0, params = 0, expert_params = 0;
    double host = 0;  // p = 1: host dispatch time per micro-batch; p > 1: the GPU's wait for it per micro-batch
  };
  std::vector<Stage> stage(p);
  double sum_f = 0, sum_b = 0, max_f = 0, max_b = 0;
  for (std::uint32_t s = 0; s < p; ++s) {
    double f = 0, b = 0;
    Stage& st = stage[s];
    for (std::uint32_t c = 0; c < v; ++c) {
      const Chunk& ch = chunk[c * p + s];
      f += ch.f;
      b += ch.b;
      st.compute += ch.compute;
      st.tp += ch.tp;
      st.cp += ch.cp;
      st.ep += ch.ep;
      st.params += ch.params;
      st.expert_params += ch.expert_params;
      st.host += ch.hf + ch.hb;
    }
    st.time = f + b;
    sum_f += f, sum_b += b;
    max_f = std::max(max_f, f), max_b = std::max(max_b, b);
  }

  // Pipeline: when stage 0 ends its last backward, and the sends on the critical path.
  const double pp_message = (plan.sequence_parallel || plan.pp_scatter_gather) ? activation / t : activation;
  // sends[b]: a send across the boundary from stage b to stage b + 1 (b = p − 1: the last stage to the first, which
  // interleaving crosses between chunks), each boundary on its own links: inside a node NVLink, between nodes the
  // NICs. The critical paths below cross each boundary they pass with its own send.
  const std::vector<double>& sends = pipeline_sends(plan, pp_message);
  const double send_max = p > 1 ? *std::max_element(sends.begin(), sends.end()) : 0.0;
  double cross = 0;  // Σ of the sends from stage 0 to stage p − 1: a micro-batch's way through the pipeline
  for (std::uint32_t b = 0; b + 1 < p; ++b) cross += sends[b];
  double pipeline = 0, pp_exposed = 0;
  const double sum_t = sum_f + sum_b;
  double t_max = 0;
  for (const Stage& st : stage) t_max = std::max(t_max, st.time);
  double host_issued = 0;  // p = 1 with host dispatch: when the host has issued the last backward (it runs ahead)
  if (p == 1) {
    pipeline = m * stage[0].time;
    if (host > 0) {
      // No synchronisation: the host runs ahead over all m micro-batches, forward then backward each.
      // PyTorch DDP's eager kernels (eager_costs) as two more segments: the weight casts after the embedding,
      // the gradients' epilogues after the backward (the graph runs each after its op; one segment each here),
      // the micro-batches' average (the first has no accumulation), so that m passes add up to the step's.
      auto single = [](double host_s, double gpu_s) {
        HostSegment sg;
        sg.host = host_s, sg.gpu = gpu_s;
        const double h[] = {host_s}, g[] = {gpu_s};
        sg.excursion = host_excursion(h, g);
        return sg;
      };
      // And the last backward's copy of each bucket and the launch of its AllReduce (one kernel each), spread
      // over the m passes alike.
      std::vector<HostSegment> pass;
      double eager_gpu = 0;  // the eager kernels' GPU time, which joins the step below (`eager`, `ddp_copy`)
      for (std::uint32_t vs = 0; vs < pv; ++vs)
        for (bool forward : {true, false}) {
          std::vector<HostSegment> list = host_segments(vs, forward);
          if (!megatron && vs == 0) {
            const EagerCosts& e = eager_costs(plan.micro_batch);
            if (forward && e.weight_cast_kernels > 0 && !list.empty())
              list.insert(list.begin() + 1, single(e.weight_cast_kernels * host, e.weight_cast));
            double kernels = (e.epilogue_first_kernels + (m - 1.0) * e.epilogue_later_kernels) / m;
            double gpu = (e.epilogue_first + (m - 1.0) * e.epilogue_later) / m;
            if (d > 1) {
              kernels += double(ddp_bucket_count(plan.ddp_bucket)) * (1 + kCollectiveKernels) / m;
              gpu += ddp_copy_seconds() / m;
            }
            if (!forward && kernels > 0) list.push_back(single(kernels * host, gpu));
            if (!forward) eager_gpu = m * (e.weight_cast + gpu);
          }
          for (const HostSegment& sg : list) pass.push_back(sg);
        }
      for (const HostSegment& sg : pass) host_issued += m * sg.host;
      const double hosted = std::max(pipeline + eager_gpu, host_gpu_segments(pass, m));
      host_exposed = hosted - pipeline - eager_gpu;
      pipeline = hosted - eager_gpu;
    }
  } else if (plan.schedule == PipelineSchedule::kGPipe) {
    pipeline = sum_t + (m - 1) * (std::max(max_f, send_max) + std::max(max_b, send_max)) + 2.0 * cross;
    pp_exposed = 2.0 * cross + (m - 1) * (std::max(0.0, send_max - max_f) + std::max(0.0, send_max - max_b));
  } else if (v == 1) {
    const double t_last = stage[p - 1].time;
    double loop = 0;
    for (std::uint32_t s = 0; s + 1 < p; ++s) loop = std::max(loop, stage[s].time + 2 * sends[s]);
    const double period = std::max(t_max, loop);
    const double waits = m >= 2 ? (m - 2.0) * (period - t_last) : 0.0;
    pipeline = sum_t + 2.0 * cross + (m - 1.0) * t_last + waits;
    pp_exposed = 2.0 * cross + std::max(0.0, waits - (m >= 2 ? (m - 2.0) * (t_max - t_last) : 0.0));
  } else {
    // Interleaved: the stage's m·v chunk steps plus a bubble of (p − 1)/v stage times; the first
    // micro-batch's forward and the last one's backward cross every virtual-stage boundary with a send.
    double crossings = 0;  // the pv − 1 virtual-stage boundaries: stage vs mod p to the next
    for (std::uint32_t vs = 0; vs + 1 < pv; ++vs) crossings += sends[vs % p];
    pipeline = m * t_max + (sum_t - t_max) / v + 2.0 * crossings;
    pp_exposed = 2.0 * crossings;
  }
  // Stage s ends its last backward the drain below it earlier (chunk 0's backward and a send per stage).
  std::vector<double> end(p, pipeline);
  for (std::uint32_t s = 1; s < p; ++s) end[s] = end[s - 1] - chunk[s - 1].b - sends[s - 1];

  // Data parallelism (dense gradients over dp·cp ranks, expert gradients over (dp/ep)·cp), tied embeddings,
  // optimizer.
  const bool half = sixteen_bit(prec);
  const double grad_bytes =
      megatron ? (job.training.gradients == GradientDtype::kFp32 ? 4.0 : element) : ddp_gradient_bytes(prec).raw();
  const bool distributed = megatron && plan.distributed_optimizer;
  const CollectiveOp grad_op = distributed ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
  const bool overlap = !megatron || plan.overlap_grad_reduce;
  const bool split = megatron && ep > 1 && moe;
  const double dense_ranks = double(d) * cp, expert_ranks = double(d) / ep * cp;
  // A virtual stage's layers, head and embedding, as overlapped_buckets and param_gather_wait walk them.
  auto chunk_view = [&](std::uint32_t vs) {
    ChunkView cv;
    cv.first_layer = vs * lpc;
    cv.layers = lpc;
    if (vs + 1 == pv) cv.head = vs == 0 ? &segs.head_with_embedding : &segs.head;
    if (vs == 0) cv.embedding = &segs.embedding;
    return cv;
  };
  // Bucket caps: Megatron's own rule (megatron_graph.h), PyTorch DDP's 1 MiB first bucket and bucket_cap_mb.
  const double bucket_bytes = megatron ? megatron_bucket_bytes(plan, grad_bytes).raw() : plan.ddp_bucket.raw();
  const double first_bucket_bytes = megatron ? bucket_bytes : kFirstBucketCap.raw();
  // The gradient reductions of one chunk done in one call per kind (without overlap).
  auto reduce_whole = [&](const Chunk& ch, CollectiveOp op, double per_param) {
    if (!split) return comm_time(plan, Group::kData, op, ch.params * per_param);
    return comm_time(plan, Group::kData, op, (ch.params - ch.expert_params) * per_param) +
           (ch.expert_params > 0 ? comm_time(plan, Group::kExpertData, op, ch.expert_params * per_param) : 0.0);
  };
  // PyTorch DDP copies each bucket's gradients into it during the backward (on the compute stream) and all of
  // them back after the last AllReduce (ddp_graph.h): timed here as one copy of the step's gradients each way,
  // the first lengthening the backward, the second before the optimizer.
  const double ddp_copy = !megatron && dense_ranks > 1 ? ddp_copy_seconds() : 0.0;
  // And its eager mixed precision and gradient accumulation (ddp_graph.h): every micro-batch's weight casts and
  // gradient casts, every later micro-batch's accumulation. `tail`: the part inside the last backward (its
  // gradient epilogues and bucket copies), spread over its gradients by parameter count (form_buckets).
  double eager = 0, tail = 0;
  double first_micro_batch = max_f + max_b, later_micro_batch = max_f + max_b;
  if (!megatron) {
    const EagerCosts& e = eager_costs(plan.micro_batch);
    first_micro_batch += e.weight_cast + e.epilogue_first;
    later_micro_batch += e.weight_cast + e.epilogue_later;
    eager = m * e.weight_cast + e.epilogue_first + (m - 1.0) * e.epilogue_later;
    tail = (m > 1 ? e.epilogue_later : e.epilogue_first) + ddp_copy;
  }
  if (ddp_copy + eager > 0)
    for (double& e : end) e += ddp_copy + eager;
  const double tail_per_param = tail > 0 ? tail / job.model.parameter_count() : 0.0;
  std::vector<double> dp_done(end);
  if (dense_ranks > 1 || (split && expert_ranks > 1)) {
    for (std::uint32_t s = 0; s < p; ++s) {
      double free = end[s];
      if (overlap) {
        free = 0;
        for (std::uint32_t c = v; c-- > 0;) {
          const std::uint32_t vs = c * p + s;
          const ChunkView cv = chunk_view(vs);
          // Chunk c's last backward runs c groups of p backward steps before chunk 0's (interleaved cooldown).
          const double chunk_end = end[s] - c * p * chunk[vs].b;
          free = overlapped_buckets(cv, segs, chunk_end - chunk[vs].b - tail, free, grad_bytes, first_bucket_bytes,
                                    bucket_bytes, plan, grad_op, split, tail_per_param);
        }
        free = std::max(free, end[s]);
      } else {
        for (std::uint32_t c = v; c-- > 0;) free += reduce_whole(chunk[c * p + s], grad_op, grad_bytes);
      }
      dp_done[s] = free;
    }
  }
  std::vector<double> opt_start(p);
  for (std::uint32_t s = 0; s < p; ++s) opt_start[s] = std::max(end[s], dp_done[s]) + ddp_copy;
  // DDP with host dispatch: after the backward the host issues the copy back out of the buckets (one kernel per
  // bucket) and the optimizer's kernels, from when it has issued the backward (it runs ahead of a GPU-bound step,
  // and is done with the backward when the GPU is in a host-bound one); the optimizer starts once they are issued.
  if (!megatron && host > 0) {
    const double buckets = dense_ranks > 1 ? double(ddp_bucket_count(plan.ddp_bucket)) : 0.0;
    const Op unscale = grad_unscale_op(job.model.parameter_count(), prec);
    const double kernels =
        buckets + optimizer_op(job.model.parameter_count(), job.training.optimizer, grad_bytes, false).kernels +
        (unscale.bytes.raw() > 0 ? unscale.kernels : 0);
    for (std::uint32_t s = 0; s < p; ++s) opt_start[s] = std::max(opt_start[s], host_issued + kernels * host);
  }
  if (megatron && p > 1 && job.model.tied_embeddings) {
    const double size = double(job.model.vocab) * job.model.hidden / t * grad_bytes;
    const double done = std::max(opt_start[0], opt_start[p - 1]) +
                        comm_time(plan, Group::kEmbedding, CollectiveOp::kAllReduce, size);
    opt_start[0] = opt_start[p - 1] = done;
  }
  // overlap_param_gather: no all-gathers after the step; instead the first micro-batch's forward waits for
  // them. Without a pipeline they start with it; with one (aligned) every stage starts them with the step,
  // and stage s's first forward starts once the pipeline has filled to it, s · (forward + send) later
  // (chunk c of an interleaved stage after the warm-up's c·p forwards of the chunks before it). A wait
  // delays everything after it; the step takes the largest wait of any stage longer.
  const bool gather_overlap = distributed && plan.overlap_param_gather;
  double gather_wait = 0;
  if (gather_overlap && (dense_ranks > 1 || (split && expert_ranks > 1))) {
    double fill = 0;
    for (std::uint32_t s = 0; s < p; ++s) {
      double free = 0;
      for (std::uint32_t c = 0; c < v; ++c) {
        const std::uint32_t vs = c * p + s;
        const double wait = param_gather_wait(chunk_view(vs), segs, fill + c * p * chunk[vs].f, free, grad_bytes,
                                              first_bucket_bytes, bucket_bytes, plan, split);
        gather_wait = std::max(gather_wait, wait);
      }
      fill += chunk[s].f + (s + 1 < p ? sends[s] : 0.0);
    }
  }
  double iteration = 0, opt_last = 0, dp_last = 0;
  std::uint32_t last_stage = 0;
  for (std::uint32_t s = 0; s < p; ++s) {
    double opt;
    if (megatron) {
      const double dense = stage[s].params - stage[s].expert_params, experts = stage[s].expert_params;
      const double params = distributed ? dense / dense_ranks + experts / expert_ranks : stage[s].params;
      opt = op_seconds(optimizer_op(params, job.training.optimizer, grad_bytes, half));
    } else {
      opt = op_seconds(optimizer_op(job.model.parameter_count(), job.training.optimizer, grad_bytes, false));
      const Op unscale = grad_unscale_op(job.model.parameter_count(), prec);  // FP16 (ddp_graph.h)
      if (unscale.bytes.raw() > 0) opt += op_seconds(unscale);
    }
    double step_end = opt_start[s] + opt + gather_wait;
    if (distributed && !gather_overlap)
      for (std::uint32_t c = 0; c < v; ++c) step_end += reduce_whole(chunk[c * p + s], CollectiveOp::kAllGather, element);
    if (step_end > iteration) {
      iteration = step_end;
      last_stage = s;
      opt_last = opt;
      dp_last = step_end - opt - end[s] - ddp_copy;
    }
  }

  AnalyticalEstimate out;
  out.iteration_time = seconds(iteration);
  out.compute = seconds(m * stage[last_stage].compute + opt_last + 2 * ddp_copy + eager);
  out.tp_comm = seconds(m * stage[last_stage].tp);
  out.cp_comm = seconds(m * stage[last_stage].cp);
  out.ep_comm = seconds(m * stage[last_stage].ep);
  out.pp_comm = seconds(pp_exposed);
  out.dp_comm = seconds(dp_last);
  out.exposed_host = seconds(p > 1 ? m * stage[last_stage].host : host_exposed);
  finish(out, plan, iteration, first_micro_batch, later_micro_batch);

  // Memory of the most loaded stage.
  MemoryEstimate worst;
  if (megatron) {
    for (std::uint32_t s = 0; s < p; ++s) {
      if (!moe && s != 0 && s + 1 != p) continue;
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
  out.oom_part = worst.largest_part;
  return out;
}

// Throughput, MFU and the bubble as the remainder, once the iteration time and its parts are known.
double AnalyticalEstimator::Impl::loader_bound(const ParallelPlan& plan, double iteration, double first,
                                               double later) const {
  const TrainingJob& tr = job.training;
  const double copy = (micro_batch_input_bytes(job.model, plan.micro_batch) / tr.host_to_device).raw();
  const std::uint32_t m = plan.grad_accum;
  const double last_start = m > 1 ? first + (m - 2.0) * later : 0.0;
  if (tr.loader_samples_per_s_per_node <= 0) {
    // Without a loader rate the loader is never the bottleneck (no loader tasks), but each micro-batch is still
    // copied to its GPU before its first kernel: the copies run back to back from the step's start (micro-batch k
    // on the GPU at (k + 1)·copy), and micro-batch k starts once it is there and the one before it is done. The
    // replay below with every micro-batch made at the start, without its loader bookkeeping (sweep scoring calls
    // this for every layout).
    double start = 0;
    for (std::uint32_t k = 0; k < m; ++k)
      start = k == 0 ? copy : std::max(start + (k == 1 ? first : later), (k + 1.0) * copy);
    return start + (iteration - last_start);
  }
  // Readers per node: tensor rank 0 of the first and last stage of every replica and context rank under Megatron,
  // every rank otherwise (input_pipeline.h).
  const auto n = static_cast<std::uint32_t>(job.gpus.size());
  std::vector<std::uint32_t> readers;
  if (plan.effective_framework() == Framework::kMegatron) {
    const RankLayout layout(plan.tp, n / (plan.tp * plan.pp * plan.cp), plan.pp, job.parallel.rank_order, plan.cp,
                            plan.ep);
    readers = input_readers(layout, plan, plan.dp);
  } else {
    for (std::uint32_t r = 0; r < n; ++r) readers.push_back(r);
  }
  std::map<std::uint32_t, std::uint32_t> per_node;
  for (std::uint32_t r : readers) ++per_node[sc.cluster.node_of(job.gpus[r])];
  std::uint32_t most = 0;
  for (const auto& [node, count] : per_node) most = std::max(most, count);
  // One micro-batch's production on the busiest loader, and the copy of a micro-batch to its GPU.
  const double produce = double(most) * plan.micro_batch / tr.loader_samples_per_s_per_node;
  const std::uint32_t q = tr.loader_prefetch;
  // The graph's input tasks, replayed: the loader makes micro-batches q … m − 1 back to back from the step's
  // start (the first q are queued), each is copied to the GPU after it is made and after the copy before it,
  // and micro-batch k starts once it is on the GPU and the one before it is done (`first`, then `later` apart:
  // the busiest stage's forward and backward). Then the loader refills the next step's queue, entry j once its slot
  // is free (micro-batch m + j − q copied). The step ends after the last micro-batch's tail (the estimate's time
  // after its start, first + (m − 2)·later in) and after the refill. Exact for pp = 1; under a pipeline stage 0
  // starts its last forward no earlier, so the tail is at least this and the bound a lower one.
  std::vector<double> ready(m);
  double lane = 0, copied = 0, start = 0;
  for (std::uint32_t k = 0; k < m; ++k) {
    double made = 0;
    if (k >= q) made = lane += produce;
    ready[k] = copied = std::max(copied, made) + copy;
    start = k == 0 ? ready[0] : std::max(start + (k == 1 ? first : later), ready[k]);
  }
  for (std::uint32_t j = 0; j < std::min(q, m); ++j) {
    const double freed = m + j >= q ? ready[m + j - q] : 0.0;
    lane = std::max(lane, freed) + produce;
  }
  return std::max(start + (iteration - last_start), lane);
}

void AnalyticalEstimator::Impl::finish(AnalyticalEstimate& out, const ParallelPlan& plan, double iteration,
                                       double first, double later) {
  const double parts =
      (out.compute + out.tp_comm + out.cp_comm + out.ep_comm + out.dp_comm + out.exposed_host).raw() + out.pp_comm.raw();
  out.bubble = seconds(std::max(0.0, iteration - parts));
  const double loader = loader_bound(plan, iteration, first, later);
  if (loader > iteration) {
    out.input_stall = seconds(loader - iteration);
    iteration = loader;
    out.iteration_time = seconds(iteration);
  }
  const double samples = double(plan.micro_batch) * plan.grad_accum * plan.dp;
  out.tokens_per_s = samples * job.model.seq_len / iteration;
  out.mfu = model_flops_of(plan.micro_batch) * plan.grad_accum * plan.dp /
            (iteration * double(job.gpus.size()) * tensor_peak(sc.profile.gpu, prec).raw());
}

const ZeroUnits& AnalyticalEstimator::Impl::zero_units_of(const ParallelPlan& plan) {
  const ZeroKey key{plan.micro_batch, plan.recompute, plan.attention};
  if (const auto it = zero_units.find(key); it != zero_units.end()) return it->second;
  // The ops zero_graph.cpp runs (its zero_op_config): the whole model on one rank, one micro-batch, with the
  // plan's recomputation (activation checkpointing: each block's forward re-runs inside its unit, right
  // before its backward) and attention kernel.
  OpConfig oc;
  oc.micro_batch = plan.micro_batch;
  oc.precision = prec;
  oc.recompute = plan.recompute;
  oc.attention = plan.attention;
  oc.flash_kernel = plan.flash_kernel;
  oc.eager = true;
  const std::vector<Op> fwd = forward_ops(job.model, oc);
  const std::vector<Op> bwd = backward_ops(job.model, oc);
  ZeroUnits z;
  const std::uint32_t units = job.model.layers + 1;
  z.fwd.assign(units, 0.0);
  z.bwd.assign(units, 0.0);
  z.params.assign(units, 0.0);
  z.fwd_k.assign(units, 0.0);
  z.bwd_k.assign(units, 0.0);
  bool block_seen = false;
  for (const Op& op : fwd) {
    const std::uint32_t u = zero_unit_of(op.name);
    const double c = op_seconds(op);
    z.compute += c;
    if (u != 0) block_seen = true, z.fwd[u] += c, z.fwd_k[u] += op.kernels;
    else (block_seen ? z.root_fwd_back : z.root_fwd_front) += c, (block_seen ? z.root_fwd_back_k : z.root_fwd_front_k) += op.kernels;
    z.kernels += op.kernels;
  }
  block_seen = false;
  for (const Op& op : bwd) {
    const std::uint32_t u = zero_unit_of(op.name);
    const double c = op_seconds(op);
    z.compute += c;
    z.params[u] += op.grad_parameters;
    z.total_params += op.grad_parameters;
    if (u != 0) block_seen = true, z.bwd[u] += c, z.bwd_k[u] += op.kernels;
    else (block_seen ? z.root_bwd_embed : z.root_bwd_head) += c, (block_seen ? z.root_bwd_embed_k : z.root_bwd_head_k) += op.kernels;
    z.kernels += op.kernels;
  }
  return zero_units.emplace(key, std::move(z)).first->second;
}

AnalyticalEstimate AnalyticalEstimator::Impl::estimate_zero(const ParallelPlan& plan) {
  const ZeroUnits& z = zero_units_of(plan);
  const bool fsdp = plan.effective_framework() == Framework::kFsdp;
  const std::uint32_t stage = plan.zero_stage, m = plan.grad_accum;
  const bool gather_forward = stage == 3 || (fsdp && stage == 2);
  const bool gather_backward = stage == 3;
  const bool rate_limited = stage == 3;  // FULL_SHARD / ZeRO-3: two all-gathers ahead (zero_graph.cpp)
  const bool per_unit_reduce = stage == 3 || fsdp;
  const bool hybrid = plan.hybrid_shard;
  auto group_time = [&](Group g, CollectiveOp op, double size) {
    return comm_time(CommKey{1, 1, 1, 1, g, op, size, hybrid});
  };
  const double shard = double(group_ranks(CommKey{1, 1, 1, 1, Group::kShard, CollectiveOp::kAllGather, 0, hybrid}).size());
  const std::uint32_t units = job.model.layers + 1, blocks = job.model.layers;
  // Per unit: all-gather A_u and reduce-scatter R_u (+ the replicas' all-reduce of the shard when hybrid).
  std::vector<double> gather_time(units, 0.0), reduce_time(units, 0.0);
  for (std::uint32_t u = 0; u < units; ++u) {
    const double size = z.params[u] * element;
    if (gather_forward) gather_time[u] = group_time(Group::kShard, CollectiveOp::kAllGather, size);
    if (per_unit_reduce && z.params[u] > 0) {
      reduce_time[u] = group_time(Group::kShard, CollectiveOp::kReduceScatter, size);
      if (hybrid) reduce_time[u] += group_time(Group::kReplica, CollectiveOp::kAllReduce, size / shard);
    }
  }
  double iteration = 0;
  if (!gather_forward) {
    // DeepSpeed stages 1–2: the compute of m micro-batches, then 5e8-element buckets reduce-scattered (and
    // all-reduced across replicas; stage 2 after every micro-batch, on the compute stream), the optimizer, the
    // buckets all-gathered.
    constexpr double kBucketElements = 5e8;  // DeepSpeed's reduce_bucket_size and allgather_bucket_size
    double comm_before = 0, comm_after = 0;
    if (shard > 1)
      for (double left = z.total_params * element; left > 0; left -= kBucketElements * element) {
        const double size = std::min(left, kBucketElements * element);
        comm_before += group_time(Group::kShard, CollectiveOp::kReduceScatter, size);
        if (hybrid) comm_before += group_time(Group::kReplica, CollectiveOp::kAllReduce, size / shard);
        comm_after += group_time(Group::kShard, CollectiveOp::kAllGather, size);
      }
    iteration = host_gpu_stretch_bound(m * z.compute, m * z.kernels * job.training.host_dispatch_per_kernel.raw(),
                                       job.training.host_dispatch_per_kernel.raw(), 0) +
                (stage == 2 ? m : 1) * comm_before + comm_after;
  } else {
    // Streams: compute c, all-gather a, reduce-scatter r (see the header).
    // Host dispatch: the host cursor h issues each unit's kernels (and each collective); a unit's GPU work
    // ends at max(c + its time, h) (host_dispatch.h). With no host cost h stays 0 and c advances as before.
    const double host = job.training.host_dispatch_per_kernel.raw();
    const double issue_collective = shard > 1 ? host * kCollectiveKernels : 0.0;
    double c = 0, a = 0, r = 0, h = 0;
    auto run = [&](double gpu, double kernels) {
      h += kernels * host;
      c = std::max(c + gpu, h);
    };
    std::vector<double> fwd_end(units, 0.0), bwd_end(units, 0.0), gathered(units, 0.0), gathered_bwd(units, 0.0);
    double step[4] = {0, 0, 0, 0}, last_delta[4] = {-1, -1, -1, -1};
    for (std::uint32_t mb = 0; mb < m; ++mb) {
      const double before[4] = {c, a, r, h};
      // The previous micro-batch's reductions end before this one starts, and its all-gathers wait for the
      // compute stream (FSDP's post-backward final callback and _root_pre_forward; zero_graph.cpp).
      c = std::max(c, r);
      a = std::max(a, c);
      // Forward: the root and block 0 gathered first, block u waits for the forward of unit u − 2 (FULL_SHARD's
      // rate limiter; SHARD_GRAD_OP's all-gathers run back to back).
      a += gather_time[0];
      gathered[0] = a;
      h += issue_collective;
      if (blocks >= 1) a += gather_time[1], gathered[1] = a, h += issue_collective;
      c = std::max(c, gathered[0]);
      run(z.root_fwd_front, z.root_fwd_front_k);
      fwd_end[0] = c;
      for (std::uint32_t u = 1; u <= blocks; ++u) {
        if (u + 1 <= blocks) {
          a = (rate_limited ? std::max(a, fwd_end[u - 1]) : a) + gather_time[u + 1];
          gathered[u + 1] = a;
          h += issue_collective;
        }
        c = std::max(c, gathered[u]);
        run(z.fwd[u], z.fwd_k[u]);
        fwd_end[u] = c;
      }
      run(z.root_fwd_back, z.root_fwd_back_k);  // the root stays gathered
      const double last_fwd = c;
      // Backward: the head, the blocks in reverse (stage 3: each gathered again, one block ahead), the embedding;
      // each unit's gradients reduce-scattered when its backward ends.
      run(z.root_bwd_head, z.root_bwd_head_k);
      std::uint32_t next = 0;  // blocks gathered so far, in backward order
      for (std::uint32_t k = 0; k < blocks; ++k) {
        const std::uint32_t u = blocks - k;
        if (gather_backward) {
          for (; next < blocks && next <= k + 1; ++next) {
            const std::uint32_t g = blocks - next;
            a = std::max(a, next >= 2 ? bwd_end[g + 2] : last_fwd) + gather_time[g];
            gathered_bwd[g] = a;
            h += issue_collective;
          }
          c = std::max(c, gathered_bwd[u]);
        }
        run(z.bwd[u], z.bwd_k[u]);
        bwd_end[u] = c;
        if (reduce_time[u] > 0) r = std::max(r, c) + reduce_time[u], h += issue_collective;
      }
      run(z.root_bwd_embed, z.root_bwd_embed_k);
      if (reduce_time[0] > 0) r = std::max(r, c) + reduce_time[0], h += issue_collective;
      // Max-plus periodicity: once a micro-batch advances the streams exactly as the previous one did, every
      // further one does too.
      const double delta[4] = {c - before[0], a - before[1], r - before[2], h - before[3]};
      bool periodic = mb >= 1;
      for (int i = 0; i < 4; ++i) {
        periodic = periodic && std::abs(delta[i] - last_delta[i]) <= 1e-12 * std::max(1.0, std::abs(delta[i]));
        last_delta[i] = delta[i];
        step[i] = delta[i];
      }
      if (periodic && mb + 1 < m) {
        const double rest = double(m - mb - 1);
        c += rest * step[0], a += rest * step[1], r += rest * step[2], h += rest * step[3];
        break;
      }
    }
    iteration = std::max(c, r);
  }
  const double opt = op_seconds(optimizer_op(z.total_params / shard, job.training.optimizer, 4, false));
  iteration += opt;

  AnalyticalEstimate out;
  out.iteration_time = seconds(iteration);
  out.compute = seconds(m * z.compute + opt);
  out.dp_comm = seconds(std::max(0.0, iteration - out.compute.raw()));
  finish(out, plan, iteration, z.compute, z.compute);
  Job copy = job;
  copy.parallel = plan;
  const MemoryEstimate mem = estimate_zero_memory(sc, copy);
  out.peak_memory = mem.peak;
  out.memory_capacity = mem.capacity;
  out.oom = mem.oom;
  out.oom_part = mem.largest_part;
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
