// Lab 3 (dedup), given; not graded: the shingle-set file (set_file.h).
#include "labs/dedup/set_file.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/dedup/stream_test_util.h"

namespace distlab::dedup::internal {
namespace {

namespace fs = std::filesystem;
using stream_testing::TmpDir;

constexpr size_t kMB = size_t{1} << 20;  // what Append writes at a time

// Sets of 0 to 300 000 words (up to 2.4 MB, so that some span several writes and some are empty) with words
// that name the set and the place in it, appended in three shapes: one call per set, a set split in two
// calls, and several sets in one call. Every set is read back, out of order, after prefetching the next ones.
TEST(SetFile, ReadsBackEverySetInAnyOrder) {
  std::mt19937_64 rng(7);
  std::vector<std::vector<uint64_t>> sets(62);  // the last few small: a tail that only Flush writes
  for (size_t s = 0; s < sets.size(); ++s) {
    const size_t words = s % 10 == 9 ? 300000 : s % 7 == 0 ? 0 : rng() % 500;
    for (size_t w = 0; w < words; ++w) sets[s].push_back(s << 32 | w);
  }
  SetFile file;
  const std::string dir = TmpDir("set_file");
  ASSERT_TRUE(file.Open(dir).ok());
  // Unlinked when made: nothing is in the folder, even while the file is open.
  EXPECT_TRUE(fs::is_empty(dir));
  std::vector<uint64_t> offsets{0};
  std::string pending;  // sets gathered for one call
  for (size_t s = 0; s < sets.size(); ++s) {
    const char* p = reinterpret_cast<const char*>(sets[s].data());
    const size_t bytes = sets[s].size() * sizeof(uint64_t);
    offsets.push_back(offsets.back() + bytes);
    if (s % 9 >= 6) {  // three sets in one call
      pending.append(p, bytes);
      if (s % 9 == 8) {
        ASSERT_TRUE(file.Append(pending).ok());
        pending.clear();
      }
    } else if (s % 2 == 0) {
      ASSERT_TRUE(file.Append(std::string(p, bytes)).ok());
    } else {
      ASSERT_TRUE(file.Append(std::string(p, bytes / 2)).ok());
      ASSERT_TRUE(file.Append(std::string(p + bytes / 2, bytes - bytes / 2)).ok());
    }
  }
  ASSERT_TRUE(file.Append(pending).ok());
  ASSERT_TRUE(file.Flush().ok());
  EXPECT_EQ(file.written(), static_cast<int64_t>(offsets.back()));
  EXPECT_GT(offsets.back(), 5 * kMB);   // several whole writes,
  EXPECT_NE(offsets.back() % kMB, 0u);  // and a tail
  std::vector<size_t> order(sets.size());
  for (size_t s = 0; s < order.size(); ++s) order[s] = s;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<uint64_t> back;
  for (size_t at = 0; at < order.size(); ++at) {
    if (at % 8 == 0) {
      for (size_t e = at; e < std::min(order.size(), at + 8); ++e) {
        file.Prefetch(offsets[order[e]], offsets[order[e] + 1] - offsets[order[e]]);
      }
    }
    const size_t s = order[at];
    ASSERT_TRUE(file.Read(offsets[s], offsets[s + 1] - offsets[s], back).ok());
    ASSERT_EQ(back, sets[s]) << "set " << s << " read back from offset " << offsets[s];
  }
}

TEST(SetFile, ReadingPastTheEndIsDataLoss) {
  SetFile file;
  ASSERT_TRUE(file.Open(TmpDir("set_file_short")).ok());
  ASSERT_TRUE(file.Append(std::string(16, 'x')).ok());
  ASSERT_TRUE(file.Flush().ok());
  std::vector<uint64_t> set;
  EXPECT_TRUE(file.Read(0, 16, set).ok());
  EXPECT_EQ(file.Read(8, 16, set).code(), absl::StatusCode::kDataLoss);
}

TEST(SetFile, MissingFolderIsNamed) {
  SetFile file;
  const absl::Status s = file.Open(TmpDir("set_file_gone") + "/no/such/folder");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("set_file_gone/no/such/folder"), std::string::npos) << s;
}

// A disk that fills while the sets are written: ResourceExhausted naming the folder and the system's reason.
// A full disk is simulated by a file-size limit, as in stream_dedup_test's
// MemoryBudget.FullDiskWhileSpillingIsAnError (which says why), here at two and a half megabytes.
TEST(SetFile, FullDiskIsAnError) {
  const std::string dir = TmpDir("set_file_full");
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        signal(SIGXFSZ, SIG_IGN);
        rlimit limit;
        getrlimit(RLIMIT_FSIZE, &limit);
        limit.rlim_cur = kMB * 5 / 2;
        if (setrlimit(RLIMIT_FSIZE, &limit) != 0) std::_Exit(2);
        SetFile file;
        if (!file.Open(dir).ok()) std::_Exit(3);
        const std::string set(kMB / 4, 's');
        absl::Status s;
        for (int i = 0; i < 16 && s.ok(); ++i) s = file.Append(set);
        if (s.ok()) s = file.Flush();
        std::cerr << "status " << s << "\n";
        std::_Exit(s.code() == absl::StatusCode::kResourceExhausted ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      std::string("status RESOURCE_EXHAUSTED: cannot write the shingle-set file in .*/set_file_full: ") +
          std::strerror(EFBIG));
}

}  // namespace
}  // namespace distlab::dedup::internal
