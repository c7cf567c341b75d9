// FLOW fidelity (collectives as flows on the topology) against the closed form, and contention.
#include <doctest/doctest.h>

#include <algorithm>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>

#include "cli/scenario_loader.h"
#include "sim/executor.h"
#include "workloads/collective_engine.h"
#include "workloads/iteration_result.h"
#include "workloads/nccl_model.h"
#include "workloads/network_model.h"

using namespace clustersim;
using namespace clustersim::workloads;

namespace {

Scenario cluster_only(const std::string& cluster_text, const std::string& profile) {
  // A scenario just to carry a cluster and a profile; its one job is not simulated here.
  Scenario probe = cli::load_scenario_text(
      "cluster { " + cluster_text + " }\nprofile: \"" + profile +
          "\"\njobs { gpus: \"0\" model { layers: 1 hidden: 64 heads: 1 vocab: 64 seq_len: 8 }\n"
          "parallel { dp: 1 micro_batch: 1 } training { samples: 1 } }\n",
      "probe.textproto", false, "");
  return probe;
}

// Duration of one collective of `size` over `gpus` (all GPUs of the cluster when empty) at the given fidelity.
double collective_seconds(Scenario sc, Fidelity fidelity, Bytes size, CollectiveOp op,
                          std::vector<std::uint32_t> gpus = {}) {
  sc.fidelity = fidelity;
  sim::Simulation s;
  std::unique_ptr<NetworkModel> net;
  if (fidelity == Fidelity::kFlow) net = std::make_unique<NetworkModel>(s, sc);
  CollectiveEngine engine(s, sc, net.get());
  sim::TaskGraph g;
  std::vector<sim::StreamId> lanes;
  if (gpus.empty()) {
    gpus.resize(sc.cluster.gpu_count());
    std::iota(gpus.begin(), gpus.end(), 0u);
  }
  for (std::uint32_t gpu : gpus) lanes.push_back(g.add_stream(gpu, "comm"));
  engine.add(g, "c", "comm", CollectiveRequest{op, gpus, size, 0}, lanes, {});
  sim::Executor ex(s, g, &engine);
  ex.start();
  s.run();
  ex.finish();
  return sim::to_seconds(ex.makespan()).raw();
}

double allreduce_seconds(const Scenario& sc, Fidelity fidelity, Bytes size) {
  return collective_seconds(sc, fidelity, size, CollectiveOp::kAllReduce);
}

// What a collective run alone (run_collective, as `clustersim collective` runs it) takes more at 4 GiB than at 1 GiB:
// its bandwidth term for 3 GiB, the latencies cancelling.
double alone_from_1_to_4_gib(Scenario sc, Fidelity fidelity, CollectiveOp op, const std::vector<std::uint32_t>& gpus) {
  sc.fidelity = fidelity;
  return run_collective(sc, CollectiveRequest{op, gpus, GiB(4), 0}).time.raw() -
         run_collective(sc, CollectiveRequest{op, gpus, GiB(1), 0}).time.raw();
}

// An explicit cluster's vertices, each "NAME KIND[ node: N]", and links, each "FROM TO KIND GBPS[ latency_us: L]".
std::string explicit_graph(std::initializer_list<const char*> vertices, std::initializer_list<const char*> links) {
  std::string text;
  for (const char* v : vertices) {
    std::istringstream in(v);
    std::string name, rest;
    in >> name;
    std::getline(in >> std::ws, rest);
    text += "vertices { name: \"" + name + "\" kind: " + rest + " } ";
  }
  for (const char* l : links) {
    std::istringstream in(l);
    std::string from, to, kind, rate, rest;
    in >> from >> to >> kind >> rate;
    std::getline(in, rest);
    text += "links { from: \"" + from + "\" to: \"" + to + "\" kind: " + kind + " gbytes_per_s_per_direction: " + rate +
            rest + " } ";
  }
  return text;
}

}  // namespace

TEST_CASE("contention-free ring AllReduce: FLOW agrees with ANALYTICAL within 1% from 1 MiB") {
  // Both compute latency + 2(n−1)/n · S / B; FLOW gets B from max-min shares on the routed links
  // (k rings, one per rail), ANALYTICAL from min(NVLink · η, k · NIC · η). With no other traffic the
  // two must agree; the PCIe links of the presets (Gen4 31.5, Gen5 63 GB/s) are faster than the NICs.
  const char* clusters[][2] = {
      {"nodes: 1 gpus_per_node: 8 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 "
       "nic_gbits_per_s_per_direction: 200",
       "a100-sxm4-80gb"},
      {"nodes: 2 gpus_per_node: 8 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 "
       "nic_gbits_per_s_per_direction: 200",
       "a100-sxm4-80gb"},
      {"nodes: 4 gpus_per_node: 1 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 "
       "nic_gbits_per_s_per_direction: 200",
       "a100-sxm4-80gb"},
      {"node_preset: \"dgx-a100\" nodes: 2", "a100-sxm4-80gb"},
      {"node_preset: \"dgx-h100\" nodes: 4", "h100-sxm5-80gb"},
  };
  for (const auto& [cluster, profile] : clusters) {
    const Scenario sc = cluster_only(cluster, profile);
    for (double mib : {1.0, 16.0, 256.0, 1024.0}) {
      CAPTURE(std::string(cluster));
      CAPTURE(mib);
      const double flow = allreduce_seconds(sc, Fidelity::kFlow, MiB(mib));
      const double analytical = allreduce_seconds(sc, Fidelity::kAnalytical, MiB(mib));
      CHECK(flow == doctest::Approx(analytical).epsilon(0.01));
    }
  }
}

TEST_CASE("contention-free, every algorithm and protocol: FLOW agrees with ANALYTICAL within 5% from 1 MiB") {
  // The tree's chains: an interior GPU of a chain sends S up and S down, the two ends S. On one node the
  // tree is one chain (2 GPUs: each sends S, the ring's time; 8: interior GPUs send 2S); across nodes it
  // runs one chain per rail, each starting at its rail's GPU, so with 8 rails a GPU is an end of 2 of the
  // 8 chains and sends (6·2 + 2)/8 S = 1.75 S (tree_chain_sends). FLOW lays out these flows; ANALYTICAL
  // must charge the same busiest GPU. AlltoAll across unevenly filled nodes: the GPUs of the emptier node
  // send the most through their NICs, (n − m_min)/n of S (7 + 1 GPUs: 7/8 S, against 1/2 S for 4 + 4).
  struct Case {
    const char* cluster;
    const char* profile;
    std::vector<std::uint32_t> gpus;  // empty: all
  };
  const Case cases[] = {
      {"node_preset: \"hgx-h100\" nodes: 1", "h100-sxm5-80gb", {0, 1}},
      {"node_preset: \"hgx-h100\" nodes: 1", "h100-sxm5-80gb", {0, 1, 2}},
      {"node_preset: \"hgx-h100\" nodes: 1", "h100-sxm5-80gb", {}},
      {"node_preset: \"hgx-h100\" nodes: 2", "h100-sxm5-80gb", {}},
      {"node_preset: \"hgx-h100\" nodes: 3", "h100-sxm5-80gb", {}},
      {"node_preset: \"hgx-h100\" nodes: 2", "h100-sxm5-80gb", {0, 1, 2, 3, 8, 9, 10, 11}},
      {"node_preset: \"dgx-a100\" nodes: 2", "a100-sxm4-80gb", {}},
      {"nodes: 8 gpus_per_node: 1 gpu: \"H100-SXM5-80GB\" nvlink_gbytes_per_s_per_direction: 450 "
       "nic_gbits_per_s_per_direction: 400",
       "h100-sxm5-80gb", {}},
  };
  const std::pair<Algorithm, std::vector<CollectiveOp>> algorithms[] = {
      {Algorithm::kRing, {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}},
      {Algorithm::kTree, {CollectiveOp::kAllReduce}},
  };
  for (const Case& c : cases) {
    Scenario sc = cluster_only(c.cluster, c.profile);
    for (const auto& [algorithm, ops] : algorithms) {
      for (Protocol protocol : {Protocol::kLL, Protocol::kLL128, Protocol::kSimple}) {
        sc.nccl.algorithm = algorithm;
        sc.nccl.protocol = protocol;
        for (CollectiveOp op : ops) {
          for (double mib : {1.0, 3.0, 64.0, 1024.0}) {
            CAPTURE(std::string(c.cluster));
            CAPTURE(c.gpus.size());
            CAPTURE(to_string(algorithm));
            CAPTURE(to_string(protocol));
            CAPTURE(to_string(op));
            CAPTURE(mib);
            const double flow = collective_seconds(sc, Fidelity::kFlow, MiB(mib), op, c.gpus);
            const double analytical = collective_seconds(sc, Fidelity::kAnalytical, MiB(mib), op, c.gpus);
            CHECK(flow == doctest::Approx(analytical).epsilon(0.05));
          }
        }
      }
    }
  }
  // AlltoAll (NCCL's grouped sends, no algorithm choice), even and uneven layouts of 2 HGX H100 nodes.
  const Scenario two = cluster_only("node_preset: \"hgx-h100\" nodes: 2", "h100-sxm5-80gb");
  const std::vector<std::uint32_t> layouts[] = {{0, 1, 2, 3, 8, 9, 10, 11}, {0, 1, 2, 3, 4, 5, 6, 8}, {0, 8, 9, 10}};
  for (const auto& gpus : layouts) {
    CAPTURE(gpus.size());
    const double flow = collective_seconds(two, Fidelity::kFlow, MiB(256), CollectiveOp::kAllToAll, gpus);
    const double analytical = collective_seconds(two, Fidelity::kAnalytical, MiB(256), CollectiveOp::kAllToAll, gpus);
    CHECK(flow == doctest::Approx(analytical).epsilon(0.05));
  }
  // 7 + 1 against 4 + 4: the bandwidth part grows by (7/8) / (4/8) = 1.75.
  const double even = collective_seconds(two, Fidelity::kAnalytical, GiB(1), CollectiveOp::kAllToAll, layouts[0]);
  const double uneven = collective_seconds(two, Fidelity::kAnalytical, GiB(1), CollectiveOp::kAllToAll, layouts[1]);
  CHECK(uneven / even == doctest::Approx(1.75).epsilon(0.01));
}

TEST_CASE("two jobs sharing a leaf uplink slow each other by the max-min share") {
  // 4 nodes × 1 GPU, two-level Clos with 3-port leaves at 2:1: a leaf has u = floor(3·b/(b + 2·b)) = 1
  // uplink and d = 2 downlinks, so nodes {0,1} and {2,3} sit on two leaves joined through one spine.
  // Job A on GPUs {0,2} and job B on {1,3}: each 2-rank ring crosses the leaves both ways.
  // Alone, a ring moves 2(n−1)/n · S = S per edge at the NIC's 25 GB/s · 0.8 = 20 GB/s; together the
  // two rings share each leaf–spine link (20 GB/s) max-min: 10 GB/s each, so the bandwidth part of
  // every AllReduce doubles while the latency stays: NCCL picks ring/Simple, whose latency is
  // (8.4 + 2·14) · 1.4 = 50.96 µs (two network steps; ×1.4 is tuning.cc's multi-node "plateau effect").
  const std::string cluster =
      "cluster { nodes: 4 gpus_per_node: 1 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300\n"
      "  nic_gbits_per_s_per_direction: 200 fabric { kind: CLOS_TWO_LEVEL oversubscription: 2 switch_radix: 3 } }\n"
      "profile: \"a100-sxm4-80gb\"\n";
  auto job = [](const char* name, const char* gpus) {
    return std::string("jobs { name: \"") + name + "\" gpus: \"" + gpus +
           "\" model { layers: 2 hidden: 1024 heads: 16 vocab: 51200 seq_len: 1024 }\n"
           "  parallel { dp: 2 micro_batch: 1 ddp_bucket_mib: 10000 } training { samples: 1000 } }\n";
  };
  const Scenario alone = cli::load_scenario_text(cluster + job("a", "0,2"), "alone.textproto", false, "");
  const Scenario both =
      cli::load_scenario_text(cluster + job("a", "0,2") + job("b", "1,3"), "both.textproto", false, "");
  const ScenarioResult r1 = simulate_scenario(alone);
  const ScenarioResult r2 = simulate_scenario(both);
  REQUIRE(r1.jobs[0].bucket_allreduce.size() == 2);
  const double latency = 50.96e-6;
  for (std::size_t b = 0; b < 2; ++b) {
    const double bytes = r1.jobs[0].buckets[b].size.raw();
    CHECK(r1.jobs[0].bucket_allreduce[b].raw() == doctest::Approx(latency + bytes / 20e9).epsilon(1e-6));
    CHECK(r2.jobs[0].bucket_allreduce[b].raw() == doctest::Approx(latency + bytes / 10e9).epsilon(1e-6));
    CHECK(r2.jobs[1].bucket_allreduce[b].raw() == doctest::Approx(latency + bytes / 10e9).epsilon(1e-6));
  }
  // At ANALYTICAL fidelity the two jobs do not see each other.
  Scenario both_analytical = both;
  both_analytical.fidelity = Fidelity::kAnalytical;
  const ScenarioResult r3 = simulate_scenario(both_analytical);
  CHECK(r3.jobs[0].bucket_allreduce[1].raw() == doctest::Approx(r1.jobs[0].bucket_allreduce[1].raw()).epsilon(1e-9));
}

