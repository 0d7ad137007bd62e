// Lab 3 (dedup), given; not graded: a generated corpus with planted near-duplicates at controlled similarity,
// for tests, the demo and the benchmark of Lab 3. Part of the course's test fixtures, not of the student's
// work.
//
// Each original is a random sequence of made-up words. Each near-duplicate starts as a copy of its original
// and receives edits -- a word replaced, a word inserted, two blocks of words swapped (reordering) -- until
// the exact Jaccard of the word n-gram sets first drops to the drawn target or below (each edit moves it by
// about n / words). Documents are then rendered with surface noise that normalization must undo: capitals,
// accented vowels, punctuation, runs of spaces and line breaks.
#ifndef DISTLAB_LABS_DEDUP_SYNTHETIC_H_
#define DISTLAB_LABS_DEDUP_SYNTHETIC_H_

#include <cstdint>
#include <string>
#include <vector>

namespace distlab::dedup::synthetic {

struct PlantedOptions {
  int originals = 100;      // independent documents
  int max_copies = 3;       // each original gets 0..max_copies near-duplicates (uniform)
  int words = 300;          // words per original
  int vocabulary = 4000;    // distinct made-up words
  double min_target = 0.5;  // near-duplicate target Jaccard drawn uniformly in [min_target, max_target]
  double max_target = 1.0;
  int ngram = 5;      // the n the targets refer to
  bool noise = true;  // surface noise (capitals, accents, punctuation, spacing)
  uint64_t seed = 7;
};

struct PlantedCorpus {
  std::vector<std::string> documents;  // originals and copies, shuffled
  std::vector<int> origin;             // [documents]: index of the original this document came from
  std::vector<double> target;          // [documents]: target Jaccard to its original (1 for originals)
  std::vector<std::vector<std::string>> words;  // [documents]: the canonical (normalized) words
};

PlantedCorpus MakePlantedCorpus(const PlantedOptions& options);

// Exact Jaccard of the word n-gram sets of two canonical word lists (independent of the lab's code; short
// lists give one shingle of all their words, as in the lab).
double WordJaccard(const std::vector<std::string>& a, const std::vector<std::string>& b, int n);

// The made-up words RandomText and MakePlantedCorpus draw from: `size` distinct words of 2 to 4 syllables,
// lowercase ASCII, the same for the same seed.
std::vector<std::string> Vocabulary(int size, uint64_t seed);

// A random made-up text of `words` words (canonical form, no noise) -- for throughput measurements.
std::string RandomText(int words, uint64_t seed, int vocabulary = 4000);

}  // namespace distlab::dedup::synthetic

#endif  // DISTLAB_LABS_DEDUP_SYNTHETIC_H_
