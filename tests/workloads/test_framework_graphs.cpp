// torch.nn.DataParallel and Horovod step graphs (workloads/framework_graphs.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <string>

#include "sim/executor.h"
#include "tests/test_support.h"
#include "tests/test_profiles.h"
#include "workloads/collective_engine.h"
#include "workloads/framework_graphs.h"
#include "workloads/iteration_result.h"

using namespace clustersim;
using namespace clustersim::workloads;

namespace {

// The DDP test's model (l=2, h=1024, a=16, f=4h, V=51200, s=1024, tied embedding; P = 78,671,872), micro-batch 4,
// on `nodes` nodes × `per_node` GPUs, ANALYTICAL fidelity.
Scenario small(Framework fw, std::uint32_t nodes, std::uint32_t per_node) {
  Scenario sc = clustersim::testing::a100_like_cluster("framework-test", nodes, per_node);
  Job job;
  job.name = "framework-test";
  const std::uint32_t n = nodes * per_node;
  for (std::uint32_t g = 0; g < n; ++g) job.gpus.push_back(g);
  job.model = clustersim::testing::small_gpt();
  job.parallel = ParallelPlan{n, 4, 1, MiB(25)};
  job.parallel.framework = fw;
  job.training = TrainingJob{1000, 1, std::uint64_t(4) * n, Precision::kBF16};
  sc.jobs.push_back(job);
  return sc;
}

// Horovod on 2 nodes x 1 GPU with a 0.5 ms cycle and a 16 MiB fusion buffer: responses spread over several ticks.
Scenario small_horovod() {
  Scenario sc = small(Framework::kHorovod, 2, 1);
  sc.jobs[0].parallel.horovod_cycle = milliseconds(0.5);
  sc.jobs[0].parallel.horovod_fusion = MiB(16);
  return sc;
}

// One job's graph, run to the end.
struct Run {
  sim::Simulation simulation;
  sim::TaskGraph graph;
  std::unique_ptr<CollectiveEngine> collectives;
  JobGraph job;
  std::unique_ptr<sim::Executor> executor;
};

std::unique_ptr<Run> run(const Scenario& sc) {
  auto r = std::make_unique<Run>();
  r->collectives = std::make_unique<CollectiveEngine>(r->simulation, sc, nullptr);
  const Job& job = sc.jobs[0];
  r->job = job.parallel.framework == Framework::kDataParallel ? build_data_parallel_job(sc, job, r->graph, *r->collectives)
                                                              : build_horovod_job(sc, job, r->graph, *r->collectives);
  r->executor = std::make_unique<sim::Executor>(r->simulation, r->graph, r->collectives.get());
  r->executor->start();
  r->simulation.run();
  r->executor->finish();
  return r;
}

std::string text_arg(const sim::TaskLabel& label, const std::string& key) {
  for (const sim::TaskArg& a : label.args)
    if (a.key == key) return a.text;
  return {};
}
double number_arg(const sim::TaskLabel& label, const std::string& key) {
  for (const sim::TaskArg& a : label.args)
    if (a.key == key) return a.number;
  return -1;
}
bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

std::vector<sim::TaskId> named(const sim::TaskGraph& g, const std::string& prefix) {
  std::vector<sim::TaskId> out;
  for (sim::TaskId t = 0; t < g.size(); ++t)
    if (starts_with(g.label(t).name, prefix)) out.push_back(t);
  return out;
}

}  // namespace

