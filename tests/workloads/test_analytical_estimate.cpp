// The analytical fast path (workloads/analytical_estimate.h) against the event-driven simulation on
// contention-free runs (ANALYTICAL fidelity: every collective takes its closed-form time, as the fast path
// assumes). A sample of layouts of small models — DDP, TP with and without SP, 1F1B, interleaved, recompute,
// FlashAttention, distributed optimizer; context parallelism (ring attention), expert parallelism (MoE
// all-to-alls, routing skew), FSDP and DeepSpeed ZeRO 1–3 with and without hybrid sharding — must agree
// within 5 %; the table is printed for the record.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/scenario_loader.h"
#include "tests/test_support.h"
#include "workloads/analytical_estimate.h"
#include "workloads/iteration_result.h"
#include "workloads/nccl_model.h"
#include "workloads/transformer_ops.h"

using namespace clustersim;
using namespace clustersim::workloads;

namespace {

Scenario scenario(std::uint32_t nodes, const std::string& model, const std::string& parallel) {
  return cli::load_scenario_text(clustersim::testing::a100_scenario_text(nodes, model, parallel),
                                 "analytical.textproto", false, "");
}

struct Case {
  std::uint32_t nodes;
  const char* model;
  const char* parallel;
};

// Simulates and estimates every case, prints the table, checks |error| < 5 %.
void check_cases(const std::vector<Case>& cases) {
  std::printf("%-34s %-96s %12s %12s %8s\n", "model", "layout", "simulated s", "analytical s", "error");
  for (const Case& c : cases) {
    const Scenario sc = scenario(c.nodes, c.model, c.parallel);
    const double simulated = simulate_scenario(sc).jobs[0].iteration_time.raw();
    const double estimated = analytical_estimate(sc, sc.jobs[0]).iteration_time.raw();
    const double error = (estimated - simulated) / simulated;
    std::printf("%-34s %-96s %12.4f %12.4f %+7.2f%%\n", c.model, c.parallel, simulated, estimated, 100 * error);
    CAPTURE(c.model);
    CAPTURE(c.parallel);
    CHECK(std::abs(error) < 0.05);
  }
}

// Small models for the new dimensions: a 4-layer LLaMA-2-7B at s = 8192 (ring attention has work to hide),
// Mixtral 8x7B cut to 2 or 4 layers at s = 4096, GPT 1.7B cut to 8 layers (ZeRO's per-unit streams).
constexpr const char* kLong = "llama2-7b layers: 4 seq_len: 8192";
constexpr const char* kMoe2 = "mixtral-8x7b layers: 2 seq_len: 4096";
constexpr const char* kMoe4 = "mixtral-8x7b layers: 4 seq_len: 4096";
constexpr const char* kGpt8 = "gpt-1p7b layers: 8";

}  // namespace

TEST_CASE("analytical estimate agrees with the event-driven simulation within 5% on contention-free layouts") {
  const std::vector<Case> cases = {
      {1, "gpt-1p7b", "dp: 8 micro_batch: 2 grad_accum: 4"},  // DDP
      // DDP across nodes, buckets overlapping the backward behind the gradients' casts (and accumulation).
      {2, "gpt-1p7b", "dp: 16 micro_batch: 1"},
      {2, "gpt-1p7b", "dp: 16 micro_batch: 1 grad_accum: 2"},
      // DDP with F.scaled_dot_product_attention's flash kernel.
      {2, "gpt-1p7b", "dp: 16 micro_batch: 2 grad_accum: 2 flash_attention: true"},
      {1, "gpt-1p7b", "dp: 4 tp: 2 micro_batch: 2 grad_accum: 4"},                                // TP
      {2, "gpt-1p7b", "dp: 2 tp: 4 pp: 2 micro_batch: 1 grad_accum: 8 sequence_parallel: true"},  // TP+SP, 1F1B
      {2, "gpt-1p7b", "dp: 4 pp: 4 micro_batch: 4 grad_accum: 4"},                                // PP only
      {1, "gpt-3p6b", "dp: 2 tp: 2 pp: 2 micro_batch: 1 grad_accum: 8 recompute: SELECTIVE"},
      {4, "gpt-3p6b", "dp: 2 tp: 8 pp: 2 micro_batch: 1 grad_accum: 16 sequence_parallel: true recompute: FULL"},
      {4, "gpt-7p5b", "dp: 2 tp: 4 pp: 4 vp: 3 micro_batch: 1 grad_accum: 8"},  // interleaved
      {8, "gpt-7p5b", "dp: 2 tp: 8 pp: 4 micro_batch: 2 grad_accum: 8 distributed_optimizer: true"},
      {2, "llama2-7b", "dp: 4 tp: 2 pp: 2 micro_batch: 1 grad_accum: 4 flash_attention: true"},
      {8, "gpt-7p5b", "dp: 2 tp: 8 pp: 4 micro_batch: 1 grad_accum: 16 schedule: GPIPE recompute: FULL"},
      {6, "gpt-7p5b", "dp: 1 tp: 4 pp: 12 micro_batch: 2 grad_accum: 8"},  // deep pipeline, m < p
      // TP collectives beside the GEMMs (tp_comm_overlap): each sync costs what it outlasts its GEMM.
      {2, "gpt-7p5b", "dp: 2 tp: 8 micro_batch: 1 grad_accum: 4 sequence_parallel: true tp_comm_overlap: true"},
      {4, "gpt-7p5b",
       "dp: 2 tp: 8 pp: 2 micro_batch: 1 grad_accum: 8 sequence_parallel: true tp_comm_overlap: true "
       "recompute: FULL"},
  };
  check_cases(cases);
}

