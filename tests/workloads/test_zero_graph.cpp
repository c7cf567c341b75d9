// ZeRO / FSDP sharded data parallelism (workloads/zero_graph.h): communication volume, the step's
// critical path, and memory, with the expected numbers derived in the comments.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>

#include "cli/scenario_loader.h"
#include "sim/input_error.h"
#include "workloads/analytical_estimate.h"
#include "workloads/collective_engine.h"
#include "workloads/compute_model.h"
#include "workloads/input_pipeline.h"
#include "workloads/iteration_result.h"
#include "workloads/nccl_model.h"
#include "workloads/transformer_ops.h"
#include "workloads/zero_graph.h"

using namespace clustersim;
using namespace clustersim::workloads;

namespace {

const std::string kModel = "model { layers: 4 hidden: 1024 heads: 16 vocab: 32000 seq_len: 1024 }\n";

Scenario scenario(const std::string& parallel, std::uint32_t nodes, std::uint32_t per_node,
                  const std::string& model = kModel) {
  Scenario sc = cli::load_scenario_text(
      "cluster { nodes: " + std::to_string(nodes) + " gpus_per_node: " + std::to_string(per_node) +
          " gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 nic_gbits_per_s_per_direction: 200 }\n"
          "profile: \"a100-sxm4-80gb\"\n" + model + "parallel { " + parallel + " }\ntraining { samples: 1000 }\n",
      "zero.textproto", false, "");
  sc.fidelity = Fidelity::kAnalytical;
  return sc;
}

struct Volume {
  double allgather = 0, reducescatter = 0, allreduce = 0;  // elements (bytes / element size)
  std::map<std::string, int> count;
};

Volume volume(const Scenario& sc, double element) {
  sim::Simulation s;
  CollectiveEngine engine(s, sc, nullptr);
  sim::TaskGraph g;
  const Job& job = sc.jobs[0];
  const JobGraph it = job.parallel.megatron() ? JobGraph{} : (job.parallel.effective_framework() == Framework::kPytorchDdp
                                                                   ? build_ddp_job(sc, job, g, engine)
                                                                   : build_zero_job(sc, job, g, engine));
  Volume v;
  for (sim::TaskId t = 0; t < g.size(); ++t) {
    const sim::TaskLabel& l = g.label(t);
    if (l.category != kCategoryDpComm) continue;
    double size = 0;
    for (const sim::TaskArg& a : l.args)
      if (a.key == "bytes") size = a.number / element;
    const std::string kind = l.name.substr(0, l.name.find('.'));
    ++v.count[kind];
    if (kind == "allgather") v.allgather += size;
    if (kind == "reducescatter") v.reducescatter += size;
    if (kind == "allreduce") v.allreduce += size;
  }
  return v;
}

std::string error_of(const std::string& parallel) {
  try {
    scenario(parallel, 1, 2);
  } catch (const InputError& e) {
    return e.message();
  }
  return "";
}

}  // namespace

TEST_CASE("FSDP FULL_SHARD moves 3 parameter volumes per step against DDP's 2") {
  // Ψ parameters, root unit (embeddings, final norm; tied head) Ψ_r. Per micro-batch FSDP all-gathers
  // every unit for the forward (Ψ), the blocks again for the backward (Ψ − Ψ_r: the root is not resharded
  // after the forward) and reduce-scatters every unit's gradients (Ψ): 3Ψ − Ψ_r elements. DDP all-reduces
  // Ψ gradient elements, 2Ψ on the wire (reduce-scatter + all-gather halves of the ring).
  const Scenario fsdp = scenario("dp: 4 micro_batch: 1 framework: FSDP", 1, 4);
  const Scenario ddp = scenario("dp: 4 micro_batch: 1", 1, 4);
  const double psi = fsdp.jobs[0].model.parameter_count();
  // Root: word embeddings 32000·1024 + positions 1024·1024 + final norm 2·1024.
  const double root = 32000.0 * 1024 + 1024.0 * 1024 + 2 * 1024;
  const Volume f = volume(fsdp, 2), d = volume(ddp, 4);
  CHECK(f.count.at("allgather") == 5 + 4);  // 4 blocks + root forward, 4 blocks backward
  CHECK(f.count.at("reducescatter") == 5);
  CHECK(f.allgather == doctest::Approx(2 * psi - root));
  CHECK(f.reducescatter == doctest::Approx(psi));
  CHECK(d.allreduce == doctest::Approx(psi));
  // Wire elements per rank, (d − 1)/d of each AG/RS, 2(d − 1)/d of an AllReduce: 3Ψ − Ψ_r vs 2Ψ (× 3/4).
  CHECK((f.allgather + f.reducescatter) * 3 / 4 == doctest::Approx((3 * psi - root) * 3 / 4));
  CHECK(d.allreduce * 2 * 3 / 4 == doctest::Approx(2 * psi * 3 / 4));
  // Two micro-batches: FSDP gathers and reduces every micro-batch; DDP only reduces after the last.
  const Volume f2 = volume(scenario("dp: 4 micro_batch: 1 grad_accum: 2 framework: FSDP", 1, 4), 2);
  CHECK(f2.allgather == doctest::Approx(2 * f.allgather));
  CHECK(f2.reducescatter == doctest::Approx(2 * f.reducescatter));
}

