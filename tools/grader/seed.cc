// The grading seed (see seed.h).
#include "tools/grader/seed.h"

#include <sys/random.h>

namespace distlab::grader {

uint64_t FreshSeed() {
  uint64_t v = 0;
  size_t got = 0;
  auto* p = reinterpret_cast<unsigned char*>(&v);
  while (got < sizeof v) {
    const ssize_t n = ::getrandom(p + got, sizeof v - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  return v & kMaxSeed;
}

std::optional<uint64_t> ParseSeed(const std::string& text) {
  if (text.empty() || text.size() > 16) return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > kMaxSeed) return std::nullopt;
  return v;
}

std::string SeedLine(uint64_t seed, const std::string& lab) {
  const std::string n = std::to_string(seed);
  return "Grading seed: " + n +
         " (the hidden tests draw their inputs from it; ./labctl grade --submission DIR" +
         (lab.empty() ? std::string() : " --lab " + lab) + " --seed " + n +
         " grades again with the same inputs)";
}

}  // namespace distlab::grader
