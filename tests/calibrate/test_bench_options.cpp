// The CUDA-free parts of clustersim-bench (calibrate/bench/bench_options.h): --algos/--protos names, the plan of
// NCCL_ALGO x NCCL_PROTO combinations and their operations (rules of NCCL's src/graph/tuning.cc,
// ../shared/reference/nccl.md §1.6), NCCL's conf-file parser (setEnvFile, src/misc/param.cc), the label of a
// pre-set NCCL_ALGO / NCCL_PROTO, and the environment note of the provenance. Expected values are derived by hand
// in the comments.
#include <doctest/doctest.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "calibrate/bench/bench_options.h"

namespace {

namespace bench = clustersim::bench;

using Ops = std::vector<std::string>;
const Ops kAllOps = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall", "sendrecv"};
const Ops kRingOps = {"all_reduce", "all_gather", "reduce_scatter", "broadcast"};
const Ops kAllReduceOnly = {"all_reduce"};

bench::BenchOptions parse(std::vector<const char*> args) {
  args.insert(args.begin(), "clustersim-bench");
  return bench::parse_bench_options(static_cast<int>(args.size()), args.data());
}

std::string usage_error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const bench::UsageError& e) {
    return e.what();
  }
  return "<no UsageError thrown>";
}

}  // namespace

TEST_CASE("bench options: --algos and --protos are NCCL names, canonicalised, anything else is refused") {
  // NCCL compares names with strcasecmp, so the spelling does not matter; the samples record one spelling.
  const bench::BenchOptions options = parse({"--algos", "Ring,NVLSTree,CollNetDirect", "--protos", "ll128,SIMPLE"});
  CHECK(options.algos == std::vector<std::string>{"ring", "nvlstree", "collnetdirect"});
  CHECK(options.protos == std::vector<std::string>{"LL128", "Simple"});
  CHECK(bench::canonical_nccl_algo("collnet") == "");  // clustersim's band name, not an NCCL_ALGO value
  CHECK(bench::canonical_nccl_proto("Default") == "default");
  // A "^" exclusion or a typo would become a sample label that `calibrate fit` refuses.
  CHECK(usage_error_of([] { parse({"--algos", "ring,^nvls"}); }).find("\"^nvls\" is not one of") != std::string::npos);
  CHECK(usage_error_of([] { parse({"--protos", "LL64"}); }).find("--protos: \"LL64\"") != std::string::npos);
}

TEST_CASE("bench options: --out is binary where calibrate fit reads binary, JSON is refused") {
  // calibrate fit (read_raw) reads .binpb, .pb and .bin, in any case, as binary protobuf and the rest as text
  // (.json as JSON): the bench writes what fit will read back, and has no JSON writer.
  for (const char* path : {"raw.binpb", "raw.pb", "raw.bin", "RAW.BINPB", "dir.v2/raw.Bin"}) {
    CAPTURE(path);
    CHECK(bench::binary_output(path));
  }
  for (const char* path : {"raw.textproto", "raw.txtpb", "raw", "raw.pb.txt", "bin/raw.textproto"}) {
    CAPTURE(path);
    CHECK(!bench::binary_output(path));
  }
  CHECK(parse({"--out", "x/RAW.BIN"}).out == "x/RAW.BIN");
  CHECK(usage_error_of([] {
          parse({"--out", "raw.JSON"});
        }).find("--out: raw.JSON: clustersim-bench writes text") != std::string::npos);
}