TEST_CASE("framework DataParallel: GPU 0's traffic per step") {
  // n = 4 GPUs of one node, b = 4, s = 1,024, V = 51,200, bf16 autocast (e = 2, fp32 parameters and gradients),
  // P = 78,671,872 (test_ddp.cpp).
  //   out of GPU 0: scatter of the inputs (n−1)·b·(s+1)·8 = 3·4·1,025·8            =        98,400 B
  //                 replicate: Broadcast of the fp32 parameters P·4                 =   314,687,488 B
  //                 scatter of the logits' gradient (n−1)·b·s·V·e = 3·419,430,400  = 1,258,291,200 B
  //                                                                         total     1,573,077,088 B
  //   into GPU 0:   gather of the logits (n−1)·b·s·V·e                             = 1,258,291,200 B
  //                 Reduce of the fp32 gradients P·4 (root 0)                       =   314,687,488 B
  //                                                                         total     1,572,978,688 B
  const Scenario sc = small(Framework::kDataParallel, 1, 4);
  const auto r = run(sc);
  const sim::TaskGraph& g = r->graph;
  double out = 0, in = 0, broadcast = 0, reduce = 0;
  std::map<std::string, int> calls;
  for (sim::TaskId t = 0; t < g.size(); ++t) {
    const sim::TaskLabel& label = g.label(t);
    if (label.category != kCategoryDpComm) continue;
    const std::string op = text_arg(label, "op");
    const double size = number_arg(label, "bytes");
    ++calls[op];
    const auto lanes = g.lanes(t);
    if (op == "broadcast") {
      CHECK(lanes.size() == 4);
      out += size;
      broadcast += size;
    } else if (op == "reduce") {
      CHECK(lanes.size() == 4);
      in += size;
      reduce += size;
    } else {
      REQUIRE(op == "sendrecv");
      REQUIRE(lanes.size() == 2);
      const std::uint32_t from = g.stream(lanes[0]).gpu, to = g.stream(lanes[1]).gpu;
      CHECK(((from == 0) != (to == 0)));
      (from == 0 ? out : in) += size;
    }
  }
  CHECK(out == doctest::Approx(1573077088.0).epsilon(1e-12));
  CHECK(in == doctest::Approx(1572978688.0).epsilon(1e-12));
  CHECK(broadcast == doctest::Approx(314687488.0).epsilon(1e-12));
  CHECK(reduce == doctest::Approx(314687488.0).epsilon(1e-12));
  // 3 input scatters, 3 logit gathers, 3 gradient scatters; the Broadcast and the Reduce in the same chunks.
  CHECK(calls["sendrecv"] == 9);
  CHECK(calls["broadcast"] == calls["reduce"]);
  // The optimizer runs on GPU 0 alone, last.
  REQUIRE(r->job.optimizer_task.size() == 1);
  const sim::TaskId opt = r->job.optimizer_task[0];
  CHECK(g.stream(g.lanes(opt)[0]).gpu == 0);
  CHECK(r->executor->end_time(opt) == r->executor->makespan());
  // The forward kernels' launches share the GIL: an op of k kernels takes at least n · k · t_launch (4 replicas,
  // the profile's kernel_launch), however short its kernels; the element-wise ops of a small model are that short.
  const std::vector<Op> forward = eager_forward_ops(sc.jobs[0].model, 4, Precision::kBF16,
                                                    sc.jobs[0].parallel.attention, sc.jobs[0].parallel.flash_kernel);
  std::size_t floored = 0;
  for (const Op& op : forward) {
    if (op.name == "loss.fwd") continue;
    const double floor = 4 * op.kernels * sc.profile.gpu.kernel_launch.raw();
    for (sim::TaskId t : named(g, op.name)) {
      CHECK(g.duration(t).raw() >= floor * (1 - 1e-12));
      if (op.kernels > 1 && g.duration(t).raw() == doctest::Approx(floor)) ++floored;
    }
  }
  CHECK(floored > 0);  // some multi-kernel ops are launch-bound (they had been floored at n · t_launch)
  // The loss runs once, on GPU 0, over n·b = 16 samples: 5·T·V flops with T = 16·1,024.
  const auto loss = named(g, "loss.fwd");
  REQUIRE(loss.size() == 1);
  CHECK(number_arg(g.label(loss[0]), "flops") == doctest::Approx(5.0 * 16 * 1024 * 51200).epsilon(1e-12));
}

