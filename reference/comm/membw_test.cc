// The copy timers behind the benchmarks' bounds: they copy what they say, and return a time.
#include "reference/comm/membw.h"

#include <cmath>
#include <cstddef>
#include <vector>

#include "gtest/gtest.h"

namespace distlab::comm {
namespace {

// TimeCopy splits the buffers laid end to end into equal shares: every byte of every buffer arrives, also
// when a share boundary falls inside a buffer and the size is not a multiple of the thread count.
TEST(TimeCopy, CopiesEveryBufferWholeAcrossShareBoundaries) {
  constexpr size_t kBytes = 1001;
  for (int threads : {1, 2, 3, 7}) {
    std::vector<std::vector<char>> src(3, std::vector<char>(kBytes)), dst(3, std::vector<char>(kBytes, 0));
    std::vector<const void*> from;
    std::vector<void*> to;
    for (size_t b = 0; b < src.size(); ++b) {
      for (size_t i = 0; i < kBytes; ++i) src[b][i] = static_cast<char>(1 + (b * 31 + i) % 120);
      from.push_back(src[b].data());
      to.push_back(dst[b].data());
    }
    const double seconds = TimeCopy(from, to, kBytes, threads);
    EXPECT_GT(seconds, 0) << threads << " threads";
    EXPECT_TRUE(std::isfinite(seconds)) << threads << " threads";
    for (size_t b = 0; b < src.size(); ++b)
      EXPECT_EQ(dst[b], src[b]) << "buffer " << b << ", " << threads << " threads";
  }
}

TEST(TimeCopy, NoThreadsMeansOne) {
  std::vector<char> src(64, 'x'), dst(64, 0);
  EXPECT_GT(TimeCopy({src.data()}, {dst.data()}, src.size(), 0), 0);
  EXPECT_EQ(dst, src);
}

TEST(MeasureCopyBandwidth, IsPositive) { EXPECT_GT(MeasureCopyBandwidth(1 << 16, 2), 0); }

}  // namespace
}  // namespace distlab::comm