TEST_CASE("a slow GPU holds up the whole data-parallel job") {
  // DDP's AllReduces start when every member has produced the bucket, so one GPU at 1.5x compute time
  // stretches everyone's step by about its extra compute, 0.5·C; the others wait.
  const std::string base =
      "cluster { nodes: 1 gpus_per_node: 4 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300\n"
      "  nic_gbits_per_s_per_direction: 200 %s }\nprofile: \"a100-sxm4-80gb\"\n"
      "model { layers: 4 hidden: 1024 heads: 16 vocab: 32000 seq_len: 1024 }\n"
      "parallel { dp: 4 micro_batch: 2 }\ntraining { samples: 1000 }\n";
  auto with = [&](const std::string& extra) {
    std::string text = base;
    text.replace(text.find("%s"), 2, extra);
    return simulate_scenario(cli::load_scenario_text(text, "slow.textproto", false, ""));
  };
  const ScenarioResult fast = with("");
  const ScenarioResult slow = with("slow_gpus { gpu: 2 compute_slowdown: 1.5 }");
  const auto& f = fast.jobs[0];
  const auto& s = slow.jobs[0];
  // GPU 2 computes 1.5x as long.
  CHECK(s.per_gpu[2].compute.raw() == doctest::Approx(1.5 * f.per_gpu[2].compute.raw()).epsilon(1e-6));
  // The step is at least that long, and the healthy GPUs now spend about 0.5x their compute waiting:
  // idle, or in AllReduces that wait for GPU 2 while their own compute is done (exposed).
  CHECK(s.iteration_time.raw() >= s.per_gpu[2].compute.raw());
  CHECK(s.per_gpu[0].idle.raw() + s.per_gpu[0].exposed_comm.raw() -
            (f.per_gpu[0].idle.raw() + f.per_gpu[0].exposed_comm.raw()) >
        0.45 * f.per_gpu[0].compute.raw());
  CHECK(s.per_gpu[0].compute.raw() == doctest::Approx(f.per_gpu[0].compute.raw()).epsilon(1e-9));
}

TEST_CASE("point-to-point transfers pay the cluster's hop latencies, alike at both fidelities") {
  // 2 DGX H100. A pipeline-style send from GPU 0 to GPU 8 (the next node) crosses the network once: with
  // network_hop_latency_us 100 it takes 100 µs longer than with 0, at FLOW (the routed links' latencies) and
  // at ANALYTICAL (one network hop). Inside a node (GPU 0 to 1) nvlink_hop_latency_us 5 adds 5 µs. An AlltoAll
  // over both nodes waits for its farthest pair: + 100 µs. (Measured before: + 0 µs everywhere.)
  const Scenario plain = cluster_only("node_preset: \"dgx-h100\" nodes: 2", "h100-sxm5-80gb");
  const Scenario slow = cluster_only(
      "node_preset: \"dgx-h100\" nodes: 2 network_hop_latency_us: 100 nvlink_hop_latency_us: 5", "h100-sxm5-80gb");
  for (Fidelity f : {Fidelity::kFlow, Fidelity::kAnalytical}) {
    CAPTURE(static_cast<int>(f));
    auto extra = [&](CollectiveOp op, std::vector<std::uint32_t> gpus) {
      return (collective_seconds(slow, f, MiB(1), op, gpus) - collective_seconds(plain, f, MiB(1), op, gpus)) * 1e6;
    };
    CHECK(extra(CollectiveOp::kSendRecv, {0, 8}) == doctest::Approx(100).epsilon(1e-6));
    CHECK(extra(CollectiveOp::kSendRecv, {0, 1}) == doctest::Approx(5).epsilon(1e-6));
    CHECK(extra(CollectiveOp::kAllToAll, {}) == doctest::Approx(100).epsilon(1e-6));
  }
}

TEST_CASE("a NIC shared by several GPUs: a lone communicator gets its whole port at both fidelities") {
  // The PCIe preset: 2 NICs of 100 Gbit/s for 8 GPUs (GPUs 0-3 on NIC 0), so each GPU's share is 25 Gbit/s when
  // all send at once. Send/Recv from GPU 0 to GPU 8 (the next node) alone: NIC 0 carries nothing else, so the
  // pair runs at the port's 100 Gbit/s = 12.5 GB/s x 0.8 (the a100 profile's network efficiency) = 10 GB/s, at
  // FLOW (it sees the idle NIC-mates) and at ANALYTICAL for a request that runs alone (run_collective, what
  // `clustersim collective` times). t(1 GiB) - t(256 MiB) = 768 MiB / 10 GB/s = 80,531 us. In training (not
  // alone) ANALYTICAL keeps the per-GPU share: 4 x that. With GPUs 0 and 1 on NIC 0 (ranks 0,1,8): half the
  // port each.
  Scenario sc =
      cluster_only("node_preset: \"pcie-8gpu-sys-4029gp-trt\" nodes: 2 gpu: \"A100-SXM4-80GB\"", "a100-sxm4-80gb");
  sc.nccl.protocol = Protocol::kSimple;
  const double mib768 = 768.0 * 1048576.0;
  for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
    CAPTURE(static_cast<int>(f));
    sc.fidelity = f;
    const auto lone = [&](Bytes size) {
      return run_collective(sc, CollectiveRequest{CollectiveOp::kSendRecv, {0, 8}, size, 0}).time.raw();
    };
    CHECK(lone(GiB(1)) - lone(MiB(256)) == doctest::Approx(mib768 / 10e9).epsilon(1e-3));
  }
  // Not alone (as the executor plans it in training): the per-GPU quarter of the port.
  const double busy = collective_seconds(sc, Fidelity::kAnalytical, GiB(1), CollectiveOp::kSendRecv, {0, 8}) -
                      collective_seconds(sc, Fidelity::kAnalytical, MiB(256), CollectiveOp::kSendRecv, {0, 8});
  CHECK(busy == doctest::Approx(4 * mib768 / 10e9).epsilon(1e-3));
  // AllGather on ranks 0, 1, 8 alone: GPUs 0 and 1 share NIC 0, half the port each, at both fidelities.
  const std::vector<std::uint32_t> three = {0, 1, 8};
  double times[2];
  for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
    sc.fidelity = f;
    times[f == Fidelity::kFlow] =
        run_collective(sc, CollectiveRequest{CollectiveOp::kAllGather, three, GiB(1), 0}).time.raw();
  }
  CHECK(times[1] == doctest::Approx(times[0]).epsilon(0.05));
  // HGX H100 with 4 NICs of 400 Gbit/s (the preset's port, 2 GPUs each), ranks 0-7,8: NCCL's ring runs one channel
  // (the least populated node has 1 rank), and GPU 8 alone on node 1 takes its whole port: AllGather moves
  // (n - 1)/n = 8/9 of S through it, 3 GiB x 8/9 / (50 GB/s x 0.85) = 67,372 us more from 1 to 4 GiB, at both
  // fidelities (the
  // audit found ANALYTICAL at twice that: it gave each rank the per-GPU half of the port). AlltoAll: GPU 8 sends
  // 8/9 of S through the same port.
  Scenario hgx = cluster_only("node_preset: \"hgx-h100\" nodes: 2 nics_per_node: 4", "h100-sxm5-80gb");
  hgx.nccl.protocol = Protocol::kSimple;
  const std::vector<std::uint32_t> uneven = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kAllToAll})
    for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
      CAPTURE(to_string(op));
      CAPTURE(static_cast<int>(f));
      hgx.fidelity = f;
      auto t = [&](Bytes size) { return run_collective(hgx, CollectiveRequest{op, uneven, size, 0}).time.raw(); };
      CHECK(t(GiB(4)) - t(GiB(1)) == doctest::Approx(3.0 * 1073741824 * 8 / 9 / 42.5e9).epsilon(1e-3));
    }
}

TEST_CASE(
    "PCIe-only nodes: the switches' shared uplinks bound rings, AlltoAll and Send/Recv alike at both fidelities") {
  // 4 PCIe nodes of 8 GPUs, 2 NICs each (a100 profile: network_bus_efficiency 0.8 on PCIe links too). GPU i sits
  // on switch i/2, switches 0-1 below CPU 0 and 2-3 below CPU 1, NIC 0 on switch 0 (GPUs 0-3's), NIC 1 on switch 2;
  // every PCIe link 15.75 GB/s x 0.8 = 12.6 GB/s.
  //   Ring AllReduce of the 32 GPUs: 8 channels, each crossing every edge i -> i+1 (mod 8) of a node once (7 ring
  //   edges and the PXN hop c-1 -> c) and leaving through GPU c's NIC into the next node's GPU c. Switch 0's link up
  //   to CPU 0 carries edge 1 -> 2 for all 8 channels plus the 2 channels that enter the node for GPUs 2 and 3
  //   from NIC 0: 10 channel-edges of S x 62/32 / 8 (a GPU's own link 9). Bandwidth term from 256 MiB to 1 GiB:
  //   768 MiB x 62/32 / 8 x 10 / 12.6e9 = 805,306,368 x 1.9375 / 8 x 10 / 12.6e9 = 0.154790 s. Before, the closed
  //   form counted 8 (a GPU link's channels), 0.123832 s, while FLOW took 0.154790 s.
  //   AlltoAll on node 0: each of a switch's 2 GPUs sends S/8 to the 6 GPUs beyond it, 12 pair-shares up the
  //   uplink where a GPU's link carries 7: 805,306,368 x 12/8 / 12.6e9 = 0.095870 s (the closed form had 7/8:
  //   0.055924 s, 1.71x less).
  //   Send/Recv 0 -> 8, alone: the route leaves through NIC 0 (100 Gb/s x 0.8 = 10 GB/s), which binds before the
  //   PCIe links (12.6 GB/s): 805,306,368 / 10e9 = 0.080531 s.
  Scenario sc =
      cluster_only("node_preset: \"pcie-8gpu-sys-4029gp-trt\" nodes: 4 gpu: \"A100-SXM4-80GB\"", "a100-sxm4-80gb");
  sc.nccl.protocol = Protocol::kSimple;
  const std::vector<std::uint32_t> node0 = {0, 1, 2, 3, 4, 5, 6, 7};
  for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
    CAPTURE(static_cast<int>(f));
    sc.fidelity = f;
    auto t = [&](CollectiveOp op, std::vector<std::uint32_t> gpus, Bytes size) {
      return run_collective(sc, CollectiveRequest{op, std::move(gpus), size, 0}).time.raw();
    };
    std::vector<std::uint32_t> all(32);
    std::iota(all.begin(), all.end(), 0u);
    CHECK(t(CollectiveOp::kAllReduce, all, GiB(1)) - t(CollectiveOp::kAllReduce, all, MiB(256)) ==
          doctest::Approx(805306368.0 * 1.9375 / 8 * 10 / 12.6e9).epsilon(1e-6));
    CHECK(t(CollectiveOp::kAllToAll, node0, GiB(1)) - t(CollectiveOp::kAllToAll, node0, MiB(256)) ==
          doctest::Approx(805306368.0 * 12 / 8 / 12.6e9).epsilon(1e-6));
    CHECK(t(CollectiveOp::kSendRecv, {0, 8}, GiB(1)) - t(CollectiveOp::kSendRecv, {0, 8}, MiB(256)) ==
          doctest::Approx(805306368.0 / 10e9).epsilon(1e-6));
  }
}

TEST_CASE("hierarchical AllReduce alone on NICs that 4 GPUs share: the rings on the busiest NIC, at both fidelities") {
  // 2 HGX H100 with 2 NICs of 400 Gbit/s (GPUs 0-3 on NIC 0, 4-7 on NIC 1), ranks 0-5 and 8-15, hierarchical
  // forced, alone. L = 8 rings cross the nodes, ring j through rank j mod 6 of node 0: ranks 0, 1, 2, 3, 4, 5, 0, 1,
  // so NIC 0 carries 6 rings and NIC 1 two; node 1's NICs 4 each. Each ring moves S/8 x 2(2 - 1)/2 = S/8 across:
  // the busiest NIC 6/8 of S through a port of 50 GB/s x 0.85 = 42.5 GB/s. Inside the nodes the reduce-scatter
  // and all-gather of node 1's 8 ranks take 2 x 7/8 of S over NVLink (the slower node). Bandwidth term from 256 MiB
  // to 1 GiB: 805,306,368 x (2 x 7/8 / b_nvlink + 6/8 / 42.5e9). The closed form had charged each rank's channels
  // to its NIC (4 channels on NIC 0: S x 2/8 / (42.5e9 / 4) = S/42.5e9 across, a third more than FLOW).
  Scenario sc = cluster_only("node_preset: \"hgx-h100\" nodes: 2 nics_per_node: 2", "h100-sxm5-80gb");
  sc.nccl.protocol = Protocol::kSimple;
  sc.nccl.algorithm = Algorithm::kHierarchical;
  const double b_nvlink = sc.cluster.nvlink_per_direction.raw() * sc.profile.collectives.nvlink_bus_efficiency;
  const std::vector<std::uint32_t> ranks = {0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15};
  for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
    CAPTURE(static_cast<int>(f));
    sc.fidelity = f;
    auto t = [&](Bytes size) {
      return run_collective(sc, CollectiveRequest{CollectiveOp::kAllReduce, ranks, size, 0}).time.raw();
    };
    CHECK(t(GiB(1)) - t(MiB(256)) ==
          doctest::Approx(805306368.0 * (2 * 7.0 / 8 / b_nvlink + 6.0 / 8 / 42.5e9)).epsilon(1e-6));
  }
}

