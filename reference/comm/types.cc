#include "reference/comm/types.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "reference/base/bf16.h"

namespace distlab::comm {
namespace {

uint32_t FloatBits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
float BitsFloat(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// The conversions, inline so the reduction loops below do not pay a call per element. bf16's are
// reference/base/bf16.h's (FloatToBF16, BF16ToFloat), the ones the tensors use.

inline uint16_t FloatToF16Bits(float x) {
  const uint32_t u = FloatBits(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // inf or NaN
    if (a == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  }
  // 65520 = halfway between the largest half (65504, odd mantissa) and 65536: ties to even give inf.
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  const uint32_t e = a >> 23;  // biased float exponent
  const uint32_t m = a & 0x7fffffu;
  if (e < 113) {  // below 2^-14: a half subnormal (units of 2^-24) or zero
    const uint32_t mant = m | 0x800000u;
    const uint32_t shift = 126 - e;  // value / 2^-24 = mant * 2^(e - 126)
    if (e == 0 || shift > 24) return sign;
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;  // may carry into the smallest normal: correct
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t h = ((e - 112) << 10) | (m >> 13);
  const uint32_t rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent: correct
  return static_cast<uint16_t>(sign | h);
}
inline float F16BitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0) {
    const float mag = std::ldexp(static_cast<float>(m), -24);  // exact
    return sign ? -mag : mag;
  }
  if (e == 31) return BitsFloat(sign | 0x7f800000u | (m << 13));
  return BitsFloat(sign | ((e + 112) << 23) | (m << 13));
}

// --- Reduction kernels: one tight loop per (type, op), chosen once per call. ---

struct Sum {
  template <typename T>
  static T Apply(T a, T b) {
    return a + b;
  }
};
struct Prod {
  template <typename T>
  static T Apply(T a, T b) {
    return a * b;
  }
};
struct Max {
  template <typename T>
  static T Apply(T a, T b) {
    return b > a ? b : a;
  }
};
struct Min {
  template <typename T>
  static T Apply(T a, T b) {
    return b < a ? b : a;
  }
};

template <typename T, typename Op>
void Loop(void* acc, const void* in, size_t count) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(in);
  for (size_t i = 0; i < count; ++i) a[i] = Op::Apply(a[i], b[i]);
}

// Integers: sum and prod on the unsigned type (wraps modulo 2^w), max and min on the signed one.
template <typename S, typename Op>
void IntLoop(void* acc, const void* in, size_t count) {
  using U = std::make_unsigned_t<S>;
  if constexpr (std::is_same_v<Op, Sum> || std::is_same_v<Op, Prod>) {
    U* a = static_cast<U*>(acc);
    const U* b = static_cast<const U*>(in);
    for (size_t i = 0; i < count; ++i) a[i] = static_cast<U>(Op::Apply(a[i], b[i]));
  } else {
    Loop<S, Op>(acc, in, count);
  }
}

template <typename Op, uint16_t (*To)(float), float (*From)(uint16_t)>
void HalfLoop(void* acc, const void* in, size_t count) {
  uint16_t* a = static_cast<uint16_t*>(acc);
  const uint16_t* b = static_cast<const uint16_t*>(in);
  for (size_t i = 0; i < count; ++i) a[i] = To(Op::Apply(From(a[i]), From(b[i])));
}

template <typename Op>
void ReduceTyped(void* acc, const void* in, size_t count, DataType dtype) {
  switch (dtype) {
    case DataType::kF32:
      return Loop<float, Op>(acc, in, count);
    case DataType::kF64:
      return Loop<double, Op>(acc, in, count);
    case DataType::kBF16:
      return HalfLoop<Op, FloatToBF16, BF16ToFloat>(acc, in, count);
    case DataType::kF16:
      return HalfLoop<Op, FloatToF16Bits, F16BitsToFloat>(acc, in, count);
    case DataType::kI32:
      return IntLoop<int32_t, Op>(acc, in, count);
    case DataType::kI64:
      return IntLoop<int64_t, Op>(acc, in, count);
    case DataType::kU8:
      return IntLoop<uint8_t, Op>(acc, in, count);
  }
}

template <typename S>
void IntAvg(void* acc, size_t count, int n) {
  S* a = static_cast<S*>(acc);
  for (size_t i = 0; i < count; ++i) a[i] = static_cast<S>(a[i] / static_cast<S>(n));  // truncates to 0
}

}  // namespace

size_t SizeOf(DataType dtype) {
  switch (dtype) {
    case DataType::kF32:
      return 4;
    case DataType::kF64:
      return 8;
    case DataType::kBF16:
      return 2;
    case DataType::kF16:
      return 2;
    case DataType::kI32:
      return 4;
    case DataType::kI64:
      return 8;
    case DataType::kU8:
      return 1;
  }
  return 0;
}

std::string_view Name(DataType dtype) {
  switch (dtype) {
    case DataType::kF32:
      return "f32";
    case DataType::kF64:
      return "f64";
    case DataType::kBF16:
      return "bf16";
    case DataType::kF16:
      return "f16";
    case DataType::kI32:
      return "i32";
    case DataType::kI64:
      return "i64";
    case DataType::kU8:
      return "u8";
  }
  return "invalid-dtype";
}

std::string_view Name(RedOp op) {
  switch (op) {
    case RedOp::kSum:
      return "sum";
    case RedOp::kProd:
      return "prod";
    case RedOp::kMax:
      return "max";
    case RedOp::kMin:
      return "min";
    case RedOp::kAvg:
      return "avg";
  }
  return "invalid-op";
}

absl::StatusOr<DataType> ParseDataType(std::string_view name) {
  for (DataType d : kAllDataTypes) {
    if (Name(d) == name) return d;
  }
  return absl::InvalidArgumentError("unknown dtype '" + std::string(name) +
                                    "': expected one of f32, f64, bf16, f16, i32, i64, u8");
}

absl::StatusOr<RedOp> ParseRedOp(std::string_view name) {
  for (RedOp op : kAllRedOps) {
    if (Name(op) == name) return op;
  }
  return absl::InvalidArgumentError("unknown reduction op '" + std::string(name) +
                                    "': expected one of sum, prod, max, min, avg");
}

bool IsFloating(DataType dtype) {
  return dtype == DataType::kF32 || dtype == DataType::kF64 || dtype == DataType::kBF16 ||
         dtype == DataType::kF16;
}

bf16 ToBF16(float x) { return bf16{FloatToBF16(x)}; }
float FromBF16(bf16 x) { return BF16ToFloat(x.bits); }
f16 ToF16(float x) { return f16{FloatToF16Bits(x)}; }
float FromF16(f16 x) { return F16BitsToFloat(x.bits); }

void ReduceInto(void* acc, const void* in, size_t count, DataType dtype, RedOp op) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:
      return ReduceTyped<Sum>(acc, in, count, dtype);
    case RedOp::kProd:
      return ReduceTyped<Prod>(acc, in, count, dtype);
    case RedOp::kMax:
      return ReduceTyped<Max>(acc, in, count, dtype);
    case RedOp::kMin:
      return ReduceTyped<Min>(acc, in, count, dtype);
  }
}

