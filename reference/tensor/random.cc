#include "reference/tensor/random.h"

#include <cmath>

namespace distlab::tensor {

uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double UniformAt(uint64_t seed, uint64_t index) {
  const uint64_t bits = Mix64(Mix64(seed) ^ (index * 0xd1b54a32d192ed03ull));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

double NormalAt(uint64_t seed, uint64_t index) {
  // Box-Muller on two uniforms drawn from sub-streams 2i and 2i+1; u1 in (0, 1] so the log is finite.
  const double u1 = 1.0 - UniformAt(seed, 2 * index);
  const double u2 = UniformAt(seed, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

void FillNormal(Tensor& t, uint64_t seed, float std, uint64_t offset) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.Set(i, static_cast<float>(std * NormalAt(seed, offset + static_cast<uint64_t>(i))));
  }
}

void FillUniform(Tensor& t, uint64_t seed, float lo, float hi, uint64_t offset) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.Set(i, static_cast<float>(lo + (hi - lo) * UniformAt(seed, offset + static_cast<uint64_t>(i))));
  }
}

uint64_t SeedFor(uint64_t base, const char* name) {
  uint64_t h = Mix64(base);
  for (const char* p = name; *p; ++p) h = Mix64(h ^ static_cast<unsigned char>(*p));
  return h;
}

}  // namespace distlab::tensor