TEST_CASE("DeepSpeed ZeRO-1: reduce-scatter after the backward, step the shard, all-gather the parameters") {
  // 2 GPUs, ANALYTICAL, one micro-batch. ZeRO-1's step is: input copy h, forward and backward F, one
  // reduce-scatter of Ψ·2 B (Ψ < 5e8 elements: one bucket), the optimizer over Ψ/2 fp32 parameters
  // (4 + 8 + 16 = 28 B each), and one all-gather of Ψ·2 B. DDP's compute stream holds F, its copy of each
  // bucket's fp32 gradients into the bucket, the copy of all of them back, its optimizer over Ψ, and autocast's
  // casts of its fp32 weights (forward) and of their gradients (backward) with the tied embedding's gradient sum
  // (ddp_graph.h; test_ddp.cpp derives their bytes), which DeepSpeed's 16-bit module does not have, and runs the
  // layers as eager PyTorch does under autocast (eager_forward_ops: an fp32 residual stream, fp32 softmax, the
  // norm outputs' casts) where DeepSpeed's 16-bit module runs the same eager kernels in 16 bits (OpConfig::eager
  // without autocast: no fp32 residual stream, 16-bit softmax, no casts), so
  // F = compute(DDP) − copies − opt(Ψ) − casts − Σ(autocast ops − 16-bit eager ops).
  const Scenario z1 = scenario("dp: 2 micro_batch: 1 framework: DEEPSPEED zero_stage: 1", 1, 2);
  const Scenario ddp = scenario("dp: 2 micro_batch: 1", 1, 2);
  const ScenarioResult a = simulate_scenario(z1), b = simulate_scenario(ddp);
  const double psi = z1.jobs[0].model.parameter_count();
  const auto& gpu = z1.profile.gpu;
  const double opt_full = op_time(optimizer_op(psi), gpu, Precision::kBF16).raw();
  const double opt_half = op_time(optimizer_op(psi / 2), gpu, Precision::kBF16).raw();
  double copies = op_time(copy_op("out", bytes(4 * psi)), gpu, Precision::kBF16).raw();
  for (const GradientBucket& bucket : b.jobs[0].buckets)
    copies += op_time(copy_op("in", bucket.size), gpu, Precision::kBF16).raw();
  double casts = op_time(autocast_weights_op(forward_ops(ddp.jobs[0].model, 1, Precision::kBF16), Precision::kBF16),
                         gpu, Precision::kBF16)
                     .raw();
  const std::vector<Op> bwd = backward_ops(ddp.jobs[0].model, 1, Precision::kBF16);
  for (const Op& op : bwd)
    if (const Op e = gradient_epilogue_op(op, Precision::kBF16, false, tied_head_elements(bwd)); e.bytes.raw() > 0)
      casts += op_time(e, gpu, Precision::kBF16).raw();
  double eager = 0;
  const clustersim::workloads::ModelSpec& gpt = ddp.jobs[0].model;
  for (const auto& ops : {eager_forward_ops(gpt, 1, Precision::kBF16), eager_backward_ops(gpt, 1, Precision::kBF16)})
    for (const Op& op : ops) eager += op_time(op, gpu, Precision::kBF16).raw();
  clustersim::workloads::OpConfig sixteen_bit;
  sixteen_bit.micro_batch = 1;
  sixteen_bit.precision = Precision::kBF16;
  sixteen_bit.eager = true;
  for (const auto& ops : {forward_ops(gpt, sixteen_bit), backward_ops(gpt, sixteen_bit)})
    for (const Op& op : ops) eager -= op_time(op, gpu, Precision::kBF16).raw();
  CHECK(eager > 0);
  const double F = b.jobs[0].breakdown.compute.raw() - copies - opt_full - casts - eager;
  const CollectiveModel model(z1.cluster, z1.profile);
  const double rs = model.plan({CollectiveOp::kReduceScatter, {0, 1}, bytes(2 * psi), 0}).time.raw();
  const double ag = model.plan({CollectiveOp::kAllGather, {0, 1}, bytes(2 * psi), 0}).time.raw();
  const double h = micro_batch_input_bytes(z1.jobs[0].model, 1).raw() / 24e9;
  CHECK(a.jobs[0].iteration_time.raw() == doctest::Approx(h + F + rs + opt_half + ag).epsilon(1e-9));
  CHECK(a.jobs[0].breakdown.exposed_comm.raw() == doctest::Approx(rs + ag).epsilon(1e-9));
}

