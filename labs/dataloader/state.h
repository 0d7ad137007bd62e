// Lab 2 (dataloader), stage E: a loader you can stop and resume exactly -- what its checkpoint holds, how the
// epochs and the workers are seeded, how an iterable dataset is split over ranks and workers, and Megatron's
// way of resuming (a count of consumed samples). DataLoader::state_dict / load_state_dict (loader.h) use
// these pieces; the samplers' own state is in sampler.h.
//
// Vocabulary: e = epoch, b = batches of epoch e handed to the caller, W = workers, R = data-parallel ranks,
// r = a rank, w = a worker, mb = micro-batch size.
//
// Left out on purpose: checkpointing the datasets' contents, resuming with out-of-order delivery, resuming
// the middle of a batch.
#ifndef DISTLAB_LABS_DATALOADER_STATE_H_
#define DISTLAB_LABS_DATALOADER_STATE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace distlab::dataloader {

// Everything a new loader (in this process or another) needs to deliver exactly the batches an uninterrupted
// loader would deliver after the last one this loader handed out -- and nothing more: no batch, no buffer,
// no task. The batches the workers had prefetched but the caller had not received are *not* saved: the new
// loader must make them again, none lost, none delivered twice, each with the same random draws.
struct LoaderState {
  int64_t epoch = -1;  // the epoch in progress (-1: StartEpoch was never called)
  // Positions of that epoch handed out: batches the caller received, and errors at a batch's position (that
  // position is behind the caller too).
  int64_t delivered = 0;
  uint64_t generator = 0;  // the loader's generator after it drew this epoch's base seed
  uint64_t base_seed = 0;  // this epoch's base seed
  int num_workers = 0;     // the worker count it was saved with
  bool done = false;       // Next returned false for this epoch: the next StartEpoch begins epoch + 1
  int last_worker =
      -1;  // iterable: the worker of the last batch delivered (-1: none); where round robin goes on
  // The data generator (dataset.h) of every reader, as that reader's first batch after the resume must find
  // it: one per worker, or one (the main process) with num_workers = 0.
  std::vector<uint64_t> rng;
  // Iterable only: each reader's SampleStream::Position(), likewise (0: nothing read).
  std::vector<int64_t> stream;
};

// A text form of the state, one "key value..." line per field in the order above, numbers in decimal:
//   distlab-loader-state 1
//   epoch 2
//   delivered 3
//   generator 12345
//   base_seed 678
//   num_workers 2
//   done 0
//   last_worker 1
//   rng 2 111 222          (the count, then the values)
//   stream 0               (an empty list: the count 0)
// Decode accepts exactly what Encode writes: a first line other than "distlab-loader-state 1", a missing,
// repeated, unknown or out-of-order key, a number that does not parse, a count that disagrees with the values
// that follow it, or an rng/stream list that is neither empty nor max(1, W) long -> InvalidArgument naming
// the line number and the key ("line 9 (rng): 2 values announced, 1 found").
std::string EncodeLoaderState(const LoaderState& state);
absl::StatusOr<LoaderState> DecodeLoaderState(const std::string& text);

// Seeding, as PyTorch does it. The loader owns a generator (a SplitMix64 state starting at
// LoaderOptions::generator_seed); each epoch draws its base seed from it once: base = SplitMix64(generator)
// (PyTorch: torch.empty((), dtype=torch.int64).random_(generator=loader.generator) per epoch's iterator).
// Worker w's seed is base + w (PyTorch's `seed = base_seed + worker_id`, which it gives random.seed and
// torch.manual_seed; NumPy gets a hash of both). The loader seeds each reader's data generator with it at the
// start of every epoch: worker w with WorkerSeed(base, w); the main process (num_workers = 0) with
// WorkerSeed(base, 0) -- so 0 and 1 workers draw the same numbers.
uint64_t EpochBaseSeed(uint64_t* generator);
uint64_t WorkerSeed(uint64_t base_seed, int worker_id);

// An iterable dataset over [start, end) read by R ranks x W workers, so that over one epoch every sample is
// read exactly once, except for a stated tail. Policy "drop", as DistributedSampler(drop_last=True): each
// rank gets the same count q = floor((end - start) / R), so that every rank runs the same number of steps;
// rank r's block is [start + r*q, start + (r+1)*q), and the last (end - start) mod R samples are read by
// nobody that epoch. Within its block, worker w reads ShardRange(block, w, W) (contiguous, ceil-sized shards,
// the last ones shorter). [0, 10) on R = 3, W = 2: rank 0 [0, 3) -> [0, 2), [2, 3); rank 1 [3, 6) -> [3, 5),
// [5, 6); rank 2 [6, 9) -> [6, 8), [8, 9); sample 9 is dropped. R < 1, rank or worker out of range -> an
// empty range [start, start).
std::pair<int64_t, int64_t> GridShard(int64_t start, int64_t end, int rank, int num_ranks, int worker_id,
                                      int num_workers);

// Megatron-LM resumes its GPT dataset with one number: consumed_samples, the samples all data-parallel ranks
// have trained on (global batch size x iterations; Megatron's global batch is mb * R * the number of
// micro-batches per step). Its MegatronPretrainingSampler walks the indices consumed_samples,
// consumed_samples + 1, ..., total - 1 in chunks of mb * R (one micro-batch for every rank) and gives rank r
// the slice [r * mb, (r + 1) * mb) of each; the last, partial chunk is dropped (drop_last, its default).
// The next `count` micro-batches of rank r, as that sampler yields them. consumed > total, mb < 1, R < 1 or
// r outside [0, R) -> InvalidArgument.
absl::StatusOr<std::vector<std::vector<int64_t>>> MegatronMicroBatches(int64_t total, int64_t consumed,
                                                                       int64_t micro_batch, int rank,
                                                                       int num_ranks, int64_t count);

}  // namespace distlab::dataloader

#endif  // DISTLAB_LABS_DATALOADER_STATE_H_
