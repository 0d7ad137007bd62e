// Lab 2, stage E (solution): the loader's checkpoint as text, the seeds, rank x worker sharding and
// Megatron's consumed-samples sampler.
#include "labs/dataloader/state.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "labs/dataloader/dataset.h"
#include "labs/dataloader/loader.h"

namespace distlab::dataloader {

namespace {

constexpr char kMagic[] = "distlab-loader-state 1";
// The keys, in the order Encode writes them (after the first line).
constexpr const char* kKeys[] = {"epoch", "delivered",   "generator", "base_seed", "num_workers",
                                 "done",  "last_worker", "rng",       "stream"};

template <typename T>
std::string List(const std::vector<T>& v) {
  return v.empty() ? "0" : absl::StrCat(v.size(), " ", absl::StrJoin(v, " "));
}

bool ParseI64(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}
bool ParseU64(const std::string& s, uint64_t* out) {
  if (s.empty() || s[0] == '-') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

}  // namespace

std::string EncodeLoaderState(const LoaderState& s) {
  return absl::StrCat(kMagic, "\nepoch ", s.epoch, "\ndelivered ", s.delivered, "\ngenerator ", s.generator,
                      "\nbase_seed ", s.base_seed, "\nnum_workers ", s.num_workers, "\ndone ", s.done ? 1 : 0,
                      "\nlast_worker ", s.last_worker, "\nrng ", List(s.rng), "\nstream ", List(s.stream),
                      "\n");
}

absl::StatusOr<LoaderState> DecodeLoaderState(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (lines.empty() || lines[0] != kMagic) {
    return absl::InvalidArgumentError(absl::StrCat("line 1: a loader state starts with \"", kMagic,
                                                   "\", not \"", lines.empty() ? "" : lines[0].substr(0, 40),
                                                   "\""));
  }
  constexpr size_t kCount = sizeof(kKeys) / sizeof(kKeys[0]);
  if (lines.size() != kCount + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the state has ", lines.size(), " lines, a loader state has ", kCount + 1));
  }
  LoaderState s;
  for (size_t k = 0; k < kCount; ++k) {
    const std::string key = kKeys[k];
    std::vector<std::string> f = absl::StrSplit(lines[k + 1], ' ');
    auto bad = [&](const std::string& what) {
      return absl::InvalidArgumentError(absl::StrCat("line ", k + 2, " (", key, "): ", what));
    };
    if (f[0] != key) return bad(absl::StrCat("expected the key '", key, "', found '", f[0], "'"));
    if (key == "rng" || key == "stream") {
      int64_t n = 0;
      if (f.size() < 2 || !ParseI64(f[1], &n) || n < 0) return bad("the first value must be the count");
      if (static_cast<int64_t>(f.size()) - 2 != n) {
        return bad(absl::StrCat(n, " values announced, ", f.size() - 2, " found"));
      }
      for (int64_t i = 0; i < n; ++i) {
        const std::string& v = f[static_cast<size_t>(i) + 2];
        if (key == "rng") {
          uint64_t x = 0;
          if (!ParseU64(v, &x)) return bad(absl::StrCat("value ", i, " '", v, "' is not an unsigned number"));
          s.rng.push_back(x);
        } else {
          int64_t x = 0;
          if (!ParseI64(v, &x)) return bad(absl::StrCat("value ", i, " '", v, "' is not a number"));
          s.stream.push_back(x);
        }
      }
      continue;
    }
    if (f.size() != 2) return bad(absl::StrCat("expected one value, found ", f.size() - 1));
    if (key == "generator" || key == "base_seed") {
      uint64_t x = 0;
      if (!ParseU64(f[1], &x)) return bad(absl::StrCat("'", f[1], "' is not an unsigned number"));
      (key == "generator" ? s.generator : s.base_seed) = x;
      continue;
    }
    int64_t x = 0;
    if (!ParseI64(f[1], &x)) return bad(absl::StrCat("'", f[1], "' is not a number"));
    if (key == "epoch") s.epoch = x;
    if (key == "delivered") s.delivered = x;
    if (key == "num_workers") {
      if (x < 0 || x > 1 << 20) return bad(absl::StrCat(x, " is not a worker count"));
      s.num_workers = static_cast<int>(x);
    }
    if (key == "done") {
      if (x != 0 && x != 1) return bad(absl::StrCat("must be 0 or 1, not ", x));
      s.done = x == 1;
    }
    if (key == "last_worker") s.last_worker = static_cast<int>(std::clamp<int64_t>(x, -1, 1 << 20));
  }
  const size_t readers = static_cast<size_t>(std::max(1, s.num_workers));
  if (!s.rng.empty() && s.rng.size() != readers) {
    return absl::InvalidArgumentError(absl::StrCat("line 9 (rng): ", s.rng.size(), " values for ",
                                                   s.num_workers,
                                                   " workers (one per worker, or one with none)"));
  }
  if (!s.stream.empty() && s.stream.size() != readers) {
    return absl::InvalidArgumentError(absl::StrCat("line 10 (stream): ", s.stream.size(), " values for ",
                                                   s.num_workers,
                                                   " workers (one per worker, or one with none)"));
  }
  return s;
}

uint64_t EpochBaseSeed(uint64_t* generator) { return SplitMix64(generator); }

uint64_t WorkerSeed(uint64_t base_seed, int worker_id) {
  return base_seed + static_cast<uint64_t>(worker_id);
}

std::pair<int64_t, int64_t> GridShard(int64_t start, int64_t end, int rank, int num_ranks, int worker_id,
                                      int num_workers) {
  if (num_ranks < 1 || rank < 0 || rank >= num_ranks || num_workers < 1 || worker_id < 0 ||
      worker_id >= num_workers || end <= start) {
    return {start, start};
  }
  const int64_t q =
      (end - start) / num_ranks;  // drop: the last (end - start) mod R samples are read by nobody
  const int64_t lo = start + q * rank;
  return ShardRange(lo, lo + q, worker_id, num_workers);
}

absl::StatusOr<std::vector<std::vector<int64_t>>> MegatronMicroBatches(int64_t total, int64_t consumed,
                                                                       int64_t micro_batch, int rank,
                                                                       int num_ranks, int64_t count) {
  if (micro_batch < 1 || num_ranks < 1 || rank < 0 || rank >= num_ranks) {
    return absl::InvalidArgumentError(absl::StrCat("MegatronMicroBatches: micro_batch ", micro_batch,
                                                   ", rank ", rank, " of ", num_ranks,
                                                   " is not a valid configuration"));
  }
  if (consumed < 0 || consumed > total) {
    return absl::InvalidArgumentError(
        absl::StrCat("MegatronMicroBatches: consumed_samples ", consumed, " is outside [0, ", total, "]"));
  }
  const int64_t global = micro_batch * num_ranks;
  std::vector<std::vector<int64_t>> out;
  for (int64_t g = consumed; g + global <= total && static_cast<int64_t>(out.size()) < count; g += global) {
    std::vector<int64_t> mine;
    for (int64_t i = 0; i < micro_batch; ++i) mine.push_back(g + rank * micro_batch + i);
    out.push_back(std::move(mine));
  }
  return out;
}

}  // namespace distlab::dataloader
