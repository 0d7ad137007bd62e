// Lab 3 (dedup), given; not graded: the planted-duplicate corpus generator (see synthetic.h).
#include "labs/dedup/synthetic.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <unordered_set>

namespace distlab::dedup::synthetic {

namespace {

std::vector<std::string> MakeVocabulary(int size, std::mt19937_64& rng) {
  static const char* kSyllables[] = {"ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zi", "pa", "do", "fe",
                                     "gu", "hi", "ja", "be", "co", "ta", "le", "mo", "ni", "su", "ro", "ve"};
  constexpr int kCount = sizeof(kSyllables) / sizeof(kSyllables[0]);
  std::unordered_set<std::string> seen;
  std::vector<std::string> vocab;
  std::uniform_int_distribution<int> syllables(2, 4), pick(0, kCount - 1);
  while (static_cast<int>(vocab.size()) < size) {
    std::string w;
    for (int s = syllables(rng); s > 0; --s) w += kSyllables[pick(rng)];
    if (seen.insert(w).second) vocab.push_back(w);
  }
  return vocab;
}

std::unordered_set<std::string> Shingles(const std::vector<std::string>& words, int n) {
  std::unordered_set<std::string> out;
  if (words.empty()) return out;
  const size_t len = std::min<size_t>(n, words.size());
  for (size_t i = 0; i + len <= words.size(); ++i) {
    std::string s = words[i];
    for (size_t j = 1; j < len; ++j) s += ' ' + words[i + j];
    out.insert(std::move(s));
  }
  return out;
}

std::string Render(const std::vector<std::string>& words, bool noise, std::mt19937_64& rng) {
  std::string out;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += noise && u(rng) < 0.05 ? (u(rng) < 0.5 ? "  " : "\n") : " ";
    std::string w = words[i];
    if (noise && u(rng) < 0.1) w[0] = static_cast<char>(w[0] - 'a' + 'A');
    if (noise && u(rng) < 0.1) {  // accented vowels: NFD + mark removal must bring them back
      std::string accented;
      for (char c : w) {
        if (c == 'e')
          accented += "\xC3\xA9";  // é
        else if (c == 'a')
          accented += "\xC3\xA0";  // à
        else if (c == 'o')
          accented += "\xC3\xB6";  // ö
        else
          accented += c;
      }
      w = accented;
    }
    out += w;
    if (noise && u(rng) < 0.08) out += u(rng) < 0.5 ? "," : ".";
  }
  return out;
}

}  // namespace

double WordJaccard(const std::vector<std::string>& a, const std::vector<std::string>& b, int n) {
  const auto sa = Shingles(a, n), sb = Shingles(b, n);
  if (sa.empty() && sb.empty()) return 1.0;
  size_t common = 0;
  for (const auto& s : sa) common += sb.count(s);
  return static_cast<double>(common) / static_cast<double>(sa.size() + sb.size() - common);
}

PlantedCorpus MakePlantedCorpus(const PlantedOptions& o) {
  std::mt19937_64 rng(o.seed);
  const std::vector<std::string> vocab = MakeVocabulary(o.vocabulary, rng);
  std::uniform_int_distribution<int> word(0, o.vocabulary - 1), copies(0, o.max_copies);
  std::uniform_real_distribution<double> target(o.min_target, o.max_target), u(0.0, 1.0);

  std::vector<std::vector<std::string>> words;
  std::vector<int> origin;
  std::vector<double> targets;
  for (int d = 0; d < o.originals; ++d) {
    std::vector<std::string> original(o.words);
    for (auto& w : original) w = vocab[word(rng)];
    const auto base = Shingles(original, o.ngram);
    const int c = copies(rng);
    words.push_back(original), origin.push_back(d), targets.push_back(1.0);
    for (int k = 0; k < c; ++k) {
      const double t = target(rng);
      std::vector<std::string> copy = original;
      auto similarity = [&] {
        const auto sc = Shingles(copy, o.ngram);
        size_t common = 0;
        for (const auto& s : sc) common += base.count(s);
        return static_cast<double>(common) / static_cast<double>(base.size() + sc.size() - common);
      };
      while (similarity() > t) {
        const double op = u(rng);
        std::uniform_int_distribution<size_t> at(0, copy.size() - 1);
        if (op < 0.5) {
          copy[at(rng)] = vocab[word(rng)];  // edit
        } else if (op < 0.8) {
          copy.insert(copy.begin() + at(rng), vocab[word(rng)]);  // insertion
        } else {  // reordering: swap two non-overlapping blocks of 10 words
          if (copy.size() < 40) continue;
          std::uniform_int_distribution<size_t> pos(0, copy.size() / 2 - 10);
          const size_t x = pos(rng), y = copy.size() / 2 + pos(rng);
          std::swap_ranges(copy.begin() + x, copy.begin() + x + 10, copy.begin() + y);
        }
      }
      words.push_back(std::move(copy)), origin.push_back(d), targets.push_back(t);
    }
  }
  // Shuffle so that duplicates are not neighbours, then render with noise.
  std::vector<int> order(words.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  PlantedCorpus out;
  for (int i : order) {
    out.documents.push_back(Render(words[i], o.noise, rng));
    out.origin.push_back(origin[i]);
    out.target.push_back(targets[i]);
    out.words.push_back(words[i]);
  }
  return out;
}

std::vector<std::string> Vocabulary(int size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return MakeVocabulary(size, rng);
}

std::string RandomText(int words, uint64_t seed, int vocabulary) {
  std::mt19937_64 rng(seed);
  const std::vector<std::string> vocab = MakeVocabulary(vocabulary, rng);
  std::uniform_int_distribution<int> word(0, vocabulary - 1);
  std::string out;
  for (int i = 0; i < words; ++i) {
    if (i > 0) out += ' ';
    out += vocab[word(rng)];
  }
  return out;
}

}  // namespace distlab::dedup::synthetic
