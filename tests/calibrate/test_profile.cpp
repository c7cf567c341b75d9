// Hardware profiles: the built-in ones load with their datasheet numbers in SI units, and each kind
// of bad profile gives the exact error (FILE:LINE:COL: field.path: message).
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <functional>
#include <string>

#include "calibrate/hardware_profile.h"
#include "calibrate/profile.pb.h"
#include "calibrate/proto_text.h"
#include "sim/input_error.h"
#include "tests/test_support.h"

namespace {

using clustersim::InputError;
namespace calibrate = clustersim::calibrate;

const std::string kBad = std::string(CLUSTERSIM_SOURCE_DIR) + "/tests/data/bad/";

std::string error_of(const std::function<void()>& call) { return clustersim::testing::input_error_of(call); }

// A valid profile; line 1 is "name:", the gpu block is lines 3-14, collectives lines 15-21.
const std::string kProfile =
    "name: \"test\"\n"
    "provenance { source: \"made up for a test\" }\n"
    "gpu {\n"
    "  gpu: \"TEST-GPU\"\n"
    "  peak_bf16_tflops: 100\n"
    "  peak_fp16_tflops: 100\n"
    "  peak_tf32_tflops: 50\n"
    "  peak_fp32_tflops: 10\n"
    "  hbm_gbytes_per_s: 1000\n"
    "  memory_capacity_gib: 40\n"
    "  gemm_efficiency: 0.5\n"
    "  hbm_efficiency: 0.5\n"
    "  kernel_launch_us: 0\n"
    "}\n"
    "collectives {\n"
    "  ring_base_latency_us: 1\n"
    "  nvlink_step_latency_us: 1\n"
    "  network_step_latency_us: 1\n"
    "  nvlink_bus_efficiency: 1\n"
    "  network_bus_efficiency: 0.5\n"
    "}\n";

std::string replaced(const std::string& from, const std::string& to) {
  std::string out = kProfile;
  const std::size_t at = out.find(from);
  REQUIRE(at != std::string::npos);
  out.replace(at, from.size(), to);
  return out;
}

std::string profile_error(const std::string& text) {
  return error_of([&] { calibrate::parse_profile(text, "p.textproto"); });
}

}  // namespace

TEST_CASE("built-in profiles load") {
  CHECK(calibrate::builtin_profile_names() == std::vector<std::string>{"a100-sxm4-80gb", "h100-sxm5-80gb", "tpu-v4",
                                                                  "a100-sxm4-40gb", "h200-sxm-141gb", "gb200", "vtrain-a100"});

  const calibrate::HardwareProfile a100 = calibrate::load_profile("a100-sxm4-80gb");
  CHECK(a100.name == "a100-sxm4-80gb");
  CHECK(a100.origin == "built-in");
  CHECK(a100.source.find("A100 Tensor Core GPU datasheet") != std::string::npos);
  CHECK(a100.gpu.gpu == "A100-SXM4-80GB");
  // 312 TFLOP/s = 3.12e14 FLOP/s; 2039 GB/s = 2.039e12 B/s; 79.15 GiB (what CUDA allocates of the 80 GB) =
  // floor(79.15 x 2^30) = 84,986,665,369 B, whole bytes.
  CHECK(a100.gpu.peak_bf16.raw() == doctest::Approx(3.12e14).epsilon(1e-15));
  CHECK(a100.gpu.peak_fp32.raw() == doctest::Approx(1.95e13).epsilon(1e-15));
  CHECK(a100.gpu.hbm_bandwidth.raw() == doctest::Approx(2.039e12).epsilon(1e-15));
  CHECK(a100.gpu.memory_capacity.raw() == 84986665369.0);
  CHECK(a100.gpu.gemm_efficiency == 0.75);
  // 8.4 us = 8.4e-6 s; 3.4 us; 14 us.
  CHECK(a100.collectives.ring_base_latency.raw() == doctest::Approx(8.4e-6).epsilon(1e-12));
  CHECK(a100.collectives.nvlink_step_latency.raw() == doctest::Approx(3.4e-6).epsilon(1e-12));
  CHECK(a100.collectives.network_step_latency.raw() == doctest::Approx(14e-6).epsilon(1e-12));
  CHECK(a100.collectives.nvlink_bus_efficiency == 0.77);

  const calibrate::HardwareProfile h100 = calibrate::load_profile("h100-sxm5-80gb");
  CHECK(h100.gpu.gpu == "H100-SXM5-80GB");
  CHECK(h100.gpu.peak_bf16.raw() == doctest::Approx(9.894e14).epsilon(1e-15));
  // 79.18 GiB = floor(79.18 x 2^30) = 85,018,877,624 B: below nvidia-smi's 81,559 MiB = 85,520,809,984 B.
  CHECK(h100.gpu.memory_capacity.raw() == 85018877624.0);
  CHECK(h100.gpu.memory_capacity.raw() < 81559.0 * 1048576);
  CHECK(h100.collectives.nvlink_bus_efficiency == 0.82);

  CHECK_FALSE(calibrate::load_builtin_profile("b200").has_value());
}

