#include "tools/testing/test_support.h"

#include <cstdlib>
#include <mutex>

namespace distlab::testing {
namespace {
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

std::string Sanitizer() {
  const char* s = std::getenv("DISTLAB_SANITIZER");
  return s != nullptr ? s : "";
}

}  // namespace distlab::testing