void FinishReduce(void* acc, size_t count, DataType dtype, RedOp op, int n) {
  if (op != RedOp::kAvg || n <= 1) return;
  switch (dtype) {
    case DataType::kF32: {
      float* a = static_cast<float*>(acc);
      const float fn = static_cast<float>(n);
      for (size_t i = 0; i < count; ++i) a[i] /= fn;
      return;
    }
    case DataType::kF64: {
      double* a = static_cast<double*>(acc);
      const double dn = static_cast<double>(n);
      for (size_t i = 0; i < count; ++i) a[i] /= dn;
      return;
    }
    case DataType::kBF16: {
      uint16_t* a = static_cast<uint16_t*>(acc);
      for (size_t i = 0; i < count; ++i) {
        a[i] = FloatToBF16(BF16ToFloat(a[i]) / static_cast<float>(n));
      }
      return;
    }
    case DataType::kF16: {
      uint16_t* a = static_cast<uint16_t*>(acc);
      for (size_t i = 0; i < count; ++i) a[i] = FloatToF16Bits(F16BitsToFloat(a[i]) / static_cast<float>(n));
      return;
    }
    case DataType::kI32:
      return IntAvg<int32_t>(acc, count, n);
    case DataType::kI64:
      return IntAvg<int64_t>(acc, count, n);
    case DataType::kU8:
      return IntAvg<uint8_t>(acc, count, n);
  }
}

double ElementAsDouble(const void* buf, size_t i, DataType dtype) {
  switch (dtype) {
    case DataType::kF32:
      return static_cast<const float*>(buf)[i];
    case DataType::kF64:
      return static_cast<const double*>(buf)[i];
    case DataType::kBF16:
      return BF16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kF16:
      return F16BitsToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kI32:
      return static_cast<const int32_t*>(buf)[i];
    case DataType::kI64:
      return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case DataType::kU8:
      return static_cast<const uint8_t*>(buf)[i];
  }
  return 0;
}

namespace {
// value rounded to the nearest integer, then reduced modulo 2^64 (NaN gives 0).
uint64_t WrapToU64(double value) {
  if (std::isnan(value)) return 0;
  const double r = std::nearbyint(value);
  constexpr double k2to63 = 9223372036854775808.0;
  const double m = std::fmod(std::fabs(r), 2 * k2to63);  // exact
  const uint64_t u =
      m >= k2to63 ? static_cast<uint64_t>(m - k2to63) + (uint64_t{1} << 63) : static_cast<uint64_t>(m);
  return r < 0 ? ~u + 1 : u;  // two's complement of the magnitude
}
}  // namespace

void SetElementFromDouble(void* buf, size_t i, DataType dtype, double value) {
  switch (dtype) {
    case DataType::kF32:
      static_cast<float*>(buf)[i] = static_cast<float>(value);
      return;
    case DataType::kF64:
      static_cast<double*>(buf)[i] = value;
      return;
    case DataType::kBF16:
      static_cast<uint16_t*>(buf)[i] = FloatToBF16(static_cast<float>(value));
      return;
    case DataType::kF16:
      static_cast<uint16_t*>(buf)[i] = FloatToF16Bits(static_cast<float>(value));
      return;
    case DataType::kI32: {
      const uint32_t u = static_cast<uint32_t>(WrapToU64(value));
      std::memcpy(static_cast<char*>(buf) + i * 4, &u, 4);
      return;
    }
    case DataType::kI64: {
      const uint64_t u = WrapToU64(value);
      std::memcpy(static_cast<char*>(buf) + i * 8, &u, 8);
      return;
    }
    case DataType::kU8:
      static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(WrapToU64(value));
      return;
  }
}

}  // namespace distlab::comm
