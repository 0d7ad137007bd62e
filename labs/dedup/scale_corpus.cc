// Lab 3 (dedup), given; not graded: the scale corpus and its truth (see scale_corpus.h).
#include "labs/dedup/scale_corpus.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "labs/dedup/minhash.h"
#include "labs/dedup/synthetic.h"
#include "xxhash.h"

namespace distlab::dedup::scale {

namespace {

// A random stream for one purpose and one entity: SplitMix64 from a state mixed out of the arguments.
class Rng {
 public:
  Rng(uint64_t seed, uint64_t purpose, uint64_t a, uint64_t b = 0) {
    state_ = seed;
    state_ = SplitMix64Next(state_) ^ purpose;
    state_ = SplitMix64Next(state_) ^ a;
    state_ = SplitMix64Next(state_) ^ b;
  }
  uint64_t Next() { return SplitMix64Next(state_); }
  uint64_t Below(uint64_t n) {  // uniform in [0, n) (Lemire's multiply-shift; bias < n / 2^64)
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)

 private:
  uint64_t state_;
};

enum Purpose : uint64_t { kLayout = 1, kPermute, kOriginal, kCopy, kRender };

// Exact Jaccard of two sorted, repeat-free sets: |A ∩ B| / (|A| + |B| - |A ∩ B|), counted by one merge.
double SetJaccard(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  size_t common = 0;
  for (auto x = a.begin(), y = b.begin(); x != a.end() && y != b.end();) {
    if (*x == *y) {
      ++common, ++x, ++y;
    } else if (*x < *y) {
      ++x;
    } else {
      ++y;
    }
  }
  const size_t all = a.size() + b.size() - common;
  return all == 0 ? 1.0 : static_cast<double>(common) / static_cast<double>(all);
}

}  // namespace

absl::StatusOr<ScaleCorpus> ScaleCorpus::Create(const ScaleOptions& o) {
  auto bad = [](auto... what) { return absl::InvalidArgumentError(absl::StrCat(what...)); };
  if (o.documents < 1) return bad("documents = ", o.documents, ": need at least 1");
  if (o.ngram < 1) return bad("ngram = ", o.ngram, ": need at least 1");
  if (o.words < o.ngram) return bad("words = ", o.words, ": need at least ngram = ", o.ngram);
  if (o.vocabulary < 16 || o.vocabulary > 65535)
    return bad("vocabulary = ", o.vocabulary, ": need 16..65535");
  if (!(o.duplicated >= 0 && o.duplicated <= 1)) return bad("duplicated = ", o.duplicated, ": need [0, 1]");
  if (o.max_copies < 1) return bad("max_copies = ", o.max_copies, ": need at least 1");
  if (!(o.min_target > 0 && o.min_target <= o.max_target && o.max_target <= 1)) {
    return bad("targets [", o.min_target, ", ", o.max_target, "]: need 0 < min <= max <= 1");
  }
  ScaleCorpus c;
  c.options_ = o;
  while ((1 << c.bits_) < o.vocabulary) ++c.bits_;
  while ((int64_t{1} << (2 * c.half_bits_)) < o.documents) ++c.half_bits_;
  // The layout: family sizes, one after another, until they cover N (the last one is cut).
  Rng layout(o.seed, kLayout, 0);
  c.starts_.push_back(0);
  while (c.starts_.back() < o.documents) {
    const bool copies = layout.Unit() < o.duplicated;
    const int64_t size = 1 + (copies ? 1 + static_cast<int64_t>(layout.Below(o.max_copies)) : 0);
    c.starts_.push_back(std::min(c.starts_.back() + size, o.documents));
  }
  // Each word in its four renderings: plain, first letter capital, vowels accented (NFD and dropping the
  // marks bring them back), both.
  for (const std::string& w : synthetic::Vocabulary(o.vocabulary, o.seed)) {
    std::string accented;
    for (char ch : w) {
      accented += ch == 'e'   ? "\xC3\xA9"
                  : ch == 'a' ? "\xC3\xA0"
                  : ch == 'o' ? "\xC3\xB6"
                              : std::string(1, ch);
    }
    std::string cap = w, cap_accented = accented;
    cap[0] = static_cast<char>(cap[0] - 'a' + 'A');
    if (cap_accented[0] >= 'a' && cap_accented[0] <= 'z') {
      cap_accented[0] = static_cast<char>(cap_accented[0] - 'a' + 'A');
    }
    c.forms_.insert(c.forms_.end(), {w, cap, accented, cap_accented});
  }
  return c;
}

// A bijection of [0, 2^(2h)) (a four-round Feistel network), walked until it lands below N: a permutation of
// [0, N) that needs no table.
ScaleCorpus::Slot ScaleCorpus::SlotOf(int64_t p) const {
  const uint64_t mask = (uint64_t{1} << half_bits_) - 1;
  uint64_t x = static_cast<uint64_t>(p);
  do {
    uint64_t left = x >> half_bits_, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = Rng(options_.seed, kPermute, round, right).Next() & mask;
      const uint64_t next = left ^ f;
      left = right, right = next;
    }
    x = (left << half_bits_) | right;
  } while (x >= static_cast<uint64_t>(options_.documents));
  const int64_t slot = static_cast<int64_t>(x);
  const auto it = std::upper_bound(starts_.begin(), starts_.end(), slot) - 1;
  return {static_cast<int64_t>(it - starts_.begin()), static_cast<int>(slot - *it)};
}

