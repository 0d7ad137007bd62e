// The built-in collectives of the threads backend against naive references computed here: every dtype x op,
// in place and out of place, counts 0, 1, < n, not divisible by n and large, every root.
//
// The reference folds the ranks' inputs in rank order with the scalar kernels (ReduceInto on one element,
// tested on its own in types_test), so every dtype must match bit for bit.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "tools/testing/test_support.h"

namespace distlab::comm {
namespace {

CommOptions Opts(const std::string& name) {
  CommOptions o;
  o.name = name;
  o.timeout = std::chrono::seconds(20);
  return o;
}

// Input of `rank` at element i (raw bytes): deterministic, different per rank, wrapping for integers.
std::vector<char> Input(DataType d, RedOp op, int rank, size_t count) {
  std::vector<char> buf(count * SizeOf(d) + 1);
  for (size_t i = 0; i < count; ++i) {
    const double j = static_cast<double>((i * 31 + rank * 17) % 29);
    double v;
    if (!IsFloating(d)) {
      v = d == DataType::kU8 ? 180 + j : (rank % 2 ? -1.0 : 1.0) * (2147480000.0 + 1000 * j);
    } else {
      v = op == RedOp::kProd ? 0.75 + j / 58 : (j - 14) / 4;
    }
    SetElementFromDouble(buf.data(), i, d, v);
  }
  return buf;
}

// op over ranks of inputs[r][offset + i], i < count, folded in rank order with the scalar kernel.
std::vector<char> Fold(const std::vector<std::vector<char>>& inputs, size_t offset, size_t count, DataType d,
                       RedOp op) {
  const size_t e = SizeOf(d);
  std::vector<char> acc(count * e + 1);
  if (count) std::memcpy(acc.data(), inputs[0].data() + offset * e, count * e);
  for (size_t r = 1; r < inputs.size(); ++r) {
    for (size_t i = 0; i < count; ++i) {
      ReduceInto(acc.data() + i * e, inputs[r].data() + (offset + i) * e, 1, d, op);
    }
  }
  for (size_t i = 0; i < count; ++i)
    FinishReduce(acc.data() + i * e, 1, d, op, static_cast<int>(inputs.size()));
  return acc;
}

void ExpectBytesEqual(const char* got, const char* want, size_t count, DataType d, const std::string& what) {
  const size_t e = SizeOf(d);
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(got + i * e, want + i * e, e) != 0) {
      ADD_FAILURE() << what << ": element " << i << " is " << ElementAsDouble(got, i, d) << ", expected "
                    << ElementAsDouble(want, i, d);
      return;
    }
  }
}

// Under the sanitizers (slow) every dtype x op still runs, on a rotating sample of the cases (pairwise).
bool Keep(int combo, int case_index) {
  if (distlab::testing::Sanitizer().empty()) return true;
  return (combo + case_index) % 4 == 0;
}

struct Case {
  int n;
  size_t count;
  bool in_place;
};

std::string CaseName(const char* coll, DataType d, RedOp op, const Case& c) {
  return std::string(coll) + " " + std::string(Name(d)) + " " + std::string(Name(op)) +
         " n=" + std::to_string(c.n) + " count=" + std::to_string(c.count) + (c.in_place ? " in-place" : "");
}

// Counts that matter for n ranks: 0, 1, < n, not divisible by n, larger than one reduction chunk.
std::vector<Case> Cases(bool large) {
  std::vector<Case> out;
  for (int n : {1, 2, 3, 4}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t(n > 1 ? n - 1 : 1), size_t{1001}}) {
      out.push_back({n, count, (count % 2) == 1});
    }
  }
  if (large) {
    out.push_back({4, (size_t{1} << 16) + 3, false});
    out.push_back({3, (size_t{1} << 16) + 5, true});
  }
  return out;
}

TEST(Collectives, AllReduceEveryDtypeAndOpMatchesReference) {
  int combo = 0;
  for (DataType d : kAllDataTypes) {
    for (RedOp op : kAllRedOps) {
      // Every combination on small counts; the large counts on a rotating subset (pairwise sampling).
      const std::vector<Case> cases = Cases(combo % 5 == 0);
      ++combo;
      for (size_t k = 0; k < cases.size(); ++k) {
        const Case& c = cases[k];
        if (!Keep(combo, static_cast<int>(k))) continue;
        SCOPED_TRACE(CaseName("AllReduce", d, op, c));
        std::vector<std::vector<char>> inputs(c.n);
        for (int r = 0; r < c.n; ++r) inputs[r] = Input(d, op, r, c.count);
        const std::vector<char> want = Fold(inputs, 0, c.count, d, op);
        std::vector<std::vector<char>> out(c.n, std::vector<char>(c.count * SizeOf(d) + 1, 0x5a));
        std::vector<std::vector<char>> bufs = inputs;
        ASSERT_OK(FirstError(RunRanks(
            c.n,
            [&](int r, Comm& comm, Stream& s) -> absl::Status {
              void* recv = c.in_place ? bufs[r].data() : out[r].data();
              return comm.AllReduce(bufs[r].data(), recv, c.count, d, op, s);
            },
            Opts("ar"))));
        for (int r = 0; r < c.n; ++r) {
          ExpectBytesEqual(c.in_place ? bufs[r].data() : out[r].data(), want.data(), c.count, d,
                           "rank " + std::to_string(r));
          if (!c.in_place) {
            EXPECT_EQ(bufs[r], inputs[r]) << "the send buffer was modified on rank " << r;
          }
          // The byte after the array is untouched.
          EXPECT_EQ((c.in_place ? bufs[r] : out[r]).back(), c.in_place ? inputs[r].back() : char{0x5a});
        }
      }
    }
  }
}

