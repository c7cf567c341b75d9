// Megatron-style 3D parallelism: the collectives and sends the graph contains, and contention-free times
// derived by hand.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "cli/scenario_loader.h"
#include "tests/test_support.h"
#include "workloads/compute_model.h"
#include "sim/executor.h"
#include "workloads/collective_engine.h"
#include "workloads/iteration_result.h"
#include "workloads/megatron_graph.h"

using namespace clustersim;
using namespace clustersim::workloads;

namespace {

Scenario scenario(const std::string& parallel, std::uint32_t gpus, const std::string& model =
                      "model { layers: 4 hidden: 1024 heads: 16 vocab: 32000 seq_len: 1024 }\n") {
  return cli::load_scenario_text(
      "cluster { nodes: 1 gpus_per_node: " + std::to_string(gpus) +
          " gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 nic_gbits_per_s_per_direction: 200 }\n"
          "profile: \"a100-sxm4-80gb\"\n" + model + "parallel { " + parallel + " }\ntraining { samples: 1000 }\n",
      "megatron.textproto", false, "");
}

// Counts the graph's tasks by category.
std::map<std::string, std::size_t> categories(const Scenario& sc) {
  sim::Simulation s;
  CollectiveEngine engine(s, sc, nullptr);
  sim::TaskGraph g;
  build_megatron_job(sc, sc.jobs[0], g, engine);
  std::map<std::string, std::size_t> out;
  for (sim::TaskId t = 0; t < g.size(); ++t) ++out[g.label(t).category];
  return out;
}

}  // namespace

TEST_CASE("tensor parallelism: two AllReduces per layer forward and two backward, per micro-batch") {
  // tp 2, 4 layers, 3 micro-batches, one TP group: (4 layers · 4 AllReduces + the vocabulary-parallel embedding's
  // forward + the output layer's input gradient + the vocabulary-parallel cross-entropy's 3 (maximum, target
  // logit, sum of exponentials)) · 3 = 21 · 3 = 63 collective tasks.
  Scenario sc = scenario("dp: 1 tp: 2 micro_batch: 1 grad_accum: 3", 2);
  sc.fidelity = Fidelity::kAnalytical;
  CHECK(categories(sc)["tp_comm"] == 63);
  // With sequence parallelism each of the 18 becomes a reduce-scatter plus an all-gather: 108; each column-parallel
  // layer's backward gathers its input again for the weight gradient (QKV and fc1 per layer, the output layer):
  // (4 · 2 + 1) · 3 = 27 more; the cross-entropy's 9 stay all-reduces: 144.
  Scenario sp = scenario("dp: 1 tp: 2 micro_batch: 1 grad_accum: 3 sequence_parallel: true", 2);
  sp.fidelity = Fidelity::kAnalytical;
  CHECK(categories(sp)["tp_comm"] == 144);
}

TEST_CASE("pipeline parallelism: one send per micro-batch and stage boundary each way") {
  // pp 4, m 8: 3 boundaries · 8 micro-batches · 2 directions = 48 sends; interleaved with pp 2, vp 2
  // there are 2·2 − 1 = 3 virtual-stage boundaries: 3 · 4 micro-batches · 2 = 24.
  CHECK(categories(scenario("dp: 1 pp: 4 micro_batch: 1 grad_accum: 8", 4))["pp_comm"] == 48);
  CHECK(categories(scenario("dp: 1 pp: 2 vp: 2 micro_batch: 1 grad_accum: 4", 2))["pp_comm"] == 24);
}

