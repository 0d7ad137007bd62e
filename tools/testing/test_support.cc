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

namespace {
uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Fnv1a(std::string_view text, uint64_t h = 0xcbf29ce484222325ULL) {
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}
}  // namespace

CaseRandom::CaseRandom(std::string_view stream) {
  std::string name;
  if (const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
    name = std::string(info->test_suite_name()) + "." + info->name();
  }
  uint64_t mix = GradingSeed() ^ Fnv1a(stream, Fnv1a(name + "/"));
  state_ = SplitMix64(mix);
}

uint64_t CaseRandom::Next() { return SplitMix64(state_); }

int64_t CaseRandom::Int(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;  // 0: the whole range
  if (span == 0) return static_cast<int64_t>(Next());
  // Multiply-shift (Lemire) without the rejection step: a bias below span / 2^64, far under what a test sees.
  const uint64_t x = static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * span) >> 64);
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + x);
}

double CaseRandom::Real(double lo, double hi) {
  return lo + (hi - lo) * (static_cast<double>(Next() >> 11) * 0x1.0p-53);
}

bool CaseRandom::Chance(double p) { return Real(0, 1) < p; }

std::string SeedNote() {
  const std::string seed = std::to_string(GradingSeed());
  return "grading seed " + seed +
         "; to draw the same inputs: bazel test <target> --test_env=DISTLAB_GRADING_SEED=" + seed;
}

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
