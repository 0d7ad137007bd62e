// Lab 1 (collectives), stage C -- solution: nccl-tests' bandwidth arithmetic, the shared-memory bound and
// the alpha-beta model. Derivations: notes/01-collectives.md.
#include "labs/collectives/bandwidth.h"

#include <cmath>
#include <limits>

namespace distlab::collectives {

double CollectiveBytes(Collective c, size_t count, size_t elem_size, int n) {
  switch (c) {
    // The per-rank collectives move a whole array of n blocks: S counts all of it.
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll:
      return static_cast<double>(count) * elem_size * n;
    default:
      return static_cast<double>(count) * elem_size;
  }
}

size_t CollectiveCount(Collective c, size_t bytes, size_t elem_size, int n) {
  const size_t elements = bytes / elem_size;
  switch (c) {
    // A whole number of elements per rank, then down to a multiple of 16 bytes (nccl-tests since
    // v2.13.12): 16 / elem_size is a power of two for every dtype, so the mask clears the low bits.
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll: {
      const size_t per_rank = elements / n;
      const size_t multiple = elem_size < 16 ? 16 / elem_size : 1;
      return per_rank & ~(multiple - 1);
    }
    default:
      return elements;
  }
}

double AlgBw(double bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0.0; }

double BusBwFactor(Collective c, int n) {
  switch (c) {
    // Each rank must send and receive (n-1)/n of the array twice (once reduced in pieces, once gathered).
    case Collective::kAllReduce:
      return 2.0 * (n - 1) / n;
    // Each rank must receive every block but its own: (n-1)/n of S.
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll:
      return static_cast<double>(n - 1) / n;
    // Every byte crosses one link at least once.
    case Collective::kBroadcast:
    case Collective::kReduce:
    case Collective::kSendRecv:
      return 1.0;
  }
  return 1.0;
}

double BusBw(Collective c, int n, double bytes, double seconds) {
  return AlgBw(bytes, seconds) * BusBwFactor(c, n);
}

double AlgBwBound(Collective c, int n, double copy_gbps) {
  // A copy of S bytes reads S and writes S, so the memory system moves 2B bytes/s of reads plus writes.
  // A collective that must read R*S and write W*S bytes takes t >= (R + W) * S / (2B): algbw <= 2B / (R+W).
  double reads = 1, writes = 1;
  switch (c) {
    case Collective::kAllReduce:
      reads = n, writes = n;
      break;  // every input, every output
    case Collective::kReduceScatter:
      reads = n, writes = 1;
      break;  // n inputs of S; n outputs of S/n
    case Collective::kAllGather:
      reads = 1, writes = n;
      break;  // n inputs of S/n; n outputs of S
    case Collective::kBroadcast:
      reads = 1, writes = n - 1;
      break;  // root's S; n-1 copies (in place)
    case Collective::kReduce:
      reads = n, writes = 1;
      break;  // n inputs; one output
    case Collective::kAllToAll:
      reads = n, writes = n;
      break;  // every block read and written
    case Collective::kSendRecv:
      reads = n, writes = n;
      break;  // n ranks each send S
  }
  if (reads + writes <= 0) return std::numeric_limits<double>::infinity();
  return 2.0 * copy_gbps / (reads + writes);
}

double RingAllReduceTime(const AlphaBeta& ab, int n, double bytes) {
  if (n <= 1) return 0;
  return 2.0 * (n - 1) * ab.alpha_s + 2.0 * (n - 1) / n * bytes * ab.beta_s_per_byte;
}

namespace {
int Levels(int n) { return n <= 1 ? 0 : static_cast<int>(std::ceil(std::log2(n))); }
}  // namespace

double TreeAllReduceTime(const AlphaBeta& ab, int n, double bytes) {
  return 2.0 * Levels(n) * (ab.alpha_s + bytes * ab.beta_s_per_byte);
}

double RingTreeCrossoverBytes(const AlphaBeta& ab, int n) {
  // 2(n-1)a + 2(n-1)/n S b = 2L (a + S b)  =>  S* = (n-1-L) a / ((L - (n-1)/n) b).
  const int levels = Levels(n);
  const double latency_gap = (n - 1 - levels) * ab.alpha_s;  // the ring's extra messages
  if (n <= 1 || latency_gap <= 0) return 0;                  // the ring never pays more latency
  const double bandwidth_gap = (levels - static_cast<double>(n - 1) / n) * ab.beta_s_per_byte;
  if (bandwidth_gap <= 0) return std::numeric_limits<double>::infinity();
  return latency_gap / bandwidth_gap;
}

}  // namespace distlab::collectives