TEST_CASE("bench plan: one node with 8 GPUs and the default lists runs 8 of 22 combinations") {
  bench::NcclPlanInput input;
  input.algos = parse({}).algos;    // ring, tree, nvls, nvlstree, collnetdirect, collnetchain, pat
  input.protos = parse({}).protos;  // LL, LL128, Simple
  input.ranks = 8;
  input.hosts = 1;
  const bench::NcclPlan plan = bench::plan_nccl_combinations(input);
  // Requested: default x default, then 7 x 3. Ring and tree take every protocol (3 + 3); NVLS is Simple-only
  // (1); NVLSTree needs two hosts, CollNet needs NCCL_COLLNET_ENABLE, PAT one GPU per host: 1 + 3 + 3 + 1 = 8.
  REQUIRE(plan.run.size() == 8);
  CHECK(plan.run[0].algo == "default");
  CHECK(plan.run[0].algo_label == "default");
  CHECK(plan.run[0].proto_label == "default");
  CHECK(plan.run[0].ops == kAllOps);
  for (int i = 1; i <= 3; ++i) {
    CHECK(plan.run[i].algo == "ring");
    CHECK(plan.run[i].ops == kRingOps);  // point to point only under "default"
  }
  CHECK(plan.run[1].proto == "LL");
  CHECK(plan.run[2].proto == "LL128");
  CHECK(plan.run[3].proto_label == "Simple");
  for (int i = 4; i <= 6; ++i) {
    CHECK(plan.run[i].algo == "tree");
    CHECK(plan.run[i].ops == kAllReduceOnly);
  }
  CHECK(plan.run[7].algo == "nvls");
  CHECK(plan.run[7].proto == "Simple");
  CHECK(plan.run[7].ops == Ops{"all_reduce", "all_gather", "reduce_scatter"});
  CHECK(plan.run[7].runs("all_gather"));
  CHECK(!plan.run[7].runs("broadcast"));

  // nvls x LL and x LL128 one line each; the others one line for every protocol.
  REQUIRE(plan.skipped.size() == 6);
  CHECK(plan.skipped[0].describe() == "NCCL_ALGO=nvls NCCL_PROTO=LL: runs only with NCCL_PROTO=Simple");
  CHECK(plan.skipped[1].describe() == "NCCL_ALGO=nvls NCCL_PROTO=LL128: runs only with NCCL_PROTO=Simple");
  CHECK(plan.skipped[2].describe() == "NCCL_ALGO=nvlstree: needs more than one host (8 ranks on 1 host)");
  CHECK(plan.skipped[3].describe() ==
        "NCCL_ALGO=collnetdirect: needs CollNet (NCCL_COLLNET_ENABLE=1 and a CollNet network plugin)");
  CHECK(plan.skipped[4].algo == "collnetchain");
  CHECK(plan.skipped[4].proto == "");
  CHECK(plan.skipped[5].describe() == "NCCL_ALGO=pat: needs one GPU per host (8 ranks on 1 host)");
}

TEST_CASE("bench plan: one GPU on each of 2 hosts, with and without CollNet") {
  bench::NcclPlanInput input;
  input.algos = {"nvls", "nvlstree", "pat", "collnetdirect"};
  input.protos = {"default"};
  input.ranks = 2;
  input.hosts = 2;
  input.collnet_enabled = true;
  // Two hosts: NVLSTree is possible; ranks == hosts: PAT is; CollNet on: NVLS across hosts and CollNetDirect are.
  bench::NcclPlan plan = bench::plan_nccl_combinations(input);
  REQUIRE(plan.run.size() == 5);
  CHECK(plan.skipped.empty());
  CHECK(plan.run[1].algo_label == "nvls");
  CHECK(plan.run[1].proto_label == "default");  // "default" protocol is fine for a Simple-only algorithm
  CHECK(plan.run[1].ops == Ops{"all_reduce", "all_gather", "reduce_scatter"});
  CHECK(plan.run[2].ops == kAllReduceOnly);                       // nvlstree
  CHECK(plan.run[3].ops == Ops{"all_gather", "reduce_scatter"});  // pat
  CHECK(plan.run[4].ops == kAllReduceOnly);                       // collnetdirect

  input.collnet_enabled = false;  // NVLS with nNodes > 1 and CollNetDirect need collNetSupport
  plan = bench::plan_nccl_combinations(input);
  REQUIRE(plan.run.size() == 3);
  CHECK(plan.run[1].algo == "nvlstree");
  CHECK(plan.run[2].algo == "pat");
  REQUIRE(plan.skipped.size() == 2);
  CHECK(plan.skipped[0].describe() ==
        "NCCL_ALGO=nvls: across hosts needs CollNet (NCCL_COLLNET_ENABLE=1; 2 ranks on 2 hosts)");
  CHECK(plan.skipped[1].algo == "collnetdirect");
}

