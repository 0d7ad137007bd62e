#include "tests/collectives/test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

namespace distlab::collectives::testutil {

using comm::DataType;
using comm::RedOp;

namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Element i as a message shows it: integers exactly, floats with 9 significant digits.
std::string ElementText(const void* buf, size_t i, DataType dtype) {
  const char* p = static_cast<const char*>(buf);
  switch (dtype) {
    case DataType::kI32: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return std::to_string(v);
    }
    case DataType::kI64: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return std::to_string(v);
    }
    case DataType::kU8:
      return std::to_string(static_cast<unsigned char>(p[i]));
    default: {
      std::ostringstream s;
      s.precision(9);
      s << comm::ElementAsDouble(buf, i, dtype);
      return s.str();
    }
  }
}

}  // namespace

comm::CommOptions Options() {
  comm::CommOptions o;
  o.timeout = std::chrono::milliseconds(3000);
  o.name = "hidden-test";
  return o;
}

std::vector<char> Input(DataType dtype, RedOp op, int rank, size_t elems, uint64_t seed) {
  std::vector<char> buf(elems * comm::SizeOf(dtype));
  uint64_t state = seed * 1000003 + static_cast<uint64_t>(rank) * 7919 + static_cast<int>(dtype) * 31 +
                   static_cast<int>(op);
  for (size_t i = 0; i < elems; ++i) {
    const uint64_t bits = SplitMix64(state);
    double v = 0;
    switch (dtype) {
      case DataType::kI32: {  // raw random bits: sums and products wrap, which both sides must do identically
        const uint32_t u = static_cast<uint32_t>(bits);
        std::memcpy(buf.data() + 4 * i, &u, 4);
        continue;
      }
      case DataType::kI64:
        std::memcpy(buf.data() + 8 * i, &bits, 8);
        continue;
      case DataType::kU8:
        buf[i] = static_cast<char>(bits & 0xff);
        continue;
      case DataType::kF32:
      case DataType::kF64: {
        const double u = static_cast<double>(bits >> 11) * 0x1.0p-53;  // [0, 1)
        v = op == RedOp::kProd ? 0.5 + u : -2.0 + 4.0 * u;
        break;
      }
      default:  // bf16, f16
        if (op == RedOp::kProd) {
          static const double kPow[] = {0.5, 1.0, 2.0};
          v = kPow[bits % 3];
        } else {
          v = static_cast<double>(static_cast<int>(bits % 17) - 8);
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

std::string Compare(const void* got, const void* want, size_t elems, DataType dtype,
                    std::string_view reference) {
  size_t bad = 0, first = 0;
  const size_t es = comm::SizeOf(dtype);
  for (size_t i = 0; i < elems; ++i) {
    bool ok;
    const double g = comm::ElementAsDouble(got, i, dtype), w = comm::ElementAsDouble(want, i, dtype);
    if (!comm::IsFloating(dtype)) {
      ok = std::memcmp(static_cast<const char*>(got) + i * es, static_cast<const char*>(want) + i * es, es) ==
           0;
    } else {
      ok = std::fabs(g - w) <= Tolerance(dtype) * std::max(1.0, std::fabs(w));
    }
    if (!ok) {
      if (bad == 0) first = i;
      ++bad;
    }
  }
  if (bad == 0) return "";
  std::string ref(reference);
  return "element " + std::to_string(first) + " of " + std::to_string(elems) + " differs from " + ref +
         " (got " + ElementText(got, first, dtype) + ", " + ref + " gives " +
         ElementText(want, first, dtype) + "); " + std::to_string(bad) +
         (bad == 1 ? " element differs" : " elements differ");
}

std::string Label(DataType dtype, RedOp op, int n, size_t count, bool in_place) {
  return std::string(comm::Name(dtype)) + " " + std::string(comm::Name(op)) + " on " + std::to_string(n) +
         " ranks, count " + std::to_string(count) + (in_place ? ", in place" : ", out of place");
}

std::string Label(DataType dtype, int n, size_t count, bool in_place) {
  return std::string(comm::Name(dtype)) + " on " + std::to_string(n) + " ranks, count " +
         std::to_string(count) + (in_place ? ", in place" : ", out of place");
}

std::string Verdict(const std::vector<absl::Status>& statuses, const std::vector<std::string>& why,
                    size_t max_lines) {
  std::string msg;
  size_t lines = 0, more = 0;
  for (size_t r = 0; r < statuses.size(); ++r) {
    for (const std::string& line : {statuses[r].ok() ? std::string() : statuses[r].ToString(),
                                    r < why.size() ? why[r] : std::string()}) {
      if (line.empty()) continue;
      if (lines < max_lines) {
        msg += "rank " + std::to_string(r) + ": " + line + "\n";
        ++lines;
      } else {
        ++more;
      }
    }
  }
  if (more > 0) msg += "(and " + std::to_string(more) + " more like these)\n";
  return msg;
}

size_t UnevenCount(testing::CaseRandom& rng, int n, size_t lo, size_t hi) {
  for (;;) {
    const size_t c = static_cast<size_t>(rng.Int(static_cast<int64_t>(lo), static_cast<int64_t>(hi)));
    if (c % n != 0) return c;
  }
}

size_t EvenCount(testing::CaseRandom& rng, int n, size_t lo, size_t hi) {
  const int64_t first = static_cast<int64_t>((lo + n - 1) / n), last = static_cast<int64_t>(hi / n);
  return static_cast<size_t>(rng.Int(first, last)) * n;
}

std::vector<int> Distinct(testing::CaseRandom& rng, int lo, int hi, int k) {
  std::vector<int> all;
  for (int v = lo; v <= hi; ++v) all.push_back(v);
  rng.Shuffle(all);
  all.resize(k);
  return all;
}

DataType AnyDtype(testing::CaseRandom& rng) {
  return rng.Pick(std::vector<DataType>(std::begin(comm::kAllDataTypes), std::end(comm::kAllDataTypes)));
}

RedOp AnyOp(testing::CaseRandom& rng) {
  return rng.Pick(std::vector<RedOp>(std::begin(comm::kAllRedOps), std::end(comm::kAllRedOps)));
}

}  // namespace distlab::collectives::testutil
