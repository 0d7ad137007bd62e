// Lab 2 (dataloader), stage E: the loader's checkpoint, the seeds, rank x worker sharding and Megatron's
// consumed-samples sampler. state.h is the contract; notes/02-dataloader.md section 5 explains what must be
// saved and why. Until a function is done it fails with "TODO(dataloader stage E): <name>".
#include "labs/dataloader/state.h"

#include "absl/strings/str_cat.h"
#include "labs/dataloader/dataset.h"
#include "labs/dataloader/loader.h"
#include "reference/base/status.h"

namespace distlab::dataloader {

// TODO(dataloader stage E): EncodeLoaderState -- the text form state.h shows, one "key value" line per field
// in that order, the two lists as their count followed by the values.
std::string EncodeLoaderState(const LoaderState& state) {
  throw NotImplementedError("dataloader", "E", "EncodeLoaderState");
}

// TODO(dataloader stage E): DecodeLoaderState -- exactly what Encode writes back into a LoaderState.
//   1. The first line is "distlab-loader-state 1"; then every key once, in order.
//   2. Any mismatch (key, count, a number that does not parse, rng/stream lists that fit neither 0 nor
//      max(1, num_workers) entries) -> InvalidArgument naming the line number and the key.
absl::StatusOr<LoaderState> DecodeLoaderState(const std::string& text) {
  return Unimplemented("dataloader", "E", "DecodeLoaderState");
}

// TODO(dataloader stage E): EpochBaseSeed -- one SplitMix64 draw from the loader's generator state.
uint64_t EpochBaseSeed(uint64_t* generator) { throw NotImplementedError("dataloader", "E", "EpochBaseSeed"); }

// TODO(dataloader stage E): WorkerSeed -- PyTorch's base_seed + worker_id.
uint64_t WorkerSeed(uint64_t base_seed, int worker_id) {
  throw NotImplementedError("dataloader", "E", "WorkerSeed");
}

// TODO(dataloader stage E): GridShard.
//   1. q = floor((end - start) / R): every rank the same count; rank r's block is [start + r*q, start +
//   (r+1)*q).
//   2. Worker w of W reads ShardRange(block, w, W).
//   3. Bad rank/worker numbers or end <= start -> [start, start).
std::pair<int64_t, int64_t> GridShard(int64_t start, int64_t end, int rank, int num_ranks, int worker_id,
                                      int num_workers) {
  throw NotImplementedError("dataloader", "E", "GridShard");
}

// TODO(dataloader stage E): MegatronMicroBatches -- global batches of mb * R indices from `consumed` on, rank
// r's slice [r*mb, (r+1)*mb) of each, the last partial global batch dropped, at most `count` of them.
absl::StatusOr<std::vector<std::vector<int64_t>>> MegatronMicroBatches(int64_t total, int64_t consumed,
                                                                       int64_t micro_batch, int rank,
                                                                       int num_ranks, int64_t count) {
  return Unimplemented("dataloader", "E", "MegatronMicroBatches");
}

}  // namespace distlab::dataloader
