// Symmetry reduction (DESIGN.md §4; megatron_graph.h): at ANALYTICAL fidelity a Megatron job's data-parallel
// replicas are simulated once and mirrored. The cross-check the design asks for: on small clusters the
// reduced and the full simulation give the same iteration time, per-GPU breakdowns, memory, throughput and
// bucket times — bit for bit, since both add the same integer-picosecond durations along the same paths —
// for many layouts; the reduction stays off wherever it is not provably exact. Nothing here measures time.
#include <doctest/doctest.h>

#include <set>

#include <string>

#include "cli/report.h"
#include "cli/scenario_loader.h"
#include "sim/trace.h"
#include "workloads/collective_engine.h"
#include "workloads/iteration_result.h"
#include "workloads/megatron_graph.h"

using namespace clustersim;
using namespace clustersim::workloads;

namespace {

const std::string kDense = "model { layers: 4 hidden: 1024 heads: 16 vocab: 32000 seq_len: 1024 }\n";
// Mixtral-like MoE cut to two layers and s = 1024.
const std::string kMoe =
    "model { layers: 2 hidden: 1024 heads: 16 kv_heads: 4 head_dim: 64 ffn_hidden: 3584 vocab: 32000 "
    "seq_len: 1024 activation: SWIGLU gated_mlp: true norm: RMSNORM position: ROPE tied_embeddings: false "
    "biases: false experts: 8 top_k: 2 }\n";

// `nodes` nodes of `per_node` GPUs (NVLink inside, one 200 Gbit/s NIC per GPU across), ANALYTICAL.
Scenario scenario(const std::string& parallel, std::uint32_t nodes, std::uint32_t per_node,
                  const std::string& model = kDense, const std::string& training = "samples: 1000") {
  Scenario sc = cli::load_scenario_text(
      "cluster { nodes: " + std::to_string(nodes) + " gpus_per_node: " + std::to_string(per_node) +
          " gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 nic_gbits_per_s_per_direction: 200 }\n"
          "profile: \"a100-sxm4-80gb\"\n" +
          model + "parallel { " + parallel + " }\ntraining { " + training + " }\n",
      "symmetry.textproto", false, "");
  sc.fidelity = Fidelity::kAnalytical;
  return sc;
}

ScenarioResult full(const Scenario& sc) { return simulate_scenario(sc, {}, nullptr, 8, Symmetry::kOff); }

void check_breakdown(const TimeBreakdown& a, const TimeBreakdown& b) {
  CHECK(a.compute.raw() == b.compute.raw());
  CHECK(a.exposed_comm.raw() == b.exposed_comm.raw());
  CHECK(a.exposed_input.raw() == b.exposed_input.raw());
  CHECK(a.idle.raw() == b.idle.raw());
}

// The reduced run equals the full one in everything a user reads off it. Expected equality is exact: at
// ANALYTICAL fidelity every start time is a maximum of sums of the same integer-picosecond durations (compute
// from the profile, collectives from the plan of the full communicator) in both runs.
// `simulated_tensor_ranks` 0: every tensor rank.
void check_mirrors_full(const Scenario& sc, std::uint32_t simulated_replicas,
                        std::uint32_t simulated_tensor_ranks = 0) {
  const ScenarioResult reduced = simulate_scenario(sc);
  const ScenarioResult whole = full(sc);
  const Job& job = sc.jobs[0];
  const std::uint32_t tp = job.parallel.tp, tk = simulated_tensor_ranks == 0 ? tp : simulated_tensor_ranks;
  const auto gpus = static_cast<std::uint32_t>(job.gpus.size());
  REQUIRE(reduced.symmetry_reduced);
  CHECK_FALSE(whole.symmetry_reduced);
  CHECK(whole.simulated_gpus == gpus);
  CHECK(reduced.simulated_gpus == gpus / (job.parallel.dp * tp) * simulated_replicas * tk);
  const IterationResult& r = reduced.jobs[0];
  const IterationResult& w = whole.jobs[0];
  CHECK(r.simulated_replicas == simulated_replicas);
  CHECK(r.simulated_tensor_ranks == tk);
  CHECK(w.simulated_tensor_ranks == tp);
  CHECK(r.simulated_ranks == reduced.simulated_gpus);
  CHECK(w.simulated_ranks == gpus);
  CHECK(r.iteration_time.raw() == w.iteration_time.raw());
  CHECK(reduced.makespan.raw() == whole.makespan.raw());
  CHECK(r.tokens_per_s == w.tokens_per_s);
  CHECK(r.samples_per_s == w.samples_per_s);
  CHECK(r.mfu == w.mfu);
  CHECK(r.model_flops_per_step.raw() == w.model_flops_per_step.raw());
  REQUIRE(r.per_gpu.size() == w.per_gpu.size());
  for (std::size_t g = 0; g < w.per_gpu.size(); ++g) {
    CAPTURE(g);
    check_breakdown(r.per_gpu[g], w.per_gpu[g]);
  }
  CHECK(r.breakdown_gpu == w.breakdown_gpu);
  check_breakdown(r.breakdown, w.breakdown);
  // The DP reductions, tensor rank by tensor rank: those of the simulated tensor ranks, the first ones (tensor
  // rank 0's, which --json reports per bucket) among them.
  REQUIRE(r.bucket_allreduce.size() * tp == w.bucket_allreduce.size() * tk);
  REQUIRE(r.buckets.size() <= r.bucket_allreduce.size());
  if (tk == tp)
    for (std::size_t b = 0; b < w.bucket_allreduce.size(); ++b)
      CHECK(r.bucket_allreduce[b].raw() == w.bucket_allreduce[b].raw());
  for (std::size_t b = 0; b < r.buckets.size(); ++b) CHECK(r.bucket_allreduce[b].raw() == w.bucket_allreduce[b].raw());
  CHECK(r.buckets.size() == w.buckets.size());
  CHECK(r.memory.peak.raw() == w.memory.peak.raw());
  CHECK(r.memory.parts.size() == w.memory.parts.size());
  CHECK(r.training.time_to_train.raw() == w.training.time_to_train.raw());
  CHECK(r.training.gpu_hours == w.training.gpu_hours);
  // Every task belongs to one replica's ranks except the DP/expert-DP collectives (one task per group either
  // way) and the loaders: the full graph has a little under dp / simulated_replicas times the tasks; of those,
  // the kernels (most of them) shrink by tp / tk more, the TP collectives (one task per group) do not.
  const double shrink = double(job.parallel.dp) / simulated_replicas;
  CHECK(double(whole.tasks) <= shrink * double(tp) / tk * double(reduced.tasks));
  CHECK(double(whole.tasks) >= 0.8 * shrink * double(reduced.tasks));
}

}  // namespace

