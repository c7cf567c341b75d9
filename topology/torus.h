// Coordinates on a 3D torus of chips (TPU ICI) and the boxes communicators form on it.
//
// Chip g sits at (x, y, z) with g = x + X·(y + Y·z) (topology/cluster.proto Torus). Along an axis of D chips
// the chips form a cycle of links when D > 2 and the slice wraps around (NodeLayout::torus_wraps: TPU v4 slices of
// whole 4x4x4 cubes), a line of D − 1 links when it does not (a mesh: smaller slices), share one link when D = 2 and
// have none when D = 1 (torus_links_per_chip, topology.h: the links of a chip inside the line). A communicator is a
// *box* when it is the product of one set of coordinates per axis: every line along an axis (chips that differ only in
// that coordinate) then holds the same k_a members, so a collective can run as rings along one axis after another, as
// TPU ICI collectives do (workloads/nccl_model.h, Algorithm::kTorus).
//
// Link loads along an axis follow the router: a transfer between positions i and j of an axis goes the short
// way round (min(|i−j|, D−|i−j|) hops when the axis is a ring; |i−j| otherwise); a tie (D even, |i−j| = D/2) is split
// evenly over both ways, which is what ECMP over the two shortest paths does on average.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace clustersim::topology {

using TorusDims = std::array<std::uint32_t, 3>;
using TorusCoords = std::array<std::uint32_t, 3>;

TorusCoords torus_coords(const TorusDims& dims, std::uint32_t chip);
std::uint32_t torus_chip(const TorusDims& dims, const TorusCoords& coords);

struct TorusBox {
  std::array<std::vector<std::uint32_t>, 3> coords;  // member coordinates per axis, ascending, distinct
  std::uint32_t extent(int axis) const { return static_cast<std::uint32_t>(coords[static_cast<std::size_t>(axis)].size()); }
  std::uint32_t size() const { return extent(0) * extent(1) * extent(2); }
};

// The box `chips` forms (distinct chip indices < X·Y·Z), or nullopt when they are not one (a missing corner).
std::optional<TorusBox> torus_box(const TorusDims& dims, std::span<const std::uint32_t> chips);

// Whether an axis of D chips closes into a ring: D > 2 on a slice that wraps around (`wraps`). Every axis function
// below takes the slice's `wraps`; an axis that is no ring is a line (a mesh axis, or one of 2 chips).
constexpr bool axis_is_ring(std::uint32_t D, bool wraps) {
  return wraps && D > 2;
}

// Hops between positions i and j of an axis of D chips, the short way round.
std::uint32_t axis_distance(std::uint32_t D, bool wraps, std::uint32_t i, std::uint32_t j);

// A transfer along one axis: `weight` units from position `from` to position `to`. Where both ways round are
// equally short, `tie` picks one: +1 the way of increasing positions, −1 the other, 0 half each.
struct AxisTransfer {
  std::uint32_t from = 0, to = 0;
  double weight = 0;
  int tie = 0;
};
// Whether a transfer from `from` to `to` on an axis of D chips goes the way of increasing positions (true) or
// the other (false): the short way round; on a tie the way `tie` says (0: increasing). An axis that is no ring
// has one way.
bool axis_forward(std::uint32_t D, bool wraps, std::uint32_t from, std::uint32_t to, int tie);
// The most units any directed link of an axis of D chips carries when every transfer takes the short way
// round (ties as the transfer says): with all transfers at one rate r, the busiest link runs at r × this load.
double axis_max_load(std::uint32_t D, bool wraps, std::span<const AxisTransfer> transfers);
// The units each directed link of the axis carries: plus[i] on the link from position i to i + 1 (mod D),
// minus[i] on the link from i + 1 to i; on a line the entries of the missing link D − 1 <-> 0 stay 0.
void axis_loads(std::uint32_t D, bool wraps, std::span<const AxisTransfer> transfers, std::vector<double>& plus,
                std::vector<double>& minus);

// The chips a transfer from chip `from` to chip `to` passes, both included: along x, then y, then z, each the
// short way round (a tie as `tie` says: +1 the way of increasing positions, −1 the other). Dimension-order
// routing, one fixed shortest path.
std::vector<std::uint32_t> torus_walk(const TorusDims& dims, bool wraps, std::uint32_t from, std::uint32_t to,
                                      int tie = +1);

}  // namespace clustersim::topology