TEST_CASE("tensor parallelism on one node: compute halves, the TP AllReduces are all exposed") {
  // Contention-free ANALYTICAL run, tp 2, dp 1, one micro-batch, the blocking backward of Megatron-LM before
  // 2021-09 (async_tp_grad_reduce false). Every GEMM and attention op runs at half its FLOPs and bytes; norms and
  // residuals stay whole. The 18 AllReduces (4 layers · 2 fwd + 2 bwd, the embedding's forward, the output layer's
  // input gradient) of b·s·h·2 = 1·1024·1024·2 = 2,097,152 B over 2 GPUs on NVLink take, each, ring LL128 or
  // Simple as NCCL picks, and the cross-entropy's 3 of b·s·4 = 4,096 B (one fp32 value per token); whatever they
  // take, the breakdown must put all of it in exposed communication and the rest in compute, with no idle time
  // (both ranks identical, no pipeline).
  Scenario sc = scenario("dp: 1 tp: 2 micro_batch: 1 grad_accum: 1 async_tp_grad_reduce: false", 2);
  sc.fidelity = Fidelity::kAnalytical;
  const ScenarioResult r = simulate_scenario(sc);
  const auto& b = r.jobs[0].per_gpu[0];
  CHECK(b.exposed_comm.raw() > 0);
  // Rank 0 reads the input: its one copy, b·(s + 1)·8 = 8,200 B at 24 GB/s = 0.342 µs, stalls the start.
  CHECK(b.exposed_input.raw() == doctest::Approx(8200 / 24e9).epsilon(1e-6));
  CHECK(b.idle.raw() == doctest::Approx(0).epsilon(1e-12));
  const CollectivePlan ar = CollectiveModel(sc.cluster, sc.profile).plan(
      CollectiveRequest{CollectiveOp::kAllReduce, {0, 1}, bytes(2097152), 0});
  const CollectivePlan loss =
      CollectiveModel(sc.cluster, sc.profile).plan(CollectiveRequest{CollectiveOp::kAllReduce, {0, 1}, bytes(4096), 0});
  CHECK(b.exposed_comm.raw() == doctest::Approx(18 * ar.time.raw() + 3 * loss.time.raw()).epsilon(1e-6));
  // All of it is tensor-parallel communication.
  CHECK(b.exposed_by_kind[static_cast<std::size_t>(CommKind::kTp)].raw() == b.exposed_comm.raw());
  // FLOW fidelity on the same contention-free node gives the same step within 1 %.
  Scenario flow = sc;
  flow.fidelity = Fidelity::kFlow;
  CHECK(simulate_scenario(flow).jobs[0].iteration_time.raw() ==
        doctest::Approx(r.jobs[0].iteration_time.raw()).epsilon(0.01));
}

TEST_CASE("async_tp_grad_reduce: a column-parallel layer's input-gradient reduction runs beside its weight gradient") {
  // The same tp 2 run with Megatron-LM's default asynchronous backward: the 9 forward AllReduces (4 layers · 2, the
  // embedding's) stay exposed; each of the 9 backward ones (QKV and fc1 per layer, the output layer) starts after
  // its data gradient and runs beside the weight gradient after it, so it is exposed only by what it outlasts
  // that GEMM: exposed = 9 · AR + Σ max(0, AR − t_wgrad) over the 9, plus the cross-entropy's 3 all-reduces of
  // b·s·4 = 4,096 B (blocking).
  Scenario sc = scenario("dp: 1 tp: 2 micro_batch: 1 grad_accum: 1", 2);
  sc.fidelity = Fidelity::kAnalytical;
  CHECK(sc.jobs[0].parallel.async_tp_grad_reduce);  // the default
  const double ar = CollectiveModel(sc.cluster, sc.profile)
                        .plan(CollectiveRequest{CollectiveOp::kAllReduce, {0, 1}, bytes(2097152), 0})
                        .time.raw();
  OpConfig c;
  c.micro_batch = 1;
  c.tp = 2;
  const double loss = CollectiveModel(sc.cluster, sc.profile)
                          .plan(CollectiveRequest{CollectiveOp::kAllReduce, {0, 1}, bytes(4096), 0})
                          .time.raw();
  double exposed = 9 * ar + 3 * loss;
  int backward = 0;
  for (const Op& op : backward_ops(sc.jobs[0].model, c))
    for (const char* w : {".qkv.wgrad", ".fc1.wgrad", "lm_head.wgrad"})
      if (op.name.ends_with(w)) {
        exposed += std::max(0.0, ar - op_time(op, sc.profile.gpu, Precision::kBF16).raw());
        ++backward;
      }
  CHECK(backward == 9);
  const ScenarioResult r = simulate_scenario(sc);
  CHECK(r.jobs[0].per_gpu[0].exposed_comm.raw() == doctest::Approx(exposed).epsilon(1e-6));
  // Blocking, every one of the 18 (and the 3 of the loss) is exposed: the step is longer by what the weight
  // gradients hid.
  Scenario blocking = scenario("dp: 1 tp: 2 micro_batch: 1 grad_accum: 1 async_tp_grad_reduce: false", 2);
  blocking.fidelity = Fidelity::kAnalytical;
  CHECK(simulate_scenario(blocking).jobs[0].iteration_time.raw() - r.jobs[0].iteration_time.raw() ==
        doctest::Approx(18 * ar + 3 * loss - exposed).epsilon(1e-6));
}

