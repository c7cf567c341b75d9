// Several jobs on disjoint GPU sets of one cluster: loading, validation, resolved round trip.
#include <doctest/doctest.h>

#include <string>

#include "cli/scenario_loader.h"
#include "sim/input_error.h"

using namespace clustersim;

namespace {

const std::string kCluster =
    "cluster { nodes: 2 gpus_per_node: 8 gpu: \"A100-SXM4-80GB\" nvlink_gbytes_per_s_per_direction: 300\n"
    "          nic_gbits_per_s_per_direction: 200 }\n"
    "profile: \"a100-sxm4-80gb\"\n";

std::string job(const std::string& name, const std::string& gpus, int dp) {
  return "jobs { name: \"" + name + "\" gpus: \"" + gpus +
         "\"\n  model { layers: 2 hidden: 256 heads: 4 vocab: 1000 seq_len: 128 }\n  parallel { dp: " +
         std::to_string(dp) + " micro_batch: 2 }\n  training { samples: 1000 }\n}\n";
}

std::string error_of(const std::string& text) {
  try {
    cli::load_scenario_text(text, "jobs.textproto", false, "");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("two jobs on disjoint GPU ranges") {
  const auto sc =
      cli::load_scenario_text(kCluster + job("a", "0-7", 8) + job("b", "8-11,14-15", 6), "jobs.textproto", false, "");
  REQUIRE(sc.jobs.size() == 2);
  CHECK(sc.jobs[0].name == "a");
  CHECK(sc.jobs[0].gpus.size() == 8);
  CHECK(sc.jobs[1].gpus == std::vector<std::uint32_t>{8, 9, 10, 11, 14, 15});
  CHECK(sc.jobs[1].training.global_batch == 12);  // 2 x 1 x 6
  // Resolved text keeps the jobs and reloads to the same GPU sets.
  const auto again = cli::load_scenario_text(cli::resolved_scenario_text(sc), "r.textproto", false, "");
  REQUIRE(again.jobs.size() == 2);
  CHECK(again.jobs[1].gpus == sc.jobs[1].gpus);
  CHECK(again.jobs[1].name == "b");
}

TEST_CASE("job errors name the job's field and its line") {
  // kCluster is 3 lines, so job a is lines 4-8 and job b starts on line 9; the value of gpus starts
  // at column 24 ("jobs { name: \"a\" gpus: " is 23 characters), dp's at 18 ("  parallel { dp: ").
  CHECK(error_of(kCluster + job("a", "0-7", 8) + job("b", "7-8", 2)) ==
        "jobs.textproto:9:24: jobs[1].gpus: GPU 7 is already used by jobs[0]");
  CHECK(error_of(kCluster + job("a", "0-16", 17)) ==
        "jobs.textproto:4:24: jobs[0].gpus: GPU 16 does not exist (the cluster has 16 GPUs)");
  CHECK(error_of(kCluster + job("a", "3-1", 3)) == "jobs.textproto:4:24: jobs[0].gpus: range 3-1 is backwards");
  CHECK(error_of(kCluster + job("a", "0-3,x", 4)) ==
        "jobs.textproto:4:24: jobs[0].gpus: \"0-3,x\" is not a list of GPU ranges such as \"0-63,128-191\"");
  CHECK(error_of(kCluster + job("a", "0-7", 4)) ==
        "jobs.textproto:6:18: jobs[0].parallel.dp: 4 does not equal the job's 8 GPUs (jobs[0].gpus)");
  CHECK(error_of(kCluster + "model { layers: 1 hidden: 8 heads: 1 vocab: 8 seq_len: 8 }\n" + job("a", "0-7", 8))
            .find("model: must not be set together with jobs") != std::string::npos);
  // The report and the JSON tell jobs apart by name: a second "a" is refused at its name (line 9, column 14:
  // "jobs { name: " is 13 characters), and so is a name that an unnamed job takes by default (jobs[1] is "job1").
  CHECK(error_of(kCluster + job("a", "0-7", 8) + job("a", "8-15", 8)) ==
        "jobs.textproto:9:14: jobs[1].name: \"a\" is already the name of jobs[0]");
  const std::string unnamed =
      "jobs { gpus: \"8-15\"\n  model { layers: 2 hidden: 256 heads: 4 vocab: 1000 seq_len: 128 }\n"
      "  parallel { dp: 8 micro_batch: 2 }\n  training { samples: 1000 }\n}\n";
  CHECK(error_of(kCluster + job("job1", "0-7", 8) + unnamed)
            .find("jobs[1].name: \"job1\" is already the name of jobs[0] (the default name of an unnamed job)") !=
        std::string::npos);
}

TEST_CASE("fidelity defaults to FLOW and can be set to ANALYTICAL") {
  const std::string one = kCluster + job("a", "0-15", 16);
  CHECK(cli::load_scenario_text(one, "x.textproto", false, "").fidelity == workloads::Fidelity::kFlow);
  CHECK(cli::load_scenario_text(one + "fidelity: ANALYTICAL\n", "x.textproto", false, "").fidelity ==
        workloads::Fidelity::kAnalytical);
}