TEST_CASE("framework DataParallel: slower than DDP, memory of GPU 0") {
  const ScenarioResult dp = simulate_scenario(small(Framework::kDataParallel, 1, 4));
  const ScenarioResult ddp = simulate_scenario(small(Framework::kPytorchDdp, 1, 4));
  // Same compute per replica, plus GPU 0's broadcast, gathers, loss over 4× the samples and lone optimizer.
  CHECK(dp.jobs[0].iteration_time > ddp.jobs[0].iteration_time);
  // GPU 0 holds the gathered bf16 logits n·b·s·V·2 = 16·1,024·51,200·2 = 1,677,721,600 B and the fp32
  // log-softmax over them, ·4 = 3,355,443,200 B, and no DDP bucket copy (P·4 = 314,687,488 B), but the replicas'
  // fp32 gradients in BroadcastBackward's input buffer, P·4 = 314,687,488 B (one micro-batch: the reduced copy
  // becomes .grad). Its replica's own loss logits (fp32, b·s·V·4 = 4·1,024·51,200·4 = 838,860,800 B), which a DDP
  // replica holds, are among the gathered ones, not counted twice:
  // peak(DP) − peak(DDP) = 1,677,721,600 + 3,355,443,200 − 314,687,488 + 314,687,488 − 838,860,800
  //                      = 4,194,304,000 B.
  const MemoryEstimate& m = dp.jobs[0].memory;
  CHECK((m.peak - ddp.jobs[0].memory.peak).raw() == doctest::Approx(4194304000.0).epsilon(1e-12));
  // Under gradient accumulation the reduced copy waits beside .grad: P·4 more.
  Scenario accum = small(Framework::kDataParallel, 1, 4);
  accum.jobs[0].parallel.grad_accum = 2;
  const MemoryEstimate a = estimate_data_parallel_memory(accum.jobs[0], accum.profile.gpu);
  CHECK((a.peak - m.peak).raw() == doctest::Approx(314687488.0).epsilon(1e-12));
  for (const MemoryPart& p : m.parts) CHECK(!starts_with(p.name, "DDP"));
}

TEST_CASE("framework DataParallel and Horovod under autocast: casts on every replica, accumulation where .grad is") {
  // The DDP test's model under bf16 autocast (test_ddp.cpp "DDP under autocast"): W = 77,594,624 weight elements
  // cast (6·W = 465,567,744 B per forward, the same per backward for the gradients), P = 78,671,872 parameters.
  const double W = 77594624, P = 78671872;
  auto sum_bytes = [](const sim::TaskGraph& g, const std::vector<sim::TaskId>& tasks, const std::string& part,
                      double mb) {
    double b = 0;
    for (sim::TaskId t : tasks)
      if (g.label(t).name.find(part) != std::string::npos && number_arg(g.label(t), "micro_batch") == mb)
        b += number_arg(g.label(t), "bytes");
    return b;
  };
  SUBCASE("DataParallel, 4 GPUs, 2 micro-batches: the replicas cast, GPU 0 accumulates the reduced gradients") {
    Scenario sc = small(Framework::kDataParallel, 1, 4);
    sc.jobs[0].parallel.grad_accum = 2;
    const auto r = run(sc);
    const sim::TaskGraph& g = r->graph;
    for (std::uint32_t gpu : {0u, 3u}) {
      const auto tasks = g.stream_tasks(r->job.compute_stream[gpu]);
      for (double mb : {0.0, 1.0}) {
        CHECK(sum_bytes(g, tasks, "amp.weight_cast", mb) == doctest::Approx(6 * W));
        CHECK(sum_bytes(g, tasks, ".grad_cast", mb) == doctest::Approx(6 * W));
        // A replica's gradients are reduced, not accumulated; only its tied embedding's two gradients are summed
        // (12 B · V·h = 12 · 51,200 · 1,024 = 629,145,600 B).
        CHECK(sum_bytes(g, tasks, "_accumulate", mb) == doctest::Approx(629145600.0));
      }
    }
    // The reduced gradients of micro-batch 2 are added into GPU 0's .grad (12 B per parameter), after the
    // last Reduce and before the optimizer.
    const auto acc = named(g, "grads.accumulate");
    REQUIRE(acc.size() == 1);
    CHECK(number_arg(g.label(acc[0]), "bytes") == doctest::Approx(12 * P));
    CHECK(g.stream(g.lanes(acc[0])[0]).gpu == 0);
    sim::SimTime last_reduce = 0;
    for (sim::TaskId t : named(g, "reduce_add")) last_reduce = std::max(last_reduce, r->executor->end_time(t));
    CHECK(r->executor->start_time(acc[0]) >= last_reduce);
    CHECK(r->executor->end_time(acc[0]) <= r->executor->start_time(r->job.optimizer_task[0]));
  }
  SUBCASE("Horovod, 2 GPUs: a response waits for its last gradient's cast") {
    const auto r = run(small_horovod());
    const sim::TaskGraph& g = r->graph;
    std::map<std::string, sim::SimTime> end_on_gpu0;
    for (sim::TaskId t : g.stream_tasks(r->job.compute_stream[0]))
      end_on_gpu0[g.label(t).name] = r->executor->end_time(t);
    std::size_t after_cast = 0;
    for (std::size_t k = 0; k < r->job.buckets.size(); ++k) {
      std::string last = r->job.buckets[k].last_op;  // "L1.fc2.wgrad" → its epilogue "L1.fc2.grad_cast"
      if (!last.ends_with(".wgrad")) continue;
      last.resize(last.size() - 6);
      REQUIRE(end_on_gpu0.count(last + ".grad_cast") == 1);
      CHECK(r->executor->start_time(r->job.bucket_allreduce[k]) >= end_on_gpu0.at(last + ".grad_cast"));
      ++after_cast;
    }
    CHECK(after_cast >= 2);
  }
}

