// Lab 2 (dataloader), stages B and C: the multi-process DataLoader. loader.h is the contract (read its
// diagram and the list of messages); notes/02-dataloader.md sections 2 and 3 explain the design.
//
// Suggested shape (the reference solution has about 700 lines):
//   * Impl holds the options, the epoch's plan of batches, the reorder buffer (task id -> batch or error),
//     the tasks outstanding (task id -> worker), and per worker its pid and index-queue write end.
//   * StartWorkers: one result pipe, then per worker a queue pipe and ForkWorker (worker.h). In the child
//     close every descriptor that is not its own (other workers' queue write ends!), or end-of-file never
//     arrives. In the parent close the child's ends.
//   * Messages on the result pipe must be written with one write() of at most PIPE_BUF bytes, so those of
//     different workers never interleave. The batch values travel in a shared-memory segment named
//     <shm_prefix()>w<worker>_..., created by the worker (shm_open, ftruncate, mmap), mapped and then
//     shm_unlink'ed by the main process.
//   * Last, for speed (the benchmark, not the tests, needs it): a new 1 MiB segment per batch costs about
//     a millisecond (system calls and a page fault per 4 KiB page), writing into one that is already mapped
//     a tenth of that. Let each worker keep a few segments (e.g. prefetch_factor + 2) and reuse them: a word
//     at the start of each says free or busy; the worker marks one busy before it writes, the main process
//     maps a segment once (the first time its name arrives) and the deleter of the Batch's storage marks it
//     free. Never write a segment a Batch still uses; with every segment held, fall back to a one-shot one.
//   * The worker loop polls its queue with a timeout and checks getppid() on silence; end-of-file or a new
//     parent means the main process is gone: unlink your own segments (ReclaimSegments) and return.
//   * The main loop polls the result pipe; on silence it waitpid(WNOHANG)s every worker.
#include "labs/dataloader/loader.h"

#include "absl/strings/str_cat.h"
#include "labs/dataloader/worker.h"
#include "reference/base/status.h"