TEST_CASE("a profile file loads with its path as origin") {
  const calibrate::HardwareProfile p = calibrate::parse_profile(kProfile, "p.textproto");
  CHECK(p.origin == "p.textproto");
  CHECK(p.gpu.kernel_launch.raw() == 0);  // latencies may be 0
  CHECK(p.collectives.nvlink_bus_efficiency == 1);
}

TEST_CASE("bad profile files") {
  CHECK(error_of([] { calibrate::load_profile(kBad + "profile_negative_hbm.textproto"); }) ==
        kBad + "profile_negative_hbm.textproto:15:21: gpu.hbm_gbytes_per_s: -2039 must be > 0 (decimal GB/s)");
  CHECK(error_of([] { calibrate::load_profile(kBad + "profile_unknown_field.textproto"); }) ==
        kBad + "profile_unknown_field.textproto:14:3: gpu.tensor_tflops: unknown field \"tensor_tflops\" "
               "(GpuProfile has: gpu, peak_bf16_tflops, peak_fp16_tflops, peak_tf32_tflops, peak_fp32_tflops, "
               "hbm_gbytes_per_s, memory_capacity_gib, gemm_efficiency, hbm_efficiency, kernel_launch_us, gemm_table, "
               "hbm_curve, compute_slowdown_during_comm, sm_count, gemm_tile_m, gemm_tile_n, peak_fp8_tflops, "
        "flash_attention_fa2, flash_attention_fa3, flash_attention_triton)");
  CHECK(error_of([] { calibrate::load_profile("b200"); }) ==
        "b200: not a built-in profile (built-in: a100-sxm4-80gb, h100-sxm5-80gb, tpu-v4, a100-sxm4-40gb, h200-sxm-141gb, "
        "gb200, vtrain-a100) and no such "
        "file");
}

TEST_CASE("bad NCCL tuning factors name their field") {
  // The H100 profile with its CollNetDirect factor out of [0, 1] (0 reads as unset: no factor).
  std::string h100 =
      clustersim::testing::slurp(std::string(CLUSTERSIM_SOURCE_DIR) + "/calibrate/profiles/h100-sxm5-80gb.textproto");
  const std::string good = "collnet_direct_efficiency: 0.85";
  const std::size_t at = h100.find(good);
  REQUIRE(at != std::string::npos);
  const std::string error = profile_error(h100.replace(at, good.size(), "collnet_direct_efficiency: 1.5"));
  CHECK(error.starts_with("p.textproto:"));
  CHECK(error.ends_with(": collectives.nccl.collnet_direct_efficiency: 1.5 is not in [0, 1] (0 = unset: no factor)"));
  // NVLSTree's per-channel row: 3 values (1 node, 2 nodes, more), none negative (NCCL's own 1-node entry is 0).
  const std::string row = "nvlstree_per_channel_gbytes_per_s: [0.0, 57.7, 45.5]";
  const std::string fresh =
      clustersim::testing::slurp(std::string(CLUSTERSIM_SOURCE_DIR) + "/calibrate/profiles/h100-sxm5-80gb.textproto");
  const std::size_t at_row = fresh.find(row);
  REQUIRE(at_row != std::string::npos);
  std::string two = fresh, negative = fresh;
  CHECK(profile_error(two.replace(at_row, row.size(), "nvlstree_per_channel_gbytes_per_s: [57.7, 45.5]"))
            .ends_with(": collectives.nccl.nvlstree_per_channel_gbytes_per_s: 2 values; needs 3 (1 node, 2 nodes, "
                       "more than 2 nodes)"));
  CHECK(profile_error(negative.replace(at_row, row.size(), "nvlstree_per_channel_gbytes_per_s: [0, -57.7, 45.5]"))
            .ends_with(": collectives.nccl.nvlstree_per_channel_gbytes_per_s[1]: -57.7 must be >= 0 (decimal GB/s)"));
  const calibrate::NcclTuning k = calibrate::load_profile("h100-sxm5-80gb").collectives.nccl;
  CHECK(k.nvlstree_per_channel_GBps == std::array<double, 3>{0.0, 57.7, 45.5});
  CHECK(k.nvlstree_nvlink_us[2] == 25);
  CHECK(k.nvlstree_net_us[2] == 20.9);
  CHECK(calibrate::load_profile("a100-sxm4-80gb").collectives.nccl.nvlstree_per_channel_GBps ==
        std::array<double, 3>{0.0, 0.0, 0.0});
}

