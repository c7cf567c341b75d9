#include "topology/torus.h"

#include <algorithm>
#include <cassert>

namespace clustersim::topology {

TorusCoords torus_coords(const TorusDims& dims, std::uint32_t chip) {
  return {chip % dims[0], (chip / dims[0]) % dims[1], chip / (dims[0] * dims[1])};
}

std::uint32_t torus_chip(const TorusDims& dims, const TorusCoords& c) {
  return c[0] + dims[0] * (c[1] + dims[1] * c[2]);
}

std::optional<TorusBox> torus_box(const TorusDims& dims, std::span<const std::uint32_t> chips) {
  TorusBox box;
  for (std::uint32_t g : chips) {
    const TorusCoords c = torus_coords(dims, g);
    for (std::size_t a = 0; a < 3; ++a) box.coords[a].push_back(c[a]);
  }
  for (auto& axis : box.coords) {
    std::sort(axis.begin(), axis.end());
    axis.erase(std::unique(axis.begin(), axis.end()), axis.end());
  }
  // Distinct chips inside the product of the coordinate sets: as many as the product means all of it.
  if (chips.empty() || std::size_t{box.size()} != chips.size()) return std::nullopt;
  return box;
}

std::uint32_t axis_distance(std::uint32_t D, bool wraps, std::uint32_t i, std::uint32_t j) {
  const std::uint32_t d = i > j ? i - j : j - i;
  return axis_is_ring(D, wraps) ? std::min(d, D - d) : d;
}

bool axis_forward(std::uint32_t D, bool wraps, std::uint32_t from, std::uint32_t to, int tie) {
  if (!axis_is_ring(D, wraps)) return to > from;
  const std::uint32_t fwd = (to + D - from) % D, back = D - fwd;
  return fwd < back || (fwd == back && tie >= 0);
}

double axis_max_load(std::uint32_t D, bool wraps, std::span<const AxisTransfer> transfers) {
  std::vector<double> plus, minus;
  axis_loads(D, wraps, transfers, plus, minus);
  double most = 0;
  for (std::uint32_t i = 0; i < D; ++i) most = std::max({most, plus[i], minus[i]});
  return most;
}

void axis_loads(std::uint32_t D, bool wraps, std::span<const AxisTransfer> transfers, std::vector<double>& plus,
                std::vector<double>& minus) {
  // plus[i]: link i -> i+1 (mod D); minus[i]: link i+1 -> i (mod D).
  plus.assign(D, 0.0);
  minus.assign(D, 0.0);
  auto walk = [&](std::uint32_t from, std::uint32_t hops, bool forward, double w) {
    for (std::uint32_t h = 0; h < hops; ++h) {
      if (forward) {
        plus[(from + h) % D] += w;
      } else {
        minus[(from + D - h - 1) % D] += w;
      }
    }
  };
  for (const AxisTransfer& t : transfers) {
    assert(t.from < D && t.to < D && "position outside the axis");
    if (t.from == t.to) continue;
    if (!axis_is_ring(D, wraps)) {  // a line: the direct way
      if (t.to > t.from)
        walk(t.from, t.to - t.from, true, t.weight);
      else
        walk(t.from, t.from - t.to, false, t.weight);
      continue;
    }
    const std::uint32_t fwd = (t.to + D - t.from) % D, back = D - fwd;
    if (fwd < back || (fwd == back && t.tie > 0)) {
      walk(t.from, fwd, true, t.weight);
    } else if (back < fwd || t.tie < 0) {
      walk(t.from, back, false, t.weight);
    } else {
      walk(t.from, fwd, true, t.weight / 2);
      walk(t.from, back, false, t.weight / 2);
    }
  }
}

std::vector<std::uint32_t> torus_walk(const TorusDims& dims, bool wraps, std::uint32_t from, std::uint32_t to,
                                      int tie) {
  std::vector<std::uint32_t> out = {from};
  TorusCoords at = torus_coords(dims, from);
  const TorusCoords goal = torus_coords(dims, to);
  for (std::size_t a = 0; a < 3; ++a) {
    const std::uint32_t D = dims[a];
    const bool forward = axis_forward(D, wraps, at[a], goal[a], tie);
    while (at[a] != goal[a]) {
      at[a] = forward ? (at[a] + 1) % D : (at[a] + D - 1) % D;
      out.push_back(torus_chip(dims, at));
    }
  }
  return out;
}

}  // namespace clustersim::topology
