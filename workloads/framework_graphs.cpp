#include "workloads/framework_graphs.h"

#include <algorithm>
#include <cassert>
#include <map>

#include "workloads/collective_engine.h"
#include "workloads/compute_model.h"
#include "workloads/input_pipeline.h"

namespace clustersim::workloads {

namespace {

std::vector<sim::TaskArg> op_args(const Op& op, std::uint32_t micro_batch_index) {
  return {{"flops", op.flops.raw(), {}}, {"bytes", op.bytes.raw(), {}},
          {"micro_batch", double(micro_batch_index), {}}};
}

const Op& find_op(const std::vector<Op>& ops, const std::string& name) {
  const auto it = std::find_if(ops.begin(), ops.end(), [&](const Op& op) { return op.name == name; });
  assert(it != ops.end() && "the whole-model ops end with the loss");
  return *it;
}

std::vector<Op> without(std::vector<Op> ops, const std::string& name) {
  std::erase_if(ops, [&](const Op& op) { return op.name == name; });
  return ops;
}

// A memory estimate of the DDP composition with DDP's bucket copy replaced by `extra`.
MemoryEstimate ddp_parts_with(const Job& job, const calibrate::GpuPerformance& gpu, std::vector<MemoryPart> extra) {
  const MemoryEstimate ddp = estimate_ddp_memory(job, gpu);
  std::vector<MemoryPart> parts;
  for (const MemoryPart& p : ddp.parts)
    if (p.name.rfind("DDP gradient buckets", 0) != 0) parts.push_back(p);
  for (MemoryPart& p : extra) parts.push_back(std::move(p));
  return memory_verdict(std::move(parts), gpu.memory_capacity);
}

}  // namespace

std::vector<std::pair<std::size_t, std::size_t>> pack_tensors(const std::vector<Bytes>& sizes, Bytes limit) {
  std::vector<std::pair<std::size_t, std::size_t>> groups;
  Bytes current;
  bool open = false;
  std::size_t begin = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (open && current + sizes[i] > limit) {
      groups.emplace_back(begin, i - 1);
      open = false;
    }
    if (!open) {
      begin = i;
      current = Bytes{};
      open = true;
    }
    current += sizes[i];
  }
  if (open) groups.emplace_back(begin, sizes.size() - 1);
  return groups;
}

std::vector<GradientTensor> gradient_tensors(const std::vector<Op>& backward, const std::vector<Seconds>& op_time,
                                             Bytes bytes_per_gradient) {
  assert(backward.size() == op_time.size() && "one time per op");
  std::vector<GradientTensor> out;
  sim::SimTime t = 0;
  for (std::size_t i = 0; i < backward.size(); ++i) {
    t += sim::to_sim_time(op_time[i]);
    if (backward[i].grad_parameters <= 0) continue;
    out.push_back({backward[i].name, bytes_per_gradient * backward[i].grad_parameters, backward[i].grad_parameters, i, t});
  }
  return out;
}

std::vector<FusedAllReduce> horovod_responses(const std::vector<GradientTensor>& tensors, Seconds cycle,
                                              Bytes fusion) {
  const sim::SimTime c = sim::to_sim_time(cycle);
  std::vector<FusedAllReduce> out;
  std::size_t i = 0;
  while (i < tensors.size()) {
    // The tensors negotiated at one tick: ready at or before it, after the previous tick.
    const std::uint64_t tick = c > 0 ? std::uint64_t((tensors[i].ready + c - 1) / c) : std::uint64_t(i);
    std::size_t j = i;
    std::vector<Bytes> sizes;
    while (j < tensors.size() &&
           (c > 0 ? std::uint64_t((tensors[j].ready + c - 1) / c) == tick : j == i)) {
      assert((j == i || tensors[j].ready >= tensors[j - 1].ready) && "tensors in ready order");
      sizes.push_back(tensors[j].size);
      ++j;
    }
    for (const auto& [first, last] : pack_tensors(sizes, fusion)) {
      FusedAllReduce r;
      r.first = i + first;
      r.last = i + last;
      for (std::size_t k = r.first; k <= r.last; ++k) {
        r.size += tensors[k].size;
        r.parameters += tensors[k].parameters;
      }
      r.tick = c > 0 ? tick : 0;
      r.ready_after_op = tensors[r.last].op;
      out.push_back(r);
    }
    i = j;
  }
  return out;
}