TEST_CASE("framework Horovod: fusion of tensors ready by each tick") {
  // Cycle 1 ms, fusion buffer 64 MiB. Tensors (MiB) ready at (ms): 10 @0.2, 30 @0.5, 30 @0.9, 100 @1.5, 5 @2.1,
  // 5 @2.2. First tick at or after each: ⌈t / 1 ms⌉ = 1, 1, 1, 2, 3, 3.
  //   tick 1: 10 + 30 = 40 ≤ 64, + 30 = 70 > 64 → {10, 30}, {30}
  //   tick 2: 100 > 64 goes alone → {100}
  //   tick 3: {5, 5}
  // → 4 responses of 40, 30, 100, 10 MiB at ticks 1, 1, 2, 3.
  const double mib[] = {10, 30, 30, 100, 5, 5};
  const double ready_ms[] = {0.2, 0.5, 0.9, 1.5, 2.1, 2.2};
  std::vector<GradientTensor> tensors;
  for (std::size_t i = 0; i < 6; ++i)
    tensors.push_back({"t" + std::to_string(i), MiB(mib[i]), mib[i], i, sim::to_sim_time(milliseconds(ready_ms[i]))});
  const auto r = horovod_responses(tensors, milliseconds(1), MiB(64));
  REQUIRE(r.size() == 4);
  const double size[] = {40, 30, 100, 10};
  const std::uint64_t tick[] = {1, 1, 2, 3};
  for (std::size_t k = 0; k < 4; ++k) {
    CHECK(r[k].size.raw() == doctest::Approx(MiB(size[k]).raw()));
    CHECK(r[k].tick == tick[k]);
  }
  CHECK(r[0].first == 0);
  CHECK(r[0].last == 1);
  CHECK(r[3].ready_after_op == 5);
  // A tensor ready exactly on a tick is negotiated at that tick: 1.0 ms → tick 1.
  CHECK(horovod_responses({{"x", MiB(1), 1, 0, sim::to_sim_time(milliseconds(1))}}, milliseconds(1), MiB(64))[0].tick == 1);
  // A 128 MiB buffer and a cycle longer than the backward: one tick; the small model's gradients are
  // 314,687,488 B (P·4) of which the embedding (V + s)·h·4 = 213,909,504 B > 128 MiB = 134,217,728 B comes
  // last and goes alone; the rest, 100,777,984 B, fits one buffer → 2 fused AllReduces.
  const Scenario sc = small(Framework::kHorovod, 2, 1);
  const Job& job = sc.jobs[0];
  const auto bwd = backward_ops(job.model, 4, Precision::kBF16);
  const auto all = gradient_tensors(bwd, std::vector<Seconds>(bwd.size(), microseconds(10)), bytes(4));
  const auto two = horovod_responses(all, seconds(1), MiB(128));
  REQUIRE(two.size() == 2);
  CHECK(two[0].size.raw() == doctest::Approx(100777984.0).epsilon(1e-12));
  CHECK(two[1].size.raw() == doctest::Approx(213909504.0).epsilon(1e-12));
  CHECK(all[two[1].first].name == "embed.bwd");
}

