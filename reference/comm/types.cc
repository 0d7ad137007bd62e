#include "reference/comm/types.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
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

// Writes the 64 bytes at v (64-byte aligned) to dst: with non-temporal stores when `stream` and dst is
// 16-byte aligned. Sanitizer builds always use memcpy, so that ASan and TSan see every write.
#if defined(__SSE2__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
inline void Store64(void* dst, const void* v, bool stream) {
  if (stream && (reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
    const __m128i* s = static_cast<const __m128i*>(v);
    __m128i* d = static_cast<__m128i*>(dst);
    _mm_stream_si128(d, _mm_load_si128(s));
    _mm_stream_si128(d + 1, _mm_load_si128(s + 1));
    _mm_stream_si128(d + 2, _mm_load_si128(s + 2));
    _mm_stream_si128(d + 3, _mm_load_si128(s + 3));
    return;
  }
  std::memcpy(dst, v, 64);
}
#else
inline void Store64(void* dst, const void* v, bool /*stream*/) { std::memcpy(dst, v, 64); }
#endif

// ReduceToOutputs on elements stored as T: step(a, b) is one fold step, finish(v) the last touch (avg).
template <typename T, typename Step, typename Finish>
void FanOut(const void* const* in, int n, void* const* out, int outputs, size_t count, bool stream, Step step,
            Finish finish) {
  auto input = [&](int p) { return static_cast<const T*>(in[p]); };
  auto output = [&](int o) { return static_cast<T*>(out[o]); };
  auto one = [&](size_t i) {
    T v = input(0)[i];
    for (int p = 1; p < n; ++p) v = step(v, input(p)[i]);
    v = finish(v);
    for (int o = 0; o < outputs; ++o) output(o)[i] = v;
  };
  // Single elements up to a 64-byte boundary of the first output, so that its blocks can be streamed.
  const auto first = reinterpret_cast<uintptr_t>(out[0]);
  const size_t head = first % sizeof(T) == 0 ? std::min(count, (64 - first % 64) % 64 / sizeof(T)) : count;
  size_t i = 0;
  for (; i < head; ++i) one(i);
  constexpr size_t kLanes = 64 / sizeof(T);
  for (; i + kLanes <= count; i += kLanes) {
    alignas(64) T v[kLanes];
    const T* a = input(0) + i;
    for (size_t l = 0; l < kLanes; ++l) v[l] = a[l];
    for (int p = 1; p < n; ++p) {
      const T* b = input(p) + i;
      for (size_t l = 0; l < kLanes; ++l) v[l] = step(v[l], b[l]);
    }
    for (size_t l = 0; l < kLanes; ++l) v[l] = finish(v[l]);
    for (int o = 0; o < outputs; ++o) Store64(output(o) + i, v, stream);
  }
  for (; i < count; ++i) one(i);
}

// Floating point types held as themselves: the fold of Loop<T, Op>, the division of FinishReduce.
template <typename T, typename Op>
void FanOutFloat(const void* const* in, int n, void* const* out, int outputs, size_t count, bool stream,
                 bool avg) {
  auto step = [](T a, T b) { return Op::Apply(a, b); };
  if (avg && n > 1) {
    const T tn = static_cast<T>(n);
    FanOut<T>(in, n, out, outputs, count, stream, step, [tn](T v) { return v / tn; });
  } else {
    FanOut<T>(in, n, out, outputs, count, stream, step, [](T v) { return v; });
  }
}

// Integers: sum and prod wrap on the unsigned type, max and min compare the signed one (IntLoop); avg
// divides the signed value, truncating (IntAvg).
template <typename S, typename Op>
void FanOutInt(const void* const* in, int n, void* const* out, int outputs, size_t count, bool stream,
               bool avg) {
  using U = std::make_unsigned_t<S>;
  if constexpr (std::is_same_v<Op, Sum> || std::is_same_v<Op, Prod>) {
    auto step = [](U a, U b) { return static_cast<U>(Op::Apply(a, b)); };
    if (avg && n > 1) {
      const S sn = static_cast<S>(n);
      FanOut<U>(in, n, out, outputs, count, stream, step,
                [sn](U v) { return static_cast<U>(static_cast<S>(static_cast<S>(v) / sn)); });
    } else {
      FanOut<U>(in, n, out, outputs, count, stream, step, [](U v) { return v; });
    }
  } else {
    FanOut<S>(
        in, n, out, outputs, count, stream, [](S a, S b) { return Op::Apply(a, b); }, [](S v) { return v; });
  }
}

// bf16 and f16: each step widens to float, applies the op and rounds back (HalfLoop).
template <typename Op, uint16_t (*To)(float), float (*From)(uint16_t)>
void FanOutHalf(const void* const* in, int n, void* const* out, int outputs, size_t count, bool stream,
                bool avg) {
  auto step = [](uint16_t a, uint16_t b) { return To(Op::Apply(From(a), From(b))); };
  if (avg && n > 1) {
    const float fn = static_cast<float>(n);
    FanOut<uint16_t>(in, n, out, outputs, count, stream, step, [fn](uint16_t v) { return To(From(v) / fn); });
  } else {
    FanOut<uint16_t>(in, n, out, outputs, count, stream, step, [](uint16_t v) { return v; });
  }
}

template <typename Op>
void FanOutTyped(const void* const* in, int n, void* const* out, int outputs, size_t count, DataType dtype,
                 bool stream, bool avg) {
  switch (dtype) {
    case DataType::kF32:
      return FanOutFloat<float, Op>(in, n, out, outputs, count, stream, avg);
    case DataType::kF64:
      return FanOutFloat<double, Op>(in, n, out, outputs, count, stream, avg);
    case DataType::kBF16:
      return FanOutHalf<Op, FloatToBF16, BF16ToFloat>(in, n, out, outputs, count, stream, avg);
    case DataType::kF16:
      return FanOutHalf<Op, FloatToF16Bits, F16BitsToFloat>(in, n, out, outputs, count, stream, avg);
    case DataType::kI32:
      return FanOutInt<int32_t, Op>(in, n, out, outputs, count, stream, avg);
    case DataType::kI64:
      return FanOutInt<int64_t, Op>(in, n, out, outputs, count, stream, avg);
    case DataType::kU8:
      return FanOutInt<uint8_t, Op>(in, n, out, outputs, count, stream, avg);
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

void ReduceToOutputs(const void* const* in, int n, void* const* out, int outputs, size_t count,
                     DataType dtype, RedOp op, bool streaming) {
  if (n <= 0 || outputs <= 0 || count == 0) return;
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:
      return FanOutTyped<Sum>(in, n, out, outputs, count, dtype, streaming, op == RedOp::kAvg);
    case RedOp::kProd:
      return FanOutTyped<Prod>(in, n, out, outputs, count, dtype, streaming, false);
    case RedOp::kMax:
      return FanOutTyped<Max>(in, n, out, outputs, count, dtype, streaming, false);
    case RedOp::kMin:
      return FanOutTyped<Min>(in, n, out, outputs, count, dtype, streaming, false);
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
