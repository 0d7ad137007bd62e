// Lab 1 (collectives), stage C: bandwidth arithmetic, the shared-memory bound, the alpha-beta model.
// Your code goes here. Read bandwidth.h and the "bus bandwidth" and "alpha-beta" sections of
// notes/01-collectives.md. Public tests: bandwidth_test.cc.
#include "labs/collectives/bandwidth.h"

#include "reference/base/status.h"

namespace distlab::collectives {

// TODO(collectives stage C): CollectiveBytes.
//   S as nccl-tests reports it. Careful: for reduce-scatter, all-gather and all-to-all `count` is per rank
//   (per block), but S is the WHOLE array.
double CollectiveBytes(Collective c, size_t count, size_t elem_size, int n) {
  throw NotImplementedError("collectives", "C", "CollectiveBytes");
}

// TODO(collectives stage C): CollectiveCount -- the inverse of CollectiveBytes, rounding down as nccl-tests
//   does (the header's examples: per-rank blocks end on a multiple of 16 bytes).
size_t CollectiveCount(Collective c, size_t bytes, size_t elem_size, int n) {
  throw NotImplementedError("collectives", "C", "CollectiveCount");
}

// TODO(collectives stage C): AlgBw = S / t in GB/s (1e9 bytes per second). t <= 0 gives 0.
double AlgBw(double bytes, double seconds) { throw NotImplementedError("collectives", "C", "AlgBw"); }

// TODO(collectives stage C): BusBwFactor -- derive each factor (notes): what fraction of S must cross each
// rank's link for this collective to finish?
double BusBwFactor(Collective c, int n) { throw NotImplementedError("collectives", "C", "BusBwFactor"); }

// TODO(collectives stage C): BusBw = AlgBw * BusBwFactor.
double BusBw(Collective c, int n, double bytes, double seconds) {
  throw NotImplementedError("collectives", "C", "BusBw");
}

// TODO(collectives stage C): AlgBwBound.
//   1. Count, per collective, the bytes that must be read (R*S) and written (W*S) over all ranks.
//   2. A copy of S reads S and writes S at rate B, so t >= (R + W) * S / (2B).
//   3. The bound on algbw = S / t follows. All-reduce: R = W = n, so B / n.
double AlgBwBound(Collective c, int n, double copy_gbps) {
  throw NotImplementedError("collectives", "C", "AlgBwBound");
}

// TODO(collectives stage C): RingAllReduceTime = 2(n-1) alpha + 2(n-1)/n S beta (0 for n = 1).
double RingAllReduceTime(const AlphaBeta& ab, int n, double bytes) {
  throw NotImplementedError("collectives", "C", "RingAllReduceTime");
}

// TODO(collectives stage C): TreeAllReduceTime = 2 L (alpha + S beta), L = ceil(log2 n).
double TreeAllReduceTime(const AlphaBeta& ab, int n, double bytes) {
  throw NotImplementedError("collectives", "C", "TreeAllReduceTime");
}

// TODO(collectives stage C): RingTreeCrossoverBytes -- solve RingAllReduceTime == TreeAllReduceTime for S.
//   0 when the ring never pays more latency than the tree (n - 1 <= L).
double RingTreeCrossoverBytes(const AlphaBeta& ab, int n) {
  throw NotImplementedError("collectives", "C", "RingTreeCrossoverBytes");
}

}  // namespace distlab::collectives