TEST_CASE("symmetry: reduced and full simulation agree for Megatron layouts across nodes") {
  // 4 nodes of 4 GPUs: TP groups inside a node, DP and PP across nodes as the layout puts them.
  SUBCASE("tp 2 x pp 2 x dp 4, 1F1B") { check_mirrors_full(scenario("tp: 2 pp: 2 dp: 4 micro_batch: 1 grad_accum: 4", 4, 4), 1); }
  SUBCASE("tp 2 x pp 2 (vp 2) x dp 4, sequence parallel, distributed optimizer, overlapped reduction") {
    check_mirrors_full(scenario("tp: 2 pp: 2 vp: 2 dp: 4 micro_batch: 1 grad_accum: 4 sequence_parallel: true "
                                "distributed_optimizer: true overlap_grad_reduce: true",
                                4, 4),
                       1);
  }
  SUBCASE("pp 4 x dp 4, GPipe, tied embeddings, full recompute, rank order tp-pp-dp") {
    check_mirrors_full(scenario("tp: 1 pp: 4 dp: 4 micro_batch: 2 grad_accum: 4 schedule: GPIPE recompute: FULL "
                                "rank_order: \"tp-pp-dp\"",
                                4, 4),
                       1);
  }
  SUBCASE("tp 2 x cp 2 x dp 4, ring attention, distributed optimizer") {
    check_mirrors_full(
        scenario("tp: 2 cp: 2 dp: 4 micro_batch: 1 grad_accum: 2 distributed_optimizer: true flash_attention: true", 4,
                 4),
        1);
  }
  SUBCASE("tp 2 x pp 2 x dp 4, scatter/gather sends, overlapped reduction in small buckets") {
    check_mirrors_full(scenario("tp: 2 pp: 2 dp: 4 micro_batch: 1 grad_accum: 3 pp_scatter_gather: true "
                                "overlap_grad_reduce: true ddp_bucket_mib: 4",
                                4, 4),
                       1);
  }
  SUBCASE("a data loader per node that sets the pace, each node serving one replica") {
    // tp 4 fills a node: node = (replica, stage); the readers of the first and the last stage have a node each.
    check_mirrors_full(scenario("tp: 4 pp: 2 dp: 2 micro_batch: 1 grad_accum: 6", 4, 4, kDense,
                                "samples: 1000 loader_prefetch: 1 loader_samples_per_s_per_node: 50"),
                       1, 2);
  }
  SUBCASE("MoE, ep 2 within dp 4: the EP groups of the first two replicas are kept") {
    check_mirrors_full(scenario("tp: 1 pp: 2 dp: 4 ep: 2 micro_batch: 1 grad_accum: 2 moe_token_skew: 0.3", 2, 4,
                                kMoe),
                       2);
  }
}