TEST_CASE("framework Horovod: an AllReduce never starts before the tick after its tensors are ready") {
  const auto r = run(small_horovod());
  const sim::TaskGraph& g = r->graph;
  const sim::Executor& ex = *r->executor;
  // The backward starts when GPU 0's last forward op (loss.fwd) ends.
  sim::SimTime bw_start = -1;
  std::map<std::string, sim::SimTime> end_on_gpu0;  // backward op → end on GPU 0
  for (sim::TaskId t : g.stream_tasks(r->job.compute_stream[0])) {
    if (g.label(t).name == "loss.fwd") bw_start = ex.end_time(t);
    end_on_gpu0[g.label(t).name] = ex.end_time(t);
  }
  REQUIRE(bw_start > 0);
  const sim::SimTime cycle = sim::to_sim_time(milliseconds(0.5));
  const auto allreduces = r->job.bucket_allreduce;
  REQUIRE(allreduces.size() == r->job.buckets.size());
  CHECK(allreduces.size() >= 3);
  std::uint64_t ticks_seen = 0;
  for (std::size_t k = 0; k < allreduces.size(); ++k) {
    const sim::SimTime ready = end_on_gpu0.at(r->job.buckets[k].last_op) - bw_start;
    // The first tick at or after `ready`: k·cycle with k = ⌈ready / cycle⌉.
    const sim::SimTime tick = (ready + cycle - 1) / cycle * cycle;
    CHECK(ex.start_time(allreduces[k]) >= bw_start + tick);
    ticks_seen = std::max<std::uint64_t>(ticks_seen, std::uint64_t(tick / cycle));
  }
  CHECK(ticks_seen >= 2);  // the responses spread over several cycles
  // Fused responses are copied through the fusion buffer; the cycle chain runs on GPU 0's host thread.
  CHECK(!named(g, "horovod.cycle").empty());
  CHECK(named(g, "horovod.allreduce.response").size() > allreduces.size());  // + memcpy_in/out tasks
}

TEST_CASE("framework Horovod: waiting for the coordinator's tick is exposed communication, not idle") {
  // A cycle far longer than the backward (1 s): every tensor is negotiated at tick 1, 1 s after the backward
  // starts, so each GPU waits ~1 s with nothing running. That wait is Horovod's communication overhead:
  // iteration = compute + exposed communication, nothing idle (the tick chain counts as communication).
  Scenario sc = small(Framework::kHorovod, 2, 1);
  sc.jobs[0].parallel.horovod_cycle = seconds(1);
  const IterationResult it = simulate_scenario(sc).jobs[0];
  CHECK(it.iteration_time.raw() > 1.0);
  for (const TimeBreakdown& b : it.per_gpu) {
    CHECK(b.idle.raw() == doctest::Approx(0).epsilon(1e-12));
    CHECK(b.exposed_comm.raw() > 1.0 - b.compute.raw());
    CHECK(b.compute.raw() + b.exposed_comm.raw() + b.exposed_input.raw() ==
          doctest::Approx(it.iteration_time.raw()).epsilon(1e-9));
  }
}