TEST_CASE("bad inline profiles") {
  // proto3 scalars: an absent number reads as 0, so "missing or zero" points at the enclosing message.
  CHECK(profile_error(replaced("  peak_tf32_tflops: 50\n", "")) ==
        "p.textproto:3:1: gpu.peak_tf32_tflops: missing or zero; must be > 0 (1e12 FLOP/s)");
  CHECK(profile_error(replaced("memory_capacity_gib: 40", "memory_capacity_gib: 0")) ==
        "p.textproto:10:24: gpu.memory_capacity_gib: missing or zero; must be > 0 (GiB)");
  CHECK(profile_error(replaced("gemm_efficiency: 0.5", "gemm_efficiency: 1.5")) ==
        "p.textproto:11:20: gpu.gemm_efficiency: 1.5 is not in (0, 1] (a fraction of peak)");
  CHECK(profile_error(replaced("  nvlink_bus_efficiency: 1\n", "")) ==
        "p.textproto:15:1: collectives.nvlink_bus_efficiency: missing or zero; must be in (0, 1] (a fraction of "
        "peak)");
  CHECK(profile_error(replaced("network_step_latency_us: 1", "network_step_latency_us: -1")) ==
        "p.textproto:18:28: collectives.network_step_latency_us: -1 must be >= 0 (microseconds)");
  CHECK(profile_error(replaced("peak_fp32_tflops: 10", "peak_fp32_tflops: inf")) ==
        "p.textproto:8:21: gpu.peak_fp32_tflops: inf is not a finite number");
  // Values no real GPU has are refused at their field (they simulated steps of months, or MFU over 100 %):
  // a scalar efficiency under 0.1 % of peak, a peak under 0.01 TFLOP/s, an FP8 peak under the BF16 one (FP8 tensor
  // cores run at twice the 16-bit rate), over 1,024 SMs, NVLS at under 1 GB/s.
  CHECK(profile_error(replaced("gemm_efficiency: 0.5", "gemm_efficiency: 1e-300")) ==
        "p.textproto:11:20: gpu.gemm_efficiency: 1e-300 is below 0.001 of peak: no kernel or link runs that far under "
        "its peak (a fraction, not a percentage)");
  CHECK(profile_error(replaced("peak_fp32_tflops: 10", "peak_fp32_tflops: 0.001")) ==
        "p.textproto:8:21: gpu.peak_fp32_tflops: 0.001 TFLOP/s is outside [0.01, 1e+05] TFLOP/s (GPUs since 2010 "
        "peak at 1 to 5,000 TFLOP/s)");
  CHECK(profile_error(replaced("  kernel_launch_us: 0\n", "  kernel_launch_us: 0\n  peak_fp8_tflops: 50\n")) ==
        "p.textproto:14:20: gpu.peak_fp8_tflops: 50 is below peak_bf16_tflops 100 (FP8 tensor cores run at twice the "
        "16-bit rate; 0 = none)");
  CHECK(profile_error(replaced("  kernel_launch_us: 0\n", "  kernel_launch_us: 0\n  sm_count: 65536\n")) ==
        "p.textproto:14:13: gpu.sm_count: 65536 SMs is outside [0, 1024] SMs (an H100 has 132, a B200 148)");
  CHECK(profile_error(
            replaced("  network_bus_efficiency: 0.5\n", "  network_bus_efficiency: 0.5\n  nvls_gbytes_per_s: 0.5\n")) ==
        "p.textproto:21:22: collectives.nvls_gbytes_per_s: 0.5 GB/s is outside [1, 1e+05] GB/s (NVLS AllReduce runs at "
        "hundreds of GB/s per GPU; 0 = no NVLS)");
  // List syntax: protobuf records a repeated scalar's name once, so element [2]'s error pointed at the enclosing
  // `nccl {` line; it points at the element's value now (line and column found in the text below).
  {
    std::string t = *calibrate::builtin_profile_source("h100-sxm5-80gb");
    const std::string list = "tree_per_channel_gbytes_per_s: [38.7, 41.4, 36.0]";
    REQUIRE(t.find(list) != std::string::npos);
    t.replace(t.find(list), list.size(), "tree_per_channel_gbytes_per_s: [38.7, 41.4, -1]");
    const std::size_t at = t.find("-1]");
    const std::size_t line =
        static_cast<std::size_t>(std::count(t.begin(), t.begin() + static_cast<long>(at), '\n')) + 1;
    const std::size_t column = at - t.rfind('\n', at);
    CHECK(error_of([&] { calibrate::parse_profile(t, "p.textproto"); })
              .starts_with("p.textproto:" + std::to_string(line) + ":" + std::to_string(column) +
                           ": collectives.nccl.tree_per_channel_gbytes_per_s[2]"));
  }
  // The tuning constants' NCCL release is digits and dots.
  {
    std::string t = *calibrate::builtin_profile_source("h100-sxm5-80gb");
    const std::string good = "nccl_version: \"2.30.7\"";
    REQUIRE(t.find(good) != std::string::npos);
    t.replace(t.find(good), good.size(), "nccl_version: \"2.30.x\"");
    CHECK(error_of([&] { calibrate::parse_profile(t, "p.textproto"); })
              .find("collectives.nccl.nccl_version: \"2.30.x\" is not an NCCL release number") != std::string::npos);
  }
  // Finite but past any hardware: 1e308 GiB is inf bytes once multiplied by 2^30.
  CHECK(profile_error(replaced("memory_capacity_gib: 40", "memory_capacity_gib: 1e308")) ==
        "p.textproto:10:24: gpu.memory_capacity_gib: 1e+308 is too large (at most 1e+12 GiB)");
  CHECK(profile_error(replaced("network_step_latency_us: 1", "network_step_latency_us: 2e12")) ==
        "p.textproto:18:28: collectives.network_step_latency_us: 2e+12 is too large (at most 1e+12 microseconds)");
  // A unit that starts with a number is read as a multiplier.
  CHECK(profile_error(replaced("peak_fp32_tflops: 10", "peak_fp32_tflops: 2e12")) ==
        "p.textproto:8:21: gpu.peak_fp32_tflops: 2e+12 is too large (at most 1e+12 x 1e12 FLOP/s)");
  // A fitted band's alpha has the latencies' cap too (1e300 passed, and the run's time overflowed).
  {
    std::string t = clustersim::testing::slurp(std::filesystem::path(CLUSTERSIM_SOURCE_DIR) /
                                               "tests/data/calibrate/bad_band.textproto");
    t.replace(t.find("max_bytes: 65536"), 16, "max_bytes: 1073741824");
    t.replace(t.find("alpha_us: 10"), 12, "alpha_us: 1e300");
    CHECK(error_of([&] { calibrate::parse_profile(t, "p.textproto"); }) ==
          "p.textproto:26:15: collectives.bands[0].alpha_us: 1e+300 is too large (at most 1e+12 microseconds)");
  }
  CHECK(profile_error(replaced("provenance { source: \"made up for a test\" }\n", "")) ==
        "p.textproto: provenance.source: missing; a profile must say where its numbers come from");
  CHECK(profile_error("name: \"x\" provenance { source: \"s\" }") ==
        "p.textproto: gpu: missing (the GPU's peaks, memory and efficiencies)");
  CHECK(profile_error(replaced("name: \"test\"", "name: test")) ==
        "p.textproto:1:7: name: Expected string, got: test");
  // The FP8 peak is optional (0 = no FP8 tensor cores), never negative; an FP8 GEMM-table entry needs it.
  CHECK(calibrate::parse_profile(kProfile, "p.textproto").gpu.peak_fp8.raw() == 0);
  CHECK(calibrate::parse_profile(replaced("  kernel_launch_us: 0\n", "  kernel_launch_us: 0\n  peak_fp8_tflops: 200\n"),
                                 "p.textproto")
            .gpu.peak_fp8.raw() == 200e12);
  CHECK(profile_error(replaced("  kernel_launch_us: 0\n", "  kernel_launch_us: 0\n  peak_fp8_tflops: -5\n")) ==
        "p.textproto:14:20: gpu.peak_fp8_tflops: -5 must be >= 0 (1e12 FLOP/s; 0 = no FP8 tensor cores)");
  const std::string fp8_entry = "  gemm_table { m: 64 n: 64 k: 64 dtype: FP8 efficiency: 0.5 }\n";
  CHECK(profile_error(replaced("  kernel_launch_us: 0\n", "  kernel_launch_us: 0\n" + fp8_entry)) ==
        "p.textproto:14:41: gpu.gemm_table[0].dtype: FP8, but gpu.peak_fp8_tflops is 0 (no FP8 tensor cores); give the "
        "FP8 peak or drop the entry");
  // FlashAttention kernel rates are fractions of the 16-bit peak: both passes in [0.001, 1].
  CHECK(profile_error(replaced("  kernel_launch_us: 0\n",
                               "  kernel_launch_us: 0\n  flash_attention_fa2 { forward: 1.5 backward: 0.5 }\n")) ==
        "p.textproto:14:34: gpu.flash_attention_fa2.forward: 1.5 is not in [0.001, 1] (a fraction of the 16-bit dense "
        "peak; leave the kernel out where no rate is published)");
  CHECK(profile_error(replaced("  kernel_launch_us: 0\n",
                               "  kernel_launch_us: 0\n  flash_attention_triton { forward: 0.3 }\n")) ==
        "p.textproto:14:3: gpu.flash_attention_triton.backward: 0 is not in [0.001, 1] (a fraction of the 16-bit dense "
        "peak; leave the kernel out where no rate is published)");
}