namespace distlab::dataloader {

// TODO(dataloader stage B): GetWorkerInfo -- a process-wide WorkerInfo that the worker sets right after
// fork; nullptr in the main process. (This starter version is right only in the main process.)
const WorkerInfo* GetWorkerInfo() { return nullptr; }

// TODO(dataloader stage B): ShardRange.
//   1. per = ceil((end - start) / num_workers); worker w gets [start + w*per, start + (w+1)*per) clipped to
//      end, so the last shards may be short or empty (lo == hi).
//   2. end <= start or num_workers <= 0 -> an empty range.
std::pair<int64_t, int64_t> ShardRange(int64_t start, int64_t end, int worker_id, int num_workers) {
  throw NotImplementedError("dataloader", "B", "ShardRange");
}

// TODO(dataloader stage B): RangeDataset::Open -- a stream of scalar samples (shape {}, one value) over
// [start, end) in the main process, or over this worker's ShardRange in a worker. Stage E: over the rank's
// GridShard instead (with one rank it is the same), and a stream that overrides Position and Seek.
std::unique_ptr<SampleStream> RangeDataset::Open() const {
  throw NotImplementedError("dataloader", "B", "RangeDataset::Open");
}

struct DataLoader::Impl {
  // TODO(dataloader stage B): the loader's state.
};

DataLoader::DataLoader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

// TODO(dataloader stage C): the destructor shuts down (never hangs).
DataLoader::~DataLoader() = default;

// TODO(dataloader stage B): Create (both overloads).
//   1. Validate the options (loader.h lists the InvalidArgument cases; negative timeout: "timeout option
//      should be non-negative").
//   2. A unique shm prefix, e.g. "distlab_dl_<pid>_<serial>_": tests look for leaks under it.
absl::StatusOr<std::unique_ptr<DataLoader>> DataLoader::Create(std::shared_ptr<const MapDataset> dataset,
                                                               LoaderOptions options) {
  return Unimplemented("dataloader", "B", "DataLoader::Create");
}
absl::StatusOr<std::unique_ptr<DataLoader>> DataLoader::Create(std::shared_ptr<const IterableDataset> dataset,
                                                               LoaderOptions options) {
  return Unimplemented("dataloader", "B", "DataLoader::Create");
}

// TODO(dataloader stage B): StartEpoch.
//   1. Plan the epoch: map-style batches of the order 0..n-1 (shuffled with SeededShuffle(seed + epoch)
//      when shuffle), the short last batch dropped with drop_last.
//   2. num_workers = 0: nothing else (iterable: Open() a stream). Otherwise fork workers unless persistent
//      ones are alive, and send the first prefetch_factor * num_workers tasks round robin.
absl::Status DataLoader::StartEpoch() { return Unimplemented("dataloader", "B", "DataLoader::StartEpoch"); }

// TODO(dataloader stages B and C): Next.
//   1. In order: hand out the batch of task next_deliver when it is in the reorder buffer; out of order:
//      any finished one. Each batch handed out sends one new task.
//   2. Otherwise wait on the result channel in short polls; on silence waitpid(WNOHANG) every worker: any
//      worker that ended -- exit code 0 too -- is an error (DescribeWorkerExit); then shut down.
//   3. A worker's exception is an error at that batch's position (DescribeWorkerException + " (worker pid
//      P)"; loader.h says how <type> is named, also for what is not a std::exception); the epoch may go on.
//   4. timeout_s > 0 and nothing arrived for that long -> DeadlineExceeded "DataLoader timed out after T
//      seconds", T written by absl::StrCat (0.125 -> "0.125", 2 -> "2").
//   5. Iterable: a worker that ran out answers "exhausted" and gets no more tasks; the others go on round
//      robin; the epoch ends when every worker has run out.
absl::StatusOr<bool> DataLoader::Next(Batch* out) {
  return Unimplemented("dataloader", "B", "DataLoader::Next");
}

int64_t DataLoader::num_batches() const {
  throw NotImplementedError("dataloader", "B", "DataLoader::num_batches");
}
std::vector<pid_t> DataLoader::worker_pids() const {
  throw NotImplementedError("dataloader", "B", "DataLoader::worker_pids");
}
std::string DataLoader::shm_prefix() const {
  throw NotImplementedError("dataloader", "B", "DataLoader::shm_prefix");
}

// TODO(dataloader stage C): Shutdown -- done signal to every worker, join for shutdown_timeout_s, SIGTERM,
// then SIGKILL; drain the result channel (unlink the segments nobody will read); then the resource tracker
// (ReclaimSegments(shm_prefix()), LeakReport to stderr). Idempotent.
absl::Status DataLoader::Shutdown() { return Unimplemented("dataloader", "C", "DataLoader::Shutdown"); }
// TODO(dataloader stage E): state_dict -- what a new loader needs to go on after the last position handed
// out (state.h's LoaderState), and nothing more.
//   1. epoch, delivered (positions handed out, errors included), the generator, this epoch's base seed,
//      num_workers, done (Next returned false), and for iterables the worker of the last delivered batch.
//   2. rng / stream: each reader's data generator and stream Position() *after its last delivered batch* --
//      not its state now: the batches prefetched since are made again after a resume. So each result message
//      must carry the worker's state after the task, and the main process keeps it when it hands the batch
//      out.
//   3. in_order = false with workers and a batch handed out, or a stream whose Position() is -1 ->
//      FailedPrecondition.
absl::StatusOr<LoaderState> DataLoader::state_dict() const {
  return Unimplemented("dataloader", "E", "DataLoader::state_dict");
}

// TODO(dataloader stage E): load_state_dict -- checks the state (loader.h lists the errors) and keeps it for
// the next StartEpoch, which then continues the saved epoch: the same plan, tasks from `delivered` on (task t
// to worker t mod W, map-style; iterable: round robin from the worker after last_worker), each worker's first
// task carrying its saved data generator and stream position. Also in stage E, without any state: draw each
// epoch's base seed with EpochBaseSeed when generator_seed is set, and seed every reader's
// DataGeneratorState() at the start of each epoch (worker w: WorkerSeed(base, w); num_workers = 0:
// WorkerSeed(base, 0)).
absl::Status DataLoader::load_state_dict(const LoaderState& state) {
  return Unimplemented("dataloader", "E", "DataLoader::load_state_dict");
}

int DataLoader::reclaimed_segments() const {
  throw NotImplementedError("dataloader", "C", "DataLoader::reclaimed_segments");
}
std::string DataLoader::tracker_report() const {
  throw NotImplementedError("dataloader", "C", "DataLoader::tracker_report");
}

}  // namespace distlab::dataloader
