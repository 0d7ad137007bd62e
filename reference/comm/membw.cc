#include "reference/comm/membw.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace distlab::comm {

int HardwareThreads() { return std::max(1u, std::thread::hardware_concurrency()); }

double MeasureCopyBandwidth(size_t bytes, int threads) {
  bytes = std::max<size_t>(bytes, 1);
  threads = std::max(threads, 1);
  constexpr int kRepetitions = 5;
  const size_t share = (bytes + threads - 1) / threads;
  std::vector<std::unique_ptr<char[]>> src(threads), dst(threads);
  for (int t = 0; t < threads; ++t) {
    src[t].reset(new char[share]);
    dst[t].reset(new char[share]);
    std::memset(src[t].get(), 1, share);  // touch every page before timing
    std::memset(dst[t].get(), 2, share);
  }
  double best = 0;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    // The threads start together; the repetition lasts until the last one finishes.
    std::vector<std::thread> workers;
    std::vector<std::chrono::steady_clock::time_point> done(threads);
    const auto start_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        while (std::chrono::steady_clock::now() < start_at) {
        }
        std::memcpy(dst[t].get(), src[t].get(), share);
        done[t] = std::chrono::steady_clock::now();
      });
    }
    for (auto& w : workers) w.join();
    const auto end = *std::max_element(done.begin(), done.end());
    const double seconds = std::chrono::duration<double>(end - start_at).count();
    if (seconds > 0) best = std::max(best, static_cast<double>(share) * threads / seconds);
  }
  return best;
}

}  // namespace distlab::comm