TEST_CASE("trees alone on NICs that 4 GPUs share: the busiest NIC's channels times its node's sends") {
  // 4 HGX H100 with 2 NICs of 400 Gbit/s (GPUs 0-3 of a node on NIC 0, 4-7 on NIC 1), tree Simple forced, alone.
  // Ranks: node 0 {0, 1, 2, 3, 4, 7}, node 1 {9-14}, node 2 {16, 17, 19, 21, 22, 23}, node 3 {24-30}: k = 6
  // channels (the least populated node's ranks), channel c through rank c mod m's NIC. The double binary tree over 4
  // nodes (0 - 2, 2 - 1, 2 - 3 and 3 - 1, 1 - 2, 1 - 0) has nodes 1 and 2 send 4 half-buffers of S/2k per channel,
  // nodes 0 and 3 two. Node 1's ranks 9-11 are on NIC 0 and 12-14 on NIC 1: 3 channels x 4 = 12 units on each;
  // node 0's NIC 0 carries 4 channels x 2 = 8. Busiest: 12 x S/12 = S through a port of 50 GB/s x 0.85. From 1 to
  // 4 GiB (past NCCL's tree correction table): 3,221,225,472 / 42.5e9 = 0.075794 s. The closed form had paired node
  // 0's 4 channels on one NIC with node 1's 4 sends (4 x 4 x S/12: 4/3 of FLOW's time).
  Scenario sc = cluster_only("node_preset: \"hgx-h100\" nodes: 4 nics_per_node: 2", "h100-sxm5-80gb");
  sc.nccl.protocol = Protocol::kSimple;
  sc.nccl.algorithm = Algorithm::kTree;
  const std::vector<std::uint32_t> ranks = {0,  1,  2,  3,  4,  7,  9,  10, 11, 12, 13, 14, 16,
                                            17, 19, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30};
  for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
    CAPTURE(static_cast<int>(f));
    CHECK(alone_from_1_to_4_gib(sc, f, CollectiveOp::kAllReduce, ranks) ==
          doctest::Approx(3221225472.0 / 42.5e9).epsilon(1e-6));
  }
}

TEST_CASE("oversubscribed rail leaves: rings leave through their ranks' own NICs, PAT's rounds cross as routed") {
  // 5 HGX H100 with 2 NICs (GPUs 0-3 on rail 0, 4-7 on rail 1) on a rail-optimised tree of radix 4 at 3:1: a leaf
  // has 3 downlinks and 1 uplink, so nodes 0-2 share one leaf per rail and nodes 3-4 another; the uplink runs at the
  // NIC port's 50 GB/s x 0.85 = 42.5 GB/s, as does a NIC. Alone, each rank here has its NIC to itself.
  //   Ring AllReduce over GPUs 0 (node 0, rail 0), 12 (node 1, rail 1), 16 (node 2, rail 0), 24 (node 3, rail 0),
  //   one channel: edge 0 -> 12 goes from rail 0's leaf to rail 1's (over a spine) and 16 -> 24 to the other leaf
  //   group, both out of rail 0's first leaf: 2 edges of 2 x 3/4 S on one uplink. From 1 to 4 GiB:
  //   3 GiB x 1.5 x 2 / 42.5e9 = 0.227381 s. (The closed form took every rank's channel on rail 0, saw one crossing
  //   per leaf and half that time.)
  //   PAT AllGather over GPU 0 of each node, 5 ranks, 3 rounds (network_model.cpp): distance 4 with 1 shard of S/5
  //   (crossings out of a leaf: at most 1), distance 2 with 2 shards (1 -> 3 and 2 -> 4 both leave the first leaf:
  //   2), distance 1 with the last shard (1). Per byte of S: (1/5 x 1 + 2/5 x 2 + 1/5 x 1) / 42.5e9 = 1.2 / 42.5e9,
  //   over PAT's efficiency e (NCCL's 0.75): 3 GiB x 1.2 / 42.5e9 / e. (The closed form took the ring's bound, 4/5.)
  Scenario sc =
      cluster_only("node_preset: \"hgx-h100\" nodes: 5 nics_per_node: 2 fabric { switch_radix: 4 oversubscription: 3 }",
                   "h100-sxm5-80gb");
  sc.nccl.protocol = Protocol::kSimple;
  const double pat_efficiency = sc.profile.collectives.nccl.pat_bus_efficiency;
  REQUIRE(pat_efficiency > 0);
  for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
    CAPTURE(static_cast<int>(f));
    sc.fidelity = f;
    auto t = [&](Algorithm a, CollectiveOp op, std::vector<std::uint32_t> gpus, Bytes size) {
      sc.nccl.algorithm = a;
      return run_collective(sc, CollectiveRequest{op, std::move(gpus), size, 0}).time.raw();
    };
    const std::vector<std::uint32_t> ring = {0, 12, 16, 24}, pat = {0, 8, 16, 24, 32};
    CHECK(t(Algorithm::kRing, CollectiveOp::kAllReduce, ring, GiB(4)) -
              t(Algorithm::kRing, CollectiveOp::kAllReduce, ring, GiB(1)) ==
          doctest::Approx(3221225472.0 * 1.5 * 2 / 42.5e9).epsilon(1e-6));
    CHECK(t(Algorithm::kPat, CollectiveOp::kAllGather, pat, GiB(4)) -
              t(Algorithm::kPat, CollectiveOp::kAllGather, pat, GiB(1)) ==
          doctest::Approx(3221225472.0 * 1.2 / 42.5e9 / pat_efficiency).epsilon(1e-6));
  }
}

TEST_CASE("CollNet on PCIe nodes: the reduce-scatter ring and the legs to the NIC share the switches' links") {
  // 2 PCIe nodes (2 GPUs per PCIe switch, NIC 0 on switch 0 for GPUs 0-3, NIC 1 on switch 2; every PCIe link
  // 15.75 GB/s x 0.8 = 12.6 GB/s) with in-network reduction, CollNet forced on GPUs 0, 4, 8 and 12: each node a
  // coflow of S/2 per entry (network_model.cpp). Node 0: GPU 0's leg up goes GPU 0 -> switch 0 -> NIC 0; GPU 4's goes
  // GPU 4 -> switch 2 -> NIC 1; each comes back the same way; the ring 0 -> 4 -> 0 carries 2(m - 1) = 2 shards per
  // edge, over GPU 0 -> switch 0 -> CPU 0 -> CPU 1 -> switch 2 -> GPU 4 and back. GPU 0's link up carries its leg
  // and 2 ring shards: 3 entries of S/2 on 12.6 GB/s (the UPI link, 41.6 GB/s x 0.8, carries 2). From 1 to 4 GiB:
  // 3 GiB x 3/2 / 12.6e9 = 0.383479 s. (The closed form charged the ring alone, 12.6 GB/s x m / (2(m - 1)) for S:
  // 3 GiB / 12.6e9 = 0.255653 s, two thirds of it; the NIC, 10 GB/s for S/2, less.)
  Scenario sc = cluster_only(
      "node_preset: \"pcie-8gpu-sys-4029gp-trt\" nodes: 2 gpu: \"A100-SXM4-80GB\" fabric { in_network_reduction: "
      "true }",
      "a100-sxm4-80gb");
  sc.nccl.protocol = Protocol::kSimple;
  sc.nccl.algorithm = Algorithm::kCollNet;
  const std::vector<std::uint32_t> ranks = {0, 4, 8, 12};
  // AllGather runs the same coflows (network_model.cpp's CollNet does not tell the operations apart).
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kAllGather})
    for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
      CAPTURE(to_string(op));
      CAPTURE(static_cast<int>(f));
      CHECK(alone_from_1_to_4_gib(sc, f, op, ranks) == doctest::Approx(3221225472.0 * 1.5 / 12.6e9).epsilon(1e-6));
    }
}

TEST_CASE("a chain on oversubscribed rail leaves has no closing edge: Broadcast and Reduce, at both fidelities") {
  // 3 HGX H100 (a NIC per GPU, GPU i of a node on rail i) on a rail-optimised tree of radix 8 at 4:1 (one 50 GB/s
  // uplink per leaf, x 0.85 = 42.5 GB/s, as a NIC). Broadcast from GPU 11 over 11, 12 (node 1) and 2, 3 (node 0): two
  // channels. Channel 0 goes 11 -> 12 on NVLink, hands back to 11 and leaves on rail 3 for GPU 2 on rail 2 (over a
  // spine); channel 1 leaves from 12 (rail 4) for 3 (rail 3). Each leaf uplink carries one edge, so the NICs bind:
  // S/2 per channel at 42.5 GB/s, 3 GiB / 2 / 42.5e9 = 0.037897 s from 1 to 4 GiB. A ring would close 2 -> 11 and
  // 3 -> 12, the second out of rail 3's leaf too: the closed form counted those and took twice as long.
  Scenario sc = cluster_only("node_preset: \"hgx-h100\" nodes: 3 fabric { switch_radix: 8 oversubscription: 4 }",
                             "h100-sxm5-80gb");
  sc.nccl.protocol = Protocol::kSimple;
  const std::vector<std::uint32_t> ranks = {11, 12, 2, 3};
  for (CollectiveOp op : {CollectiveOp::kBroadcast, CollectiveOp::kReduce})
    for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
      CAPTURE(to_string(op));
      CAPTURE(static_cast<int>(f));
      CHECK(alone_from_1_to_4_gib(sc, f, op, ranks) == doctest::Approx(3221225472.0 / 2 / 42.5e9).epsilon(1e-6));
    }
}

TEST_CASE("a route between two rails of a rail-optimised tree crosses a spine: two switches more, at both fidelities") {
  // 2 HGX H100 (8 NICs, one rail each) under one leaf per rail, switch_latency_us 5. GPUs 0 and 8 are both on rail 0:
  // NIC, leaf 0, NIC (1 switch). GPUs 0 and 9 are on rails 0 and 1: leaf 0, a spine, leaf 1 (3 switches). Ring
  // AllReduce of 2 ranks: 2(n - 1) = 2 steps, both over a network edge, so 2 x (3 - 1) x 5 us = 20 us more for 0, 9;
  // Send/Recv: one route, 2 x 5 = 10 us more. (The closed form counted switches by node only, as if on one leaf.)
  Scenario sc = cluster_only("node_preset: \"hgx-h100\" nodes: 2 fabric { switch_latency_us: 5 }", "h100-sxm5-80gb");
  sc.nccl.protocol = Protocol::kSimple;
  for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
    CAPTURE(static_cast<int>(f));
    sc.fidelity = f;
    auto t = [&](CollectiveOp op, std::optional<Algorithm> a, std::vector<std::uint32_t> gpus) {
      sc.nccl.algorithm = a;
      return run_collective(sc, CollectiveRequest{op, std::move(gpus), MiB(1), 0}).time.raw();
    };
    CHECK(t(CollectiveOp::kAllReduce, Algorithm::kRing, {0, 9}) -
              t(CollectiveOp::kAllReduce, Algorithm::kRing, {0, 8}) ==
          doctest::Approx(20e-6).epsilon(1e-9));
    CHECK(t(CollectiveOp::kSendRecv, std::nullopt, {0, 9}) - t(CollectiveOp::kSendRecv, std::nullopt, {0, 8}) ==
          doctest::Approx(10e-6).epsilon(1e-9));
  }
}

TEST_CASE(
    "a chain into a leaf that holds a whole domain's ranks: the spines' links down to it bind, at both fidelities") {
  // 27 GB200 trays (4 GPUs, 4 NICs of 50 GB/s each; NVLink domains of 18 trays) on a two-level Clos of radix 16 at
  // 1.5:1: 14 leaves of 2 trays (8 NICs) with one 50 GB/s link to each of 6 spines. Broadcast from GPU 0 over GPU 0
  // of trays 0-6 (domain 0, 7 ranks on 4 leaves) and GPUs 88-94 (trays 22-23, domain 1, all under leaf 11): 7
  // channels, each from its rank in domain 0 to its rank in domain 1, so all 7 enter leaf 11 over its 6 links down
  // from the spines, 6 x 50 x 0.85 = 255 GB/s; no leaf sends more than 2 out. S/7 per channel at 255/7 GB/s each:
  // from 1 to 4 GiB, 3 GiB / 255e9 = 0.012632 s (the NICs allow 7 x 42.5 = 297.5 GB/s, NVLink more). The closed form
  // had counted the edges leaving a leaf only: 3 GiB / 297.5e9.
  Scenario sc = cluster_only(
      "node_preset: \"gb200-nvl72\" nodes: 27 fabric { kind: CLOS_TWO_LEVEL switch_radix: 16 oversubscription: 1.5 }",
      "gb200");
  sc.nccl.protocol = Protocol::kSimple;
  const std::vector<std::uint32_t> ranks = {0, 4, 8, 12, 16, 20, 24, 88, 89, 90, 91, 92, 93, 94};
  for (CollectiveOp op : {CollectiveOp::kBroadcast, CollectiveOp::kReduce})
    for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
      CAPTURE(to_string(op));
      CAPTURE(static_cast<int>(f));
      CHECK(alone_from_1_to_4_gib(sc, f, op, ranks) == doctest::Approx(3221225472.0 / 255e9).epsilon(1e-6));
    }
}

