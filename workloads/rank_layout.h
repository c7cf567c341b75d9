// Rank placement for Megatron-style parallelism: which GPU holds which (tensor, context, data,
// pipeline) coordinate, and the communicators that follow.
//
// A job of tp·cp·dp·pp ranks. The rank order names the dimensions from innermost to outermost; Megatron-LM's
// default is "tp-dp-pp", or with context parallelism "tp-cp-dp-pp" (megatron/core/parallel_state.py,
// RankGenerator with order "tp-cp-ep-dp-pp"):
//   rank = tp_rank + tp · (cp_rank + cp · (dp_rank + dp · pp_rank))
// so a TP group is tp consecutive ranks (inside one node when tp ≤ GPUs per node), a CP group strides by tp,
// a DP group by tp·cp and a PP group by tp·cp·dp. An order that does not name cp places it right after tp,
// as Megatron does. Rank r runs on the job's GPU job.gpus[r].
// Example (tp = 2, dp = 2, pp = 2, cp = 1, 8 GPUs): TP groups {0,1} {2,3} {4,5} {6,7}; DP groups {0,2} {1,3}
// {4,6} {5,7}; PP groups {0,4} {1,5} {2,6} {3,7}.
//
// Expert parallelism (Megatron-Core MoE) is carved out of data parallelism: ep | dp, and the ep consecutive
// DP coordinates ⌊dp_rank/ep⌋·ep … +ep−1 form an EP group (the experts of a layer are split over them).
// The ranks that hold the same experts — equal dp_rank mod ep, and every CP rank, since CP ranks hold the
// same weights — form the expert-data-parallel group of (dp/ep)·cp ranks over which expert gradients are
// reduced; dense gradients are reduced over the dp·cp ranks of the data-and-context group (Megatron's
// data_parallel_group_with_cp).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace clustersim::workloads {

// kExpert: the EP group (ep ranks inside the DP group); kExpertData: the dp/ep ranks of equal EP rank
// (one context rank); the groups with every context rank are data_context_group() and expert_data_group().
enum class ParallelDim { kTensor, kData, kPipeline, kContext, kExpert, kExpertData };

struct RankCoord {
  std::uint32_t tp = 0, dp = 0, pp = 0, cp = 0;  // cp last: {tp, dp, pp} keeps meaning what it meant
  bool operator==(const RankCoord&) const = default;
};

class RankLayout {
 public:
  // `order`: a permutation of {tp, dp, pp}, optionally with cp, innermost first, e.g. "tp-dp-pp" (default),
  // "tp-pp-dp" or "tp-cp-dp-pp". Throws std::invalid_argument for a degree of 0, a bad order, or ep ∤ dp.
  RankLayout(std::uint32_t tp, std::uint32_t dp, std::uint32_t pp, const std::string& order = "tp-dp-pp",
             std::uint32_t cp = 1, std::uint32_t ep = 1);

  std::uint32_t size() const { return tp_ * cp_ * dp_ * pp_; }
  std::uint32_t rank(RankCoord c) const;
  RankCoord coord(std::uint32_t rank) const;

  // The ranks that differ from `rank` only in `dim`, ordered by that coordinate.
  std::vector<std::uint32_t> group(ParallelDim dim, std::uint32_t rank) const;
  // Every group of `dim`, each ordered by the coordinate, groups ordered by their lowest rank.
  std::vector<std::vector<std::uint32_t>> groups(ParallelDim dim) const;
  // The dp·cp ranks of equal tensor and pipeline coordinate (dense gradients), ordered by (dp, cp).
  std::vector<std::uint32_t> data_context_group(std::uint32_t rank) const;
  // The (dp/ep)·cp ranks holding the same experts as `rank` (expert gradients), ordered by (dp, cp).
  std::vector<std::uint32_t> expert_data_group(std::uint32_t rank) const;

  std::uint32_t ep() const { return ep_; }

 private:
  enum class Axis { kTp, kCp, kDp, kPp };
  std::uint32_t degree(Axis a) const;
  std::uint32_t tp_, dp_, pp_, cp_, ep_;
  std::array<Axis, 4> order_;  // innermost first
};

}  // namespace clustersim::workloads