int64_t ScaleCorpus::Family(int64_t p) const { return SlotOf(p).family; }

double ScaleCorpus::Target(int64_t p) const {
  const Slot s = SlotOf(p);
  if (s.member == 0) return 1.0;
  Rng rng(options_.seed, kCopy, s.family, s.member);
  return options_.min_target + (options_.max_target - options_.min_target) * rng.Unit();
}

std::vector<uint16_t> ScaleCorpus::Original(int64_t family) const {
  Rng rng(options_.seed, kOriginal, family);
  std::vector<uint16_t> words(options_.words);
  for (uint16_t& w : words) w = static_cast<uint16_t>(rng.Below(options_.vocabulary));
  return words;
}

std::vector<uint64_t> ScaleCorpus::NgramSet(const std::vector<uint16_t>& words) const {
  const size_t n = std::min<size_t>(options_.ngram, words.size());
  std::vector<uint64_t> set;
  if (words.empty()) return set;
  set.reserve(words.size() - n + 1);
  for (size_t i = 0; i + n <= words.size(); ++i) {
    if (ngrams_exact()) {
      uint64_t packed = 0;
      for (size_t k = 0; k < n; ++k) packed = (packed << bits_) | words[i + k];
      set.push_back(packed);
    } else {
      set.push_back(XXH3_64bits(&words[i], n * sizeof(uint16_t)));
    }
  }
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  return set;
}

// Edits until the exact Jaccard first drops to the target or below. Each edit moves J by about 2n/|set|, so
// the loop applies half the edits the distance left asks for, then checks: a few checks per copy.
std::vector<uint16_t> ScaleCorpus::Copy(int64_t family, int member) const {
  Rng rng(options_.seed, kCopy, family, member);
  const double target = options_.min_target + (options_.max_target - options_.min_target) * rng.Unit();
  const std::vector<uint16_t> original = Original(family);
  const std::vector<uint64_t> base = NgramSet(original);
  std::vector<uint16_t> copy = original;
  const double step = 2.0 * options_.ngram / static_cast<double>(base.size());
  for (double j = 1.0; j > target; j = SetJaccard(base, NgramSet(copy))) {
    const int edits = std::max(1, static_cast<int>((j - target) / step / 2));
    for (int e = 0; e < edits; ++e) {
      const double op = rng.Unit();
      const size_t at = rng.Below(copy.size());
      if (op < 0.5) {
        copy[at] = static_cast<uint16_t>(rng.Below(options_.vocabulary));
      } else if (op < 0.8) {
        copy.insert(copy.begin() + at, static_cast<uint16_t>(rng.Below(options_.vocabulary)));
      } else if (copy.size() >= 40) {  // swap two non-overlapping blocks of 10 words
        const size_t half = copy.size() / 2;
        const size_t x = rng.Below(half - 9), y = half + rng.Below(half - 9);
        std::swap_ranges(copy.begin() + x, copy.begin() + x + 10, copy.begin() + y);
      }
    }
  }
  return copy;
}