TEST_CASE("hop latencies: PAT's rounds pay their farthest pair's switches, a PXN hand-over its NVLink hop, PCIe none") {
  auto at_both = [](Scenario sc, Algorithm a, CollectiveOp op, std::vector<std::uint32_t> gpus) {
    sc.nccl.protocol = Protocol::kSimple;
    sc.nccl.algorithm = a;
    std::vector<double> out;
    for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
      sc.fidelity = f;
      out.push_back(run_collective(sc, CollectiveRequest{op, gpus, MiB(1), 0}).time.raw());
    }
    return out;
  };
  // PAT AllGather over 4 HGX H100 on one leaf per rail, switch_latency_us 5: two rounds (pairs 2 apart, then 1).
  // GPUs 0, 9, 18, 27 are on rails 0-3, so every pair crosses a spine (3 switches a round); GPUs 0, 8, 16, 24 share
  // rail 0 (1 switch). 2 rounds x 2 switches x 5 us = 20 us more.
  const Scenario hgx =
      cluster_only("node_preset: \"hgx-h100\" nodes: 4 fabric { switch_latency_us: 5 }", "h100-sxm5-80gb");
  const auto spread = at_both(hgx, Algorithm::kPat, CollectiveOp::kAllGather, {0, 9, 18, 27});
  const auto one_rail = at_both(hgx, Algorithm::kPat, CollectiveOp::kAllGather, {0, 8, 16, 24});
  for (std::size_t f = 0; f < 2; ++f) CHECK(spread[f] - one_rail[f] == doctest::Approx(20e-6).epsilon(1e-9));
  // Ring AllGather over 2 DGX H100 (16 GPUs), nvlink_hop_latency_us 3: 15 steps round 16 edges, 14 of them NVLink
  // and 2 network edges, each of which starts with a PXN hand-over inside its node (an NVLink hop too): every step
  // pays 3 us, 15 x 3 = 45 us more than without the hop latency. (The closed form left out the hand-overs: 39.375 us.)
  std::vector<std::uint32_t> all16(16);
  std::iota(all16.begin(), all16.end(), 0u);
  const auto dgx3 =
      at_both(cluster_only("node_preset: \"dgx-h100\" nodes: 2 nvlink_hop_latency_us: 3", "h100-sxm5-80gb"),
              Algorithm::kRing, CollectiveOp::kAllGather, all16);
  const auto dgx0 = at_both(cluster_only("node_preset: \"dgx-h100\" nodes: 2", "h100-sxm5-80gb"), Algorithm::kRing,
                            CollectiveOp::kAllGather, all16);
  for (std::size_t f = 0; f < 2; ++f) CHECK(dgx3[f] - dgx0[f] == doctest::Approx(45e-6).epsilon(1e-9));
  // A PCIe-only node has no NVLink: its GPUs' links carry no NVLink hop latency (the closed form charged 7 x 3 us to
  // a ring over one node's 8 GPUs).
  const std::string pcie = "node_preset: \"pcie-8gpu-sys-4029gp-trt\" nodes: 2 gpu: \"A100-SXM4-80GB\"";
  const std::vector<std::uint32_t> node0 = {0, 1, 2, 3, 4, 5, 6, 7};
  const auto pcie3 = at_both(cluster_only(pcie + " nvlink_hop_latency_us: 3", "a100-sxm4-80gb"), Algorithm::kRing,
                             CollectiveOp::kAllGather, node0);
  const auto pcie0 = at_both(cluster_only(pcie, "a100-sxm4-80gb"), Algorithm::kRing, CollectiveOp::kAllGather, node0);
  for (std::size_t f = 0; f < 2; ++f) CHECK(pcie3[f] == doctest::Approx(pcie0[f]).epsilon(1e-12));
}

TEST_CASE("a NIC faster than its PCIe link: the link bounds it, at both fidelities") {
  // A what-if NIC upgrade: DGX H100 with 800 Gbit/s NICs (100 GB/s) behind PCIe Gen5 x16 (63 GB/s; the preset's
  // 4 PCIe switches, each NIC on its own link to one), and DGX A100 with 400 Gbit/s (50 GB/s) behind Gen4 x16
  // (31.5 GB/s). Ring AllReduce of GPUs 0 and 8: 2(n - 1)/n = 1, so S crosses each NIC's PCIe link at
  // 63e9 x 0.85 (H100 profile's network efficiency) and 31.5e9 x 0.8 (A100's). From 1 to 4 GiB: 3 GiB / 53.55e9 =
  // 0.060154 s and 3 GiB / 25.2e9 = 0.127826 s. (The closed form had the ports, 85 and 40 GB/s.)
  const std::pair<const char*, double> cases[] = {
      {"node_preset: \"dgx-h100\" nodes: 2 nic_gbits_per_s_per_direction: 800", 63e9 * 0.85},
      {"node_preset: \"dgx-a100\" nodes: 2 nic_gbits_per_s_per_direction: 400", 31.5e9 * 0.8}};
  for (const auto& [cluster, link] : cases) {
    Scenario sc = cluster_only(
        cluster, std::string(cluster).find("h100") != std::string::npos ? "h100-sxm5-80gb" : "a100-sxm4-80gb");
    sc.nccl.protocol = Protocol::kSimple;
    sc.nccl.algorithm = Algorithm::kRing;
    for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
      CAPTURE(cluster);
      CAPTURE(static_cast<int>(f));
      CHECK(alone_from_1_to_4_gib(sc, f, CollectiveOp::kAllReduce, {0, 8}) ==
            doctest::Approx(3221225472.0 / link).epsilon(1e-6));
    }
  }
}

TEST_CASE("NICs under other PCIe switches than their GPUs: the closed form routes their legs, as FLOW does") {
  // hgx-h100 with 3 NICs for 8 GPUs (4 PCIe switches, 2 a CPU; GPU i on switch i/2, its NIC i·3/8 on switch
  // NIC·4/3): GPUs 4 and 5 reach NIC 1 on switch 1 over switch 2's uplink and the CPUs, GPUs 6 and 7 reach NIC 2 down
  // switch 2's uplink. Ring channel c leaves a node and enters the next through GPU c's NIC, each way, carrying
  // 2(n - 1)/n · S / 8 = 1.875 S / 8: switch 2's uplink carries 4 such legs each way at 63 GB/s x 0.85 = 53.55 GB/s,
  // so from 1 to 4 GiB 3 GiB x 4 x 1.875 / 8 / 53.55e9 = 0.056394 s. (The closed form saw only the NIC ports: 25 %
  // less time.) Tree, NVLSTree, hierarchical, AllGather and AlltoAll agree at both fidelities too.
  Scenario sc = cluster_only("node_preset: \"hgx-h100\" nodes: 2 nics_per_node: 3", "h100-sxm5-80gb");
  std::vector<std::uint32_t> all(16);
  std::iota(all.begin(), all.end(), 0u);
  sc.nccl.algorithm = Algorithm::kRing;
  for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
    CAPTURE(static_cast<int>(f));
    CHECK(alone_from_1_to_4_gib(sc, f, CollectiveOp::kAllReduce, all) ==
          doctest::Approx(3221225472.0 * 4 * 1.875 / 8 / 53.55e9).epsilon(1e-6));
  }
  const std::pair<std::optional<Algorithm>, CollectiveOp> others[] = {
      {Algorithm::kTree, CollectiveOp::kAllReduce},
      {Algorithm::kNvlsTree, CollectiveOp::kAllReduce},
      {Algorithm::kHierarchical, CollectiveOp::kAllReduce},
      {Algorithm::kRing, CollectiveOp::kAllGather},
      {std::nullopt, CollectiveOp::kAllToAll}};
  for (const auto& [algorithm, op] : others) {
    CAPTURE(algorithm ? to_string(*algorithm) : "p2p");
    CAPTURE(to_string(op));
    sc.nccl.algorithm = algorithm;
    CHECK(alone_from_1_to_4_gib(sc, Fidelity::kFlow, op, all) ==
          doctest::Approx(alone_from_1_to_4_gib(sc, Fidelity::kAnalytical, op, all)).epsilon(1e-6));
  }
}

TEST_CASE("NVLS AllReduce: a GPU's NVLink slower than the measured NVLS rate caps it, at both fidelities") {
  // Each GPU moves S(1 + 1/n) to and from the NVSwitch (nccl.md §1.12) at min(the profile's NVLS rate 308 GB/s, its
  // NVLink x nvlink_bus_efficiency 0.82). 4 H100s on 100 GB/s: min(308, 82) = 82 GB/s, from 1 to 4 GiB
  // 3 GiB x 5/4 / 82e9 = 0.049104 s; on the simple form's 450 GB/s (369 GB/s) the NVLS rate:
  // 3 GiB x 5/4 / 308e9 = 0.013073 s. (The closed form took 308 GB/s on any link.)
  const std::pair<const char*, double> cases[] = {{"nvlink_gbytes_per_s_per_direction: 100", 82e9},
                                                  {"nvlink_gbytes_per_s_per_direction: 450", 308e9}};
  for (const auto& [nvlink, rate] : cases) {
    Scenario sc = cluster_only(std::string("nodes: 1 gpus_per_node: 4 gpu: \"H100-SXM5-80GB\" ") + nvlink +
                                   " nic_gbits_per_s_per_direction: 400",
                               "h100-sxm5-80gb");
    sc.nccl.algorithm = Algorithm::kNvls;
    for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
      CAPTURE(nvlink);
      CAPTURE(static_cast<int>(f));
      CHECK(alone_from_1_to_4_gib(sc, f, CollectiveOp::kAllReduce, {0, 1, 2, 3}) ==
            doctest::Approx(3221225472.0 * 1.25 / rate).epsilon(1e-6));
    }
  }
}

TEST_CASE("NVLSTree AllReduce: NVLS inside the nodes and trees between them, alike at both fidelities") {
  // FLOW runs NVLSTree as one coflow of S: each node's NVLS ring carrying S(1 + 1/m) at most at the NVLS rate, the
  // trees' edges between the nodes' heads S/2k each way; the closed form takes the slowest of the same, and NCCL's
  // per-channel ceiling (perChMaxNVLSTreeBw) as a bound on the rate. Generated clusters, even and uneven, with shared
  // NICs and an oversubscribed Clos: the times agree within 1 % from 1 MiB, the bandwidth terms within 1e-6.
  struct Case {
    const char* cluster;
    std::vector<std::uint32_t> gpus;  // empty: all
  };
  const Case cases[] = {
      {"node_preset: \"hgx-h100\" nodes: 2", {}},
      {"node_preset: \"hgx-h100\" nodes: 3", {}},
      {"node_preset: \"hgx-h100\" nodes: 5", {}},
      {"node_preset: \"hgx-h100\" nodes: 2", {0, 1, 2, 3, 8, 9, 10, 11, 12, 13}},
      {"nodes: 2 gpus_per_node: 8 gpu: \"H100-SXM5-80GB\" nvlink_gbytes_per_s_per_direction: 450 "
       "nic_gbits_per_s_per_direction: 400 nics_per_node: 4",
       {}},
      {"node_preset: \"dgx-h100\" nodes: 8 fabric { kind: CLOS_TWO_LEVEL oversubscription: 4 }", {}},
  };
  for (const Case& c : cases) {
    Scenario sc = cluster_only(c.cluster, "h100-sxm5-80gb");
    sc.nccl.algorithm = Algorithm::kNvlsTree;
    std::vector<std::uint32_t> gpus = c.gpus;
    if (gpus.empty()) {
      gpus.resize(sc.cluster.gpu_count());
      std::iota(gpus.begin(), gpus.end(), 0u);
    }
    CAPTURE(std::string(c.cluster));
    CAPTURE(c.gpus.size());
    CHECK(alone_from_1_to_4_gib(sc, Fidelity::kFlow, CollectiveOp::kAllReduce, gpus) ==
          doctest::Approx(alone_from_1_to_4_gib(sc, Fidelity::kAnalytical, CollectiveOp::kAllReduce, gpus))
              .epsilon(1e-6));
    for (double mib : {1.0, 64.0, 1024.0}) {
      CAPTURE(mib);
      CHECK(collective_seconds(sc, Fidelity::kFlow, MiB(mib), CollectiveOp::kAllReduce, gpus) ==
            doctest::Approx(collective_seconds(sc, Fidelity::kAnalytical, MiB(mib), CollectiveOp::kAllReduce, gpus))
                .epsilon(0.01));
    }
  }
  SUBCASE("NCCL's ceiling is a rate: two jobs sharing NICs below it do not slow each other") {
    // 2 nodes x 8 H100, 4 NICs a node (a port of 400 Gb/s x 8/4 = 100 GB/s, x 0.85 = 85 GB/s), GPUs 2i and 2i + 1
    // on NIC i. Jobs on the even and on the odd GPUs, 4 a node each: 4 heads, each head's NIC carrying S/4 each
    // way. Alone a job's NICs allow 4 x 85 = 340 GB/s, together half, 170 GB/s; NVLS 308 x 4/5 = 246.4 GB/s; NCCL's
    // ceiling 4 x 57.7 GB/s busbw = 230.8 / (2 x 7/8) = 131.886 GB/s binds either way: from 1 to 4 GiB
    // 3 GiB / 131.886e9 = 0.024425 s, alone and together. (Had the ceiling been bytes on the wire, each job would
    // send 246.4 / 131.886 = 1.87 x S over NICs that give it 170 GB/s: 3 GiB / 91.0e9.)
    Scenario sc = cluster_only(
        "nodes: 2 gpus_per_node: 8 gpu: \"H100-SXM5-80GB\" nvlink_gbytes_per_s_per_direction: "
        "450 nic_gbits_per_s_per_direction: 400 nics_per_node: 4",
        "h100-sxm5-80gb");
    sc.nccl.algorithm = Algorithm::kNvlsTree;
    const std::vector<std::uint32_t> even = {0, 2, 4, 6, 8, 10, 12, 14}, odd = {1, 3, 5, 7, 9, 11, 13, 15};
    auto together = [&](Bytes size) {
      sim::Simulation s;
      NetworkModel net(s, sc);
      CollectiveEngine engine(s, sc, &net);
      sim::TaskGraph g;
      for (const auto* group : {&even, &odd}) {
        std::vector<sim::StreamId> lanes;
        for (std::uint32_t gpu : *group) lanes.push_back(g.add_stream(gpu, "comm"));
        engine.add(g, group == &even ? "even" : "odd", "comm",
                   CollectiveRequest{CollectiveOp::kAllReduce, *group, size, 0}, lanes, {});
      }
      sim::Executor ex(s, g, &engine);
      ex.start();
      s.run();
      ex.finish();
      return sim::to_seconds(ex.makespan()).raw();
    };
    const double bandwidth_term = 3221225472.0 / (4 * 57.7e9 / 1.75);
    CHECK(together(GiB(4)) - together(GiB(1)) == doctest::Approx(bandwidth_term).epsilon(1e-6));
    for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
      CAPTURE(static_cast<int>(f));
      CHECK(alone_from_1_to_4_gib(sc, f, CollectiveOp::kAllReduce, even) ==
            doctest::Approx(bandwidth_term).epsilon(1e-6));
    }
  }
  SUBCASE("a slow NVLink: the NVLS part binds") {
    // 2 x 4 H100 on 100 GB/s NVLink: NVLS S(1 + 1/4) at min(308, 100 x 0.82 = 82) GB/s → 82 x 4/5 = 65.6 GB/s,
    // below the trees (4 rails x 42.5 GB/s = 170 GB/s) and the ceiling (4 x 57.7 x 8/14 = 131.9 GB/s): from 1 to
    // 4 GiB 3 GiB / 65.6e9 = 0.049104 s.
    Scenario sc = cluster_only(
        "nodes: 2 gpus_per_node: 4 gpu: \"H100-SXM5-80GB\" nvlink_gbytes_per_s_per_direction: "
        "100 nic_gbits_per_s_per_direction: 400",
        "h100-sxm5-80gb");
    sc.nccl.algorithm = Algorithm::kNvlsTree;
    for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
      CAPTURE(static_cast<int>(f));
      CHECK(alone_from_1_to_4_gib(sc, f, CollectiveOp::kAllReduce, {0, 1, 2, 3, 4, 5, 6, 7}) ==
            doctest::Approx(3221225472.0 / 65.6e9).epsilon(1e-6));
    }
  }
  SUBCASE("an explicit cluster: slow NIC links bind the trees") {
    // 2 nodes of 4 H100s on an NVSwitch (450 GB/s), each GPU with its own NIC (PCIe 64) on one leaf over 25 GB/s
    // links (x 0.85 = 21.25 GB/s). 4 channels, GPU c of each node the head of channel c: in the 2 trees it sends
    // S/8 up one and S/8 down the other, S/4 over its NIC link each way, so S at most 4 x 21.25 = 85 GB/s (NVLS:
    // 308 x 4/5 = 246.4; the ceiling 131.9): from 1 to 4 GiB 3 GiB / 85e9 = 0.037894 s.
    static const char* const gpu[] = {"g0 GPU", "g1 GPU", "g2 GPU", "g3 GPU", "g4 GPU", "g5 GPU", "g6 GPU", "g7 GPU"};
    static const char* const nic[] = {"n0 NIC node: 0", "n1 NIC node: 0", "n2 NIC node: 0", "n3 NIC node: 0",
                                      "n4 NIC node: 1", "n5 NIC node: 1", "n6 NIC node: 1", "n7 NIC node: 1"};
    static const char* const nvlink[] = {"g0 s0 NVLINK 450", "g1 s0 NVLINK 450", "g2 s0 NVLINK 450",
                                         "g3 s0 NVLINK 450", "g4 s1 NVLINK 450", "g5 s1 NVLINK 450",
                                         "g6 s1 NVLINK 450", "g7 s1 NVLINK 450"};
    static const char* const pcie[] = {"g0 n0 PCIE 64", "g1 n1 PCIE 64", "g2 n2 PCIE 64", "g3 n3 PCIE 64",
                                       "g4 n4 PCIE 64", "g5 n5 PCIE 64", "g6 n6 PCIE 64", "g7 n7 PCIE 64"};
    static const char* const net[] = {"n0 l0 NETWORK 25", "n1 l0 NETWORK 25", "n2 l0 NETWORK 25", "n3 l0 NETWORK 25",
                                      "n4 l0 NETWORK 25", "n5 l0 NETWORK 25", "n6 l0 NETWORK 25", "n7 l0 NETWORK 25"};
    std::string text =
        "nodes: 2 gpus_per_node: 4 gpu: \"H100-SXM5-80GB\" nvlink_gbytes_per_s_per_direction: 450 "
        "nic_gbits_per_s_per_direction: 400 ";
    for (int g = 0; g < 8; ++g) text += explicit_graph({gpu[g], nic[g]}, {nvlink[g], pcie[g], net[g]});
    text += explicit_graph({"s0 NVSWITCH node: 0", "s1 NVSWITCH node: 1", "l0 LEAF"}, {});
    Scenario sc = cluster_only(text, "h100-sxm5-80gb");
    sc.nccl.algorithm = Algorithm::kNvlsTree;
    for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
      CAPTURE(static_cast<int>(f));
      CHECK(alone_from_1_to_4_gib(sc, f, CollectiveOp::kAllReduce, {0, 1, 2, 3, 4, 5, 6, 7}) ==
            doctest::Approx(3221225472.0 / 85e9).epsilon(1e-6));
    }
  }
}

