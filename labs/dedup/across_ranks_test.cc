// Public tests of stage E: dedup across ranks -- worked examples of each function, and cases on drawn inputs
// (the last two).
#include "labs/dedup/across_ranks.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::dedup {
namespace {

using Records = std::vector<BandRecord>;
using Pairs = std::vector<std::pair<int, int>>;

comm::CommOptions ShortTimeout() {
  comm::CommOptions options;
  options.timeout = std::chrono::milliseconds(5000);
  return options;
}

std::string Show(const Records& records) {
  std::string out;
  for (const BandRecord& r : records) absl::StrAppend(&out, "(b", r.band, " k", r.key, " d", r.doc, ") ");
  return out;
}

// Runs ShuffleBandRecords on every rank with its own records; out[r] = what rank r received.
absl::Status Shuffle(const std::vector<Records>& mine, int chunk, std::vector<Records>& out) {
  const int n = static_cast<int>(mine.size());
  out.assign(n, {});
  return comm::FirstError(comm::RunRanks(
      n,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        absl::StatusOr<Records> got = ShuffleBandRecords(comm, stream, mine[r], chunk);
        if (!got.ok()) return got.status();
        out[r] = *std::move(got);
        return absl::OkStatus();
      },
      ShortTimeout()));
}

// Two ranks, chunk 2. Owners: key mod 2 (even keys to rank 0, odd keys to rank 1).
//
//   rank 0 holds (b0 k4 d0) (b0 k7 d1) (b1 k6 d0)           sends 2 records to rank 0, 1 to rank 1
//   rank 1 holds (b0 k4 d2) (b1 k9 d3) (b0 k10 d3) (b1 k12 d2)  sends 3 records to rank 0, 1 to rank 1
//
// The longest list is rank 1's 3 records for rank 0: two rounds of at most 2, the second one partly empty,
// and rank 0's lists end after one. Each rank returns its records sorted by (band, key, doc):
//
//   rank 0: (b0 k4 d0) (b0 k4 d2) (b0 k10 d3) (b1 k6 d0) (b1 k12 d2)
//   rank 1: (b0 k7 d1) (b1 k9 d3)
TEST(ShuffleBandRecords, TwoRanksChunkTwo) {
  const std::vector<Records> mine = {
      {{4, 0, 0}, {7, 0, 1}, {6, 1, 0}},
      {{4, 0, 2}, {9, 1, 3}, {10, 0, 3}, {12, 1, 2}},
  };
  std::vector<Records> out;
  ASSERT_OK(Shuffle(mine, 2, out));
  EXPECT_EQ(out[0], (Records{{4, 0, 0}, {4, 0, 2}, {10, 0, 3}, {6, 1, 0}, {12, 1, 2}})) << Show(out[0]);
  EXPECT_EQ(out[1], (Records{{7, 0, 1}, {9, 1, 3}})) << Show(out[1]);
}

TEST(ShuffleBandRecords, ChunkBelowOneIsAnErrorOnEveryRank) {
  std::vector<Records> out;
  const absl::Status s = Shuffle({{{1, 0, 0}}, {}}, 0, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(std::string(s.message()).find("0"), std::string::npos) << "the message names the chunk: " << s;
}

// One bucket per (band, key). Band 0 key 4 holds documents 0, 2 and 5: three pairs. Band 1 key 6 holds 0 and
// 2 again: the pair (0, 2) is reported once. Band 1 key 7 holds document 3 alone: no pair. Band 2 key 4 is
// another bucket than band 0 key 4 (same key, other band): documents 1 and 3 pair only there.
//
//   records: (b0 k4 d0) (b0 k4 d2) (b0 k4 d5) (b1 k6 d0) (b1 k6 d2) (b1 k7 d3) (b2 k4 d1) (b2 k4 d3)
//   pairs:   (0, 2) (0, 5) (1, 3) (2, 5)
TEST(CandidatePairsOf, BucketsAreBandAndKey) {
  const Records records = {{4, 0, 0}, {4, 0, 2}, {4, 0, 5}, {6, 1, 0},
                           {6, 1, 2}, {7, 1, 3}, {4, 2, 1}, {4, 2, 3}};
  EXPECT_EQ(CandidatePairsOf(records), (Pairs{{0, 2}, {0, 5}, {1, 3}, {2, 5}}));
  EXPECT_TRUE(CandidatePairsOf({}).empty());
}

// Three ranks, seven documents. Rank 0 verified (1, 4), rank 1 verified (4, 6) and (2, 3), rank 2 nothing.
// Components: {0} {1, 4, 6} {2, 3} {5}; each labelled with its smallest id, on every rank:
//
//   label = [0, 1, 2, 2, 1, 5, 1]
//
// The documents are split 0-2 | 3-4 | 5-6, so the cluster {1, 4, 6} spans all three ranks and {2, 3} two:
// KeptOf keeps 0, 1, 2 on rank 0, nothing on rank 1 (3's cluster is kept as 2, 4's as 1) and 5 on rank 2.
TEST(GlobalLabels, ThreeRanksSevenDocuments) {
  const std::vector<Pairs> edges = {{{1, 4}}, {{4, 6}, {2, 3}}, {}};
  const std::vector<std::pair<int, int>> ranges = {{0, 3}, {3, 2}, {5, 2}};  // (first_doc, count)
  std::vector<std::vector<int>> labels(3), kept(3);
  ASSERT_OK(comm::FirstError(comm::RunRanks(
      3,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        absl::StatusOr<std::vector<int>> got = GlobalLabels(comm, stream, 7, edges[r]);
        if (!got.ok()) return got.status();
        labels[r] = *got;
        kept[r] = KeptOf(labels[r], ranges[r].first, ranges[r].second);
        return absl::OkStatus();
      },
      ShortTimeout())));
  for (int r = 0; r < 3; ++r) EXPECT_EQ(labels[r], (std::vector<int>{0, 1, 2, 2, 1, 5, 1})) << "rank " << r;
  EXPECT_EQ(kept[0], (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(kept[1], (std::vector<int>{}));
  EXPECT_EQ(kept[2], (std::vector<int>{5}));
}

TEST(GlobalLabels, AnEdgeOutOfRangeOnOneRankFailsEveryRank) {
  const std::vector<Pairs> edges = {{{0, 1}}, {{3, 7}}};
  std::vector<absl::Status> got(2);
  comm::RunRanks(
      2,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        got[r] = GlobalLabels(comm, stream, 7, edges[r]).status();
        return absl::OkStatus();
      },
      ShortTimeout());
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(got[r].code(), absl::StatusCode::kInvalidArgument) << "rank " << r << ": " << got[r];
  }
  EXPECT_NE(std::string(got[1].message()).find("(3, 7)"), std::string::npos) << got[1];
}

