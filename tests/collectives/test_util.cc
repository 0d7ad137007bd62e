#include "tests/collectives/test_util.h"

#include <cmath>
#include <cstring>
#include <random>

namespace distlab::collectives::testutil {

using comm::DataType;
using comm::RedOp;

comm::CommOptions Options() {
  comm::CommOptions o;
  o.timeout = std::chrono::milliseconds(3000);
  o.name = "hidden-test";
  return o;
}

std::vector<char> Input(DataType dtype, RedOp op, int rank, size_t elems, uint64_t seed) {
  std::vector<char> buf(elems * comm::SizeOf(dtype));
  std::mt19937_64 rng(seed * 1000003 + rank * 7919 + static_cast<int>(dtype) * 31 + static_cast<int>(op));
  for (size_t i = 0; i < elems; ++i) {
    double v = 0;
    switch (dtype) {
      case DataType::kI32:
      case DataType::kI64:
      case DataType::kU8: {
        uint64_t bits = rng();
        // Raw random bits: sums and products wrap, which both sides must do identically.
        if (dtype == DataType::kI32) {
          uint32_t u = static_cast<uint32_t>(bits);
          std::memcpy(buf.data() + 4 * i, &u, 4);
        } else if (dtype == DataType::kI64) {
          std::memcpy(buf.data() + 8 * i, &bits, 8);
        } else {
          buf[i] = static_cast<char>(bits & 0xff);
        }
        continue;
      }
      case DataType::kF32:
      case DataType::kF64: {
        std::uniform_real_distribution<double> d(op == RedOp::kProd ? 0.5 : -2.0,
                                                 op == RedOp::kProd ? 1.5 : 2.0);
        v = d(rng);
        break;
      }
      default: {  // bf16, f16
        if (op == RedOp::kProd) {
          static const double kPow[] = {0.5, 1.0, 2.0};
          v = kPow[rng() % 3];
        } else {
          v = static_cast<double>(static_cast<int>(rng() % 17) - 8);
        }
      }
    }
    comm::SetElementFromDouble(buf.data(), i, dtype, v);
  }
  return buf;
}

double Tolerance(DataType dtype) {
  switch (dtype) {
    case DataType::kF32:
      return 1e-4;
    case DataType::kF64:
      return 1e-12;
    case DataType::kBF16:
      return 1e-2;
    case DataType::kF16:
      return 1e-3;
    default:
      return 0;
  }
}

std::string Compare(const void* got, const void* want, size_t elems, DataType dtype) {
  size_t bad = 0, first = 0;
  double g0 = 0, w0 = 0;
  const size_t es = comm::SizeOf(dtype);
  for (size_t i = 0; i < elems; ++i) {
    bool ok;
    double g = comm::ElementAsDouble(got, i, dtype), w = comm::ElementAsDouble(want, i, dtype);
    if (!comm::IsFloating(dtype)) {
      ok = std::memcmp(static_cast<const char*>(got) + i * es, static_cast<const char*>(want) + i * es, es) ==
           0;
    } else {
      ok = std::fabs(g - w) <= Tolerance(dtype) * std::max(1.0, std::fabs(w));
    }
    if (!ok) {
      if (bad == 0) first = i, g0 = g, w0 = w;
      ++bad;
    }
  }
  if (bad == 0) return "";
  return std::to_string(bad) + " of " + std::to_string(elems) + " elements differ; first at " +
         std::to_string(first) + ": got " + std::to_string(g0) + ", expected " + std::to_string(w0);
}

std::string Label(DataType dtype, RedOp op, int n, size_t count, bool in_place) {
  return std::string(comm::Name(dtype)) + "/" + std::string(comm::Name(op)) + "/n=" + std::to_string(n) +
         "/count=" + std::to_string(count) + (in_place ? "/in-place" : "/out-of-place");
}

}  // namespace distlab::collectives::testutil