TEST(Collectives, ReduceAndReduceScatterMatchReference) {
  int combo = 0;
  for (DataType d : kAllDataTypes) {
    for (RedOp op : kAllRedOps) {
      const std::vector<Case> cases = Cases(false);
      for (size_t k = 0; k < cases.size(); ++k) {
        const Case& c = cases[k];
        const int root = (combo++) % c.n;
        if (!Keep(combo, static_cast<int>(k))) continue;
        SCOPED_TRACE(CaseName("Reduce/ReduceScatter", d, op, c) + " root=" + std::to_string(root));
        const size_t e = SizeOf(d);
        std::vector<std::vector<char>> inputs(c.n);
        for (int r = 0; r < c.n; ++r) inputs[r] = Input(d, op, r, c.count * c.n);
        std::vector<std::vector<char>> bufs = inputs;
        std::vector<std::vector<char>> reduced(c.n, std::vector<char>(c.count * c.n * e + 1, 0));
        std::vector<std::vector<char>> scattered(c.n, std::vector<char>(c.count * e + 1, 0));
        ASSERT_OK(FirstError(RunRanks(
            c.n,
            [&](int r, Comm& comm, Stream& s) -> absl::Status {
              // Reduce out of place (recv only on the root), then ReduceScatter in place or not.
              RETURN_IF_ERROR(comm.Reduce(bufs[r].data(), r == root ? reduced[r].data() : nullptr,
                                          c.count * c.n, d, op, root, s));
              RETURN_IF_ERROR(s.Synchronize());
              void* recv = c.in_place ? bufs[r].data() + r * c.count * e : scattered[r].data();
              return comm.ReduceScatter(bufs[r].data(), recv, c.count, d, op, s);
            },
            Opts("rs"))));
        const std::vector<char> whole = Fold(inputs, 0, c.count * c.n, d, op);
        ExpectBytesEqual(reduced[root].data(), whole.data(), c.count * c.n, d, "Reduce at root");
        for (int r = 0; r < c.n; ++r) {
          const char* got = c.in_place ? bufs[r].data() + r * c.count * e : scattered[r].data();
          ExpectBytesEqual(got, whole.data() + r * c.count * e, c.count, d,
                           "ReduceScatter rank " + std::to_string(r));
        }
      }
    }
  }
}

TEST(Collectives, BroadcastAllGatherAllToAllFromEveryRoot) {
  for (DataType d : {DataType::kF32, DataType::kBF16, DataType::kI64, DataType::kU8}) {
    const std::vector<Case> cases = Cases(d == DataType::kF32);
    for (size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      for (int root = 0; root < c.n; ++root) {
        if (!Keep(root + static_cast<int>(d), static_cast<int>(k))) continue;
        SCOPED_TRACE(CaseName("Broadcast/AllGather/AllToAll", d, RedOp::kSum, c) +
                     " root=" + std::to_string(root));
        const size_t e = SizeOf(d);
        const size_t bytes = c.count * e;
        std::vector<std::vector<char>> inputs(c.n), bcast(c.n), gathered(c.n), a2a_in(c.n), a2a_out(c.n);
        for (int r = 0; r < c.n; ++r) {
          inputs[r] = Input(d, RedOp::kSum, r + 7 * root, c.count);
          bcast[r] = c.in_place ? inputs[r] : std::vector<char>(bytes + 1, 0);
          gathered[r].assign(bytes * c.n + 1, 0);
          if (c.in_place) std::memcpy(gathered[r].data() + r * bytes, inputs[r].data(), bytes);
          a2a_in[r] = Input(d, RedOp::kSum, r + 3, c.count * c.n);
          a2a_out[r].assign(bytes * c.n + 1, 0);
        }
        ASSERT_OK(FirstError(RunRanks(
            c.n,
            [&](int r, Comm& comm, Stream& s) -> absl::Status {
              const void* send = c.in_place ? bcast[r].data() : inputs[r].data();
              RETURN_IF_ERROR(comm.Broadcast(send, bcast[r].data(), c.count, d, root, s));
              const void* gsend = c.in_place ? gathered[r].data() + r * bytes : inputs[r].data();
              RETURN_IF_ERROR(comm.AllGather(gsend, gathered[r].data(), c.count, d, s));
              return comm.AllToAll(a2a_in[r].data(), a2a_out[r].data(), c.count, d, s);
            },
            Opts("bc"))));
        for (int r = 0; r < c.n; ++r) {
          EXPECT_EQ(0, std::memcmp(bcast[r].data(), inputs[root].data(), bytes)) << "Broadcast rank " << r;
          for (int p = 0; p < c.n; ++p) {
            EXPECT_EQ(0, std::memcmp(gathered[r].data() + p * bytes, inputs[p].data(), bytes))
                << "AllGather rank " << r << " block " << p;
            EXPECT_EQ(0, std::memcmp(a2a_out[r].data() + p * bytes, a2a_in[p].data() + r * bytes, bytes))
                << "AllToAll rank " << r << " block " << p;
          }
        }
      }
    }
  }
}

TEST(Collectives, LargeAllReduceOnEightRanks) {
  const int n = 8;
  const size_t count = (size_t{1} << 18) + 13;
  std::vector<std::vector<float>> bufs(n, std::vector<float>(count));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) bufs[r][i] = static_cast<float>((i % 1000) * (r + 1));
  }
  ASSERT_OK(FirstError(RunRanks(
      n,
      [&](int r, Comm& comm, Stream& s) {
        return comm.AllReduce(bufs[r].data(), bufs[r].data(), count, DataType::kF32, RedOp::kSum, s);
      },
      Opts("big"))));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; i += 997) ASSERT_EQ(bufs[r][i], static_cast<float>((i % 1000) * 36)) << i;
  }
}

}  // namespace
}  // namespace distlab::comm