TEST_CASE("a pipeline idles the 1F1B bubble") {
  // pp 4, m 16, tp 1, dp 1, 16 layers (4 per stage) and a small vocabulary so that the stages are nearly
  // balanced (the LM head, 2·1024·1024·1024 FLOPs, is 2 % of a stage's 4 layers). The bubble is
  // (p − 1)/m = 18.75 % of the ideal time, so the first stage idles 0.1875 / 1.1875 = 15.8 % of the step;
  // sends between stages and the small imbalance move it a little: checked within 14–18 %.
  Scenario sc = scenario("dp: 1 pp: 4 micro_batch: 1 grad_accum: 16", 4,
                         "model { layers: 16 hidden: 1024 heads: 16 vocab: 1024 seq_len: 1024 }\n");
  sc.fidelity = Fidelity::kAnalytical;
  const ScenarioResult r = simulate_scenario(sc);
  const auto& b = r.jobs[0].per_gpu[0];
  const double idle_share = b.idle.raw() / r.jobs[0].iteration_time.raw();
  CHECK(idle_share > 0.14);
  CHECK(idle_share < 0.18);
}

TEST_CASE("full recomputation adds about one forward pass to the compute, FlashAttention frees memory") {
  // Forward + backward = 3 forward-equivalents of GEMM work; full recomputation redoes the layers' forward
  // (not the LM head): compute grows by about 1/3. The LM head (not recomputed) pulls it below; the
  // memory-bound ops pull it above, since their backward costs about as much as their forward (the
  // recomputed forward adds 1/2 of their share, not 1/3): between 25 % and 37 %.
  auto run = [](const std::string& extra) {
    Scenario sc = scenario("dp: 1 pp: 2 micro_batch: 1 grad_accum: 4 " + extra, 2,
                           "model { layers: 8 hidden: 1024 heads: 16 vocab: 1024 seq_len: 1024 }\n");
    sc.fidelity = Fidelity::kAnalytical;
    return simulate_scenario(sc).jobs[0];
  };
  const IterationResult none = run("");
  const IterationResult full = run("recompute: FULL");
  const double growth = full.per_gpu[0].compute.raw() / none.per_gpu[0].compute.raw() - 1;
  CHECK(growth > 0.25);
  CHECK(growth < 0.37);
  // Korthikanti: full recomputation stores only each layer's input (2·s·b·h per layer instead of
  // 34·s·b·h + 5·a·s²·b), so the activation memory drops.
  CHECK(full.memory.peak < none.memory.peak);
  CHECK(run("flash_attention: true").memory.peak < none.memory.peak);
}

