// dtypes, names, 16-bit conversions and the reduction kernels, each against a naive reference written here.
#include "reference/comm/types.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::comm {
namespace {

TEST(Types, SizesAndNamesRoundTrip) {
  const size_t sizes[] = {4, 8, 2, 2, 4, 8, 1};
  int i = 0;
  for (DataType d : kAllDataTypes) {
    EXPECT_EQ(SizeOf(d), sizes[i++]) << Name(d);
    ASSERT_OK_AND_ASSIGN(DataType parsed, ParseDataType(Name(d)));
    EXPECT_EQ(parsed, d);
  }
  for (RedOp op : kAllRedOps) {
    ASSERT_OK_AND_ASSIGN(RedOp parsed, ParseRedOp(Name(op)));
    EXPECT_EQ(parsed, op);
  }
  EXPECT_EQ(Name(DataType::kBF16), "bf16");
  EXPECT_EQ(Name(RedOp::kAvg), "avg");
  EXPECT_TRUE(IsFloating(DataType::kF16));
  EXPECT_FALSE(IsFloating(DataType::kU8));
}

TEST(Types, ParseErrorsNameTheAcceptedSpellings) {
  auto d = ParseDataType("float");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("f32, f64, bf16, f16, i32, i64, u8"), absl::string_view::npos);
  auto op = ParseRedOp("mean");
  ASSERT_FALSE(op.ok());
  EXPECT_NE(op.status().message().find("sum, prod, max, min, avg"), absl::string_view::npos);
}

float FromBits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