TEST_CASE("analytical estimate: parameter all-gathers beside the next forward (overlap_param_gather) agree within 5%") {
  // The distributed optimizer's all-gathers per gradient bucket at the head of the step, each gating the first
  // micro-batch's forward of its layers: without a pipeline, with one (all stages issue theirs at the start),
  // interleaved, and with the reduce-scatters after the backward or overlapping it. The DP group spans nodes
  // (NIC-bound all-gathers) in the first four, so the first forward waits for some of them.
  const std::vector<Case> cases = {
      {4, "gpt-1p7b", "dp: 32 micro_batch: 1 grad_accum: 2 distributed_optimizer: true overlap_param_gather: true"},
      {4, "gpt-1p7b",
       "dp: 32 micro_batch: 1 grad_accum: 2 distributed_optimizer: true overlap_param_gather: true "
       "overlap_grad_reduce: true"},
      {4, "gpt-3p6b",
       "dp: 4 tp: 8 micro_batch: 1 grad_accum: 4 sequence_parallel: true distributed_optimizer: true "
       "overlap_param_gather: true overlap_grad_reduce: true"},
      {8, "gpt-7p5b",
       "dp: 4 tp: 8 pp: 2 micro_batch: 1 grad_accum: 8 distributed_optimizer: true overlap_param_gather: true "
       "overlap_grad_reduce: true"},
      {4, "gpt-7p5b",
       "dp: 2 tp: 4 pp: 4 vp: 3 micro_batch: 1 grad_accum: 8 distributed_optimizer: true overlap_param_gather: true"},
      {1, "gpt-1p7b", "dp: 8 micro_batch: 2 grad_accum: 4 distributed_optimizer: true overlap_param_gather: true"},
  };
  check_cases(cases);
}

TEST_CASE("analytical estimate: interleaved pipelines whose first or last stage is the heaviest agree within 5%") {
  // A small hidden size under a large vocabulary (GPT 1.7B cut to 8–24 layers of h 1024 with V 256,000): the
  // last stage's LM head and fp32 loss outweigh its layers, so the stages are far from balanced, which the
  // closed form's bubble of (sum of stage times − the slowest) / v only approximates (−0.6…−0.9 % here).
  const std::vector<Case> cases = {
      {1, "gpt-1p7b layers: 8 hidden: 1024 heads: 16 ffn_hidden: 4096 vocab: 256000",
       "dp: 2 pp: 4 vp: 2 micro_batch: 1 grad_accum: 8"},
      {1, "gpt-1p7b layers: 16 hidden: 1024 heads: 16 ffn_hidden: 4096 vocab: 256000",
       "dp: 2 pp: 4 vp: 2 micro_batch: 2 grad_accum: 4"},
      {1, "gpt-1p7b layers: 16 hidden: 1024 heads: 16 ffn_hidden: 4096 vocab: 256000",
       "dp: 1 tp: 2 pp: 4 vp: 4 micro_batch: 1 grad_accum: 8"},
      {2, "gpt-1p7b layers: 24 hidden: 1024 heads: 16 ffn_hidden: 4096 vocab: 256000",
       "dp: 2 tp: 2 pp: 4 vp: 3 micro_batch: 1 grad_accum: 12"},
  };
  check_cases(cases);
}

