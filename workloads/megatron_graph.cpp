#include "workloads/megatron_graph.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "sim/input_error.h"
#include "workloads/collective_engine.h"
#include "workloads/compute_model.h"
#include "workloads/input_pipeline.h"
#include "workloads/pipeline_schedule.h"
#include "workloads/transformer_ops.h"

namespace clustersim::workloads {
namespace {

bool ends_with(const std::string& s, const char* suffix) { return s.ends_with(suffix); }

// Which communicator a collective between two ops of a stage runs on, and of what size: the TP group with the
// activation (kTensor), the EP group's all-to-all (kExpert), or the TP group with the routed tokens an EP rank
// holds (kExpertTensor: moe_tp_gather_bytes).
enum class SyncComm { kTensor, kExpert, kExpertTensor };

// The ops of a virtual stage on one rank, in execution order, for one direction, and where the TP
// collectives and the MoE all-to-alls go.
struct StageOps {
  std::vector<Op> ops;
  struct Sync {
    std::size_t after;  // the collective follows op `after − 1`
    CollectiveOp op;
    SyncComm comm = SyncComm::kTensor;
    Bytes size{};  // 0: the TP sync's activation message
  };
  std::vector<Sync> syncs;
  double parameters = 0;         // this rank's parameters of the chunk
  double expert_parameters = 0;  // the part of them in routed experts
};

bool is_expert_op(const Op& op) { return op.name.find(".expert_fc") != std::string::npos; }

}  // namespace

bool tp_sync_after(const std::string& name, std::uint32_t ep) {
  // Megatron's g/f operators: after the row-parallel GEMMs forward (also recomputed), after the data gradients
  // of the column-parallel ones backward; of the attention, the dense MLP, the shared experts, and the routed
  // experts when they are a tensor-parallel MLP (ep 1). Also the vocabulary-parallel ends of the model: the
  // embedding's forward reduces its partial lookups (VocabParallelEmbedding: all-reduce, with sequence
  // parallelism reduce-scatter, then the all-gather before layer 0's QKV), and the output layer, a column-
  // parallel GEMM, reduces its input gradient after its data gradient (with sequence parallelism reduce-
  // scatter, then the all-gather before the last layer's fc2 data gradient).
  // The op's last two name parts, e.g. "expert_fc2.fwd" of "L3.expert_fc2.fwd" (no allocation: a hot path).
  const std::string_view n = name, last = n.substr(n.rfind('.', n.rfind('.') - 1) + 1);
  auto mlp = [&](std::string_view prefix) {
    if (!last.starts_with(prefix)) return false;
    const std::string_view op = last.substr(prefix.size());
    return op == "fc2.fwd" || op == "fc2.recompute" || op == "fc1.dgrad";
  };
  return last == "proj.fwd" || last == "proj.recompute" || last == "qkv.dgrad" || mlp("") || mlp("shared_") ||
         (ep == 1 && mlp("expert_")) || last == "embed.fwd" || last == "lm_head.dgrad";
}

Bytes vocab_parallel_loss_bytes(std::uint32_t micro_batch, std::uint32_t seq_len, std::uint32_t cp) {
  return bytes(4.0 * micro_batch * seq_len / std::max<std::uint32_t>(cp, 1));
}

bool ep_sync_after(const std::string& name) {
  return name.ends_with(".moe_dispatch.fwd") || name.ends_with(".moe_dispatch.recompute") ||
         name.ends_with(".expert_fc2.fwd") || name.ends_with(".expert_fc2.recompute") ||
         name.ends_with(".moe_combine.bwd") || name.ends_with(".expert_fc1.wgrad");
}

bool column_parallel_dgrad(const std::string& name, std::uint32_t ep) {
  return name.ends_with(".dgrad") && tp_sync_after(name, ep);
}

TpGatherConsumer tp_gather_consumer(const std::string& name, std::uint32_t ep) {
  const std::string_view n = name, last = n.substr(n.rfind('.', n.rfind('.') - 1) + 1);
  const std::string_view base = last.substr(0, last.find('.')), pass = last.substr(last.find('.') + 1);
  if (pass == "fwd" || pass == "recompute") {
    if (base == "qkv" || base == "fc1" || base == "shared_fc1" || (ep == 1 && base == "expert_fc1"))
      return TpGatherConsumer::kOverlapped;
    if (base == "lm_head") return TpGatherConsumer::kBlocking;
  } else if (pass == "dgrad") {
    if (base == "proj" || base == "fc2" || base == "shared_fc2" || (ep == 1 && base == "expert_fc2"))
      return TpGatherConsumer::kOverlapped;
  } else if (base == "embed" && pass == "bwd") {
    return TpGatherConsumer::kBlocking;
  }
  return TpGatherConsumer::kNone;
}

bool tp_reduce_pipelined(const std::string& name, std::uint32_t ep) {
  return tp_sync_after(name, ep) && !column_parallel_dgrad(name, ep) && !name.ends_with("embed.fwd");
}

ExpertTpSync expert_tp_sync_after(const std::string& name) {
  if (name.ends_with(".moe_dispatch.fwd") || name.ends_with(".moe_dispatch.recompute") ||
      name.ends_with(".moe_combine.bwd"))
    return ExpertTpSync::kAllGather;
  if (name.ends_with(".expert_fc2.fwd") || name.ends_with(".expert_fc2.recompute") ||
      name.ends_with(".expert_fc1.dgrad"))
    return ExpertTpSync::kReduceScatter;
  return ExpertTpSync::kNone;
}

namespace {

StageOps stage_ops(const ModelSpec& model, const OpConfig& config, bool forward) {
  StageOps out;
  out.ops = forward ? forward_ops(model, config) : backward_ops(model, config);
  for (std::size_t i = 0; i < out.ops.size(); ++i) {
    const Op& op = out.ops[i];
    out.parameters += op.grad_parameters;
    if (is_expert_op(op)) out.expert_parameters += op.grad_parameters;
    // Megatron-Core's alltoall token dispatcher: dispatch after the permutation, combine after the experts;
    // backward, the reverse pair (gradients of the combine to the experts, of the dispatch back). A
    // recomputed forward repeats its pair.
    // With tensor parallelism (and so sequence parallelism) the TP group all-gathers the dispatched tokens
    // and reduce-scatters the experts' partial outputs before the combine; backward, after the combine's
    // all-to-all the gradients are all-gathered, and the experts' data gradients reduce-scattered before
    // the dispatch's (moe_tp_gather_bytes).
    const ExpertTpSync expert_tp = expert_tp_sync_after(op.name);
    const bool gather_after = expert_tp == ExpertTpSync::kAllGather;
    const bool scatter_after = expert_tp == ExpertTpSync::kReduceScatter;
    if (config.ep > 1 && config.tp > 1 && scatter_after)
      out.syncs.push_back({i + 1, CollectiveOp::kReduceScatter, SyncComm::kExpertTensor});
    if (config.ep > 1 && ep_sync_after(op.name))
      out.syncs.push_back({i + 1, CollectiveOp::kAllToAll, SyncComm::kExpert});
    if (config.ep > 1 && config.tp > 1 && gather_after)
      out.syncs.push_back({i + 1, CollectiveOp::kAllGather, SyncComm::kExpertTensor});
    if (config.tp < 2) continue;
    // Megatron's g/f operators: the forward reduces after the row-parallel GEMMs (also when a backward
    // recomputes them), the backward after the data gradients of the column-parallel ones. With sequence
    // parallelism the reduction is a reduce-scatter and an all-gather precedes the next column-parallel
    // GEMM: the same volume, counted here as the pair after the same op.
    // A fully recomputed forward (".recompute") runs its row-parallel reductions again: Megatron's
    // checkpointed forward is the same module code, g/f operators included.
    // Without expert parallelism the routed experts are a tensor-parallel MLP on the whole (gathered)
    // tokens, reduced like the dense one (Megatron-Core's all-gather dispatcher).
    // Megatron's vocabulary-parallel cross-entropy (_VocabParallelCrossEntropy.forward) all-reduces, over the
    // tensor-parallel group, the logits' maximum, the target's logit and the sum of exponentials: 3 fp32
    // values per token (vocab_parallel_loss_bytes). Blocking on the compute stream; none backward.
    if (op.name == "loss.fwd") {
      for (int k = 0; k < 3; ++k)
        out.syncs.push_back({i + 1, CollectiveOp::kAllReduce, SyncComm::kTensor,
                             vocab_parallel_loss_bytes(config.micro_batch, model.seq_len, config.cp)});
      continue;
    }
    if (!tp_sync_after(op.name, config.ep)) continue;
    if (config.sequence_parallel) {
      out.syncs.push_back({i + 1, CollectiveOp::kReduceScatter});
      out.syncs.push_back({i + 1, CollectiveOp::kAllGather});
    } else {
      out.syncs.push_back({i + 1, CollectiveOp::kAllReduce});
    }
  }
  return out;
}

// No micro-batch: a kernel's label is shared by every micro-batch of its chunk (one label per micro-batch would
// multiply the labels by the pipeline's micro-batch count), so a trace shows the schedule (pipeline_schedule.h) by
// the kernels' order, not by an argument that would read 0 for every micro-batch.
std::vector<sim::TaskArg> op_args(const Op& op, std::uint32_t chunk) {
  return {{"flops", op.flops.raw(), {}}, {"bytes", op.bytes.raw(), {}}, {"chunk", double(chunk), {}}};
}

// A bucket list of one kind of parameters (dense or routed experts) of a chunk's backward ops: DDP-sized
// buckets in the order their gradients complete, or the whole buffer at once.
std::vector<GradientBucket> gradient_buckets(const std::vector<Op>& ops, bool experts, bool split, bool overlap,
                                             double gradient_bytes, Bytes bucket_cap) {
  std::vector<Op> mine = ops;
  if (split)
    for (Op& op : mine)
      if (is_expert_op(op) != experts) op.grad_parameters = 0;
  if (overlap) return ddp_buckets(mine, bytes(gradient_bytes), bucket_cap, bucket_cap);
  GradientBucket whole;
  for (std::size_t i = 0; i < mine.size(); ++i)
    if (mine[i].grad_parameters > 0) {
      whole.parameters += mine[i].grad_parameters;
      if (whole.first_op.empty()) whole.first_op = mine[i].name;
      whole.last_op = mine[i].name;
      whole.ready_after_op = i;
    }
  whole.size = bytes(whole.parameters * gradient_bytes);
  if (whole.parameters > 0) return {whole};
  return {};
}

}  // namespace

Bytes megatron_bucket_bytes(const ParallelPlan& plan, double gradient_bytes) {
  if (plan.ddp_bucket_set) return plan.ddp_bucket;
  const double parameters = std::max(40e6, 1e6 * plan.dp * plan.cp);
  return bytes(parameters * gradient_bytes);
}

namespace {

// The forward op that first reads the parameters whose gradients backward op `name` completes ("X.wgrad" or
// "X.bwd" ↔ "X.fwd"). With tied embeddings the output layer's weight is the embedding's, read first by the
// embedding's forward where the chunk has it. The chunk's first op where no forward op matches.
std::size_t forward_reader(const std::vector<Op>& forward, const std::string& name, bool tied) {
  const std::string base = name.substr(0, name.rfind('.'));
  auto find = [&](const std::string& b) {
    for (std::size_t i = 0; i < forward.size(); ++i)
      if (forward[i].name == b + ".fwd") return i;
    return forward.size();
  };
  if (tied && base == "lm_head")
    if (const std::size_t e = find("embed"); e < forward.size()) return e;
  const std::size_t f = find(base);
  return f < forward.size() ? f : 0;
}

// The message sizes of a job's communicators and the op configuration they derive from.
struct Messages {
  OpConfig config;
  ExpertLoad load;
  Bytes activation;       // b·(s/cp)·h elements: a TP collective's buffer, a scatter/gather all-gather
  Bytes pp;               // a pipeline send
  Bytes kv;               // a ring-attention K/V (or dK/dV) transfer
  Bytes a2a;              // an MoE dispatch/combine buffer
  Bytes expert_tp_busiest, expert_tp_other;  // the MoE TP all-gather/reduce-scatter of either load variant
  Bytes embedding_grads;  // the tied-embedding gradient all-reduce
  double gradient_bytes = 4;
};

Messages messages_of(const Job& job) {
  const ParallelPlan& par = job.parallel;
  const Precision prec = job.training.precision;
  Messages out;
  out.config.micro_batch = par.micro_batch;
  out.config.precision = prec;
  out.config.tp = par.tp;
  out.config.cp = par.cp;
  out.config.ep = par.ep;
  out.config.sequence_parallel = par.sequence_parallel;
  out.config.recompute = par.recompute;
  out.config.attention = par.attention;
  out.config.flash_kernel = par.flash_kernel;
  // Routing imbalance: EP rank 0 of every EP group holds the busiest expert (variant 0 of the ops), the
  // others the rest (variant 1). With ep = 1 every rank holds all experts (variant 0 throughout).
  out.load = expert_load(job.model, par.ep, par.moe_capacity_factor, par.moe_token_skew);
  // A rank holds s/cp tokens of its micro-batch.
  out.activation =
      bytes(double(par.micro_batch) * job.model.seq_len / par.cp * job.model.hidden * element_bytes(prec));
  // A pipeline send carries the whole activation, or 1/t of it when sequence parallelism already splits it
  // or the scatter/gather optimisation splits it (the receiving TP group then all-gathers it).
  out.pp = (par.sequence_parallel || par.pp_scatter_gather) ? out.activation / double(par.tp) : out.activation;
  out.gradient_bytes = job.training.gradients == GradientDtype::kFp32 ? 4.0 : element_bytes(prec);
  // The dispatch/combine buffer: one size per call, the busiest receiver's (its inbound bytes set the time).
  out.a2a = job.model.is_moe() ? moe_alltoall_bytes(job.model, out.config, out.load.busiest_rank) : Bytes{};
  if (job.model.is_moe()) {
    out.expert_tp_busiest = moe_tp_gather_bytes(job.model, out.config, out.load.busiest_rank);
    out.expert_tp_other = moe_tp_gather_bytes(job.model, out.config, out.load.other_rank);
  }
  out.kv = ring_kv_bytes(job.model, out.config);
  out.embedding_grads = bytes(double(job.model.vocab) * job.model.hidden / par.tp * out.gradient_bytes);
  return out;
}

// The ops and syncs of every virtual stage for one direction, per load variant (0: the busiest EP rank's, 1:
// the others'; they differ in FLOPs only).
std::array<std::vector<StageOps>, 2> all_stage_ops(const Job& job, const Messages& msg, bool forward) {
  const std::uint32_t virtual_stages = job.parallel.pp * job.parallel.vp;
  const std::uint32_t layers_per_chunk = job.model.layers / virtual_stages;
  std::array<std::vector<StageOps>, 2> out;
  for (int variant = 0; variant < 2; ++variant) {
    out[variant].resize(virtual_stages);
    for (std::uint32_t vs = 0; vs < virtual_stages; ++vs) {
      OpConfig c = msg.config;
      c.expert_load = variant == 0 ? msg.load.busiest_rank : msg.load.other_rank;
      c.first_layer = vs * layers_per_chunk;
      c.layer_count = layers_per_chunk;
      c.embedding = vs == 0;
      c.head = vs + 1 == virtual_stages;
      out[variant][vs] = stage_ops(job.model, c, forward);
    }
  }
  return out;
}

}  // namespace

std::vector<std::uint32_t> input_readers(const RankLayout& layout, const ParallelPlan& par, std::uint32_t replicas) {
  std::vector<std::uint32_t> readers;
  for (std::uint32_t d = 0; d < replicas; ++d)
    for (std::uint32_t c = 0; c < par.cp; ++c) {
      readers.push_back(layout.rank({0, d, 0, c}));
      if (par.pp > 1) readers.push_back(layout.rank({0, d, par.pp - 1, c}));
    }
  return readers;
}

std::uint32_t megatron_mirror_rank(const Job& job, std::uint32_t replicas, std::uint32_t rank,
                                   std::uint32_t tensor_ranks) {
  const ParallelPlan& par = job.parallel;
  const RankLayout layout(par.tp, par.dp, par.pp, par.rank_order, par.cp, par.ep);
  RankCoord c = layout.coord(rank);
  c.dp %= replicas;
  if (tensor_ranks != 0) c.tp = std::min(c.tp, tensor_ranks - 1);
  return layout.rank(c);
}

namespace {

// Distinct collective messages: (operation, size in bytes, as Bytes::raw()).
using MessageSet = std::set<std::pair<CollectiveOp, double>>;

// Every (op, size) a data-parallel collective of `stage` may take, dense (`experts` false) or routed-expert
// parameters: the gradient reductions with and without bucketing, the parameter all-gathers per bucket and per
// chunk (a superset of what build_megatron_job adds for the job's options, from the same bucket lists).
MessageSet dp_messages(const Job& job, const Messages& msg, const std::vector<StageOps>& bwd, std::uint32_t stage,
                       bool experts) {
  const ParallelPlan& par = job.parallel;
  const bool split = par.ep > 1 && job.model.is_moe();
  const CollectiveOp grad_op = par.distributed_optimizer ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
  const Bytes cap = megatron_bucket_bytes(par, msg.gradient_bytes);
  const double element = element_bytes(job.training.precision);
  MessageSet out;
  for (std::uint32_t c = 0; c < par.vp; ++c) {
    const StageOps& so = bwd[c * par.pp + stage];
    for (bool overlap : {false, true})
      for (const GradientBucket& b : gradient_buckets(so.ops, experts, split, overlap, msg.gradient_bytes, cap)) {
        out.insert({grad_op, b.size.raw()});
        out.insert({CollectiveOp::kAllGather, bytes(b.parameters * element).raw()});
      }
    const double params = !split    ? so.parameters
                          : experts ? so.expert_parameters
                                    : so.parameters - so.expert_parameters;
    out.insert({CollectiveOp::kAllGather, bytes(params * element).raw()});
  }
  return out;
}

// Whether the ranks outside data-parallel replicas [0, keep) and tensor ranks [0, tensor_ranks) run exactly as
// their mirrors (megatron_mirror_rank) do: equal compute speed, loaders serving as many readers, and every
// communicator a simulated rank does not take part in timed as its mirror's, planned with the graph's message
// sizes. With tensor_ranks < tp the data-parallel groups of the unsimulated tensor ranks are such communicators
// too (with every tensor rank simulated, each DP group has a simulated member and runs over all of its GPUs).
bool mirrors_exact(const Scenario& sc, const Job& job, const CollectiveModel& model, std::uint32_t keep,
                   std::uint32_t tensor_ranks) {
  const ParallelPlan& par = job.parallel;
  const RankLayout layout(par.tp, par.dp, par.pp, par.rank_order, par.cp, par.ep);
  const std::uint32_t ranks = layout.size();
  if (ranks != job.gpus.size()) return false;
  const std::uint32_t t = par.tp, p = par.pp, cp = par.cp, v = par.vp;
  auto mirror = [&](RankCoord c) {
    c.dp %= keep;
    c.tp = std::min(c.tp, tensor_ranks - 1);
    return c;
  };
  auto simulated = [&](const RankCoord& c) { return c.dp < keep && c.tp < tensor_ranks; };
  for (std::uint32_t r = 0; r < ranks; ++r)
    if (sc.cluster.compute_slowdown(job.gpus[r]) !=
        sc.cluster.compute_slowdown(job.gpus[layout.rank(mirror(layout.coord(r)))]))
      return false;

  // Loaders: a node's loader serves the readers on it (input_pipeline.h). Every rank's node must serve as many
  // readers as its mirror's, and a simulated rank's node none beyond the simulated replicas'.
  if (job.training.loader_samples_per_s_per_node > 0) {
    std::map<std::uint32_t, std::size_t> full, reduced;  // node → readers
    for (std::uint32_t r : input_readers(layout, par, par.dp)) ++full[sc.cluster.node_of(job.gpus[r])];
    for (std::uint32_t r : input_readers(layout, par, keep)) ++reduced[sc.cluster.node_of(job.gpus[r])];
    auto count = [](const std::map<std::uint32_t, std::size_t>& m, std::uint32_t node) {
      const auto f = m.find(node);
      return f == m.end() ? std::size_t{0} : f->second;
    };
    for (std::uint32_t r = 0; r < ranks; ++r) {
      const RankCoord c = layout.coord(r);
      const std::uint32_t node = sc.cluster.node_of(job.gpus[r]);
      const std::uint32_t mirror_node = sc.cluster.node_of(job.gpus[layout.rank(mirror(c))]);
      if (count(full, node) != count(full, mirror_node)) return false;
      if (simulated(c) && count(full, node) != count(reduced, node)) return false;
    }
  }

  // Communicators outside DP, each given by its member coordinates; planned with the graph's sizes. The
  // mirror's times are cached: many replicas share one.
  const Messages msg = messages_of(job);
  std::map<std::pair<int, std::uint32_t>, double> mirror_time;  // (check, first member's rank) → seconds
  auto time_of = [&](CollectiveOp op, const std::vector<RankCoord>& members, Bytes size) {
    std::vector<std::uint32_t> gpus;
    for (const RankCoord& c : members) gpus.push_back(job.gpus[layout.rank(c)]);
    return model.plan(CollectiveRequest{op, std::move(gpus), size, 0}).time.raw();
  };
  int check = 0;
  // True when the communicator `members_of(c)` of every unsimulated coordinate c is timed as its mirror's;
  // `members_of` returns an empty list where c does not name one (a group is named once).
  auto same = [&](CollectiveOp op, Bytes size, auto members_of) {
    const int id = check++;
    for (std::uint32_t r = 0; r < ranks; ++r) {
      const RankCoord c = layout.coord(r);
      if (simulated(c)) continue;
      const std::vector<RankCoord> mine = members_of(c);
      if (mine.size() < 2) continue;
      const RankCoord m = mirror(c);
      const auto key = std::make_pair(id, layout.rank(m));
      auto found = mirror_time.find(key);
      if (found == mirror_time.end()) found = mirror_time.emplace(key, time_of(op, members_of(m), size)).first;
      if (time_of(op, mine, size) != found->second) return false;
    }
    return true;
  };
  auto tp_group = [&](RankCoord c) {
    std::vector<RankCoord> out;
    if (c.tp != 0) return out;
    for (std::uint32_t tr = 0; tr < t; ++tr) out.push_back({tr, c.dp, c.pp, c.cp});
    return out;
  };
  // Pipeline sends between consecutive virtual stages: stage s to s + 1 (and p − 1 to 0 with chunks), and back.
  auto pp_next = [&](RankCoord c) {
    if (c.pp + 1 == p && v == 1) return std::vector<RankCoord>{};
    return std::vector<RankCoord>{c, {c.tp, c.dp, (c.pp + 1) % p, c.cp}};
  };
  auto pp_prev = [&](RankCoord c) {
    if (c.pp == 0 && v == 1) return std::vector<RankCoord>{};
    return std::vector<RankCoord>{c, {c.tp, c.dp, (c.pp + p - 1) % p, c.cp}};
  };
  auto cp_next = [&](RankCoord c) { return std::vector<RankCoord>{c, {c.tp, c.dp, c.pp, (c.cp + 1) % cp}}; };
  auto ep_group = [&](RankCoord c) {
    std::vector<RankCoord> out;
    if (c.dp % par.ep != 0) return out;
    for (std::uint32_t e = 0; e < par.ep; ++e) out.push_back({c.tp, c.dp + e, c.pp, c.cp});
    return out;
  };
  auto embedding_pair = [&](RankCoord c) {
    if (c.pp != 0) return std::vector<RankCoord>{};
    return std::vector<RankCoord>{c, {c.tp, c.dp, p - 1, c.cp}};
  };
  // The stages' ops, for the message sizes of the TP and DP groups' collectives (none without tensor parallelism).
  const std::array<std::vector<StageOps>, 2> fwd = t > 1 ? all_stage_ops(job, msg, true)
                                                         : std::array<std::vector<StageOps>, 2>{},
                                             bwd = t > 1 ? all_stage_ops(job, msg, false)
                                                         : std::array<std::vector<StageOps>, 2>{};
  // The data-parallel groups of the unsimulated tensor ranks (named by their member of data-parallel and
  // context rank 0; expert groups by their EP rank's), against tensor rank tensor_ranks − 1's, message by message.
  auto dp_groups_same = [&]() {
    if (tensor_ranks >= t) return true;
    const bool split = par.ep > 1 && job.model.is_moe();
    auto coords = [&](const std::vector<std::uint32_t>& group) {
      std::vector<RankCoord> out;
      for (std::uint32_t r : group) out.push_back(layout.coord(r));
      return out;
    };
    for (std::uint32_t s = 0; s < p; ++s)
      for (bool experts : {false, true}) {
        if (experts && !split) continue;
        const auto messages = dp_messages(job, msg, bwd[0], s, experts);
        for (std::uint32_t k = 0; k < (experts ? par.ep : 1u); ++k) {
          auto group_of = [&](std::uint32_t tr) {
            const std::uint32_t r = layout.rank({tr, k, s, 0});
            return coords(experts ? layout.expert_data_group(r) : layout.data_context_group(r));
          };
          const std::vector<RankCoord> theirs = group_of(tensor_ranks - 1);
          if (theirs.size() < 2) continue;
          std::vector<double> their_times;
          for (const auto& [op, size] : messages) their_times.push_back(time_of(op, theirs, bytes(size)));
          for (std::uint32_t tr = tensor_ranks; tr < t; ++tr) {
            const std::vector<RankCoord> mine = group_of(tr);
            std::size_t i = 0;
            for (const auto& [op, size] : messages)
              if (time_of(op, mine, bytes(size)) != their_times[i++]) return false;
          }
        }
      }
    return true;
  };
  // Every (op, size) a TP group's collective takes in the graph: the activation's all-reduce, or with sequence
  // parallelism its reduce-scatter and all-gather (and the scatter/gather sends' all-gather), the pipelined
  // reduce-scatter's body and last chunk under tp_comm_overlap, the vocabulary-parallel loss statistics, and the
  // MoE all-gathers and reduce-scatters of either load variant's routed tokens: a superset, from the same stage ops.
  auto tp_messages = [&]() {
    MessageSet out;
    if (t < 2) return out;
    const Bytes a = msg.activation;
    for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather})
      for (Bytes size : {a, a * (1.0 / t), a * (double(t - 1) / t)}) out.insert({op, size.raw()});
    for (const auto* direction : {&fwd, &bwd})
      for (const std::vector<StageOps>& variant : *direction)
        for (const StageOps& so : variant)
          for (const StageOps::Sync& sync : so.syncs) {
            if (sync.comm == SyncComm::kTensor)
              out.insert({sync.op, (sync.size.raw() > 0 ? sync.size : a).raw()});
            else if (sync.comm == SyncComm::kExpertTensor)
              for (Bytes size : {msg.expert_tp_busiest, msg.expert_tp_other}) out.insert({sync.op, size.raw()});
          }
    return out;
  };
  try {
    bool ok = true;
    for (const auto& [op, size] : tp_messages()) ok = ok && same(op, bytes(size), tp_group);
    if (p > 1)
      ok = ok && same(CollectiveOp::kSendRecv, msg.pp, pp_next) && same(CollectiveOp::kSendRecv, msg.pp, pp_prev);
    if (cp > 1) ok = ok && same(CollectiveOp::kSendRecv, msg.kv, cp_next);
    if (par.ep > 1 && job.model.is_moe()) ok = ok && same(CollectiveOp::kAllToAll, msg.a2a, ep_group);
    if (p > 1 && job.model.tied_embeddings)
      ok = ok && same(CollectiveOp::kAllReduce, msg.embedding_grads, embedding_pair);
    return ok && dp_groups_same();
  } catch (const InputError&) {
    return false;  // e.g. a forced algorithm this communicator cannot run: the full build says so
  }
}

}  // namespace