TEST_CASE("DeepSpeed ZeRO-2 reduce-scatters every micro-batch's gradients, ZeRO-1 only the last's") {
  // 2 GPUs, 4 micro-batches. ZeRO-2 partitions the gradients, so each micro-batch's Ψ·2 B are reduce-scattered
  // (one bucket: Ψ < 5e8 elements) on the compute stream before the next forward; ZeRO-1 accumulates whole
  // gradients and reduces once. The optimizer (Ψ/2 shard) and the all-gather are the same, so
  // T(ZeRO-2) − T(ZeRO-1) = (4 − 1) · rs and the exposed communication grows by the same.
  const Scenario z1 = scenario("dp: 2 micro_batch: 1 grad_accum: 4 framework: DEEPSPEED zero_stage: 1", 1, 2);
  const Scenario z2 = scenario("dp: 2 micro_batch: 1 grad_accum: 4 framework: DEEPSPEED zero_stage: 2", 1, 2);
  const double psi = z1.jobs[0].model.parameter_count();
  const Volume v1 = volume(z1, 2), v2 = volume(z2, 2);
  CHECK(v1.count.at("reducescatter") == 1);
  CHECK(v2.count.at("reducescatter") == 4);
  CHECK(v2.reducescatter == doctest::Approx(4 * psi));
  CHECK(v2.allgather == doctest::Approx(v1.allgather));
  const CollectiveModel model(z1.cluster, z1.profile);
  const double rs = model.plan({CollectiveOp::kReduceScatter, {0, 1}, bytes(2 * psi), 0}).time.raw();
  const ScenarioResult a = simulate_scenario(z1), b = simulate_scenario(z2);
  CHECK(b.jobs[0].iteration_time.raw() - a.jobs[0].iteration_time.raw() == doctest::Approx(3 * rs).epsilon(1e-6));
  CHECK(b.jobs[0].breakdown.exposed_comm.raw() - a.jobs[0].breakdown.exposed_comm.raw() ==
        doctest::Approx(3 * rs).epsilon(1e-6));
  // The sweep's closed form charges the same.
  AnalyticalEstimator estimator(z2, z2.jobs[0]);
  CHECK(estimator.estimate(z2.jobs[0].parallel).iteration_time.raw() ==
        doctest::Approx(b.jobs[0].iteration_time.raw()).epsilon(0.01));
}

TEST_CASE("FSDP: all-gathers run ahead of the compute, only the first ones are exposed when compute dominates") {
  // On one node the per-block all-gathers (≈ 12.6M params · 2 B = 25 MB at ~200 GB/s ≈ 0.13 ms) are
  // shorter than a block's forward, so after the root's and the first block's all-gathers the rest hide
  // behind compute; the exposed communication is at least the root's all-gather and well below the sum.
  const Scenario sc = scenario("dp: 2 micro_batch: 8 framework: FSDP", 1, 2);
  const ScenarioResult r = simulate_scenario(sc);
  const Volume v = volume(sc, 2);
  const CollectiveModel model(sc.cluster, sc.profile);
  const double root = 32000.0 * 1024 + 1024.0 * 1024 + 2 * 1024;
  const double ag_root = model.plan({CollectiveOp::kAllGather, {0, 1}, bytes(2 * root), 0}).time.raw();
  const double all_comm = model.plan({CollectiveOp::kAllGather, {0, 1}, bytes(2 * v.allgather), 0}).time.raw() +
                          model.plan({CollectiveOp::kReduceScatter, {0, 1}, bytes(2 * v.reducescatter), 0}).time.raw();
  CHECK(r.jobs[0].breakdown.exposed_comm.raw() >= ag_root);
  CHECK(r.jobs[0].breakdown.exposed_comm.raw() < 0.5 * all_comm);
}