TEST(Types, BF16RoundsToNearestEven) {
  EXPECT_EQ(ToBF16(1.0f).bits, 0x3f80);
  EXPECT_EQ(FromBF16(bf16{0x3f80}), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even keeps 1.
  EXPECT_EQ(ToBF16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up.
  EXPECT_EQ(ToBF16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);
  // Just above halfway rounds up.
  EXPECT_EQ(ToBF16(FromBits(0x3f808001)).bits, 0x3f81);
  EXPECT_EQ(ToBF16(-2.0f).bits, 0xc000);
  EXPECT_TRUE(std::isnan(FromBF16(ToBF16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(FromBF16(ToBF16(std::numeric_limits<float>::infinity()))));
  // Every bf16 value converts to float and back unchanged (NaNs stay NaN).
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = FromBF16(bf16{static_cast<uint16_t>(b)});
    if (std::isnan(f)) continue;
    ASSERT_EQ(ToBF16(f).bits, b);
  }
}

// Reference: the f16 nearest to x by exhaustive search over all finite f16 values (ties to even mantissa).
uint16_t NearestF16(float x) {
  uint16_t best = 0;
  double best_err = INFINITY;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    if (((b >> 10) & 0x1f) == 0x1f) continue;  // inf/NaN
    const double v = FromF16(f16{static_cast<uint16_t>(b)});
    const double err = std::fabs(v - static_cast<double>(x));
    if (err < best_err ||
        (err == best_err && (b & 1) == 0 && (best & 1) == 1 && std::signbit(v) == std::signbit(x))) {
      best_err = err;
      best = static_cast<uint16_t>(b);
    }
  }
  return best;
}

TEST(Types, F16ConversionsAreExactAndRoundToNearestEven) {
  EXPECT_EQ(ToF16(1.0f).bits, 0x3c00);
  EXPECT_EQ(ToF16(65504.0f).bits, 0x7bff);
  EXPECT_EQ(ToF16(65519.0f).bits, 0x7bff);
  EXPECT_EQ(ToF16(65520.0f).bits, 0x7c00);               // halfway to 65536 ties to even: overflows to inf
  EXPECT_EQ(ToF16(std::ldexp(1.0f, -24)).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(ToF16(std::ldexp(1.0f, -25)).bits, 0x0000);  // halfway to it: ties to even (zero)
  EXPECT_EQ(ToF16(std::ldexp(3.0f, -25)).bits, 0x0002);  // 1.5 units: ties to even (2)
  EXPECT_EQ(FromF16(f16{0x0001}), std::ldexp(1.0f, -24));
  EXPECT_EQ(FromF16(f16{0xc000}), -2.0f);
  EXPECT_TRUE(std::isnan(FromF16(ToF16(std::numeric_limits<float>::quiet_NaN()))));
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = FromF16(f16{static_cast<uint16_t>(b)});
    if (std::isnan(f)) continue;
    ASSERT_EQ(ToF16(f).bits, b);
  }
  // Values between f16 numbers, including exact ties, in the normal and subnormal ranges.
  const float probes[] = {1.0f + std::ldexp(1.0f, -11),
                          1.0f + 3 * std::ldexp(1.0f, -11),
                          0.1f,
                          3.14159f,
                          -1234.567f,
                          std::ldexp(1.0f, -15) * 1.3f,
                          std::ldexp(5.0f, -26),
                          60000.7f};
  for (float x : probes) EXPECT_EQ(ToF16(x).bits, NearestF16(x)) << x;
}

// Raw integer element, sign-extended for the signed types, as 64-bit pattern.
uint64_t RawInt(const std::vector<char>& buf, size_t i, DataType d) {
  switch (d) {
    case DataType::kI32: {
      int32_t v;
      std::memcpy(&v, buf.data() + 4 * i, 4);
      return static_cast<uint64_t>(static_cast<int64_t>(v));
    }
    case DataType::kI64: {
      uint64_t v;
      std::memcpy(&v, buf.data() + 8 * i, 8);
      return v;
    }
    default:
      return static_cast<uint8_t>(buf[i]);
  }
}

// Naive integer reduction of `vals` (raw patterns) wrapped to `bits` bits, then reinterpreted.
int64_t NaiveInt(const std::vector<uint64_t>& vals, RedOp op, int bits, bool is_signed) {
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : ((uint64_t{1} << bits) - 1);
  auto as_signed = [&](uint64_t u) -> int64_t {
    u &= mask;
    if (!is_signed) return static_cast<int64_t>(u);
    if (bits < 64 && (u >> (bits - 1)) & 1) u |= ~mask;
    return static_cast<int64_t>(u);
  };
  uint64_t acc = vals[0];
  for (size_t k = 1; k < vals.size(); ++k) {
    switch (op) {
      case RedOp::kSum:
      case RedOp::kAvg:
        acc += vals[k];
        break;
      case RedOp::kProd:
        acc *= vals[k];
        break;
      case RedOp::kMax:
        acc = as_signed(vals[k]) > as_signed(acc) ? vals[k] : acc;
        break;
      case RedOp::kMin:
        acc = as_signed(vals[k]) < as_signed(acc) ? vals[k] : acc;
        break;
    }
  }
  int64_t result = as_signed(acc);
  if (op == RedOp::kAvg) result /= static_cast<int64_t>(vals.size());  // truncates toward zero
  return result;
}

// Test values of input k (of `inputs`) at element i: integers span the wrap-around; floats stay moderate.
double Value(DataType d, RedOp op, int k, size_t i) {
  const double j = static_cast<double>((i * 7 + k * 13) % 23);
  switch (d) {
    case DataType::kI32:
      return (k % 2 ? -1.0 : 1.0) * (2147483000.0 + 97 * j) + (op == RedOp::kProd ? j : 0);
    case DataType::kI64:
      return (k % 2 ? -1.0 : 1.0) * (std::ldexp(1.0, 62) + 1024.0 * j);
    case DataType::kU8:
      return 200 + j;
    default:
      if (op == RedOp::kProd) return 0.5 + j / 23.0;
      return (j - 11) / 3.0;
  }
}

double Epsilon(DataType d) {
  switch (d) {
    case DataType::kF32:
      return std::ldexp(1.0, -23);
    case DataType::kF64:
      return std::ldexp(1.0, -52);
    case DataType::kBF16:
      return std::ldexp(1.0, -8);
    case DataType::kF16:
      return std::ldexp(1.0, -11);
    default:
      return 0;
  }
}

TEST(Types, ReduceIntoMatchesNaiveReferenceForEveryDtypeAndOp) {
  const size_t count = 37;  // not a multiple of any vector width
  for (int inputs : {1, 2, 3, 5}) {
    for (DataType d : kAllDataTypes) {
      for (RedOp op : kAllRedOps) {
        SCOPED_TRACE(::testing::Message() << Name(d) << " " << Name(op) << " inputs=" << inputs);
        std::vector<std::vector<char>> in(inputs, std::vector<char>(count * SizeOf(d)));
        for (int k = 0; k < inputs; ++k) {
          for (size_t i = 0; i < count; ++i) SetElementFromDouble(in[k].data(), i, d, Value(d, op, k, i));
        }
        std::vector<char> acc = in[0];
        for (int k = 1; k < inputs; ++k) ReduceInto(acc.data(), in[k].data(), count, d, op);
        FinishReduce(acc.data(), count, d, op, inputs);
        for (size_t i = 0; i < count; ++i) {
          if (!IsFloating(d)) {
            std::vector<uint64_t> vals;
            for (int k = 0; k < inputs; ++k) vals.push_back(RawInt(in[k], i, d));
            const int bits = static_cast<int>(SizeOf(d)) * 8;
            const int64_t want = NaiveInt(vals, op, bits, d != DataType::kU8);
            const int64_t got = static_cast<int64_t>(RawInt(acc, i, d));
            const int64_t got_typed = d == DataType::kU8 ? static_cast<int64_t>(got & 0xff) : got;
            ASSERT_EQ(got_typed, want) << "element " << i;
          } else {
            double want = ElementAsDouble(in[0].data(), i, d);
            double magnitude = std::fabs(want);
            for (int k = 1; k < inputs; ++k) {
              const double x = ElementAsDouble(in[k].data(), i, d);
              switch (op) {
                case RedOp::kSum:
                case RedOp::kAvg:
                  want += x;
                  magnitude += std::fabs(x);
                  break;
                case RedOp::kProd:
                  want *= x;
                  magnitude *= std::fabs(x);
                  break;
                case RedOp::kMax:
                  want = std::max(want, x);
                  break;
                case RedOp::kMin:
                  want = std::min(want, x);
                  break;
              }
            }
            if (op == RedOp::kAvg) want /= inputs, magnitude /= inputs;
            const double tol =
                (op == RedOp::kMax || op == RedOp::kMin) ? 0.0 : (inputs + 1) * Epsilon(d) * magnitude;
            ASSERT_NEAR(ElementAsDouble(acc.data(), i, d), want, tol) << "element " << i;
          }
        }
      }
    }
  }
}

// ReduceToOutputs is the fold of ReduceInto then FinishReduce, written to every output: the same bytes, for
// every dtype and op, with and without streaming stores, for outputs that start on a 64-byte boundary or one
// element past it (single elements up to the boundary), with a tail after the 64-byte blocks, and in place.
TEST(Types, ReduceToOutputsIsReduceIntoThenFinishOnEveryOutput) {
  for (int inputs : {1, 2, 3, 5}) {
    for (DataType d : kAllDataTypes) {
      for (RedOp op : kAllRedOps) {
        for (size_t count : {size_t{1}, size_t{37}, size_t{1000}}) {
          const size_t e = SizeOf(d), bytes = count * e;
          std::vector<std::vector<char>> in(inputs, std::vector<char>(bytes));
          for (int k = 0; k < inputs; ++k) {
            for (size_t i = 0; i < count; ++i) SetElementFromDouble(in[k].data(), i, d, Value(d, op, k, i));
          }
          std::vector<char> want = in[0];
          for (int k = 1; k < inputs; ++k) ReduceInto(want.data(), in[k].data(), count, d, op);
          FinishReduce(want.data(), count, d, op, inputs);
          std::vector<const void*> from;
          for (const auto& b : in) from.push_back(b.data());
          for (bool streaming : {false, true}) {
            for (size_t shift : {size_t{0}, e}) {  // where the outputs start: on a boundary, one element on
              SCOPED_TRACE(::testing::Message()
                           << Name(d) << " " << Name(op) << " inputs=" << inputs << " count=" << count
                           << " streaming=" << streaming << " shift=" << shift);
              const int outputs = std::max(1, inputs - 1);
              std::vector<std::vector<char>> buf(outputs, std::vector<char>(bytes + 64 + shift, 0x5a));
              std::vector<void*> to;
              for (auto& b : buf) {
                const auto at = reinterpret_cast<uintptr_t>(b.data());
                to.push_back(b.data() + (64 - at % 64) % 64 + shift);  // room: 64 + shift bytes past `bytes`
              }
              ReduceToOutputs(from.data(), inputs, to.data(), outputs, count, d, op, streaming);
              for (int o = 0; o < outputs; ++o) {
                ASSERT_EQ(std::memcmp(to[o], want.data(), bytes), 0) << "output " << o;
              }
            }
          }
          // In place: the first input is also the only output.
          SCOPED_TRACE(::testing::Message() << Name(d) << " " << Name(op) << " inputs=" << inputs
                                            << " count=" << count << " in place");
          std::vector<char> own = in[0];
          from[0] = own.data();
          void* self = own.data();
          ReduceToOutputs(from.data(), inputs, &self, 1, count, d, op, true);
          ASSERT_EQ(std::memcmp(own.data(), want.data(), bytes), 0);
        }
      }
    }
  }
}

TEST(Types, IntegerWrapAroundAndAvgTruncation) {
  int32_t a[2] = {std::numeric_limits<int32_t>::max(), -7};
  const int32_t b[2] = {1, 0};
  ReduceInto(a, b, 2, DataType::kI32, RedOp::kSum);
  EXPECT_EQ(a[0], std::numeric_limits<int32_t>::min());  // wraps modulo 2^32
  uint8_t u[1] = {250};
  const uint8_t v[1] = {10};
  ReduceInto(u, v, 1, DataType::kU8, RedOp::kSum);
  EXPECT_EQ(u[0], 4);
  ReduceInto(u, v, 1, DataType::kU8, RedOp::kProd);
  EXPECT_EQ(u[0], 40);
  // avg: wrapped sum / n truncated toward zero: -7 / 2 = -3 (not -4).
  FinishReduce(&a[1], 1, DataType::kI32, RedOp::kAvg, 2);
  EXPECT_EQ(a[1], -3);
  int64_t big[1] = {std::numeric_limits<int64_t>::max()};
  const int64_t two[1] = {2};
  ReduceInto(big, two, 1, DataType::kI64, RedOp::kProd);
  EXPECT_EQ(big[0], -2);
  // max/min compare signed values.
  int32_t m[1] = {-1};
  const int32_t p[1] = {1};
  ReduceInto(m, p, 1, DataType::kI32, RedOp::kMax);
  EXPECT_EQ(m[0], 1);
}

TEST(Types, HalfTypesRoundAfterEachStep) {
  // bf16: 256 + 1 is not representable (8 significant bits): each step rounds back (ties to even) to 256.
  std::vector<uint16_t> acc = {ToBF16(256.0f).bits};
  const std::vector<uint16_t> one = {ToBF16(1.0f).bits};
  ReduceInto(acc.data(), one.data(), 1, DataType::kBF16, RedOp::kSum);
  ReduceInto(acc.data(), one.data(), 1, DataType::kBF16, RedOp::kSum);
  EXPECT_EQ(FromBF16(bf16{acc[0]}), 256.0f);  // float accumulation would give 258
  std::vector<uint16_t> h = {ToF16(2048.0f).bits};
  const std::vector<uint16_t> hone = {ToF16(1.0f).bits};
  ReduceInto(h.data(), hone.data(), 1, DataType::kF16, RedOp::kSum);
  EXPECT_EQ(FromF16(f16{h[0]}), 2048.0f);
}

TEST(Types, ElementAccessRoundsAndWraps) {
  std::vector<char> buf(64);
  SetElementFromDouble(buf.data(), 0, DataType::kU8, 300);
  EXPECT_EQ(ElementAsDouble(buf.data(), 0, DataType::kU8), 44);
  SetElementFromDouble(buf.data(), 0, DataType::kU8, -1);
  EXPECT_EQ(ElementAsDouble(buf.data(), 0, DataType::kU8), 255);
  SetElementFromDouble(buf.data(), 1, DataType::kI32, 4294967296.0 + 5);
  EXPECT_EQ(ElementAsDouble(buf.data(), 1, DataType::kI32), 5);
  SetElementFromDouble(buf.data(), 1, DataType::kI32, 2.6);
  EXPECT_EQ(ElementAsDouble(buf.data(), 1, DataType::kI32), 3);
  SetElementFromDouble(buf.data(), 1, DataType::kI64, -123456789012.0);
  EXPECT_EQ(ElementAsDouble(buf.data(), 1, DataType::kI64), -123456789012.0);
  SetElementFromDouble(buf.data(), 2, DataType::kBF16, 1.5);
  EXPECT_EQ(ElementAsDouble(buf.data(), 2, DataType::kBF16), 1.5);
  SetElementFromDouble(buf.data(), 3, DataType::kF64, 0.1);
  EXPECT_EQ(ElementAsDouble(buf.data(), 3, DataType::kF64), 0.1);
}

}  // namespace
}  // namespace distlab::comm