TEST_CASE("framework Horovod: hierarchical AllReduce = ReduceScatter in node, AllReduce across, AllGather in node") {
  // 2 nodes × 4 GPUs, one 128 MiB-bounded response of S = 100,777,984 B first (see the fusion test; a long
  // cycle puts every tensor in tick 1): per node a 4-rank ReduceScatter of S, per local rank a 2-rank
  // AllReduce of S/4 = 25,194,496 B across the nodes (staged through host memory), per node a 4-rank AllGather of S.
  Scenario sc = small(Framework::kHorovod, 2, 4);
  sc.jobs[0].parallel.horovod_hierarchical = true;
  sc.jobs[0].parallel.horovod_cycle = seconds(1);
  const auto r = run(sc);
  const sim::TaskGraph& g = r->graph;
  const std::string resp = "horovod.allreduce.response0";
  const auto rs = named(g, resp + ".reducescatter");
  const auto ar = named(g, resp + ".cross_allreduce");
  const auto ag = named(g, resp + ".allgather");
  REQUIRE(rs.size() == 2);
  REQUIRE(ar.size() == 4);
  REQUIRE(ag.size() == 2);
  for (sim::TaskId t : rs) {
    CHECK(text_arg(g.label(t), "op") == "reducescatter");
    CHECK(g.lanes(t).size() == 4);
    CHECK(number_arg(g.label(t), "bytes") == doctest::Approx(100777984.0));
  }
  for (sim::TaskId t : ar) {
    CHECK(text_arg(g.label(t), "op") == "allreduce");
    REQUIRE(g.lanes(t).size() == 2);
    CHECK(g.stream(g.lanes(t)[1]).gpu - g.stream(g.lanes(t)[0]).gpu == 4);  // same local rank, other node
    CHECK(number_arg(g.label(t), "bytes") == doctest::Approx(25194496.0));
    CHECK(r->executor->start_time(t) >= r->executor->end_time(rs[0]));
  }
  for (sim::TaskId t : ag) {
    CHECK(text_arg(g.label(t), "op") == "allgather");
    CHECK(r->executor->start_time(t) >= r->executor->end_time(ar[3]));
  }
  CHECK(named(g, resp + ".d2h").size() == 8);
  CHECK(named(g, resp + ".h2d").size() == 8);
  CHECK(r->job.bucket_allreduce.empty());
  // Flat Horovod on the same cluster: one 8-rank AllReduce per response.
  sc.jobs[0].parallel.horovod_hierarchical = false;
  const auto flat = run(sc);
  CHECK(flat->job.bucket_allreduce.size() == 2);
  CHECK(named(flat->graph, resp + ".reducescatter").empty());
}

TEST_CASE("framework loader: DATA_PARALLEL on two nodes is an input error naming parallel.framework") {
  const auto dir = testing::scratch_dir("framework-loader");
  const testing::RemoveOnExit cleanup{dir};
  const std::string path = (dir / "dp2.textproto").string();
  std::ofstream(path) << "name: \"dp on 2 nodes\"\n"
                         "cluster { node_preset: \"dgx-a100\" nodes: 2 }\n"
                         "profile: \"a100-sxm4-80gb\"\n"
                         "model { name: \"m\" layers: 2 hidden: 1024 heads: 16 ffn_hidden: 4096 vocab: 51200 seq_len: 1024 }\n"
                         "parallel {\n"
                         "  dp: 16 micro_batch: 1\n"
                         "  framework: DATA_PARALLEL\n"
                         "}\n"
                         "training { samples: 1000 global_batch: 16 precision: BF16 }\n";
  const auto bad = testing::run_clustersim("run " + path, dir);
  CHECK(bad.status == 2);
  CHECK(bad.out.empty());
  CHECK(bad.err == "error: " + path +
                       ":7:14: parallel.framework: torch.nn.DataParallel runs one process on one node; the 16 GPUs span "
                       "nodes 0 to 1 (use PYTORCH_DDP across nodes)\n");
}
