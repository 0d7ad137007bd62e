// Per-rank memory accounting: every Tensor reports its bytes to a MemoryTracker under one category.
//
// The categories are the ones the memory formulas of Lab 4 are written in (ZeRO paper, Ultra-Scale Playbook):
// parameters, gradients, optimizer state, activations, communication buffers. A tracker keeps the current
// bytes and the peak per category, and the peak of the total. Ranks are threads on the threads backend, so
// "per rank" means "per thread": a rank installs its tracker with ScopedMemoryTracker and every tensor it
// creates from then on is counted there (a tensor remembers its tracker, so freeing it on another thread,
// e.g. a stream worker, still credits the right rank).
//
// Left out: allocator behaviour (fragmentation, caching); the tracker counts requested bytes exactly.
#ifndef DISTLAB_REFERENCE_TENSOR_MEMORY_H_
#define DISTLAB_REFERENCE_TENSOR_MEMORY_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace distlab::tensor {

enum class MemCategory { kParameters, kGradients, kOptimizerState, kActivations, kCommBuffers };
inline constexpr int kNumMemCategories = 5;
inline constexpr MemCategory kAllMemCategories[] = {MemCategory::kParameters, MemCategory::kGradients,
                                                    MemCategory::kOptimizerState, MemCategory::kActivations,
                                                    MemCategory::kCommBuffers};

// "parameters", "gradients", "optimizer_state", "activations", "comm_buffers".
const char* Name(MemCategory category);

// Bytes in use by category; all methods are thread-safe.
class MemoryTracker {
 public:
  explicit MemoryTracker(std::string name = "");
  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;
  ~MemoryTracker();

  void Allocate(MemCategory category, size_t bytes);
  // Aborts with a message when more bytes are freed than are in use (a double free in the accounting).
  void Free(MemCategory category, size_t bytes);

  size_t current(MemCategory category) const;
  size_t peak(MemCategory category) const;  // highest current(category) since construction/ResetPeak
  size_t current_total() const;
  size_t peak_total() const;  // highest current_total() (not the sum of per-category peaks)
  // Forgets the peaks: every peak becomes the current value (to measure one training step, say).
  void ResetPeak();

  const std::string& name() const { return name_; }
  // An aligned table: category, current MiB, peak MiB.
  std::string Report() const;

 private:
  std::string name_;
  mutable std::mutex mu_;
  std::array<size_t, kNumMemCategories> current_{};
  std::array<size_t, kNumMemCategories> peak_{};
  size_t total_ = 0;
  size_t peak_total_ = 0;
};

// The tracker tensors created on this thread report to; nullptr when none is installed (then nothing is
// counted).
MemoryTracker* CurrentTracker();

// Installs `tracker` as this thread's tracker for the lifetime of the guard (restores the previous one).
class ScopedMemoryTracker {
 public:
  explicit ScopedMemoryTracker(MemoryTracker* tracker);
  ~ScopedMemoryTracker();
  ScopedMemoryTracker(const ScopedMemoryTracker&) = delete;
  ScopedMemoryTracker& operator=(const ScopedMemoryTracker&) = delete;

 private:
  MemoryTracker* previous_;
};

}  // namespace distlab::tensor

#endif  // DISTLAB_REFERENCE_TENSOR_MEMORY_H_
