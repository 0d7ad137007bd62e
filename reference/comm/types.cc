#include "reference/comm/types.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "reference/base/bf16.h"
#include "reference/comm/streaming_store.h"

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

// The element kernel of one (dtype, op): With<Op>(dtype, avg, n, f) calls f(T{}, step, finish), where T is
// the type elements are stored and folded as, step(a, b) one fold step, and finish(v) avg's division by n
// (the identity when `avg` is false). Floats fold as themselves. bf16 and f16 widen to float for every step
// and round back. Integers sum and multiply on the unsigned type (wrapping modulo 2^w), compare as the signed
// one, and avg divides the signed value (truncating toward zero).
template <typename T, typename Op, typename F>
void FloatKernel(bool avg, int n, F& f) {
  auto step = [](T a, T b) { return Op::Apply(a, b); };
  if (!avg) return f(T{}, step, [](T v) { return v; });
  const T tn = static_cast<T>(n);
  f(T{}, step, [tn](T v) { return v / tn; });
}

template <typename Op, uint16_t (*To)(float), float (*From)(uint16_t), typename F>
void HalfKernel(bool avg, int n, F& f) {
  auto step = [](uint16_t a, uint16_t b) { return To(Op::Apply(From(a), From(b))); };
  if (!avg) return f(uint16_t{}, step, [](uint16_t v) { return v; });
  const float fn = static_cast<float>(n);
  f(uint16_t{}, step, [fn](uint16_t v) { return To(From(v) / fn); });
}

template <typename S, typename Op, typename F>
void IntKernel(bool avg, int n, F& f) {
  using U = std::make_unsigned_t<S>;
  if constexpr (std::is_same_v<Op, Sum> || std::is_same_v<Op, Prod>) {
    auto step = [](U a, U b) { return static_cast<U>(Op::Apply(a, b)); };
    if (!avg) return f(U{}, step, [](U v) { return v; });
    const S sn = static_cast<S>(n);
    f(U{}, step, [sn](U v) { return static_cast<U>(static_cast<S>(static_cast<S>(v) / sn)); });
  } else {
    f(
        S{}, [](S a, S b) { return Op::Apply(a, b); }, [](S v) { return v; });
  }
}

template <typename Op, typename F>
void With(DataType dtype, bool avg, int n, F& f) {
  switch (dtype) {
    case DataType::kF32:
      return FloatKernel<float, Op>(avg, n, f);
    case DataType::kF64:
      return FloatKernel<double, Op>(avg, n, f);
    case DataType::kBF16:
      return HalfKernel<Op, FloatToBF16, BF16ToFloat>(avg, n, f);
    case DataType::kF16:
      return HalfKernel<Op, FloatToF16Bits, F16BitsToFloat>(avg, n, f);
    case DataType::kI32:
      return IntKernel<int32_t, Op>(avg, n, f);
    case DataType::kI64:
      return IntKernel<int64_t, Op>(avg, n, f);
    case DataType::kU8:
      return IntKernel<uint8_t, Op>(avg, n, f);
  }
}

// With the kernel of (dtype, op) for n contributions: avg's finish divides by n when n > 1.
template <typename F>
void WithKernel(DataType dtype, RedOp op, int n, F&& f) {
  switch (op) {
    case RedOp::kSum:
      return With<Sum>(dtype, false, n, f);
    case RedOp::kAvg:
      return With<Sum>(dtype, n > 1, n, f);
    case RedOp::kProd:
      return With<Prod>(dtype, false, n, f);
    case RedOp::kMax:
      return With<Max>(dtype, false, n, f);
    case RedOp::kMin:
      return With<Min>(dtype, false, n, f);
  }
}

// Writes the 64 bytes at v to dst: with streaming stores when `stream` and dst is 16-byte aligned.
inline void Store64(void* dst, const void* v, bool stream) {
  if (internal::kStreamingStores && stream && (reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
    internal::Stream64(dst, v);
  } else {
    std::memcpy(dst, v, 64);
  }
}

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
  WithKernel(dtype, op, 1, [&](auto type, auto step, auto /*finish*/) {
    using T = decltype(type);
    T* a = static_cast<T*>(acc);
    const T* b = static_cast<const T*>(in);
    for (size_t i = 0; i < count; ++i) a[i] = step(a[i], b[i]);
  });
}

void ReduceToOutputs(const void* const* in, int n, void* const* out, int outputs, size_t count,
                     DataType dtype, RedOp op, bool streaming) {
  if (n <= 0 || outputs <= 0 || count == 0) return;
  WithKernel(dtype, op, n, [&](auto type, auto step, auto finish) {
    FanOut<decltype(type)>(in, n, out, outputs, count, streaming, step, finish);
  });
}

void FinishReduce(void* acc, size_t count, DataType dtype, RedOp op, int n) {
  if (op != RedOp::kAvg || n <= 1) return;
  WithKernel(dtype, op, n, [&](auto type, auto /*step*/, auto finish) {
    using T = decltype(type);
    T* a = static_cast<T*>(acc);
    for (size_t i = 0; i < count; ++i) a[i] = finish(a[i]);
  });
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
