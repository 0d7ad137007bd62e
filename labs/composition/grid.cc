// Lab 7 (composition), stage A: the rank grid -- your implementation.
//
// Read labs/composition/grid.h and notes/07-composition.md section 1.
#include "labs/composition/grid.h"

#include "reference/base/status.h"

namespace distlab::composition {

// TODO(composition stage A): ValidateShape
//  1. dp, pp, tp each >= 1, checked in that order: "tp must be >= 1 (got 0)".
//  2. dp * pp * tp == world_size, else "dp 2 x pp 2 x tp 3 = 12 ranks, but the world has 8".
absl::Status ValidateShape(const GridShape& shape, int world_size) {
  return Unimplemented("composition", "A", "ValidateShape");
}

// TODO(composition stage A): RankOf -- rank = tp + T (dp + D pp).
int RankOf(const GridShape& shape, const Coord& coord) {
  throw NotImplementedError("composition", "A", "RankOf");
}

// TODO(composition stage A): CoordOf -- the inverse of RankOf (tp is rank % T, ...).
Coord CoordOf(const GridShape& shape, int rank) { throw NotImplementedError("composition", "A", "CoordOf"); }

// TODO(composition stage A): Groups
//  1. kTp, kDp, kPp: for every combination of the other two coordinates, the ranks with this axis's
//     coordinate 0, 1, ..., size-1 (RankOf). Sort the groups by their first rank.
//  2. kEmb: for each pp group (in that order), its first and last rank; only the first when pp == 1.
//  Check yourself against the table in grid.h and the one in the note (Megatron's lists).
std::vector<std::vector<int>> Groups(const GridShape& shape, Axis axis) {
  throw NotImplementedError("composition", "A", "Groups");
}

// Your grid's communicators: one per axis (tp, dp, pp) and the embedding comm (null off the first and last
// stage). The destructor must Destroy every one of them.
struct ProcessGrid::Impl {};

ProcessGrid::ProcessGrid(comm::Comm& world, const GridShape& shape, std::unique_ptr<Impl> impl)
    : world_(&world), shape_(shape), coord_(CoordOf(shape, world.rank())), impl_(std::move(impl)) {}
ProcessGrid::~ProcessGrid() = default;

// TODO(composition stage A): ProcessGrid::Create
//  1. ValidateShape(shape, world.size()) first: return its error before any Split (every rank gets it).
//  2. CoordOf(shape, world.rank()).
//  3. Four world.Split(color, key) calls, in this order on every rank: tp, dp, pp, emb. The color names the
//     group (any number that is equal exactly for the ranks of one group: e.g. the other two coordinates
//     combined), the key is the rank's coordinate on that axis. emb: color -1 (no comm) unless the rank is
//     on the first or last stage; key = the pp coordinate.
//  4. return std::unique_ptr<ProcessGrid>(new ProcessGrid(world, shape, std::move(impl))).
absl::StatusOr<std::unique_ptr<ProcessGrid>> ProcessGrid::Create(comm::Comm& world, const GridShape& shape) {
  return Unimplemented("composition", "A", "ProcessGrid::Create");
}

// TODO(composition stage A): ProcessGrid::axis -- the tp, dp or pp comm; kEmb aborts naming embedding().
comm::Comm& ProcessGrid::axis(Axis axis) {
  throw NotImplementedError("composition", "A", "ProcessGrid::axis");
}

// TODO(composition stage A): ProcessGrid::embedding -- the embedding comm, or nullptr.
comm::Comm* ProcessGrid::embedding() {
  throw NotImplementedError("composition", "A", "ProcessGrid::embedding");
}

// TODO(composition stage A): ProcessGrid::Members -- this rank's group of `axis` in global ranks.
std::vector<int> ProcessGrid::Members(Axis axis) const {
  throw NotImplementedError("composition", "A", "ProcessGrid::Members");
}

}  // namespace distlab::composition
