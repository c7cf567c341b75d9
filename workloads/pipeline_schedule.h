// Pipeline-parallel schedules: the order in which each pipeline stage (a device holding one or more
// model chunks) runs the forward and backward passes of the micro-batches.
//
//  * GPipe (Huang et al. 2019): every forward, then every backward; m micro-batches in flight.
//  * 1F1B / PipeDream-Flush (Narayanan et al. 2021 §2.2.1): stage s (0-based of p) runs
//    min(p − s − 1, m) warm-up forwards, then alternates one forward and one backward, then drains
//    the remaining backwards; at most p − s micro-batches in flight.
//  * Interleaved 1F1B (Narayanan et al. 2021 §2.2.2; Megatron-LM's
//    forward_backward_pipelining_with_interleaving): device s holds v model chunks, the virtual stages
//    s, s + p, …, s + (v−1)p. Micro-steps go in groups of p micro-batches per chunk: forward micro-step k
//    runs chunk (k / p) mod v on micro-batch (k / (p·v))·p + k mod p; backward micro-step k runs chunk
//    v − 1 − (k / p) mod v. Warm-up is (p − s − 1)·2 + (v − 1)·p forward micro-steps (at most m·v);
//    m must be a multiple of p.
// With forward time t_f and backward t_b per micro-batch and stage, the bubble is (p − 1)(t_f + t_b)
// for GPipe and 1F1B, i.e. a fraction (p − 1)/m of the ideal m(t_f + t_b), and (p − 1)/(v·m) interleaved.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace clustersim::workloads {

enum class PipelineSchedule { kGPipe, kOneFOneB, kInterleaved };
const char* to_string(PipelineSchedule s);

struct PipelineStep {
  enum class Kind { kForward, kBackward };
  Kind kind = Kind::kForward;
  std::uint32_t micro_batch = 0;
  std::uint32_t chunk = 0;  // model chunk on this device (0 .. v−1); virtual stage = chunk·p + stage
  bool operator==(const PipelineStep&) const = default;
};

// The order of steps on each of the p stages. Throws std::invalid_argument when the combination is not
// a schedule (p, m, v >= 1; interleaving needs v >= 2 and m a multiple of p; GPipe and 1F1B need v = 1).
std::vector<std::vector<PipelineStep>> pipeline_order(PipelineSchedule schedule, std::uint32_t stages,
                                                      std::uint32_t micro_batches, std::uint32_t chunks = 1);

// Most micro-batches whose activations a stage holds at once under the order (forward done, backward not).
std::uint32_t max_in_flight(const std::vector<PipelineStep>& order);

// The bubble fraction the schedule's theory gives: (p−1)/m, or (p−1)/(v·m) interleaved.
double ideal_bubble_fraction(PipelineSchedule schedule, std::uint32_t stages, std::uint32_t micro_batches,
                             std::uint32_t chunks = 1);

}  // namespace clustersim::workloads
