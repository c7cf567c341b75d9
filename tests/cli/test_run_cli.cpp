// End-to-end tests of `clustersim run`: the binary as a user runs it.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_support.h"

namespace fs = std::filesystem;

namespace {

using Run = clustersim::testing::BinaryRun;
using clustersim::testing::json_number;
using clustersim::testing::RemoveOnExit;
using clustersim::testing::scratch_dir;
using clustersim::testing::slurp;

Run run(const std::string& args, const fs::path& dir) { return clustersim::testing::run_clustersim(args, dir); }

}  // namespace

TEST_CASE("clustersim run on the built-in default scenario prints the summary") {
  const fs::path dir = scratch_dir("default");
  const Run r = run("run", dir);
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  for (const char* s : {"iteration time", "tokens/s", "samples/s", "MFU", "compute", "exposed comm", "idle",
                        "optimizer steps", "micro-batch steps", "time to train", "GPU-hours", "a100-sxm4-80gb"})
    CHECK_MESSAGE(r.out.find(s) != std::string::npos, "summary lacks '" << s << "'");
  fs::remove_all(dir);
}

TEST_CASE("run: selective recompute's HFU says how it counts, and a short run's GPU-hours keep three digits") {
  const fs::path dir = scratch_dir("hfu-note");
  // The default scenario with recompute: SELECTIVE: its HFU counts the attention core's forward once more
  // (4·b·s²·h per layer), which the summary says beside Korthikanti et al.'s 12·b·s²·h.
  std::string text = slurp(std::string(CLUSTERSIM_SOURCE_DIR) + "/scenarios/default.textproto");
  const std::size_t at = text.find("ddp_bucket_mib: 25");
  REQUIRE(at != std::string::npos);
  text.replace(at, std::string("ddp_bucket_mib: 25").size(), "recompute: SELECTIVE");
  std::ofstream(dir / "sel.textproto") << text;
  const Run sel = run("run " + (dir / "sel.textproto").string(), dir);
  CHECK(sel.status == 0);
  CHECK(sel.out.find("selective recompute adds the attention core's forward, 4·b·s²·h FLOPs per layer;\n"
                     "                    Korthikanti et al.'s HFU formula") != std::string::npos);
  CHECK(run("run", dir).out.find("selective recompute adds") == std::string::npos);
  // 100 optimizer steps x 0.158825 s on 1 GPU = 15.88 s = 0.00441 GPU-hours (was printed as 0.0).
  const Run one = run("run scenarios/grad-accum-example/one-gpu.textproto", dir);
  CHECK(one.out.find("  GPU-hours         0.00441\n") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("run: a capacity factor that drops routed tokens is named in the MFU convention, text and JSON") {
  const fs::path dir = scratch_dir("mfu-dropped");
  // Mixtral at ep 8 with uniform routing (skew 0) and capacity factor 0.5: every expert takes half its even share,
  // so the experts compute 0.5 of the routed token copies (workloads::routed_fraction_computed), and the MFU's
  // model FLOPs count those; tokens/s counts every token.
  std::string text = slurp(std::string(CLUSTERSIM_SOURCE_DIR) + "/scenarios/mixtral-8x7b-ep/ep8.textproto");
  for (const auto& [from, to] : {std::pair{"moe_capacity_factor: 1.25", "moe_capacity_factor: 0.5"},
                                 std::pair{"moe_token_skew: 0.2", "moe_token_skew: 0"}}) {
    const std::size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, std::string_view(from).size(), to);
  }
  std::ofstream(dir / "dropping.textproto") << text;
  const Run r = run("run " + (dir / "dropping.textproto").string() + " --json " + (dir / "r.json").string(), dir);
  REQUIRE(r.status == 0);
  const std::string note = "; the experts' FLOPs count the 50.0 % of routed tokens the capacity factor keeps";
  CHECK(r.out.find(note) != std::string::npos);
  CHECK(slurp(dir / "r.json").find(note) != std::string::npos);
  // As shipped (capacity 1.25 above the busiest expert's 1.2 share) nothing is dropped, and nothing is said.
  CHECK(run("run scenarios/mixtral-8x7b-ep/ep8.textproto", dir).out.find("capacity factor keeps") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("the parallel line names the rank order the layout uses, cp and ep included") {
  // rank_layout.cpp: an unnamed cp goes right after tp, and the EP group is ep consecutive data-parallel ranks:
  // Megatron's tp-cp-ep-dp-pp with the degrees that are 1 left out of the name.
  const fs::path dir = scratch_dir("rank-order");
  const Run cp = run("run scenarios/long-context-cp.textproto", dir);  // tp 2 x cp 4 x dp 2, order unset
  CHECK(cp.status == 0);
  CHECK(cp.out.find("rank order tp-cp-dp-pp;") != std::string::npos);
  const Run ep = run("run scenarios/mixtral-8x7b-ep/ep4.textproto", dir);  // tp 2 x dp 8, ep 4 within dp
  CHECK(ep.status == 0);
  CHECK(ep.out.find("rank order tp-ep-dp-pp;") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("a layout whose TP groups leave NVLink says so under the parallel line") {
  // 2 nodes of 8 A100s (one NVLink domain each). tp 8 x dp 2 in the default order tp-dp-pp: ranks 0-7 and 8-15
  // are the groups, one node each: no note. tp 16: its one group spans both nodes: "1 of 1". tp 8 x dp 2 in the
  // order dp-tp-pp (dp innermost, rank = dp + 2·tp): the groups are the even and the odd ranks, both on both
  // nodes: "2 of 2".
  const fs::path dir = scratch_dir("tp-span");
  auto summary = [&](const std::string& parallel, const std::string& name) {
    std::ofstream(dir / name) << "cluster { nodes: 2 gpus_per_node: 8 gpu: \"A100-SXM4-80GB\" "
                                 "nvlink_gbytes_per_s_per_direction: 300 nic_gbits_per_s_per_direction: 200 }\n"
                                 "profile: \"a100-sxm4-80gb\"\nfidelity: ANALYTICAL\n"
                                 "model { layers: 2 hidden: 1024 heads: 16 vocab: 32000 seq_len: 1024 }\n"
                                 "parallel { "
                              << parallel << " micro_batch: 1 grad_accum: 2 }\ntraining { samples: 1000 }\n";
    const Run r = run("run " + (dir / name).string(), dir);
    REQUIRE(r.status == 0);
    return r.out;
  };
  CHECK(summary("tp: 8 dp: 2", "node.textproto").find("NVLink domain") == std::string::npos);
  CHECK(summary("tp: 16 dp: 1", "wide.textproto")
            .find("  note       1 of 1 TP groups span more than one NVLink domain: their collectives cross the "
                  "network\n") != std::string::npos);
  CHECK(summary("tp: 8 dp: 2 rank_order: \"dp-tp-pp\"", "order.textproto")
            .find("  note       2 of 2 TP groups span more than one NVLink domain") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("--json of an FP8 run carries the MFU against the BF16 peak the text prints") {
  // H100: FP8 dense peak 1978.9 TFLOP/s, BF16 989.4: the same model FLOPs over half the peak, mfu x 1978.9 / 989.4.
  const fs::path dir = scratch_dir("json-fp8");
  const Run r = run("run scenarios/fp8-vs-bf16/llama2-7b-fp8.textproto --json " + (dir / "r.json").string(), dir);
  REQUIRE(r.status == 0);
  const std::string j = slurp(dir / "r.json");
  CHECK(json_number(j, "mfu_bf16_peak") == doctest::Approx(json_number(j, "mfu") * 1978.9 / 989.4).epsilon(1e-9));
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %%", 100 * json_number(j, "mfu_bf16_peak"));
  CHECK(r.out.find(std::string("  MFU (BF16 peak)   ") + text) != std::string::npos);
  // A BF16 run has no such key: its MFU is already against the BF16 peak.
  const Run b = run("run scenarios/fp8-vs-bf16/llama2-7b-bf16.textproto --json " + (dir / "b.json").string(), dir);
  REQUIRE(b.status == 0);
  CHECK(slurp(dir / "b.json").find("mfu_bf16_peak") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("--json has the documented keys and the training identity holds") {
  const fs::path dir = scratch_dir("json");
  const Run r = run("run scenarios/grad-accum-example/one-gpu.textproto --json " + (dir / "r.json").string(), dir);
  REQUIRE(r.status == 0);
  const std::string j = slurp(dir / "r.json");
  for (const char* key :
       {"iteration_time_s", "tokens_per_s", "mfu", "breakdown_s", "compute", "exposed_comm", "exposed_dp",
        "compute_eager_s", "training", "optimizer_steps", "micro_batch_steps", "time_to_train_s", "gpu_hours"})
    CHECK_MESSAGE(j.find(std::string("\"") + key + "\"") != std::string::npos, "JSON lacks " << key);
  // 1000 samples · 1 epoch / global batch 10 = 100 optimizer steps; × accumulation 2 = 200 micro-batch steps.
  CHECK(json_number(j, "optimizer_steps") == 100);
  CHECK(json_number(j, "micro_batch_steps") == 200);
  const double it = json_number(j, "iteration_time_s");
  CHECK(it > 0);
  // DDP under BF16 autocast: part of the compute is eager mixed-precision work, and the summary says so.
  CHECK(json_number(j, "compute_eager_s") > 0);
  CHECK(json_number(j, "compute_eager_s") < json_number(j, "compute"));
  CHECK(r.out.find("    of which eager  ") != std::string::npos);
  // The input side's assumptions under the (tiny) input stall: micro-batch 5, s = 1024: 5·1025·8 = 41,000 B of
  // int64 tokens per copy at the default 24 GB/s (1.7 µs), no loader rate.
  CHECK(r.out.find("    input model     no loader rate (the data loader is never the bottleneck)\n"
                   "                    host-to-device copy 41,000 B per micro-batch (int64 tokens) at 24 GB/s") !=
        std::string::npos);
  CHECK(json_number(j, "time_to_train_s") == doctest::Approx(100 * it).epsilon(1e-12));
  CHECK(json_number(j, "gpu_hours") == doctest::Approx(100 * it / 3600).epsilon(1e-12));
  // One GPU: nothing to communicate.
  CHECK(json_number(j, "exposed_comm") == 0);
  // Two epochs of 1005 samples: DDP reads through a PyTorch DataLoader, which ends each epoch with a partial
  // batch of 5, so 2 · ⌈1005 / 10⌉ = 202 optimizer steps (not ⌈2 · 1005 / 10⌉ = 201), and the summary says why.
  std::string text = slurp(fs::path(CLUSTERSIM_SOURCE_DIR) / "scenarios/grad-accum-example/one-gpu.textproto");
  text.replace(text.find("samples: 1000"), 13, "samples: 1005");
  text.replace(text.find("epochs: 1"), 9, "epochs: 2");
  std::ofstream(dir / "two-epochs.textproto") << text;
  const Run e = run("run " + (dir / "two-epochs.textproto").string() + " --json " + (dir / "e.json").string(), dir);
  REQUIRE(e.status == 0);
  CHECK(json_number(slurp(dir / "e.json"), "optimizer_steps") == 202);
  CHECK(e.out.find("= 201, rounded up per epoch: a PyTorch DataLoader ends each epoch") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("same scenario twice gives byte-identical JSON and trace") {
  const fs::path dir = scratch_dir("determinism");
  const std::string a = "--json " + (dir / "a.json").string() + " --trace " + (dir / "a.trace.json").string();
  const std::string b = "--json " + (dir / "b.json").string() + " --trace " + (dir / "b.trace.json").string();
  REQUIRE(run("run " + a, dir).status == 0);
  REQUIRE(run("run " + b, dir).status == 0);
  CHECK(slurp(dir / "a.json") == slurp(dir / "b.json"));
  const std::string trace = slurp(dir / "a.trace.json");
  CHECK(trace == slurp(dir / "b.trace.json"));
  // Chrome trace-event format: a process per GPU (16), a thread per stream, complete events with args.
  CHECK(trace.rfind("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 0) == 0);
  CHECK(trace.find("\"name\":\"process_name\",\"pid\":15,") != std::string::npos);
  CHECK(trace.find("\"args\":{\"name\":\"dp-comm\"}") != std::string::npos);
  CHECK(trace.find("\"ph\":\"X\",\"name\":\"L0.qkv.fwd\"") != std::string::npos);
  CHECK(trace.find("\"flops\":") != std::string::npos);
  CHECK(trace.find("\"name\":\"allreduce.bucket0\"") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("trace at FLOW fidelity: a collective shows the bus bandwidth it achieved beside the contention-free one") {
  // Two DDP jobs whose gradient AllReduces share the leaf uplinks of a 2:1 Clos: their last bucket takes longer
  // than alone, so the achieved bus bandwidth, nccl-tests' 2(n - 1)/n · bytes / time = 2 · 7/8 · bytes / dur for
  // n = 8, is below the contention-free one the plan predicts (it was the only one the trace showed). The bucket
  // runs NCCL's tree on 4 channels per job, so 8 flows leave each leaf (one per channel and job). Routed
  // adaptively (the default), each is spread over the leaf's 5 uplinks, 8/5 of a flow on each, so each flow gets
  // 5/8 of an uplink, 5/8 of the NIC rate (uplinks run at the NIC's 400 Gb/s): the bandwidth time grows 8/5-fold,
  // the latency does not, and the achieved bus bandwidth is a little above 5/8 of the contention-free one. (By
  // destination, uplinks (8 + c) mod 5 = 0, 3 and 4 carry a flow of each job: half the NIC rate, a little above
  // half the bus bandwidth.)
  const fs::path dir = scratch_dir("trace-busbw");
  const RemoveOnExit cleanup{dir};
  REQUIRE(run("run scenarios/multi-job/two-jobs-sharing-spines.textproto --trace " + (dir / "t.json").string(), dir)
              .status == 0);
  const std::string trace = slurp(dir / "t.json");
  const std::size_t at = trace.find("\"name\":\"allreduce.bucket72\"");
  REQUIRE(at != std::string::npos);
  const std::string event = trace.substr(at, trace.find('\n', at) - at);
  const double dur_us = json_number(event, "dur"), bytes = json_number(event, "bytes");
  CHECK(json_number(event, "ranks") == 8);
  const double achieved = json_number(event, "bus_bandwidth_GBps");
  CHECK(achieved == doctest::Approx(2.0 * 7 / 8 * bytes / dur_us / 1e3).epsilon(1e-6));
  const double contention_free = json_number(event, "contention_free_bus_bandwidth_GBps");
  CHECK(json_number(event, "channels") == 4);
  CHECK(achieved > 5.0 / 8 * contention_free);
  CHECK(achieved < 0.65 * contention_free);
  // With several jobs each GPU's process names its job (a on GPUs 0-3 and 8-11, b on the rest).
  CHECK(trace.find("\"args\":{\"name\":\"GPU 8 (node 1, local 0, job a)\"}") != std::string::npos);
  CHECK(trace.find("\"args\":{\"name\":\"GPU 4 (node 0, local 4, job b)\"}") != std::string::npos);
}

TEST_CASE("--trace-gpus keeps the listed GPUs' events only, and pipeline sends name their micro-batch and GPUs") {
  // The default scenario (16 GPUs at FLOW fidelity): GPUs 0, 1 and 15 keep every event they had in the full
  // trace, and no other GPU has a process or an event; the link counters stay.
  const fs::path dir = scratch_dir("trace-gpus");
  const RemoveOnExit cleanup{dir};
  REQUIRE(run("run --trace " + (dir / "all.json").string(), dir).status == 0);
  REQUIRE(run("run --trace " + (dir / "some.json").string() + " --trace-gpus 0-1,15", dir).status == 0);
  const std::string all = slurp(dir / "all.json"), some = slurp(dir / "some.json");
  auto events_of = [](const std::string& trace, int pid) {
    std::size_t n = 0;
    const std::string key = "\"ph\":\"X\"";
    const std::string of_pid = ",\"pid\":" + std::to_string(pid) + ",";
    for (std::size_t at = trace.find(key); at != std::string::npos; at = trace.find(key, at + 1)) {
      const std::string line = trace.substr(at, trace.find('\n', at) - at);
      if (line.find(of_pid) != std::string::npos) ++n;
    }
    return n;
  };
  std::size_t kept = 0;
  for (int pid : {0, 1, 15}) {
    CAPTURE(pid);
    CHECK(events_of(some, pid) > 0);
    CHECK(events_of(some, pid) == events_of(all, pid));
    kept += events_of(some, pid);
  }
  CHECK(events_of(some, 2) == 0);
  CHECK(some.find("\"process_name\",\"pid\":2,") == std::string::npos);
  CHECK(some.find("\"name\":\"network links\"") != std::string::npos);
  std::size_t x = 0;
  for (std::size_t at = some.find("\"ph\":\"X\""); at != std::string::npos; at = some.find("\"ph\":\"X\"", at + 1)) ++x;
  CHECK(x == kept);
  // Pipeline sends name their micro-batch, chunk and GPUs. Llama 3 70B, tp 8, pp 4, vp 5, 8 micro-batches: GPU 2048
  // (stage 1) receives each micro-batch's activations from GPU 0 for each of its 5 chunks and sends them on to
  // GPU 4096: 8 · 5 = 40 in and 40 out, 80 send.activation slices with 80 different argument sets.
  REQUIRE(run("run scenarios/llama3-h100/70b-8k.textproto --trace " + (dir / "pp.json").string() + " --trace-gpus 2048",
              dir)
              .status == 0);
  const std::string pp = slurp(dir / "pp.json");
  std::set<std::string> sends;
  std::size_t in = 0, out = 0;
  for (std::size_t at = pp.find("\"name\":\"send.activation\""); at != std::string::npos;
       at = pp.find("\"name\":\"send.activation\"", at + 1)) {
    const std::string line = pp.substr(at, pp.find('\n', at) - at);
    sends.insert(line.substr(line.find("\"micro_batch\"")));
    in += line.find("\"from_gpu\":0,\"to_gpu\":2048}") != std::string::npos;
    out += line.find("\"from_gpu\":2048,\"to_gpu\":4096}") != std::string::npos;
  }
  CHECK(sends.size() == 80);
  CHECK(in == 40);
  CHECK(out == 40);
  // Without --trace, or naming no GPU that ran a task, it is an error and no file is written.
  CHECK(run("run --trace-gpus 0", dir).status == 2);
  const Run none = run(
      "run scenarios/llama3-h100/70b-8k.textproto --trace " + (dir / "none.json").string() + " --trace-gpus 8000-8001",
      dir);
  CHECK(none.status == 2);
  CHECK(none.err.find("error: command line: --trace-gpus: none of these GPUs ran a simulated task") == 0);
  CHECK_FALSE(fs::exists(dir / "none.json"));
}

TEST_CASE("bad input: one error line, exit status 2, no output file left behind") {
  const fs::path dir = scratch_dir("bad");
  {
    std::ofstream bad(dir / "bad.textproto");
    bad << "name: \"x\"\ncluster {\n  nodes: 2\n  gpus_per_node: 8 8\n}\n";
  }
  const fs::path json = dir / "out.json";
  const Run r = run("run " + (dir / "bad.textproto").string() + " --json " + json.string(), dir);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  // One line: error: FILE:LINE:COL: ...
  CHECK(r.err.rfind("error: " + (dir / "bad.textproto").string() + ":4:", 0) == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(json));
  for (const auto& entry : fs::directory_iterator(dir))
    CHECK_MESSAGE(!entry.path().filename().string().ends_with(".tmp"), "left " << entry.path());
  fs::remove_all(dir);
}

TEST_CASE("an output name the file system refuses is an error before anything is printed or written") {
  // 300 characters: more than NAME_MAX (255 on ext4, tmpfs, overlayfs). Before, run printed its report, wrote
  // --json, and only then failed on --report; compare printed its whole table first.
  const fs::path dir = scratch_dir("long-name");
  const std::string long_name = (dir / (std::string(300, 'r') + ".md")).string();
  const fs::path json = dir / "ok.json";
  const Run r = run("run --json " + json.string() + " --report " + long_name, dir);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find("cannot write output file: its name has 303 characters, more than the 255") != std::string::npos);
  CHECK_FALSE(fs::exists(json));
  // A name of 250 characters is fine: the temporary file beside it has a short name of its own.
  const fs::path fits = dir / (std::string(245, 'f') + ".json");
  const Run ok = run("run --json " + fits.string(), dir);
  CHECK(ok.status == 0);
  CHECK(fs::exists(fits));
  for (const auto& entry : fs::directory_iterator(dir))
    CHECK_MESSAGE(!entry.path().filename().string().ends_with(".tmp"), "left " << entry.path());
  fs::remove_all(dir);
}

TEST_CASE("inputs far outside what hardware does: out of the simulator's time range is an error, not a number") {
  // Simulated time is int64 picoseconds; the engine takes ±2^62 ps (53.4 days). The loader refuses each value
  // beyond what hardware does (a 10^8 slowdown, a 1e-6 Gbit/s NIC) at its field, so it takes values at its bounds
  // together to leave the range. The default scenario at a 1M-token sequence (its attention squares grow 2^20-fold)
  // with GPU 0 at the largest slowdown taken, 10^4: the first softmax alone ends after about 1.6e7 s (a slowdown
  // of 10^8 used to wrap around and print 133,196 s with exit status 0). At FLOW fidelity, NICs of 0.01 Gbit/s (the
  // slowest rate taken) with GPU 0's NIC link at the smallest fault factor taken, 1e-6: 1.25 B/s, of which a
  // gradient flow gets 0.5 B/s (the profile's network efficiency, the link shared), so it ends after about 1.5e7 s
  // (that was reported as a deadlock). Both are one error line naming the scenario, exit status 2.
  const fs::path dir = scratch_dir("range");
  const std::string base = slurp(fs::path(CLUSTERSIM_SOURCE_DIR) / "scenarios" / "default.textproto");
  auto write = [&](const std::string& name, std::string text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  auto replaced = [](std::string text, const std::string& from, const std::string& to) {
    const std::size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
  };
  const std::string slow = write(
      "slow.textproto", replaced(replaced(base, "cluster {", "cluster {\n  slow_gpus { gpu: 0 compute_slowdown: 1e4 }"),
                                 "seq_len: 1024 ", "seq_len: 1048576 "));
  const std::string nic = write(
      "nic.textproto",
      replaced(replaced(replaced(base, "nic_gbits_per_s_per_direction: 200", "nic_gbits_per_s_per_direction: 0.01"),
                        "cluster {",
                        "cluster {\n  link_faults { from: \"n0/nic0\" to: \"rail0/leaf0\" bandwidth_factor: 1e-6 }"),
               "profile: \"a100-sxm4-80gb\"", "profile: \"a100-sxm4-80gb\"\nfidelity: FLOW"));
  for (const std::string& scenario : {slow, nic}) {
    CAPTURE(scenario);
    const Run r = run("run " + scenario + " --json " + (dir / "out.json").string(), dir);
    CHECK(r.status == 2);
    // The line names the scenario, as every input error does, and what would take that long: the slowed GPU's
    // kernel that would end past the range, or the network transfer at its rate on the faulty link.
    CHECK(r.err.rfind("error: " + scenario + ": simulated time out of range: ", 0) == 0);
    CHECK(r.err.find(scenario == slow ? "for task \"" : "for a network transfer of ") != std::string::npos);
    if (scenario == slow) CHECK(r.err.find("on GPU 0 (stream compute)") != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(dir / "out.json"));
  }
  fs::remove_all(dir);
}

TEST_CASE("bad command lines exit with status 2") {
  const fs::path dir = scratch_dir("cli");
  CHECK(run("frobnicate", dir).status == 2);
  CHECK(run("run --no-such-flag", dir).status == 2);
  CHECK(run("run does-not-exist.textproto", dir).status == 2);
  const Run help = run("run --help", dir);
  CHECK(help.status == 0);
  CHECK(help.out.find("--trace") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("--resolved writes a scenario that runs to the same result") {
  const fs::path dir = scratch_dir("resolved");
  REQUIRE(run("run --resolved " + (dir / "resolved.textproto").string() + " --json " + (dir / "a.json").string(), dir)
              .status == 0);
  const std::string resolved = slurp(dir / "resolved.textproto");
  CHECK(resolved.find("grad_accum: 4") != std::string::npos);
  CHECK(resolved.find("nvlink_hop_latency_us: 0") != std::string::npos);  // a default, filled in
  REQUIRE(run("run " + (dir / "resolved.textproto").string() + " --json " + (dir / "b.json").string(), dir).status == 0);
  CHECK(json_number(slurp(dir / "a.json"), "iteration_time_s") == json_number(slurp(dir / "b.json"), "iteration_time_s"));
  fs::remove_all(dir);
}

TEST_CASE("--resolved rewrites a profile path so the resolved file loads from its own folder") {
  const fs::path dir = scratch_dir("resolved-path");
  fs::create_directories(dir / "prof");
  fs::create_directories(dir / "sc");
  fs::create_directories(dir / "out");
  fs::copy_file(fs::path(CLUSTERSIM_SOURCE_DIR) / "calibrate/profiles/a100-sxm4-80gb.textproto",
                dir / "prof/mine.textproto");
  std::string scenario = slurp(fs::path(CLUSTERSIM_SOURCE_DIR) / "scenarios/grad-accum-example/one-gpu.textproto");
  scenario.replace(scenario.find("profile: \"a100-sxm4-80gb\""), 25, "profile: \"../prof/mine.textproto\"");
  std::ofstream(dir / "sc/s.textproto") << scenario;
  REQUIRE(run("run " + (dir / "sc/s.textproto").string() + " --resolved " + (dir / "out/r.textproto").string(), dir)
              .status == 0);
  CHECK(slurp(dir / "out/r.textproto").find("profile: \"../prof/mine.textproto\"") != std::string::npos);
  CHECK(run("run " + (dir / "out/r.textproto").string(), dir).status == 0);
  fs::remove_all(dir);
}

TEST_CASE("clustersim topo prints the cluster and writes Graphviz") {
  const fs::path dir = scratch_dir("topo");
  const Run r = run("topo scenarios/fabric-rail-vs-oversubscribed/clos-4to1.textproto --dot " + (dir / "g.dot").string(), dir);
  CHECK(r.status == 0);
  // 16 DGX H100: 128 GPUs in 16 NVLink domains of 8, Intel Xeon 8480C hosts (the preset's); 3 leaves and 12
  // spines (see the folder's README).
  for (const char* s :
       {"128 (16 nodes x 8 H100-SXM5-80GB, preset dgx-h100)", "8 GPUs (16 domains)", "host CPUs         Intel",
        "leaf 3", "spine 12", "1400.0 GB/s per direction", "leaf 4.00:1", "diameter"})
    CHECK_MESSAGE(r.out.find(s) != std::string::npos, "topo lacks '" << s << "'");
  CHECK(slurp(dir / "g.dot").rfind("digraph", 0) == 0);
  // The switches to buy: each leaf with the uplinks the NICs it holds need, at full radix. 4:1 at radix 64 with
  // 400 Gbit/s everywhere: a full leaf has 12 uplinks for 48 downlinks (6 nodes of 8 NICs), so 16 nodes take 3
  // leaves of 48, 48 and 32 NICs needing 12 + 12 + 8 = 32 uplinks: one 64-port spine. The rail-optimised tree:
  // 8 rails x 1 leaf holding 16 of its 32 downlinks, so 16 of its 32 uplinks at 1:1: 8 x 16 = 128 spine ports =
  // 2 spines (a full leaf's 32 uplinks each counted 4). The default scenario's 2 nodes: 8 rail leaves of 2 NICs,
  // 2 uplinks each, 16 ports: 1 spine.
  CHECK(r.out.find("switches to buy   leaf 3, spine 1 (64-port switches") != std::string::npos);
  const Run rail = run("topo scenarios/fabric-rail-vs-oversubscribed/rail-optimized.textproto", dir);
  CHECK(rail.out.find("switches to buy   leaf 8, spine 2 (64-port switches") != std::string::npos);
  // How the fabric's switches choose among equal-cost ports, one line per routing.
  CHECK(r.out.find("  routing           D-mod-k (one path per destination NIC") != std::string::npos);
  CHECK(rail.out.find("  routing           adaptive") != std::string::npos);  // the default
  CHECK(run("topo scenarios/fabric-rail-vs-oversubscribed/clos-4to1-ecmp.textproto", dir)
            .out.find("  routing           ECMP hash (each flow hashed onto one of the equal-cost paths") !=
        std::string::npos);
  CHECK(run("topo scenarios/fabric-rail-vs-oversubscribed/clos-4to1-adaptive.textproto", dir)
            .out.find("  routing           adaptive (each flow spread evenly over all its equal-cost paths)\n") !=
        std::string::npos);
  CHECK(run("topo", dir).out.find("switches to buy   leaf 8, spine 1 (64-port switches") != std::string::npos);
  // Three levels, 256 DGX A100 on the preset's 40-port QM8790: a leaf's 20 downlinks take 2 nodes of 8 NICs, 128
  // leaves in ceil(128 / 20) = 7 pods of up to 20; the fullest pod's 20 leaves x 16 uplinks (16 NICs at 1:1) take
  // 320 / 20 = 16 spines of 20 down-ports each (7 x 16 = 112 spines), whose 7 x 16 x 20 up-ports fill 56 cores.
  {
    std::ofstream(dir / "clos3.textproto")
        << "cluster { node_preset: \"dgx-a100\" nodes: 256 fabric { kind: CLOS_THREE_LEVEL } }\n"
           "profile: \"a100-sxm4-80gb\"\nmodel { preset: \"llama3-8b\" }\n"
           "parallel { dp: 2048 micro_batch: 1 }\ntraining { samples: 2048 global_batch: 2048 }\n";
  }
  const Run clos3 = run("topo " + (dir / "clos3.textproto").string(), dir);
  CHECK(clos3.out.find("switches to buy   leaf 128, spine 112, core 56 (40-port switches: NVIDIA Mellanox QM8790, 40 x "
                       "HDR 200 Gb/s, the dgx-a100 preset's;") != std::string::npos);

  // TPU v4: the preset's 4x4x4 cube wraps around; a 2x4x4 slice (half a cube) is a mesh. Its least cut, across y
  // or z, is one cable per line x 2·4 lines x 50 GB/s = 400 GB/s (a torus: two per line, 800); its diameter
  // 1 + 3 + 3 = 7 hops (a torus: 1 + 2 + 2 = 5).
  CHECK(run("topo scenarios/tpu-vs-gpu/tpu-v4-4x4x4.textproto", dir)
            .out.find("  ICI               4x4x4 torus: wraparound on every axis of 3 or more chips\n") !=
        std::string::npos);
  std::ofstream(dir / "mesh.textproto")
      << "cluster { node_preset: \"tpu-v4-cube\" nodes: 8 torus { x: 2 y: 4 z: 4 } }\n"
         "profile: \"tpu-v4\"\nmodel { preset: \"gpt-1p7b\" }\n"
         "parallel { dp: 32 micro_batch: 1 }\ntraining { samples: 32 global_batch: 32 }\n";
  const Run mesh = run("topo " + (dir / "mesh.textproto").string(), dir);
  REQUIRE(mesh.status == 0);
  // `run` on the slice calls its accelerators chips, as the cluster line does; the figures are per chip.
  const Run chips = run("run " + (dir / "mesh.textproto").string(), dir);
  REQUIRE(chips.status == 0);
  for (const char* s : {" per chip)\n", " model TFLOP/s per chip of 275)", "Where the time goes (chip ",
                        "Memory per chip (peak", "  chip-hours        "})
    CHECK_MESSAGE(chips.out.find(s) != std::string::npos, "run lacks '" << s << "':\n" << chips.out);
  CHECK(chips.out.find("GPU") == std::string::npos);
  for (const char* s :
       {"  ICI               2x4x4 mesh: no wraparound (a TPU v4 slice wraps around only when every side "
        "is a multiple of 4)\n",
        "  bisection         400.0 GB/s per direction", "  diameter          7 hops"})
    CHECK_MESSAGE(mesh.out.find(s) != std::string::npos, "topo lacks '" << s << "':\n" << mesh.out);
  fs::remove_all(dir);
}

TEST_CASE("run --links writes per-link utilisation and the trace gains link counter tracks") {
  const fs::path dir = scratch_dir("links");
  const Run r = run("run --links " + (dir / "l.json").string() + " --links-csv " + (dir / "l.csv").string() +
                        " --trace " + (dir / "t.json").string(),
                    dir);
  REQUIRE(r.status == 0);
  const std::string j = slurp(dir / "l.json");
  for (const char* key : {"makespan_s", "busy_fraction", "bytes_carried", "peak_flows", "capacity_GBps"})
    CHECK_MESSAGE(j.find(key) != std::string::npos, "links JSON lacks " << key);
  CHECK(slurp(dir / "l.csv").rfind("link,kind,capacity_GBps,bytes_carried,busy_s,busy_fraction", 0) == 0);
  const std::string trace = slurp(dir / "t.json");
  CHECK(trace.find("\"name\":\"network links\"") != std::string::npos);
  CHECK(trace.find("\"ph\":\"C\"") != std::string::npos);
  // ANALYTICAL fidelity has no flows to report.
  std::ofstream(dir / "a.textproto") << slurp(fs::path(CLUSTERSIM_SOURCE_DIR) / "scenarios/default.textproto")
                                     << "fidelity: ANALYTICAL\n";
  // The error names the option given.
  for (const std::string option : {"--links", "--links-csv"}) {
    const Run refused = run("run " + (dir / "a.textproto").string() + " " + option + " " + (dir / "x").string(), dir);
    CHECK(refused.status == 2);
    CHECK(refused.err == "error: command line: " + option +
                             ": per-link utilisation needs fidelity: FLOW (the scenario sets ANALYTICAL)\n");
    CHECK_FALSE(fs::exists(dir / "x"));
  }
  fs::remove_all(dir);
}

TEST_CASE("clustersim --help lists every command, and each command answers --help") {
  // The commands main() dispatches; `calibrate` was once missing from the list although it ran.
  const fs::path dir = scratch_dir("usage");
  const Run help = run("--help", dir);
  CHECK(help.status == 0);
  for (const char* command : {"run", "topo", "collective", "calibrate", "validate", "sweep", "plan", "compare"}) {
    CAPTURE(command);
    CHECK(help.out.find(std::string("\n  ") + command + " ") != std::string::npos);
    const Run own = run(std::string(command) + " --help", dir);
    CHECK(own.status == 0);
    CHECK(own.out.find(command) != std::string::npos);
  }
  // No arguments: the same usage on stdout, and one error line, exit status 2 (nothing was asked for).
  const std::string commands =
      "(one of run, topo, collective, calibrate, validate, sweep, plan, compare; clustersim --help describes them)\n";
  const Run none = run("", dir);
  CHECK(none.status == 2);
  CHECK(none.out == help.out);
  CHECK(none.err == "error: command line: no command given " + commands);
  // An unknown command: one line that lists the commands, no usage after it.
  const Run unknown = run("simulate", dir);
  CHECK(unknown.status == 2);
  CHECK(unknown.err == "error: command line: unknown command 'simulate' " + commands);
  fs::remove_all(dir);
}

TEST_CASE("output files: a symlink keeps pointing at its target, a device is written into, a bad folder costs no run") {
  const fs::path dir = scratch_dir("outputs");
  // A symbolic link: the target gets the JSON, the link stays a link (a rename over it used to replace it).
  { std::ofstream(dir / "real.json") << "old"; }
  fs::create_symlink("real.json", dir / "link.json");
  Run r = run("run --json " + (dir / "link.json").string(), dir);
  CHECK(r.status == 0);
  CHECK(fs::is_symlink(fs::symlink_status(dir / "link.json")));
  CHECK(slurp(dir / "real.json").rfind("{", 0) == 0);
  // A link to a file not written yet names that file: two outputs that end up in one file are refused, whichever
  // spelling each takes (the trace used to replace the JSON written through the other name).
  fs::create_symlink("new.json", dir / "ahead.json");
  fs::create_symlink("ahead.json", dir / "ahead2.json");
  for (const std::string& other : {std::string("ahead.json"), std::string("ahead2.json")}) {
    r = run("run --json " + (dir / "new.json").string() + " --trace " + (dir / other).string(), dir);
    CHECK(r.status == 2);
    CHECK(r.err == "error: command line: --trace: " + (dir / other).string() +
                       " is also the output of --json: give each its own file\n");
    CHECK_FALSE(fs::exists(dir / "new.json"));
  }
  // A character device: /dev/full refuses every write, which must be an error (it used to be renamed over).
  if (fs::is_character_file("/dev/full")) {
    r = run("run --json /dev/full", dir);
    CHECK(r.status == 2);
    CHECK(r.err == "error: /dev/full: cannot write output file (disk full?)\n");
    CHECK(fs::is_character_file("/dev/full"));
  }
  // A folder that does not exist: refused before the simulation, so stdout stays empty.
  r = run("run --json " + (dir / "none" / "x.json").string() + " --report " + (dir / "r.html").string(), dir);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "error: " + (dir / "none" / "x.json").string() + ": cannot write output file: folder " +
                     (dir / "none").string() + " does not exist\n");
  CHECK_FALSE(fs::exists(dir / "r.html"));
  // A negative count for an unsigned option is refused, not wrapped to 2^32 − 1 (a sweep that never ends).
  r = run("sweep --top -1", dir);
  CHECK(r.status == 2);
  CHECK(r.err == "error: command line: --top: -1 is negative: it must be a whole number\n");
  // An output that is an input (also through a link), or two outputs on one file: refused before anything runs,
  // and the scenario is left as it was (run S --json S used to overwrite the scenario with JSON).
  const std::string scenario_text = slurp(fs::path(CLUSTERSIM_SOURCE_DIR) / "scenarios" / "default.textproto");
  { std::ofstream(dir / "s.textproto") << scenario_text; }
  fs::create_symlink("s.textproto", dir / "s-link.textproto");
  const std::string s = (dir / "s.textproto").string();
  r = run("run " + s + " --json " + s, dir);
  CHECK(r.status == 2);
  CHECK(r.err == "error: command line: --json: " + s + " is an input of this command; writing it would overwrite it\n");
  r = run("run " + (dir / "s-link.textproto").string() + " --resolved " + s, dir);
  CHECK(r.status == 2);
  CHECK(r.err.find("--resolved: " + s + " is an input of this command") != std::string::npos);
  CHECK(slurp(dir / "s.textproto") == scenario_text);
  const std::string a = (dir / "a.json").string();
  r = run("run " + s + " --json " + a + " --trace " + a, dir);
  CHECK(r.status == 2);
  CHECK(r.err == "error: command line: --trace: " + a + " is also the output of --json: give each its own file\n");
  CHECK(r.out.empty());
  // A file the scenario reads, its hardware profile, is an input too: known only once the scenario is loaded, it is
  // refused when the output is written, and the profile is left as it was.
  const std::string profile_text =
      slurp(fs::path(CLUSTERSIM_SOURCE_DIR) / "calibrate" / "profiles" / "a100-sxm4-80gb.textproto");
  { std::ofstream(dir / "p.textproto") << profile_text; }
  std::string with_profile = scenario_text;
  with_profile.replace(with_profile.find("profile: \""), 10, "profile: \"" + (dir / "p.textproto").string() + "\" #");
  { std::ofstream(dir / "sp.textproto") << with_profile; }
  r = run("run " + (dir / "sp.textproto").string() + " --json " + (dir / "p.textproto").string(), dir);
  CHECK(r.status == 2);
  CHECK(r.err == "error: " + (dir / "p.textproto").string() +
                     ": cannot write output file: this command read it as an input (a scenario's profile, a fit's "
                     "base); writing it would overwrite it\n");
  CHECK(slurp(dir / "p.textproto") == profile_text);
  // Devices may take several outputs; an empty name names its option.
  CHECK(run("run " + s + " --json /dev/null --trace /dev/null", dir).status == 0);
  r = run("topo --dot \"\"", dir);
  CHECK(r.err == "error: command line: --dot: the file name is empty\n");
  fs::remove_all(dir);
}

TEST_CASE("out of memory on a pipeline: the report names the most loaded stage, the JSON each stage's peak") {
  // GPT-3 175B, tp 8, pp 8 (12 layers per stage), SP, no recomputation, explicit attention, m = 64.
  // 1F1B: stage i holds p − i = 8 − i micro-batches of its 12 layers; one layer of one micro-batch keeps
  // (34/8 + 5·a·s/(h·8))·s·b·h = (4.25 + 5·96·2048/(12288·8))·sbh = 14.25·sbh (Korthikanti et al. 2022, TP + SP),
  // sbh = 2048·12288 = 25,165,824. Stages 1 and 2 hold the same weights and states, so their peaks differ by
  // one micro-batch of 12 layers: 12 · 14.25 · 25,165,824 = 4,303,355,904 B. Stage 0 holds 8 micro-batches:
  // 96 · 14.25 · sbh = 32.06 GiB of activations, which with 47.33 GiB of 16-bit weights, fp32 gradients and
  // Adam (18 B per parameter) and 2 GiB of overhead exceeds 80 GiB.
  const fs::path dir = scratch_dir("oom-stage");
  {
    std::ofstream s(dir / "pp8.textproto");
    s << "cluster { node_preset: \"dgx-a100\" nodes: 8 }\nprofile: \"a100-sxm4-80gb\"\nfidelity: ANALYTICAL\n"
         "model { preset: \"gpt3-175b\" }\n"
         "parallel { framework: MEGATRON tp: 8 pp: 8 dp: 1 micro_batch: 1 grad_accum: 64 sequence_parallel: true\n"
         "  recompute: NONE flash_attention: false distributed_optimizer: false }\n"
         "training { samples: 64 global_batch: 64 precision: BF16 }\n";
  }
  const Run r = run("run " + (dir / "pp8.textproto").string() + " --json " + (dir / "r.json").string(), dir);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("Memory per GPU (peak, on pipeline stage 0 of 8, the most loaded; the least loaded, stage 7") !=
        std::string::npos);
  CHECK(r.out.find("OUT OF MEMORY (capacity exceeded when adding: ") != std::string::npos);
  const std::string j = slurp(dir / "r.json");
  CHECK(j.find("\"oom\": true, \"breaking_part\": \"") != std::string::npos);
  CHECK(j.find("\"largest_part\": \"activations (12 layers x 8 micro-batches in flight, 1F1B)\"") != std::string::npos);
  CHECK(json_number(j, "stage") == 0);
  const std::regex re("\"stage_peak_bytes\": \\[([^\\]]*)\\]");
  std::smatch m;
  REQUIRE(std::regex_search(j, m, re));
  std::vector<double> peaks;
  std::istringstream list(m[1].str());
  for (std::string v; std::getline(list, v, ',');) peaks.push_back(std::stod(v));
  REQUIRE(peaks.size() == 8);
  CHECK(peaks[0] == json_number(j, "peak_bytes"));
  CHECK(peaks[1] - peaks[2] == 4303355904.0);
  CHECK(*std::max_element(peaks.begin(), peaks.end()) == peaks[0]);
  // The JSON carries the schedule's theoretical bubble as a share of the step, as the text's idle line does:
  // 1F1B's (p − 1)/m of the ideal time, f = 7/64, is f/(1 + f) = 7/71 of the step; and tokens/s per GPU.
  CHECK(json_number(j, "theoretical_bubble_share") == doctest::Approx(7.0 / 71).epsilon(1e-12));
  CHECK(r.out.find("theory 9.9 % of the step") != std::string::npos);
  CHECK(json_number(j, "tokens_per_s_per_gpu") == doctest::Approx(json_number(j, "tokens_per_s") / 64).epsilon(1e-12));
  fs::remove_all(dir);
}