JobGraph build_data_parallel_job(const Scenario& sc, const Job& job, sim::TaskGraph& graph,
                                 CollectiveEngine& collectives) {
  JobGraph it;
  const auto n = static_cast<std::uint32_t>(job.gpus.size());
  assert(n >= 1 && sc.cluster.node_of(job.gpus.front()) == sc.cluster.node_of(job.gpus.back()) &&
         "DataParallel is one process on one node (checked by the loader)");
  const Precision prec = job.training.precision;
  const std::uint32_t b = job.parallel.micro_batch;
  const ModelSpec& model = job.model;
  const calibrate::GpuPerformance& gpu = sc.profile.gpu;

  // The replicas run the model without the loss; GPU 0 runs the loss over all n·b samples.
  const AttentionKernel attention = job.parallel.attention;
  const FlashKernel kernel = job.parallel.flash_kernel;
  const std::vector<Op> fwd = without(eager_forward_ops(model, b, prec, attention, kernel), "loss.fwd");
  const std::vector<Op> bwd = without(eager_backward_ops(model, b, prec, attention, kernel), "loss.bwd");
  const Op loss_fwd = find_op(eager_forward_ops(model, b * n, prec, attention, kernel), "loss.fwd");
  const Op loss_bwd = find_op(eager_backward_ops(model, b * n, prec, attention, kernel), "loss.bwd");
  const Op opt = optimizer_op(model.parameter_count(), job.training.optimizer, ddp_gradient_bytes(prec).raw(), false);

  // Forward kernels are launched by n Python threads under one GIL (see the header).
  const Seconds gil_launch = gpu.kernel_launch * double(n);
  std::vector<Seconds> fwd_time, bwd_time;
  for (const Op& op : fwd) fwd_time.push_back(std::max(op_time(op, gpu, prec), gil_launch * op.kernels));
  for (const Op& op : bwd) bwd_time.push_back(op_time(op, gpu, prec));

  // Broadcast and reduce chunks over the parameters in registration (forward) order.
  std::vector<Bytes> tensor_bytes;
  for (auto op = bwd.rbegin(); op != bwd.rend(); ++op)
    if (op->grad_parameters > 0) tensor_bytes.push_back(ddp_gradient_bytes(prec) * op->grad_parameters);
  std::vector<Bytes> chunks;  // none on one GPU: DataParallel then calls the module directly
  for (const auto& [first, last] : n > 1 ? pack_tensors(tensor_bytes, kDataParallelChunk)
                                         : std::vector<std::pair<std::size_t, std::size_t>>{}) {
    Bytes s;
    for (std::size_t k = first; k <= last; ++k) s += tensor_bytes[k];
    chunks.push_back(s);
  }
  // Eager mixed precision (ddp_graph.h): every replica casts the weights it was given (its parameters are the
  // broadcast's outputs, not leaves, so autocast does not cache them either) and its 16-bit weight gradients
  // back to fp32 before they are reduced onto GPU 0, where AccumulateGrad adds them into .grad from the second
  // micro-batch on (one GPU: DataParallel calls the module itself, and that replica accumulates).
  const EagerExtras extras(fwd, bwd, prec, job.parallel.grad_accum, gpu, graph, n == 1, gil_launch);
  Op accumulate = copy_op("grads.accumulate", Bytes{});
  accumulate.bytes = bytes(12 * model.parameter_count());
  const Bytes input_share = micro_batch_input_bytes(model, b);
  const Bytes logits = bytes(double(b) * model.seq_len * model.vocab * element_bytes(prec));

  for (std::uint32_t g : job.gpus) {
    it.compute_stream.push_back(graph.add_stream(g, kComputeStream));
    it.comm_stream.push_back(graph.add_stream(g, kDpCommStream));
  }
  auto slowdown = [&](std::uint32_t rank) { return sc.cluster.compute_slowdown(job.gpus[rank]); };
  // GPU 0 reads the whole batch: the input pipeline of a job whose one reader takes b·n samples.
  Job whole_batch = job;
  whole_batch.parallel.micro_batch = b * n;
  const std::uint32_t ga = job.parallel.grad_accum;
  InputPipeline input = add_input_pipeline(sc, whole_batch, graph, {0}, ga);

  auto p2p = [&](const std::string& name, std::uint32_t from, std::uint32_t to, Bytes size,
                 std::span<const sim::TaskId> deps) {
    const sim::StreamId lanes[] = {it.comm_stream[from], it.comm_stream[to]};
    return collectives.add(graph, name, kCategoryDpComm,
                           CollectiveRequest{CollectiveOp::kSendRecv, {job.gpus[from], job.gpus[to]}, size, 0}, lanes,
                           deps);
  };
  const sim::StreamId cs0[] = {it.compute_stream[0]};
  sim::TaskId last_reduce = 0;
  std::optional<sim::TaskId> accumulated;  // GPU 0's latest accumulation of reduced gradients into .grad
  for (std::uint32_t mb = 0; mb < ga; ++mb) {
    const std::string tag = ".mb" + std::to_string(mb);
    const sim::TaskId batch_on_gpu0[] = {input.ready.at({0, mb})};
    // 1–2. Scatter the inputs, 3. replicate the module. Both come after the previous micro-batch's accumulation
    // into .grad, which runs on the same (current) stream of GPU 0.
    std::vector<sim::TaskId> scatter_deps = {batch_on_gpu0[0]};
    if (accumulated) scatter_deps.push_back(*accumulated);
    std::vector<sim::TaskId> scatter(n);
    for (std::uint32_t r = 1; r < n; ++r)
      scatter[r] = p2p("scatter.input.r" + std::to_string(r) + tag, 0, r, input_share, scatter_deps);
    // Issued after the scatter on GPU 0's stream (DataParallel.forward scatters, then replicates).
    sim::TaskId broadcast = 0;
    const std::vector<sim::TaskId> after_accumulate =
        accumulated ? std::vector<sim::TaskId>{*accumulated} : std::vector<sim::TaskId>{};
    for (std::size_t c = 0; c < chunks.size(); ++c)
      broadcast =
          collectives.add(graph, "replicate.broadcast.chunk" + std::to_string(c) + tag, kCategoryDpComm,
                          CollectiveRequest{CollectiveOp::kBroadcast, job.gpus, chunks[c], 0}, it.comm_stream,
                          c == 0 ? std::span<const sim::TaskId>(after_accumulate) : std::span<const sim::TaskId>{});
    // 4. The replicas' forwards.
    std::vector<sim::TaskId> forward_end(n);
    for (std::uint32_t r = 0; r < n; ++r) {
      const sim::StreamId cs[] = {it.compute_stream[r]};
      std::vector<sim::TaskId> first_deps = {broadcast, r == 0 ? batch_on_gpu0[0] : scatter[r]};
      if (chunks.empty()) first_deps.erase(first_deps.begin());
      for (std::size_t i = 0; i < fwd.size(); ++i) {
        const sim::LabelId label = graph.add_label({fwd[i].name, kCategoryCompute, op_args(fwd[i], mb)});
        forward_end[r] = graph.add(label, cs, fwd_time[i] * slowdown(r),
                                   i == 0 ? std::span<const sim::TaskId>(first_deps) : std::span<const sim::TaskId>{});
        if (i == 0)
          forward_end[r] = extras.add_weight_cast(graph, cs, mb, slowdown(r), nullptr, r).value_or(forward_end[r]);
      }
    }
    // 5. Gather the logits, 6. loss on GPU 0 and the scatter of its gradient.
    std::vector<sim::TaskId> loss_deps = {forward_end[0]};
    for (std::uint32_t r = 1; r < n; ++r) {
      const sim::TaskId dep[] = {forward_end[r]};
      loss_deps.push_back(p2p("gather.logits.r" + std::to_string(r) + tag, r, 0, logits, dep));
    }
    const sim::LabelId loss_fwd_label = graph.add_label({loss_fwd.name, kCategoryCompute, op_args(loss_fwd, mb)});
    const sim::LabelId loss_bwd_label = graph.add_label({loss_bwd.name, kCategoryCompute, op_args(loss_bwd, mb)});
    graph.add(loss_fwd_label, cs0, op_time(loss_fwd, gpu, prec) * slowdown(0), loss_deps);
    const sim::TaskId loss_grad[] = {graph.add(loss_bwd_label, cs0, op_time(loss_bwd, gpu, prec) * slowdown(0))};
    std::vector<sim::TaskId> grad_in(n, loss_grad[0]);
    for (std::uint32_t r = 1; r < n; ++r)
      grad_in[r] = p2p("scatter.logits_grad.r" + std::to_string(r) + tag, 0, r, logits, loss_grad);
    // The scatter's copies run on GPU 0's current stream (a peer copy is issued on its source's stream), so
    // replica 0's backward queues behind them.
    grad_in[0] = grad_in[n - 1];
    // 7. The replicas' backward, then the gradients reduced onto GPU 0.
    std::vector<sim::TaskId> backward_end;
    for (std::uint32_t r = 0; r < n; ++r) {
      const sim::StreamId cs[] = {it.compute_stream[r]};
      const sim::TaskId first[] = {grad_in[r]};
      sim::TaskId t = 0;
      for (std::size_t i = 0; i < bwd.size(); ++i) {
        const sim::LabelId label = graph.add_label({bwd[i].name, kCategoryCompute, op_args(bwd[i], mb)});
        t = graph.add(label, cs, bwd_time[i] * slowdown(r),
                      i == 0 ? std::span<const sim::TaskId>(first) : std::span<const sim::TaskId>{});
        t = extras.add_epilogue(graph, cs, i, mb, slowdown(r), nullptr, r).value_or(t);
      }
      backward_end.push_back(t);
    }
    for (std::size_t c = 0; c < chunks.size(); ++c)
      last_reduce = collectives.add(graph, "reduce_add.chunk" + std::to_string(c) + tag, kCategoryDpComm,
                                    CollectiveRequest{CollectiveOp::kReduce, job.gpus, chunks[c], 0}, it.comm_stream,
                                    c == 0 ? std::span<const sim::TaskId>(backward_end) : std::span<const sim::TaskId>{});
    if (chunks.empty()) last_reduce = backward_end[0];
    if (mb > 0 && !chunks.empty()) {
      const sim::LabelId label = graph.add_label({accumulate.name, kCategoryEager, op_args(accumulate, mb)});
      const sim::TaskId dep[] = {last_reduce};
      last_reduce = graph.add(label, cs0, op_time(accumulate, gpu, prec) * slowdown(0), dep);
      accumulated = last_reduce;
    }
  }
  // 8. The optimizer on GPU 0 alone (after GradScaler's unscale with FP16, ddp_graph.h).
  const sim::TaskId reduced[] = {last_reduce};
  last_reduce = extras.add_unscale(graph, cs0, reduced, slowdown(0), nullptr, 0).value_or(last_reduce);
  const sim::LabelId opt_label = graph.add_label({opt.name, kCategoryCompute, op_args(opt, 0)});
  const sim::TaskId opt_deps[] = {last_reduce};
  it.optimizer_task.push_back(graph.add(opt_label, cs0, op_time(opt, gpu, prec) * slowdown(0), opt_deps));
  for (sim::TaskId t : input.refill_end) it.step_end_task.push_back(t);
  it.input_streams = std::move(input.streams);
  return it;
}

