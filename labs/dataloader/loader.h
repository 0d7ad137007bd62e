// Lab 2 (dataloader), stages B and C: the multi-process DataLoader.
//
//            index queue 0 (pipe)  +----------+
//      +------------------------->| worker 0 |--+   batch payload: a POSIX shared-memory segment
//  main|  index queue 1 (pipe)    +----------+  |   (the worker writes it, the main process maps it);
//      +------------------------->| worker 1 |--+   the result channel carries only which segment and the
//      ^                          +----------+  |   shape. A Batch's values never change for as long as
//      +-------- one result channel (pipe) <----+   the caller holds a copy of it.
//
// num_workers = 0 reads in the main process; num_workers = W >= 1 forks W worker processes. Task t (the
// t-th batch of the epoch) goes to the next worker in round-robin order (t % W while all are busy); at most
// prefetch_factor * W tasks are outstanding, and each batch the caller takes sends one more. By default
// batches come back in request order (a reorder buffer keyed by task id); with in_order = false they come
// back as they finish.
//
// Iterable datasets: each worker reads its own stream (the dataset shards itself, see RangeDataset). A worker
// whose stream ends answers "exhausted" for its task and gets no more tasks this epoch; the others go on in
// round-robin order, so the batches arrive round robin over the workers that still have data, and the epoch
// ends when every worker is exhausted. Shards of 1 and 3 samples, batch 1: a0, b0, b1, b2 (never a0, b0 and
// the end: one worker running dry does not end the epoch). With drop_last
// each worker drops its own short last batch. num_workers = 0 reads the whole stream in order.
//
// Stage C (what happens when something dies) is part of this contract -- the main process reports:
//   a worker threw        -> at that batch's position (the epoch can go on), code Internal:
//                              "Caught <type> in DataLoader worker process <id>. Original: <message> (worker
//                              pid P)"
//                            <type>: the exception's dynamic type as abi::__cxa_demangle writes it, fully
//                            qualified ("std::out_of_range", "mylib::(anonymous namespace)::BadRow"), and
//                            <message> its what(). Something not derived from std::exception is named by its
//                            thrown type ("int", "char const*") with <message> "(not a std::exception: no
//                            message)". A Status error of the worker's own (collate's ragged batch) keeps its
//                            code, with <type> the code's name: "Caught INVALID_ARGUMENT in ...".
//                            " (worker pid P)" ends every worker error, P the worker's pid.
//                            With num_workers = 0: "Caught <type> in the DataLoader main process. Original:
//                            <message>" (no pid).
//   a worker exited       -> "DataLoader worker (pid P) exited unexpectedly with exit code n" (also n = 0)
//   a worker was signalled-> "DataLoader worker (pid P) is killed by signal: Killed" (strsignal's name;
//                            SIGBUS adds a hint about shared memory)
//   nothing arrived       -> "DataLoader timed out after T seconds" (timeout_s > 0; code DeadlineExceeded),
//                            T as absl::StrCat writes a double: at most 6 significant digits, no trailing
//                            zeros (0.125 -> "0.125", 0.5 -> "0.5", 2 -> "2", 1.0 / 3 -> "0.333333").
// After a worker died the loader shuts its workers down and every later call returns the same error.
// When the main process dies, its workers exit within about 0.2 s and leave no segment under its shm_prefix()
// (a worker can tell: its index queue reaches end-of-file, or getppid() changes). Shutdown never hangs: done
// signal, join until shutdown_timeout_s has passed, then SIGTERM to the workers still running, 0.2 s more,
// then SIGKILL: it returns within about shutdown_timeout_s + 0.2 s (never terminating a worker earlier); then
// the resource tracker unlinks any segment under this loader's shm_prefix() that a dead worker left and
// reports it (see worker.h).
#ifndef DISTLAB_LABS_DATALOADER_LOADER_H_
#define DISTLAB_LABS_DATALOADER_LOADER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "labs/dataloader/dataset.h"
#include "labs/dataloader/state.h"

namespace distlab::dataloader {

// What a worker process knows about itself (torch.utils.data.get_worker_info()).
struct WorkerInfo {
  int id = 0;  // 0 .. num_workers-1
  int num_workers = 0;
  uint64_t seed =
      0;  // WorkerSeed(this epoch's base seed, id) = base seed + id (state.h); updated every epoch
  // Stage E: the worker's own copy of the dataset (after fork: the same address, another process's memory;
  // what it changes, the main process never sees). The one of the loader's kind is set, the other is null.
  const MapDataset* dataset = nullptr;
  const IterableDataset* iterable_dataset = nullptr;
};

// In a worker process: its WorkerInfo. In the main process (also with num_workers = 0): nullptr.
const WorkerInfo* GetWorkerInfo();

// The part [lo, hi) of [start, end) that worker `worker_id` of `num_workers` reads so that every element is
// read exactly once: contiguous shards of ceil((end - start) / num_workers) elements, the last ones shorter
// or empty. [3, 7) with 2 workers -> [3, 5) and [5, 7).
std::pair<int64_t, int64_t> ShardRange(int64_t start, int64_t end, int worker_id, int num_workers);

// Iterable dataset of the scalars start, start+1, ..., end-1; in a worker it yields only its ShardRange.
// Stage E: as data-parallel rank `rank` of `num_ranks` it reads GridShard(start, end, rank, num_ranks, id, W)
// (state.h): in the main process (num_workers = 0) the rank's whole block, in worker id of W its part of it.
// Its streams are resumable: Position() is the number of samples returned so far.
class RangeDataset : public IterableDataset {
 public:
  RangeDataset(int64_t start, int64_t end, int rank = 0, int num_ranks = 1)
      : start_(start), end_(end), rank_(rank), num_ranks_(num_ranks) {}
  std::unique_ptr<SampleStream> Open() const override;