TEST_CASE("ParsedText locates fields for later validation errors") {
  clustersim::schema::HardwareProfile message;
  const calibrate::ParsedText parsed =
      calibrate::parse_message(kProfile, "p.textproto", calibrate::InputSyntax::kTextFormat, message);
  const auto at = [&](const char* path) {
    const calibrate::TextLocation l = parsed.location(path);
    return std::to_string(l.line) + ":" + std::to_string(l.column);
  };
  CHECK(at("name") == "1:7");                    // scalars: where the value starts
  CHECK(at("gpu") == "3:1");                     // messages: where the name starts
  CHECK(at("gpu.hbm_gbytes_per_s") == "9:21");   // "  hbm_gbytes_per_s: 1000"
  CHECK(at("provenance.date") == "2:1");         // absent: the enclosing message
  CHECK(at("gpu.no_such_field") == "3:1");
  CHECK(at("no_such_field") == "0:0");
  CHECK(error_of([&] { parsed.fail("gpu.gpu", "bad"); }) == "p.textproto:4:8: gpu.gpu: bad");

  clustersim::schema::HardwareProfile from_json;
  const calibrate::ParsedText json = calibrate::parse_message(R"({"gpu": {"gpu": "X"}})", "p.json",
                                                              calibrate::InputSyntax::kJson, from_json);
  CHECK(from_json.gpu().gpu() == "X");
  // {"gpu": {"gpu": "X"}}: the inner key starts at column 10, its value "X" at 17.
  CHECK(json.location("gpu").line == 1);
  CHECK(json.location("gpu").column == 2);       // a message: where its key starts
  CHECK(json.location("gpu.gpu").column == 17);  // a scalar: where its value starts
  CHECK(error_of([&] { json.fail("gpu.gpu", "bad"); }) == "p.json:1:17: gpu.gpu: bad");

  CHECK(calibrate::syntax_for_path("a/b.JSON") == calibrate::InputSyntax::kJson);
  CHECK(calibrate::syntax_for_path("a/b.textproto") == calibrate::InputSyntax::kTextFormat);
  CHECK(calibrate::format_number(300) == "300");
  CHECK(calibrate::format_number(0.77) == "0.77");
  CHECK(calibrate::format_number(-5) == "-5");
}