// Drawn: 2-4 ranks, each with 0-40 records of drawn bands and keys (some buckets shared across ranks), a
// drawn chunk of 1-5. Every record arrives exactly once, at the owner of its key, and each list is sorted.
TEST(ShuffleBandRecords, DrawnRecordsArriveOnceAtTheirOwner) {
  testing::CaseRandom rng;
  for (int trial = 0; trial < 4; ++trial) {
    const int n = static_cast<int>(rng.Int(2, 4));
    const int chunk = static_cast<int>(rng.Int(1, 5));
    std::vector<Records> mine(n);
    Records all;
    int doc = 0;
    for (int r = 0; r < n; ++r) {
      const int count = static_cast<int>(rng.Int(0, 40));
      for (int i = 0; i < count; ++i) {
        mine[r].push_back({rng.Next() % 12, static_cast<int32_t>(rng.Int(0, 2)), doc++});
        all.push_back(mine[r].back());
      }
    }
    const std::string input = absl::StrCat(n, " ranks, chunk ", chunk, ", records per rank: ");
    std::vector<Records> out;
    ASSERT_OK(Shuffle(mine, chunk, out)) << input << testing::SeedNote();
    Records got;
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(std::is_sorted(out[r].begin(), out[r].end())) << "rank " << r << " not sorted; " << input;
      for (const BandRecord& rec : out[r]) {
        EXPECT_EQ(BucketOwner(rec.key, n), r) << "record with key " << rec.key << " landed on rank " << r;
      }
      got.insert(got.end(), out[r].begin(), out[r].end());
    }
    std::sort(got.begin(), got.end());
    std::sort(all.begin(), all.end());
    EXPECT_EQ(got, all) << "not every record arrived exactly once; " << input << testing::SeedNote();
  }
}

// Drawn: 2-4 ranks, 1-30 documents, each rank 0-6 drawn edges. Every rank's labels equal those of one
// union-find over all the edges.
TEST(GlobalLabels, DrawnEdgesGiveTheSameLabelsAsOneProcess) {
  testing::CaseRandom rng;
  const int n = static_cast<int>(rng.Int(2, 4));
  const int docs = static_cast<int>(rng.Int(1, 30));
  std::vector<Pairs> edges(n);
  std::vector<int> expected(docs);
  for (int d = 0; d < docs; ++d) expected[d] = d;
  std::string input = absl::StrCat(n, " ranks, ", docs, " documents, edges:");
  for (int r = 0; r < n; ++r) {
    const int count = static_cast<int>(rng.Int(0, 6));
    absl::StrAppend(&input, " rank ", r, ":");
    for (int e = 0; e < count; ++e) {
      edges[r].emplace_back(static_cast<int>(rng.Int(0, docs - 1)), static_cast<int>(rng.Int(0, docs - 1)));
      absl::StrAppend(&input, " (", edges[r].back().first, ", ", edges[r].back().second, ")");
    }
  }
  // The expected labels by relaxation: repeat label[a] = label[b] = min of the two until nothing changes.
  for (bool changed = true; changed;) {
    changed = false;
    for (const Pairs& list : edges) {
      for (const auto& [a, b] : list) {
        const int m = std::min(expected[a], expected[b]);
        if (expected[a] != m || expected[b] != m) expected[a] = expected[b] = m, changed = true;
      }
    }
  }
  std::vector<std::vector<int>> labels(n);
  ASSERT_OK(comm::FirstError(comm::RunRanks(
      n,
      [&](int r, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        absl::StatusOr<std::vector<int>> got = GlobalLabels(comm, stream, docs, edges[r]);
        if (!got.ok()) return got.status();
        labels[r] = *got;
        return absl::OkStatus();
      },
      ShortTimeout())))
      << input;
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(labels[r], expected) << "rank " << r << "; " << input << "; " << testing::SeedNote();
}

}  // namespace
}  // namespace distlab::dedup