TEST_CASE("symmetry: tensor rank 1 stands for tensor ranks 2 and up, exactly as the full simulation") {
  // tp 4: tensor ranks 0 and 1 are simulated (rank 0 reads the input), 2 and 3 copy rank 1; the breakdown of
  // every GPU, the iteration time and the first tensor rank's bucket times equal the full run's bit for bit.
  SUBCASE("tp 4 x pp 2 x dp 2: sequence parallel, TP overlap, distributed optimizer, both DP overlaps") {
    check_mirrors_full(scenario("tp: 4 pp: 2 dp: 2 micro_batch: 1 grad_accum: 4 sequence_parallel: true "
                                "tp_comm_overlap: true distributed_optimizer: true overlap_grad_reduce: true "
                                "overlap_param_gather: true",
                                4, 4),
                       1, 2);
  }
  SUBCASE("tp 4 x pp 2 (vp 2) x dp 2: interleaved, scatter/gather sends, asynchronous TP backward, tied embeddings") {
    check_mirrors_full(scenario("tp: 4 pp: 2 vp: 2 dp: 2 micro_batch: 1 grad_accum: 4 "
                                "async_tp_grad_reduce: true pp_scatter_gather: true",
                                4, 4),
                       1, 2);
  }
  SUBCASE("tp 4 x cp 2 x dp 2: ring attention inside a node of 8") {
    check_mirrors_full(scenario("tp: 4 cp: 2 dp: 2 micro_batch: 1 grad_accum: 2 distributed_optimizer: true "
                                "flash_attention: true",
                                2, 8),
                       1, 2);
  }
  SUBCASE("MoE, tp 4 x ep 2 within dp 4: two replicas (one EP group) of two tensor ranks") {
    check_mirrors_full(
        scenario("tp: 4 pp: 1 dp: 4 ep: 2 micro_batch: 1 grad_accum: 2 moe_token_skew: 0.3 sequence_parallel: true", 4,
                 4, kMoe),
        2, 2);
  }
  SUBCASE("host dispatch sets the pace (every rank its own host thread)") {
    check_mirrors_full(scenario("tp: 4 pp: 2 dp: 2 micro_batch: 1 grad_accum: 4", 4, 4, kDense,
                                "samples: 1000 host_dispatch_us_per_kernel: 200"),
                       1, 2);
  }
  SUBCASE("tp 8 x dp 2 over two nodes: 4 of 16 GPUs") {
    check_mirrors_full(scenario("tp: 8 dp: 2 micro_batch: 1 grad_accum: 2 sequence_parallel: true", 2, 8), 1, 2);
  }
  SUBCASE("the run summary says which tensor ranks ran alike") {
    const Scenario sc = scenario("tp: 4 pp: 2 dp: 2 micro_batch: 1 grad_accum: 4", 4, 4);
    // 16 GPUs / (dp 2 x tp 4) x 1 replica x 2 tensor ranks = 4 simulated.
    CHECK(cli::summary_text(sc, simulate_scenario(sc))
              .find("  symmetry   simulated 4 of 16 GPUs: the 2 data-parallel replicas are identical and tensor ranks "
                    "1-3 of each TP group run alike (ANALYTICAL fidelity)\n") != std::string::npos);
  }
}

