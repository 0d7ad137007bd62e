// The one reader of DISTLAB_TIMEOUT_SCALE, the factor every timeout in the course is multiplied by. The
// sanitizer configurations set it (.bazelrc: 4 under ASan, 10 under TSan) because instrumented code is
// slower; the communicator timeout (comm::ScaledTimeout) and the test helpers (testing::Scaled, the per-case
// watchdog) all read it here.
#ifndef DISTLAB_TOOLS_BASE_TIMEOUT_SCALE_H_
#define DISTLAB_TOOLS_BASE_TIMEOUT_SCALE_H_

#include <cstdlib>

namespace distlab {

// The factor, at least 1: unset, empty, not a number, or below 1 all read as 1 (a scale never shortens a
// timeout).
inline double TimeoutScale() {
  const char* env = std::getenv("DISTLAB_TIMEOUT_SCALE");
  if (env == nullptr) return 1.0;
  char* end = nullptr;
  const double parsed = std::strtod(env, &end);
  return end != env && parsed >= 1.0 ? parsed : 1.0;
}

}  // namespace distlab

#endif  // DISTLAB_TOOLS_BASE_TIMEOUT_SCALE_H_