TEST_CASE("bench plan: a pre-set NCCL_ALGO / NCCL_PROTO labels and limits the default combination") {
  bench::NcclPlanInput input;
  input.algos = {"ring", "tree"};
  input.protos = {"default", "LL"};
  input.preset_algo = "ring";
  input.ranks = 8;
  // Requested: (default, default) = ring/default, (ring, default) = the same labels, (ring, LL), (tree, default),
  // (tree, LL). The default combination runs ring's operations plus the point-to-point ones.
  bench::NcclPlan plan = bench::plan_nccl_combinations(input);
  REQUIRE(plan.run.size() == 4);
  CHECK(plan.run[0].algo == "default");
  CHECK(plan.run[0].algo_label == "ring");
  CHECK(plan.run[0].ops == kAllOps);
  CHECK(plan.run[1].algo_label == "ring");
  CHECK(plan.run[1].proto_label == "LL");
  CHECK(plan.run[1].ops == kRingOps);
  CHECK(plan.run[2].algo_label == "tree");
  CHECK(plan.run[2].proto_label == "default");
  REQUIRE(plan.skipped.size() == 1);
  CHECK(plan.skipped[0].algo == "ring");
  CHECK(plan.skipped[0].proto == "default");
  CHECK(plan.skipped[0].reason.find("measured already") == 0);

  // NCCL_ALGO=pat on one node: even NCCL's own choice cannot run; NCCL_PROTO=LL makes "nvls" (default protocol)
  // an NVLS x LL run, which NCCL does not have.
  input.algos = {"nvls"};
  input.protos = {"default"};
  input.preset_algo = "pat";
  input.preset_proto = "LL";
  plan = bench::plan_nccl_combinations(input);
  CHECK(plan.run.empty());
  REQUIRE(plan.skipped.size() == 2);
  CHECK(plan.skipped[0].describe() == "NCCL_ALGO=pat: needs one GPU per host (8 ranks on 1 host)");
  CHECK(plan.skipped[1].describe() == "NCCL_ALGO=nvls NCCL_PROTO=LL: runs only with NCCL_PROTO=Simple");
}

TEST_CASE("nccl conf: parse_nccl_conf reads a file as NCCL's setEnvFile does") {
  const std::string text =
      "# a comment\n"
      "NCCL_ALGO=Ring\n"
      "NCCL_PROTO = LL\n"             // nothing is trimmed: the name is "NCCL_PROTO ", which NCCL never looks up
      "  #x=1\n"                      // '#' only comments at the start of the line
      "NO_EQUALS_SIGN\n"              // skipped
      "=no name\n"                    // skipped: setenv refuses an empty name
      "\n"                            // skipped
      "NCCL_ALGO=Tree\n"              // a repeat is an entry too (NCCL's setenv(..., 0) then keeps the first)
      "NCCL_DEBUG=WARN\r\n"           // only the '\n' goes
      "NCCL_SOCKET_IFNAME==ens1f0\n"  // the value is everything after the first '=' (NCCL's own example)
      "LAST=1";                       // no final newline
  const std::vector<bench::NcclConfEntry> entries = bench::parse_nccl_conf(text);
  REQUIRE(entries.size() == 7);
  CHECK(entries[0].name == "NCCL_ALGO");
  CHECK(entries[0].value == "Ring");
  CHECK(entries[1].name == "NCCL_PROTO ");
  CHECK(entries[1].value == " LL");
  CHECK(entries[2].name == "  #x");
  CHECK(entries[2].value == "1");
  CHECK(entries[3].value == "Tree");
  CHECK(entries[4].value == "WARN\r");
  CHECK(entries[5].name == "NCCL_SOCKET_IFNAME");
  CHECK(entries[5].value == "=ens1f0");
  CHECK(entries[6].name == "LAST");
  CHECK(entries[6].value == "1");

  // NCCL copies at most 1023 characters of the name and of the value.
  const std::vector<bench::NcclConfEntry> long_entry =
      bench::parse_nccl_conf(std::string(1500, 'N') + "=" + std::string(1500, 'v') + "\n");
  REQUIRE(long_entry.size() == 1);
  CHECK(long_entry[0].name.size() == 1023);
  CHECK(long_entry[0].value.size() == 1023);
}