 private:
  int64_t start_, end_;
  int rank_, num_ranks_;
};

struct LoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;  // map-style: epoch e (0, 1, ...) reads SeededShuffle(0..n-1, seed + e)
  uint64_t seed = 0;
  bool drop_last = false;
  int num_workers = 0;
  int prefetch_factor = 2;          // tasks outstanding = prefetch_factor * num_workers
  double timeout_s = 0;             // 0: wait forever; > 0: error when no batch arrives for this long
  bool persistent_workers = false;  // keep the same worker processes across epochs
  bool in_order = true;
  uint64_t base_seed = 0;  // worker w's WorkerInfo::seed = base_seed + w
  // Stage E: when set, each epoch draws its base seed from the loader's generator (state.h: EpochBaseSeed on
  // a SplitMix64 state starting here), as PyTorch draws it from DataLoader(generator=...); base_seed is
  // ignored.
  std::optional<uint64_t> generator_seed;
  std::function<void(int worker_id)> worker_init_fn;  // runs in each worker after fork, before any task
  double shutdown_timeout_s = 1.0;                    // how long Shutdown joins before it terminates workers
};

class DataLoader {
 public:
  // Invalid options -> InvalidArgument: batch_size < 1, num_workers < 0, prefetch_factor < 1,
  // timeout_s < 0 ("timeout option should be non-negative"), persistent_workers with num_workers = 0.
  static absl::StatusOr<std::unique_ptr<DataLoader>> Create(std::shared_ptr<const MapDataset> dataset,
                                                            LoaderOptions options);
  static absl::StatusOr<std::unique_ptr<DataLoader>> Create(std::shared_ptr<const IterableDataset> dataset,
                                                            LoaderOptions options);
  ~DataLoader();  // Shutdown(); never hangs
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Begins the next epoch (forking workers unless persistent ones are alive) and sends the first tasks; after
  // load_state_dict, continues the saved epoch instead (stage E).
  absl::Status StartEpoch();
  // The next batch of the epoch in *out and true; false when the epoch is over; an error as described above.
  absl::StatusOr<bool> Next(Batch* out);
  // Map-style: batches per epoch; iterable: -1.
  int64_t num_batches() const;

  std::vector<pid_t> worker_pids() const;  // the live workers, by worker id (empty when none)
  std::string shm_prefix() const;          // every segment of this loader is /dev/shm/<shm_prefix()>...

  // Stops the workers (done signal, join, SIGTERM, SIGKILL), drains the result channel, then runs the
  // resource tracker. Idempotent.
  absl::Status Shutdown();
  int reclaimed_segments() const;      // segments the tracker unlinked so far
  std::string tracker_report() const;  // its report, "" when it found nothing

  // --- Stage E: stop and resume exactly (state.h says what the state holds and why)
  // ------------------------- Every reader's data generator is seeded at the start of each epoch (worker w:
  // WorkerSeed(base, w); the main process: WorkerSeed(base, 0)), also persistent workers (PyTorch seeds those
  // once, when they start; the lab reseeds them so that an epoch depends on its base seed only).
  //
  // state_dict: the state after the last position handed out. Errors: in_order = false with workers and a
  // batch handed out (what was delivered is then not a prefix of the epoch) -> FailedPrecondition; an
  // iterable stream that returned data but whose Position() is -1 -> FailedPrecondition saying it cannot be
  // resumed; a broken loader -> its error.
  absl::StatusOr<LoaderState> state_dict() const;
  // Between epochs (no epoch in progress, else FailedPrecondition): the next StartEpoch continues `state`'s
  // epoch after its `delivered` positions -- same indices, same order, same per-sample draws as a loader that
  // never stopped -- or, when the state's epoch is done (or -1), begins the epoch after it. The dataset,
  // batch size, shuffle seed and drop_last are the caller's to keep the same (they are not saved, as in
  // PyTorch). Errors: a state of the middle of an epoch saved with another num_workers -> FailedPrecondition
  // naming both counts ("saved with 2 workers ... this loader has 3"; each worker's random stream, and an
  // iterable's shards, depend on the count; at an epoch boundary any count is fine); delivered < 0, more
  // than the epoch's batches, or rng/stream lists that do not fit -> InvalidArgument naming the field.
  absl::Status load_state_dict(const LoaderState& state);

 private:
  struct Impl;
  explicit DataLoader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace distlab::dataloader

#endif  // DISTLAB_LABS_DATALOADER_LOADER_H_