JobGraph build_horovod_job(const Scenario& sc, const Job& job, sim::TaskGraph& graph, CollectiveEngine& collectives) {
  JobGraph it;
  const auto ranks = static_cast<std::uint32_t>(job.gpus.size());
  const Precision prec = job.training.precision;
  const ParallelPlan& par = job.parallel;
  const calibrate::GpuPerformance& gpu = sc.profile.gpu;
  const std::vector<Op> fwd = eager_forward_ops(job.model, par.micro_batch, prec, par.attention, par.flash_kernel);
  const std::vector<Op> bwd = eager_backward_ops(job.model, par.micro_batch, prec, par.attention, par.flash_kernel);
  const Op opt = optimizer_op(job.model.parameter_count(), job.training.optimizer, ddp_gradient_bytes(prec).raw(),
                              false);
  std::vector<Seconds> fwd_time, bwd_time;
  for (const Op& op : fwd) fwd_time.push_back(op_time(op, gpu, prec));
  for (const Op& op : bwd) bwd_time.push_back(op_time(op, gpu, prec));

  auto slowdown = [&](std::uint32_t rank) { return sc.cluster.compute_slowdown(job.gpus[rank]); };
  double slowest = 1.0;
  for (std::uint32_t r = 0; r < ranks; ++r) slowest = std::max(slowest, slowdown(r));
  const std::uint32_t ga = par.grad_accum;
  // Eager mixed precision and gradient accumulation (ddp_graph.h): Horovod's hooks, like DDP's, see a gradient
  // after its cast and accumulation, so the last micro-batch's epilogues count in the tensors' ready times.
  const EagerExtras extras(fwd, bwd, prec, ga, gpu, graph);
  std::vector<Seconds> slowest_bwd;
  for (std::size_t i = 0; i < bwd.size(); ++i)
    slowest_bwd.push_back((bwd_time[i] + extras.epilogue_time(i, ga - 1)) * slowest);
  const std::vector<GradientTensor> tensors = gradient_tensors(bwd, slowest_bwd, ddp_gradient_bytes(prec));
  const std::vector<FusedAllReduce> responses = horovod_responses(tensors, par.horovod_cycle, par.horovod_fusion);
  const bool communicate = ranks > 1;

  for (std::uint32_t g : job.gpus) {
    it.compute_stream.push_back(graph.add_stream(g, kComputeStream));
    it.comm_stream.push_back(graph.add_stream(g, kDpCommStream));
  }
  std::vector<std::uint32_t> readers(ranks);
  for (std::uint32_t r = 0; r < ranks; ++r) readers[r] = r;
  InputPipeline input = add_input_pipeline(sc, job, graph, readers, ga);
  // bwd_task[r][i]: rank r's backward op i of the last micro-batch; backward_start: rank 0's last forward op.
  std::vector<std::vector<sim::TaskId>> bwd_task(ranks);
  sim::TaskId backward_start = 0;
  for (std::uint32_t r = 0; r < ranks; ++r) {
    const sim::StreamId cs[] = {it.compute_stream[r]};
    for (std::uint32_t mb = 0; mb < ga; ++mb) {
      const sim::TaskId first_input[] = {input.ready.at({r, mb})};
      for (std::size_t i = 0; i < fwd.size(); ++i) {
        const sim::LabelId label = graph.add_label({fwd[i].name, kCategoryCompute, op_args(fwd[i], mb)});
        sim::TaskId t = graph.add(label, cs, fwd_time[i] * slowdown(r),
                                  i == 0 ? std::span<const sim::TaskId>(first_input) : std::span<const sim::TaskId>{});
        if (i == 0) t = extras.add_weight_cast(graph, cs, mb, slowdown(r), nullptr, r).value_or(t);
        if (r == 0 && mb + 1 == ga) backward_start = t;
      }
      for (std::size_t i = 0; i < bwd.size(); ++i) {
        const sim::LabelId label = graph.add_label({bwd[i].name, kCategoryCompute, op_args(bwd[i], mb)});
        sim::TaskId t = graph.add(label, cs, bwd_time[i] * slowdown(r));
        t = extras.add_epilogue(graph, cs, i, mb, slowdown(r), nullptr, r).value_or(t);
        if (mb + 1 == ga) bwd_task[r].push_back(t);
      }
    }
  }

  // The background thread's ticks: a chain of cycle-long waits from the backward's start on rank 0.
  std::vector<sim::TaskId> tick(1, backward_start);  // tick[k] ends at k·cycle
  if (communicate && !responses.empty() && par.horovod_cycle.raw() > 0) {
    const sim::StreamId lane[] = {graph.add_stream(job.gpus[0], kHorovodCycleStream)};
    const sim::LabelId label = graph.add_label({"horovod.cycle", kCategoryHorovodCycle, {}});
    for (std::uint64_t k = 1; k <= responses.back().tick; ++k) {
      const sim::TaskId dep[] = {tick.back()};
      tick.push_back(graph.add(label, lane, par.horovod_cycle, k == 1 ? std::span<const sim::TaskId>(dep)
                                                                      : std::span<const sim::TaskId>{}));
    }
    // Waiting for the coordinator's next tick is Horovod's communication overhead: where nothing else runs,
    // every rank's breakdown counts it as exposed communication, not idle.
    it.other_comm_streams.assign(ranks, std::vector<sim::StreamId>{lane[0]});
  }
  // Hierarchical: the job's ranks by node, local rank = position within its node.
  std::map<std::uint32_t, std::vector<std::uint32_t>> ranks_by_node;
  for (std::uint32_t r = 0; r < ranks; ++r) ranks_by_node[sc.cluster.node_of(job.gpus[r])].push_back(r);
  bool hierarchical = par.horovod_hierarchical && ranks_by_node.size() < ranks;
  for (const auto& [node, members] : ranks_by_node)
    hierarchical = hierarchical && members.size() == ranks_by_node.begin()->second.size();
  const std::uint32_t local = hierarchical ? static_cast<std::uint32_t>(ranks_by_node.begin()->second.size()) : 1;

  std::vector<sim::TaskId> last_comm;  // per rank: its last task of the step's communication
  for (std::size_t k = 0; k < responses.size() && communicate; ++k) {
    const FusedAllReduce& resp = responses[k];
    const std::string name = "horovod.allreduce.response" + std::to_string(k);
    const bool fused = resp.last > resp.first;
    // Per rank: its last tensor of the response is ready and the coordinator's tick has come; a fused
    // response is first copied into the fusion buffer.
    std::vector<std::vector<sim::TaskId>> entry(ranks);
    const sim::LabelId in_label =
        fused ? graph.add_label({name + ".memcpy_in", kCategoryDpComm, {{"bytes", resp.size.raw(), {}}}}) : 0;
    for (std::uint32_t r = 0; r < ranks; ++r) {
      entry[r] = {bwd_task[r][resp.ready_after_op]};
      if (par.horovod_cycle.raw() > 0) entry[r].push_back(tick.at(resp.tick));
      if (fused) {
        const sim::StreamId lane[] = {it.comm_stream[r]};
        entry[r] = {graph.add(in_label, lane, op_time(copy_op("memcpy", resp.size), gpu, prec), entry[r])};
      }
    }
    auto entry_of = [&](const std::vector<std::uint32_t>& members) {
      std::vector<sim::TaskId> deps;
      for (std::uint32_t r : members) deps.insert(deps.end(), entry[r].begin(), entry[r].end());
      return deps;
    };
    std::vector<sim::TaskId> done(ranks);
    if (!hierarchical) {
      const sim::TaskId ar = collectives.add(graph, name, kCategoryDpComm,
                                             CollectiveRequest{CollectiveOp::kAllReduce, job.gpus, resp.size, 0},
                                             it.comm_stream, entry_of(readers));
      it.bucket_allreduce.push_back(ar);
      std::fill(done.begin(), done.end(), ar);
    } else {
      // ReduceScatter within each node, AllReduce of the shard across nodes (via host memory), AllGather.
      std::vector<sim::TaskId> scattered(ranks);
      for (const auto& [node, members] : ranks_by_node) {
        std::vector<std::uint32_t> gpus;
        std::vector<sim::StreamId> lanes;
        for (std::uint32_t r : members) {
          gpus.push_back(job.gpus[r]);
          lanes.push_back(it.comm_stream[r]);
        }
        const sim::TaskId rs = collectives.add(graph, name + ".reducescatter.node" + std::to_string(node),
                                               kCategoryDpComm,
                                               CollectiveRequest{CollectiveOp::kReduceScatter, gpus, resp.size, 0},
                                               lanes, entry_of(members));
        for (std::uint32_t r : members) scattered[r] = rs;
      }
      // One node: the cross-node stage has nothing to do.
      const bool cross = ranks_by_node.size() > 1;
      const Bytes shard = resp.size / double(local);
      const Seconds stage = shard / job.training.host_to_device;
      const sim::LabelId d2h = graph.add_label({name + ".d2h", kCategoryDpComm, {{"bytes", shard.raw(), {}}}});
      const sim::LabelId h2d = graph.add_label({name + ".h2d", kCategoryDpComm, {{"bytes", shard.raw(), {}}}});
      std::vector<sim::TaskId> on_host(ranks);
      for (std::uint32_t r = 0; r < ranks && cross; ++r) {
        const sim::StreamId lane[] = {it.comm_stream[r]};
        const sim::TaskId dep[] = {scattered[r]};
        on_host[r] = graph.add(d2h, lane, stage, dep);
      }
      std::vector<sim::TaskId> reduced(ranks);
      for (std::uint32_t l = 0; l < local && cross; ++l) {
        std::vector<std::uint32_t> peers;  // the l-th rank of every node
        for (const auto& [node, members] : ranks_by_node) peers.push_back(members[l]);
        const sim::TaskId ar = collectives.add_over_ranks(graph, name + ".cross_allreduce.local" + std::to_string(l),
                                                          kCategoryDpComm, CollectiveOp::kAllReduce, shard, job.gpus,
                                                          peers, it.comm_stream, on_host);
        for (const auto& [node, members] : ranks_by_node) reduced[members[l]] = ar;
      }
      std::vector<sim::TaskId> back = scattered;
      for (std::uint32_t r = 0; r < ranks && cross; ++r) {
        const sim::StreamId lane[] = {it.comm_stream[r]};
        const sim::TaskId dep[] = {reduced[r]};
        back[r] = graph.add(h2d, lane, stage, dep);
      }
      for (const auto& [node, members] : ranks_by_node) {
        const sim::TaskId ag = collectives.add_over_ranks(graph, name + ".allgather.node" + std::to_string(node),
                                                          kCategoryDpComm, CollectiveOp::kAllGather, resp.size,
                                                          job.gpus, members, it.comm_stream, back);
        for (std::uint32_t r : members) done[r] = ag;
      }
    }
    if (fused) {
      const sim::LabelId out_label =
          graph.add_label({name + ".memcpy_out", kCategoryDpComm, {{"bytes", resp.size.raw(), {}}}});
      for (std::uint32_t r = 0; r < ranks; ++r) {
        const sim::StreamId lane[] = {it.comm_stream[r]};
        const sim::TaskId dep[] = {done[r]};
        done[r] = graph.add(out_label, lane, op_time(copy_op("memcpy", resp.size), gpu, prec), dep);
      }
    }
    last_comm = done;
  }
  for (const FusedAllReduce& resp : responses) {
    GradientBucket bucket;
    bucket.size = resp.size;
    bucket.parameters = resp.parameters;
    bucket.ready_after_op = resp.ready_after_op;
    bucket.first_op = tensors[resp.first].name;
    bucket.last_op = tensors[resp.last].name;
    it.buckets.push_back(bucket);
  }
  if (hierarchical) it.bucket_allreduce.clear();
  const sim::LabelId opt_label = graph.add_label({opt.name, kCategoryCompute, op_args(opt, 0)});
  for (std::uint32_t r = 0; r < ranks; ++r) {
    const sim::StreamId cs[] = {it.compute_stream[r]};
    std::vector<sim::TaskId> deps;
    if (!last_comm.empty()) deps.push_back(last_comm[r]);
    extras.add_unscale(graph, cs, deps, slowdown(r), nullptr, r);  // FP16: GradScaler (ddp_graph.h)
    it.optimizer_task.push_back(graph.add(opt_label, cs, op_time(opt, gpu, prec) * slowdown(r), deps));
  }
  for (sim::TaskId t : input.refill_end) it.step_end_task.push_back(t);
  it.input_streams = std::move(input.streams);
  return it;
}

