// Lab 2, stage B, public: your loader seen through a trace -- every read of a TracedDataset (given,
// traced_dataset.h) is one "fetch" event on the row of the worker process that made it.
#include <sys/types.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/dataloader/loader.h"
#include "labs/dataloader/traced_dataset.h"
#include "nlohmann/json.hpp"
#include "reference/trace/trace.h"
#include "reference/trace/trace_file.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

class Iota : public MapDataset {
 public:
  int64_t size() const override { return 10; }
  Sample Get(int64_t i) const override { return Sample{{}, {static_cast<float>(i)}}; }
};

std::string TracePath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

struct TracedRun {
  std::vector<Batch> batches;
  std::vector<pid_t> pids;  // by worker id, while the workers were alive
  trace::TraceDoc doc;
};

// One epoch of Iota (batch 3) through a TracedDataset, recorded into `file`, the trace read back.
TracedRun TracedEpoch(int num_workers, const std::string& file) {
  TracedRun run;
  trace::Start(file);
  {
    LoaderOptions o;
    o.batch_size = 3;
    o.num_workers = num_workers;
    o.timeout_s = 20;
    auto dl = DataLoader::Create(std::make_shared<TracedDataset>(std::make_shared<Iota>()), o);
    EXPECT_TRUE(dl.ok()) << dl.status();
    if (!dl.ok()) return run;
    EXPECT_OK((*dl)->StartEpoch());
    run.pids = (*dl)->worker_pids();
    for (;;) {
      Batch b;
      absl::StatusOr<bool> more = (*dl)->Next(&b);
      EXPECT_TRUE(more.ok()) << more.status();
      if (!more.ok() || !*more) break;
      run.batches.push_back(std::move(b));
    }
    EXPECT_OK((*dl)->Shutdown());
  }
  EXPECT_OK(trace::Stop());
  absl::StatusOr<trace::TraceDoc> doc = trace::ReadTrace(file);
  EXPECT_TRUE(doc.ok()) << doc.status();
  if (doc.ok()) run.doc = *std::move(doc);
  return run;
}

// 2 workers: each index is fetched once, by the worker that made its batch, on that worker's own row
// (tid = a thread of its process, named "dataloader worker <id> (pid P)"), under pid 0 (no RANK set).
TEST(TracedDataset, EveryFetchIsOnTheRowOfTheWorkerThatMadeItsBatch) {
  const std::string file = TracePath("loader_trace.json");
  TracedRun run = TracedEpoch(2, file);
  ASSERT_EQ(run.batches.size(), 4u);
  ASSERT_EQ(run.pids.size(), 2u);
  std::map<int64_t, int> worker_of;  // index -> the batch's worker
  for (const Batch& b : run.batches) {
    for (int64_t i : b.indices) worker_of[i] = b.worker_id;
  }
  std::map<int64_t, int> fetched;  // index -> how often
  for (const trace::TraceEvent& e : run.doc.events) {
    // A loader may record its own "collate" events (the reference loader does); only fetches are checked.
    if (e.cat != "dataloader" || e.name != "fetch") continue;
    EXPECT_EQ(e.pid, 0);
    const int64_t index = e.args.value("index", int64_t{-1});
    const int worker = e.args.value("worker", -2);
    ++fetched[index];
    ASSERT_TRUE(worker_of.count(index)) << "fetch of index " << index << ", which no batch holds";
    EXPECT_EQ(worker, worker_of[index]) << "index " << index;
    ASSERT_GE(worker, 0);
    ASSERT_LT(worker, 2);
    const auto name = run.doc.thread_names.find({e.pid, e.tid});
    ASSERT_NE(name, run.doc.thread_names.end()) << "fetch of index " << index << ": its row has no name";
    EXPECT_EQ(name->second, "dataloader worker " + std::to_string(worker) + " (pid " +
                                std::to_string(run.pids[worker]) + ")");
  }
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(fetched[i], 1) << "index " << i;
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  for (const std::string& problem : trace::CheckTrace(nlohmann::json::parse(text.str()))) {
    ADD_FAILURE() << problem;
  }
}

// No workers: the main process fetches, worker -1, on its own thread.
TEST(TracedDataset, WithoutWorkersTheMainThreadFetches) {
  TracedRun run = TracedEpoch(0, TracePath("loader_trace0.json"));
  ASSERT_EQ(run.batches.size(), 4u);
  int fetches = 0;
  for (const trace::TraceEvent& e : run.doc.events) {
    if (e.cat != "dataloader" || e.name != "fetch") continue;
    ++fetches;
    EXPECT_EQ(e.args.value("worker", -2), -1);
    EXPECT_EQ(e.tid, trace::CurrentTid());
  }
  EXPECT_EQ(fetches, 10);
}

}  // namespace
}  // namespace distlab::dataloader
