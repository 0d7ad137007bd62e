// Lab 2 (dataloader), stages B, C and E: the multi-process DataLoader. loader.h is the contract (read its
// diagram and the list of messages); notes/02-dataloader.md sections 2, 3 and 5 explain the design. The
// reference solution has about 700 lines: give the worker's loop, the main process's wait and the
// shared-memory path a function each. Until a function is done it fails with "TODO(dataloader stage X):
// <name>". Stuck? ./labctl hint dataloader B (or C, E).
#include "labs/dataloader/loader.h"

#include "absl/strings/str_cat.h"
#include "labs/dataloader/worker.h"
#include "reference/base/status.h"

namespace distlab::dataloader {

// TODO(dataloader stage B): GetWorkerInfo -- contract: loader.h (WorkerInfo, GetWorkerInfo); idea:
//   notes/02-dataloader.md §2. After fork each process has its own copy of every global: what the worker
//   sets there, the main process never sees. (This starter version is right only in the main process.)
const WorkerInfo* GetWorkerInfo() { return nullptr; }

// TODO(dataloader stage B): ShardRange -- contract: loader.h (ShardRange); idea: notes/02-dataloader.md §2.
//   Errors: none; end <= start or num_workers <= 0 gives an empty range (lo == hi).
//   With more workers than elements, where do the last workers' shards start and end?
std::pair<int64_t, int64_t> ShardRange(int64_t start, int64_t end, int worker_id, int num_workers) {
  throw NotImplementedError("dataloader", "B", "ShardRange");
}

// TODO(dataloader stage B): RangeDataset::Open -- contract: loader.h (RangeDataset), dataset.h (SampleStream;
//   stage E adds Position and Seek) and, in stage E, state.h (GridShard); idea: notes/02-dataloader.md §2.
//   Open() runs once per epoch in every process that reads: how does it learn which process it is in?
std::unique_ptr<SampleStream> RangeDataset::Open() const {
  throw NotImplementedError("dataloader", "B", "RangeDataset::Open");
}

struct DataLoader::Impl {
  // TODO(dataloader stage B): whatever your loader needs; loader.h's contract is all that is observed.
};

DataLoader::DataLoader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

// TODO(dataloader stage C): ~DataLoader -- contract: loader.h (~DataLoader, Shutdown): it never hangs.
DataLoader::~DataLoader() = default;

// TODO(dataloader stage B): DataLoader::Create (both overloads) -- contract: loader.h (DataLoader::Create,
//   LoaderOptions); idea: notes/02-dataloader.md §2. Errors: loader.h lists the InvalidArgument cases.
//   shm_prefix() must be this loader's alone (two loaders in one process, or two processes, never share
//   one): the tests look for leaked segments under it.
absl::StatusOr<std::unique_ptr<DataLoader>> DataLoader::Create(std::shared_ptr<const MapDataset> dataset,
                                                               LoaderOptions options) {
  return Unimplemented("dataloader", "B", "DataLoader::Create");
}
absl::StatusOr<std::unique_ptr<DataLoader>> DataLoader::Create(std::shared_ptr<const IterableDataset> dataset,
                                                               LoaderOptions options) {
  return Unimplemented("dataloader", "B", "DataLoader::Create");
}

// TODO(dataloader stage B): StartEpoch -- contract: loader.h (the diagram, LoaderOptions, StartEpoch); idea:
//   notes/02-dataloader.md §2. Tools: ForkWorker (worker.h), pipe(2), and sampler.h's pieces for the plan.
//   A forked child inherits every descriptor the parent has open, the other workers' queue ends included.
//   When does a worker see end-of-file on its queue, and who else might still hold the write end?
absl::Status DataLoader::StartEpoch() { return Unimplemented("dataloader", "B", "DataLoader::StartEpoch"); }

// TODO(dataloader stages B and C): Next -- contract: loader.h (the diagram, its messages, Next); idea:
//   notes/02-dataloader.md §2 and §3. Tools: poll(2), waitpid(WNOHANG), worker.h's Describe* functions. The
//   workers share one result pipe: each message is one write() of at most PIPE_BUF bytes. Values travel in
//   shm_open/mmap segments named <shm_prefix()>...; a Batch's storage deleter runs when its last copy goes.
//   A dead worker sends nothing: how does the main process find out, and how soon?
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

// TODO(dataloader stage C): Shutdown -- contract: loader.h (the paragraph on Shutdown, DataLoader::Shutdown)
//   and worker.h (the resource tracker); idea: notes/02-dataloader.md §3. Tools: kill(2), waitpid(WNOHANG)
//   in a loop against a deadline (never a blocking waitpid), ReclaimSegments and LeakReport (to stderr).
//   A worker may be stuck in the dataset's Get for a minute: what bounds the time Shutdown takes?
absl::Status DataLoader::Shutdown() { return Unimplemented("dataloader", "C", "DataLoader::Shutdown"); }
// TODO(dataloader stage E): state_dict -- contract: loader.h (state_dict) and state.h (LoaderState); idea:
//   notes/02-dataloader.md §5. Errors: loader.h lists them. A worker's DataGeneratorState() (dataset.h) and
//   stream live in the worker's memory: the main process knows only what the worker sends it.
//   When state_dict is called, which batches already exist, and which of them has the caller seen?
absl::StatusOr<LoaderState> DataLoader::state_dict() const {
  return Unimplemented("dataloader", "E", "DataLoader::state_dict");
}

// TODO(dataloader stage E): load_state_dict -- contract: loader.h (load_state_dict, and its stage E paragraph
//   on seeding, which StartEpoch follows in every epoch, with or without a state) and state.h (LoaderState,
//   EpochBaseSeed, WorkerSeed); idea: notes/02-dataloader.md §5. Errors: loader.h lists them.
//   A loader that never stopped sent task t to some worker with some generator state: how does the resumed
//   one send it to the same worker, with the same state?
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