TEST_CASE("analytical estimate: DDP with host dispatch on a GPU-bound step agrees within 1%") {
  // A 1-layer model (h 512, V 8,000, s 256) on 2 GPUs in fp32 with 25 µs of host per kernel: the GPU is the
  // bottleneck (host dispatch 2.6 % of the step), so the host has issued the backward long before the GPU ends it,
  // and the optimizer's and the bucket copies' dispatches are done by then. The estimate had started them at the
  // backward's end on the GPU, 22 kernels × 25 µs late: +6.1 %.
  const Scenario sc = cli::load_scenario_text(
      "cluster { nodes: 1 gpus_per_node: 2 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 "
      "nic_gbits_per_s_per_direction: 200 }\nprofile: \"a100-sxm4-80gb\"\nfidelity: ANALYTICAL\n"
      "model { name: \"tiny\" layers: 1 hidden: 512 heads: 8 ffn_hidden: 2048 vocab: 8000 seq_len: 256 }\n"
      "parallel { dp: 2 micro_batch: 2 framework: PYTORCH_DDP }\n"
      "training { samples: 100000 precision: FP32 host_dispatch_us_per_kernel: 25 }\n",
      "host.textproto", false, "");
  const double simulated = simulate_scenario(sc).jobs[0].iteration_time.raw();
  const double estimated = analytical_estimate(sc, sc.jobs[0]).iteration_time.raw();
  CHECK(estimated == doctest::Approx(simulated).epsilon(0.01));
}

TEST_CASE("analytical estimate: interleaved pipelines with long sends across nodes agree within 1%") {
  // GPT 1.7B (h 2304) with 32 layers at micro-batch 32, tp 4 pp 4 on 2 nodes, no sequence parallelism: a send is
  // 32 · 2048 · 2304 · 2 B = 302 MB, about 0.4 ms over NVLink between stages 0–1 and 2–3 but about 12 ms over a
  // 200 Gb/s NIC between stages 1–2 and, interleaved, 3–0. The estimate takes each boundary's own send (it had
  // taken stage 0 → 1's for all of them and come out up to 14.5 % too fast at vp 8); each virtual-stage boundary
  // is crossed once forward and once backward on the critical path.
  for (const char* vp : {"", " vp: 2", " vp: 4", " vp: 8"}) {
    const Scenario sc = scenario(2, "gpt-1p7b layers: 32",
                                 std::string("dp: 1 tp: 4 pp: 4 micro_batch: 32 grad_accum: 4 "
                                             "recompute: SELECTIVE") +
                                     vp);
    const double simulated = simulate_scenario(sc).jobs[0].iteration_time.raw();
    const double estimated = analytical_estimate(sc, sc.jobs[0]).iteration_time.raw();
    CAPTURE(vp);
    CHECK(estimated == doctest::Approx(simulated).epsilon(0.01));
  }
}

TEST_CASE("analytical estimate: context and expert parallelism agree with the Megatron graph within 5%") {
  const std::vector<Case> cases = {
      // ring, DP over dp·cp
      {1, kLong, "dp: 4 cp: 2 micro_batch: 1 grad_accum: 4 flash_attention: true"},
      // cp 4
      {1, kLong, "dp: 1 tp: 2 cp: 4 micro_batch: 1 grad_accum: 2 sequence_parallel: true flash_attention: true"},
      // recomputed ring
      {1, kLong, "dp: 1 tp: 2 cp: 2 pp: 2 micro_batch: 1 grad_accum: 4 recompute: FULL flash_attention: true"},
      // ring across nodes
      {2, kLong, "dp: 2 tp: 2 cp: 4 micro_batch: 1 grad_accum: 2 distributed_optimizer: true flash_attention: true"},
      {1, kLong, "dp: 2 cp: 4 micro_batch: 1 grad_accum: 2 flash_attention: true recompute: SELECTIVE"},
      // every ring hop between nodes
      {2, kLong, "dp: 1 tp: 8 cp: 2 micro_batch: 1 grad_accum: 2 flash_attention: true"},
      {1, kMoe2, "dp: 8 ep: 8 micro_batch: 1 grad_accum: 2"},                                     // one expert a rank
      {1, kMoe2, "dp: 4 tp: 2 ep: 2 micro_batch: 1 grad_accum: 4 sequence_parallel: true moe_token_skew: 0.5"},
      {1, kMoe4,
       "dp: 2 cp: 2 pp: 2 ep: 2 micro_batch: 1 grad_accum: 4 distributed_optimizer: true flash_attention: true"},
      {1, kMoe2, "dp: 8 ep: 4 micro_batch: 1 grad_accum: 2 recompute: FULL moe_capacity_factor: 1.25 "
                 "moe_token_skew: 0.5"},
      {2, kMoe2, "dp: 16 ep: 8 micro_batch: 1 grad_accum: 1 overlap_grad_reduce: true"},          // split buckets
      {1, kMoe2, "dp: 8 micro_batch: 1 grad_accum: 2 framework: MEGATRON"},                       // MoE without EP
  };
  check_cases(cases);
}

