// Lab 3 (dedup), stage E: dedup across ranks. Your code goes here.
#include "labs/dedup/across_ranks.h"

#include "reference/base/status.h"

namespace distlab::dedup {

// TODO(dedup stage E): ShuffleBandRecords -- contract: across_ranks.h (ShuffleBandRecords); idea:
//   notes/03-dedup.md §7.2 (its exercise). Tools: comm.AllToAll moves a fixed count per peer (a record is two
//   kI64 words); comm.AllReduce; stream.Synchronize() before you read what a collective wrote, and keep every
//   buffer a call reads or writes alive until then. No Send/Recv is needed.
//   Ranks hold different numbers of records for each owner: how does every rank know how many rounds to
//   make, and how does a receiver know how many records of a round are real?
absl::StatusOr<std::vector<BandRecord>> ShuffleBandRecords(comm::Comm& comm, comm::Stream& stream,
                                                           const std::vector<BandRecord>& mine, int chunk) {
  return distlab::Unimplemented("dedup", "E", "ShuffleBandRecords");
}

// TODO(dedup stage E): CandidatePairsOf -- contract: across_ranks.h (CandidatePairsOf); idea:
//   notes/03-dedup.md §7.2. The list is sorted: where are the records of one bucket?
std::vector<std::pair<int, int>> CandidatePairsOf(const std::vector<BandRecord>& records) {
  throw distlab::NotImplementedError("dedup", "E", "CandidatePairsOf");
}

// TODO(dedup stage E): GlobalLabels -- contract: across_ranks.h (GlobalLabels); idea: notes/03-dedup.md §7.3
//   (its exercise compares two exchanges). Tools: comm.AllGather, comm.AllReduce, stream.Synchronize().
//   Errors: as the header lists -- a rank that returns early while its peers enter a collective leaves them
//   waiting until the watchdog fails them.
//   Which edges does this rank never see unless they are sent to it?
absl::StatusOr<std::vector<int>> GlobalLabels(comm::Comm& comm, comm::Stream& stream, int num_docs,
                                              const std::vector<std::pair<int, int>>& edges) {
  return distlab::Unimplemented("dedup", "E", "GlobalLabels");
}

// TODO(dedup stage E): KeptOf -- contract: across_ranks.h (KeptOf); idea: notes/03-dedup.md §7.4.
//   A cluster whose members sit on two ranks: which of the two keeps a member?
std::vector<int> KeptOf(const std::vector<int>& labels, int first_doc, int count) {
  throw distlab::NotImplementedError("dedup", "E", "KeptOf");
}

}  // namespace distlab::dedup