TEST_CASE("ZeRO memory per GPU follows Rajbhandari et al.'s bytes per parameter") {
  // 64 GPUs (8 nodes x 8). Model states per parameter, mixed-precision Adam: stage 1 4 + 12/64, stage 2
  // 2 + 14/64, stage 3 16/64 (the paper's 7.5B example: 31.4, 16.6, 1.9 GB).
  for (const auto& [stage, expected] : {std::pair{1, 4 + 12.0 / 64}, {2, 2 + 14.0 / 64}, {3, 16.0 / 64}}) {
    CAPTURE(stage);
    const Scenario sc = scenario("dp: 64 micro_batch: 1 framework: DEEPSPEED zero_stage: " + std::to_string(stage), 8, 8);
    const MemoryEstimate m = estimate_zero_memory(sc, sc.jobs[0]);
    double states = 0;
    for (const MemoryPart& p : m.parts)
      if (p.name.rfind("weights", 0) == 0 || p.name.rfind("gradients", 0) == 0 || p.name.rfind("optimizer", 0) == 0)
        states += p.size.raw();
    CHECK(states / sc.jobs[0].model.parameter_count() == doctest::Approx(expected));
  }
  // FSDP SHARD_GRAD_OP holds what DeepSpeed ZeRO-2 holds: the whole 16-bit model (gathered in the forward,
  // kept until the backward) once, 2 + 14/64 bytes per parameter, and no second "gathered" copy.
  const Scenario fsdp2 = scenario("dp: 64 micro_batch: 1 framework: FSDP zero_stage: 2", 8, 8);
  const Scenario ds2 = scenario("dp: 64 micro_batch: 1 framework: DEEPSPEED zero_stage: 2", 8, 8);
  const MemoryEstimate f2 = estimate_zero_memory(fsdp2, fsdp2.jobs[0]);
  CHECK(f2.peak.raw() == estimate_zero_memory(ds2, ds2.jobs[0]).peak.raw());
  for (const MemoryPart& p : f2.parts) CHECK(p.name.find("gathered") == std::string::npos);
  // Hybrid sharding shards within the node only: 16/8 bytes per parameter.
  const Scenario hy = scenario("dp: 64 micro_batch: 1 framework: FSDP hybrid_shard: true", 8, 8);
  CHECK(zero_shard_ranks(hy, hy.jobs[0]) == 8);
}

TEST_CASE("hybrid sharding: reduce-scatter within the node, all-reduce of the shard across nodes") {
  // 2 nodes x 2 GPUs: per unit one reduce-scatter per node and one all-reduce per replica pair of the
  // 1/2 shard; so all-reduce elements = reduce-scatter elements / 2 per replica group x 2 groups.
  const Scenario sc = scenario("dp: 4 micro_batch: 1 framework: FSDP hybrid_shard: true", 2, 2);
  const Volume v = volume(sc, 2);
  CHECK(v.count.at("reducescatter") == 2 * 5);
  CHECK(v.count.at("allreduce") == 2 * 5);
  CHECK(v.allreduce == doctest::Approx(v.reducescatter / 2));
  CHECK(simulate_scenario(sc).jobs[0].iteration_time.raw() > 0);
}

