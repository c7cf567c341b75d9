// Hardware profiles written out in the tests, so that they do not depend on the data files.
#pragma once

#include <cstdint>
#include <string>

#include "calibrate/hardware_profile.h"
#include "workloads/scenario.h"

namespace clustersim::testing {

// A100-like: dense 312 TFLOP/s BF16/FP16, 156 TF32, 19.5 FP32; HBM 2,039 GB/s, 80 GiB; GEMM efficiency 0.75,
// HBM efficiency 0.8, 2 µs kernel launch; ring base 8.4 µs, NVLink step 3.4 µs, network step 14 µs, bus
// efficiencies 0.77 (NVLink) and 0.8 (network), no NVLS.
inline calibrate::HardwareProfile a100_like() {
  calibrate::HardwareProfile p;
  p.name = "test-a100";
  p.gpu = {"A100", TFLOPps(312), TFLOPps(312), TFLOPps(156), TFLOPps(19.5), GBps(2039), GiB(80), 0.75, 0.8,
           microseconds(2)};
  p.collectives = {microseconds(8.4), microseconds(3.4), microseconds(14.0), 0.77, 0.8, {}, bytes_per_second(0)};
  return p;
}

// A scenario without jobs on `nodes` x `gpus_per_node` A100s (NVLink 300 GB/s and a 200 Gbit/s NIC per GPU
// per direction), the a100_like() profile, ANALYTICAL fidelity; and the tests' small GPT (l = 2, h = 1024,
// a = 16, f = 4h, V = 51,200, s = 1,024).
inline workloads::Scenario a100_like_cluster(const std::string& name, std::uint32_t nodes,
                                             std::uint32_t gpus_per_node) {
  workloads::Scenario sc;
  sc.name = name;
  sc.cluster.nodes = nodes;
  sc.cluster.gpus_per_node = gpus_per_node;
  sc.cluster.gpu = "A100";
  sc.cluster.nvlink_per_direction = GBps(300);
  sc.cluster.nic_per_direction = Gbitps(200);
  sc.profile = a100_like();
  sc.fidelity = workloads::Fidelity::kAnalytical;
  return sc;
}
inline workloads::ModelSpec small_gpt() { return workloads::ModelSpec{"small", 2, 1024, 16, 4096, 51200, 1024}; }

}  // namespace clustersim::testing