TEST_CASE(
    "tp_comm_overlap: reduce-scatters beside the GEMM that feeds them, all-gathers beside the GEMM that reads them") {
  // tp 4 with sequence parallelism on one node, dp 1, 2 micro-batches, 4 layers, ANALYTICAL. `plain` blocks on
  // every TP collective of b·s·h·2 = 2,097,152 B (R a reduce-scatter, A an all-gather): after proj.fwd and
  // fc2.fwd R then A, after the embedding R then A; backward before each column-parallel data gradient (qkv,
  // fc1, lm_head) A (its input again), after it R then A. With the overlap (Transformer Engine's userbuffers):
  //  * a row-parallel GEMM's R (proj, fc2) runs (t−1)/t of its bytes (Rb) beside the GEMM and the last 1/t (Rt)
  //    after it: it costs max(0, Rb − t_gemm) + Rt; the embedding's R still blocks;
  //  * the pair's A runs beside the GEMM that reads it, costing max(0, A − t_gemm): forward fc1 (after proj),
  //    the next layer's qkv (after fc2 and after the embedding); the last layer's before the output layer
  //    blocks. Backward, after a column-parallel data gradient: proj.dgrad (after fc1's), the layer below's
  //    fc2.dgrad (after qkv's and after the output layer's); layer 0's before the embedding's backward blocks;
  //  * backward, the input's A beside the data gradient and R beside the weight gradient after it.
  // So the step shrinks by 2 micro-batches x the sum over those points of what each hides: min(A, t) for an A
  // beside a GEMM of time t, min(R, t) for R beside a weight gradient, R − max(0, Rb − t) − Rt for a pipelined R.
  const std::string par = "dp: 1 tp: 4 micro_batch: 1 grad_accum: 2 sequence_parallel: true";
  Scenario plain = scenario(par + " async_tp_grad_reduce: false", 4),
           over = scenario(par + " tp_comm_overlap: true", 4);
  plain.fidelity = over.fidelity = Fidelity::kAnalytical;
  CHECK(over.jobs[0].parallel.tp_comm_overlap);
  const CollectiveModel model(plain.cluster, plain.profile);
  auto t = [&](CollectiveOp op, double size) {
    return model.plan(CollectiveRequest{op, {0, 1, 2, 3}, bytes(size), 0}).time.raw();
  };
  const double R = t(CollectiveOp::kReduceScatter, 2097152), A = t(CollectiveOp::kAllGather, 2097152),
               Rb = t(CollectiveOp::kReduceScatter, 2097152.0 * 3 / 4),
               Rt = t(CollectiveOp::kReduceScatter, 2097152.0 / 4);
  OpConfig c;
  c.micro_batch = 1;
  c.tp = 4;
  c.sequence_parallel = true;
  std::map<std::string, double> time;  // of every op by name (all layers alike: layer 1's)
  for (const auto& ops : {forward_ops(plain.jobs[0].model, c), backward_ops(plain.jobs[0].model, c)})
    for (const Op& op : ops) time[op.name] = op_time(op, plain.profile.gpu, Precision::kBF16).raw();
  auto op = [&](const std::string& name) {
    REQUIRE(time.count(name) == 1);
    return time[name];
  };
  auto pipelined = [&](double gemm) { return R - std::max(0.0, Rb - gemm) - Rt; };
  const int layers = 4;
  double hidden = std::min(A, op("L1.qkv.fwd"));  // the embedding's A beside layer 0's qkv
  hidden += layers * (pipelined(op("L1.proj.fwd")) + std::min(A, op("L1.fc1.fwd")) + pipelined(op("L1.fc2.fwd")));
  hidden += (layers - 1) * std::min(A, op("L1.qkv.fwd"));  // fc2's A beside the next layer's qkv
  // Backward: the output layer, then per layer fc1's and qkv's points.
  hidden += std::min(A, op("lm_head.dgrad")) + std::min(R, op("lm_head.wgrad")) + std::min(A, op("L1.fc2.dgrad"));
  hidden +=
      layers * (std::min(A, op("L1.fc1.dgrad")) + std::min(R, op("L1.fc1.wgrad")) + std::min(A, op("L1.proj.dgrad")) +
                std::min(A, op("L1.qkv.dgrad")) + std::min(R, op("L1.qkv.wgrad")));
  hidden += (layers - 1) * std::min(A, op("L1.fc2.dgrad"));  // qkv's A beside the layer below's fc2.dgrad
  const ScenarioResult a = simulate_scenario(plain), b = simulate_scenario(over);
  CHECK(a.jobs[0].iteration_time.raw() - b.jobs[0].iteration_time.raw() == doctest::Approx(2 * hidden).epsilon(1e-6));
  CHECK(b.jobs[0].per_gpu[0].exposed_comm.raw() < a.jobs[0].per_gpu[0].exposed_comm.raw());
  // Never hidden whole: each pipelined reduce-scatter leaves its last chunk after the GEMM.
  CHECK(b.jobs[0].per_gpu[0].exposed_comm.raw() >= 2 * (2 * layers) * Rt);
  // It needs sequence parallelism, as Megatron-LM's --tp-comm-overlap does.
  CHECK(clustersim::testing::input_error_of([] {
          scenario("dp: 1 tp: 4 micro_batch: 1 tp_comm_overlap: true", 4);
        }).find("parallel.tp_comm_overlap: overlaps the sequence-parallel all-gathers and reduce-scatters: needs "
                "sequence_parallel") != std::string::npos);
}

