#include "workloads/rank_layout.h"

#include <algorithm>
#include <stdexcept>

namespace clustersim::workloads {

RankLayout::RankLayout(std::uint32_t tp, std::uint32_t dp, std::uint32_t pp, const std::string& order,
                       std::uint32_t cp, std::uint32_t ep)
    : tp_(tp), dp_(dp), pp_(pp), cp_(cp), ep_(ep) {
  if (tp == 0 || dp == 0 || pp == 0 || cp == 0 || ep == 0) throw std::invalid_argument("parallel degrees must be >= 1");
  if (dp % ep != 0)
    throw std::invalid_argument("ep " + std::to_string(ep) + " does not divide dp " + std::to_string(dp));
  std::vector<Axis> dims;
  std::size_t start = 0;
  while (start <= order.size()) {
    const std::size_t end = std::min(order.find('-', start), order.size());
    const std::string name = order.substr(start, end - start);
    if (name == "tp")
      dims.push_back(Axis::kTp);
    else if (name == "dp")
      dims.push_back(Axis::kDp);
    else if (name == "pp")
      dims.push_back(Axis::kPp);
    else if (name == "cp")
      dims.push_back(Axis::kCp);
    else
      throw std::invalid_argument("rank order \"" + order + "\": \"" + name + "\" is not tp, cp, dp or pp");
    start = end + 1;
  }
  auto count = [&](Axis a) { return std::count(dims.begin(), dims.end(), a); };
  if (count(Axis::kTp) != 1 || count(Axis::kDp) != 1 || count(Axis::kPp) != 1 || count(Axis::kCp) > 1 ||
      dims.size() != 3 + std::size_t(count(Axis::kCp)))
    throw std::invalid_argument("rank order \"" + order + "\" must name tp, dp and pp once each (and cp at most once)");
  // Megatron's place for an unnamed cp: right after tp (order "tp-cp-ep-dp-pp").
  if (count(Axis::kCp) == 0) dims.insert(std::find(dims.begin(), dims.end(), Axis::kTp) + 1, Axis::kCp);
  std::copy(dims.begin(), dims.end(), order_.begin());
}

std::uint32_t RankLayout::degree(Axis a) const {
  switch (a) {
    case Axis::kTp: return tp_;
    case Axis::kCp: return cp_;
    case Axis::kDp: return dp_;
    case Axis::kPp: return pp_;
  }
  return 1;
}

namespace {
std::uint32_t& at(RankCoord& c, int axis) {
  switch (axis) {
    case 0: return c.tp;
    case 1: return c.cp;
    case 2: return c.dp;
    default: return c.pp;
  }
}
}  // namespace

std::uint32_t RankLayout::rank(RankCoord c) const {
  std::uint32_t r = 0, stride = 1;
  for (Axis a : order_) {
    r += at(c, int(a)) * stride;
    stride *= degree(a);
  }
  return r;
}

RankCoord RankLayout::coord(std::uint32_t r) const {
  RankCoord c;
  for (Axis a : order_) {
    at(c, int(a)) = r % degree(a);
    r /= degree(a);
  }
  return c;
}

std::vector<std::uint32_t> RankLayout::group(ParallelDim dim, std::uint32_t r) const {
  RankCoord c = coord(r);
  std::vector<std::uint32_t> out;
  auto along = [&](std::uint32_t& field, std::uint32_t first, std::uint32_t count, std::uint32_t step) {
    for (std::uint32_t i = 0; i < count; ++i) {
      field = first + i * step;
      out.push_back(rank(c));
    }
  };
  switch (dim) {
    case ParallelDim::kTensor: along(c.tp, 0, tp_, 1); break;
    case ParallelDim::kContext: along(c.cp, 0, cp_, 1); break;
    case ParallelDim::kData: along(c.dp, 0, dp_, 1); break;
    case ParallelDim::kPipeline: along(c.pp, 0, pp_, 1); break;
    case ParallelDim::kExpert: along(c.dp, c.dp / ep_ * ep_, ep_, 1); break;
    case ParallelDim::kExpertData: along(c.dp, c.dp % ep_, dp_ / ep_, ep_); break;
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

std::vector<std::uint32_t> RankLayout::data_context_group(std::uint32_t r) const {
  RankCoord c = coord(r);
  std::vector<std::uint32_t> out;
  for (c.dp = 0; c.dp < dp_; ++c.dp)
    for (c.cp = 0; c.cp < cp_; ++c.cp) out.push_back(rank(c));
  return out;
}

std::vector<std::uint32_t> RankLayout::expert_data_group(std::uint32_t r) const {
  RankCoord c = coord(r);
  std::vector<std::uint32_t> out;
  for (c.dp = c.dp % ep_; c.dp < dp_; c.dp += ep_)
    for (c.cp = 0; c.cp < cp_; ++c.cp) out.push_back(rank(c));
  return out;
}

}  // namespace clustersim::workloads
