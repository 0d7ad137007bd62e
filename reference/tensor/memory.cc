#include "reference/tensor/memory.h"

#include <cstdio>
#include <cstdlib>

namespace distlab::tensor {
namespace {
thread_local MemoryTracker* g_current = nullptr;
}  // namespace

const char* Name(MemCategory category) {
  switch (category) {
    case MemCategory::kParameters:
      return "parameters";
    case MemCategory::kGradients:
      return "gradients";
    case MemCategory::kOptimizerState:
      return "optimizer_state";
    case MemCategory::kActivations:
      return "activations";
    case MemCategory::kCommBuffers:
      return "comm_buffers";
  }
  return "?";
}

MemoryTracker::MemoryTracker(std::string name) : name_(std::move(name)) {}
MemoryTracker::~MemoryTracker() = default;

void MemoryTracker::Allocate(MemCategory category, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const int c = static_cast<int>(category);
  current_[c] += bytes;
  total_ += bytes;
  if (current_[c] > peak_[c]) peak_[c] = current_[c];
  if (total_ > peak_total_) peak_total_ = total_;
}

void MemoryTracker::Free(MemCategory category, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const int c = static_cast<int>(category);
  if (bytes > current_[c]) {
    std::fprintf(stderr, "MemoryTracker '%s': freeing %zu bytes of %s but only %zu are in use\n",
                 name_.c_str(), bytes, Name(category), current_[c]);
    std::abort();
  }
  current_[c] -= bytes;
  total_ -= bytes;
}

size_t MemoryTracker::current(MemCategory category) const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_[static_cast<int>(category)];
}
size_t MemoryTracker::peak(MemCategory category) const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_[static_cast<int>(category)];
}
size_t MemoryTracker::current_total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}
size_t MemoryTracker::peak_total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_total_;
}
void MemoryTracker::ResetPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_ = current_;
  peak_total_ = total_;
}

std::string MemoryTracker::Report() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  char line[128];
  std::snprintf(line, sizeof(line), "%-16s %14s %14s\n", "category", "current (B)", "peak (B)");
  out += line;
  for (MemCategory c : kAllMemCategories) {
    std::snprintf(line, sizeof(line), "%-16s %14zu %14zu\n", Name(c), current_[static_cast<int>(c)],
                  peak_[static_cast<int>(c)]);
    out += line;
  }
  std::snprintf(line, sizeof(line), "%-16s %14zu %14zu\n", "total", total_, peak_total_);
  out += line;
  return out;
}

MemoryTracker* CurrentTracker() { return g_current; }

ScopedMemoryTracker::ScopedMemoryTracker(MemoryTracker* tracker) : previous_(g_current) {
  g_current = tracker;
}
ScopedMemoryTracker::~ScopedMemoryTracker() { g_current = previous_; }

}  // namespace distlab::tensor