TEST_CASE("overlap_param_gather: the parameter all-gathers run per bucket at the head of the step") {
  // dp 2 over 2 nodes of one A100 (NIC 100 Gbit/s, so the all-gathers outlast the forward they hide behind),
  // 4 layers of h 1024, micro-batch 1 x 2, distributed optimizer, gradients reduced after the backward,
  // ANALYTICAL, no host dispatch. Without the overlap the step ends with one all-gather of every parameter
  // (2 B each, BF16). With it the all-gathers of the gradient buckets (Megatron's rule, max(40M, 1M x dp)
  // = 40M parameters of fp32 gradients, 4 B: 160 MB each, filled in backward order: the four layers' 50.4M
  // parameters pass the cap, the embeddings make the second) run back to back on the DP stream from t = 0 in forward order, and micro-batch 0's forward waits at the first reader of bucket i (the forward op of the
  // gradient that completed it; the tied embedding's, read first by embed.fwd) until all-gather i ends:
  //     a_i = AG time of bucket i,  F_i = forward time before its first reader,
  //     W = max_i (a_0 + … + a_i − F_i),
  // and everything after the forward shifts by W, so T_plain − T_overlap = AG(all parameters) − W.
  const std::string text =
      "cluster { nodes: 2 gpus_per_node: 1 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 "
      "nic_gbits_per_s_per_direction: 100 }\nprofile: \"a100-sxm4-80gb\"\n"
      "model { layers: 4 hidden: 1024 heads: 16 vocab: 32000 seq_len: 1024 }\ntraining { samples: 1000 }\n";
  const std::string par = "parallel { dp: 2 micro_batch: 1 grad_accum: 2 distributed_optimizer: true";
  Scenario plain = cli::load_scenario_text(text + par + " }\n", "plain.textproto", false, "");
  Scenario over = cli::load_scenario_text(text + par + " overlap_param_gather: true }\n", "over.textproto", false, "");
  plain.fidelity = over.fidelity = Fidelity::kAnalytical;
  REQUIRE(over.jobs[0].parallel.overlap_param_gather);
  const CollectiveModel model(plain.cluster, plain.profile);
  auto all_gather = [&](double parameters) {
    return model.plan(CollectiveRequest{CollectiveOp::kAllGather, {0, 1}, bytes(2 * parameters), 0}).time.raw();
  };
  OpConfig c;
  const std::vector<Op> fwd = forward_ops(plain.jobs[0].model, c), bwd = backward_ops(plain.jobs[0].model, c);
  const Bytes cap = megatron_bucket_bytes(plain.jobs[0].parallel, 4);
  CHECK(cap.raw() == 160e6);
  const std::vector<GradientBucket> buckets = ddp_buckets(bwd, bytes(4), cap, cap);
  std::vector<std::pair<std::size_t, double>> order;  // (first reader, parameters)
  double parameters = 0;
  for (const GradientBucket& b : buckets) {
    const std::string base = b.last_op.substr(0, b.last_op.rfind('.'));
    std::size_t reader = 0;
    while (reader < fwd.size() && fwd[reader].name != base + ".fwd") ++reader;
    REQUIRE(reader < fwd.size());
    order.emplace_back(reader, b.parameters);
    parameters += b.parameters;
  }
  std::sort(order.begin(), order.end());
  CHECK(order.front().first == 0);  // embed.fwd reads the first bucket (the tied embedding and the LM head)
  double ag_end = 0, wait = 0;
  for (const auto& [reader, params] : order) {
    double before = 0;
    for (std::size_t k = 0; k < reader; ++k) before += op_time(fwd[k], plain.profile.gpu, Precision::kBF16).raw();
    ag_end += all_gather(params);
    wait = std::max(wait, ag_end - before);
  }
  CHECK(buckets.size() == 2);
  CHECK(wait > all_gather(order.front().second));  // later buckets wait too: the NIC is slower than the forward
  const ScenarioResult a = simulate_scenario(plain), b = simulate_scenario(over);
  MESSAGE("buckets " << buckets.size() << ", AG(all) " << all_gather(parameters) * 1e3 << " ms, W " << wait * 1e3
                     << " ms, step " << a.jobs[0].iteration_time.raw() * 1e3 << " -> "
                     << b.jobs[0].iteration_time.raw() * 1e3 << " ms");
  CHECK(a.jobs[0].iteration_time.raw() - b.jobs[0].iteration_time.raw() ==
        doctest::Approx(all_gather(parameters) - wait).epsilon(1e-6));
  // One all-gather per bucket instead of one per chunk.
  std::size_t gathers = 0;
  {
    sim::Simulation s;
    CollectiveEngine engine(s, over, nullptr);
    sim::TaskGraph g;
    build_megatron_job(over, over.jobs[0], g, engine);
    for (sim::TaskId t = 0; t < g.size(); ++t) gathers += g.label(t).name.starts_with("allgather.dp.params");
  }
  CHECK(gathers == buckets.size());
  // It needs the distributed optimizer, as Megatron-LM's --overlap-param-gather does.
  CHECK(clustersim::testing::input_error_of([&] {
          cli::load_scenario_text(text + "parallel { dp: 2 micro_batch: 1 overlap_param_gather: true }\n", "x", false,
                                  "");
        }).find("parallel.overlap_param_gather: overlaps the distributed optimizer's parameter all-gathers with the "
                "next forward: needs distributed_optimizer") != std::string::npos);
}

