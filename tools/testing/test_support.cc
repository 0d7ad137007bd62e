#include "tools/testing/test_support.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace distlab::testing {
namespace {

// The grading seed as the process started with it: plain zero-initialised storage, filled by
// CaptureGradingSeed before any ordinary static initializer runs, so no constructor runs on it afterwards.
struct SeedAtStart {
  bool set;
  uint64_t value;
};
SeedAtStart g_seed_at_start;

// Decimal digits only, no sign, no spaces, at most 2^64 - 1.
bool ParseSeed(const char* text, uint64_t* out) {
  if (text == nullptr || *text == '\0' || std::strlen(text) > 20) return false;
  uint64_t v = 0;
  for (const char* p = text; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(*p - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *out = v;
  return true;
}

__attribute__((constructor(101))) void CaptureGradingSeed() {
  const char* text = std::getenv("DISTLAB_GRADING_SEED");
  if (text == nullptr) return;
  if (!ParseSeed(text, &g_seed_at_start.value)) {
    std::fprintf(stderr,
                 "DISTLAB_GRADING_SEED=%s is not a whole number from 0 to 18446744073709551615 (unset it, or "
                 "give one: bazel test --test_env=DISTLAB_GRADING_SEED=N)\n",
                 text);
    std::fflush(stderr);
    std::_Exit(2);
  }
  g_seed_at_start.set = true;
}

// Leaked on purpose: the watchdog thread may read the activity during static destruction.
std::mutex& ActivityMu() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}
std::string& ActivitySlot() {
  static std::string* slot = new std::string();
  return *slot;
}
}  // namespace

std::chrono::milliseconds Scaled(std::chrono::milliseconds base) {
  return std::chrono::milliseconds(static_cast<long long>(base.count() * TimeoutScale()));
}

Activity::Activity(std::string what) {
  std::lock_guard<std::mutex> lock(ActivityMu());
  previous_ = ActivitySlot();
  ActivitySlot() = std::move(what);
}

Activity::~Activity() {
  std::lock_guard<std::mutex> lock(ActivityMu());
  ActivitySlot() = previous_;
}

std::string CurrentActivity() {
  std::lock_guard<std::mutex> lock(ActivityMu());
  return ActivitySlot();
}

uint64_t GradingSeed() { return g_seed_at_start.set ? g_seed_at_start.value : kDefaultGradingSeed; }

std::string Sanitizer() {
  const char* s = std::getenv("DISTLAB_SANITIZER");
  return s != nullptr ? s : "";
}

}  // namespace distlab::testing
