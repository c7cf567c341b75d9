// Calibration fitting (calibrate/fit.h): SHA-256 against FIPS 180-4 test vectors, the weighted α-β fit on
// hand-made points whose answer is exact, the GEMM table / HBM curve / launch fits, determinism, the band
// lookup rule, the compute model's use of the tables, and the input errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "calibrate/fit.h"
#include "calibrate/hardware_profile.h"
#include "calibrate/profile.pb.h"
#include "sim/input_error.h"
#include "tests/test_support.h"
#include "workloads/compute_model.h"
#include "workloads/nccl_model.h"

namespace {

namespace calibrate = clustersim::calibrate;
using clustersim::testing::input_error_of;

const std::string kData = std::string(CLUSTERSIM_SOURCE_DIR) + "/tests/data/calibrate/";

calibrate::FitResult fit_files(const std::vector<std::string>& names, calibrate::FitOptions options = {}) {
  std::vector<calibrate::RawInput> raws;
  for (const std::string& n : names) raws.push_back(calibrate::read_raw(kData + n));
  return calibrate::fit_profile(raws, options);
}

const calibrate::BandFit* band(const calibrate::FitResult& r, std::uint64_t min_bytes) {
  for (const calibrate::BandFit& b : r.bands)
    if (b.min_bytes == min_bytes) return &b;
  return nullptr;
}

}  // namespace

