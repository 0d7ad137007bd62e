#include "reference/comm/membw.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
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
  // Page-aligned buffers: with malloc's 16-byte headers, a destination 16 bytes past a 4 KiB multiple of
  // its source makes every load wait on the store before it ("4K aliasing"), and small copies run at a
  // tenth of their speed.
  constexpr size_t kPage = 4096;
  std::vector<std::unique_ptr<char[]>> blocks(2 * threads);
  std::vector<char*> src(threads), dst(threads);
  auto aligned = [&](int i) {
    blocks[i].reset(new char[share + kPage]);
    const auto at = reinterpret_cast<uintptr_t>(blocks[i].get());
    return blocks[i].get() + (kPage - at % kPage) % kPage;
  };
  for (int t = 0; t < threads; ++t) {
    src[t] = aligned(2 * t);
    dst[t] = aligned(2 * t + 1);
    std::memset(src[t], 1, share);  // touch every page before timing
    std::memset(dst[t], 2, share);
  }
  // A small copy takes microseconds, less than a thread's wake-up: each repetition copies the buffers again
  // and again until at least kBytesPerRepetition have moved, so that what is timed is copying.
  constexpr size_t kBytesPerRepetition = size_t{32} << 20;
  const size_t total = share * threads;
  const size_t loops = std::max<size_t>(1, (kBytesPerRepetition + total - 1) / total);
  double best = 0;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    // The threads start together; the repetition lasts until the last one finishes.
    std::vector<std::thread> workers;
    std::vector<std::chrono::steady_clock::time_point> done(threads);
    // 20 ms for the threads to be created and spinning, also on a loaded machine.
    const auto start_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        while (std::chrono::steady_clock::now() < start_at) {
        }
        // Local pointers: swapping the shared vectors' elements would make the threads fight over one cache
        // line. Swapping keeps the compiler from merging the copies: each reads what the last one wrote.
        char* from = src[t];
        char* to = dst[t];
        for (size_t i = 0; i < loops; ++i) {
          std::memcpy(to, from, share);
          std::swap(from, to);
        }
        done[t] = std::chrono::steady_clock::now();
      });
    }
    for (auto& w : workers) w.join();
    const auto end = *std::max_element(done.begin(), done.end());
    const double seconds = std::chrono::duration<double>(end - start_at).count();
    if (seconds > 0) best = std::max(best, static_cast<double>(total) * loops / seconds);
  }
  return best;
}

double TimeCopy(const std::vector<const void*>& src, const std::vector<void*>& dst, size_t bytes,
                int threads) {
  threads = std::max(threads, 1);
  const size_t total = bytes * src.size();
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::chrono::steady_clock::time_point> done(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      // Thread t copies bytes [begin, end) of the buffers laid end to end.
      size_t at = total / threads * t;
      const size_t end = t == threads - 1 ? total : total / threads * (t + 1);
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      while (at < end) {
        const size_t i = at / bytes, off = at % bytes, len = std::min(bytes - off, end - at);
        std::memcpy(static_cast<char*>(dst[i]) + off, static_cast<const char*>(src[i]) + off, len);
        at += len;
      }
      done[t] = std::chrono::steady_clock::now();
    });
  }
  while (ready.load() < threads) {
  }
  const auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (auto& w : workers) w.join();
  return std::chrono::duration<double>(*std::max_element(done.begin(), done.end()) - start).count();
}

}  // namespace distlab::comm
