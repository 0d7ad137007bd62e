// bfloat16 <-> float32 on the host, in one place: the tensors (reference/tensor) and the communicator's bf16
// reductions (reference/comm/types.cc) both round with this function. The CUDA kernels
// (reference/tensor/cuda_kernels.cu) produce the same bits on the device.
#ifndef DISTLAB_REFERENCE_BASE_BF16_H_
#define DISTLAB_REFERENCE_BASE_BF16_H_

#include <cstdint>
#include <cstring>

namespace distlab {

// bf16 is the high 16 bits of an f32: the same sign and 8-bit exponent, 7 of the 23 mantissa bits. Inline so
// the reduction loops that call it per element stay loops.
//
// Rounding is to nearest, ties to even: adding 0x7fff plus the lowest kept bit, then truncating, rounds the
// dropped 16 bits up exactly when they exceed half, or equal half and the kept part is odd. A carry out of
// the mantissa moves into the exponent, which is right too (the largest finite values round up to infinity).
// A NaN keeps its sign and becomes a quiet NaN (bit 6 of the kept mantissa), so truncation cannot turn it
// into infinity.
inline uint16_t FloatToBF16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// Exact: every bf16 is an f32 with sixteen zero bits below it.
inline float BF16ToFloat(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

}  // namespace distlab

#endif  // DISTLAB_REFERENCE_BASE_BF16_H_
