// Lab 7 (composition), stage A: the rank grid -- your implementation.
//
// Read labs/composition/grid.h and notes/07-composition.md section 1.
#include "labs/composition/grid.h"

#include "reference/base/status.h"

namespace distlab::composition {

// TODO(composition stage A): ValidateShape -- contract: grid.h (ValidateShape: its rules, order, messages).
absl::Status ValidateShape(const GridShape& shape, int world_size) {
  return Unimplemented("composition", "A", "ValidateShape");
}

// TODO(composition stage A): RankOf -- contract: grid.h (the rank order); idea: notes/07-composition.md §1.
int RankOf(const GridShape& shape, const Coord& coord) {
  throw NotImplementedError("composition", "A", "RankOf");
}

// TODO(composition stage A): CoordOf -- contract: grid.h (RankOf's inverse).
Coord CoordOf(const GridShape& shape, int rank) { throw NotImplementedError("composition", "A", "CoordOf"); }

// TODO(composition stage A): Groups -- contract: grid.h (Groups; the (2, 2, 2) table); idea:
//   notes/07-composition.md §1 (Megatron's RankGenerator lists).
//   What do the ranks of one group have in common, and what tells them apart?
std::vector<std::vector<int>> Groups(const GridShape& shape, Axis axis) {
  throw NotImplementedError("composition", "A", "Groups");
}

// Your grid's state. The destructor must Destroy every communicator the grid made.
struct ProcessGrid::Impl {};

ProcessGrid::ProcessGrid(comm::Comm& world, const GridShape& shape, std::unique_ptr<Impl> impl)
    : world_(&world), shape_(shape), coord_(CoordOf(shape, world.rank())), impl_(std::move(impl)) {}
ProcessGrid::~ProcessGrid() = default;

// TODO(composition stage A): ProcessGrid::Create -- contract: grid.h (Create: the checks, the Splits, their
//   order and keys); idea: notes/07-composition.md §1. Tools: world.Split(color, key) (comm.h), collective
//   over `world`; the private constructor above, through std::unique_ptr<ProcessGrid>(new ProcessGrid(...)).
//   Ranks that pass the same color share a communicator: which colors give each group its own?
absl::StatusOr<std::unique_ptr<ProcessGrid>> ProcessGrid::Create(comm::Comm& world, const GridShape& shape) {
  return Unimplemented("composition", "A", "ProcessGrid::Create");
}

// TODO(composition stage A): ProcessGrid::axis -- contract: grid.h (axis; kEmb aborts naming embedding()).
comm::Comm& ProcessGrid::axis(Axis axis) {
  throw NotImplementedError("composition", "A", "ProcessGrid::axis");
}

// TODO(composition stage A): ProcessGrid::embedding -- contract: grid.h (embedding).
comm::Comm* ProcessGrid::embedding() {
  throw NotImplementedError("composition", "A", "ProcessGrid::embedding");
}

// TODO(composition stage A): ProcessGrid::Members -- contract: grid.h (Members).
std::vector<int> ProcessGrid::Members(Axis axis) const {
  throw NotImplementedError("composition", "A", "ProcessGrid::Members");
}

}  // namespace distlab::composition
