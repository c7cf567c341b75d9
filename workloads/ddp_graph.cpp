#include "workloads/ddp_graph.h"

#include <algorithm>
#include <numeric>

#include "workloads/collective_engine.h"
#include "workloads/compute_model.h"
#include "workloads/input_pipeline.h"

namespace clustersim::workloads {

Bytes ddp_gradient_bytes(Precision) { return bytes(4); }

double autocast_weight_elements(const Op& op, Precision precision) {
  if (!sixteen_bit(precision) || op.kind != OpKind::kGemm || op.attention_core) return 0;
  // A linear layer's GEMMs (transformer_ops.cpp): forward [T x K]·[K x N], weight K·N; the weight
  // gradient [K x T]·[T x N], weight m·n. Per batch entry (the grouped experts').
  if (op.name.ends_with(".fwd")) return op.batch * op.k * op.n;
  if (op.name.ends_with(".wgrad")) return op.batch * op.m * op.n;
  return 0;
}

Op autocast_weights_op(const std::vector<Op>& forward, Precision precision) {
  Op op = copy_op("amp.weight_cast", Bytes{});
  double elements = 0, tensors = 0;
  for (const Op& f : forward) {
    const double e = autocast_weight_elements(f, precision);
    elements += e;
    tensors += e > 0 ? 1 : 0;
  }
  op.bytes = bytes(6 * elements);
  op.kernels = tensors;
  return op;
}

double tied_head_elements(const std::vector<Op>& backward) {
  for (const Op& op : backward)  // transformer_ops.cpp: a tied head's GEMM completes no parameter's gradient
    if (op.name == "lm_head.wgrad" && op.grad_parameters <= 0) return op.batch * op.m * op.n;
  return 0;
}

Op gradient_epilogue_op(const Op& backward_op, Precision precision, bool accumulate, double tied_elements) {
  const std::string& name = backward_op.name;
  std::string base = name;
  for (std::string_view suffix : {".wgrad", ".bwd"})
    if (base.ends_with(suffix)) base.resize(base.size() - suffix.size());
  const double cast = name.ends_with(".wgrad") ? autocast_weight_elements(backward_op, precision) : 0;
  // Accumulated elements: into .grad from the second micro-batch; a tied embedding's two gradients every time.
  const double add = (accumulate ? backward_op.grad_parameters : 0) + (name == "embed.bwd" ? tied_elements : 0);
  Op op = copy_op(base + (cast > 0 && add > 0 ? ".grad_cast_accumulate"
                          : cast > 0          ? ".grad_cast"
                                              : ".grad_accumulate"),
                  Bytes{});
  op.bytes = bytes(6 * cast + 12 * add);
  op.kernels = (cast > 0 ? 1 : 0) + (add > 0 ? 1 : 0);
  return op;
}

Op grad_unscale_op(double parameters, Precision precision) {
  Op op = copy_op("amp.grad_unscale", Bytes{});
  // torch.amp.GradScaler.unscale_: _amp_foreach_non_finite_check_and_unscale_ over the fp32 gradients.
  op.bytes = bytes(precision == Precision::kFP16 ? 8 * parameters : 0);
  return op;
}

std::vector<GradientBucket> ddp_buckets(const std::vector<Op>& backward, Bytes bytes_per_gradient,
                                        Bytes first_bucket_cap, Bytes bucket_cap) {
  std::vector<GradientBucket> buckets;
  GradientBucket current;
  for (std::size_t i = 0; i < backward.size(); ++i) {
    const Op& op = backward[i];
    if (op.grad_parameters <= 0) continue;
    if (current.parameters == 0) current.first_op = op.name;
    current.parameters += op.grad_parameters;
    current.size += bytes_per_gradient * op.grad_parameters;
    current.ready_after_op = i;
    current.last_op = op.name;
    const Bytes cap = buckets.empty() ? first_bucket_cap : bucket_cap;
    if (current.size >= cap) {
      buckets.push_back(current);
      current = GradientBucket{};
    }
  }
  if (current.parameters > 0) buckets.push_back(current);
  return buckets;
}

namespace {

std::vector<sim::TaskArg> op_args(const Op& op, std::uint32_t micro_batch_index) {
  return {{"flops", op.flops.raw(), {}}, {"bytes", op.bytes.raw(), {}},
          {"micro_batch", double(micro_batch_index), {}}};
}

}  // namespace

EagerExtras::EagerExtras(const std::vector<Op>& forward, const std::vector<Op>& backward, Precision precision,
                         std::uint32_t grad_accum, const calibrate::GpuPerformance& gpu, sim::TaskGraph& graph,
                         bool accumulate, Seconds forward_floor_per_kernel) {
  auto make = [&](const Op& op, std::uint32_t mb, Seconds floor_per_kernel) {
    Piece p;
    if (op.bytes.raw() <= 0) return p;
    p.label = graph.add_label({op.name, kCategoryEager, op_args(op, mb)});
    p.time = std::max(op_time(op, gpu, precision), floor_per_kernel * op.kernels);
    p.kernels = op.kernels;
    p.present = true;
    return p;
  };
  const Op cast = autocast_weights_op(forward, precision);
  const double tied = tied_head_elements(backward);
  double parameters = 0;  // every parameter's gradient completes in exactly one backward op
  for (const Op& op : backward) parameters += op.grad_parameters;
  unscale_ = make(grad_unscale_op(parameters, precision), grad_accum - 1, Seconds{});
  for (std::uint32_t mb = 0; mb < grad_accum; ++mb) {
    weight_cast_.push_back(make(cast, mb, forward_floor_per_kernel));
    std::vector<Piece> epilogue;
    for (const Op& op : backward)
      epilogue.push_back(make(gradient_epilogue_op(op, precision, accumulate && mb > 0, tied), mb, Seconds{}));
    epilogue_.push_back(std::move(epilogue));
  }
}

std::optional<sim::TaskId> EagerExtras::add(const Piece& p, sim::TaskGraph& graph,
                                            std::span<const sim::StreamId> stream, double slowdown, HostProgram* host,
                                            std::uint32_t rank, std::span<const sim::TaskId> deps) const {
  if (!p.present) return std::nullopt;
  const sim::TaskId t = graph.add(p.label, stream, p.time * slowdown, deps);
  if (host) host->issue(rank, t, p.kernels);
  return t;
}

Seconds EagerExtras::epilogue_time(std::size_t op, std::uint32_t mb) const {
  const Piece& p = epilogue_.at(mb).at(op);
  return p.present ? p.time : Seconds{};
}

JobGraph build_ddp_job(const Scenario& sc, const Job& job, sim::TaskGraph& graph, CollectiveEngine& collectives) {
  JobGraph it;
  const auto ranks = static_cast<std::uint32_t>(job.gpus.size());
  const Precision prec = job.training.precision;
  const ParallelPlan& par = job.parallel;
  const std::vector<Op> fwd = eager_forward_ops(job.model, par.micro_batch, prec, par.attention, par.flash_kernel);
  const std::vector<Op> bwd = eager_backward_ops(job.model, par.micro_batch, prec, par.attention, par.flash_kernel);
  // PyTorch AMP keeps fp32 weights and gradients: the optimizer writes no 16-bit copy.
  const Op opt = optimizer_op(job.model.parameter_count(), job.training.optimizer, ddp_gradient_bytes(prec).raw(),
                              false);

  std::vector<Seconds> fwd_time, bwd_time;
  for (const Op& op : fwd) fwd_time.push_back(op_time(op, sc.profile.gpu, prec));
  for (const Op& op : bwd) bwd_time.push_back(op_time(op, sc.profile.gpu, prec));
  const Seconds opt_time = op_time(opt, sc.profile.gpu, prec);

  it.buckets = ddp_buckets(bwd, ddp_gradient_bytes(prec), kFirstBucketCap, job.parallel.ddp_bucket);
  const bool communicate = job.parallel.dp > 1;
  // Host dispatch (host_dispatch.h): a rank's kernels in add order; each bucket's AllReduce is issued by the
  // autograd hook that completes it, right after that kernel; no synchronisation before the optimizer.
  it.host = HostProgram(job.training.host_dispatch_per_kernel, ranks);
  const bool host = it.host.enabled();

  for (std::uint32_t g : job.gpus) {
    it.compute_stream.push_back(graph.add_stream(g, kComputeStream));
    it.comm_stream.push_back(graph.add_stream(g, kDpCommStream));
  }
  // A slow GPU (a what-if) stretches every kernel it runs.
  auto slowdown = [&](std::uint32_t rank) { return sc.cluster.compute_slowdown(job.gpus[rank]); };
  // One label per (op, micro-batch), shared by every replica.
  const std::uint32_t ga = job.parallel.grad_accum;
  std::vector<std::vector<sim::LabelId>> fwd_label(ga), bwd_label(ga);
  for (std::uint32_t mb = 0; mb < ga; ++mb) {
    for (const Op& op : fwd) fwd_label[mb].push_back(graph.add_label({op.name, kCategoryCompute, op_args(op, mb)}));
    for (const Op& op : bwd) bwd_label[mb].push_back(graph.add_label({op.name, kCategoryCompute, op_args(op, mb)}));
  }
  // Eager mixed precision and gradient accumulation (the header of autocast_weights_op): the forward's weight
  // casts after its first op (the embedding, which autocast leaves in fp32), and each gradient's cast and
  // accumulation after the op that produces it.
  const EagerExtras extras(fwd, bwd, prec, ga, sc.profile.gpu, graph);
  // Every rank reads its own micro-batches (input_pipeline.h).
  std::vector<std::uint32_t> readers(ranks);
  for (std::uint32_t r = 0; r < ranks; ++r) readers[r] = r;
  InputPipeline input = add_input_pipeline(sc, job, graph, readers, ga);
  // bucket_ready[b][r]: the task on rank r that completes bucket b in the last micro-batch — its copy into the
  // bucket. With gradient_as_bucket_view=False (PyTorch's default) the reducer's autograd hook copies each
  // gradient into its bucket on the compute stream, and finalize_backward copies the reduced buckets back into
  // the gradients after the last AllReduce: two device-to-device copies of the step's gradients.
  std::vector<std::vector<sim::TaskId>> bucket_ready(it.buckets.size());
  std::vector<sim::LabelId> copy_in_label;
  std::vector<Seconds> copy_in_time;
  Bytes gradient_bytes;
  for (std::size_t b = 0; communicate && b < it.buckets.size(); ++b) {
    const Op in = copy_op("ddp.bucket" + std::to_string(b) + ".copy_in", it.buckets[b].size);
    copy_in_label.push_back(graph.add_label({in.name, kCategoryCompute, op_args(in, ga - 1)}));
    copy_in_time.push_back(op_time(in, sc.profile.gpu, prec));
    gradient_bytes += it.buckets[b].size;
  }
  for (std::uint32_t r = 0; r < ranks; ++r) {
    const sim::StreamId cs[] = {it.compute_stream[r]};
    const double slow = slowdown(r);
    for (std::uint32_t mb = 0; mb < ga; ++mb) {
      const sim::TaskId first_input[] = {input.ready.at({r, mb})};
      for (std::size_t i = 0; i < fwd.size(); ++i) {
        const sim::TaskId t = graph.add(fwd_label[mb][i], cs, fwd_time[i] * slow,
                                        i == 0 ? std::span<const sim::TaskId>(first_input) : std::span<const sim::TaskId>{});
        if (host) it.host.issue(r, t, fwd[i].kernels);
        if (i == 0) extras.add_weight_cast(graph, cs, mb, slow, host ? &it.host : nullptr, r);
      }
      const bool last = mb + 1 == ga;
      std::size_t next_bucket = 0;
      for (std::size_t i = 0; i < bwd.size(); ++i) {
        const sim::TaskId t = graph.add(bwd_label[mb][i], cs, bwd_time[i] * slow);
        if (host) it.host.issue(r, t, bwd[i].kernels);
        extras.add_epilogue(graph, cs, i, mb, slow, host ? &it.host : nullptr, r);
        while (communicate && last && next_bucket < it.buckets.size() && it.buckets[next_bucket].ready_after_op == i) {
          const sim::TaskId copied = graph.add(copy_in_label[next_bucket], cs, copy_in_time[next_bucket] * slow);
          if (host) it.host.issue(r, copied, 1);
          bucket_ready[next_bucket++].push_back(copied);
        }
      }
    }
  }
  if (communicate) {
    for (std::size_t b = 0; b < it.buckets.size(); ++b) {
      it.bucket_allreduce.push_back(collectives.add(
          graph, "allreduce.bucket" + std::to_string(b), kCategoryDpComm,
          CollectiveRequest{CollectiveOp::kAllReduce, job.gpus, it.buckets[b].size, 0}, it.comm_stream,
          bucket_ready[b]));
      if (host)
        for (std::uint32_t r = 0; r < ranks; ++r)
          it.host.issue_after(r, bucket_ready[b][r], it.bucket_allreduce.back(), kCollectiveKernels);
    }
  }
  const sim::LabelId opt_label = graph.add_label({opt.name, kCategoryCompute, op_args(opt, 0)});
  std::vector<sim::TaskId> opt_deps;
  if (!it.bucket_allreduce.empty()) opt_deps.push_back(it.bucket_allreduce.back());
  const Op copy_out = copy_op("ddp.buckets.copy_out", gradient_bytes);
  const Seconds copy_out_time = op_time(copy_out, sc.profile.gpu, prec);
  const sim::LabelId copy_out_label = it.bucket_allreduce.empty()
                                          ? sim::kNewLabel
                                          : graph.add_label({copy_out.name, kCategoryCompute, op_args(copy_out, ga - 1)});
  for (std::uint32_t r = 0; r < ranks; ++r) {
    const sim::StreamId cs[] = {it.compute_stream[r]};
    if (!it.bucket_allreduce.empty()) {
      const sim::TaskId out = graph.add(copy_out_label, cs, copy_out_time * slowdown(r), opt_deps);
      if (host) it.host.issue(r, out, double(it.buckets.size()));
    }
    extras.add_unscale(graph, cs, opt_deps, slowdown(r), host ? &it.host : nullptr, r);  // FP16: GradScaler
    it.optimizer_task.push_back(graph.add(opt_label, cs, opt_time * slowdown(r), opt_deps));
    if (host) it.host.issue(r, it.optimizer_task.back(), opt.kernels);
  }
  for (sim::TaskId t : input.refill_end) it.step_end_task.push_back(t);
  it.input_streams = std::move(input.streams);
  return it;
}

}  // namespace clustersim::workloads
