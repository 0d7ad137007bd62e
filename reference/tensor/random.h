// Deterministic, counter-based random numbers for seeded initialization.
//
// Element i of a stream `seed` is a pure function of (seed, i): initialization does not depend on thread
// count or order, and a rank that owns a slice of a matrix (tensor parallel, ZeRO-3 shard) can produce
// exactly the values the dense matrix would hold there. The mixer is SplitMix64; normals use Box-Muller.
#ifndef DISTLAB_REFERENCE_TENSOR_RANDOM_H_
#define DISTLAB_REFERENCE_TENSOR_RANDOM_H_

#include <cstdint>

#include "reference/tensor/tensor.h"

namespace distlab::tensor {

uint64_t Mix64(uint64_t x);
// Uniform in [0, 1) from (seed, index).
double UniformAt(uint64_t seed, uint64_t index);
// Standard normal from (seed, index).
double NormalAt(uint64_t seed, uint64_t index);

// t[i] = std * NormalAt(seed, offset + i).
void FillNormal(Tensor& t, uint64_t seed, float std, uint64_t offset = 0);
// t[i] = lo + (hi - lo) * UniformAt(seed, offset + i).
void FillUniform(Tensor& t, uint64_t seed, float lo, float hi, uint64_t offset = 0);
// A seed for a named part of a model: stable across runs ("layers.0.fc1.weight").
uint64_t SeedFor(uint64_t base, const char* name);

}  // namespace distlab::tensor

#endif  // DISTLAB_REFERENCE_TENSOR_RANDOM_H_