TEST_CASE("sha256: FIPS 180-4 / NIST test vectors") {
  // SHA-256("") and SHA-256("abc") from FIPS 180-4 examples; the 56-byte message needs a second padding block.
  CHECK(calibrate::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(calibrate::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(calibrate::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // One million 'a' (FIPS 180-4 appendix B.3): many full blocks.
  CHECK(calibrate::sha256_hex(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("fit: two exact points give alpha and busbw exactly, flat band is latency-only, one size is skipped") {
  const calibrate::FitResult r = fit_files({"two_points.textproto"});
  CHECK(r.base_name == "h100-sxm5-80gb");  // from provenance.gpu "NVIDIA H100 80GB HBM3"
  REQUIRE(r.bands.size() == 3);
  // [1 MiB, 64 MiB): t = 10 us + size*1.75 / (100 GB/s), see the fixture's comment.
  const calibrate::BandFit* line = band(r, 1 << 20);
  REQUIRE(line);
  CHECK(line->fitted);
  CHECK(line->op == "all_reduce");
  CHECK(line->algorithm == "ring");
  CHECK(line->protocol == "Simple");
  CHECK(line->link == "NVLINK");
  CHECK(line->max_bytes == std::optional<std::uint64_t>(64ull << 20));
  CHECK(line->alpha_us == doctest::Approx(10).epsilon(1e-9));
  CHECK(line->busbw_GBps == doctest::Approx(100).epsilon(1e-9));
  CHECK(line->max_relative_error < 1e-9);
  CHECK(line->points == 2);
  // [0, 64 KiB): 30 us at 1 KiB and 2 KiB: slope 0 → latency only, alpha = 30, busbw = inf.
  const calibrate::BandFit* flat = band(r, 0);
  REQUIRE(flat);
  CHECK(flat->fitted);
  CHECK(flat->alpha_us == doctest::Approx(30));
  CHECK(std::isinf(flat->busbw_GBps));
  // [64 KiB, 1 MiB): one size (256 KiB) → skipped, not written.
  const calibrate::BandFit* one = band(r, 64 << 10);
  REQUIRE(one);
  CHECK_FALSE(one->fitted);
  CHECK(r.profile.collectives().bands_size() == 2);

  // The written profile loads, and holds what was fitted.
  const calibrate::HardwareProfile p = calibrate::parse_profile(r.profile_text, "fitted.textproto");
  CHECK(p.name == "h100-sxm5-80gb-fitted");
  CHECK(p.provenance.gpu == "NVIDIA H100 80GB HBM3");
  CHECK(p.provenance.driver_version == "550.54.15");
  CHECK(p.provenance.cuda_version == "12.4");
  CHECK(p.provenance.nccl_version == "2.26.2");
  CHECK(p.provenance.date == "2026-12-01");
  CHECK(p.provenance.hosts == 1);
  CHECK(p.provenance.raw_sha256 == calibrate::sha256_hex(clustersim::testing::slurp(kData + "two_points.textproto")));
  REQUIRE(p.collectives.bands.size() == 2);
  CHECK(std::isinf(p.collectives.bands[0].busbw.raw()));
  CHECK(to_us(p.collectives.bands[1].alpha) == doctest::Approx(10).epsilon(1e-9));
  CHECK(p.collectives.bands[1].busbw.raw() == doctest::Approx(100e9).epsilon(1e-9));
  // Launch: median of 2.5, 3.5, 3.0 = 3.0 us.
  CHECK(to_us(p.gpu.kernel_launch) == doctest::Approx(3.0));
  // GEMM and memory samples are back-to-back periods; the simulator adds the 3.0 us launch to each kernel's
  // execution, so the fit keeps period − 3 us as the execution.
  // 4096^3 at 742.05 TFLOP/s (0.75 of 989.4): period 2·4096³ / 742.05e12 = 185.2152 us, execution 182.2152 us,
  // efficiency 0.75 · 185.2152 / 182.2152 = 0.762348.
  // 1024^3 at 494.7 and 395.76 TFLOP/s: periods 4.340982 and 5.426227 us, mean 4.883604, execution 1.883604 us:
  // 2·1024³ / 1.883604e-6 / 989.4e12 = 1.1523 of the peak, capped at 1 (and noted).
  REQUIRE(p.gpu.gemm_table.size() == 2);
  CHECK(p.gpu.gemm_table[0].m == 1024);
  CHECK(p.gpu.gemm_table[0].efficiency == 1.0);
  CHECK(p.gpu.gemm_table[1].m == 4096);
  CHECK(p.gpu.gemm_table[1].efficiency == doctest::Approx(0.762348).epsilon(1e-6));
  CHECK(std::count_if(r.notes.begin(), r.notes.end(), [](const std::string& n) {
          return n == "GEMM 1024x1024x1024 BF16: measured 1.152 of the base's peak; capped at 1";
        }) == 1);
  // HBM: the two hbm_stream points. 1 MiB at 1000 GB/s is a 1.048576 us period, shorter than the launch: capped
  // at the 3350 GB/s peak. 1 GiB at 3000 GB/s: period 357.9139 us, execution 354.9139 us, 3025.358 GB/s;
  // hbm_efficiency 3025.358 / 3350.
  REQUIRE(p.gpu.hbm_curve.size() == 2);
  CHECK(p.gpu.hbm_curve[0].bandwidth.raw() == doctest::Approx(3350e9));
  CHECK(p.gpu.hbm_curve[1].bandwidth.raw() == doctest::Approx(3025.358e9).epsilon(1e-6));
  CHECK(p.gpu.hbm_efficiency == doctest::Approx(3025.358 / 3350.0).epsilon(1e-6));
  // The simulator gives the measured periods back: the 4096^3 GEMM (math-bound: 3·4096²·2 B = 100.7 MB is 33 us at
  // 3025 GB/s) 182.2152 + 3 = 185.2152 us; a 1 GiB elementwise kernel 354.9139 + 3 = 357.9139 us.
  namespace w = clustersim::workloads;
  CHECK(to_us(w::gemm_time(4096, 4096, 4096, clustersim::bytes(3 * 4096.0 * 4096 * 2), p.gpu, w::Precision::kBF16)) ==
        doctest::Approx(2.0 * 4096 * 4096 * 4096 / 742.05e12 * 1e6).epsilon(1e-9));
  w::Op copy;
  copy.kind = w::OpKind::kElementwise;
  copy.bytes = clustersim::GiB(1);
  CHECK(to_us(w::op_time(copy, p.gpu, w::Precision::kBF16)) == doctest::Approx(1073741824.0 / 3000e3).epsilon(1e-9));
  // Not measured: from the base.
  CHECK(to_TFLOPps(p.gpu.peak_bf16) == doctest::Approx(989.4));
  CHECK(p.gpu.gemm_efficiency == calibrate::load_builtin_profile("h100-sxm5-80gb")->gpu.gemm_efficiency);
  CHECK(p.gpu.gemm_efficiency == doctest::Approx(0.56));  // the H100 profile's since 13443e0 (was 0.7)
  CHECK(p.collectives.nccl.present);
  CHECK(p.gpu.compute_slowdown_during_comm == 1.0);
}

TEST_CASE("fit: deterministic, binary raw input fits the same as text") {
  const calibrate::FitResult a = fit_files({"two_points.textproto"});
  const calibrate::FitResult b = fit_files({"two_points.textproto"});
  CHECK(a.profile_text == b.profile_text);
  // The same measurements as binary protobuf: same bands and tables (only the hash and file list differ).
  calibrate::RawInput text = calibrate::read_raw(kData + "two_points.textproto");
  std::string binary;
  REQUIRE(text.raw->SerializeToString(&binary));
  std::vector<calibrate::RawInput> raws;
  raws.push_back(calibrate::parse_raw(binary, "two_points.pb"));
  const calibrate::FitResult c = calibrate::fit_profile(raws, {});
  CHECK(c.profile.collectives().SerializeAsString() == a.profile.collectives().SerializeAsString());
  CHECK(c.profile.gpu().SerializeAsString() == a.profile.gpu().SerializeAsString());
  CHECK(c.raw_sha256 == calibrate::sha256_hex(binary));
}

TEST_CASE("fit: a built-in base of another GPU than the measured one is refused") {
  // two_points.textproto measured "NVIDIA H100 80GB HBM3" (built-in h100-sxm5-80gb): its bands on the TPU v4's
  // peaks would describe no machine.
  calibrate::FitOptions options;
  options.base = "tpu-v4";
  std::vector<calibrate::RawInput> raws;
  raws.push_back(calibrate::read_raw(kData + "two_points.textproto"));
  std::string error;
  try {
    calibrate::fit_profile(raws, options);
  } catch (const clustersim::InputError& e) {
    error = e.what();
  }
  CHECK(error == "command line: --base: tpu-v4 is a profile of TPUv4, but " + kData +
                     "two_points.textproto measured \"NVIDIA H100 80GB HBM3\" (built-in profile h100-sxm5-80gb)");
  options.base = "h100-sxm5-80gb";
  CHECK(calibrate::fit_profile(raws, options).base_name == "h100-sxm5-80gb");
}

TEST_CASE("fit: the recorded nccl-tests import fits four bands of ring all_reduce on NVLink") {
  const calibrate::FitResult r = fit_files({"h100_8gpu_allreduce_ring.raw.textproto"});
  REQUIRE(r.bands.size() == 4);
  for (const calibrate::BandFit& b : r.bands) {
    CHECK(b.fitted);
    CHECK(b.protocol == "default");
    CHECK(b.link == "NVLINK");
    // The relative-error weights keep every band's worst point within 15% (printed by `fit`).
    CHECK(b.max_relative_error < 0.15);
  }
  // Plateau band [64 MiB, inf): busbw near the measured 368 GB/s at 8 GiB.
  CHECK(band(r, 64ull << 20)->busbw_GBps == doctest::Approx(364.7).epsilon(0.01));
  const std::string report = calibrate::fit_report(r);
  CHECK(report.find("all_reduce     ring     default NVLINK     8 [64 MiB, inf)") != std::string::npos);
  for (const calibrate::BandFit& b : r.bands) CHECK(b.ranks == 8);  // the run's GPU count
}

TEST_CASE("fit: bad input is an InputError naming the file and field") {
  CHECK(input_error_of([] { fit_files({"bad_time.textproto"}); }) ==
        kData +
            "bad_time.textproto:5:24: collectives[1].time_us: -41 must be a number of microseconds in [1e-3, 1e12]");
  // Measured times far outside what a benchmark times are refused at their field (1e-300 µs made the fit's sums NaN,
  // reported against the fitted profile; 1e300 µs of launch overhead too).
  const auto dir = clustersim::testing::scratch_dir("fit-range");
  {
    std::ofstream(dir / "tiny.textproto")
        << "provenance { gpu: \"NVIDIA H100 80GB HBM3\" gpus: 8 hosts: 1 }\n"
        << "collectives { op: \"all_reduce\" ranks: 8 nodes: 1 size_bytes: 1048576 time_us: 1e-300 }\n";
    std::ofstream(dir / "huge_size.textproto")
        << "provenance { gpu: \"NVIDIA H100 80GB HBM3\" gpus: 8 hosts: 1 }\n"
        << "collectives { op: \"all_reduce\" ranks: 8 nodes: 1 size_bytes: 1152921504606846976 time_us: 5 }\n";
    std::ofstream(dir / "huge_gemm.textproto") << "provenance { gpu: \"NVIDIA H100 80GB HBM3\" gpus: 1 hosts: 1 }\n"
                                               << "gemm { m: 18446744073709551615 n: 1 k: 1 dtype: BF16 tflops: 1 }\n";
    std::ofstream(dir / "slow_launch.textproto")
        << "provenance { gpu: \"NVIDIA H100 80GB HBM3\" gpus: 1 hosts: 1 }\n"
        << "launch { kind: \"empty_kernel_back_to_back\" overhead_us: 1e300 launches: 10 }\n";
  }
  auto fit_path = [](const std::filesystem::path& path) {
    std::vector<calibrate::RawInput> raws;
    raws.push_back(calibrate::read_raw(path.string()));
    calibrate::fit_profile(raws, {});
  };
  CHECK(input_error_of([&] { fit_path(dir / "tiny.textproto"); }) ==
        (dir / "tiny.textproto").string() +
            ":2:79: collectives[0].time_us: 1e-300 must be a number of microseconds in [1e-3, 1e12]");
  CHECK(input_error_of([&] { fit_path(dir / "slow_launch.textproto"); }) ==
        (dir / "slow_launch.textproto").string() +
            ":2:57: launch[0].overhead_us: 1e+300 must be a number of microseconds in [0, 1e12]");
  // Sizes beyond 2^50 B, as logs and `collective --sizes`; GEMMs beyond cuBLAS's int dimensions.
  CHECK(input_error_of([&] {
          fit_path(dir / "huge_size.textproto");
        }).ends_with(": collectives[0].size_bytes: 1152921504606846976 B is more than 2^50 B (1 PiB)"));
  CHECK(input_error_of([&] {
          fit_path(dir / "huge_gemm.textproto");
        }).ends_with(": gemm[0]: m, n and k must be at most 2^31 - 1 (cuBLAS's int)"));
  // A band whose times are equal but for rounding fits latency only: the least-squares slope of equal times is
  // rounding (about 6e-35 µs/B here, 1.7e31 GB/s), which the profile refuses; 30.01 µs at every size is alpha.
  {
    std::ofstream flat(dir / "flat.textproto");
    flat << "provenance { gpu: \"NVIDIA H100 80GB HBM3\" gpus: 8 hosts: 1 }\n";
    for (int size = 1024; size <= 32768; size *= 2)
      flat << "collectives { op: \"all_reduce\" algorithm: \"ring\" protocol: \"Simple\" ranks: 8 nodes: 1 size_bytes: "
           << size << " time_us: 30.01 }\n";
  }
  {
    std::vector<calibrate::RawInput> raws;
    raws.push_back(calibrate::read_raw((dir / "flat.textproto").string()));
    const calibrate::FitResult flat = calibrate::fit_profile(raws, {});
    const calibrate::HardwareProfile fitted = calibrate::parse_profile(flat.profile_text, "flat-fitted.textproto");
    const calibrate::AlphaBetaBand* band =
        calibrate::find_band(fitted.collectives, "all_reduce", "ring", "Simple", calibrate::LinkKind::kNvlink, 4096, 8);
    REQUIRE(band != nullptr);
    CHECK(band->alpha.raw() == doctest::Approx(30.01e-6));
    CHECK(std::isinf(band->busbw.raw()));
  }
  std::filesystem::remove_all(dir);
  CHECK(input_error_of([] { fit_files({"no_usable.textproto"}); }) ==
        kData +
            "no_usable.textproto: collectives: no usable samples: nothing to fit (collectives need two sizes per "
            "band; GEMM, memory and launch samples need values > 0)");
  CHECK(input_error_of([] { fit_files({"unknown_gpu.textproto"}); }) ==
        "command line: --base: no built-in profile matches the measured GPU \"NVIDIA B200\"; choose the base profile "
        "with --base: a100-sxm4-80gb, h100-sxm5-80gb, tpu-v4, a100-sxm4-40gb, h200-sxm-141gb, gb200, vtrain-a100, "
        "or a profile file (or name the GPU when importing: import-nccl-tests --gpu NAME)");
  calibrate::FitOptions options;
  options.base = "no-such-profile";
  CHECK(input_error_of([&] { fit_files({"two_points.textproto"}, options); }) ==
        "command line: --base: \"no-such-profile\" is not a built-in profile (a100-sxm4-80gb, h100-sxm5-80gb, tpu-v4, "
        "a100-sxm4-40gb, h200-sxm-141gb, gb200, vtrain-a100) or a "
        "file");
  CHECK(input_error_of([] { calibrate::parse_raw(std::string("\x08\x96\x01garbage\xff", 11), "x.pb"); }) ==
        "x.pb: not a RawMeasurements binary protobuf (calibrate/raw.proto), nor text");
}

namespace {

// Two exact ring all_reduce points of 8 ranks on `hosts` hosts: t = 20 us + S·1.75 / 600 GB/s (busbw factor
// 2(n−1)/n = 1.75; 600 GB/s = 6e5 B/us): 1 MiB → 20 + 1835008/6e5 = 23.05835 us, 32 MiB → 20 + 58720256/6e5 =
// 117.86709 us. Plus `extra` samples.
calibrate::FitResult fit_text(const std::string& provenance, const std::string& extra, const std::string& base) {
  const std::string text = "provenance { " + provenance + " gpus: 8 }\n" +
                           "collectives { op: \"all_reduce\" algorithm: \"ring\" protocol: \"Simple\" ranks: 8 "
                           "size_bytes: 1048576 time_us: 23.0583466667 }\n"
                           "collectives { op: \"all_reduce\" algorithm: \"ring\" protocol: \"Simple\" ranks: 8 "
                           "size_bytes: 33554432 time_us: 117.867093333 }\n" +
                           extra;
  std::vector<calibrate::RawInput> raws;
  raws.push_back(calibrate::parse_raw(text, "raw.textproto"));
  calibrate::FitOptions options;
  options.base = base;
  return calibrate::fit_profile(raws, options);
}

}  // namespace

TEST_CASE("fit: a band's link kind follows the NVLink domain, which on GB200 NVL72 spans 18 hosts") {
  // 2 hosts of one NVL72 rack (hosts_per_nvlink_domain 18): ceil(2 / 18) = 1 domain, so NVLINK, the kind the
  // simulator asks for inside one rack; unset, each host is its own domain: 2 domains, NET, and a note says how
  // to say otherwise. 8 hosts of 4 per domain: 2 domains, NET, no note.
  const calibrate::FitResult rack = fit_text("gpu: \"NVIDIA GB200\" hosts: 2 hosts_per_nvlink_domain: 18", "", "gb200");
  REQUIRE(rack.bands.size() == 1);
  CHECK(rack.bands[0].link == "NVLINK");
  CHECK(rack.bands[0].alpha_us == doctest::Approx(20.0).epsilon(1e-6));
  CHECK(rack.bands[0].busbw_GBps == doctest::Approx(600.0).epsilon(1e-6));
  CHECK(rack.notes.empty());
  const calibrate::FitResult hosts = fit_text("gpu: \"NVIDIA GB200\" hosts: 2", "", "gb200");
  CHECK(hosts.bands[0].link == "NET");
  REQUIRE(hosts.notes.size() == 1);
  CHECK(hosts.notes[0].find("--hosts-per-nvlink-domain") != std::string::npos);
  const calibrate::FitResult two = fit_text("gpu: \"NVIDIA GB200\" hosts: 8 hosts_per_nvlink_domain: 4", "", "gb200");
  CHECK(two.bands[0].link == "NET");
  CHECK(two.notes.empty());
  // An H100 cluster of 2 hosts: NET, and no note (every DGX H100 is its own NVLink domain).
  CHECK(fit_text("gpu: \"NVIDIA H100 80GB HBM3\" hosts: 2", "", "").notes.empty());
}

TEST_CASE("fit: samples of NCCL algorithms clustersim does not model are skipped with a note, not refused") {
  // clustersim-bench's --algos can measure CollNetChain, which clustersim does not model: its sample leaves the ring
  // band of the 2 exact points alone (alpha 20 us, busbw 600 GB/s). NVLSTree it models: its 2 samples (any
  // spelling) fit their own band, t = alpha + S x 2(8 - 1)/8 / busbw through (1 MiB, 5 us) and (32 MiB, 50 us):
  // busbw = 1.75 x (33554432 - 1048576) B / 45 us = 1264.117 GB/s, alpha = 5 - 1.75 x 1048576 / 1264.117e3 =
  // 3.548387 us.
  const std::string extra =
      "collectives { op: \"all_reduce\" algorithm: \"nvlstree\" protocol: \"Simple\" ranks: 8 size_bytes: 1048576 "
      "time_us: 5 }\n"
      "collectives { op: \"all_reduce\" algorithm: \"NVLS_TREE\" protocol: \"Simple\" ranks: 8 size_bytes: 33554432 "
      "time_us: 50 }\n"
      "collectives { op: \"all_reduce\" algorithm: \"CollNetChain\" protocol: \"Simple\" ranks: 8 "
      "size_bytes: 1048576 time_us: 9 }\n";
  const calibrate::FitResult r = fit_text("gpu: \"NVIDIA H100 80GB HBM3\" hosts: 2", extra, "");
  REQUIRE(r.bands.size() == 2);
  const auto ring = r.bands[0].algorithm == "ring" ? r.bands[0] : r.bands[1];
  const auto nvlstree = r.bands[0].algorithm == "ring" ? r.bands[1] : r.bands[0];
  CHECK(ring.alpha_us == doctest::Approx(20.0).epsilon(1e-6));
  CHECK(ring.busbw_GBps == doctest::Approx(600.0).epsilon(1e-6));
  CHECK(nvlstree.algorithm == "nvlstree");
  CHECK(nvlstree.link == "NET");
  CHECK(nvlstree.busbw_GBps == doctest::Approx(1.75 * 32505856.0 / 45e3).epsilon(1e-6));
  CHECK(nvlstree.alpha_us == doctest::Approx(5 - 1.75 * 1048576.0 / (1.75 * 32505856.0 / 45.0)).epsilon(1e-6));
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0].find("1 collnetchain sample skipped") == 0);  // by algorithm name
}

TEST_CASE("fit: a PCIe or NVL card is not silently fitted on the SXM part's profile") {
  // "NVIDIA H100 PCIe" shares only the chip token with H100-SXM5-80GB, whose 989.4 BF16 TFLOP/s and 3.35 TB/s
  // the fit would keep (the PCIe card: 756 and 2.0): the base must be chosen.
  CHECK(input_error_of([] { fit_text("gpu: \"NVIDIA H100 PCIe\" hosts: 1", "", ""); })
            .find("command line: --base: the measured GPU \"NVIDIA H100 PCIe\" is a PCIe part, but the nearest "
                  "built-in profile, h100-sxm5-80gb, is H100-SXM5-80GB") == 0);
  CHECK(input_error_of([] { fit_text("gpu: \"NVIDIA H100 NVL\" hosts: 1", "", ""); }).find("is an NVL part") !=
        std::string::npos);
  CHECK(fit_text("gpu: \"NVIDIA H100 PCIe\" hosts: 1", "", "h100-sxm5-80gb").base_name == "h100-sxm5-80gb");
}

TEST_CASE("builtin_profile_for_gpu: driver device names pick the built-in profile") {
  CHECK(calibrate::builtin_profile_for_gpu("NVIDIA H100 80GB HBM3") == std::optional<std::string>("h100-sxm5-80gb"));
  CHECK(calibrate::builtin_profile_for_gpu("NVIDIA A100-SXM4-80GB") == std::optional<std::string>("a100-sxm4-80gb"));
  CHECK_FALSE(calibrate::builtin_profile_for_gpu("NVIDIA B200").has_value());
  CHECK_FALSE(calibrate::builtin_profile_for_gpu("").has_value());
}

namespace {

calibrate::AlphaBetaBand make_band(std::string op, std::string algo, std::string proto, std::uint64_t lo,
                                   std::optional<std::uint64_t> hi, double alpha_us) {
  calibrate::AlphaBetaBand b;
  b.op = std::move(op), b.algorithm = std::move(algo), b.protocol = std::move(proto);
  b.min_bytes = lo, b.max_bytes = hi, b.alpha = clustersim::microseconds(alpha_us);
  b.busbw = clustersim::GBps(100);
  return b;
}

}  // namespace

TEST_CASE("find_band: the op's own bands first (exact beats default), then another ring-family op") {
  using calibrate::LinkKind;
  calibrate::CollectiveConstants c;
  c.bands = {make_band("all_reduce", "ring", "default", 0, 1024, 1), make_band("all_reduce", "ring", "LL", 0, 1024, 2),
             make_band("all_reduce", "default", "LL", 0, 1024, 3), make_band("all_reduce", "tree", "Simple", 0, {}, 4),
             make_band("all_gather", "ring", "Simple", 1024, {}, 5)};
  auto alpha = [&](const char* op, const char* algo, const char* proto, std::uint64_t bytes,
                   LinkKind link = LinkKind::kNvlink) {
    const calibrate::AlphaBetaBand* b = calibrate::find_band(c, op, algo, proto, link, bytes, 8);
    return b ? to_us(b->alpha) : -1.0;
  };
  CHECK(alpha("all_reduce", "ring", "LL", 100) == 2);     // exact algorithm and protocol
  CHECK(alpha("all_reduce", "ring", "LL128", 100) == 1);  // exact algorithm, default protocol
  CHECK(alpha("all_reduce", "nvls", "LL", 100) == 3);     // default algorithm, exact protocol
  CHECK(alpha("all_reduce", "ring", "LL", 1024) == -1);   // [0, 1024) does not cover 1024; tree is another algo
  CHECK(alpha("all_reduce", "ring", "LL", 100, LinkKind::kNet) == -1);  // other link kind
  CHECK(alpha("all_reduce", "ring", "Simple", 4096) == 5);    // no all_reduce ring band: all_gather's, same algo
  CHECK(alpha("reduce_scatter", "ring", "LL128", 100) == 1);  // rule 2: all_reduce first
  CHECK(alpha("reduce_scatter", "tree", "Simple", 4096) == 4);
  CHECK(alpha("alltoall", "p2p", "Simple", 100) == -1);  // point-to-point never borrows
  // Rule 2 never takes an algorithm-"default" band: all_reduce default/LL is not used for all_gather nvls.
  CHECK(alpha("all_gather", "nvls", "LL", 100) == -1);
}

TEST_CASE("find_band: the communicator size decides after algorithm and protocol") {
  using calibrate::LinkKind;
  auto sized = [](std::uint32_t ranks, double alpha_us, std::string algo = "default") {
    calibrate::AlphaBetaBand b = make_band("all_reduce", std::move(algo), "default", 0, {}, alpha_us);
    b.ranks = ranks;
    return b;
  };
  calibrate::CollectiveConstants c;
  c.bands = {sized(2, 2), sized(8, 8), sized(4, 4)};
  auto alpha = [&](std::uint32_t ranks, const char* algo = "ring") {
    const calibrate::AlphaBetaBand* b = calibrate::find_band(c, "all_reduce", algo, "Simple", LinkKind::kNvlink, 100, ranks);
    return b ? to_us(b->alpha) : -1.0;
  };
  CHECK(alpha(2) == 2);  // measured on that size
  CHECK(alpha(4) == 4);
  CHECK(alpha(8) == 8);
  // Nearest in log2: 3 ranks is log2(3/2) = 0.58 from 2 and log2(4/3) = 0.42 from 4; 6 is 0.58 from 4 and 0.42
  // from 8; 16 and 64 take 8.
  CHECK(alpha(3) == 4);
  CHECK(alpha(6) == 8);
  CHECK(alpha(16) == 8);
  CHECK(alpha(64) == 8);
  // A band for any size (ranks 0) beats a band of another size, not one of the same size.
  c.bands.push_back(sized(0, 100));
  CHECK(alpha(8) == 8);
  CHECK(alpha(16) == doctest::Approx(100));
  // The algorithm/protocol preference comes first: an exact ring band of another size beats "default" of this.
  c.bands.push_back(sized(2, 22, "ring"));
  CHECK(alpha(8) == 22);
  CHECK(alpha(8, "tree") == 8);
}

TEST_CASE("profile: band, table and curve errors name the field") {
  const std::string base = *calibrate::builtin_profile_source("h100-sxm5-80gb");
  auto with = [&](const std::string& gpu_extra, const std::string& coll_extra) {
    std::string t = base;
    t.insert(t.find("  kernel_launch_us: 2\n") + 22, gpu_extra);
    t.insert(t.find("  nvls_gbytes_per_s"), coll_extra);
    return input_error_of([&] { calibrate::parse_profile(t, "p.textproto"); });
  };
  CHECK(with("",
             "  bands { op: \"all_reduce\" algorithm: \"ring\" protocol: \"Simple\" link: NVLINK min_bytes: 0 "
             "alpha_us: 1 busbw_gbytes_per_s: -5 }\n") ==
        "p.textproto:45:123: collectives.bands[0].busbw_gbytes_per_s: -5 must be > 0 (decimal GB/s)");
  CHECK(with("",
             "  bands { op: \"all_reduce\" algorithm: \"ring\" protocol: \"Simple\" min_bytes: 0 "
             "alpha_us: 1 busbw_gbytes_per_s: 5 }\n") ==
        "p.textproto:45:3: collectives.bands[0].link: missing; NVLINK (inside one NVLink domain) or NET (across "
        "domains)");
  CHECK(with("",
             "  bands { op: \"allreduce\" algorithm: \"ring\" protocol: \"Simple\" link: NET min_bytes: 0 "
             "alpha_us: 1 busbw_gbytes_per_s: 5 }\n") ==
        "p.textproto:45:15: collectives.bands[0].op: \"allreduce\" is not a collective; one of all_reduce, "
        "reduce_scatter, all_gather, broadcast, reduce, alltoall, sendrecv");
  CHECK(with("",
             "  bands { op: \"all_reduce\" algorithm: \"ring\" protocol: \"Simple\" link: NET min_bytes: 0 "
             "alpha_us: 1 busbw_gbytes_per_s: 5 }\n"
             "  bands { op: \"all_reduce\" algorithm: \"ring\" protocol: \"Simple\" link: NET min_bytes: 64 "
             "alpha_us: 1 busbw_gbytes_per_s: 5 }\n") ==
        "p.textproto:46:86: collectives.bands[1].min_bytes: overlaps collectives.bands[0] of the same op, algorithm, "
        "protocol, link and ranks; bands of one kind must not overlap");
  CHECK(with("",
             "  bands { op: \"all_reduce\" algorithm: \"ring\" protocol: \"Simple\" link: NET min_bytes: 0 "
             "alpha_us: 1 busbw_gbytes_per_s: 5 ranks: 1 }\n") ==
        "p.textproto:45:129: collectives.bands[0].ranks: 1 is not a communicator size; 0 (any size) or the GPU "
        "count measured, >= 2");
  // The same size ranges measured on different communicator sizes are two kinds: no overlap.
  CHECK(with("",
             "  bands { op: \"all_reduce\" algorithm: \"ring\" protocol: \"Simple\" link: NET min_bytes: 0 "
             "alpha_us: 1 busbw_gbytes_per_s: 5 ranks: 8 }\n"
             "  bands { op: \"all_reduce\" algorithm: \"ring\" protocol: \"Simple\" link: NET min_bytes: 64 "
             "alpha_us: 1 busbw_gbytes_per_s: 5 ranks: 16 }\n") == "<no InputError thrown>");
  CHECK(with("  hbm_curve { bytes: 1024 gbytes_per_s: 10 }\n  hbm_curve { bytes: 1024 gbytes_per_s: 20 }\n", "") ==
        "p.textproto:21:22: gpu.hbm_curve[1].bytes: 1024 is not larger than the previous point's 1024; give the "
        "points in increasing size");
  CHECK(with("  gemm_table { m: 1 n: 1 k: 1 dtype: BF16 efficiency: 1.5 }\n", "") ==
        "p.textproto:20:55: gpu.gemm_table[0].efficiency: 1.5 is not in (0, 1] (a fraction of peak)");
  // JSON: an object in a list of values is named by its own index (protobuf's path named the element before it,
  // and the field twice).
  {
    const auto json_dir = clustersim::testing::scratch_dir("profile-json");
    const auto json_error = [&](const std::string& text) {
      std::ofstream(json_dir / "p.json") << text;
      return input_error_of([&] { calibrate::load_profile_file((json_dir / "p.json").string()); });
    };
    const std::string file = (json_dir / "p.json").string();
    CHECK(json_error("{\"collectives\": {\"nccl\": {\"llMaxBusGbytesPerS\": [1, 2, {}]}}}") ==
          file + ":1:56: collectives.nccl.ll_max_bus_gbytes_per_s[2]: expected one value, found an object");
    CHECK(json_error("{\"collectives\": {\"nccl\": {\"llMaxBusGbytesPerS\": [{}]}}}") ==
          file + ":1:50: collectives.nccl.ll_max_bus_gbytes_per_s[0]: expected one value, found an object");
    std::filesystem::remove_all(json_dir);
  }
  // Beyond what hardware does: a finite bus bandwidth above 1e12 GB/s (inf is the latency-only band), a GEMM
  // larger than cuBLAS's int dimensions, a memory below a MiB or above a PiB.
  CHECK(with("",
             "  bands { op: \"all_reduce\" algorithm: \"ring\" protocol: \"Simple\" link: NVLINK min_bytes: 0 "
             "alpha_us: 1 busbw_gbytes_per_s: 1e300 }\n") ==
        "p.textproto:45:123: collectives.bands[0].busbw_gbytes_per_s: 1e+300 GB/s is more than 1e12 GB/s (no "
        "interconnect is that fast; inf = latency only)");
  CHECK(with("  gemm_table { m: 18446744073709551615 n: 1 k: 1 dtype: BF16 efficiency: 0.5 }\n", "") ==
        "p.textproto:20:19: gpu.gemm_table[0].m: 18446744073709551615 is larger than 2^31 - 1, the most cuBLAS takes "
        "(an int)");
  for (const char* gib : {"1e-300", "4294967296"}) {
    std::string t = base;
    const std::size_t at = t.find("memory_capacity_gib: ") + 21;
    t.replace(at, t.find_first_of(" \n", at) - at, gib);
    CHECK(input_error_of([&] { calibrate::parse_profile(t, "p.textproto"); })
              .find("gpu.memory_capacity_gib: " + std::string(gib) +
                    " GiB is outside [0.0009765625, 1048576] GiB (a GPU's memory is megabytes to terabytes)") !=
          std::string::npos);
  }
  CHECK(with("  compute_slowdown_during_comm: 0.5\n", "") ==
        "p.textproto:20:33: gpu.compute_slowdown_during_comm: 0.5 must be >= 1 (1 = no slowdown; 0 = absent = 1)");
  // Tile and wave quantisation needs the SM count and the tile together. The h100 base has all three
  // (sm_count 132, tile 256 x 128): a second value of a singular field is a parse error, so the test clears
  // them first.
  auto without_tiles = [&](const std::string& gpu_extra) {
    std::string t = base;
    for (const std::string f : {"  sm_count: 132\n", "  gemm_tile_m: 256\n", "  gemm_tile_n: 128\n"})
      t.erase(t.find(f), f.size());
    t.insert(t.find("  kernel_launch_us: 2\n") + 22, gpu_extra);
    return input_error_of([&] { calibrate::parse_profile(t, "p.textproto"); });
  };
  CHECK(without_tiles("") == "<no InputError thrown>");
  CHECK(without_tiles("  sm_count: 108\n  gemm_tile_m: 256\n") ==
        "p.textproto:9:1: gpu.gemm_tile_n: missing; with sm_count set, the GEMM output tile's columns (e.g. 128) are "
        "needed");
  CHECK(without_tiles("  gemm_tile_m: 256\n  gemm_tile_n: 128\n") ==
        "p.textproto:9:1: gpu.sm_count: missing; a GEMM tile is given, so the SM count its waves run on is needed (0 = "
        "no tile or wave quantisation)");
}

TEST_CASE("compute model: tile and wave quantisation of GEMMs without a table") {
  namespace w = clustersim::workloads;
  // A100: 108 SMs, 256 x 128 tiles (a100-sxm4-80gb); one wave holds 108 x 256 x 128 = 3,538,944 output elements.
  const calibrate::GpuPerformance g = calibrate::load_builtin_profile("a100-sxm4-80gb")->gpu;
  REQUIRE(g.sm_count == 108);
  REQUIRE(g.gemm_tile_m == 256);
  REQUIRE(g.gemm_tile_n == 128);
  // 1024 x 2048: 4 x 16 = 64 tiles (8 x 8 the other way round), one wave: u = 2,097,152 / 3,538,944 = 0.592593
  // (in 128 x 128 tiles, 8 x 16 = 128 tiles = 2 waves of 108 x 16,384: the same u).
  CHECK(w::gemm_wave_utilization(g, 1024, 2048) == doctest::Approx(2097152.0 / 3538944));
  // 8192 x 8192: 32 x 64 = 2048 tiles, ceil(2048 / 108) = 19 waves = 2052 slots: u = 2048 / 2052 = 0.998051.
  CHECK(w::gemm_wave_utilization(g, 8192, 8192) == doctest::Approx(2048.0 / 2052));
  // Less than one wave of 256 x 128 tiles: 1024 x 1024 is 4 x 8 = 32 tiles (u 0.296); the library takes
  // 128 x 128 tiles instead, 8 x 8 = 64 tiles in one wave of 108 x 16,384 = 1,769,472: u = 1,048,576 / 1,769,472
  // = 0.592593. Ragged edges: 1000 x 1000 is ceil(7.8) x ceil(7.8) = 8 x 8 = 64 such tiles: u = 1e6 / 1,769,472 =
  // 0.565140.
  CHECK(w::gemm_wave_utilization(g, 1024, 1024) == doctest::Approx(1048576.0 / 1769472));
  CHECK(w::gemm_wave_utilization(g, 1000, 1000) == doctest::Approx(1e6 / 1769472));
  // The orientation decides when it changes the wave count: 1030 x 2700 in 256 x 128 tiles is ceil(4.02) x
  // ceil(21.1) = 5 x 22 = 110 tiles, 2 waves (u = 2,781,000 / 7,077,888 = 0.39); in 128 x 256 tiles ceil(8.05) x
  // ceil(10.5) = 9 x 11 = 99 tiles, one wave: u = 2,781,000 / 3,538,944 = 0.785830, the better one (128 x 128
  // tiles, 9 x 22 = 198 in 2 waves, give the same).
  CHECK(w::gemm_wave_utilization(g, 1030, 2700) == doctest::Approx(2781000.0 / 3538944));
  CHECK(w::gemm_wave_utilization(g, 2700, 1030) == doctest::Approx(2781000.0 / 3538944));
  // 2816 x 1280: 11 x 10 = 110 tiles (22 x 5 the other way round), 2 waves = 216 slots either way:
  // u = 3,604,480 / 7,077,888 = 0.509259.
  CHECK(w::gemm_wave_utilization(g, 2816, 1280) == doctest::Approx(3604480.0 / 7077888));
  // A batch multiplies the tiles: 16 heads of 512 x 512 are 16 x 2 x 4 = 128 tiles, 2 waves: u = 16 x 262,144 /
  // 7,077,888 = 0.592593.
  CHECK(w::gemm_wave_utilization(g, 512, 512, 16) == doctest::Approx(4194304.0 / 7077888));
  // op_time of that batched GEMM (given 1 byte of traffic, so the FLOPs decide): 2 x 16 x 512 x 512 x 64 FLOP =
  // 536,870,912 at 312e12 x 0.75 x 0.592593 = 138.67e12 FLOP/s = 3.8716 us, + 2 us launch.
  w::Op op;
  op.kind = w::OpKind::kGemm;
  op.m = 512;
  op.n = 512;
  op.k = 64;
  op.batch = 16;
  op.flops = clustersim::flops(2.0 * 16 * 512 * 512 * 64);
  op.bytes = clustersim::bytes(1.0);  // math-bound on purpose: only the FLOPs count
  CHECK(to_us(w::op_time(op, g, w::Precision::kBF16)) ==
        doctest::Approx(2.0 * 16 * 512 * 512 * 64 / (312e12 * 0.75 * 4194304.0 / 7077888) * 1e6 + 2).epsilon(1e-9));
  // No SM count: u = 1 and the profile's efficiency as before.
  calibrate::GpuPerformance off = g;
  off.sm_count = 0;
  CHECK(w::gemm_wave_utilization(off, 1024, 2048) == 1.0);
  CHECK(w::gemm_efficiency(off, 1024, 2048, 4096, w::Precision::kBF16) == 0.75);
  CHECK(w::gemm_efficiency(g, 1024, 2048, 4096, w::Precision::kBF16) == doctest::Approx(0.75 * 2097152.0 / 3538944));
}

TEST_CASE("compute model: GEMM table nearest in log space, HBM curve log-linear and clamped") {
  namespace w = clustersim::workloads;
  calibrate::GpuPerformance g = calibrate::load_builtin_profile("h100-sxm5-80gb")->gpu;
  // No table: the single gemm_efficiency 0.56 times the wave utilisation on 132 SMs: 4096 x 4096 in 256 x 128
  // tiles is 16 x 32 = 512 tiles (either way round), ceil(512 / 132) = 4 waves of 132 slots = 528 →
  // 0.56 x 512 / 528 = 0.543030; no curve: 3350 GB/s x 0.8 = 2680 GB/s.
  CHECK(w::gemm_efficiency(g, 4096, 4096, 4096, w::Precision::kBF16) == doctest::Approx(0.56 * 512 / 528));
  CHECK(w::hbm_bandwidth(g, clustersim::MiB(1)).raw() == doctest::Approx(2680e9));
  g.gemm_table = {{1024, 1024, 1024, calibrate::GemmDtype::kBF16, 0.45},
                  {8192, 8192, 8192, calibrate::GemmDtype::kBF16, 0.8},
                  {8192, 8192, 8192, calibrate::GemmDtype::kFP16, 0.6}};
  // log2 distances from 2048^3: to 1024^3 sqrt(3)·1, to 8192^3 sqrt(3)·2 → 1024^3's 0.45.
  CHECK(w::gemm_efficiency(g, 2048, 2048, 2048, w::Precision::kBF16) == 0.45);
  // 4096 x 4096 x 2048: to 1024^3 (2,2,1) → 9; to 8192^3 (1,1,2) → 6 → 0.8.
  CHECK(w::gemm_efficiency(g, 4096, 4096, 2048, w::Precision::kBF16) == 0.8);
  // Only entries of the GEMM's dtype count: FP16 has one entry, TF32 none.
  CHECK(w::gemm_efficiency(g, 1024, 1024, 1024, w::Precision::kFP16) == 0.6);
  // No TF32 entry: the fallback, 0.56 x utilisation: 1024 x 1024 is 4 x 8 = 32 tiles of 256 x 128, less than
  // a wave, so 128 x 128 tiles: 64 of 132 slots.
  CHECK(w::gemm_efficiency(g, 1024, 1024, 1024, w::Precision::kTF32) == doctest::Approx(0.56 * 64 / 132));
  g.hbm_curve = {{clustersim::MiB(1), clustersim::GBps(1000)}, {clustersim::GiB(1), clustersim::GBps(3000)}};
  // 32 MiB is halfway from 1 MiB to 1 GiB in log(bytes) (2^20, 2^25, 2^30): (1000 + 3000)/2 = 2000 GB/s.
  CHECK(w::hbm_bandwidth(g, clustersim::MiB(32)).raw() == doctest::Approx(2000e9));
  CHECK(w::hbm_bandwidth(g, clustersim::bytes(100)).raw() == doctest::Approx(1000e9));  // clamped below
  CHECK(w::hbm_bandwidth(g, clustersim::GiB(8)).raw() == doctest::Approx(3000e9));      // and above
  // gemm_time: 2·2048^3 FLOP / (989.4e12 · 0.45) = 17179869184 / 4.4523e14 = 38.586 us (math-bound:
  // 3·2048²·2 B = 25.2 MB at ~1.5 TB/s is 17 us), + 2 us launch.
  const double t =
      to_us(w::gemm_time(2048, 2048, 2048, clustersim::bytes(3 * 2048.0 * 2048 * 2), g, w::Precision::kBF16));
  CHECK(t == doctest::Approx(17179869184.0 / (989.4e12 * 0.45) * 1e6 + 2).epsilon(1e-9));
}

TEST_CASE("fit: PAT samples fit a pat band that loads and times NCCL's PAT choice") {
  // 8 hosts x 1 GPU, all_gather forced to PAT: two exact points of t = 40 us + S·(7/8) / 30 GB/s (3e4 B/us):
  // 1 MiB → 40 + 917504/3e4 = 70.58347 us, 4 MiB → 40 + 3670016/3e4 = 162.33387 us: alpha 40 us, busbw 30 GB/s in
  // the NET band [1 MiB, 64 MiB).
  const std::string pat =
      "collectives { op: \"all_gather\" algorithm: \"PAT\" protocol: \"Simple\" ranks: 8 nodes: 8 "
      "size_bytes: 1048576 time_us: 70.5834666667 }\n"
      "collectives { op: \"all_gather\" algorithm: \"PAT\" protocol: \"Simple\" ranks: 8 nodes: 8 "
      "size_bytes: 4194304 time_us: 162.333866667 }\n";
  const calibrate::FitResult r = fit_text("gpu: \"NVIDIA H100 80GB HBM3\" hosts: 8", pat, "");
  const calibrate::HardwareProfile p = calibrate::parse_profile(r.profile_text, "fitted.textproto");
  const calibrate::AlphaBetaBand* b =
      calibrate::find_band(p.collectives, "all_gather", "pat", "Simple", calibrate::LinkKind::kNet, 2 << 20, 8);
  REQUIRE(b != nullptr);
  CHECK(clustersim::to_us(b->alpha) == doctest::Approx(40).epsilon(1e-6));
  CHECK(b->busbw.raw() == doctest::Approx(30e9).epsilon(1e-6));
  // NCCL picks PAT for 2 MiB on 8 x 1 H100 (PAT 42.4 + 2097152/31875 = 108.2 us against ring LL128's
  // 73.5 + 2097152/44686 = 120.4 us; test_nccl_model.cpp has the constants), and the band times it:
  // 40 + 2097152 x 7/8 / 3e4 = 101.16693 us.
  namespace w = clustersim::workloads;
  clustersim::topology::ClusterSpec c;
  c.nodes = 8;
  c.gpus_per_node = 1;
  c.nvlink_per_direction = clustersim::GBps(450);
  c.nic_per_direction = clustersim::Gbitps(400);
  const w::CollectivePlan plan =
      w::CollectiveModel(c, p, {}).plan({w::CollectiveOp::kAllGather, {0, 1, 2, 3, 4, 5, 6, 7}, clustersim::MiB(2), 0});
  CHECK(plan.algorithm == w::Algorithm::kPat);
  CHECK(clustersim::to_us(plan.time) == doctest::Approx(40 + 2097152.0 * 7 / 8 / 3e4).epsilon(1e-6));
}

TEST_CASE("profile: a profile written before the CPU rows gets NCCL's multi-node LL caps and AMD overhead") {
  // Without ll_max_bus_amd_gbytes_per_s the block is the old layout: entries 2 and 3 of ll_max_bus were the GPU's
  // row (45, 35 on Hopper), which NCCL never reads across nodes; NCCL's CPU rows replace them.
  std::string text =
      clustersim::testing::slurp(std::string(CLUSTERSIM_SOURCE_DIR) + "/calibrate/profiles/h100-sxm5-80gb.textproto");
  const auto cut = [&](const std::string& line) {
    const std::size_t at = text.find(line);
    REQUIRE(at != std::string::npos);
    text.erase(at, text.find('\n', at) + 1 - at);
  };
  cut("    ll_max_bus_amd_gbytes_per_s:");
  cut("    net_overhead_amd_us:");
  text.replace(text.find("ll_max_bus_gbytes_per_s: [141.0, 39.0, 20.4]"), 45,
               "ll_max_bus_gbytes_per_s: [141.0, 45.0, 35.0]");
  const calibrate::HardwareProfile p = calibrate::parse_profile(text, "old.textproto");
  CHECK(p.collectives.nccl.ll_max_bus_GBps == std::array<double, 3>{141.0, 39.0, 20.4});
  CHECK(p.collectives.nccl.ll_max_bus_amd_GBps == std::array<double, 2>{22.5, 19.0});
  CHECK(p.collectives.nccl.net_overhead_amd_us == 2.0);
}
