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
// The derivations are in notes/01-collectives.md (sections 5 to 7); each function names the tests that
// check it.
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
// and reduce-scatter, per-peer block for all-to-all; the whole count otherwise).
// Test: BandwidthMath.BytesOfEachCollective.
double CollectiveBytes(Collective c, size_t count, size_t elem_size, int n);

// The NCCL `count` argument for a requested size of `bytes`, as nccl-tests computes it (since v2.13.12,
// commit 29f4114 of December 2024): count = floor(bytes / elem_size) elements, and for all-gather,
// reduce-scatter and all-to-all the per-rank count floor(count / n) rounded DOWN to a multiple of 16 bytes
// (of 16 / elem_size elements), so that every rank's block starts 16-byte aligned. Examples:
//   all_gather, 1000 B of f32 on 3 ranks: 250 elements, 83 per rank -> 80 (320 B); S = 960 B
//   all_to_all, 4096 B of bf16 on 4 ranks: 2048 elements, 512 per peer block (already a multiple of 8)
//   all_to_all, 24 B of bf16 on 3 ranks: 4 per block -> 0 (less than 16 B per rank)
//   all_reduce, 4001 B of f32: 1000 (whole elements only; no per-rank rounding)
// (nccl-tests up to v2.13.11 rounded all-gather and reduce-scatter to a multiple of 4 elements and did not
// round all-to-all.) Test: BandwidthMath.CountsRoundDownTo16BytesPerRank.
size_t CollectiveCount(Collective c, size_t bytes, size_t elem_size, int n);

// --- Stage C: bandwidth -------------------------------------------------------------------------------

// S / t in GB/s; 0 when t <= 0. Test: BandwidthMath.AlgBwIsBytesOverTime.
double AlgBw(double bytes, double seconds);

// nccl-tests' bus-bandwidth factor: all-reduce 2(n-1)/n; reduce-scatter, all-gather, all-to-all (n-1)/n;
// broadcast, reduce, sendrecv 1. Test: BandwidthMath.BusBwFactors.
double BusBwFactor(Collective c, int n);

// algbw * BusBwFactor, in GB/s.
double BusBw(Collective c, int n, double bytes, double seconds);

// The shared-memory bound on algbw (GB/s) for collective c on n ranks of one machine whose aggregate
// memcpy bandwidth is `copy_gbps` = B. The model: memory traffic is the only cost, and it runs at the rate
// of a copy, which reads S bytes and writes S bytes in S / B seconds. The traffic counted is the least the
// collective needs, over all ranks together: every byte of every input buffer it reads, read once, and
// every byte of every output buffer it writes, written once -- out of place, except that broadcast's root
// is taken in place (its output already holds the data, so it is not written); and sendrecv is nccl-tests'
// sendrecv_perf, in which every rank sends its S to the next rank while it receives S from the previous
// one. The bound is S divided by the least time that traffic takes.
// Test: BandwidthMath.SharedMemoryBound; public: BandwidthMath.AllReduceBoundIsCopyBandwidthOverN,
// BandwidthMath.BroadcastBoundCountsTheRootInPlace, BandwidthMath.ReduceScatterBoundOnThreeRanks,
// BandwidthMath.SendRecvBoundIsNCopies.
double AlgBwBound(Collective c, int n, double copy_gbps);

// --- Stage C: the alpha-beta model --------------------------------------------------------------------

// A link costs alpha seconds per message plus beta seconds per byte.
struct AlphaBeta {
  double alpha_s = 0;
  double beta_s_per_byte = 0;
};

// The model of both times: a step in which every rank sends one message of m bytes (and receives one)
// costs alpha + m * beta, and the steps run one after the other. The time of one rank alone (n = 1) is 0.
//
// Ring all-reduce of S bytes (section 4 of the notes): the reduce-scatter and all-gather steps, each one
// message of S/n bytes (S/n taken as a real number, also when n does not divide S).
// Test: AlphaBeta.RingTime; public: AlphaBeta.RingAndTreeOnFourAndFiveRanks.
double RingAllReduceTime(const AlphaBeta& ab, int n, double bytes);

// Tree all-reduce: reduce up a binomial tree, then broadcast down it, in L = ceil(log2 n) rounds each way;
// every round is one message of the whole S (no pipelining), and in a binomial tree a rank talks to one
// partner per round, so a round costs one message time. (A binary tree's parent serves its two children one
// after the other: about 2 floor(log2 n) message times per phase.)
// Test: AlphaBeta.TreeTime; public: AlphaBeta.RingAndTreeOnFourAndFiveRanks.
double TreeAllReduceTime(const AlphaBeta& ab, int n, double bytes);

// The size S* where the two costs are equal: the tree wins below it, the ring above. 0 when the ring is
// never slower, whatever S. Test: AlphaBeta.CrossoverEqualizesTheCosts; public:
// AlphaBeta.CrossoverOnEightRanks.
double RingTreeCrossoverBytes(const AlphaBeta& ab, int n);

}  // namespace distlab::collectives

#endif  // DISTLAB_LABS_COLLECTIVES_BANDWIDTH_H_
