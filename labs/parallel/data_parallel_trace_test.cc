// Lab 4 stage A, public: your bucketed DDP seen through a trace. The runtime records every collective it is
// asked for (reference/trace/trace.h: category "comm", with op, bytes and seq), so each bucket's AllReduce is
// an event of the rank that launched it -- whatever code launched it: one per bucket per step, in launch
// order, carrying exactly the bucket's bytes, and the last layer's launched while backward is still running.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/parallel/data_parallel.h"
#include "reference/nn/model.h"
#include "reference/tensor/ops.h"
#include "reference/trace/trace.h"
#include "reference/trace/trace_file.h"
#include "tools/testing/test_support.h"

namespace distlab::parallel {
namespace {

struct RankRecord {
  std::vector<std::vector<int>> buckets;
  std::vector<int> launched;
  std::vector<int64_t> param_bytes;
};

//   l0: Linear 4 -> 8 (weight 128 B, bias 32 B), l1: Linear 8 -> 4 (weight 128 B, bias 16 B); buckets of at
//   most 144 B, cut from the last parameter: {l1.bias, l1.weight}, {l0.bias}, {l0.weight}.
TEST(DataParallelTrace, EachBucketIsOneAllReduceOfItsBytesLaunchedDuringBackward) {
  trace::Start();
  std::map<int, RankRecord> rec;
  std::mutex mu;
  auto statuses = comm::RunRanks(2, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::Linear l0("l0", 4, 8, true, 1), l1("l1", 8, 4, true, 2);
    std::vector<nn::Parameter*> params = {&l0.weight(), l0.bias(), &l1.weight(), l1.bias()};
    auto ddp_or = BucketedDataParallel::Create(comm, stream, params, /*bucket_bytes=*/144);
    if (!ddp_or.ok()) return ddp_or.status();
    auto& ddp = *ddp_or;
    nn::ZeroGrads(params);
    ddp->BeginStep();
    tensor::Tensor x({3, 4});
    tensor::Fill(x, 1.f + rank);
    tensor::Tensor y = l1.Forward(l0.Forward(x));
    tensor::Tensor dy = l1.Backward(y);
    {
      trace::Span l0_backward("l0 backward", "test", rank);  // the marker the launches are placed against
      l0.Backward(dy);
    }
    absl::Status st = ddp->FinishGradientSync();
    std::lock_guard<std::mutex> lock(mu);
    rec[rank].buckets = ddp->buckets();
    rec[rank].launched = ddp->launched();
    for (nn::Parameter* p : ddp->parameters()) rec[rank].param_bytes.push_back(4 * p->value.numel());
    return st;
  });
  (void)trace::Stop();
  const std::string text = trace::Json();
  trace::Clear();
  ASSERT_OK(comm::FirstError(statuses));
  ASSERT_OK_AND_ASSIGN(trace::TraceDoc doc, trace::ParseTrace(text));
  for (int rank = 0; rank < 2; ++rank) {
    const RankRecord& r = rec[rank];
    std::vector<trace::TraceEvent> launches;
    double marker_start = -1;
    for (const trace::TraceEvent& e : doc.events) {
      if (e.pid != rank) continue;
      if (e.cat == "comm" && e.name == "AllReduce") launches.push_back(e);
      if (e.cat == "test") marker_start = e.ts;
    }
    ASSERT_EQ(r.buckets.size(), 3u) << "bucket_bytes = 144 cuts 3 buckets";
    ASSERT_GE(marker_start, 0);
    ASSERT_EQ(launches.size(), r.buckets.size())
        << "rank " << rank << ": one AllReduce per bucket (" << r.buckets.size() << " buckets)";
    ASSERT_EQ(r.launched.size(), r.buckets.size());
    for (size_t k = 0; k < launches.size(); ++k) {
      const int b = r.launched[k];
      int64_t bytes = 0;
      for (int i : r.buckets[b]) bytes += r.param_bytes[i];
      EXPECT_EQ(launches[k].args.value("bytes", int64_t{-1}), bytes)
          << "rank " << rank << ": the " << k << "-th AllReduce is bucket " << b << "'s";
      EXPECT_EQ(launches[k].args.value("dtype", ""), "f32");
    }
    // l1's bucket (the first launched: its parameters finish first) leaves before l0's backward starts.
    EXPECT_LE(launches[0].ts, marker_start)
        << "rank " << rank << ": the first bucket waited for l0's backward";
  }
}

}  // namespace
}  // namespace distlab::parallel
