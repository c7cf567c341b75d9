#include "workloads/ddp_graph.h"

#include <numeric>

#include "workloads/collective_model.h"
#include "workloads/compute_model.h"

namespace clustersim::workloads {

Bytes ddp_gradient_bytes(Precision) { return bytes(4); }

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

IterationGraph build_ddp_iteration(const Scenario& sc) {
  IterationGraph it;
  const std::uint32_t gpus = sc.cluster.gpu_count();
  const Precision prec = sc.training.precision;
  const std::vector<Op> fwd = forward_ops(sc.model, sc.parallel.micro_batch, prec);
  const std::vector<Op> bwd = backward_ops(sc.model, sc.parallel.micro_batch, prec);
  const Op opt = optimizer_op(sc.model.parameter_count());

  std::vector<Seconds> fwd_time, bwd_time;
  for (const Op& op : fwd) fwd_time.push_back(op_time(op, sc.profile.gpu, prec));
  for (const Op& op : bwd) bwd_time.push_back(op_time(op, sc.profile.gpu, prec));
  const Seconds opt_time = op_time(opt, sc.profile.gpu, prec);

  it.buckets = ddp_buckets(bwd, ddp_gradient_bytes(prec), kFirstBucketCap, sc.parallel.ddp_bucket);
  const bool communicate = sc.parallel.dp > 1;

  for (std::uint32_t g = 0; g < gpus; ++g) {
    it.compute_stream.push_back(it.graph.add_stream(g, kComputeStream));
    it.comm_stream.push_back(it.graph.add_stream(g, kDpCommStream));
  }
  // One label per (op, micro-batch), shared by every replica.
  std::vector<std::vector<sim::LabelId>> fwd_label(sc.parallel.grad_accum), bwd_label(sc.parallel.grad_accum);
  for (std::uint32_t mb = 0; mb < sc.parallel.grad_accum; ++mb) {
    for (const Op& op : fwd) fwd_label[mb].push_back(it.graph.add_label({op.name, kCategoryCompute, op_args(op, mb)}));
    for (const Op& op : bwd) bwd_label[mb].push_back(it.graph.add_label({op.name, kCategoryCompute, op_args(op, mb)}));
  }
  // bucket_ready[b][g]: the task on GPU g that completes bucket b in the last micro-batch.
  std::vector<std::vector<sim::TaskId>> bucket_ready(it.buckets.size());
  for (std::uint32_t g = 0; g < gpus; ++g) {
    const sim::StreamId cs[] = {it.compute_stream[g]};
    for (std::uint32_t mb = 0; mb < sc.parallel.grad_accum; ++mb) {
      for (std::size_t i = 0; i < fwd.size(); ++i) it.graph.add(fwd_label[mb][i], cs, fwd_time[i]);
      const bool last = mb + 1 == sc.parallel.grad_accum;
      std::size_t next_bucket = 0;
      for (std::size_t i = 0; i < bwd.size(); ++i) {
        const sim::TaskId t = it.graph.add(bwd_label[mb][i], cs, bwd_time[i]);
        while (last && next_bucket < it.buckets.size() && it.buckets[next_bucket].ready_after_op == i)
          bucket_ready[next_bucket++].push_back(t);
      }
    }
  }
  std::vector<std::uint32_t> all(gpus);
  std::iota(all.begin(), all.end(), 0u);
  if (communicate) {
    for (std::size_t b = 0; b < it.buckets.size(); ++b) {
      const GradientBucket& bucket = it.buckets[b];
      const RingCost cost = ring_allreduce_cost(sc.cluster, sc.profile.collectives, all, bucket.size);
      const double busbw = cost.total().raw() > 0
                               ? bucket.size.raw() * 2.0 * (gpus - 1) / gpus / cost.total().raw() / 1e9
                               : 0.0;
      it.bucket_allreduce.push_back(it.graph.add(
          {"allreduce.bucket" + std::to_string(b), kCategoryDpComm, it.comm_stream, cost.total(), bucket_ready[b],
           {{"bytes", bucket.size.raw(), {}},
            {"ranks", double(gpus), {}},
            {"algorithm", 0, "ring"},
            {"protocol", 0, "simple"},
            {"bus_bandwidth_GBps", busbw, {}},
            {"gradients", 0, bucket.first_op + " .. " + bucket.last_op}}}));
    }
  }
  const sim::LabelId opt_label = it.graph.add_label({opt.name, kCategoryCompute, op_args(opt, 0)});
  std::vector<sim::TaskId> opt_deps;
  if (!it.bucket_allreduce.empty()) opt_deps.push_back(it.bucket_allreduce.back());
  for (std::uint32_t g = 0; g < gpus; ++g) {
    const sim::StreamId cs[] = {it.compute_stream[g]};
    it.optimizer_task.push_back(it.graph.add(opt_label, cs, opt_time, opt_deps));
  }
  return it;
}

}  // namespace clustersim::workloads
