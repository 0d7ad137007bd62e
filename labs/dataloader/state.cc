// Lab 2 (dataloader), stage E: the loader's checkpoint, the seeds, rank x worker sharding and Megatron's
// consumed-samples sampler. state.h is the contract; notes/02-dataloader.md section 5 explains what must be
// saved and why. Until a function is done it fails with "TODO(dataloader stage E): <name>".
// Stuck? ./labctl hint dataloader E
#include "labs/dataloader/state.h"

#include "absl/strings/str_cat.h"
#include "labs/dataloader/dataset.h"
#include "labs/dataloader/loader.h"
#include "reference/base/status.h"

namespace distlab::dataloader {

// TODO(dataloader stage E): EncodeLoaderState -- contract: state.h (LoaderState and its text form, drawn
//   line by line).
std::string EncodeLoaderState(const LoaderState& state) {
  throw NotImplementedError("dataloader", "E", "EncodeLoaderState");
}

// TODO(dataloader stage E): DecodeLoaderState -- contract: state.h (the text form; Decode accepts exactly
//   what Encode writes); idea: notes/02-dataloader.md §5. Errors: state.h lists them, each naming the line
//   number and the key. Tools: absl::StrSplit (absl/strings/str_split.h), absl::SimpleAtoi (numbers.h).
//   A number that parses can still be wrong: which fields constrain each other?
absl::StatusOr<LoaderState> DecodeLoaderState(const std::string& text) {
  return Unimplemented("dataloader", "E", "DecodeLoaderState");
}

// TODO(dataloader stage E): EpochBaseSeed -- contract: state.h (Seeding, as PyTorch does it).
uint64_t EpochBaseSeed(uint64_t* generator) { throw NotImplementedError("dataloader", "E", "EpochBaseSeed"); }

// TODO(dataloader stage E): WorkerSeed -- contract: state.h (Seeding, as PyTorch does it).
uint64_t WorkerSeed(uint64_t base_seed, int worker_id) {
  throw NotImplementedError("dataloader", "E", "WorkerSeed");
}

// TODO(dataloader stage E): GridShard -- contract: state.h (GridShard: the policy "drop" and its worked
//   example); idea: notes/02-dataloader.md §5. Tools: ShardRange (loader.h), your stage B function.
//   Errors: none; bad rank or worker numbers, or end <= start, give the empty range [start, start).
std::pair<int64_t, int64_t> GridShard(int64_t start, int64_t end, int rank, int num_ranks, int worker_id,
                                      int num_workers) {
  throw NotImplementedError("dataloader", "E", "GridShard");
}

// TODO(dataloader stage E): MegatronMicroBatches -- contract: state.h (MegatronMicroBatches: Megatron-LM's
//   MegatronPretrainingSampler); idea: notes/02-dataloader.md §5. Errors: state.h lists them.
absl::StatusOr<std::vector<std::vector<int64_t>>> MegatronMicroBatches(int64_t total, int64_t consumed,
                                                                       int64_t micro_batch, int rank,
                                                                       int num_ranks, int64_t count) {
  return Unimplemented("dataloader", "E", "MegatronMicroBatches");
}

}  // namespace distlab::dataloader
