// The built-in H200 and GB200 profiles against their datasheet figures, and the study
// scenarios/gpu-generations (LLaMA-3 70B on 144 H100 / H200 / GB200): what its README's numbers rest on.
#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "calibrate/fit.h"
#include "calibrate/hardware_profile.h"
#include "cli/scenario_loader.h"
#include "workloads/iteration_result.h"

using namespace clustersim;

namespace {

const std::string kDir = std::string(CLUSTERSIM_SOURCE_DIR) + "/scenarios/gpu-generations/";
constexpr double kMiB = 1048576.0;  // 2^20 B

workloads::Scenario analytical(const std::string& file) {
  workloads::Scenario sc = cli::load_scenario_file(kDir + file);
  sc.fidelity = workloads::Fidelity::kAnalytical;  // memory does not depend on the fidelity; this is faster
  return sc;
}

}  // namespace

TEST_CASE("built-in h200-sxm-141gb: H100 SXM compute, HBM3e figures of the H200 datasheet") {
  const calibrate::HardwareProfile h100 = calibrate::load_profile("h100-sxm5-80gb");
  const calibrate::HardwareProfile h200 = calibrate::load_profile("h200-sxm-141gb");
  CHECK(h200.origin == "built-in");
  CHECK(h200.gpu.gpu == "H200-SXM-141GB");  // the gpu of topology/presets/hgx-h200.textproto
  // Datasheet 1,979 TFLOP/s BF16 with sparsity = 2 x 989.4 dense (the H100 SXM's); TF32 989 sparse = 2 x 494.7.
  CHECK(h200.gpu.peak_bf16.raw() == doctest::Approx(9.894e14).epsilon(1e-12));
  CHECK(h200.gpu.peak_fp16.raw() == doctest::Approx(9.894e14).epsilon(1e-12));
  CHECK(h200.gpu.peak_tf32.raw() == doctest::Approx(4.947e14).epsilon(1e-12));
  CHECK(h200.gpu.peak_fp32.raw() == doctest::Approx(6.69e13).epsilon(1e-12));
  CHECK(h200.gpu.peak_bf16.raw() == h100.gpu.peak_bf16.raw());
  // FP8 3,958 TFLOP/s with sparsity = 2 x 1,978.9 dense, twice the BF16 rate (the H100 SXM's).
  CHECK(h200.gpu.peak_fp8.raw() == doctest::Approx(1.9789e15).epsilon(1e-12));
  CHECK(h100.gpu.peak_fp8.raw() == doctest::Approx(2 * h100.gpu.peak_bf16.raw()).epsilon(1e-4));
  CHECK(h200.gpu.peak_fp8.raw() == h100.gpu.peak_fp8.raw());
  // 4.8 TB/s = 4.8e12 B/s (H100: 3.35e12, x 1.43).
  CHECK(h200.gpu.hbm_bandwidth.raw() == doctest::Approx(4.8e12).epsilon(1e-12));
  // What CUDA allocates: 139.80 GiB (PyTorch's "total capacity") = floor(139.80 x 2^30) = 150,109,106,995 B, 0.60
  // GiB below nvidia-smi's memory.total 143,771 MiB = 140.40 GiB. Read as 141e9 B it would be 131.3 GiB.
  CHECK(h200.gpu.memory_capacity.raw() == 150109106995.0);
  CHECK(h200.gpu.memory_capacity.raw() < 143771.0 * kMiB);
  CHECK(h200.gpu.memory_capacity.raw() > 141e9);
  // Hopper assumptions copied from the H100 profile (uncalibrated for H200).
  CHECK(h200.gpu.gemm_efficiency == h100.gpu.gemm_efficiency);
  CHECK(h200.gpu.hbm_efficiency == h100.gpu.hbm_efficiency);
  CHECK(h200.collectives.nvlink_bus_efficiency == h100.collectives.nvlink_bus_efficiency);
  CHECK(h200.collectives.nvls_bandwidth.raw() == h100.collectives.nvls_bandwidth.raw());
  CHECK(h200.collectives.nccl.channels == 12);
}

