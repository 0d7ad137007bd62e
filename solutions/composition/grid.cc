// Lab 7 (composition), stage A (solution): the rank grid in Megatron-LM's order tp-dp-pp.
#include "labs/composition/grid.h"

#include <algorithm>
#include <string>

#include "reference/base/status.h"
#include "reference/tensor/tensor.h"

namespace distlab::composition {

absl::Status ValidateShape(const GridShape& shape, int world_size) {
  const std::pair<const char*, int> sizes[] = {{"dp", shape.dp}, {"pp", shape.pp}, {"tp", shape.tp}};
  for (const auto& [name, size] : sizes) {
    if (size < 1) {
      return absl::InvalidArgumentError(std::string(name) + " must be >= 1 (got " + std::to_string(size) +
                                        ")");
    }
  }
  if (shape.world() != world_size) {
    return absl::InvalidArgumentError("dp " + std::to_string(shape.dp) + " x pp " + std::to_string(shape.pp) +
                                      " x tp " + std::to_string(shape.tp) + " = " +
                                      std::to_string(shape.world()) + " ranks, but the world has " +
                                      std::to_string(world_size));
  }
  return absl::OkStatus();
}

int RankOf(const GridShape& shape, const Coord& c) { return c.tp + shape.tp * (c.dp + shape.dp * c.pp); }

Coord CoordOf(const GridShape& shape, int rank) {
  Coord c;
  c.tp = rank % shape.tp;
  c.dp = (rank / shape.tp) % shape.dp;
  c.pp = rank / (shape.tp * shape.dp);
  return c;
}

namespace {

// The size of an axis and the coordinate a rank has on it (kEmb runs along pp).
int Size(const GridShape& s, Axis axis) { return axis == Axis::kTp ? s.tp : axis == Axis::kDp ? s.dp : s.pp; }
int& At(Coord& c, Axis axis) { return axis == Axis::kTp ? c.tp : axis == Axis::kDp ? c.dp : c.pp; }
int At(const Coord& c, Axis axis) { return axis == Axis::kTp ? c.tp : axis == Axis::kDp ? c.dp : c.pp; }

// The group of `axis` through the rank at `c`: vary that one coordinate.
std::vector<int> GroupThrough(const GridShape& s, Coord c, Axis axis) {
  std::vector<int> out;
  const Axis along = axis == Axis::kEmb ? Axis::kPp : axis;
  for (int i = 0; i < Size(s, along); ++i) {
    if (axis == Axis::kEmb && i != 0 && i != s.pp - 1) continue;
    At(c, along) = i;
    out.push_back(RankOf(s, c));
  }
  return out;
}

// A color naming the group of `axis` through `c`: the coordinates of the other two axes.
int GroupColor(const GridShape& s, const Coord& c, Axis axis) {
  switch (axis) {
    case Axis::kTp:
      return c.dp + s.dp * c.pp;
    case Axis::kDp:
      return c.tp + s.tp * c.pp;
    case Axis::kPp:
    case Axis::kEmb:
      return c.tp + s.tp * c.dp;
  }
  return -1;
}

}  // namespace

std::vector<std::vector<int>> Groups(const GridShape& shape, Axis axis) {
  std::vector<std::vector<int>> out;
  for (int r = 0; r < shape.world(); ++r) {
    const Coord c = CoordOf(shape, r);
    const Axis along = axis == Axis::kEmb ? Axis::kPp : axis;
    if (At(c, along) == 0) out.push_back(GroupThrough(shape, c, axis));  // one group per first member
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct ProcessGrid::Impl {
  std::unique_ptr<comm::Comm> comms[3];  // tp, dp, pp
  std::unique_ptr<comm::Comm> emb;       // null off the first and last stage
};

ProcessGrid::ProcessGrid(comm::Comm& world, const GridShape& shape, std::unique_ptr<Impl> impl)
    : world_(&world), shape_(shape), coord_(CoordOf(shape, world.rank())), impl_(std::move(impl)) {}

ProcessGrid::~ProcessGrid() {
  for (auto& c : impl_->comms) {
    if (c) c->Destroy().IgnoreError();
  }
  if (impl_->emb) impl_->emb->Destroy().IgnoreError();
}

absl::StatusOr<std::unique_ptr<ProcessGrid>> ProcessGrid::Create(comm::Comm& world, const GridShape& shape) {
  RETURN_IF_ERROR(ValidateShape(shape, world.size()));
  auto impl = std::make_unique<Impl>();
  const Coord c = CoordOf(shape, world.rank());
  for (Axis axis : {Axis::kTp, Axis::kDp, Axis::kPp}) {
    ASSIGN_OR_RETURN(impl->comms[static_cast<int>(axis)],
                     world.Split(GroupColor(shape, c, axis), At(c, axis)));
  }
  const bool on_ends = c.pp == 0 || c.pp == shape.pp - 1;
  ASSIGN_OR_RETURN(impl->emb, world.Split(on_ends ? GroupColor(shape, c, Axis::kEmb) : -1, c.pp));
  return std::unique_ptr<ProcessGrid>(new ProcessGrid(world, shape, std::move(impl)));
}

comm::Comm& ProcessGrid::axis(Axis axis) {
  if (axis == Axis::kEmb) {
    tensor::Fail("ProcessGrid::axis", "the embedding group is not on every rank: use embedding()");
  }
  return *impl_->comms[static_cast<int>(axis)];
}

comm::Comm* ProcessGrid::embedding() { return impl_->emb.get(); }

std::vector<int> ProcessGrid::Members(Axis axis) const {
  if (axis == Axis::kEmb && !first_stage() && !last_stage()) return {};
  return GroupThrough(shape_, coord_, axis);
}

}  // namespace distlab::composition