TEST_CASE("symmetry: tensor ranks are all simulated where rank 1 cannot stand for the others") {
  SUBCASE("tp 2 or less: nothing to gain") {
    const Scenario sc = scenario("tp: 2 pp: 2 dp: 4 micro_batch: 1 grad_accum: 4", 4, 4);
    CollectiveModel model(sc.cluster, sc.profile, sc.nccl);
    CHECK(megatron_simulated_tensor_ranks(sc, sc.jobs[0], model, 1) == 2);
  }
  SUBCASE("a slower GPU at tensor rank 3") {
    // simulate_scenario takes no reduction with a slow GPU at all; the proof alone refuses it too.
    Scenario sc = scenario("tp: 4 pp: 2 dp: 2 micro_batch: 1 grad_accum: 4", 4, 4);
    CollectiveModel model(sc.cluster, sc.profile, sc.nccl);
    REQUIRE(megatron_simulated_tensor_ranks(sc, sc.jobs[0], model, 1) == 2);
    sc.cluster.slow_gpus.push_back({3, 1.5});  // rank 3 = (tp 3, dp 0, pp 0) under tp-dp-pp
    CHECK(megatron_simulated_tensor_ranks(sc, sc.jobs[0], model, 1) == 4);
    CHECK_FALSE(simulate_scenario(sc).symmetry_reduced);
  }
  SUBCASE("the mirror of a rank: tensor rank 1 of replica 0") {
    const Scenario sc = scenario("tp: 4 pp: 2 dp: 2 micro_batch: 1 grad_accum: 4", 4, 4);
    // tp-dp-pp: rank = tp + 4·(dp + 2·pp); 15 = (tp 3, dp 1, pp 1) → (tp 1, dp 0, pp 1) = 1 + 4·2 = 9;
    // 12 = (tp 0, dp 1, pp 1) → (tp 0, dp 0, pp 1) = 8; with every tensor rank (0): 15 → 3 + 8 = 11.
    CHECK(megatron_mirror_rank(sc.jobs[0], 1, 15, 2) == 9);
    CHECK(megatron_mirror_rank(sc.jobs[0], 1, 12, 2) == 8);
    CHECK(megatron_mirror_rank(sc.jobs[0], 1, 15) == 11);
  }
}