std::vector<uint16_t> ScaleCorpus::Words(int64_t p) const {
  const Slot s = SlotOf(p);
  return s.member == 0 ? Original(s.family) : Copy(s.family, s.member);
}

// Per word one random draw, cut into four 16-bit chances: a separator that is two spaces or a line break
// (5 %), a capital (10 %), accents (10 %), a comma or full stop after it (8 %).
void ScaleCorpus::Render(int64_t p, const std::vector<uint16_t>& words, bool json, std::string& out) const {
  Rng rng(options_.seed, kRender, p);
  constexpr uint64_t kP5 = 3277, kP8 = 5243, kP10 = 6554;  // probabilities times 2^16
  for (size_t i = 0; i < words.size(); ++i) {
    const uint64_t r = options_.noise ? rng.Next() : ~uint64_t{0};
    if (i > 0) {
      if ((r & 0xFFFF) < kP5) {
        out += (r & 0x10000000000000) ? "  " : json ? "\\n" : "\n";
      } else {
        out += ' ';
      }
    }
    const int form = (((r >> 16) & 0xFFFF) < kP10 ? 1 : 0) + (((r >> 32) & 0xFFFF) < kP10 ? 2 : 0);
    out += forms_[4 * words[i] + form];
    if (((r >> 48) & 0xFFFF) < kP8) out += (r & 0x20000000000000) ? ',' : '.';
  }
}

std::string ScaleCorpus::Text(int64_t p) const {
  std::string out;
  Render(p, Words(p), /*json=*/false, out);
  return out;
}

void ScaleCorpus::AppendJsonLine(int64_t p, std::string& out) const {
  absl::StrAppend(&out, "{\"id\": ", p, ", \"text\": \"");
  Render(p, Words(p), /*json=*/true, out);  // the forms need no escaping: letters, UTF-8, ',', '.'
  out += "\"}\n";
}

std::vector<TruePair> TruePairs(const ScaleCorpus& corpus, double threshold, int threads) {
  const int64_t n = corpus.size();
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::vector<uint64_t>> sets(n);
  {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (int64_t p = t; p < n; p += threads) sets[p] = corpus.NgramSet(corpus.Words(p));
      });
    }
    for (auto& th : pool) th.join();
  }
  // Prefix filtering. The fixed order is that of a bijective mix of the n-gram (SplitMix64's finalizer), so
  // prefixes are random n-grams, not the ones with the smallest first word.
  auto mix = [](uint64_t x) {
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
  };
  std::vector<std::pair<uint64_t, int64_t>> postings;
  std::vector<uint64_t> order;
  for (int64_t p = 0; p < n; ++p) {
    order.clear();
    for (uint64_t x : sets[p]) order.push_back(mix(x));
    std::sort(order.begin(), order.end());
    const int64_t size = static_cast<int64_t>(order.size());
    // ceil(t |A|), rounded down a hair so that floating point never shortens the prefix.
    const int64_t overlap = static_cast<int64_t>(std::ceil(threshold * size - 1e-9));
    const int64_t prefix = std::min(size, size - overlap + 1);
    for (int64_t k = 0; k < prefix; ++k) postings.emplace_back(order[k], p);
  }
  std::sort(postings.begin(), postings.end());
  std::vector<std::pair<int64_t, int64_t>> candidates;
  for (size_t a = 0; a < postings.size();) {
    size_t b = a;
    while (b < postings.size() && postings[b].first == postings[a].first) ++b;
    for (size_t x = a; x < b; ++x) {
      for (size_t y = x + 1; y < b; ++y) candidates.emplace_back(postings[x].second, postings[y].second);
    }
    a = b;
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  std::vector<TruePair> pairs;
  for (const auto& [i, j] : candidates) {
    const double jac = SetJaccard(sets[i], sets[j]);
    if (jac >= threshold) pairs.push_back({i, j, jac});
  }
  return pairs;
}

}  // namespace distlab::dedup::scale
