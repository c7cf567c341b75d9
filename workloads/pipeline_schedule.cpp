#include "workloads/pipeline_schedule.h"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace clustersim::workloads {

const char* to_string(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::kGPipe:
      return "GPipe";
    case PipelineSchedule::kOneFOneB:
      return "1F1B";
    case PipelineSchedule::kInterleaved:
      return "interleaved 1F1B";
  }
  return "?";
}

namespace {

using Kind = PipelineStep::Kind;

std::vector<PipelineStep> one_f_one_b(std::uint32_t p, std::uint32_t s, std::uint32_t m) {
  std::vector<PipelineStep> out;
  const std::uint32_t warmup = std::min(p - s - 1, m);
  std::uint32_t next_f = 0, next_b = 0;
  for (; next_f < warmup; ++next_f) out.push_back({Kind::kForward, next_f, 0});
  while (next_f < m) {
    out.push_back({Kind::kForward, next_f++, 0});
    out.push_back({Kind::kBackward, next_b++, 0});
  }
  while (next_b < m) out.push_back({Kind::kBackward, next_b++, 0});
  return out;
}

// Megatron-LM's interleaved schedule for device s (see the header).
std::vector<PipelineStep> interleaved(std::uint32_t p, std::uint32_t s, std::uint32_t m, std::uint32_t v) {
  const std::uint32_t total = m * v;
  auto forward_step = [&](std::uint32_t k) {
    const std::uint32_t chunk = (k / p) % v;
    return PipelineStep{Kind::kForward, (k / (p * v)) * p + k % p, chunk};
  };
  auto backward_step = [&](std::uint32_t k) {
    const std::uint32_t chunk = v - 1 - (k / p) % v;
    return PipelineStep{Kind::kBackward, (k / (p * v)) * p + k % p, chunk};
  };
  const std::uint32_t warmup = std::min((p - s - 1) * 2 + (v - 1) * p, total);
  std::vector<PipelineStep> out;
  std::uint32_t f = 0, b = 0;
  for (; f < warmup; ++f) out.push_back(forward_step(f));
  while (f < total) {
    out.push_back(forward_step(f++));
    out.push_back(backward_step(b++));
  }
  while (b < total) out.push_back(backward_step(b++));
  return out;
}

}  // namespace

std::vector<std::vector<PipelineStep>> pipeline_order(PipelineSchedule schedule, std::uint32_t p, std::uint32_t m,
                                                      std::uint32_t v) {
  if (p == 0 || m == 0 || v == 0) throw std::invalid_argument("stages, micro-batches and chunks must be >= 1");
  if (schedule == PipelineSchedule::kInterleaved) {
    if (v < 2) throw std::invalid_argument("interleaved 1F1B needs at least 2 model chunks per stage");
    if (m % p != 0)
      throw std::invalid_argument("interleaved 1F1B needs the micro-batch count (" + std::to_string(m) +
                                  ") to be a multiple of the pipeline stages (" + std::to_string(p) + ")");
  } else if (v != 1) {
    throw std::invalid_argument(std::string(to_string(schedule)) + " runs one model chunk per stage");
  }
  std::vector<std::vector<PipelineStep>> out(p);
  for (std::uint32_t s = 0; s < p; ++s) {
    switch (schedule) {
      case PipelineSchedule::kGPipe:
        for (std::uint32_t i = 0; i < m; ++i) out[s].push_back({Kind::kForward, i, 0});
        for (std::uint32_t i = 0; i < m; ++i) out[s].push_back({Kind::kBackward, i, 0});
        break;
      case PipelineSchedule::kOneFOneB:
        out[s] = one_f_one_b(p, s, m);
        break;
      case PipelineSchedule::kInterleaved:
        out[s] = interleaved(p, s, m, v);
        break;
    }
  }
  return out;
}

std::uint32_t max_in_flight(const std::vector<PipelineStep>& order) {
  std::set<std::pair<std::uint32_t, std::uint32_t>> live;
  std::uint32_t peak = 0;
  for (const PipelineStep& step : order) {
    if (step.kind == Kind::kForward) {
      live.insert({step.micro_batch, step.chunk});
      peak = std::max(peak, static_cast<std::uint32_t>(live.size()));
    } else {
      live.erase({step.micro_batch, step.chunk});
    }
  }
  return peak;
}

double ideal_bubble_fraction(PipelineSchedule schedule, std::uint32_t p, std::uint32_t m, std::uint32_t v) {
  const double chunks = schedule == PipelineSchedule::kInterleaved ? v : 1;
  return (double(p) - 1) / (chunks * m);
}

}  // namespace clustersim::workloads