TEST_CASE("an explicit cluster: the closed form reads the graph's links, as FLOW routes on them") {
  SUBCASE("a PCIe box of H100s: no NVLS without an NVSwitch, and the switches' shared uplinks bound AlltoAll") {
    // 4 GPUs, 2 per PCIe switch, both switches on one CPU, every link 32 GB/s at the H100 profile's
    // network_bus_efficiency 0.85 = 27.2 GB/s. AlltoAll (S/4 per pair): switch 0's uplink carries g0 and g1's
    // pairs to g2 and g3, 4 x S/4 = S, so from 1 to 4 GiB 3 GiB / 27.2e9 = 0.118427 s (a GPU's own link carries
    // 3S/4). Ring AllReduce 0-1-2-3: every link direction carries one edge of S x 2(n - 1)/n = 1.5 S:
    // 3 GiB x 1.5 / 27.2e9 = 0.177640 s. Before, the closed form took the scalar 32 GB/s as NVLink through an
    // NVSwitch (NVLS chosen, 0.82 efficiency, no shared uplink).
    const Scenario sc = cluster_only(
        "nodes: 1 gpus_per_node: 4 gpu: \"H100-SXM5-80GB\" nvlink_gbytes_per_s_per_direction: 32 "
        "nic_gbits_per_s_per_direction: 200 " +
            explicit_graph({"g0 GPU", "g1 GPU", "g2 GPU", "g3 GPU", "p0 PCIE_SWITCH", "p1 PCIE_SWITCH", "cpu CPU"},
                           {"g0 p0 PCIE 32", "g1 p0 PCIE 32", "g2 p1 PCIE 32", "g3 p1 PCIE 32", "p0 cpu PCIE 32",
                            "p1 cpu PCIE 32"}),
        "h100-sxm5-80gb");
    const CollectiveModel model(sc.cluster, sc.profile, sc.nccl);
    CHECK(model.plan(CollectiveRequest{CollectiveOp::kAllReduce, {0, 1, 2, 3}, GiB(1), 0}).algorithm ==
          Algorithm::kRing);
    for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
      CAPTURE(static_cast<int>(f));
      CHECK(alone_from_1_to_4_gib(sc, f, CollectiveOp::kAllToAll, {0, 1, 2, 3}) ==
            doctest::Approx(3221225472.0 / 27.2e9).epsilon(1e-6));
      CHECK(alone_from_1_to_4_gib(sc, f, CollectiveOp::kAllReduce, {0, 1, 2, 3}) ==
            doctest::Approx(3221225472.0 * 1.5 / 27.2e9).epsilon(1e-6));
    }
  }
  SUBCASE("two PCIe-only nodes: each node is one domain at both fidelities, its ring leaving through the NIC") {
    // 2 nodes of 2 GPUs on a PCIe switch with one NIC (every PCIe link 32 GB/s, 25.6 at the A100 profile's 0.8;
    // the NICs' links to the leaf 25 GB/s, 20). FLOW grouped these GPUs, which have no NVLink, one per domain; now
    // by node, as the closed form and NCCL do. Ring AllReduce, 2 channels: channel 0 goes g0 -> g1, hands over
    // g1 -> g0, leaves g0 -> g2; channel 1 g1 -> g0, g0 -> g1, g1 -> g3 (and node 1 alike), so each GPU's link
    // carries 3 channel-edges each way: bus 2 x 25.6 / 3 = 17.067 GB/s, from 1 to 4 GiB 3 GiB x 1.5 / 17.067e9 =
    // 0.283116 s (the NIC's link, 2 x 20 / 2 = 20 GB/s, is not the bottleneck). AlltoAll: the NIC's link carries
    // the 4 pairs to the other node, S: 3 GiB / 20e9 = 0.161061 s.
    Scenario sc = cluster_only(
        "nodes: 2 gpus_per_node: 2 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 32 "
        "nic_gbits_per_s_per_direction: 200 " +
            explicit_graph({"g0 GPU", "g1 GPU", "g2 GPU", "g3 GPU", "p0 PCIE_SWITCH node: 0", "p1 PCIE_SWITCH node: 1",
                            "n0 NIC node: 0", "n1 NIC node: 1", "l0 LEAF"},
                           {"g0 p0 PCIE 32", "g1 p0 PCIE 32", "g2 p1 PCIE 32", "g3 p1 PCIE 32", "p0 n0 PCIE 32",
                            "p1 n1 PCIE 32", "n0 l0 NETWORK 25", "n1 l0 NETWORK 25"}),
        "a100-sxm4-80gb");
    sc.nccl.algorithm = Algorithm::kRing;
    sc.nccl.protocol = Protocol::kSimple;
    for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
      CAPTURE(static_cast<int>(f));
      CHECK(alone_from_1_to_4_gib(sc, f, CollectiveOp::kAllReduce, {0, 1, 2, 3}) ==
            doctest::Approx(3221225472.0 * 1.5 / (2 * 25.6e9 / 3)).epsilon(1e-6));
      CHECK(alone_from_1_to_4_gib(sc, f, CollectiveOp::kAllToAll, {0, 1, 2, 3}) ==
            doctest::Approx(3221225472.0 / 20e9).epsilon(1e-6));
    }
  }
  SUBCASE("the links' latencies: a ring step pays its edges' routes, a point-to-point pair its route") {
    // 2 nodes of 2 H100s on an NVSwitch, a NIC per GPU (PCIe), the 4 NICs on one leaf whose links carry
    // latency_us L. Ring AllReduce, channel 0: g0 -> g1 and g2 -> g3 over NVLink (0), and two network edges
    // g1 -> g0 -> NIC -> leaf -> NIC -> g2 (and back) of 2L each: 4L over 4 edges, L per edge, times 2(n - 1) = 6
    // steps: with L = 5 us the ring takes 30 us more than with L = 0. Send/Recv g0 -> g3 crosses the leaf once:
    // 2L = 10 us more; AlltoAll waits for its longest route, the same 10 us. The trees (2 domains: depth 1, each
    // tree's one edge 2L; the chains inside the domains over NVLink, 0) pay up and down 2 x (0 + 1 x 2L) = 20 us
    // at both fidelities (FLOW takes the plan's). (The closed form had none of them.)
    auto scenario = [](double latency_us) {
      std::string text =
          "nodes: 2 gpus_per_node: 2 gpu: \"H100-SXM5-80GB\" nvlink_gbytes_per_s_per_direction: 100 "
          "nic_gbits_per_s_per_direction: 200 vertices { name: \"leaf\" kind: LEAF } ";
      for (int g = 0; g < 4; ++g) {
        const std::string gpu = "g" + std::to_string(g), nic = "n" + std::to_string(g),
                          sw = "s" + std::to_string(g / 2);
        text += "vertices { name: \"" + gpu + "\" kind: GPU } vertices { name: \"" + nic +
                "\" kind: NIC node: " + std::to_string(g / 2) + " } ";
        if (g % 2 == 0) text += "vertices { name: \"" + sw + "\" kind: NVSWITCH node: " + std::to_string(g / 2) + " } ";
        text += "links { from: \"" + gpu + "\" to: \"" + sw + "\" kind: NVLINK gbytes_per_s_per_direction: 100 } ";
        text += "links { from: \"" + gpu + "\" to: \"" + nic + "\" kind: PCIE gbytes_per_s_per_direction: 32 } ";
        text += "links { from: \"" + nic + "\" to: \"leaf\" kind: NETWORK gbytes_per_s_per_direction: 25 latency_us: " +
                std::to_string(latency_us) + " } ";
      }
      Scenario sc = cluster_only(text, "h100-sxm5-80gb");
      return sc;
    };
    const Scenario flat = scenario(0), slow = scenario(5);
    struct Case {
      CollectiveOp op;
      std::vector<std::uint32_t> gpus;
      Algorithm algorithm;
      double extra_s;
    };
    for (const Case& c : {Case{CollectiveOp::kAllReduce, {0, 1, 2, 3}, Algorithm::kRing, 30e-6},
                          Case{CollectiveOp::kSendRecv, {0, 3}, Algorithm::kPointToPoint, 10e-6},
                          Case{CollectiveOp::kAllToAll, {0, 1, 2, 3}, Algorithm::kPointToPoint, 10e-6},
                          Case{CollectiveOp::kAllReduce, {0, 1, 2, 3}, Algorithm::kTree, 20e-6}}) {
      for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
        CAPTURE(static_cast<int>(c.op));
        CAPTURE(static_cast<int>(f));
        Scenario a = flat, b = slow;
        for (Scenario* sc : {&a, &b}) {
          sc->fidelity = f;
          if (c.algorithm != Algorithm::kPointToPoint) {
            sc->nccl.algorithm = c.algorithm;
            sc->nccl.protocol = Protocol::kLL;
          }
        }
        const CollectiveRequest req{c.op, c.gpus, bytes(8), 0};
        CHECK(run_collective(b, req).time.raw() - run_collective(a, req).time.raw() ==
              doctest::Approx(c.extra_s).epsilon(1e-6));
      }
    }
  }
  SUBCASE("the scalar figures are NCCL's tuning inputs: the graph alone bounds the transfers") {
    // A 4-H100 NVLink mesh without a switch, 100 GB/s per pair, the scalar NVLink 100 (not the 300 a GPU has in
    // all): AlltoAll sends each pair's S/4 on its own link at 100 x 0.82 = 82 GB/s, from 1 to 4 GiB
    // 3 GiB / 4 / 82e9 = 0.0098208 s (the closed form took the scalar: 3x that). Two nodes whose NVSwitches are
    // joined by NVLink, the NIC scalar 200 Gbit/s: Send/Recv g0 -> g2 goes over the NVLink, 3 GiB / 82e9 =
    // 0.039283 s (the closed form sent it at the NIC's 25 x 0.85 = 21.25 GB/s).
    std::string mesh =
        "nodes: 1 gpus_per_node: 4 gpu: \"H100-SXM5-80GB\" nvlink_gbytes_per_s_per_direction: 100 "
        "nic_gbits_per_s_per_direction: 400 ";
    for (int g = 0; g < 4; ++g) mesh += "vertices { name: \"g" + std::to_string(g) + "\" kind: GPU } ";
    for (int a = 0; a < 4; ++a)
      for (int b = a + 1; b < 4; ++b)
        mesh += "links { from: \"g" + std::to_string(a) + "\" to: \"g" + std::to_string(b) +
                "\" kind: NVLINK gbytes_per_s_per_direction: 100 } ";
    std::string joined =
        "nodes: 2 gpus_per_node: 2 gpu: \"H100-SXM5-80GB\" nvlink_gbytes_per_s_per_direction: 100 "
        "nic_gbits_per_s_per_direction: 200 vertices { name: \"leaf\" kind: LEAF } "
        "links { from: \"s0\" to: \"s1\" kind: NVLINK gbytes_per_s_per_direction: 200 } ";
    for (int g = 0; g < 4; ++g) {
      const std::string gpu = "g" + std::to_string(g), nic = "n" + std::to_string(g), sw = "s" + std::to_string(g / 2);
      joined += "vertices { name: \"" + gpu + "\" kind: GPU } vertices { name: \"" + nic + "\" kind: NIC } ";
      if (g % 2 == 0) joined += "vertices { name: \"" + sw + "\" kind: NVSWITCH } ";
      joined += "links { from: \"" + gpu + "\" to: \"" + sw + "\" kind: NVLINK gbytes_per_s_per_direction: 100 } ";
      joined += "links { from: \"" + gpu + "\" to: \"" + nic + "\" kind: PCIE gbytes_per_s_per_direction: 32 } ";
      joined += "links { from: \"" + nic + "\" to: \"leaf\" kind: NETWORK gbytes_per_s_per_direction: 25 } ";
    }
    const Scenario a = cluster_only(mesh, "h100-sxm5-80gb"), b = cluster_only(joined, "h100-sxm5-80gb");
    for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
      CAPTURE(static_cast<int>(f));
      CHECK(alone_from_1_to_4_gib(a, f, CollectiveOp::kAllToAll, {0, 1, 2, 3}) ==
            doctest::Approx(3221225472.0 / 4 / 82e9).epsilon(1e-6));
      CHECK(alone_from_1_to_4_gib(b, f, CollectiveOp::kSendRecv, {0, 2}) ==
            doctest::Approx(3221225472.0 / 82e9).epsilon(1e-6));
    }
  }
  SUBCASE("two GPUs and two NICs on one PCIe switch: each GPU leaves through its own NIC, as in a DGX") {
    // 2 nodes of 2 A100s (NVSwitch 100 GB/s); in each node both GPUs and both NICs on one PCIe switch (32 GB/s),
    // NIC i of both nodes on leaf i (25 GB/s, 20 at the A100 profile's 0.8), the leaves under one spine. GPU i takes
    // NIC i (nearest, ties in turn), so ring AllGather's 2 channels leave through different NICs: 2 x 20 = 40 GB/s
    // bus, from 1 to 4 GiB 3 GiB x 3/4 / 40e9 = 0.060398 s. Shortest paths alone picked a NIC by hash, and two
    // channels could share one (half the bus bandwidth; an explicit HGX H100 pair was 2x slow).
    Scenario sc = cluster_only(
        "nodes: 2 gpus_per_node: 2 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 100 "
        "nic_gbits_per_s_per_direction: 200 " +
            explicit_graph(
                {"g0 GPU", "g1 GPU", "g2 GPU", "g3 GPU", "s0 NVSWITCH node: 0", "s1 NVSWITCH node: 1",
                 "p0 PCIE_SWITCH node: 0", "p1 PCIE_SWITCH node: 1", "n00 NIC node: 0", "n01 NIC node: 0",
                 "n10 NIC node: 1", "n11 NIC node: 1", "l0 LEAF", "l1 LEAF", "sp SPINE"},
                {"g0 s0 NVLINK 100", "g1 s0 NVLINK 100", "g2 s1 NVLINK 100", "g3 s1 NVLINK 100", "g0 p0 PCIE 32",
                 "g1 p0 PCIE 32", "g2 p1 PCIE 32", "g3 p1 PCIE 32", "p0 n00 PCIE 32", "p0 n01 PCIE 32",
                 "p1 n10 PCIE 32", "p1 n11 PCIE 32", "n00 l0 NETWORK 25", "n10 l0 NETWORK 25", "n01 l1 NETWORK 25",
                 "n11 l1 NETWORK 25", "l0 sp NETWORK 100", "l1 sp NETWORK 100"}),
        "a100-sxm4-80gb");
    sc.nccl.algorithm = Algorithm::kRing;
    sc.nccl.protocol = Protocol::kSimple;
    for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
      CAPTURE(static_cast<int>(f));
      CHECK(alone_from_1_to_4_gib(sc, f, CollectiveOp::kAllGather, {0, 1, 2, 3}) ==
            doctest::Approx(3221225472.0 * 0.75 / 40e9).epsilon(1e-6));
    }
  }
  SUBCASE("NVLS over two NVSwitches: the one flow takes one switch's link per edge") {
    // 4 H100s, each with 50 GB/s to each of two NVSwitches (the scalar: 100). NVLS AllReduce is one flow of
    // S(1 + 1/n) around the communicator, each edge routed through one switch, so a GPU's busiest link carries
    // one edge at 50 x 0.82 = 41 GB/s: min(308 NVLS rate, 82 scalar, 41) = 41 GB/s, from 1 to 4 GiB
    // 3 GiB x 5/4 / 41e9 = 0.098208 s. The closed form took the scalar's 82 GB/s (half FLOW's time).
    std::string text =
        "nodes: 1 gpus_per_node: 4 gpu: \"H100-SXM5-80GB\" nvlink_gbytes_per_s_per_direction: 100 "
        "nic_gbits_per_s_per_direction: 400 vertices { name: \"s0\" kind: NVSWITCH } "
        "vertices { name: \"s1\" kind: NVSWITCH } ";
    for (int g = 0; g < 4; ++g) {
      const std::string name = "g" + std::to_string(g);
      text += "vertices { name: \"" + name + "\" kind: GPU } ";
      for (const char* sw : {"s0", "s1"})
        text += "links { from: \"" + name + "\" to: \"" + sw + "\" kind: NVLINK gbytes_per_s_per_direction: 50 } ";
    }
    Scenario sc = cluster_only(text, "h100-sxm5-80gb");
    sc.nccl.algorithm = Algorithm::kNvls;
    for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
      CAPTURE(static_cast<int>(f));
      CHECK(alone_from_1_to_4_gib(sc, f, CollectiveOp::kAllReduce, {0, 1, 2, 3}) ==
            doctest::Approx(3221225472.0 * 1.25 / 41e9).epsilon(1e-6));
    }
  }
  SUBCASE("two nodes under a thin spine: the routes spread over both spines (adaptive routing)") {
    // 2 nodes of 2 A100s on an NVSwitch (100 GB/s), each node's GPUs sharing one NIC behind a PCIe switch (32
    // GB/s), the NICs on leaves l0 and l1 (25 GB/s), the leaves joined by 2 spines at 5 GB/s each. At the A100
    // profile's network_bus_efficiency 0.8 the spines carry 2 x 5 x 0.8 = 8 GB/s each way. Send/Recv g0 -> g3:
    // 3 GiB / 8e9 = 0.402653 s; ring AllReduce (2 channels, each crossing the spines once each way with
    // S x 2(n - 1)/n / 2): 3 GiB x 1.5 / 8e9 = 0.603980 s. Before, the closed form saw only the scalar 200 Gbit/s
    // NIC.
    Scenario sc = cluster_only(
        "nodes: 2 gpus_per_node: 2 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 100 "
        "nic_gbits_per_s_per_direction: 200 " +
            explicit_graph({"g0 GPU", "g1 GPU", "g2 GPU", "g3 GPU", "s0 NVSWITCH node: 0", "s1 NVSWITCH node: 1",
                            "p0 PCIE_SWITCH node: 0", "p1 PCIE_SWITCH node: 1", "n0 NIC node: 0", "n1 NIC node: 1",
                            "l0 LEAF", "l1 LEAF", "sp0 SPINE", "sp1 SPINE"},
                           {"g0 s0 NVLINK 100", "g1 s0 NVLINK 100", "g2 s1 NVLINK 100", "g3 s1 NVLINK 100",
                            "g0 p0 PCIE 32", "g1 p0 PCIE 32", "g2 p1 PCIE 32", "g3 p1 PCIE 32", "p0 n0 PCIE 32",
                            "p1 n1 PCIE 32", "n0 l0 NETWORK 25", "n1 l1 NETWORK 25", "l0 sp0 NETWORK 5",
                            "l0 sp1 NETWORK 5", "l1 sp0 NETWORK 5", "l1 sp1 NETWORK 5"}),
        "a100-sxm4-80gb");
    sc.nccl.algorithm = Algorithm::kRing;
    sc.nccl.protocol = Protocol::kSimple;
    for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
      CAPTURE(static_cast<int>(f));
      CHECK(alone_from_1_to_4_gib(sc, f, CollectiveOp::kSendRecv, {0, 3}) ==
            doctest::Approx(3221225472.0 / 8e9).epsilon(1e-6));
      CHECK(alone_from_1_to_4_gib(sc, f, CollectiveOp::kAllReduce, {0, 1, 2, 3}) ==
            doctest::Approx(3221225472.0 * 1.5 / 8e9).epsilon(1e-6));
    }
  }
}

