// Lab 2 (dataloader), given; not graded: a map-style dataset whose reads show up in a trace
// (reference/trace/trace.h).
//
// TracedDataset wraps any MapDataset and records each Get as a complete event "fetch" (category
// "dataloader", args index and worker) on the thread that called it: in a worker process, that worker's
// thread, named "dataloader worker <id> (pid P)"; with num_workers = 0, the main process's (worker -1,
// its thread keeps its name). pid is the rank
// (trace::DefaultPid(): RANK from the environment, else 0), so the loaders of several data-parallel ranks are
// row groups of one trace. Because the wrapper sits between your loader and the dataset, your loader's
// workers produce these events without a line of tracing in loader.cc: hand TracedDataset to
// DataLoader::Create and run with DISTLAB_TRACE=FILE (or trace::Start(FILE)). Worker processes append their
// events to FILE.fork<PID>.jsonl as they go; the main process folds them into FILE when it writes (trace.h).
// The gap between the last fetch of one batch and the first of the next on a worker's row is the rest of
// that worker's loop: collate, the shared-memory segment, the queues. The reference loader also records its
// collating, as "collate" events (same category, args task, sample, bytes): in a worker each sample's copy
// into the batch's segment, right after its fetch; without workers each batch's Collate(). Your loader may
// do the same with trace::Span (reference/trace/trace.h); no test requires it.
//
// Off (the default), a Get costs one relaxed atomic load more than the wrapped dataset's.
#ifndef DISTLAB_LABS_DATALOADER_TRACED_DATASET_H_
#define DISTLAB_LABS_DATALOADER_TRACED_DATASET_H_

#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "labs/dataloader/dataset.h"
#include "labs/dataloader/loader.h"
#include "reference/trace/trace.h"

namespace distlab::dataloader {

class TracedDataset : public MapDataset {
 public:
  explicit TracedDataset(std::shared_ptr<const MapDataset> inner) : inner_(std::move(inner)) {}
  int64_t size() const override { return inner_->size(); }
  Sample Get(int64_t index) const override {
    if (!trace::Enabled()) return inner_->Get(index);
    const WorkerInfo* w = GetWorkerInfo();
    const int worker = w != nullptr ? w->id : -1;
    const pid_t me = ::getpid();
    if (w != nullptr && named_pid_.exchange(me, std::memory_order_relaxed) != me) {  // first Get here
      trace::SetThreadName("dataloader worker " + std::to_string(worker) + " (pid " + std::to_string(me) +
                           ")");
    }
    trace::Span span("fetch", "dataloader", trace::DefaultPid());
    span.args().Add("index", static_cast<int64_t>(index)).Add("worker", worker);
    return inner_->Get(index);
  }

 private:
  std::shared_ptr<const MapDataset> inner_;
  mutable std::atomic<pid_t> named_pid_{0};  // the process whose thread was last named
};

}  // namespace distlab::dataloader

#endif  // DISTLAB_LABS_DATALOADER_TRACED_DATASET_H_
