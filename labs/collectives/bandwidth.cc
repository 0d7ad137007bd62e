// Lab 1 (collectives), stage C: bandwidth arithmetic, the shared-memory bound, the alpha-beta model.
// Your code goes here. Read bandwidth.h and notes/01-collectives.md sections 5 to 7. Public tests:
// bandwidth_test.cc.
#include "labs/collectives/bandwidth.h"

#include "reference/base/status.h"

namespace distlab::collectives {

// TODO(collectives stage C): CollectiveBytes -- contract: bandwidth.h (CollectiveBytes); idea:
//   notes/01-collectives.md §5.
//   What does `count` measure for each collective, and what does S measure?
double CollectiveBytes(Collective c, size_t count, size_t elem_size, int n) {
  throw NotImplementedError("collectives", "C", "CollectiveBytes");
}

// TODO(collectives stage C): CollectiveCount -- contract: bandwidth.h (CollectiveCount, with its examples);
//   idea: notes/01-collectives.md §5.
size_t CollectiveCount(Collective c, size_t bytes, size_t elem_size, int n) {
  throw NotImplementedError("collectives", "C", "CollectiveCount");
}

// TODO(collectives stage C): AlgBw -- contract: bandwidth.h (AlgBw); idea: notes/01-collectives.md §5.
double AlgBw(double bytes, double seconds) { throw NotImplementedError("collectives", "C", "AlgBw"); }

// TODO(collectives stage C): BusBwFactor -- contract: bandwidth.h (BusBwFactor); idea:
//   notes/01-collectives.md §5.
//   The factors are nccl-tests'; derive each one: what fraction of S must cross each rank's link?
double BusBwFactor(Collective c, int n) { throw NotImplementedError("collectives", "C", "BusBwFactor"); }

// TODO(collectives stage C): BusBw -- contract: bandwidth.h (BusBw); idea: notes/01-collectives.md §5.
double BusBw(Collective c, int n, double bytes, double seconds) {
  throw NotImplementedError("collectives", "C", "BusBw");
}

// TODO(collectives stage C): AlgBwBound -- contract: bandwidth.h (AlgBwBound: the model and its
//   conventions); idea: notes/01-collectives.md §6.
//   Over all ranks together, how many bytes must this collective read, and how many must it write?
double AlgBwBound(Collective c, int n, double copy_gbps) {
  throw NotImplementedError("collectives", "C", "AlgBwBound");
}

// TODO(collectives stage C): RingAllReduceTime -- contract: bandwidth.h (the alpha-beta model); idea:
//   notes/01-collectives.md §7.
double RingAllReduceTime(const AlphaBeta& ab, int n, double bytes) {
  throw NotImplementedError("collectives", "C", "RingAllReduceTime");
}

// TODO(collectives stage C): TreeAllReduceTime -- contract: bandwidth.h (the alpha-beta model); idea:
//   notes/01-collectives.md §7.
double TreeAllReduceTime(const AlphaBeta& ab, int n, double bytes) {
  throw NotImplementedError("collectives", "C", "TreeAllReduceTime");
}

// TODO(collectives stage C): RingTreeCrossoverBytes -- contract: bandwidth.h (RingTreeCrossoverBytes);
//   idea: notes/01-collectives.md §7.
//   For which n does the ring never send more messages than the tree?
double RingTreeCrossoverBytes(const AlphaBeta& ab, int n) {
  throw NotImplementedError("collectives", "C", "RingTreeCrossoverBytes");
}

}  // namespace distlab::collectives
