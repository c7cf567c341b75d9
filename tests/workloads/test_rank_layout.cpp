#include <doctest/doctest.h>

#include <stdexcept>

#include "workloads/rank_layout.h"

using namespace clustersim::workloads;
using Groups = std::vector<std::vector<std::uint32_t>>;

TEST_CASE("Megatron's default order tp-dp-pp on 8 GPUs (tp 2, dp 2, pp 2)") {
  // rank = tp_rank + 2·(dp_rank + 2·pp_rank).
  const RankLayout l(2, 2, 2);
  CHECK(l.size() == 8);
  CHECK(l.rank({1, 1, 1}) == 7);
  CHECK(l.rank({1, 0, 1}) == 5);
  CHECK(l.coord(6) == RankCoord{0, 1, 1});
  CHECK(l.groups(ParallelDim::kTensor) == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(l.groups(ParallelDim::kData) == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(l.groups(ParallelDim::kPipeline) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
}

TEST_CASE("Megatron's docstring example: 16 GPUs, tp 2, pp 4 (dp 2)") {
  // megatron/core/parallel_state.py: 8 TP groups [g0,g1] [g2,g3] …, 4 PP groups [g0,g4,g8,g12] [g1,g5,g9,g13]
  // [g2,g6,g10,g14] [g3,g7,g11,g15], 8 DP groups [g0,g2] [g1,g3] [g4,g6] ….
  const RankLayout l(2, 2, 4);
  CHECK(l.groups(ParallelDim::kPipeline) == Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}});
  CHECK(l.group(ParallelDim::kData, 5) == std::vector<std::uint32_t>{5, 7});
  CHECK(l.groups(ParallelDim::kTensor).size() == 8);
}

TEST_CASE("another order puts pipeline stages before data replicas") {
  // tp-pp-dp: rank = tp_rank + 2·(pp_rank + 2·dp_rank).
  const RankLayout l(2, 2, 2, "tp-pp-dp");
  CHECK(l.groups(ParallelDim::kPipeline) == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(l.groups(ParallelDim::kData) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  for (std::uint32_t r = 0; r < 8; ++r) CHECK(l.rank(l.coord(r)) == r);
}

TEST_CASE("bad layouts are refused") {
  CHECK_THROWS_AS(RankLayout(0, 1, 1), std::invalid_argument);
  CHECK_THROWS_AS(RankLayout(2, 2, 2, "tp-dp"), std::invalid_argument);
  CHECK_THROWS_AS(RankLayout(2, 2, 2, "tp-dp-ep"), std::invalid_argument);
  CHECK_THROWS_AS(RankLayout(2, 2, 2, "tp-tp-pp"), std::invalid_argument);
}