TEST_CASE("ZeRO options: invalid combinations name the field") {
  CHECK(error_of("dp: 2 micro_batch: 1 framework: FSDP zero_stage: 1").find("FSDP shards gradients") == 0);
  CHECK(error_of("dp: 2 micro_batch: 1 zero_stage: 5") == "5 is not a ZeRO stage (0, 1, 2 or 3)");
  CHECK(error_of("dp: 2 micro_batch: 1 framework: PYTORCH_DDP zero_stage: 2").find("ZeRO sharding needs") == 0);
  CHECK(error_of("dp: 1 tp: 2 micro_batch: 1 framework: FSDP") ==
        "PyTorch FSDP runs data parallelism only; model parallelism needs framework MEGATRON");
  CHECK(error_of("dp: 2 micro_batch: 1 hybrid_shard: true") == "needs framework FSDP or DEEPSPEED");
  // Hybrid sharding and Horovod's hierarchical AllReduce split the job by node: GPUs 6-15 of 2 x 8 put 2 on
  // node 0 and 8 on node 1, which has no shard group per node (ranks 6-9 were all-reduced, 10-15 never). The
  // error is at the value: line 7 "  parallel { dp: 10 micro_batch: 1 framework: FSDP hybrid_shard: true }", column
  // 13 + 7 + 15 + 16 + 14 + 1 = 66.
  auto uneven = [](const std::string& parallel) {
    try {
      cli::load_scenario_text(
          "cluster { nodes: 2 gpus_per_node: 8 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 "
          "nic_gbits_per_s_per_direction: 200 }\nprofile: \"a100-sxm4-80gb\"\njobs {\n  name: \"a\"\n  gpus: \"6-15\"\n" +
              kModel + "  parallel { " + parallel + " }\n  training { samples: 1000 }\n}\n",
          "uneven.textproto", false, "");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(uneven("dp: 10 micro_batch: 1 framework: FSDP hybrid_shard: true") ==
        "uneven.textproto:7:66: jobs[0].parallel.hybrid_shard: needs the same number of the job's GPUs on every "
        "node: node 0 has 2, node 1 has 8");
  CHECK(uneven("dp: 10 micro_batch: 1 framework: HOROVOD horovod_hierarchical: true")
            .find("jobs[0].parallel.horovod_hierarchical: needs the same number of the job's GPUs on every node") !=
        std::string::npos);
  CHECK(uneven("dp: 10 micro_batch: 1 framework: FSDP").empty());  // flat FSDP runs on any GPUs
}

namespace {

// GEMM FLOPs of the compute kernels of GPU 0's compute stream whose label name contains `part`.
double stream_gemm_flops(const sim::TaskGraph& g, const JobGraph& it, const std::vector<Op>& kinds,
                         const std::string& part) {
  std::map<std::string, OpKind> kind_of;
  for (const Op& op : kinds) kind_of[op.name] = op.kind;
  double total = 0;
  for (sim::TaskId t : g.stream_tasks(it.compute_stream[0])) {
    const sim::TaskLabel& l = g.label(t);
    const auto k = kind_of.find(l.name);
    if (k == kind_of.end() || k->second != OpKind::kGemm || l.name.find(part) == std::string::npos) continue;
    for (const sim::TaskArg& a : l.args)
      if (a.key == "flops") total += a.number;
  }
  return total;
}

}  // namespace

TEST_CASE("FSDP activation checkpointing: each block's backward re-runs its forward, +1/3 of the blocks' GEMMs") {
  // 4 blocks, h 1024, a 16, s 1024, B 1, one micro-batch. A block's forward GEMM FLOPs:
  //   QKV 2·T·h·3h + scores 2·s²·h + ·V 2·s²·h + proj 2·T·h² + MLP 2·T·h·8h = 24·T·h² + 4·s²·h (T = s)
  //   = 24·2^30 + 4·2^30 = 28·2^30 FLOPs; its backward twice that. Full recompute re-runs the forward once
  //   more: 4 blocks · 28·2^30 = 112·2^30 recomputed FLOPs = 1/3 of the blocks' fwd + bwd (4 · 3 · 28·2^30).
  const Scenario plain = scenario("dp: 2 micro_batch: 1 framework: FSDP flash_attention: true", 1, 2);
  const Scenario ckpt = scenario("dp: 2 micro_batch: 1 framework: FSDP recompute: FULL flash_attention: true", 1, 2);
  auto build = [](const Scenario& sc, sim::TaskGraph& g) {
    sim::Simulation s;
    CollectiveEngine engine(s, sc, nullptr);
    return build_zero_job(sc, sc.jobs[0], g, engine);
  };
  sim::TaskGraph gp, gc;
  const JobGraph ip = build(plain, gp), ic = build(ckpt, gc);
  const OpConfig cfg = zero_op_config(ckpt.jobs[0]);
  CHECK(cfg.recompute == Recompute::kFull);
  CHECK(cfg.attention == AttentionKernel::kFlash);
  std::vector<Op> kinds = forward_ops(ckpt.jobs[0].model, cfg);
  for (Op& op : backward_ops(ckpt.jobs[0].model, cfg)) kinds.push_back(std::move(op));
  const double block_fwd = 28.0 * (1u << 30);
  const double recomputed = stream_gemm_flops(gc, ic, kinds, ".recompute");
  CHECK(recomputed == doctest::Approx(4 * block_fwd).epsilon(1e-12));
  const double blocks_plain = stream_gemm_flops(gp, ip, kinds, "L");  // "L<i>." ops (lm_head has no 'L')
  CHECK(blocks_plain == doctest::Approx(4 * 3 * block_fwd).epsilon(1e-12));
  CHECK(stream_gemm_flops(gc, ic, kinds, "L") == doctest::Approx(blocks_plain * 4 / 3).epsilon(1e-12));
  // The recomputed forward of block L1 (FSDP unit 2) runs first in that unit's backward, after the unit's
  // backward all-gather: the checkpointed forward needs the gathered parameters.
  const auto& tasks = gc.stream_tasks(ic.compute_stream[0]);
  const auto first = std::find_if(tasks.begin(), tasks.end(), [&](sim::TaskId t) {
    return gc.label(t).name.rfind("L1.", 0) == 0 && gc.label(t).name.find(".recompute") != std::string::npos;
  });
  REQUIRE(first != tasks.end());
  CHECK(gc.label(*first).name == "L1.ln1.recompute");
  bool after_gather = false;
  for (sim::TaskId d : gc.deps(*first)) after_gather |= gc.label(d).name == "allgather.bwd.unit2";
  CHECK(after_gather);
  // It precedes the block's own backward kernels on the stream.
  const auto first_bwd = std::find_if(tasks.begin(), tasks.end(), [&](sim::TaskId t) {
    return gc.label(t).name.rfind("L1.", 0) == 0 && gc.label(t).name.find(".bwd") != std::string::npos;
  });
  CHECK(first < first_bwd);
  // The step takes longer by the recomputed kernels (compute-bound on one node).
  CHECK(simulate_scenario(ckpt).jobs[0].iteration_time > simulate_scenario(plain).jobs[0].iteration_time);
}

TEST_CASE("FSDP memory with activation checkpointing: the blocks' inputs plus one block being recomputed") {
  // 4 blocks, h 1024, a 16, s 1024, micro-batch 2 (T = 2048 tokens), bf16 (e = 2), dropout masks counted.
  // Without recompute, explicit attention, per block (Korthikanti et al. Table 2):
  //   34·T·h + 5·a·s²·b = 34·2048·1024 + 5·16·1024²·2 = 71,303,168 + 167,772,160 = 239,075,328 B; 4 blocks
  //   956,301,312 B. Full recompute keeps each block's input e·T·h = 4,194,304 B (16,777,216 B for 4) and,
  //   while a block is recomputed, that block's activations: with FlashAttention 34·T·h + 4·a·s·b (fp32 row
  //   statistics) = 71,303,168 + 131,072 = 71,434,240 B.
  auto part = [](const MemoryEstimate& m, const std::string& prefix) {
    for (const MemoryPart& p : m.parts)
      if (p.name.rfind(prefix, 0) == 0) return p.size.raw();
    return -1.0;
  };
  const Scenario none = scenario("dp: 2 micro_batch: 2 framework: FSDP", 1, 2);
  const Scenario full = scenario("dp: 2 micro_batch: 2 framework: FSDP recompute: FULL flash_attention: true", 1, 2);
  const MemoryEstimate a = estimate_zero_memory(none, none.jobs[0]), b = estimate_zero_memory(full, full.jobs[0]);
  CHECK(part(a, "activations (") == doctest::Approx(956301312.0));
  CHECK(part(a, "activations of the layer being recomputed") == -1.0);
  CHECK(part(b, "activations (") == doctest::Approx(16777216.0));
  CHECK(part(b, "activations of the layer being recomputed") == doctest::Approx(71434240.0));
  CHECK(b.peak < a.peak);
  // The model states and gathered parameters do not change.
  CHECK(part(b, "gathered parameters") == part(a, "gathered parameters"));
}

TEST_CASE("recompute: accepted by FSDP and DeepSpeed, still rejected by DDP, flash_attention by every framework") {
  CHECK(error_of("dp: 2 micro_batch: 1 framework: FSDP recompute: FULL flash_attention: true").empty());
  CHECK(error_of("dp: 2 micro_batch: 1 framework: DEEPSPEED zero_stage: 2 recompute: SELECTIVE").empty());
  CHECK(
      error_of("dp: 2 micro_batch: 1 framework: PYTORCH_DDP recompute: FULL").find("does not take Megatron options") !=
      std::string::npos);
  // Eager PyTorch's F.scaled_dot_product_attention: DDP, Horovod and DataParallel take flash_attention.
  CHECK(error_of("dp: 2 micro_batch: 1 framework: PYTORCH_DDP flash_attention: true").empty());
  CHECK(error_of("dp: 2 micro_batch: 1 framework: HOROVOD flash_attention: true").empty());
  CHECK(error_of("dp: 2 micro_batch: 1 framework: DATA_PARALLEL flash_attention: true").empty());
  CHECK(error_of("dp: 2 micro_batch: 1 framework: FSDP overlap_grad_reduce: true")
            .find("does not take Megatron options") != std::string::npos);
}

TEST_CASE("FSDP and ZeRO-3 under gradient accumulation: a micro-batch starts after the previous one's reductions") {
  // PyTorch FSDP syncs gradients every micro-batch (no no_sync): its post-backward final callback makes the
  // compute stream wait for the reduce-scatters, and the next forward's all-gathers wait for the compute stream;
  // DeepSpeed ZeRO-3's gradient epilogue synchronises its reduce stream the same way. So every micro-batch spans
  // the same T_mb, from its start to its last reduce-scatter's end, and
  //   T(1) = T_input + T_mb + T_opt,   T(2) = T_input + 2·T_mb + T_opt   →   T(2) − T(1) = T(1) − T_input − T_opt,
  // with T_opt the Adam step over the rank's 1/4 shard (1 node × 4 GPUs, contention-free ANALYTICAL). Before, the
  // second micro-batch's all-gathers ran during the first one's backward and its forward during the reductions,
  // and T(2) − T(1) fell short of that by the overlap.
  for (const std::string fw : {"framework: FSDP", "framework: DEEPSPEED zero_stage: 3"}) {
    CAPTURE(fw);
    const Scenario one = scenario("dp: 4 micro_batch: 1 grad_accum: 1 " + fw, 1, 4);
    const Scenario two = scenario("dp: 4 micro_batch: 1 grad_accum: 2 " + fw, 1, 4);
    const ScenarioResult r1 = simulate_scenario(one), r2 = simulate_scenario(two);
    const double t1 = r1.jobs[0].iteration_time.raw(), t2 = r2.jobs[0].iteration_time.raw();
    const Job& job = one.jobs[0];
    const double opt = op_time(optimizer_op(job.model.parameter_count() / 4, job.training.optimizer, 4, false),
                               one.profile.gpu, job.training.precision)
                           .raw();
    const double input = r1.jobs[0].per_gpu[0].exposed_input.raw();
    CHECK(t2 - t1 == doctest::Approx(t1 - input - opt).epsilon(1e-6));
    // The analytical estimate (sweep, plan) follows the same rule.
    AnalyticalEstimator estimator(two, two.jobs[0]);
    CHECK(estimator.estimate(two.jobs[0].parallel).iteration_time.raw() == doctest::Approx(t2).epsilon(1e-3));
  }
}

TEST_CASE("ZeRO-3 with a shard group of one rank gathers nothing, and DeepSpeed hybrid needs stage 3") {
  // FSDP falls back to NO_SHARD when its sharding group has one rank: the weights row already holds the whole
  // 16-bit model, so no "gathered parameters" row is added (it had counted 2Ψ twice).
  const Scenario one = scenario("dp: 1 micro_batch: 1 framework: FSDP", 1, 1);
  const MemoryEstimate m = estimate_zero_memory(one, one.jobs[0]);
  for (const MemoryPart& p : m.parts) CHECK(p.name.find("gathered") == std::string::npos);
  // Two ranks do gather: the row is there.
  const Scenario two = scenario("dp: 2 micro_batch: 1 framework: FSDP", 1, 2);
  const MemoryEstimate m2 = estimate_zero_memory(two, two.jobs[0]);
  CHECK(std::any_of(m2.parts.begin(), m2.parts.end(),
                    [](const MemoryPart& p) { return p.name.find("gathered") != std::string::npos; }));
  // DeepSpeed's hierarchical sharding (MiCS) is a ZeRO-3 feature; stages 1 and 2 with hybrid_shard are refused (on
  // one GPU per node they had run without any gradient communication).
  CHECK(error_of("dp: 2 micro_batch: 1 framework: DEEPSPEED zero_stage: 2 hybrid_shard: true") ==
        "DeepSpeed shards within a group and replicates across groups (MiCS) only at ZeRO stage 3; zero_stage is 2");
  CHECK(error_of("dp: 2 micro_batch: 1 framework: DEEPSPEED zero_stage: 3 hybrid_shard: true").empty());
  // DDP's bucket size is refused where no DDP buckets exist (it had been accepted and ignored).
  CHECK(error_of("dp: 2 micro_batch: 1 framework: FSDP ddp_bucket_mib: 25")
            .starts_with("is the gradient bucket size of PyTorch DDP and Megatron-LM; PyTorch FSDP does not use it"));
  CHECK(error_of("dp: 2 micro_batch: 1 framework: HOROVOD ddp_bucket_mib: 25").find("does not use it") !=
        std::string::npos);
  CHECK(error_of("dp: 2 micro_batch: 1 framework: PYTORCH_DDP ddp_bucket_mib: 25").empty());
  // A ZeRO stage without a framework is DeepSpeed, also with FlashAttention or activation checkpointing (they
  // had made it Megatron-LM, which then refused the stage).
  CHECK(scenario("dp: 2 micro_batch: 1 zero_stage: 3 flash_attention: true", 1, 2)
            .jobs[0]
            .parallel.effective_framework() == Framework::kDeepSpeed);
  CHECK(scenario("dp: 2 micro_batch: 1 zero_stage: 2 recompute: FULL", 1, 2).jobs[0].parallel.effective_framework() ==
        Framework::kDeepSpeed);
}

TEST_CASE("FSDP forward all-gathers: FULL_SHARD two ahead of the frees, SHARD_GRAD_OP all at the start") {
  // FSDP's limit_all_gathers holds an all-gather until the frees of two units back have happened; FULL_SHARD frees
  // each unit after its forward, so unit u's all-gather waits for unit u − 2's forward. SHARD_GRAD_OP frees nothing
  // in the forward, the limiter never waits, and the host issues every unit's all-gather as it runs ahead: none of
  // them waits for a kernel. 4 layers: units 0 (root) .. 4, one micro-batch.
  for (const auto& [stage, limited] : {std::pair{3, true}, {2, false}}) {
    CAPTURE(stage);
    const Scenario sc = scenario("dp: 2 micro_batch: 1 framework: FSDP zero_stage: " + std::to_string(stage), 1, 2);
    sim::Simulation s;
    CollectiveEngine engine(s, sc, nullptr);
    sim::TaskGraph g;
    build_zero_job(sc, sc.jobs[0], g, engine);
    int gathers = 0, waiting = 0;
    for (sim::TaskId t = 0; t < g.size(); ++t) {
      const std::string& name = g.label(t).name;
      if (!name.starts_with("allgather.fwd.unit")) continue;
      ++gathers;
      for (sim::TaskId d : g.deps(t))
        if (g.label(d).category == kCategoryCompute) ++waiting;
    }
    CHECK(gathers == 5);
    // Units 2, 3 and 4 wait for the forward of units 0, 1 and 2 (one compute task per rank each: 3 · 2).
    CHECK(waiting == (limited ? 3 * 2 : 0));
    // The analytical estimate follows the same rule.
    AnalyticalEstimator estimator(sc, sc.jobs[0]);
    CHECK(estimator.estimate(sc.jobs[0].parallel).iteration_time.raw() ==
          doctest::Approx(simulate_scenario(sc).jobs[0].iteration_time.raw()).epsilon(1e-3));
  }
}
