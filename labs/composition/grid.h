// Lab 7 (composition), stage A: the rank grid (the interface of grid.cc). world = dp x pp x tp ranks,
// numbered in Megatron-LM's order "tp-dp-pp":
//
//   rank = tp + T (dp + D pp)        (T = tp size, D = dp size; tp varies fastest, pp slowest)
//
// Why tp is innermost: tensor parallelism all-reduces an activation of N h values twice per block in forward
// and twice in backward, for every micro-batch, on the critical path; with tp fastest its ranks are
// neighbours (0, 1, ... T-1), which a launcher puts on one node, on the fastest links. Data parallelism talks
// once per step (and can overlap); pipeline parallelism sends one activation per micro-batch and boundary, so
// both can cross nodes. (picotron numbers dp outermost instead, "tp-cp-pp-dp"; the note compares.)
//
// Vocabulary: axis tp, dp, pp, emb; a group of an axis = the global ranks that differ only in that axis's
// coordinate, listed by increasing coordinate. The embedding group of a pipeline = its first and last stage
// (they hold the two copies of a tied embedding); {first} when pp == 1.
//
// Example, (dp, pp, tp) = (2, 2, 2):   rank  0 1 2 3 4 5 6 7
//                                      tp    0 1 0 1 0 1 0 1
//                                      dp    0 0 1 1 0 0 1 1
//                                      pp    0 0 0 0 1 1 1 1
//   tp groups [0,1] [2,3] [4,5] [6,7]   dp groups [0,2] [1,3] [4,6] [5,7]   pp groups [0,4] [1,5] [2,6] [3,7]
//   emb groups [0,4] [1,5] [2,6] [3,7]  ((1, 4, 2): pp groups [0,2,4,6] [1,3,5,7], emb groups [0,6] [1,7])
#ifndef DISTLAB_LABS_COMPOSITION_GRID_H_
#define DISTLAB_LABS_COMPOSITION_GRID_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reference/comm/comm.h"

namespace distlab::composition {

struct GridShape {
  int dp = 1, pp = 1, tp = 1;
  int world() const { return dp * pp * tp; }
};

struct Coord {
  int dp = 0, pp = 0, tp = 0;
  bool operator==(const Coord& o) const { return dp == o.dp && pp == o.pp && tp == o.tp; }
};

enum class Axis { kTp = 0, kDp = 1, kPp = 2, kEmb = 3 };
inline constexpr int kNumAxes = 4;
inline constexpr Axis kAllAxes[] = {Axis::kTp, Axis::kDp, Axis::kPp, Axis::kEmb};
// "tp", "dp", "pp", "emb".
inline const char* Name(Axis axis) {
  static const char* const kNames[] = {"tp", "dp", "pp", "emb"};
  return kNames[static_cast<int>(axis)];
}

// OK, or InvalidArgument naming the numbers, the first broken rule of:
//   every size >= 1:        "tp must be >= 1 (got 0)"        (checked in the order dp, pp, tp)
//   the product is world:   "dp 2 x pp 2 x tp 3 = 12 ranks, but the world has 8"
absl::Status ValidateShape(const GridShape& shape, int world_size);
// The formula above and its inverse (shape assumed valid, rank in [0, world)).
int RankOf(const GridShape& shape, const Coord& coord);
Coord CoordOf(const GridShape& shape, int rank);
// Every group of `axis`, each by increasing coordinate, the groups ordered by their first rank: exactly
// Megatron-LM's RankGenerator(order = "tp-dp-pp").get_ranks(axis). kEmb: one group per pp group, its first
// and last rank ({first} when pp == 1), in the order of the pp groups.
std::vector<std::vector<int>> Groups(const GridShape& shape, Axis axis);

class ProcessGrid {
 public:
  // Collective over `world`: every rank calls it with the same shape. Validates first (ValidateShape with
  // world.size()), so a bad shape returns the same error on every rank and no Split is issued. Then exactly
  // four Splits of `world`, in the order tp, dp, pp, emb on every rank, each with key = the rank's
  // coordinate on that axis (so axis(a).rank() is that coordinate; emb: the pp coordinate, so the first
  // stage is rank 0 of its embedding comm). Ranks in no embedding group pass color -1 to the fourth Split.
  // `world` must outlive the grid; the destructor destroys the grid's communicators.
  static absl::StatusOr<std::unique_ptr<ProcessGrid>> Create(comm::Comm& world, const GridShape& shape);
  ~ProcessGrid();

  const GridShape& shape() const { return shape_; }
  const Coord& coord() const { return coord_; }
  int rank() const { return world_->rank(); }  // the global rank
  comm::Comm& world() { return *world_; }
  // The communicator of this rank's group along kTp, kDp or kPp (size-1 comms included). kEmb aborts: not
  // every rank has one; use embedding().
  comm::Comm& axis(Axis axis);
  // The embedding group's communicator (size 2, or 1 when pp == 1) on first- and last-stage ranks; else null.
  comm::Comm* embedding();
  // This rank's group along `axis` in global ranks (one of Groups(shape, axis)); kEmb: empty off the first
  // and last stage.
  std::vector<int> Members(Axis axis) const;
  bool first_stage() const { return coord().pp == 0; }
  bool last_stage() const { return coord().pp == shape().pp - 1; }

  struct Impl;  // the grid's communicators (your grid.cc defines it)

 private:
  ProcessGrid(comm::Comm& world, const GridShape& shape, std::unique_ptr<Impl> impl);  // in grid.cc
  comm::Comm* world_;
  GridShape shape_;
  Coord coord_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace distlab::composition

#endif  // DISTLAB_LABS_COMPOSITION_GRID_H_
