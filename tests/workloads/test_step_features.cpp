// The parts of a training step around the layers: Megatron's distributed optimizer, gradient reduction
// with and without overlap, the tied-embedding all-reduce, scatter/gather pipeline sends, the optimizer
// step's memory traffic, and the input pipeline (data loader, host-to-device copy). Expected numbers
// are derived in the comments.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "cli/scenario_loader.h"
#include "sim/executor.h"
#include "sim/input_error.h"
#include "workloads/analytical_estimate.h"
#include "workloads/collective_engine.h"
#include "workloads/compute_model.h"
#include "workloads/input_pipeline.h"
#include "workloads/iteration_result.h"
#include "workloads/megatron_graph.h"
#include "workloads/nccl_model.h"

using namespace clustersim;
using namespace clustersim::workloads;

namespace {

const std::string kModel = "model { layers: 4 hidden: 1024 heads: 16 vocab: 32000 seq_len: 1024 }\n";

Scenario scenario(const std::string& parallel, std::uint32_t gpus, const std::string& training = "samples: 1000",
                  const std::string& model = kModel) {
  Scenario sc = cli::load_scenario_text(
      "cluster { nodes: 1 gpus_per_node: " + std::to_string(gpus) +
          " gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 nic_gbits_per_s_per_direction: 200 }\n"
          "profile: \"a100-sxm4-80gb\"\n" + model + "parallel { " + parallel + " }\ntraining { " + training + " }\n",
      "step.textproto", false, "");
  sc.fidelity = Fidelity::kAnalytical;
  return sc;
}

// Tasks of the Megatron graph by label name.
std::map<std::string, std::size_t> names(const Scenario& sc) {
  sim::Simulation s;
  CollectiveEngine engine(s, sc, nullptr);
  sim::TaskGraph g;
  build_megatron_job(sc, sc.jobs[0], g, engine);
  std::map<std::string, std::size_t> out;
  for (sim::TaskId t = 0; t < g.size(); ++t) ++out[g.label(t).name];
  return out;
}

// Bytes of every task with this label name (the collective's "bytes" argument).
std::vector<double> message_bytes(const Scenario& sc, const std::string& name) {
  sim::Simulation s;
  CollectiveEngine engine(s, sc, nullptr);
  sim::TaskGraph g;
  build_megatron_job(sc, sc.jobs[0], g, engine);
  std::vector<double> out;
  for (sim::TaskId t = 0; t < g.size(); ++t)
    if (g.label(t).name == name)
      for (const sim::TaskArg& a : g.label(t).args)
        if (a.key == "bytes") out.push_back(a.number);
  return out;
}

std::string error_of(const std::string& parallel, std::uint32_t gpus, const std::string& training = "samples: 1000") {
  try {
    scenario(parallel, gpus, training);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// The data-loader tests' setting: one GPU, DDP, m = 4 micro-batches without a loader rate; its input copy h,
// optimizer o and micro-batch compute c = (step − h − o) / 4.
struct LoaderSetting {
  Scenario fast;
  double h = 0, o = 0, c = 0;
  double step = 0;
};

LoaderSetting loader_setting() {
  LoaderSetting ls{scenario("dp: 1 micro_batch: 1 grad_accum: 4", 1)};
  ls.step = simulate_scenario(ls.fast).jobs[0].iteration_time.raw();
  ls.h = micro_batch_input_bytes(ls.fast.jobs[0].model, 1).raw() / 24e9;
  const double P = ls.fast.jobs[0].model.parameter_count();
  ls.o = op_time(optimizer_op(P, Optimizer::kAdam, 4, false), ls.fast.profile.gpu, Precision::kBF16).raw();
  ls.c = (ls.step - ls.h - ls.o) / 4;
  return ls;
}

}  // namespace

TEST_CASE("optimizer step: bytes per parameter by optimizer and weight dtype") {
  // Per parameter: gradient read + fp32 master read/write (8) + 8 per fp32 state + 2 for a 16-bit copy.
  CHECK(optimizer_op(1e6).bytes.raw() == doctest::Approx(28e6));  // AMP Adam: 4 + 8 + 16
  CHECK(optimizer_op(1e6, Optimizer::kAdam, 4, true).bytes.raw() == doctest::Approx(30e6));  // Megatron bf16
  CHECK(optimizer_op(1e6, Optimizer::kSgdMomentum, 4, true).bytes.raw() == doctest::Approx(22e6));  // 4+8+8+2
  CHECK(optimizer_op(1e6, Optimizer::kSgd, 2, true).bytes.raw() == doctest::Approx(12e6));          // 2+8+2
  CHECK(optimizer_op(1e6, Optimizer::kSgd, 2, true).name == "optimizer.sgd");
  CHECK(optimizer_op(1e6, Optimizer::kAdam).flops.raw() == doctest::Approx(12e6));
}

TEST_CASE("distributed optimizer: reduce-scatter gradients, step a 1/dp shard, all-gather parameters") {
  // dp 2, one chunk: one reduce-scatter of the fp32 gradients (4 B x P) and one all-gather of the bf16
  // parameters (2 B x P) instead of one all-reduce.
  const Scenario plain = scenario("dp: 2 micro_batch: 1 recompute: SELECTIVE", 2);
  const Scenario zero1 = scenario("dp: 2 micro_batch: 1 recompute: SELECTIVE distributed_optimizer: true", 2);
  const auto n_plain = names(plain), n_zero = names(zero1);
  CHECK(n_plain.at("allreduce.dp.chunk0") == 1);
  CHECK(n_plain.count("reducescatter.dp.chunk0") == 0);
  CHECK(n_zero.at("reducescatter.dp.chunk0") == 1);
  CHECK(n_zero.at("allgather.dp.params.chunk0") == 1);
  const double rs = message_bytes(zero1, "reducescatter.dp.chunk0").at(0);
  const double ag = message_bytes(zero1, "allgather.dp.params.chunk0").at(0);
  CHECK(rs == doctest::Approx(2 * ag));  // 4 B vs 2 B per parameter
  // The whole model sits on each rank (tp 1, pp 1): P parameters, 4P bytes of gradients.
  CHECK(rs == doctest::Approx(4 * plain.jobs[0].model.parameter_count()).epsilon(1e-9));

  // ANALYTICAL, one node, no overlap: the step is backward end + RS + optimizer(P/2) + AG, versus
  // backward end + AR + optimizer(P) for the plain layout; the compute before is identical.
  const ScenarioResult a = simulate_scenario(plain), b = simulate_scenario(zero1);
  const CollectiveModel model(plain.cluster, plain.profile);
  const Bytes grads = bytes(rs);
  const Seconds ar = model.plan({CollectiveOp::kAllReduce, {0, 1}, grads, 0}).time;
  const Seconds rsc = model.plan({CollectiveOp::kReduceScatter, {0, 1}, grads, 0}).time;
  const Seconds agc = model.plan({CollectiveOp::kAllGather, {0, 1}, bytes(ag), 0}).time;
  const double P = plain.jobs[0].model.parameter_count();
  const auto& gpu = plain.profile.gpu;
  const Seconds opt_full = op_time(optimizer_op(P, Optimizer::kAdam, 4, true), gpu, Precision::kBF16);
  const Seconds opt_half = op_time(optimizer_op(P / 2, Optimizer::kAdam, 4, true), gpu, Precision::kBF16);
  CHECK((b.jobs[0].iteration_time - a.jobs[0].iteration_time).raw() ==
        doctest::Approx((rsc + opt_half + agc - ar - opt_full).raw()).epsilon(1e-6));
  // Memory: the distributed optimizer's 6 + 12/d bytes per parameter instead of 18 (Megatron bf16).
  CHECK(b.jobs[0].memory.peak < a.jobs[0].memory.peak);
  const double saved = (a.jobs[0].memory.peak - b.jobs[0].memory.peak).raw();
  CHECK(saved == doctest::Approx(P * 6.0).epsilon(1e-6));  // 12 − 12/2 = 6 B per parameter
}

TEST_CASE("gradient reduction: after the backward by default, overlapped with it on request") {
  // Without overlap the DP all-reduce of the whole gradient buffer (4 B x P) is fully exposed; with
  // overlap_grad_reduce only the buckets that end with the backward are.
  const Scenario late = scenario("dp: 2 micro_batch: 1 recompute: SELECTIVE", 2);
  const Scenario early = scenario("dp: 2 micro_batch: 1 recompute: SELECTIVE overlap_grad_reduce: true", 2);
  const ScenarioResult a = simulate_scenario(late), b = simulate_scenario(early);
  const CollectiveModel model(late.cluster, late.profile);
  const double P = late.jobs[0].model.parameter_count();
  const Seconds ar = model.plan({CollectiveOp::kAllReduce, {0, 1}, bytes(4 * P), 0}).time;
  CHECK(a.jobs[0].breakdown.exposed_comm.raw() == doctest::Approx(ar.raw()).epsilon(1e-6));
  CHECK(b.jobs[0].breakdown.exposed_comm < a.jobs[0].breakdown.exposed_comm);
  CHECK(b.jobs[0].iteration_time < a.jobs[0].iteration_time);
  CHECK(names(early).at("allreduce.dp.chunk0") > 1);  // DDP-sized buckets
}

TEST_CASE("tied embeddings with a pipeline: one all-reduce of V·h/t gradients between first and last stage") {
  // pp 2, tp 2, dp 1: per tensor rank one all-reduce of 32000·1024/2 fp32 gradients = 65,536,000 B.
  const Scenario sc = scenario("dp: 1 tp: 2 pp: 2 micro_batch: 1 grad_accum: 2", 4);
  const auto bytes_list = message_bytes(sc, "allreduce.embedding_grads");
  REQUIRE(bytes_list.size() == 2);
  CHECK(bytes_list[0] == doctest::Approx(65536000));
  // Untied output layer (LLaMA style): none.
  const Scenario untied = scenario("dp: 1 tp: 2 pp: 2 micro_batch: 1 grad_accum: 2", 4, "samples: 1000",
                                   "model { layers: 4 hidden: 1024 heads: 16 vocab: 32000 seq_len: 1024 "
                                   "tied_embeddings: false }\n");
  CHECK(names(untied).count("allreduce.embedding_grads") == 0);
  // No pipeline: the embedding and the head are on the same rank, nothing to synchronise.
  CHECK(names(scenario("dp: 1 tp: 2 micro_batch: 1", 2)).count("allreduce.embedding_grads") == 0);
}

TEST_CASE("scatter/gather pipeline sends: 1/t of the activation per send, all-gathered by the receivers") {
  // pp 2, tp 2, m 2: 2 forward + 2 backward sends per tensor rank, 8 in all; each b·s·h·2 / t =
  // 1·1024·1024·2 / 2 = 1,048,576 B instead of 2,097,152. Each receiving step all-gathers: 2 forward
  // steps on stage 1 + 2 backward steps on stage 0 = 4 all-gathers of the whole 2,097,152 B.
  const Scenario plain = scenario("dp: 1 tp: 2 pp: 2 micro_batch: 1 grad_accum: 2", 4);
  const Scenario sg = scenario("dp: 1 tp: 2 pp: 2 micro_batch: 1 grad_accum: 2 pp_scatter_gather: true", 4);
  const auto full = message_bytes(plain, "send.activation"), split = message_bytes(sg, "send.activation");
  REQUIRE(full.size() == 4);
  REQUIRE(split.size() == 4);
  CHECK(full[0] == 2097152);
  CHECK(split[0] == 1048576);
  CHECK(message_bytes(sg, "send.gradient").at(0) == 1048576);
  const auto n = names(sg);
  CHECK(n.at("allgather.pp_activation") == 2);
  CHECK(n.at("allgather.pp_gradient") == 2);
  // Sequence parallelism already sends 1/t.
  CHECK(message_bytes(scenario("dp: 1 tp: 2 pp: 2 micro_batch: 1 grad_accum: 2 sequence_parallel: true", 4),
                      "send.activation")
            .at(0) == 1048576);
  // The step runs (no deadlock) and the scatter/gather layout simulates.
  CHECK(simulate_scenario(sg).jobs[0].iteration_time.raw() > 0);
}

TEST_CASE("data loader: a slow loader stalls the step, in the steady state it also refills the queue") {
  // One GPU, DDP, m = 4 micro-batches, prefetch q = 2: micro-batches 2 and 3 are produced during the step,
  // L = b / rate each, and then the next step's first 2 (each once its slot is freed: the copy of micro-batch
  // 2, resp. 3, has taken it from the queue). With L = 2c, c a micro-batch's compute:
  //   compute [h, h + 2c] (mb 0, 1), loader [0, L] and [L, 2L], copy [L, L + h] and [2L, 2L + h],
  //   mb 2 on [L + h, L + h + c], mb 3 on [2L + h, 2L + h + c], then the optimizer o: GPU end 2L + h + c + o;
  //   refill [2L, 3L] (after mb 2's copy ends at L + h < 2L) and [3L, 4L].
  //   step = max(4L, 2L + h + c + o): the loader's m = 4 micro-batches per step (4L = 8c) when it binds.
  //   input stall = time the input streams run alone: the loader is busy over [0, 4L] and the GPU's 4c + o
  //   lie inside it, so 4L − 4c − o.
  const LoaderSetting ls = loader_setting();
  const double h = ls.h, o = ls.o, c = ls.c;
  const double rate = 0.5 / c;  // L = 1 / rate = 2c per micro-batch
  const Scenario slow = scenario("dp: 1 micro_batch: 1 grad_accum: 4", 1,
                                 "samples: 1000 loader_samples_per_s_per_node: " + std::to_string(rate));
  const double L = 1.0 / std::stod(std::to_string(rate));
  REQUIRE(4 * L > 2 * L + h + c + o);  // the loader binds
  const ScenarioResult s = simulate_scenario(slow);
  CHECK(s.jobs[0].iteration_time.raw() == doctest::Approx(4 * L).epsilon(1e-6));
  CHECK(s.jobs[0].breakdown.exposed_input.raw() == doctest::Approx(4 * L - 4 * c - o).epsilon(1e-6));
  // A queue as deep as the step (q = m = 4) has every micro-batch ready at the start (copies [kh, (k + 1)h]),
  // but the loader must still make 4 per step, each after its slot's copy: [h, h + L], ..., ending h + 4L.
  // It hides the loader only when that is within the GPU's h + 4c + o; here 4L = 8c is not.
  const Scenario deep = scenario("dp: 1 micro_batch: 1 grad_accum: 4", 1,
                                 "samples: 1000 loader_prefetch: 4 loader_samples_per_s_per_node: " + std::to_string(rate));
  CHECK(simulate_scenario(deep).jobs[0].iteration_time.raw() ==
        doctest::Approx(std::max(h + 4 * L, h + 4 * c + o)).epsilon(1e-6));
  // A loader that keeps up (4 micro-batches in a quarter of the step) costs nothing with the deep queue.
  const Scenario quick =
      scenario("dp: 1 micro_batch: 1 grad_accum: 4", 1,
               "samples: 1000 loader_prefetch: 4 loader_samples_per_s_per_node: " + std::to_string(16 / ls.step));
  CHECK(simulate_scenario(quick).jobs[0].iteration_time.raw() == doctest::Approx(ls.step));
}

TEST_CASE("analytical estimate: the data loader's bound, as the graph runs the loader") {
  // The setting of the test above: one GPU, m = 4, micro-batch compute c, optimizer o, copy h. The estimate
  // replays the loader, copy and refill tasks (analytical_estimate.h), so on one stage it must give the graph's
  // step for any rate and queue depth. Hand values, L = 1 / rate per micro-batch:
  //   L = 2c, q = 2: 4L (the loader binds: m productions per step)
  //   L = 2c, q = 4: h + 4L (every micro-batch queued, but each refill waits for its slot's copy)
  //   L = c/2, q = 2: h + 4c + o (the loader keeps up; the step waits only for micro-batch 0's copy)
  // and the partly bound cases (L = 1.2c or 0.9c with q = 1 or 3) must agree with the graph all the same.
  const LoaderSetting ls = loader_setting();
  const Scenario& fast = ls.fast;
  const double h = ls.h, o = ls.o, c = ls.c;
  // Without a loader rate nothing is produced, but micro-batch 0 waits for its copy: h + 4c + o, the graph's step.
  CHECK(analytical_estimate(fast, fast.jobs[0]).iteration_time.raw() == doctest::Approx(h + 4 * c + o).epsilon(1e-9));
  CHECK(analytical_estimate(fast, fast.jobs[0]).iteration_time.raw() == doctest::Approx(ls.step).epsilon(1e-9));
  // A host link slower than the GPU (copy H = 3c per micro-batch, no loader rate): the copies run back to back, so
  // micro-batch k starts at (k + 1)H and the step is 4H + c' + o, c' the last micro-batch's compute (a later
  // micro-batch accumulates into the gradients the first one wrote: c' = step(m = 5) − step(m = 4)). The input
  // stall is what the step adds to the GPU's h + 4c + o. The estimate used to leave the copies out (4c + o, about
  // 3x short here), which ranked sweep layouts and sized plans on a step the GPUs cannot run.
  const double H = 3 * c;
  const double gbps = micro_batch_input_bytes(fast.jobs[0].model, 1).raw() / H / 1e9;
  const Scenario copy_bound =
      scenario("dp: 1 micro_batch: 1 grad_accum: 4", 1, "samples: 1000 host_to_device_GBps: " + std::to_string(gbps));
  const double H_set = micro_batch_input_bytes(fast.jobs[0].model, 1).raw() / (std::stod(std::to_string(gbps)) * 1e9);
  const double c_later =
      simulate_scenario(scenario("dp: 1 micro_batch: 1 grad_accum: 5", 1)).jobs[0].iteration_time.raw() - ls.step;
  CHECK(simulate_scenario(copy_bound).jobs[0].iteration_time.raw() ==
        doctest::Approx(4 * H_set + c_later + o).epsilon(1e-6));
  const AnalyticalEstimate copy_est = analytical_estimate(copy_bound, copy_bound.jobs[0]);
  CHECK(copy_est.iteration_time.raw() == doctest::Approx(4 * H_set + c_later + o).epsilon(1e-6));
  CHECK(copy_est.input_stall.raw() == doctest::Approx(4 * H_set + c_later + o - (ls.step - h)).epsilon(1e-6));
  struct Case {
    double L_over_c;
    std::uint32_t q;
  };
  for (const Case k : {Case{2, 2}, Case{2, 4}, Case{0.5, 2}, Case{1.2, 1}, Case{1.2, 3}, Case{0.9, 1}}) {
    const double rate = 1 / (k.L_over_c * c);
    const Scenario sc = scenario("dp: 1 micro_batch: 1 grad_accum: 4", 1,
                                 "samples: 1000 loader_prefetch: " + std::to_string(k.q) +
                                     " loader_samples_per_s_per_node: " + std::to_string(rate));
    const double L = 1.0 / std::stod(std::to_string(rate));
    const double simulated = simulate_scenario(sc).jobs[0].iteration_time.raw();
    const AnalyticalEstimate est = analytical_estimate(sc, sc.jobs[0]);
    CAPTURE(k.L_over_c);
    CAPTURE(k.q);
    CHECK(est.iteration_time.raw() == doctest::Approx(simulated).epsilon(1e-9));
    CHECK(est.input_stall.raw() == doctest::Approx(simulated - (4 * c + o)).epsilon(1e-6));
    if (k.L_over_c == 2 && k.q == 2) CHECK(simulated == doctest::Approx(4 * L).epsilon(1e-9));
    if (k.L_over_c == 2 && k.q == 4) CHECK(simulated == doctest::Approx(h + 4 * L).epsilon(1e-9));
    if (k.L_over_c == 0.5) CHECK(simulated == doctest::Approx(h + 4 * c + o).epsilon(1e-9));
  }
  // A pipeline (tp 2, pp 2, m 4; the loader serves the first and last stage's tensor rank 0, both on the one
  // node: 2 samples per micro-batch): loader-bound, the step is the m productions, 4 · 2 / rate, in both.
  const Scenario pp =
      scenario("dp: 1 tp: 2 pp: 2 micro_batch: 1 grad_accum: 4", 4, "samples: 1000 loader_samples_per_s_per_node: 20");
  CHECK(simulate_scenario(pp).jobs[0].iteration_time.raw() == doctest::Approx(0.4).epsilon(1e-9));
  CHECK(analytical_estimate(pp, pp.jobs[0]).iteration_time.raw() == doctest::Approx(0.4).epsilon(1e-9));
}

TEST_CASE("host-to-device copy: b·(s + 1) int64 tokens at the scenario's bandwidth") {
  // b = 4, s = 1024: 4·1025·8 = 32,800 B; at 2 GB/s that is 16.4 µs before the first kernel.
  const Scenario sc = scenario("dp: 1 micro_batch: 4", 1, "samples: 1000 host_to_device_GBps: 2");
  CHECK(micro_batch_input_bytes(sc.jobs[0].model, 4).raw() == 32800);
  CHECK(simulate_scenario(sc).jobs[0].breakdown.exposed_input.raw() == doctest::Approx(16.4e-6).epsilon(1e-9));
  // At 1e-6 GB/s (1 kB/s, the slowest rate the loader takes) b = 4096 sequences, 4096·1025·8 = 33,587,200 B, take
  // 33,587.2 s: a step of over 2^53 ps (9,007 s), where seconds in doubles no longer hold every picosecond. The
  // parts are counted in picoseconds, so they still add up and idle is exactly 0 (it was -7e-12 s, printed
  // "-0.000000").
  const Scenario slow = scenario("dp: 1 micro_batch: 4096", 1, "samples: 4096 host_to_device_GBps: 1e-6");
  const IterationResult r = simulate_scenario(slow).jobs[0];
  CHECK(r.iteration_time.raw() > 33587.2);
  CHECK(r.breakdown.idle.raw() == 0);
  CHECK(r.breakdown.exposed_input.raw() == doctest::Approx(33587.2).epsilon(1e-9));
}

TEST_CASE("step options: invalid combinations are input errors naming the field") {
  CHECK(error_of("dp: 1 micro_batch: 1 distributed_optimizer: true", 1) ==
        "step.textproto:4:56: parallel.distributed_optimizer: shards the optimizer over data-parallel ranks: needs dp >= 2 (or dp x cp >= 2)");
  CHECK(error_of("dp: 2 micro_batch: 1 pp_scatter_gather: true", 2).find("parallel.pp_scatter_gather: splits") !=
        std::string::npos);
  CHECK(error_of("dp: 1 micro_batch: 1", 1, "samples: 1000 loader_samples_per_s_per_node: 0")
            .find("training.loader_samples_per_s_per_node: 0 must be > 0") != std::string::npos);
  // A queue depth without a loader rate would be ignored.
  CHECK(error_of("dp: 1 micro_batch: 1", 1, "samples: 1000 loader_prefetch: 5")
            .find("training.loader_prefetch: the loader's queue depth needs training.loader_samples_per_s_per_node") !=
        std::string::npos);
  // A queue of 0 (a loader running ahead within a step but not across steps) is no DataLoader's behaviour.
  CHECK(error_of("dp: 1 micro_batch: 1", 1, "samples: 1000 loader_samples_per_s_per_node: 10 loader_prefetch: 0")
            .find("training.loader_prefetch: 0: the loader's queue holds at least 1 micro-batch") != std::string::npos);
  CHECK(error_of("dp: 1 micro_batch: 1", 1, "samples: 1000 host_to_device_GBps: -1")
            .find("training.host_to_device_GBps: -1 must be > 0") != std::string::npos);
}

TEST_CASE("full recomputation repeats the forward's tensor-parallel reductions") {
  // tp 2, 4 layers, one micro-batch: forward 2 AllReduces per layer, backward 2 (data gradients of QKV
  // and fc1) + 2 in the recomputed forward = 8 + 16 = 24, plus the embedding's forward and the output layer's
  // input gradient (neither is recomputed): 26; without recomputation 18; selective recompute repeats only the
  // attention core (no reduction): 18.
  auto count = [](const std::string& extra) {
    const auto n = names(scenario("dp: 1 tp: 2 micro_batch: 1 " + extra, 2));
    return n.count("allreduce.tp") ? n.at("allreduce.tp") : 0;
  };
  CHECK(count("") == 18);
  CHECK(count("recompute: SELECTIVE") == 18);
  CHECK(count("recompute: FULL") == 26);
}

TEST_CASE("HFU and causal MFU against Narayanan et al.'s and Korthikanti et al.'s closed forms") {
  // l = 4, h = 1024, s = 1024, V = 32000, full recompute. Model FLOPs 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)),
  // hardware FLOPs 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) (Narayanan et al. 2021 §5.1), so
  //   HFU / MFU = 96·(1 + 1/6 + 32000/65536) / (72·(1 + 1/6 + 32000/49152)) = 158.875 / 130.875 = 1.21395;
  // causal attention halves the s/(6h) term: (1 + 1/12 + 0.651042) / (1 + 1/6 + 0.651042) = 0.954155.
  const ScenarioResult r = simulate_scenario(scenario("dp: 1 tp: 2 micro_batch: 1 recompute: FULL", 2));
  CHECK(r.jobs[0].hfu / r.jobs[0].mfu == doctest::Approx(158.875 / 130.875).epsilon(1e-9));
  CHECK(r.jobs[0].mfu_causal / r.jobs[0].mfu ==
        doctest::Approx((1 + 1.0 / 12 + 32000.0 / 49152) / (1 + 1.0 / 6 + 32000.0 / 49152)).epsilon(1e-9));
  // Without recomputation HFU equals MFU.
  const ScenarioResult n = simulate_scenario(scenario("dp: 1 tp: 2 micro_batch: 1", 2));
  CHECK(n.jobs[0].hfu == doctest::Approx(n.jobs[0].mfu).epsilon(1e-12));
}

TEST_CASE("compute slowdown during communication: applied by simulate_scenario, exact under symmetry") {
  // DDP on 2 nodes, compute-bound (micro-batch 16), bucket all-reduces overlapping the backward: with s = 1.5 every kernel overlapped by an
  // all-reduce runs at 2/3 speed, so the step grows; at s = 1 it is unchanged. A Megatron layout with
  // data-parallel replicas gives the same result reduced (one replica simulated) and in full.
  Scenario ddp = cli::load_scenario_text(
      "cluster { nodes: 2 gpus_per_node: 1 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 "
      "nic_gbits_per_s_per_direction: 200 }\nprofile: \"a100-sxm4-80gb\"\n" + kModel +
          "parallel { dp: 2 micro_batch: 16 ddp_bucket_mib: 4 }\ntraining { samples: 1000 }\n",
      "ddp.textproto", false, "");
  ddp.fidelity = Fidelity::kAnalytical;
  const double base = simulate_scenario(ddp).jobs[0].iteration_time.raw();
  ddp.profile.gpu.compute_slowdown_during_comm = 1.5;
  const double slow = simulate_scenario(ddp).jobs[0].iteration_time.raw();
  CHECK(slow > base);

  Scenario mg = cli::load_scenario_text(
      "cluster { nodes: 2 gpus_per_node: 2 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 "
      "nic_gbits_per_s_per_direction: 200 }\nprofile: \"a100-sxm4-80gb\"\n" + kModel +
          "parallel { dp: 2 tp: 2 micro_batch: 1 grad_accum: 2 overlap_grad_reduce: true ddp_bucket_mib: 4 }\n"
          "training { samples: 1000 }\n",
      "mg.textproto", false, "");
  mg.fidelity = Fidelity::kAnalytical;
  mg.profile.gpu.compute_slowdown_during_comm = 1.3;
  const ScenarioResult reduced = simulate_scenario(mg), full = simulate_scenario(mg, {}, nullptr, 8, Symmetry::kOff);
  CHECK(reduced.jobs[0].iteration_time == full.jobs[0].iteration_time);
}