std::uint32_t megatron_simulated_replicas(const Scenario& sc, const Job& job, const CollectiveModel& model) {
  const ParallelPlan& par = job.parallel;
  const std::uint32_t keep = par.ep;  // whole EP groups (ep = 1: one replica)
  if (!par.megatron() || keep >= par.dp || par.dp % keep != 0) return par.dp;
  return mirrors_exact(sc, job, model, keep, par.tp) ? keep : par.dp;
}

std::uint32_t megatron_simulated_tensor_ranks(const Scenario& sc, const Job& job, const CollectiveModel& model,
                                              std::uint32_t replicas) {
  const ParallelPlan& par = job.parallel;
  // Tensor rank 0 reads the input (get_batch broadcasts it), so it is kept; rank 1 stands for the others.
  constexpr std::uint32_t kKept = 2;
  if (!par.megatron() || par.tp <= kKept) return par.tp;
  return mirrors_exact(sc, job, model, replicas, kKept) ? kKept : par.tp;
}

JobGraph build_megatron_job(const Scenario& sc, const Job& job, sim::TaskGraph& graph, CollectiveEngine& collectives,
                            std::uint32_t replicas, std::uint32_t tensor_ranks) {
  const ParallelPlan& par = job.parallel;
  const RankLayout layout(par.tp, par.dp, par.pp, par.rank_order, par.cp, par.ep);
  const std::uint32_t ranks = layout.size();
  if (replicas == 0) replicas = par.dp;
  assert(replicas % par.ep == 0 && par.dp % replicas == 0 && "simulate whole EP groups of replicas");
  if (tensor_ranks == 0) tensor_ranks = par.tp;
  assert(tensor_ranks <= par.tp && tensor_ranks > 0);
  // Ranks of replicas [0, replicas) and tensor ranks [0, tk) are simulated; the DP reductions and the TP
  // collectives list every member, lanes for these.
  std::vector<bool> simulated(ranks);
  for (std::uint32_t r = 0; r < ranks; ++r) {
    const RankCoord c = layout.coord(r);
    simulated[r] = c.dp < replicas && c.tp < tensor_ranks;
  }
  const std::uint32_t t = par.tp, tk = tensor_ranks, p = par.pp, v = par.vp, m = par.grad_accum, cp = par.cp,
                      ep = par.ep;
  const Precision prec = job.training.precision;
  const std::uint32_t virtual_stages = p * v;
  const Messages msg = messages_of(job);
  const Bytes activation = msg.activation;
  const Bytes tp_message = activation;  // AllReduce, or RS/AG with SP: the total buffer is b·s·h either way
  const Bytes pp_message = msg.pp;
  const double gradient_bytes = msg.gradient_bytes;
  const Bytes bucket_cap = megatron_bucket_bytes(par, gradient_bytes);

  // Per virtual stage and load variant: ops and syncs, forward and backward.
  const std::array<std::vector<StageOps>, 2> fwd = all_stage_ops(job, msg, true), bwd = all_stage_ops(job, msg, false);
  const Bytes a2a_message = msg.a2a;
  const Bytes kv_message = msg.kv;

  JobGraph it;
  // Host dispatch (host_dispatch.h): each rank's program order is the order its tasks are added below — the
  // steps of its stage in schedule order — except the pipeline sends and the DP reductions, placed next to
  // the compute task they follow or precede.
  it.host = HostProgram(job.training.host_dispatch_per_kernel, ranks);
  const bool host = it.host.enabled();
  it.compute_stream.resize(ranks);
  it.comm_stream.resize(ranks);
  it.other_comm_streams.resize(ranks);
  std::vector<std::array<sim::StreamId, 4>> pp_streams(ranks);  // send-fwd, recv-fwd, send-bwd, recv-bwd
  std::vector<std::array<sim::StreamId, 4>> cp_streams(ranks);  // K/V send, K/V recv, dK/dV send, dK/dV recv
  std::vector<sim::StreamId> ep_stream(ranks, 0);
  std::vector<sim::StreamId> tp_stream(ranks, 0);  // tp_comm_overlap: the TP collectives beside the GEMMs
  for (std::uint32_t r = 0; r < ranks; ++r) {
    if (!simulated[r]) continue;
    const std::uint32_t gpu = job.gpus[r];
    it.compute_stream[r] = graph.add_stream(gpu, kComputeStream);
    it.comm_stream[r] = graph.add_stream(gpu, kDpCommStream);
    if (p > 1) {
      pp_streams[r] = {graph.add_stream(gpu, "pp-send-fwd"), graph.add_stream(gpu, "pp-recv-fwd"),
                       graph.add_stream(gpu, "pp-send-bwd"), graph.add_stream(gpu, "pp-recv-bwd")};
      it.other_comm_streams[r].insert(it.other_comm_streams[r].end(), pp_streams[r].begin(), pp_streams[r].end());
    }
    if (cp > 1) {
      cp_streams[r] = {graph.add_stream(gpu, "cp-kv-send"), graph.add_stream(gpu, "cp-kv-recv"),
                       graph.add_stream(gpu, "cp-dkv-send"), graph.add_stream(gpu, "cp-dkv-recv")};
      it.other_comm_streams[r].insert(it.other_comm_streams[r].end(), cp_streams[r].begin(), cp_streams[r].end());
    }
    if (ep > 1 && job.model.is_moe()) {
      ep_stream[r] = graph.add_stream(gpu, "ep-comm");
      it.other_comm_streams[r].push_back(ep_stream[r]);
    }
    if ((par.tp_comm_overlap || par.async_tp_grad_reduce) && t > 1) {
      tp_stream[r] = graph.add_stream(gpu, "tp-comm");
      it.other_comm_streams[r].push_back(tp_stream[r]);
    }
  }

  const auto order = pipeline_order(par.schedule, p, m, v);

  // Input: the loader and the host-to-device copy on tensor rank 0 of the first and the last stage of
  // every replica and context rank (input_pipeline.h; each CP rank loads its sequences and keeps its
  // chunks); the whole TP group waits for it (get_batch broadcasts the batch).
  const std::vector<std::uint32_t> readers = input_readers(layout, par, replicas);
  InputPipeline input = add_input_pipeline(sc, job, graph, readers, m);
  // Labels per (virtual stage, direction, op, micro-batch) would be many; share one per (vs, dir, op, load).
  std::map<std::tuple<std::uint32_t, bool, std::size_t, int>, sim::LabelId> labels;
  auto label_of = [&](std::uint32_t vs, bool forward, std::size_t i, int variant, const Op& op, std::uint32_t chunk) {
    const auto key = std::make_tuple(vs, forward, i, variant);
    auto found = labels.find(key);
    if (found != labels.end()) return found->second;
    const sim::LabelId id = graph.add_label({op.name, kCategoryCompute, op_args(op, chunk)});
    labels.emplace(key, id);
    return id;
  };

  // first_task[(dir, mb, vs, rank)] / last_task: to wire pipeline sends.
  std::map<std::tuple<bool, std::uint32_t, std::uint32_t, std::uint32_t>, sim::TaskId> first_task, last_task;
  // Last backward op of each chunk per rank, and where each DP bucket of that chunk becomes ready.
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<sim::TaskId>> chunk_backward;  // (rank, vs)
  // overlap_param_gather: micro-batch 0's forward tasks of each chunk per rank, by op index.
  const bool gather_params = par.distributed_optimizer && par.overlap_param_gather;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<sim::TaskId>> first_forward;  // (rank, vs)
  // The all-gather of a scatter/gather pipeline receive, per (direction, micro-batch, vs, replica, context rank).
  std::map<std::tuple<bool, std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t>, sim::TaskId> gather_task;
  std::vector<sim::TaskId> last_compute(ranks, 0);  // each rank's last backward kernel of the step
  std::vector<bool> computed(ranks, false);         // whether last_compute holds a kernel yet

  for (std::uint32_t stage = 0; stage < p; ++stage) {
    for (std::uint32_t block = 0; block < replicas / ep; ++block) {
      // The ranks of this stage and EP group run in lockstep: the TP groups (one per context rank and
      // replica), the CP rings (one per tensor rank and replica) and the EP groups (one per tensor and
      // context rank) among them. Add each step for all of them together.
      std::vector<std::uint32_t> group;  // member g → rank
      std::vector<RankCoord> coord;
      for (std::uint32_t e = 0; e < ep; ++e)
        for (std::uint32_t c = 0; c < cp; ++c)
          for (std::uint32_t tr = 0; tr < tk; ++tr) {
            coord.push_back({tr, block * ep + e, stage, c});
            group.push_back(layout.rank(coord.back()));
          }
      const std::size_t n = group.size();
      auto member = [&](std::uint32_t tr, std::uint32_t e, std::uint32_t c) { return (e * cp + c) * tk + tr; };
      std::vector<int> variant(n);
      for (std::size_t g = 0; g < n; ++g) variant[g] = coord[g].dp % ep == 0 ? 0 : 1;
      auto gpus_of = [&](const std::vector<std::size_t>& members) {
        std::vector<std::uint32_t> out;
        for (std::size_t g : members) out.push_back(job.gpus[group[g]]);
        return out;
      };
      // Every GPU of the TP group whose simulated members are `members` (the unsimulated tensor ranks too).
      auto tp_gpus = [&](const std::vector<std::size_t>& members) {
        const RankCoord& c = coord[members.front()];
        std::vector<std::uint32_t> out;
        for (std::uint32_t tr = 0; tr < t; ++tr) out.push_back(job.gpus[layout.rank({tr, c.dp, c.pp, c.cp})]);
        return out;
      };
      std::vector<std::vector<std::size_t>> tp_groups, ep_groups;  // member indices
      for (std::uint32_t e = 0; e < ep; ++e)
        for (std::uint32_t c = 0; c < cp; ++c) {
          tp_groups.emplace_back();
          for (std::uint32_t tr = 0; tr < tk; ++tr) tp_groups.back().push_back(member(tr, e, c));
        }
      for (std::uint32_t c = 0; c < cp; ++c)
        for (std::uint32_t tr = 0; tr < tk; ++tr) {
          ep_groups.emplace_back();
          for (std::uint32_t e = 0; e < ep; ++e) ep_groups.back().push_back(member(tr, e, c));
        }
      for (const PipelineStep& step : order[stage]) {
        const bool forward = step.kind == PipelineStep::Kind::kForward;
        const std::uint32_t vs = step.chunk * p + stage;
        const auto& so_of = forward ? fwd : bwd;
        const StageOps& so = so_of[0][vs];  // the variants differ in FLOPs only, not in ops or syncs
        std::size_t next_sync = 0;
        std::vector<sim::TaskId> last(n, 0);
        std::vector<bool> any(n, false);
        // What each member's next kernel waits for besides its stream: input, all-to-alls, ring transfers.
        std::vector<std::vector<sim::TaskId>> pending(n);
        // tp_comm_overlap: what the member's latest kernel waited for (its stream predecessor and its pending
        // tasks): the TP collectives that follow it start with it, beside it on the TP stream.
        std::vector<std::vector<sim::TaskId>> started_after(n);
        // The MoE TP collective that follows the current op, if any (the next all-to-all waits for it).
        std::vector<std::optional<sim::TaskId>> expert_tp(n);
        // Asynchronous TP collectives beside the current op (async_tp_grad_reduce, the sequence-parallel input
        // all-gather beside a data gradient): the op after it waits for them.
        std::vector<std::vector<sim::TaskId>> beside(n);
        // async_tp_grad_reduce with sequence parallelism: the all-gather of a column-parallel backward's pair,
        // issued after the weight gradient (the op after the data gradient) on the compute stream.
        std::vector<std::size_t> carried;  // op index before which it runs
        // tp_comm_overlap: a sync point's all-gather waits to be issued before the op that reads it
        // (tp_gather_consumer).
        bool owed_gather = false;
        // Megatron's asynchronous backward reduction beside the weight gradient: async_tp_grad_reduce, and
        // Transformer Engine's bulk overlap under tp_comm_overlap.
        const bool async_tp = par.async_tp_grad_reduce || par.tp_comm_overlap;
        // A TP collective of `size` bytes of the tensor-parallel groups on the TP stream beside the kernels,
        // started after what `deps_of(g)` gives; `waited(g, id)` records who waits for it.
        auto tp_stream_collective = [&](CollectiveOp op, const std::string& name, Bytes size, auto deps_of,
                                        auto waited) {
          for (const auto& tg : tp_groups) {
            std::vector<sim::StreamId> lanes;
            std::vector<sim::TaskId> deps;
            for (std::size_t g : tg) {
              lanes.push_back(tp_stream[group[g]]);
              for (sim::TaskId d : deps_of(g)) deps.push_back(d);
            }
            const sim::TaskId collective =
                collectives.add(graph, name, kCategoryTpComm, CollectiveRequest{op, tp_gpus(tg), size, 0}, lanes, deps);
            for (std::size_t g : tg) {
              waited(g, collective);
              if (host) it.host.issue(group[g], collective, kCollectiveKernels, false);
            }
          }
        };
        // Beside the next op: waited for by the op after it.
        auto tp_beside = [&](CollectiveOp op, const std::string& name, auto deps_of) {
          tp_stream_collective(op, name, tp_message, deps_of,
                               [&](std::size_t g, sim::TaskId id) { beside[g].push_back(id); });
        };
        // A TP collective on the compute streams between the kernels (`after_pending`: also after what the members'
        // next kernel waits for).
        auto tp_blocking = [&](CollectiveOp op, const std::string& name, bool after_pending, Bytes size = Bytes{}) {
          for (const auto& tg : tp_groups) {
            std::vector<sim::StreamId> lanes;
            std::vector<sim::TaskId> deps;
            for (std::size_t g : tg) {
              lanes.push_back(it.compute_stream[group[g]]);
              if (after_pending) deps.insert(deps.end(), pending[g].begin(), pending[g].end());
            }
            const sim::TaskId collective =
                collectives.add(graph, name, kCategoryTpComm,
                                CollectiveRequest{op, tp_gpus(tg), size.raw() > 0 ? size : tp_message, 0}, lanes, deps);
            if (host)
              for (std::size_t g : tg) it.host.issue(group[g], collective, kCollectiveKernels);
          }
        };
        // Scatter/gather: the received 1/t shards are all-gathered by the group before the step's kernels.
        const bool receives = forward ? vs > 0 : vs + 1 < virtual_stages;
        if (par.pp_scatter_gather && receives)
          for (const auto& tg : tp_groups) {
            std::vector<sim::StreamId> lanes;
            for (std::size_t g : tg) lanes.push_back(it.compute_stream[group[g]]);
            const sim::TaskId gather =
                collectives.add(graph, forward ? "allgather.pp_activation" : "allgather.pp_gradient", kCategoryPpComm,
                                CollectiveRequest{CollectiveOp::kAllGather, tp_gpus(tg), activation, 0}, lanes, {});
            gather_task[{forward, step.micro_batch, vs, coord[tg[0]].dp, coord[tg[0]].cp}] = gather;
            if (host)
              for (std::size_t g : tg) it.host.issue(group[g], gather, kCollectiveKernels);
          }
        // The input of this micro-batch, where this virtual stage reads it (the first and the last).
        if (forward && (vs == 0 || vs + 1 == virtual_stages))
          for (std::size_t g = 0; g < n; ++g)
            if (auto f = input.ready.find({layout.rank({0, coord[g].dp, stage, coord[g].cp}), step.micro_batch});
                f != input.ready.end())
              pending[g].push_back(f->second);
        // Ring attention (context parallelism): per (tensor rank, replica) a ring over the cp context ranks;
        // the transfer on the edge into member g, per kind (K/V, dK/dV), from the previous ring step.
        std::vector<sim::TaskId> kv_in(n, 0), dkv_in(n, 0), ring_base(n, 0);
        std::vector<bool> has_base(n, false);
        auto ring_transfer = [&](bool gradients, std::uint32_t j) {
          std::vector<sim::TaskId> arrived(n, 0);
          for (std::size_t g = 0; g < n; ++g) {
            const RankCoord& from = coord[g];
            const std::size_t to = member(from.tp, from.dp - block * ep, (from.cp + 1) % cp);
            const std::uint32_t src = group[g], dst = group[to];
            std::vector<sim::TaskId> deps;
            if (gradients) {
              deps.push_back(last[g]);  // this rank's dK/dV of step j − 1 is complete
              if (j >= 2) deps.push_back(dkv_in[g]);
            } else if (j == 1) {
              if (has_base[g]) deps.push_back(ring_base[g]);  // K and V exist
            } else {
              deps.push_back(kv_in[g]);  // forwards what it received
            }
            const sim::StreamId lanes[] = {cp_streams[src][gradients ? 2 : 0], cp_streams[dst][gradients ? 3 : 1]};
            arrived[to] = collectives.add(
                graph, gradients ? "send.cp.dkv" : "send.cp.kv", kCategoryCpComm,
                CollectiveRequest{CollectiveOp::kSendRecv, {job.gpus[src], job.gpus[dst]}, kv_message, 0}, lanes, deps);
            if (host) {
              it.host.issue(src, arrived[to], kCollectiveKernels, false);
              it.host.issue(dst, arrived[to], kCollectiveKernels, false);
            }
          }
          (gradients ? dkv_in : kv_in) = std::move(arrived);
        };
        for (std::size_t i = 0; i <= so.ops.size(); ++i) {
          // A column-parallel backward's all-gather held back until after the weight gradient (async_tp).
          while (!carried.empty() && carried.front() <= i) {
            carried.erase(carried.begin());
            tp_blocking(CollectiveOp::kAllGather, "allgather.tp", true);
          }
          // Collectives that follow op i−1: TP on the compute streams, EP all-to-alls on their own stream
          // (the next kernel waits for them).
          while (next_sync < so.syncs.size() && so.syncs[next_sync].after == i) {
            const StageOps::Sync& sync = so.syncs[next_sync++];
            const bool column_bwd = i >= 1 && column_parallel_dgrad(so.ops[i - 1].name, ep);
            if (sync.comm == SyncComm::kTensor && async_tp && column_bwd) {
              // Megatron's asynchronous backward: the input gradient's all-reduce (reduce-scatter) starts after
              // the data gradient and runs beside the weight gradient (op i); the op after it waits. The
              // sequence-parallel pair's all-gather (of the next row-parallel layer's output gradient) follows
              // the weight gradient on the compute stream; under tp_comm_overlap it runs beside that layer's
              // data gradient (Transformer Engine's ring exchange).
              if (sync.op == CollectiveOp::kAllGather) {
                if (par.tp_comm_overlap)
                  owed_gather = true;
                else
                  carried.push_back(i + 1);
              } else {
                tp_beside(sync.op, std::string(to_string(sync.op)) + ".tp",
                          [&](std::size_t g) { return std::vector<sim::TaskId>{last[g]}; });
              }
            } else if (sync.comm == SyncComm::kTensor && par.tp_comm_overlap && sync.op == CollectiveOp::kAllGather) {
              owed_gather = true;  // issued before the op that reads it
            } else if (sync.comm == SyncComm::kTensor && par.tp_comm_overlap &&
                       sync.op == CollectiveOp::kReduceScatter && tp_reduce_pipelined(so.ops[i - 1].name, ep)) {
              // Transformer Engine's pipelined reduce-scatter beside a row-parallel GEMM (op i − 1) that runs in
              // t chunks: chunk k's rows are reduce-scattered while chunk k + 1 computes, so the last chunk's
              // share comes after the GEMM. Modelled as (t − 1)/t of the bytes on the TP stream from the GEMM's
              // start and the last 1/t after both; the next kernel waits for that tail:
              //   end = max(G, RS((t−1)/t)) + RS(1/t)   (exact for RS <= G: G + RS/t; else short of G/t).
              const Bytes tail = tp_message * (1.0 / t), body = tp_message * (double(t - 1) / t);
              const std::string name = std::string(to_string(sync.op)) + ".tp";
              std::vector<sim::TaskId> first(n, 0);
              tp_stream_collective(
                  sync.op, name, body, [&](std::size_t g) { return started_after[g]; },
                  [&](std::size_t g, sim::TaskId id) { first[g] = id; });
              tp_stream_collective(
                  sync.op, name + ".last_chunk", tail,
                  [&](std::size_t g) {
                    return std::vector<sim::TaskId>{first[g], last[g]};
                  },
                  [&](std::size_t g, sim::TaskId id) { pending[g].push_back(id); });
            } else if (sync.comm == SyncComm::kTensor) {
              tp_blocking(sync.op, std::string(to_string(sync.op)) + (sync.size.raw() > 0 ? ".tp.loss" : ".tp"), false,
                          sync.size);
            } else if (sync.comm == SyncComm::kExpertTensor) {
              // The routed tokens of the group's EP rank (its load variant), after what the members wait for
              // (the dispatch all-to-all); the combine all-to-all that follows a reduce-scatter waits for it.
              for (const auto& tg : tp_groups) {
                std::vector<sim::StreamId> lanes;
                std::vector<sim::TaskId> deps;
                for (std::size_t g : tg) {
                  lanes.push_back(it.compute_stream[group[g]]);
                  deps.insert(deps.end(), pending[g].begin(), pending[g].end());
                }
                const Bytes size = variant[tg[0]] == 0 ? msg.expert_tp_busiest : msg.expert_tp_other;
                const sim::TaskId collective =
                    collectives.add(graph, std::string(to_string(sync.op)) + ".tp.moe", kCategoryTpComm,
                                    CollectiveRequest{sync.op, tp_gpus(tg), size, 0}, lanes, deps);
                for (std::size_t g : tg) {
                  expert_tp[g] = collective;
                  if (host) it.host.issue(group[g], collective, kCollectiveKernels);
                }
              }
            } else {
              const std::string& before = so.ops[i - 1].name;
              const bool dispatch =
                  before.find("dispatch") != std::string::npos || ends_with(before, ".expert_fc1.wgrad");
              const bool backward_pass = ends_with(before, ".bwd") || ends_with(before, ".wgrad");
              for (const auto& eg : ep_groups) {
                std::vector<sim::StreamId> lanes;
                std::vector<sim::TaskId> deps;
                for (std::size_t g : eg) {
                  lanes.push_back(ep_stream[group[g]]);
                  if (any[g]) deps.push_back(last[g]);
                  if (expert_tp[g]) deps.push_back(*expert_tp[g]);
                }
                const sim::TaskId a2a = collectives.add(
                    graph, std::string(dispatch ? "alltoall.ep.dispatch" : "alltoall.ep.combine") +
                               (backward_pass ? ".bwd" : ""),
                    kCategoryEpComm, CollectiveRequest{CollectiveOp::kAllToAll, gpus_of(eg), a2a_message, 0}, lanes,
                    deps);
                for (std::size_t g : eg) {
                  pending[g].push_back(a2a);
                  if (host) it.host.issue(group[g], a2a, kCollectiveKernels, false);
                }
              }
            }
          }
          // An owed all-gather before a Megatron (not Transformer Engine) layer that reads it, or at the end of the
          // list (a pipeline stage's boundary, before the send): blocking, on the compute stream.
          if (owed_gather &&
              (i == so.ops.size() || tp_gather_consumer(so.ops[i].name, ep) == TpGatherConsumer::kBlocking)) {
            owed_gather = false;
            tp_blocking(CollectiveOp::kAllGather, "allgather.tp", true);
          }
          if (i == so.ops.size()) break;
          std::fill(expert_tp.begin(), expert_tp.end(), std::nullopt);
          const Op& op0 = so.ops[i];
          // tp_comm_overlap: the owed all-gather beside the Transformer Engine GEMM that reads it, from the
          // GEMM's start (its pending inputs and stream predecessor); the op after the GEMM waits for it:
          //   end = max(G, AG)   (Transformer Engine's ring exchange: max(G, G/t + AG)).
          if (owed_gather && tp_gather_consumer(op0.name, ep) == TpGatherConsumer::kOverlapped) {
            owed_gather = false;
            tp_beside(CollectiveOp::kAllGather, "allgather.tp", [&](std::size_t g) {
              std::vector<sim::TaskId> deps = pending[g];
              if (any[g])
                deps.push_back(last[g]);
              else if (computed[group[g]])
                deps.push_back(last_compute[group[g]]);
              return deps;
            });
          }
          // Sequence parallelism: a column-parallel layer kept only its shard of the input, so its backward
          // all-gathers the input again for the weight gradient: beside the data gradient (asynchronous in
          // Megatron-LM and Transformer Engine, bulk-overlapped with userbuffers), or before it when blocking.
          if (t > 1 && par.sequence_parallel && column_parallel_dgrad(op0.name, ep)) {
            if (par.async_tp_grad_reduce || par.tp_comm_overlap)
              tp_beside(CollectiveOp::kAllGather, "allgather.tp.input", [&](std::size_t g) {
                // After the kernel before the data gradient (the step's previous op, or the previous step's last).
                if (any[g]) return std::vector<sim::TaskId>{last[g]};
                return computed[group[g]] ? std::vector<sim::TaskId>{last_compute[group[g]]} : std::vector<sim::TaskId>{};
              });
            else
              tp_blocking(CollectiveOp::kAllGather, "allgather.tp.input", false);
          }
          const bool ring_bwd = op0.ring_step >= 0 && ends_with(op0.name, ".bwd");
          if (op0.ring_step == 0) {
            for (std::size_t g = 0; g < n; ++g) {
              ring_base[g] = last[g];
              has_base[g] = any[g];
            }
          } else if (op0.ring_step > 0) {
            const auto j = static_cast<std::uint32_t>(op0.ring_step);
            ring_transfer(false, j);                // K/V for step j, overlapping step j − 1
            if (ring_bwd) ring_transfer(true, j);   // dK/dV of the chunk this rank worked on in step j − 1
            for (std::size_t g = 0; g < n; ++g) pending[g].push_back(kv_in[g]);
          }
          for (std::size_t g = 0; g < n; ++g) {
            const std::uint32_t r = group[g];
            const Op& op = so_of[variant[g]][vs].ops[i];
            const sim::LabelId label = label_of(vs, forward, i, variant[g], op, step.chunk);
            const sim::StreamId lane[] = {it.compute_stream[r]};
            if (par.tp_comm_overlap) {
              // The kernel's stream predecessor: the step's previous op, or for its first op the rank's last
              // kernel of the previous step (a collective after the embedding must not start during the
              // previous micro-batch's backward).
              started_after[g] = pending[g];
              if (any[g])
                started_after[g].push_back(last[g]);
              else if (computed[r])
                started_after[g].push_back(last_compute[r]);
            }
            const sim::TaskId id = graph.add(
                label, lane, op_time(op, sc.profile.gpu, prec) * sc.cluster.compute_slowdown(job.gpus[r]), pending[g]);
            pending[g] = std::move(beside[g]);  // what ran beside this op: the next one waits for it
            beside[g].clear();
            if (host) it.host.issue(r, id, op.kernels);
            if (!any[g]) first_task[{forward, step.micro_batch, vs, r}] = id;
            any[g] = true;
            last[g] = id;
            if (!forward && step.micro_batch + 1 == m && op.grad_parameters > 0) chunk_backward[{r, vs}].push_back(id);
            if (forward && step.micro_batch == 0 && gather_params) first_forward[{r, vs}].push_back(id);
          }
          // The last backward ring step works on the rank's own K/V (Transformer Engine runs the backward ring
          // the other way round, so its own chunk comes last): the dK/dV of that chunk accumulated by the other
          // ranks arrive during the step (the transfer issued before it), and the QKV backward waits for them.
          if (ring_bwd && op0.ring_step + 1 == int(cp))
            for (std::size_t g = 0; g < n; ++g) pending[g].push_back(dkv_in[g]);
        }
        for (std::size_t g = 0; g < n; ++g)
          if (any[g]) {
            last_task[{forward, step.micro_batch, vs, group[g]}] = last[g];
            last_compute[group[g]] = last[g];
            computed[group[g]] = true;
          }
      }
    }
  }

  // Pipeline sends: forward activations vs → vs+1, backward gradients vs → vs−1, between equal TP and CP ranks.
  if (p > 1) {
    for (std::uint32_t d = 0; d < replicas; ++d)
      for (std::uint32_t c = 0; c < cp; ++c)
        for (std::uint32_t tr = 0; tr < tk; ++tr)
          for (std::uint32_t s = 0; s < p; ++s)
            for (std::size_t i = 0; i < order[s].size(); ++i) {
              const PipelineStep& step = order[s][i];
              const bool forward = step.kind == PipelineStep::Kind::kForward;
              const std::uint32_t vs = step.chunk * p + s;
              if (forward ? vs + 1 == virtual_stages : vs == 0) continue;
              const std::uint32_t to_vs = forward ? vs + 1 : vs - 1;
              const std::uint32_t src = layout.rank({tr, d, s, c}), dst = layout.rank({tr, d, to_vs % p, c});
              const sim::StreamId lanes[] = {pp_streams[src][forward ? 0 : 2], pp_streams[dst][forward ? 1 : 3]};
              const sim::TaskId after = last_task.at({forward, step.micro_batch, vs, src});
              const sim::TaskId send = collectives.add(
                  graph, forward ? "send.activation" : "send.gradient", kCategoryPpComm,
                  CollectiveRequest{CollectiveOp::kSendRecv, {job.gpus[src], job.gpus[dst]}, pp_message, 0}, lanes,
                  std::span<const sim::TaskId>(&after, 1),
                  // Which micro-batch and chunk, from which GPU to which: the sender's and the receiver's slices
                  // are one task, and these tell a schedule's sends apart in the trace.
                  {{"micro_batch", double(step.micro_batch), {}},
                   {"chunk", double(step.chunk), {}},
                   {"from_gpu", double(job.gpus[src]), {}},
                   {"to_gpu", double(job.gpus[dst]), {}}});
              const auto gather = gather_task.find({forward, step.micro_batch, to_vs, d, c});
              const sim::TaskId receiver = gather != gather_task.end()
                                               ? gather->second
                                               : first_task.at({forward, step.micro_batch, to_vs, dst});
              graph.add_dependency(receiver, send);
              // Megatron's non-interleaved 1F1B cannot overlap its pipeline communication (arguments.py turns
              // overlap_p2p_comm off for it): send_forward, send_forward_recv_backward, send_backward_recv_forward
              // and send_backward wait for their batched isend/irecv (and torch.cuda.synchronize()) before the
              // stage's next step starts, so the sender's next step waits for the send too. The interleaved
              // schedule overlaps them (overlap_p2p_comm defaults to on there).
              const bool blocking = par.schedule == PipelineSchedule::kOneFOneB && i + 1 < order[s].size();
              sim::TaskId next_step = 0;
              if (blocking) {
                const PipelineStep& n = order[s][i + 1];
                const bool next_forward = n.kind == PipelineStep::Kind::kForward;
                next_step = first_task.at({next_forward, n.micro_batch, n.chunk * p + s, src});
                graph.add_dependency(next_step, send);
              }
              if (host) {
                // The sender issues the send after its step; the receiver posts the receive before its step and
                // waits for it (torch.cuda.synchronize() in _communicate) before it issues the step; under 1F1B
                // the sender waits for it as well before it issues its next step.
                it.host.issue_after(src, after, send, kCollectiveKernels);
                it.host.issue_before(dst, receiver, send, kCollectiveKernels);
                it.host.synchronize_before(dst, receiver, send);
                if (blocking) it.host.synchronize_before(src, next_step, send);
              }
            }
  }

  // Data parallelism. With overlap_grad_reduce (Megatron-Core's --overlap-grad-reduce) each chunk's
  // gradients go in DDP-sized buckets as soon as its last backward produced them, overlapping the rest of
  // the backward; without it (Megatron-LM's default) each chunk's whole gradient buffer is reduced in one
  // call after the rank's backward ends (finalize_model_grads). The distributed optimizer reduce-scatters
  // instead of all-reducing; each rank then steps its shard and the updated 16-bit parameters are
  // all-gathered, one call per chunk, before the step ends (with overlap_param_gather: per bucket, beside
  // the next step's first forward, below). Dense gradients are reduced over the dp·cp
  // ranks of the data-and-context group (the CP ranks saw other tokens of the same sequences); with expert
  // parallelism the routed experts' gradients have their own buckets, reduced over the (dp/ep)·cp ranks
  // that hold the same experts (rank_layout.h), in the order the buckets become ready.
  const CollectiveOp grad_op = par.distributed_optimizer ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
  const char* grad_name = par.distributed_optimizer ? "reducescatter.dp.chunk" : "allreduce.dp.chunk";
  const bool split_experts = ep > 1 && job.model.is_moe();
  std::vector<sim::TaskId> last_dp(ranks, 0);
  std::vector<bool> has_dp(ranks, false);
  // The reduction groups of (stage, tensor rank): the dense one, then (with EP) one per EP rank.
  auto reduction_groups = [&](std::uint32_t s, std::uint32_t tr, bool experts) {
    std::vector<std::vector<std::uint32_t>> out;
    if (!experts) {
      out.push_back(layout.data_context_group(layout.rank({tr, 0, s, 0})));
    } else {
      for (std::uint32_t k = 0; k < ep; ++k) out.push_back(layout.expert_data_group(layout.rank({tr, k, s, 0})));
    }
    return out;
  };
  // The GPUs of a reduction group, and the DP streams of its simulated members.
  auto group_lanes = [&](const std::vector<std::uint32_t>& members) {
    std::pair<std::vector<std::uint32_t>, std::vector<sim::StreamId>> out;
    for (std::uint32_t r : members) {
      out.first.push_back(job.gpus[r]);
      if (simulated[r]) out.second.push_back(it.comm_stream[r]);
    }
    return out;
  };
  // The label of a chunk's parameter all-gather (dense or routed-expert parameters).
  auto params_gather_name = [](std::uint32_t vs, bool experts) {
    return "allgather.dp.params.chunk" + std::to_string(vs) + (experts ? ".experts" : "");
  };
  // overlap_param_gather (Megatron-Core --overlap-param-gather, NeMo's overlap_param_sync): the distributed
  // optimizer all-gathers the updated parameters bucket by bucket (the gradient buckets, chunk by chunk in
  // forward order) while the next step's first micro-batch runs its forward; the forward pre-hook of the
  // first layer of bucket i makes the compute stream wait for all-gather i (_ParamAndGradBucketGroup.
  // finish_param_sync). Who issues them: without a pipeline the pre-hooks do, lazily — the first forward
  // pre-hook issues all-gather 0 and waits for it, the wait for all-gather i issues all-gather i + 1, so
  // bucket i's all-gather runs beside the forward of bucket i − 1. With a pipeline Megatron-LM aligns them
  // (align_param_gather, on unless --no-align-param-gather): the schedule issues every bucket's all-gather of
  // every chunk when the step starts, on all stages at once, so a later stage's all-gathers also run while it
  // waits for the pipeline to fill. In steady state one step runs from the first all-gather to the end of
  // the optimizer: they are added here, at the head of the DP stream, before the gradient reductions, and
  // the step-end all-gathers below are left out.
  if (gather_params) {
    struct Gather {
      std::uint32_t chunk;
      std::size_t reader;  // the forward op (index in the chunk) that first reads the bucket's parameters
      double parameters;
      bool experts;
    };
    for (std::uint32_t s = 0; s < p; ++s)
      for (std::uint32_t tr = 0; tr < tk; ++tr) {
        std::vector<Gather> gathers;
        for (std::uint32_t c = 0; c < v; ++c) {
          const std::uint32_t vs = c * p + s;
          for (bool experts : {false, true}) {
            if (experts && !split_experts) continue;
            for (const GradientBucket& b :
                 gradient_buckets(bwd[0][vs].ops, experts, split_experts, true, gradient_bytes, bucket_cap))
              gathers.push_back({c, forward_reader(fwd[0][vs].ops, b.last_op, job.model.tied_embeddings),
                               b.parameters, experts});
          }
        }
        std::stable_sort(gathers.begin(), gathers.end(), [](const Gather& a, const Gather& b) {
          return a.chunk != b.chunk ? a.chunk < b.chunk : a.reader < b.reader;
        });
        std::map<std::uint32_t, sim::TaskId> waits_previous;  // per rank: where the last all-gather was waited for
        for (const Gather& g : gathers) {
          const std::uint32_t vs = g.chunk * p + s;
          for (const std::vector<std::uint32_t>& members : reduction_groups(s, tr, g.experts)) {
            if (members.size() < 2) continue;
            const auto [gpus, lanes] = group_lanes(members);
            const sim::TaskId gather = collectives.add(
                graph, params_gather_name(vs, g.experts), kCategoryDpComm,
                CollectiveRequest{CollectiveOp::kAllGather, gpus, bytes(g.parameters * element_bytes(prec)), 0},
                lanes, {});
            for (std::uint32_t r : members) {
              if (!simulated[r]) continue;
              const sim::TaskId reader = first_forward.at({r, vs}).at(g.reader);
              graph.add_dependency(reader, gather);
              if (host) {
                const auto w = waits_previous.find(r);
                it.host.issue_before(r, p == 1 && w != waits_previous.end() ? w->second
                                                                           : first_forward.at({r, s}).front(),
                                     gather, kCollectiveKernels);
              }
              waits_previous[r] = reader;
            }
          }
        }
      }
  }
  for (std::uint32_t s = 0; s < p; ++s)
    for (std::uint32_t tr = 0; tr < tk; ++tr)
      for (std::uint32_t c = v; c-- > 0;) {  // the last chunk's backward ends first
        const std::uint32_t vs = c * p + s;
        const std::vector<Op>& ops = bwd[0][vs].ops;
        struct Pending {
          GradientBucket bucket;
          bool experts;
        };
        std::vector<Pending> all;
        for (bool experts : {false, true}) {
          if (experts && !split_experts) continue;
          for (GradientBucket& b : gradient_buckets(ops, experts, split_experts, par.overlap_grad_reduce,
                                                    gradient_bytes, bucket_cap))
            all.push_back({std::move(b), experts});
        }
        std::stable_sort(all.begin(), all.end(), [](const Pending& a, const Pending& b) {
          return a.bucket.ready_after_op < b.bucket.ready_after_op;
        });
        for (const Pending& pb : all) {
          const GradientBucket& b = pb.bucket;
          bool added = false;
          for (const std::vector<std::uint32_t>& members : reduction_groups(s, tr, pb.experts)) {
            if (members.size() < 2) continue;
            const auto [gpus, lanes] = group_lanes(members);
            std::vector<sim::TaskId> deps;
            if (par.overlap_grad_reduce) {
              // The op that completes the bucket, on every member: the k-th gradient-producing op of the chunk.
              std::size_t k = 0;
              for (std::size_t i = 0; i <= b.ready_after_op; ++i)
                if (ops[i].grad_parameters > 0) ++k;
              for (std::uint32_t r : members)
                if (simulated[r]) deps.push_back(chunk_backward.at({r, vs})[k - 1]);
            } else {
              for (std::uint32_t r : members)
                if (simulated[r]) deps.push_back(last_compute[r]);
            }
            const sim::TaskId ar =
                collectives.add(graph, std::string(grad_name) + std::to_string(vs) + (pb.experts ? ".experts" : ""),
                                kCategoryDpComm, CollectiveRequest{grad_op, gpus, b.size, 0}, lanes, deps);
            it.bucket_allreduce.push_back(ar);
            for (std::uint32_t r : members) {
              last_dp[r] = ar;
              has_dp[r] = true;
            }
            if (host) {
              // Issued by the backward hook that completes the bucket, or after the backward.
              std::size_t k = 0;
              if (par.overlap_grad_reduce)
                for (std::size_t i = 0; i <= b.ready_after_op; ++i)
                  if (ops[i].grad_parameters > 0) ++k;
              for (std::uint32_t r : members)
                if (simulated[r])
                  it.host.issue_after(r, par.overlap_grad_reduce ? chunk_backward.at({r, vs})[k - 1] : last_compute[r],
                                      ar, kCollectiveKernels);
            }
            added = true;
          }
          if (added && s == 0 && tr == 0) it.buckets.push_back(b);
        }
      }
  // Tied word embeddings with a pipeline: the first stage's embedding and the last stage's copy used by
  // the output layer each hold gradients; Megatron all-reduces them between the two stages (tensor rank
  // by tensor rank, V·h/t parameters) after the data-parallel reduction, before the optimizer
  // (finalize_model_grads → _allreduce_word_embedding_grads), on the compute stream.
  if (p > 1 && job.model.tied_embeddings) {
    const Bytes embedding_grads = msg.embedding_grads;
    for (std::uint32_t d = 0; d < replicas; ++d)
      for (std::uint32_t c = 0; c < cp; ++c)
        for (std::uint32_t tr = 0; tr < tk; ++tr) {
          const std::uint32_t first = layout.rank({tr, d, 0, c}), last = layout.rank({tr, d, p - 1, c});
          std::vector<sim::TaskId> deps = {last_compute[first], last_compute[last]};
          for (std::uint32_t r : {first, last})
            if (has_dp[r]) deps.push_back(last_dp[r]);
          const sim::StreamId lanes[] = {it.compute_stream[first], it.compute_stream[last]};
          const sim::TaskId reduce = collectives.add(
              graph, "allreduce.embedding_grads", kCategoryDpComm,
              CollectiveRequest{CollectiveOp::kAllReduce, {job.gpus[first], job.gpus[last]}, embedding_grads, 0},
              lanes, deps);
          if (host)
            for (std::uint32_t r : {first, last}) it.host.issue(r, reduce, kCollectiveKernels);
        }
  }
  // Optimizer: each rank over its parameters (with the distributed optimizer its shard: dense parameters
  // over dp·cp ranks, experts over (dp/ep)·cp), after its gradients are reduced.
  const bool half_weights = sixteen_bit(prec);
  const double dense_shards = double(par.dp) * cp, expert_shards = double(par.dp) / ep * cp;
  std::vector<sim::TaskId> optimizer_of(ranks, 0);
  for (std::uint32_t r = 0; r < ranks; ++r) {
    if (!simulated[r]) continue;
    const RankCoord c = layout.coord(r);
    double dense = 0, experts = 0;
    for (std::uint32_t ch = 0; ch < v; ++ch) {
      experts += bwd[0][ch * p + c.pp].expert_parameters;
      dense += bwd[0][ch * p + c.pp].parameters - bwd[0][ch * p + c.pp].expert_parameters;
    }
    const double params = par.distributed_optimizer ? dense / dense_shards + experts / expert_shards : dense + experts;
    const Op opt = optimizer_op(params, job.training.optimizer, gradient_bytes, half_weights);
    const sim::LabelId label = graph.add_label({opt.name, kCategoryCompute, op_args(opt, 0)});
    const sim::StreamId lane[] = {it.compute_stream[r]};
    std::vector<sim::TaskId> deps;
    if (has_dp[r]) deps.push_back(last_dp[r]);
    optimizer_of[r] =
        graph.add(label, lane, op_time(opt, sc.profile.gpu, prec) * sc.cluster.compute_slowdown(job.gpus[r]), deps);
    if (host) it.host.issue(r, optimizer_of[r], opt.kernels);
    it.optimizer_task.push_back(optimizer_of[r]);
  }
  // Distributed optimizer without overlap_param_gather: all-gather the updated 16-bit (or fp32) parameters of
  // each chunk over the groups that reduced them; the step ends when they are back.
  if (par.distributed_optimizer && !gather_params) {
    for (std::uint32_t s = 0; s < p; ++s)
      for (std::uint32_t tr = 0; tr < tk; ++tr)
        for (std::uint32_t c = 0; c < v; ++c)
          for (bool experts : {false, true}) {
            if (experts && !split_experts) continue;
            const std::uint32_t vs = c * p + s;
            const StageOps& so = bwd[0][vs];
            const double params = !split_experts ? so.parameters : experts ? so.expert_parameters
                                                                            : so.parameters - so.expert_parameters;
            for (const std::vector<std::uint32_t>& members : reduction_groups(s, tr, experts)) {
              if (members.size() < 2) continue;
              const auto [gpus, lanes] = group_lanes(members);
              std::vector<sim::TaskId> deps;
              for (std::uint32_t r : members)
                if (simulated[r]) deps.push_back(optimizer_of[r]);
              it.step_end_task.push_back(collectives.add(
                  graph, params_gather_name(vs, experts), kCategoryDpComm,
                  CollectiveRequest{CollectiveOp::kAllGather, gpus, bytes(params * element_bytes(prec)), 0}, lanes,
                  deps));
              if (host)
                for (std::uint32_t r : members)
                  if (simulated[r]) it.host.issue(r, it.step_end_task.back(), kCollectiveKernels, false);
            }
          }
  }
  for (sim::TaskId refill : input.refill_end) it.step_end_task.push_back(refill);
  it.input_streams = std::move(input.streams);
  return it;
}

}  // namespace clustersim::workloads
