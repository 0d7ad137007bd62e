// The reference loader's own trace events (not part of the lab's contract, so not graded): with a trace on,
// every sample a worker copies into its batch's shared-memory segment is one "collate" event on that
// worker's row, after the sample's "fetch" (traced_dataset.h); without workers, each batch's Collate() is one
// "collate" event on the main thread. These are what `./labctl demo dataloader` shows per worker.
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "labs/dataloader/loader.h"
#include "labs/dataloader/traced_dataset.h"
#include "reference/trace/trace.h"
#include "reference/trace/trace_file.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

class Iota : public MapDataset {
 public:
  int64_t size() const override { return 10; }
  Sample Get(int64_t i) const override { return Sample{{2}, {static_cast<float>(i), 0.f}}; }
};

// One epoch of Iota (batch 3) with `workers` workers through a TracedDataset; the trace read back.
trace::TraceDoc Epoch(int workers, const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string file = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  trace::Start(file);
  {
    LoaderOptions o;
    o.batch_size = 3;
    o.num_workers = workers;
    o.timeout_s = 20;
    auto dl = DataLoader::Create(std::make_shared<TracedDataset>(std::make_shared<Iota>()), o);
    EXPECT_TRUE(dl.ok()) << dl.status();
    if (dl.ok()) {
      EXPECT_OK((*dl)->StartEpoch());
      for (Batch b;;) {
        absl::StatusOr<bool> more = (*dl)->Next(&b);
        EXPECT_TRUE(more.ok()) << more.status();
        if (!more.ok() || !*more) break;
      }
      EXPECT_OK((*dl)->Shutdown());
    }
  }
  EXPECT_OK(trace::Stop());
  absl::StatusOr<trace::TraceDoc> doc = trace::ReadTrace(file);
  EXPECT_TRUE(doc.ok()) << doc.status();
  return doc.ok() ? *std::move(doc) : trace::TraceDoc();
}

TEST(ReferenceLoaderTrace, EachSampleIsCollatedOnTheRowThatFetchedIt) {
  const trace::TraceDoc doc = Epoch(2, "collate2.json");
  std::map<std::pair<int, int>, std::vector<const trace::TraceEvent*>> rows;  // (pid, tid) -> its events
  for (const trace::TraceEvent& e : doc.events) {
    if (e.cat == "dataloader") rows[{e.pid, e.tid}].push_back(&e);
  }
  int collates = 0;
  for (const auto& [row, events] : rows) {
    const std::string name = doc.thread_names.count(row) ? doc.thread_names.at(row) : "(unnamed)";
    for (size_t i = 0; i < events.size(); ++i) {
      const trace::TraceEvent& e = *events[i];
      if (e.name != "collate") continue;
      ++collates;
      EXPECT_EQ(name.rfind("dataloader worker ", 0), 0u) << "a collate on row " << name;
      EXPECT_EQ(e.args.value("bytes", int64_t{-1}), 8) << "two floats per sample";
      // The event before it on the same row is the fetch of the sample it copies, and ends before it starts.
      ASSERT_GT(i, 0u) << "a collate with no fetch before it on " << name;
      EXPECT_EQ(events[i - 1]->name, "fetch") << "on " << name;
      EXPECT_LE(events[i - 1]->end(), e.ts + 1e-3) << "on " << name;
    }
  }
  EXPECT_EQ(collates, 10) << "one collate per sample, each sample once";
}

TEST(ReferenceLoaderTrace, WithoutWorkersEachBatchIsOneCollateOnTheMainThread) {
  const trace::TraceDoc doc = Epoch(0, "collate0.json");
  int collates = 0;
  for (const trace::TraceEvent& e : doc.events) {
    if (e.cat != "dataloader" || e.name != "collate") continue;
    ++collates;
    EXPECT_EQ(e.tid, trace::CurrentTid());
  }
  EXPECT_EQ(collates, 4) << "10 samples in batches of 3";
}

}  // namespace
}  // namespace distlab::dataloader