TEST_CASE("built-in gb200: GB200 NVL72 rack figures / 72 GPUs, sparse peaks halved") {
  const calibrate::HardwareProfile h100 = calibrate::load_profile("h100-sxm5-80gb");
  const calibrate::HardwareProfile gb = calibrate::load_profile("gb200");
  CHECK(gb.gpu.gpu == "GB200");  // the gpu of topology/presets/gb200-nvl72.textproto
  // FP16/BF16 360 PFLOPS with sparsity per rack: 360e15 / 2 / 72 = 2.5e15 FLOP/s dense per GPU.
  CHECK(gb.gpu.peak_bf16.raw() == doctest::Approx(360e15 / 2 / 72).epsilon(1e-12));
  CHECK(gb.gpu.peak_bf16.raw() == doctest::Approx(2.5e15).epsilon(1e-12));
  CHECK(gb.gpu.peak_fp16.raw() == doctest::Approx(2.5e15).epsilon(1e-12));
  // FP8/FP6 720 PFLOPS with sparsity: 720e15 / 2 / 72 = 5e15 FLOP/s dense, twice BF16. The A100 has no FP8.
  CHECK(gb.gpu.peak_fp8.raw() == doctest::Approx(5e15).epsilon(1e-12));
  CHECK(calibrate::load_profile("a100-sxm4-80gb").gpu.peak_fp8.raw() == 0);
  // TF32 180 PFLOPS with sparsity: 180e15 / 2 / 72 = 1.25e15; FP32 6,480 TFLOPS (dense): 6.48e15 / 72 = 9e13.
  CHECK(gb.gpu.peak_tf32.raw() == doctest::Approx(1.25e15).epsilon(1e-12));
  CHECK(gb.gpu.peak_fp32.raw() == doctest::Approx(6.48e15 / 72).epsilon(1e-12));
  // 576 TB/s per rack / 72 = 8e12 B/s.
  CHECK(gb.gpu.hbm_bandwidth.raw() == doctest::Approx(576e12 / 72).epsilon(1e-12));
  // What CUDA allocates: 184.31 GiB = floor(184.31 x 2^30) = 197,901,355,581 B, below nvidia-smi's memory.total
  // 189,471 MiB = 185.03 GiB. The datasheet's 13.4 TB / 72 = 186.1e9 B: the same memory within 7 %.
  CHECK(gb.gpu.memory_capacity.raw() == 197901355581.0);
  CHECK(gb.gpu.memory_capacity.raw() < 189471.0 * kMiB);
  CHECK(gb.gpu.memory_capacity.raw() == doctest::Approx(13.4e12 / 72).epsilon(0.07));
  // Uncalibrated: the H100's efficiencies and launch overhead.
  CHECK(gb.gpu.gemm_efficiency == h100.gpu.gemm_efficiency);
  CHECK(gb.gpu.hbm_efficiency == h100.gpu.hbm_efficiency);
  CHECK(gb.gpu.kernel_launch.raw() == h100.gpu.kernel_launch.raw());
  CHECK(gb.collectives.nvlink_bus_efficiency == h100.collectives.nvlink_bus_efficiency);
  // NVLS rate: fitted to the NVL72 rack run (validation/nccl/gb200_nvl72_72gpu_allreduce.csv): at 4 and 8 GiB,
  // out-of-place and in-place, size x 73/72 / (time - 25 us) = 432.5, 430.5, 429.6, 435.9 GB/s, mean 432.
  const double fitted = (4294967296.0 * 73 / 72 / (10094 - 25) + 4294967296.0 * 73 / 72 / (10141 - 25) +
                         8589934592.0 * 73 / 72 / (20299 - 25) + 8589934592.0 * 73 / 72 / (20006 - 25)) /
                        4 / 1e3;  // GB/s
  CHECK(fitted == doctest::Approx(432).epsilon(0.001));
  CHECK(gb.collectives.nvls_bandwidth.raw() == doctest::Approx(432e9));
  // NCCL v2.30.7-1 Blackwell rows (nccl.md 1.5): llMaxBws[Blackwell][0] 282 on one node (across nodes NCCL reads
  // the CPU rows, {39.0, 20.4} for Intel and Arm hosts, {22.5, 19.0} for AMD), nvlsEfficiency 0.74; the latencies
  // are architecture-independent, so they equal the H100's.
  CHECK(gb.collectives.nccl.present);
  CHECK(gb.collectives.nccl.ll_max_bus_GBps == std::array<double, 3>{282.0, 39.0, 20.4});
  CHECK(gb.collectives.nccl.ll_max_bus_amd_GBps == std::array<double, 2>{22.5, 19.0});
  CHECK(gb.collectives.nccl.net_overhead_amd_us == 2.0);
  CHECK(gb.collectives.nccl.tree_per_channel_GBps == std::array<double, 3>{70.0, 42.8, 24.0});
  CHECK(gb.collectives.nccl.nvls_efficiency == 0.74);
  CHECK(gb.collectives.nccl.ring_base_us == h100.collectives.nccl.ring_base_us);
  // channels: 8 rings at the sm100 search's 90 GB/s fit 18 x 40.1 = 721.8 GB/s of NVLink, doubled: 16.
  CHECK(gb.collectives.nccl.channels == 16);
}

