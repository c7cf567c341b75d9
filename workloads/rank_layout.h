// Rank placement for 3D parallelism: which GPU holds which (tensor, data, pipeline) coordinate, and the
// communicators that follow.
//
// A job of tp·dp·pp ranks. The rank order names the dimensions from innermost to outermost; Megatron-LM's
// default is "tp-dp-pp" (megatron/core/parallel_state.py, RankGenerator with order "tp-cp-ep-dp-pp"):
//   rank = tp_rank + tp · (dp_rank + dp · pp_rank)
// so a TP group is tp consecutive ranks (inside one node when tp ≤ GPUs per node), a DP group strides by
// tp, and a PP group strides by tp·dp. Rank r runs on the job's GPU job.gpus[r].
// Example (tp = 2, dp = 2, pp = 2, 8 GPUs): TP groups {0,1} {2,3} {4,5} {6,7}; DP groups {0,2} {1,3}
// {4,6} {5,7}; PP groups {0,4} {1,5} {2,6} {3,7}.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace clustersim::workloads {

enum class ParallelDim { kTensor, kData, kPipeline };

struct RankCoord {
  std::uint32_t tp = 0, dp = 0, pp = 0;
  bool operator==(const RankCoord&) const = default;
};

class RankLayout {
 public:
  // `order`: a permutation of {tp, dp, pp}, innermost first, e.g. "tp-dp-pp" (default) or "tp-pp-dp".
  // Throws std::invalid_argument for a degree of 0 or a bad order.
  RankLayout(std::uint32_t tp, std::uint32_t dp, std::uint32_t pp, const std::string& order = "tp-dp-pp");

  std::uint32_t size() const { return tp_ * dp_ * pp_; }
  std::uint32_t rank(RankCoord c) const;
  RankCoord coord(std::uint32_t rank) const;

  // The ranks that differ from `rank` only in `dim`, ordered by that coordinate.
  std::vector<std::uint32_t> group(ParallelDim dim, std::uint32_t rank) const;
  // Every group of `dim`, each ordered by the coordinate, groups ordered by their lowest rank.
  std::vector<std::vector<std::uint32_t>> groups(ParallelDim dim) const;

 private:
  std::uint32_t degree(ParallelDim d) const;
  std::uint32_t tp_, dp_, pp_;
  std::array<ParallelDim, 3> order_;  // innermost first
};

}  // namespace clustersim::workloads