TEST_CASE("run_collective refuses a communicator without GPUs instead of waiting for ever") {
  Scenario sc = cluster_only("node_preset: \"dgx-a100\" nodes: 1", "a100-sxm4-80gb");
  for (Fidelity f : {Fidelity::kAnalytical, Fidelity::kFlow}) {
    sc.fidelity = f;
    CHECK_THROWS_AS(run_collective(sc, CollectiveRequest{CollectiveOp::kAllReduce, {}, MiB(1), 0}),
                    std::invalid_argument);
  }
}

TEST_CASE("ring and chain steps pay the cluster's hop latencies, alike at both fidelities") {
  // 2 DGX H100, 16 GPUs, network_hop_latency_us 100, forced ring. A chunk crosses one edge per step; of the
  // ring's 16 edges 2 are network hops. AllReduce: 2·15 = 30 steps · 2/16 · 100 µs = 375 µs more; AllGather:
  // 15 · 2/16 · 100 = 187.5 µs; Broadcast down a chain of 15 edges, one of them a network hop: 100 µs. Before,
  // ANALYTICAL charged NCCL's 2(D − 1) = 2 network steps (200 µs) and FLOW a chain's n = 16 steps over 15 edges.
  const std::string nodes = "node_preset: \"dgx-h100\" nodes: 2";
  Scenario plain = cluster_only(nodes, "h100-sxm5-80gb");
  Scenario slow = cluster_only(nodes + " network_hop_latency_us: 100", "h100-sxm5-80gb");
  plain.nccl.algorithm = slow.nccl.algorithm = Algorithm::kRing;
  for (Fidelity f : {Fidelity::kFlow, Fidelity::kAnalytical}) {
    CAPTURE(static_cast<int>(f));
    auto extra = [&](CollectiveOp op) {
      return (collective_seconds(slow, f, MiB(1), op) - collective_seconds(plain, f, MiB(1), op)) * 1e6;
    };
    CHECK(extra(CollectiveOp::kAllReduce) == doctest::Approx(375).epsilon(1e-6));
    CHECK(extra(CollectiveOp::kAllGather) == doctest::Approx(187.5).epsilon(1e-6));
    CHECK(extra(CollectiveOp::kBroadcast) == doctest::Approx(100).epsilon(1e-6));
  }
}

TEST_CASE("contention-free PAT AllGather (one GPU per node): FLOW agrees with ANALYTICAL within 1% from 1 MiB") {
  // 16 nodes x 1 GPU: PAT is NCCL's choice up to ~9.8 MB (test_nccl_model.cpp); both fidelities move (n - 1)/n x S
  // through each NIC at 0.75 of its rate, FLOW as flows on the routed links.
  const Scenario sc = cluster_only(
      "nodes: 16 gpus_per_node: 1 gpu: \"H100-SXM5-80GB\" nvlink_gbytes_per_s_per_direction: 450 "
      "nic_gbits_per_s_per_direction: 400",
      "h100-sxm5-80gb");
  for (double mib : {1.0, 4.0, 8.0}) {
    CAPTURE(mib);
    const double analytical = collective_seconds(sc, Fidelity::kAnalytical, MiB(mib), CollectiveOp::kAllGather);
    const double flow = collective_seconds(sc, Fidelity::kFlow, MiB(mib), CollectiveOp::kAllGather);
    CHECK(flow == doctest::Approx(analytical).epsilon(0.01));
  }
}