TEST_CASE("calibrate fit finds the H200 and GB200 profiles from the device name") {
  CHECK(calibrate::builtin_profile_for_gpu("NVIDIA H200") == std::optional<std::string>("h200-sxm-141gb"));
  CHECK(calibrate::builtin_profile_for_gpu("NVIDIA GB200") == std::optional<std::string>("gb200"));
  // Grace Hopper's GH200 is neither (its token is GH200, not H200).
  CHECK_FALSE(calibrate::builtin_profile_for_gpu("NVIDIA GH200 480GB").has_value());
}

TEST_CASE("gpu-generations: the four scenarios load with 144 GPUs and the same model and batch") {
  struct Expect {
    const char* file;
    const char* profile;
    const char* gpu;
    std::uint32_t tp, cp, pp, dp;
  };
  for (const Expect& e : {Expect{"h100.textproto", "h100-sxm5-80gb", "H100-SXM5-80GB", 8, 1, 2, 9},
                          Expect{"h200.textproto", "h200-sxm-141gb", "H200-SXM-141GB", 8, 1, 2, 9},
                          Expect{"gb200-nvl72.textproto", "gb200", "GB200", 8, 1, 2, 9},
                          Expect{"gb200-nvl72-cp2.textproto", "gb200", "GB200", 8, 2, 1, 9}}) {
    CAPTURE(e.file);
    const workloads::Scenario sc = cli::load_scenario_file(kDir + e.file);
    CHECK(sc.profile.name == e.profile);
    CHECK(sc.cluster.gpu == e.gpu);
    REQUIRE(sc.jobs.size() == 1);
    const workloads::Job& job = sc.jobs[0];
    CHECK(job.gpus.size() == 144);
    CHECK(job.model.name == "llama3-70b");
    CHECK(job.model.seq_len == 8192);
    CHECK(job.parallel.tp == e.tp);
    CHECK(job.parallel.cp == e.cp);
    CHECK(job.parallel.pp == e.pp);
    CHECK(job.parallel.dp == e.dp);
    CHECK(job.training.global_batch == 576);  // 1 x 64 x 9 sequences
  }
}