TEST_CASE("analytical estimate: rings mixing NVLink and NIC hops agree within 5%") {
  // Where NVLink and NIC hops alternate the ring's members desynchronise: the one behind a NIC edge waits
  // longest for its K/V, the others run ahead and their next layer's transfers start early. The fast path
  // follows every member's clock through the chunk's layers (run_ops), as the graph does.
  const std::vector<Case> cases = {
      // hops NVLink, NIC, NVLink, NIC
      {2, kLong, "dp: 1 tp: 4 cp: 4 micro_batch: 1 grad_accum: 2 flash_attention: true"},
      {2, kLong, "dp: 1 cp: 16 micro_batch: 1 grad_accum: 2 flash_attention: true"},       // 14 NVLink hops, 2 NIC hops
      {2, kLong, "dp: 1 tp: 2 cp: 8 micro_batch: 1 grad_accum: 4 recompute: FULL flash_attention: true"},
      {4, kLong, "dp: 1 tp: 4 cp: 4 pp: 2 micro_batch: 1 grad_accum: 4 sequence_parallel: true flash_attention: true"},
      {4, "llama2-7b layers: 8 seq_len: 8192", "dp: 1 tp: 2 cp: 16 micro_batch: 1 grad_accum: 3 flash_attention: true"},
      {4, kLong, "dp: 2 tp: 2 cp: 8 micro_batch: 1 grad_accum: 2 distributed_optimizer: true flash_attention: true"},
  };
  check_cases(cases);
}

TEST_CASE("analytical estimate: FSDP and DeepSpeed ZeRO agree with the ZeRO graph within 5%") {
  const std::vector<Case> cases = {
      {1, kGpt8, "dp: 8 micro_batch: 2 grad_accum: 4 framework: FSDP zero_stage: 3"},
      {1, kGpt8, "dp: 8 micro_batch: 1 grad_accum: 1 framework: FSDP zero_stage: 2"},
      {1, kGpt8, "dp: 8 micro_batch: 4 grad_accum: 2 framework: DEEPSPEED zero_stage: 1"},
      {1, kGpt8, "dp: 8 micro_batch: 2 grad_accum: 2 framework: DEEPSPEED zero_stage: 2"},
      {1, kGpt8, "dp: 8 micro_batch: 1 grad_accum: 8 framework: DEEPSPEED zero_stage: 3"},
      {2, kGpt8, "dp: 16 micro_batch: 1 grad_accum: 4 framework: FSDP zero_stage: 3"},            // shards cross nodes
      {2, kGpt8, "dp: 16 micro_batch: 2 grad_accum: 2 framework: FSDP zero_stage: 3 hybrid_shard: true"},
      {2, kGpt8, "dp: 16 micro_batch: 1 grad_accum: 2 framework: FSDP zero_stage: 2 hybrid_shard: true"},
      {2, "gpt-1p7b", "dp: 16 micro_batch: 1 grad_accum: 16 framework: FSDP zero_stage: 3"},  // m = 16: extrapolated
      {1, kGpt8,
       "dp: 8 micro_batch: 2 grad_accum: 2 framework: FSDP zero_stage: 3 recompute: FULL flash_attention: true"},
      {1, kGpt8, "dp: 8 micro_batch: 2 grad_accum: 2 framework: DEEPSPEED zero_stage: 2 recompute: FULL"},
  };
  check_cases(cases);
}

