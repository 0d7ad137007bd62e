// Lab 1 (collectives), stage C: the bandwidth arithmetic of nccl-tests, the shared-memory bound, and the
// alpha-beta cost model of ring vs tree all-reduce.
//
// Vocabulary: n = ranks, S = bytes of the whole array a collective works on (for all-gather and
// reduce-scatter: n times the per-rank count times the element size), t = seconds, B = the aggregate memcpy
// bandwidth of the machine (a copy of S bytes counts S). GB/s means 1e9 bytes per second, as nccl-tests.
//
//   algbw = S / t                 (what the caller sees)
//   busbw = algbw * factor(c, n)  (what each link carried; comparable across collectives and n)
//
// The derivations are in notes/01-collectives.md; each function names the test that checks it.
#ifndef DISTLAB_LABS_COLLECTIVES_BANDWIDTH_H_
#define DISTLAB_LABS_COLLECTIVES_BANDWIDTH_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace distlab::collectives {

enum class Collective { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll, kSendRecv };

inline constexpr Collective kAllCollectives[] = {
    Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather, Collective::kBroadcast,
    Collective::kReduce,    Collective::kAllToAll,      Collective::kSendRecv};

// "all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all", "sendrecv" (the names
// of nccl-tests' binaries, without _perf).
inline std::string_view CollectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kReduceScatter:
      return "reduce_scatter";
    case Collective::kAllGather:
      return "all_gather";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kReduce:
      return "reduce";
    case Collective::kAllToAll:
      return "all_to_all";
    case Collective::kSendRecv:
      return "sendrecv";
  }
  return "?";
}

// Inverse of CollectiveName; the error lists the accepted names.
inline absl::StatusOr<Collective> ParseCollective(std::string_view name) {
  std::string accepted;
  for (Collective c : kAllCollectives) {
    if (name == CollectiveName(c)) return c;
    accepted += (accepted.empty() ? "" : ", ") + std::string(CollectiveName(c));
  }
  return absl::InvalidArgumentError("unknown collective '" + std::string(name) + "'; expected one of " +
                                    accepted);
}

// --- Stage C: sizes -----------------------------------------------------------------------------------

// S, the bytes nccl-tests reports for one call with NCCL's `count` argument (per-rank count for all-gather
// and reduce-scatter, per-peer block for all-to-all; the whole count otherwise). Test: BusBw.*Bytes*.
double CollectiveBytes(Collective c, size_t count, size_t elem_size, int n);

// The NCCL `count` argument for a requested size of `bytes` (the inverse of CollectiveBytes, rounding down
// to whole elements, and for the per-rank collectives to a whole number of elements per rank).
size_t CollectiveCount(Collective c, size_t bytes, size_t elem_size, int n);

// --- Stage C: bandwidth -------------------------------------------------------------------------------

// S / t in GB/s. Test: BandwidthMath.AlgBwIsBytesOverTime.
double AlgBw(double bytes, double seconds);

// nccl-tests' bus-bandwidth factor: all-reduce 2(n-1)/n; reduce-scatter, all-gather, all-to-all (n-1)/n;
// broadcast, reduce, sendrecv 1. Test: BandwidthMath.BusBwFactors.
double BusBwFactor(Collective c, int n);

// algbw * BusBwFactor, in GB/s.
double BusBw(Collective c, int n, double bytes, double seconds);

// The shared-memory bound on algbw (GB/s) for collective c on n ranks of one machine whose aggregate
// memcpy bandwidth is `copy_gbps`: the least bytes the collective must read and write, counted against a
// copy (which reads S and writes S). All-reduce reads n*S and writes n*S, so algbw <= B/n.
// Test: BandwidthMath.SharedMemoryBound.
double AlgBwBound(Collective c, int n, double copy_gbps);

// --- Stage C: the alpha-beta model --------------------------------------------------------------------

// A link costs alpha seconds per message plus beta seconds per byte.
struct AlphaBeta {
  double alpha_s = 0;
  double beta_s_per_byte = 0;
};

// Ring all-reduce of S bytes: 2(n-1) steps, each one message of S/n bytes:
//   T_ring = 2(n-1) * alpha + 2(n-1)/n * S * beta.             Test: AlphaBeta.RingTime
double RingAllReduceTime(const AlphaBeta& ab, int n, double bytes);

// Tree all-reduce (reduce up a binary tree, then broadcast down; whole messages, no pipelining), with
// L = ceil(log2 n) levels:  T_tree = 2L * (alpha + S * beta).   Test: AlphaBeta.TreeTime
double TreeAllReduceTime(const AlphaBeta& ab, int n, double bytes);

// The size S* where the two costs are equal: the tree wins below it, the ring above. 0 when the ring is
// never slower (n <= 3). Test: AlphaBeta.CrossoverEqualizesTheCosts.
double RingTreeCrossoverBytes(const AlphaBeta& ab, int n);

}  // namespace distlab::collectives

#endif  // DISTLAB_LABS_COLLECTIVES_BANDWIDTH_H_