TEST_CASE("symmetry: the reduction is off where it is not provably exact") {
  const Scenario base = scenario("tp: 2 pp: 2 dp: 4 micro_batch: 1 grad_accum: 4", 4, 4);
  REQUIRE(simulate_scenario(base).symmetry_reduced);

  SUBCASE("FLOW fidelity: replicas share links") {
    Scenario sc = base;
    sc.fidelity = Fidelity::kFlow;
    const ScenarioResult r = simulate_scenario(sc);
    CHECK_FALSE(r.symmetry_reduced);
    CHECK(r.simulated_gpus == 16);
    CHECK(r.jobs[0].simulated_replicas == 4);
  }
  SUBCASE("a slow GPU: its replica differs") {
    Scenario sc = base;
    sc.cluster.slow_gpus.push_back({9, 1.5});
    const ScenarioResult r = simulate_scenario(sc);
    CHECK_FALSE(r.symmetry_reduced);
    CHECK(r.jobs[0].iteration_time.raw() > simulate_scenario(base).jobs[0].iteration_time.raw());
  }
  SUBCASE("two jobs") {
    std::string job = "  model { layers: 4 hidden: 1024 heads: 16 vocab: 32000 seq_len: 1024 }\n"
                      "  parallel { tp: 2 pp: 2 dp: 2 micro_batch: 1 grad_accum: 4 }\n  training { samples: 1000 }\n}\n";
    Scenario sc = cli::load_scenario_text(
        "cluster { nodes: 4 gpus_per_node: 4 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 "
        "nic_gbits_per_s_per_direction: 200 }\nprofile: \"a100-sxm4-80gb\"\nfidelity: ANALYTICAL\n"
        "jobs {\n  name: \"a\"\n  gpus: \"0-7\"\n" + job + "jobs {\n  name: \"b\"\n  gpus: \"8-15\"\n" + job,
        "two-jobs.textproto", false, "");
    REQUIRE(sc.jobs.size() == 2);
    const ScenarioResult r = simulate_scenario(sc);
    CHECK_FALSE(r.symmetry_reduced);
    CHECK(r.simulated_gpus == 16);
  }
  SUBCASE("a trace sink sees the simulated replicas' GPUs, and every GPU with Symmetry::kOff") {
    struct Gpus : sim::TraceSink {
      std::set<std::uint32_t> seen;
      void on_task(const sim::TaskRecord& r) override { seen.insert(r.gpu); }
    };
    Gpus reduced, all;
    const ScenarioResult r = simulate_scenario(base, {&reduced});
    CHECK(r.symmetry_reduced);
    CHECK(reduced.seen.size() == r.simulated_gpus);
    CHECK(simulate_scenario(base, {&all}, nullptr, 8, Symmetry::kOff).simulated_gpus == base.cluster.gpu_count());
    CHECK(all.seen.size() == base.cluster.gpu_count());
  }
  SUBCASE("Symmetry::kOff") { CHECK_FALSE(full(base).symmetry_reduced); }
  SUBCASE("a TP group that straddles two nodes while replica 0's does not") {
    // 2 nodes of 3 GPUs, tp 2 x dp 3: TP groups {0,1} (node 0), {2,3} (nodes 0 and 1), {4,5} (node 1).
    const Scenario sc = scenario("tp: 2 dp: 3 micro_batch: 1 grad_accum: 2", 2, 3);
    CollectiveModel model(sc.cluster, sc.profile, sc.nccl);
    CHECK(megatron_simulated_replicas(sc, sc.jobs[0], model) == 3);
    CHECK_FALSE(simulate_scenario(sc).symmetry_reduced);
  }
  SUBCASE("TP groups split 4 + 4 and 2 + 6 over nodes: alike for the activation, not for the loss statistics") {
    // 3 nodes of 6 GPUs, the job on GPUs 2-17, tp 8 x dp 2: replica 0 is GPUs 2-9 (nodes 0 and 1, 4 + 4), replica
    // 1 GPUs 10-17 (nodes 1 and 2, 2 + 6). Their TP groups take the same time for the activation but not for the
    // vocabulary-parallel loss's small all-reduces. Found by fuzzing: the replicas were mirrored, 0.002370 s
    // against the full run's 0.002372 s. Tensor ranks 1-7 still run alike within each replica.
    const Scenario sc = cli::load_scenario_text(
        "cluster { nodes: 3 gpus_per_node: 6 gpu: \"H200-SXM-141GB\" nvlink_gbytes_per_s_per_direction: 450 "
        "nic_gbits_per_s_per_direction: 400 }\nprofile: \"h200-sxm-141gb\"\nfidelity: ANALYTICAL\n"
        "jobs { gpus: \"2-17\"\n  model { layers: 1 hidden: 256 heads: 8 vocab: 3000 seq_len: 512 }\n"
        "  parallel { tp: 8 dp: 2 micro_batch: 2 grad_accum: 4 sequence_parallel: true }\n"
        "  training { samples: 1000 }\n}\n",
        "split-tp.textproto", false, "");
    CollectiveModel model(sc.cluster, sc.profile, sc.nccl);
    CHECK(megatron_simulated_replicas(sc, sc.jobs[0], model) == 2);
    check_mirrors_full(sc, 2, 2);
  }
  SUBCASE("a node's loader serving readers of two replicas") {
    // 2 nodes of 8 GPUs, tp 2 x dp 8: replicas 0-3 on node 0, their readers (tensor rank 0) share its loader,
    // which a reduced build would give one reader only.
    const Scenario sc = scenario("tp: 2 dp: 8 micro_batch: 1 grad_accum: 4", 2, 8, kDense,
                                 "samples: 1000 loader_prefetch: 1 loader_samples_per_s_per_node: 50");
    CollectiveModel model(sc.cluster, sc.profile, sc.nccl);
    CHECK(megatron_simulated_replicas(sc, sc.jobs[0], model) == 8);
    // Without a loader the same layout reduces, and agrees with the full run.
    check_mirrors_full(scenario("tp: 2 dp: 8 micro_batch: 1 grad_accum: 4", 2, 8), 1);
  }
}

TEST_CASE("symmetry: the run summary says how many GPUs were simulated") {
  const Scenario sc = scenario("tp: 2 pp: 2 dp: 4 micro_batch: 1 grad_accum: 4", 4, 4);
  // tp-dp-pp: rank = tp + 2·(dp + 4·pp); 13 = 1 + 2·(2 + 4·1) → (tp 1, dp 0, pp 1) = 1 + 2·4 = 9.
  CHECK(megatron_mirror_rank(sc.jobs[0], 1, 13) == 9);
  const ScenarioResult r = simulate_scenario(sc);
  CHECK(r.simulated_gpus == 4);
  CHECK(r.jobs[0].simulated_ranks == 4);
  CHECK(cli::summary_text(sc, r).find(
            "  symmetry   simulated 4 of 16 GPUs: the 4 data-parallel replicas are identical (ANALYTICAL fidelity)\n") !=
        std::string::npos);
  CHECK(cli::summary_text(sc, full(sc)).find("  symmetry   ") == std::string::npos);
  // --json says the same: 4 of the 16 GPUs simulated.
  CHECK(cli::result_json(sc, r).find("\"symmetry_reduced\": true, \"simulated_gpus\": 4}") != std::string::npos);
  CHECK(cli::result_json(sc, full(sc)).find("\"symmetry_reduced\": false, \"simulated_gpus\": 16}") !=
        std::string::npos);
}