namespace {

// For each GPU: how long its pipeline sends (as the sender) and its compute kernels run at the same time.
std::vector<double> send_compute_overlap_s(const Scenario& sc) {
  sim::Simulation s;
  CollectiveEngine engine(s, sc, nullptr);
  sim::TaskGraph g;
  build_megatron_job(sc, sc.jobs[0], g, engine);
  sim::Executor ex(s, g, &engine);
  ex.start();
  s.run();
  ex.finish();
  const std::size_t gpus = sc.jobs[0].gpus.size();
  std::vector<std::vector<std::pair<double, double>>> sends(gpus), compute(gpus);
  for (sim::TaskId t = 0; t < g.size(); ++t) {
    const auto& label = g.label(t);
    const std::pair<double, double> span{sim::to_seconds(ex.start_time(t)).raw(),
                                         sim::to_seconds(ex.end_time(t)).raw()};
    const std::uint32_t gpu = g.stream(g.lanes(t)[0]).gpu;  // a send's first lane is the sender's
    if (label.name == "send.activation" || label.name == "send.gradient") sends[gpu].push_back(span);
    if (label.category == "compute") compute[gpu].push_back(span);
  }
  std::vector<double> out(gpus, 0.0);
  for (std::size_t gpu = 0; gpu < gpus; ++gpu)
    for (const auto& a : sends[gpu])
      for (const auto& b : compute[gpu])
        out[gpu] += std::max(0.0, std::min(a.second, b.second) - std::max(a.first, b.first));
  return out;
}

}  // namespace