TEST_CASE("gpu-generations: same layout, same bytes, the H200's 141 GB is headroom where the H100 has none") {
  // The three tp 8 x pp 2 x dp 9 scenarios need the same bytes per GPU (the memory model knows no GPU type);
  // only the capacity differs.
  const workloads::ScenarioResult h100 = workloads::simulate_scenario(analytical("h100.textproto"));
  const workloads::ScenarioResult h200 = workloads::simulate_scenario(analytical("h200.textproto"));
  const workloads::ScenarioResult gb = workloads::simulate_scenario(analytical("gb200-nvl72.textproto"));
  const workloads::MemoryEstimate& m100 = h100.jobs[0].memory;
  CHECK(h200.jobs[0].memory.peak.raw() == m100.peak.raw());
  CHECK(gb.jobs[0].memory.peak.raw() == m100.peak.raw());
  CHECK_FALSE(m100.oom);
  CHECK(m100.capacity.raw() < h200.jobs[0].memory.capacity.raw());
  CHECK(h200.jobs[0].memory.capacity.raw() < gb.jobs[0].memory.capacity.raw());

  // Without the pipeline (pp 1, dp 18, 32 micro-batches: the same 576 sequences), each GPU holds all 80 layers'
  // weights and fp32 gradients: 70.55e9 / 8 x (2 + 4) B = 49.3 GiB, twice the pp 2 figure. The README's
  // measurement: 78.24 GiB against the H100's 79.18 (0.94 GiB, under 2 %, left) and the H200's 139.80.
  workloads::Scenario s100 = analytical("h100.textproto"), s200 = analytical("h200.textproto");
  for (workloads::Scenario* s : {&s100, &s200}) {
    s->jobs[0].parallel.pp = 1;
    s->jobs[0].parallel.dp = 18;
    s->jobs[0].parallel.grad_accum = 32;
  }
  const workloads::MemoryEstimate a = workloads::simulate_scenario(s100).jobs[0].memory;
  const workloads::MemoryEstimate b = workloads::simulate_scenario(s200).jobs[0].memory;
  CHECK(a.peak.raw() == b.peak.raw());
  CHECK(a.peak.raw() > m100.peak.raw());
  CHECK(a.capacity.raw() - a.peak.raw() < 2.0 * 1073741824.0);   // H100: less than 2 GiB left
  CHECK(b.capacity.raw() - b.peak.raw() > 60.0 * 1073741824.0);  // H200: more than 60 GiB left
  CHECK_FALSE(b.oom);
  // A 2-sample micro-batch (16 micro-batches) doubles the activations: the H100 runs out, the H200 does not.
  s100.jobs[0].parallel.micro_batch = s200.jobs[0].parallel.micro_batch = 2;
  s100.jobs[0].parallel.grad_accum = s200.jobs[0].parallel.grad_accum = 16;
  CHECK(workloads::simulate_scenario(s100).jobs[0].memory.oom);
  CHECK_FALSE(workloads::simulate_scenario(s200).jobs[0].memory.oom);
}

TEST_CASE("gpu-generations: what the profiles' figures imply for the step") {
  // FLOW fidelity, as `clustersim compare` runs them.
  const workloads::IterationResult h100 =
      workloads::simulate_scenario(cli::load_scenario_file(kDir + "h100.textproto")).jobs[0];
  const workloads::IterationResult h200 =
      workloads::simulate_scenario(cli::load_scenario_file(kDir + "h200.textproto")).jobs[0];
  const workloads::IterationResult gb =
      workloads::simulate_scenario(cli::load_scenario_file(kDir + "gb200-nvl72.textproto")).jobs[0];
  // H200 vs H100: same peaks, same fabric and collective constants: the exposed communication is the same;
  // compute is faster only in the memory-bound kernels (HBM x 1.43), so by less than 3 % (GEMMs dominate).
  CHECK(h200.breakdown.exposed_comm.raw() == doctest::Approx(h100.breakdown.exposed_comm.raw()).epsilon(1e-9));
  CHECK(h200.breakdown.compute.raw() < h100.breakdown.compute.raw());
  CHECK(h200.breakdown.compute.raw() > 0.97 * h100.breakdown.compute.raw());
  // GB200 vs H100: every kernel's roofline time scales by 989.4 / 2500 = 0.396 (FLOP-bound) or 3.35 / 8 = 0.419
  // (HBM-bound), the 2 us launch overhead by 1: the compute time ratio lies in [0.396, 0.45). The H100 profile
  // also models the tile and wave quantisation of its GEMMs on 132 SMs, which the GB200 profile (no SM count)
  // does not; that factor (u <= 1 per GEMM, calibrate/profile.proto) is switched off here to compare the peaks.
  workloads::Scenario h100_sc = cli::load_scenario_file(kDir + "h100.textproto");
  h100_sc.profile.gpu.sm_count = 0;
  const workloads::IterationResult h100_peaks = workloads::simulate_scenario(h100_sc).jobs[0];
  const double ratio = gb.breakdown.compute.raw() / h100_peaks.breakdown.compute.raw();
  CHECK(ratio >= 989.4 / 2500 - 1e-3);
  CHECK(ratio < 0.45);
  CHECK(gb.iteration_time.raw() < 0.5 * h100_peaks.iteration_time.raw());
  // With the quantisation the H100's GEMMs only get slower (u <= 1).
  CHECK(h100.breakdown.compute.raw() > h100_peaks.breakdown.compute.raw());
}