TEST_CASE("PAT at FLOW fidelity: its far rounds load an oversubscribed spine, the ring's edges do not") {
  // 16 nodes x 1 GPU in a two-level Clos of radix-9 switches at 8:1: 2 leaves of 8 NICs, one 400 Gb/s uplink each,
  // so 50 GB/s per direction between the halves (x 0.85, the network efficiency FLOW applies to every link). PAT
  // sends farthest first: round k carries 2^(k-1) shards of S/16 a distance of 16/2^k; the ranks whose peer is in
  // the other half are 8, 4, 2 and 1 of the 16 in rounds 1-4, so S/2 per direction crosses in each round, 2S in
  // all. FLOW carries PAT's 0.75 efficiency as 1/0.75 more bytes on the wire, so 1 GiB takes 2 x 2^30 / 0.75 /
  // 42.5e9 = 67.37 ms, where a 1:1 fabric takes the NICs' 15/16 S / (0.75 x 42.5e9) = 31.58 ms.
  auto flow_seconds = [](const std::string& fabric) {
    Scenario sc = cluster_only(
        "nodes: 16 gpus_per_node: 1 gpu: \"H100-SXM5-80GB\" nvlink_gbytes_per_s_per_direction: 450 "
        "nic_gbits_per_s_per_direction: 400 " +
            fabric,
        "h100-sxm5-80gb");
    sc.nccl.algorithm = Algorithm::kPat;
    return collective_seconds(sc, Fidelity::kFlow, GiB(1), CollectiveOp::kAllGather);
  };
  const double blocking = flow_seconds("fabric { kind: CLOS_TWO_LEVEL oversubscription: 8 switch_radix: 9 }");
  const double full = flow_seconds("");
  CHECK(full == doctest::Approx(1073741824.0 * 15 / 16 / 31.875e9).epsilon(0.01));
  CHECK(blocking == doctest::Approx(2 * 1073741824.0 / 0.75 / 42.5e9).epsilon(0.01));
}

TEST_CASE("NCCL's double binary tree: in-order trees keep FLOW at ANALYTICAL's time on a large rail fabric") {
  // ncclGetBtree over 8 domains: 0 - 4, 4 - 2 and 6, 2 - 1 and 3, 6 - 5 and 7 (parents 2^k away); tree 1 mirrors it
  // (domain r as 7 − r): 7 - 3, 3 - 5 and 1, 5 - 6 and 4, 1 - 2 and 0. On an odd count tree 1 is tree 0 shifted by
  // one: 5 domains, tree 0 0 - 4 (4's lowest bit 4: (4 ^ 4) | 8 = 8 is past the end, so 0), 4 - 2, 2 - 1 and 3;
  // tree 1 1 - 0, 0 - 3, 3 - 2 and 4.
  const std::uint32_t t0[] = {8, 2, 4, 2, 0, 6, 4, 6}, t1[] = {1, 3, 1, 7, 5, 3, 5, 8};
  for (std::uint32_t i = 0; i < 8; ++i) {
    CAPTURE(i);
    CHECK(tree_parent(0, i, 8) == t0[i]);
    CHECK(tree_parent(1, i, 8) == t1[i]);
  }
  const std::uint32_t o0[] = {5, 2, 4, 2, 0}, o1[] = {1, 5, 3, 0, 3};
  for (std::uint32_t i = 0; i < 5; ++i) {
    CAPTURE(i);
    CHECK(tree_parent(0, i, 5) == o0[i]);
    CHECK(tree_parent(1, i, 5) == o1[i]);
  }
  // 64 DGX A100 nodes on a rail-optimised fat tree of radix-64 switches (32 nodes per rail leaf, 2 leaves per rail).
  // A heap-shaped tree put the parents of domains 32..63 in 15..31, 64 edges across the spines sharing a few
  // uplinks, and FLOW ran 2.1x ANALYTICAL's time; NCCL's tree crosses between the two leaves 4 times.
  Scenario sc = cluster_only("node_preset: \"dgx-a100\" nodes: 64 fabric { switch_radix: 64 }", "a100-sxm4-80gb");
  sc.nccl.algorithm = Algorithm::kTree;
  const double flow = collective_seconds(sc, Fidelity::kFlow, MiB(100), CollectiveOp::kAllReduce);
  const double analytical = collective_seconds(sc, Fidelity::kAnalytical, MiB(100), CollectiveOp::kAllReduce);
  CHECK(flow == doctest::Approx(analytical).epsilon(0.01));
}

TEST_CASE(
    "fabric switch latency: rings, trees and point-to-point pay each switch on their routes, at both fidelities") {
  // 16 DGX A100 nodes under one leaf per rail (the preset's radix-40 QM8790: 20 nodes per leaf), switch_latency_us
  // 50: every network edge crosses 1 switch. Ring AllReduce of 128 ranks: 2·127 = 254 steps, 16 of the 128 edges
  // network ones: 254·16/128 = 31.75 network steps · 50 µs = 1587.5 µs more. Trees over 16 domains: depth 4
  // (0 - 8 - 4 - 2 - 1), up and down: 2·4·50 = 400 µs more. 80 nodes (640 ranks, 4 leaves per rail): the ring's
  // edges between nodes 19 - 20, 39 - 40 and 59 - 60 and the closing 79 - 0 go through a spine (3 switches), the
  // other 76 of the 80 network edges stay under a leaf: 2·639·80/640 = 159.75 network steps at (76 + 4·3)/80
  // switches · 50 µs = 8786.25 µs more. Send/Recv between nodes 0 and 40 (leaves 0 and 2): 3 switches, 150 µs.
  // The FLOW routes charge the same.
  const auto extra = [](std::uint32_t nodes, Algorithm a, CollectiveOp op, Fidelity f,
                        std::vector<std::uint32_t> gpus) {
    const std::string cluster = "node_preset: \"dgx-a100\" nodes: " + std::to_string(nodes);
    Scenario plain = cluster_only(cluster, "a100-sxm4-80gb");
    Scenario slow = cluster_only(cluster + " fabric { switch_latency_us: 50 }", "a100-sxm4-80gb");
    plain.nccl.algorithm = slow.nccl.algorithm = a;
    if (a != Algorithm::kPointToPoint) plain.nccl.protocol = slow.nccl.protocol = Protocol::kSimple;  // one protocol
    return (collective_seconds(slow, f, MiB(1), op, gpus) - collective_seconds(plain, f, MiB(1), op, gpus)) * 1e6;
  };
  for (Fidelity f : {Fidelity::kFlow, Fidelity::kAnalytical}) {
    CAPTURE(static_cast<int>(f));
    CHECK(extra(16, Algorithm::kRing, CollectiveOp::kAllReduce, f, {}) == doctest::Approx(1587.5).epsilon(1e-6));
    CHECK(extra(16, Algorithm::kTree, CollectiveOp::kAllReduce, f, {}) == doctest::Approx(400).epsilon(1e-6));
    CHECK(extra(80, Algorithm::kRing, CollectiveOp::kAllReduce, f, {}) == doctest::Approx(8786.25).epsilon(1e-6));
    CHECK(extra(80, Algorithm::kPointToPoint, CollectiveOp::kSendRecv, f, {0, 320}) ==
          doctest::Approx(150).epsilon(1e-6));
  }
}

TEST_CASE("oversubscribed leaves: ANALYTICAL bounds rings, trees and AlltoAll by the leaf uplinks, FLOW is no faster") {
  // DGX H100 (8 GPUs, 8 NICs of 400 Gb/s = 50 GB/s; fabric links the same), H100 profile network_bus_efficiency
  // 0.85: B = 42.5 GB/s per link. Times are compared by their slope in the size (t(2S) − t(S)) / S, which the
  // latency terms leave out.
  const double B = 50e9 * 0.85;
  auto slope = [](const Scenario& sc, Fidelity f, CollectiveOp op, std::vector<std::uint32_t> gpus = {}) {
    return (collective_seconds(sc, f, GiB(2), op, gpus) - collective_seconds(sc, f, GiB(1), op, gpus)) / GiB(1).raw();
  };
  // 16 nodes on a 4:1 two-level Clos of radix 64: a leaf has u = floor(64·50/(50 + 4·50)) = 12 uplinks and
  // d = min(64 − 12, 4·12) = 48 downlinks, 6 nodes; leaves hold nodes 0-5, 6-11, 12-15. AlltoAll of all 128 GPUs:
  // each of leaf 0's 48 GPUs sends 80/128 of its buffer S to GPUs under other leaves: 30·S over 12·B.
  Scenario clos = cluster_only(
      "node_preset: \"dgx-h100\" nodes: 16 fabric { kind: CLOS_TWO_LEVEL oversubscription: 4 }", "h100-sxm5-80gb");
  CHECK(slope(clos, Fidelity::kAnalytical, CollectiveOp::kAllToAll) == doctest::Approx(30 / (12 * B)).epsilon(1e-9));
  CHECK(slope(clos, Fidelity::kFlow, CollectiveOp::kAllToAll) >= 30 / (12 * B) * 0.99);
  // The NIC alone would allow (128 − 8)/128 · S / B: 2.7 times less.
  CHECK(30 / (12 * B) > 2.6 * (120.0 / 128) / B);
  // 2 nodes on a 2:1 Clos of radix 16: u = floor(16·50/(50 + 2·50)) = 5 uplinks, d = min(11, 10) = 10 downlinks,
  // one node per leaf. A ring AllReduce over the 16 GPUs runs 8 channels, each with one edge from node 0 to node 1
  // and one back: 8 flows leave each leaf over 5 uplinks, 5·B/8 each at best, so the ring's bus bandwidth is
  // 8 · 5B/8 = 5B (the 8 NICs would give 8B): slope 2·15/16 / (5B).
  Scenario two = cluster_only(
      "node_preset: \"dgx-h100\" nodes: 2 fabric { kind: CLOS_TWO_LEVEL oversubscription: 2 switch_radix: 16 }",
      "h100-sxm5-80gb");
  two.nccl.algorithm = Algorithm::kRing;
  two.nccl.protocol = Protocol::kSimple;
  CHECK(slope(two, Fidelity::kAnalytical, CollectiveOp::kAllReduce) ==
        doctest::Approx(2 * 15.0 / 16 / (5 * B)).epsilon(1e-9));
  CHECK(slope(two, Fidelity::kFlow, CollectiveOp::kAllReduce) >= 2 * 15.0 / 16 / (5 * B) * 0.99);
  // Trees on the same 2 nodes: each of the two trees has one edge between the nodes and carries half the buffer
  // over it both ways, so S leaves each leaf (2 trees · S/2, split over the 8 channels): S / (5B), slope 1/(5B),
  // where the 8 NICs alone would carry it in S / (8B).
  two.nccl.algorithm = Algorithm::kTree;
  CHECK(slope(two, Fidelity::kAnalytical, CollectiveOp::kAllReduce) == doctest::Approx(1 / (5 * B)).epsilon(1e-9));
  // A non-blocking fabric is not bounded: 32 uplinks per leaf.
  Scenario open = cluster_only(
      "node_preset: \"dgx-h100\" nodes: 16 fabric { kind: CLOS_TWO_LEVEL oversubscription: 1 }", "h100-sxm5-80gb");
  CHECK(slope(open, Fidelity::kAnalytical, CollectiveOp::kAllToAll) == doctest::Approx(120.0 / 128 / B).epsilon(1e-9));
}

TEST_CASE("FLOW: a collective's achieved bus bandwidth is added to its label only when a trace records it") {
  // Without a trace sink nothing reads the argument, and appending it grew every collective's argument vector
  // (2 x its 8 arguments of 72 B each): 3.3 GB more on the 144-GPU gb200-nvl72-cp2 study. With a sink the label
  // gets it, in room reserved when the call was added (capacity = size, no regrowth).
  struct Count : sim::TraceSink {
    int tasks = 0;
    void on_task(const sim::TaskRecord&) override { ++tasks; }
  };
  const Scenario base = cluster_only(
      "nodes: 1 gpus_per_node: 8 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300 "
      "nic_gbits_per_s_per_direction: 200",
      "a100-sxm4-80gb");
  for (const bool traced : {false, true}) {
    CAPTURE(traced);
    Scenario sc = base;
    sc.fidelity = Fidelity::kFlow;
    sim::Simulation s;
    Count sink;
    if (traced) s.add_sink(&sink);
    NetworkModel net(s, sc);
    CollectiveEngine engine(s, sc, &net);
    sim::TaskGraph g;
    std::vector<sim::StreamId> lanes;
    std::vector<std::uint32_t> gpus(8);
    std::iota(gpus.begin(), gpus.end(), 0u);
    for (std::uint32_t gpu : gpus) lanes.push_back(g.add_stream(gpu, "comm"));
    const sim::TaskId id =
        engine.add(g, "c", "comm", CollectiveRequest{CollectiveOp::kAllReduce, gpus, MiB(64), 0}, lanes, {});
    const std::size_t args_before = g.label(id).args.size();
    sim::Executor ex(s, g, &engine);
    ex.start();
    s.run();
    ex.finish();
    const auto& args = g.label(id).args;
    const bool has_achieved =
        std::any_of(args.begin(), args.end(), [](const sim::TaskArg& a) { return a.key == "bus_bandwidth_GBps"; });
    CHECK(has_achieved == traced);
    CHECK(args.size() == args_before + (traced ? 1 : 0));
    CHECK(args.capacity() == args.size());
    CHECK(sink.tasks == (traced ? 8 : 0));  // one record per member GPU's stream
  }
}