TEST_CASE("1F1B: a stage's next step waits for its own pipeline send, interleaved 1F1B overlaps them") {
  // Megatron-LM turns overlap_p2p_comm off for the non-interleaved schedule (arguments.py): send_forward,
  // send_forward_recv_backward, send_backward_recv_forward and send_backward wait for their batched isend/irecv
  // before the stage goes on, so no compute kernel of a stage runs while its own send does. The interleaved
  // schedule overlaps them. NVLink at 1 GB/s makes each send (b·s·h·2 = 2 MiB: about 2.1 ms) longer than a
  // stage's step, so an overlap would show.
  const std::string text =
      "cluster { nodes: 1 gpus_per_node: 2 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 1 "
      "nic_gbits_per_s_per_direction: 200 }\nprofile: \"a100-sxm4-80gb\"\nfidelity: ANALYTICAL\n"
      "model { layers: 4 hidden: 1024 heads: 16 vocab: 1024 seq_len: 1024 }\n";
  const Scenario one_f_one_b = cli::load_scenario_text(
      text + "parallel { dp: 1 pp: 2 micro_batch: 1 grad_accum: 8 }\ntraining { samples: 1000 }\n", "p.textproto",
      false, "");
  for (double overlap : send_compute_overlap_s(one_f_one_b)) CHECK(overlap == 0);
  const Scenario interleaved = cli::load_scenario_text(
      text +
          "parallel { dp: 1 pp: 2 vp: 2 schedule: INTERLEAVED_ONE_F_ONE_B micro_batch: 1 grad_accum: 8 }\n"
          "training { samples: 1000 }\n",
      "p.textproto", false, "");
  double total = 0;
  for (double overlap : send_compute_overlap_s(interleaved)) total += overlap;
  CHECK(total > 1e-3);
}

TEST_CASE("exposed communication by kind: TP on the compute stream, pipeline sends, the parts add up") {
  // tp 2 x pp 2 on 4 GPUs at ANALYTICAL, 4 micro-batches under 1F1B (blocking sends). Every rank's exposed time splits
  // into TP (its collectives on the compute stream, whole), PP (its sends and receives where the compute stream is
  // idle) and DP (none: dp 1); the kinds add up to exposed_comm to the picosecond rounding, and the TP part equals
  // the summed durations of the rank's tp_comm tasks: 4 micro-batches x (2 layers x 4 AllReduces + the embedding's
  // forward on stage 0, or the output layer's input gradient on stage 1) = 36 AllReduces of b·s·h·2 = 2 MiB over 2
  // NVLink GPUs each; stage 1 (GPUs 2 and 3 in the order tp-dp-pp) adds 4 x the cross-entropy's 3 of b·s·4 = 4 KiB.
  Scenario sc = scenario("dp: 1 tp: 2 pp: 2 micro_batch: 1 grad_accum: 4 async_tp_grad_reduce: false", 4);
  sc.fidelity = Fidelity::kAnalytical;
  const ScenarioResult r = simulate_scenario(sc);
  const CollectivePlan ar = CollectiveModel(sc.cluster, sc.profile)
                                .plan(CollectiveRequest{CollectiveOp::kAllReduce, {0, 1}, bytes(2097152), 0});
  const CollectivePlan loss =
      CollectiveModel(sc.cluster, sc.profile).plan(CollectiveRequest{CollectiveOp::kAllReduce, {0, 1}, bytes(4096), 0});
  for (std::size_t gpu = 0; gpu < r.jobs[0].per_gpu.size(); ++gpu) {
    const TimeBreakdown& b = r.jobs[0].per_gpu[gpu];
    double sum = 0;
    for (const Seconds& s : b.exposed_by_kind) sum += s.raw();
    CHECK(sum == doctest::Approx(b.exposed_comm.raw()).epsilon(1e-9));
    CHECK(b.exposed_by_kind[static_cast<std::size_t>(CommKind::kTp)].raw() ==
          doctest::Approx(36 * ar.time.raw() + (gpu >= 2 ? 12 * loss.time.raw() : 0.0)).epsilon(1e-6));
    CHECK(b.exposed_by_kind[static_cast<std::size_t>(CommKind::kPp)].raw() > 0);
    CHECK(b.exposed_by_kind[static_cast<std::size_t>(CommKind::kDp)].raw() == 0);
  }
}