MemoryEstimate estimate_data_parallel_memory(const Job& job, const calibrate::GpuPerformance& gpu) {
  const double n = double(job.gpus.size());
  const double own = double(job.parallel.micro_batch) * job.model.seq_len * job.model.vocab;  // b·s·V
  const double gathered = n * own;
  const double e = element_bytes(job.training.precision);
  // The replicas' parameters are outputs of Broadcast, so their gradients wait in the autograd input buffer of
  // BroadcastBackward (ReduceAddCoalesced) until every replica's backward has ended: the fp32 gradients of the
  // whole model on every GPU. Its reduction onto GPU 0 allocates them once more there, which under gradient
  // accumulation the .grad of the earlier micro-batches then takes in (the first micro-batch's becomes .grad).
  const double gradients = job.model.parameter_count() * ddp_gradient_bytes(job.training.precision).raw();
  std::vector<MemoryPart> extra = {{"gathered logits on GPU 0 (n·b·s·V)", bytes(gathered * e)},
                                   {"loss log-softmax on GPU 0 (fp32, n·b·s·V)", bytes(gathered * 4)}};
  if (n > 1) {
    extra.push_back({"replicas' gradients awaiting the reduce (BroadcastBackward)", bytes(gradients)});
    if (job.parallel.grad_accum > 1)
      extra.push_back({"reduced gradients on GPU 0 before accumulation", bytes(gradients)});
  }
  MemoryEstimate est = ddp_parts_with(job, gpu, std::move(extra));
  // The replica's activations count its own loss's fp32 logits, 4·b·s·V·e/2 (estimate_ddp_memory); here the
  // loss runs on GPU 0 over the gathered logits, which hold this replica's share already: take them out.
  for (MemoryPart& p : est.parts)
    if (p.name.rfind("activations", 0) == 0) p.size = p.size - bytes(2 * e * own);
  return memory_verdict(std::move(est.parts), gpu.memory_capacity);
}

MemoryEstimate estimate_horovod_memory(const Job& job, const calibrate::GpuPerformance& gpu) {
  return ddp_parts_with(job, gpu, {{"Horovod fusion buffer", job.parallel.horovod_fusion}});
}

}  // namespace clustersim::workloads