TEST_CASE("full-bisection fat trees routed by destination: FLOW agrees with ANALYTICAL across spines and cores") {
  // 16 DGX H100 nodes under 16-port switches at 1:1, so leaves hold 1 node (two- and three-level Clos) or 8 NICs
  // of one rail (rail-optimised), and rings, AllGather and AlltoAll cross spines (and cores). The switches
  // route by destination (D-mod-k, static tables): the edges leaving a leaf go to consecutive NIC numbers and take
  // different uplinks, so no fabric link carries more than the closed form spreads evenly, and the two
  // fidelities give the same time. With the ECMP hash the two-level Clos's ring AllReduce on nodes 0 and 1 is
  // about 3x slower at FLOW (hash collisions on leaf uplinks; the differential audit's 23,870 against 71,241 us
  // at 4 GiB), so the hash is contention and the test would fail with it. D-mod-k is collision-free for these
  // shift-like patterns, not for every pattern: with 2 nodes under a leaf (radix 32) a tree's edges to parents of
  // the same parity share an uplink (FLOW 1.25x ANALYTICAL at 4 GiB; the hash 2.49x), and an AlltoAll over
  // unevenly filled nodes (0-3,8,16-17) sends 8/7 S through the uplink its two one-rank nodes' NICs share (1.33x).
  // Static routing does that on a real fabric too; those cases are not in this test (adaptive routing, the next
  // test, removes the collisions).
  const char* fabrics[] = {"kind: CLOS_TWO_LEVEL switch_radix: 16", "kind: CLOS_THREE_LEVEL switch_radix: 16",
                           "switch_radix: 16"};
  std::vector<std::uint32_t> two_nodes(16);
  std::iota(two_nodes.begin(), two_nodes.end(), 0u);
  for (const char* fabric : fabrics) {
    Scenario sc = cluster_only(
        "node_preset: \"dgx-h100\" nodes: 16 fabric { " + std::string(fabric) + " routing: DESTINATION_MOD_K }",
        "h100-sxm5-80gb");
    struct Run {
      Algorithm algorithm;
      CollectiveOp op;
      std::vector<std::uint32_t> gpus;
    };
    const Run runs[] = {{Algorithm::kRing, CollectiveOp::kAllReduce, two_nodes},
                        {Algorithm::kRing, CollectiveOp::kAllReduce, {}},
                        {Algorithm::kRing, CollectiveOp::kAllGather, {}},
                        {Algorithm::kTree, CollectiveOp::kAllReduce, {}},
                        {Algorithm::kPointToPoint, CollectiveOp::kAllToAll, {}}};
    for (const Run& run : runs) {
      sc.nccl.algorithm = run.algorithm;
      sc.nccl.protocol = Protocol::kSimple;
      for (double mib : {1.0, 64.0, 1024.0}) {
        CAPTURE(std::string(fabric));
        CAPTURE(to_string(run.op));
        CAPTURE(to_string(run.algorithm));
        CAPTURE(run.gpus.size());
        CAPTURE(mib);
        const double flow = collective_seconds(sc, Fidelity::kFlow, MiB(mib), run.op, run.gpus);
        const double analytical = collective_seconds(sc, Fidelity::kAnalytical, MiB(mib), run.op, run.gpus);
        CHECK(flow == doctest::Approx(analytical).epsilon(0.05));
      }
    }
  }
  Scenario hashed = cluster_only(
      "node_preset: \"dgx-h100\" nodes: 16 fabric { kind: CLOS_TWO_LEVEL switch_radix: 16 routing: ECMP_HASH }",
      "h100-sxm5-80gb");
  hashed.nccl.algorithm = Algorithm::kRing;
  hashed.nccl.protocol = Protocol::kSimple;
  const double flow = collective_seconds(hashed, Fidelity::kFlow, GiB(4), CollectiveOp::kAllReduce, two_nodes);
  const double analytical =
      collective_seconds(hashed, Fidelity::kAnalytical, GiB(4), CollectiveOp::kAllReduce, two_nodes);
  CHECK(flow > 2 * analytical);
}

TEST_CASE("adaptive routing: FLOW agrees with ANALYTICAL where static routing by destination collides") {
  // routing: ADAPTIVE spreads each flow evenly over its equal-cost paths (topology.h), so on a full-bisection fabric
  // no fabric link carries more than the busiest NIC, which is what ANALYTICAL charges. The cases are the
  // differential audit's, where D-mod-k puts two flows on one uplink. Times are t(4 GiB) - t(1 GiB), so the
  // latencies cancel; NIC 400 Gb/s = 50 GB/s x 0.85 = 42.5 GB/s.
  const double gib3 = 3.0 * 1073741824.0;
  auto span = [](const Scenario& sc, Fidelity f, CollectiveOp op, const std::vector<std::uint32_t>& gpus) {
    return collective_seconds(sc, f, GiB(4), op, gpus) - collective_seconds(sc, f, GiB(1), op, gpus);
  };
  SUBCASE("AlltoAll over unevenly filled nodes on a two-level Clos") {
    // 16 DGX H100, radix 16: one node per leaf, 8 uplinks. Ranks 0-3 (node 0), 8 (node 1), 16-17 (node 2): each
    // rank sends S/7 to each of the 6 others, and GPU 8, alone on its node, sends all 6 S/7 through its one NIC:
    // 3 GiB x 6/7 / 42.5 GB/s = 64,977 us, at ANALYTICAL and adaptive FLOW alike. By destination, the flows into
    // GPUs 8 and 16 (NICs numbered 8 and 16, both 0 mod 8) leave leaf 0 on one uplink: node 0's 4 ranks send
    // 4 S/7 to each, 8 S/7 on that link, 4/3 of the NIC's 6 S/7.
    const std::vector<std::uint32_t> gpus = {0, 1, 2, 3, 8, 16, 17};
    for (const char* routing : {"ADAPTIVE", "DESTINATION_MOD_K"}) {
      CAPTURE(routing);
      Scenario sc = cluster_only(
          "node_preset: \"dgx-h100\" nodes: 16 fabric { kind: CLOS_TWO_LEVEL switch_radix: 16 "
          "routing: " +
              std::string(routing) + " }",
          "h100-sxm5-80gb");
      sc.nccl.protocol = Protocol::kSimple;
      const double analytical = span(sc, Fidelity::kAnalytical, CollectiveOp::kAllToAll, gpus);
      const double flow = span(sc, Fidelity::kFlow, CollectiveOp::kAllToAll, gpus);
      CHECK(analytical == doctest::Approx(gib3 * 6 / 7 / 42.5e9).epsilon(0.001));
      const double links = std::string(routing) == "ADAPTIVE" ? 6.0 / 7 : 8.0 / 7;
      CHECK(flow == doctest::Approx(gib3 * links / 42.5e9).epsilon(0.001));
    }
  }
  // Adaptive FLOW within 1 % of ANALYTICAL; by destination FLOW above `collides` x ANALYTICAL.
  auto adaptive_agrees = [&](const std::string& nodes, const std::string& fabric, const char* profile,
                             std::optional<Algorithm> algorithm, double collides) {
    for (const char* routing : {"ADAPTIVE", "DESTINATION_MOD_K"}) {
      CAPTURE(routing);
      Scenario sc = cluster_only(nodes + " fabric { " + fabric + " routing: " + routing + " }", profile);
      sc.nccl.algorithm = algorithm;
      if (algorithm) sc.nccl.protocol = Protocol::kSimple;
      const double analytical = span(sc, Fidelity::kAnalytical, CollectiveOp::kAllReduce, {});
      const double flow = span(sc, Fidelity::kFlow, CollectiveOp::kAllReduce, {});
      if (std::string(routing) == "ADAPTIVE") {
        CHECK(flow == doctest::Approx(analytical).epsilon(0.01));
      } else {
        CHECK(flow > collides * analytical);
      }
    }
  };
  SUBCASE("NCCL's tree with two nodes under a leaf, three-level Clos") {
    // 32 DGX H100, radix 32: two nodes per leaf. NCCL's choice at 4 GiB is its tree. By destination a tree's edges
    // to parents of the same parity share an uplink: FLOW about 1.25x.
    adaptive_agrees("node_preset: \"dgx-h100\" nodes: 32", "kind: CLOS_THREE_LEVEL switch_radix: 32", "h100-sxm5-80gb",
                    std::nullopt, 1.2);
  }
  SUBCASE("hierarchical AllReduce on two GB200 NVL72 racks, three-level Clos of 16-port switches") {
    // 36 trays of 4 GPUs (4 NICs each), in-network reduction, NCCL_ALGO forced to hierarchical: by destination the
    // rails' flows collide on some spine links (FLOW about 1.09x).
    adaptive_agrees("node_preset: \"gb200-nvl72\" nodes: 36",
                    "kind: CLOS_THREE_LEVEL switch_radix: 16 in_network_reduction: true", "gb200",
                    Algorithm::kHierarchical, 1.05);
  }
}

TEST_CASE(
    "CollNet and hierarchical AllReduce on unevenly filled nodes: the emptiest node's NICs and the fullest "
    "node's NVLink bound both fidelities") {
  // 4 HGX H100 nodes with in-network reduction, communicator 0-7,8: node 0 holds 8 ranks, node 1 one.
  // NIC 400 Gb/s = 50 GB/s x 0.85 = 42.5 GB/s; NVLink 450 GB/s x 0.82 = 369 GB/s.
  // CollNet: node 1's only rank sends all of S into the network and gets it back through its one NIC:
  //   S / 42.5 GB/s; node 0's ranks send S/8 each, and its NVLink reduce-scatter and all-gather take
  //   2 x 7/8 x S / 369 GB/s less. So 3 GiB more bytes take 3 x 2^30 / 42.5e9 = 75,794 us.
  // Hierarchical: reduce-scatter and all-gather inside node 0 (2 x 7/8 / 369 GB/s per byte), then the ring of the
  //   shards across the 2 nodes, whose node-1 rank carries 2 x 1/2 x S through its NIC (1 / 42.5 GB/s per byte):
  //   3 x 2^30 x (1.75 / 369e9 + 1 / 42.5e9) = 15,277 + 75,794 = 91,071 us.
  // Before the change both fidelities used the average 4.5 ranks per node in part of the model (ANALYTICAL
  // 4x too fast for the hierarchical ring, FLOW's CollNet 8x too slow by routing node 0's 8 shards into node
  // 1's one NIC).
  Scenario sc =
      cluster_only("node_preset: \"hgx-h100\" nodes: 4 fabric { in_network_reduction: true }", "h100-sxm5-80gb");
  const std::vector<std::uint32_t> gpus = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  sc.nccl.protocol = Protocol::kSimple;
  const double gib3 = 3.0 * 1073741824.0;
  const std::pair<Algorithm, double> expected[] = {
      {Algorithm::kCollNet, gib3 / 42.5e9},
      {Algorithm::kHierarchical, gib3 * (1.75 / 369e9 + 1 / 42.5e9)},
  };
  for (const auto& [algorithm, seconds] : expected) {
    sc.nccl.algorithm = algorithm;
    for (Fidelity fidelity : {Fidelity::kAnalytical, Fidelity::kFlow}) {
      CAPTURE(to_string(algorithm));
      CAPTURE(fidelity == Fidelity::kFlow);
      const double t4 = collective_seconds(sc, fidelity, GiB(4), CollectiveOp::kAllReduce, gpus);
      const double t1 = collective_seconds(sc, fidelity, GiB(1), CollectiveOp::kAllReduce, gpus);
      CHECK(t4 - t1 == doctest::Approx(seconds).epsilon(0.01));
    }
  }
  // Hierarchical on 0-7,8-13 (8 + 6 ranks): L = 8 rings of S/8 across the nodes, ring j through rank j mod 6 of
  // node 1, so its ranks 0 and 1 carry 2 rings: 2 x 1/8 x 2 x 1/2 = 1/4 of S through their NICs, and
  // 3 x 2^30 x (1.75 / 369e9 + 0.25 / 42.5e9) = 15,277 + 18,948 = 34,225 us, at both fidelities.
  sc.nccl.algorithm = Algorithm::kHierarchical;
  const std::vector<std::uint32_t> eight_six = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  for (Fidelity fidelity : {Fidelity::kAnalytical, Fidelity::kFlow}) {
    CAPTURE(fidelity == Fidelity::kFlow);
    const double t4 = collective_seconds(sc, fidelity, GiB(4), CollectiveOp::kAllReduce, eight_six);
    const double t1 = collective_seconds(sc, fidelity, GiB(1), CollectiveOp::kAllReduce, eight_six);
    CHECK(t4 - t1 == doctest::Approx(gib3 * (1.75 / 369e9 + 0.25 / 42.5e9)).epsilon(0.01));
  }
  // The even layout 0-3,8-11 is unchanged: CollNet S / (4 x 42.5 GB/s) per byte, against the NVLink's
  // 369 x 4 / 6 = 246 GB/s: the NICs bind, 3 GiB / 170 GB/s = 18,948 us.
  sc.nccl.algorithm = Algorithm::kCollNet;
  const std::vector<std::uint32_t> even = {0, 1, 2, 3, 8, 9, 10, 11};
  for (Fidelity fidelity : {Fidelity::kAnalytical, Fidelity::kFlow}) {
    const double t4 = collective_seconds(sc, fidelity, GiB(4), CollectiveOp::kAllReduce, even);
    const double t1 = collective_seconds(sc, fidelity, GiB(1), CollectiveOp::kAllReduce, even);
    CHECK(t4 - t1 == doctest::Approx(gib3 / 170e9).epsilon(0.01));
  }
}