TEST_CASE("analytical estimate: memory is the simulation's report, throughput follows from the time") {
  // The same memory model and stage selection as simulate_scenario (dense model: stage 0 or the last);
  // tokens/s = global batch · s / T = (1 · 8 · 2) · 2048 / T.
  const Scenario sc = scenario(2, "gpt-1p7b", "dp: 2 tp: 4 pp: 2 micro_batch: 1 grad_accum: 8 sequence_parallel: true");
  const IterationResult sim = simulate_scenario(sc).jobs[0];
  const AnalyticalEstimate est = analytical_estimate(sc, sc.jobs[0]);
  CHECK(est.peak_memory.raw() == doctest::Approx(sim.memory.peak.raw()).epsilon(1e-12));
  CHECK(est.oom == sim.memory.oom);
  CHECK(est.tokens_per_s == doctest::Approx(16.0 * 2048 / est.iteration_time.raw()).epsilon(1e-12));
  // The parts add up to the iteration time (bubble is the remainder, never negative; the input stall is micro-batch
  // 0's copy to the GPU).
  CHECK(est.bubble.raw() >= 0);
  CHECK((est.compute + est.tp_comm + est.pp_comm + est.dp_comm + est.bubble + est.input_stall).raw() ==
        doctest::Approx(est.iteration_time.raw()).epsilon(1e-9));
}

TEST_CASE("analytical estimate: memory and the parts of the step with context, expert and ZeRO parallelism") {
  // Memory is the simulation's own report: the Megatron memory model with cp and ep (every stage of a MoE
  // model), estimate_zero_memory for FSDP and DeepSpeed.
  for (const Case& c : {Case{1, kMoe4, "dp: 2 cp: 2 pp: 2 ep: 2 micro_batch: 1 grad_accum: 4 flash_attention: true"},
                        Case{1, kLong, "dp: 2 tp: 2 cp: 2 micro_batch: 1 grad_accum: 2 flash_attention: true"},
                        Case{1, kGpt8, "dp: 8 micro_batch: 2 grad_accum: 2 framework: FSDP zero_stage: 3"},
                        Case{1, kGpt8, "dp: 8 micro_batch: 2 grad_accum: 2 framework: DEEPSPEED zero_stage: 1"}}) {
    CAPTURE(c.parallel);
    const Scenario sc = scenario(c.nodes, c.model, c.parallel);
    const IterationResult sim = simulate_scenario(sc).jobs[0];
    const AnalyticalEstimate est = analytical_estimate(sc, sc.jobs[0]);
    CHECK(est.peak_memory.raw() == doctest::Approx(sim.memory.peak.raw()).epsilon(1e-12));
    CHECK(est.oom == sim.memory.oom);
    CHECK(est.bubble.raw() >= 0);
    CHECK((est.compute + est.tp_comm + est.cp_comm + est.ep_comm + est.pp_comm + est.dp_comm + est.bubble +
           est.input_stall)
              .raw() == doctest::Approx(est.iteration_time.raw()).epsilon(1e-9));
  }
  // The all-to-alls: tp 1, dp 4, pp 2, ep 2 on a 4-layer Mixtral (every layer MoE): 2 MoE layers per stage,
  // 4 all-to-alls each per micro-batch (dispatch and combine, forward and backward), m = 4: 32 calls of
  // A = AlltoAll(b·s·top_k·h·e = 1·4096·2·4096·2 B = 64 MiB) on the EP group of ranks {0, 1} (= GPUs 0, 1).
  const Scenario moe = scenario(1, kMoe4, "dp: 4 ep: 2 pp: 2 micro_batch: 1 grad_accum: 4");
  OpConfig oc;
  oc.ep = 2;
  const Bytes message = moe_alltoall_bytes(moe.jobs[0].model, oc);
  CHECK(message.raw() == doctest::Approx(67108864.0).epsilon(1e-12));
  const double a2a =
      CollectiveModel(moe.cluster, moe.profile).plan(CollectiveRequest{CollectiveOp::kAllToAll, {0, 1}, message, 0}).time.raw();
  const AnalyticalEstimate e = analytical_estimate(moe, moe.jobs[0]);
  CHECK(e.ep_comm.raw() == doctest::Approx(32 * a2a).epsilon(1e-9));
  CHECK(e.cp_comm.raw() == 0);
}