TEST_CASE("nccl conf: the effective value is the environment's, else the first file's first line") {
  const std::vector<bench::NcclConfFile> files = {
      {"/home/u/.nccl.conf", "NCCL_ALGO=tree\nNCCL_ALGO=ring\n"},
      {"/etc/nccl.conf", "NCCL_ALGO=nvls\nNCCL_PROTO=LL128\n"},
  };
  bench::NcclSetting s = bench::effective_nccl_setting("NCCL_ALGO", std::string("Ring"), files);
  CHECK(s.value == std::optional<std::string>("Ring"));
  CHECK(s.source == bench::kFromEnvironment);
  s = bench::effective_nccl_setting("NCCL_ALGO", std::nullopt, files);
  CHECK(s.value == std::optional<std::string>("tree"));
  CHECK(s.source == "/home/u/.nccl.conf");
  s = bench::effective_nccl_setting("NCCL_PROTO", std::nullopt, files);
  CHECK(s.value == std::optional<std::string>("LL128"));
  CHECK(s.source == "/etc/nccl.conf");
  s = bench::effective_nccl_setting("NCCL_COLLNET_ENABLE", std::nullopt, files);
  CHECK(!s.value);
  // An empty environment value still wins (NCCL's setenv(..., 0) does not overwrite it).
  s = bench::effective_nccl_setting("NCCL_ALGO", std::string(""), files);
  CHECK(s.value == std::optional<std::string>(""));
}

TEST_CASE("nccl preset: one name is the label, a list, an exclusion or an unknown name is a UsageError") {
  auto setting = [](std::optional<std::string> value, std::string source = std::string(bench::kFromEnvironment)) {
    return bench::NcclSetting{"NCCL_ALGO", std::move(value), std::move(source)};
  };
  CHECK(bench::preset_algo_label(setting(std::nullopt, "")) == "default");
  CHECK(bench::preset_algo_label(setting("Ring")) == "ring");
  CHECK(bench::preset_algo_label(setting("NVLS", "/etc/nccl.conf")) == "nvls");
  CHECK(bench::preset_proto_label({"NCCL_PROTO", std::string("simple"), "the environment"}) == "Simple");
  CHECK(bench::preset_proto_label({"NCCL_PROTO", std::string("ll128"), "the environment"}) == "LL128");

  const std::string env_error = usage_error_of([&] { bench::preset_algo_label(setting("^NVLS")); });
  CHECK(env_error.find("NCCL_ALGO=\"^NVLS\" (set in the environment) does not name exactly one NCCL algorithm") == 0);
  CHECK(env_error.find("unset it") != std::string::npos);
  CHECK(env_error.find("--algos") != std::string::npos);
  const std::string file_error =
      usage_error_of([&] { bench::preset_algo_label(setting("Ring,Tree", "/etc/nccl.conf")); });
  CHECK(file_error.find("NCCL_ALGO=\"Ring,Tree\" (set in /etc/nccl.conf, which NCCL loads)") == 0);
  // NCCL >= 2.24 per-operation syntax, an empty value, "default" (not an NCCL name), a typo.
  for (const char* value : {"allreduce:tree", "", "default", "rign"}) {
    CHECK(usage_error_of([&] { bench::preset_algo_label(setting(value)); }).find("NCCL_ALGO=") == 0);
  }
  const std::string proto_error = usage_error_of([] {
    bench::preset_proto_label({"NCCL_PROTO", std::string("^LL128"), "the environment"});
  });
  CHECK(proto_error.find("protocol (LL, LL128, Simple)") != std::string::npos);
  CHECK(proto_error.find("--protos") != std::string::npos);
}

TEST_CASE("nccl environment note: NCCL_* and CUDA_VISIBLE_DEVICES sorted, then what NCCL takes from conf files") {
  const std::vector<std::string> environment = {"PATH=/usr/bin",   "NCCL_SOCKET_IFNAME=eth0",
                                                "NCCLX_FOO=1",     "CUDA_VISIBLE_DEVICES=0,1",
                                                "NCCL_DEBUG=INFO", "NCCL_IB_HCA=mlx5_0 mlx5_1"};
  // /etc/nccl.conf's NCCL_DEBUG is shadowed by the environment; its NCCL_ALGO is what NCCL will use.
  const std::vector<bench::NcclConfFile> files = {{"/etc/nccl.conf", "NCCL_DEBUG=WARN\nNCCL_ALGO=ring\n"}};
  CHECK(bench::nccl_environment_note(environment, files) ==
        " [env: CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=INFO NCCL_IB_HCA='mlx5_0 mlx5_1' NCCL_SOCKET_IFNAME=eth0]"
        " [/etc/nccl.conf: NCCL_ALGO=ring]");
  CHECK(bench::nccl_environment_note({"PATH=/usr/bin"}, {}) == "");
}
