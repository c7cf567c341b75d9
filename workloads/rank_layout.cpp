#include "workloads/rank_layout.h"

#include <algorithm>
#include <stdexcept>

namespace clustersim::workloads {

RankLayout::RankLayout(std::uint32_t tp, std::uint32_t dp, std::uint32_t pp, const std::string& order)
    : tp_(tp), dp_(dp), pp_(pp) {
  if (tp == 0 || dp == 0 || pp == 0) throw std::invalid_argument("parallel degrees must be >= 1");
  std::vector<ParallelDim> dims;
  std::size_t start = 0;
  while (start <= order.size()) {
    const std::size_t end = std::min(order.find('-', start), order.size());
    const std::string name = order.substr(start, end - start);
    if (name == "tp")
      dims.push_back(ParallelDim::kTensor);
    else if (name == "dp")
      dims.push_back(ParallelDim::kData);
    else if (name == "pp")
      dims.push_back(ParallelDim::kPipeline);
    else
      throw std::invalid_argument("rank order \"" + order + "\": \"" + name + "\" is not tp, dp or pp");
    start = end + 1;
  }
  if (dims.size() != 3 || std::count(dims.begin(), dims.end(), ParallelDim::kTensor) != 1 ||
      std::count(dims.begin(), dims.end(), ParallelDim::kData) != 1)
    throw std::invalid_argument("rank order \"" + order + "\" must name tp, dp and pp once each");
  std::copy(dims.begin(), dims.end(), order_.begin());
}

std::uint32_t RankLayout::degree(ParallelDim d) const {
  return d == ParallelDim::kTensor ? tp_ : d == ParallelDim::kData ? dp_ : pp_;
}

namespace {
std::uint32_t& at(RankCoord& c, ParallelDim d) {
  return d == ParallelDim::kTensor ? c.tp : d == ParallelDim::kData ? c.dp : c.pp;
}
}  // namespace

std::uint32_t RankLayout::rank(RankCoord c) const {
  std::uint32_t r = 0, stride = 1;
  for (ParallelDim d : order_) {
    r += at(c, d) * stride;
    stride *= degree(d);
  }
  return r;
}

RankCoord RankLayout::coord(std::uint32_t r) const {
  RankCoord c;
  for (ParallelDim d : order_) {
    at(c, d) = r % degree(d);
    r /= degree(d);
  }
  return c;
}

std::vector<std::uint32_t> RankLayout::group(ParallelDim dim, std::uint32_t r) const {
  RankCoord c = coord(r);
  std::vector<std::uint32_t> out;
  for (std::uint32_t i = 0; i < degree(dim); ++i) {
    at(c, dim) = i;
    out.push_back(rank(c));
  }
  return out;
}

std::vector<std::vector<std::uint32_t>> RankLayout::groups(ParallelDim dim) const {
  std::vector<std::vector<std::uint32_t>> out;
  std::vector<bool> seen(size(), false);
  for (std::uint32_t r = 0; r < size(); ++r) {
    if (seen[r]) continue;
    out.push_back(group(dim, r));
    for (std::uint32_t member : out.back()) seen[member] = true;
  }
  return out;
}

}  // namespace clustersim::workloads
