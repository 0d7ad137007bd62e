// Lab 4 stage C, public: ZeRO seen through a trace. The runtime records every collective (reference/trace:
// category "comm", with op and bytes), so each all-gather and reduce-scatter of a ZeroTrainer is an event
// of its rank: the same sequence as the trainer's own schedule (trace()), one collective per "AG u" / "RS u",
// each carrying unit u's padded flat size, 4 n S_u bytes (ZeRO-2: then one all-gather per unit).
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/parallel/zero.h"
#include "reference/nn/model.h"
#include "reference/trace/trace.h"
#include "reference/trace/trace_file.h"
#include "tools/testing/test_support.h"

namespace distlab::parallel {
namespace {

// One step of an untied TinyLM (units 512 | 2128 | 2128 | 512 parameters) on 2 ranks under `stage`; per
// rank, the trainer's schedule and the trace's AllGather / ReduceScatter events must agree.
void ExpectCollectivesFollowTheSchedule(ZeroStage stage) {
  const nn::TinyLMConfig cfg{32, 16, 64, 2, /*tie_embeddings=*/false, 1};
  const int n = 2;
  const std::vector<int64_t> unit_params = {512, 2128, 2128, 512};
  std::map<int, std::vector<std::string>> schedule;
  std::mutex mu;
  trace::Start();
  auto statuses = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::TinyLM model(cfg);
    auto trainer = ZeroTrainer::Create(comm, stream, model, stage, {});
    if (!trainer.ok()) return trainer.status();
    auto loss = (*trainer)->Step(nn::Slice(nn::SyntheticBatch(cfg.vocab, 1, 0, 8), 4 * rank, 4 * rank + 4));
    if (!loss.ok()) return loss.status();
    std::lock_guard<std::mutex> lock(mu);
    schedule[rank] = (*trainer)->trace();
    return absl::OkStatus();
  });
  (void)trace::Stop();
  const std::string text = trace::Json();
  trace::Clear();
  ASSERT_OK(comm::FirstError(statuses));
  ASSERT_OK_AND_ASSIGN(trace::TraceDoc doc, trace::ParseTrace(text));
  for (int rank = 0; rank < n; ++rank) {
    std::vector<std::string> want, got;  // "AllGather 4256" (op, bytes)
    for (const std::string& s : schedule[rank]) {
      const bool ag = s.rfind("AG ", 0) == 0, rs = s.rfind("RS ", 0) == 0;
      if (!ag && !rs) continue;
      const int unit = std::stoi(s.substr(3));
      ASSERT_GE(unit, 0);
      ASSERT_LT(unit, static_cast<int>(unit_params.size()));
      const int64_t bytes = 4 * n * ShardSize(unit_params[unit], n);
      want.push_back(std::string(ag ? "AllGather " : "ReduceScatter ") + std::to_string(bytes));
    }
    for (const trace::TraceEvent& e : doc.events) {
      if (e.pid != rank || e.cat != "comm") continue;
      if (e.name != "AllGather" && e.name != "ReduceScatter") continue;
      got.push_back(e.name + " " + std::to_string(e.args.value("bytes", int64_t{-1})));
    }
    ASSERT_FALSE(want.empty()) << "rank " << rank << ": the schedule names no AG or RS";
    if (stage == ZeroStage::kZero2) {
      // Z2's schedule lists its reduce-scatters; after them, one all-gather per unit (in any order) brings
      // the updated parameters back.
      std::vector<std::string> gathers(got.begin() + std::min(got.size(), want.size()), got.end());
      got.resize(std::min(got.size(), want.size()));
      std::vector<std::string> want_gathers;
      for (int64_t psi_u : unit_params) {
        want_gathers.push_back("AllGather " + std::to_string(4 * n * ShardSize(psi_u, n)));
      }
      std::sort(gathers.begin(), gathers.end());
      std::sort(want_gathers.begin(), want_gathers.end());
      EXPECT_EQ(gathers, want_gathers) << "rank " << rank << ": the parameter all-gathers after the step";
    }
    EXPECT_EQ(got, want) << "rank " << rank << ": the trace's all-gathers and reduce-scatters (op, bytes) "
                         << "against the trainer's schedule";
  }
}

TEST(ZeroTrace, Zero2ReduceScattersAreTheScheduleInTheTrace) {
  ExpectCollectivesFollowTheSchedule(ZeroStage::kZero2);
}

TEST(ZeroTrace, Zero3GathersAndReduceScattersAreTheScheduleInTheTrace) {
  ExpectCollectivesFollowTheSchedule(ZeroStage::kZero3);
}

}  // namespace
}  // namespace distlab::parallel
