// tests/<lab>/grading.json: what the gates measured about a lab, committed so that a hosted grader has it
// without running the solution or any mutant at grade time.
//
//   {"lab": L, "inputs": H,                      H: a hash of the lab's sources (InputsHash)
//    "seed": S,                                  the grading seed the timings and signatures were measured
//                                                under (1, the seed of a plain bazel test; absent: 1)
//    "timings": {test: {case: seconds}},         the solution's time per graded case (per-case timeouts)
//    "signatures": {mutant: {"inputs": H_m,      H_m: H and the mutant's diff
//                            "tests": {test: [failed case, ...]}}}}   every test that grades its piece
//
// `./labctl check-tests LAB` rewrites what is stale (gates refresh); the gates check it is fresh (gates lab).
#ifndef DISTLAB_TOOLS_GRADER_GRADING_DATA_H_
#define DISTLAB_TOOLS_GRADER_GRADING_DATA_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tools/grader/hints.h"

namespace distlab::grader {

struct MutantSignature {
  std::string inputs;
  CaseSets tests;
};

struct GradingData {
  std::string lab;
  std::string inputs;
  uint64_t seed = 1;
  std::map<std::string, std::map<std::string, double>> timings;
  std::map<std::string, MutantSignature> signatures;  // by <stem>__<what>
};

// Throws std::runtime_error naming the file when it cannot be read or parsed.
GradingData ReadGradingData(const std::string& path);
void WriteGradingData(const std::string& path, const GradingData& data);

// A hash (hex) of the files a lab's signatures and timings depend on: the lab's headers (labs/<lab>/*.h), its
// solution (solutions/<lab>/*) and its hidden tests (tests/<lab>/*, without grading.json and mutants/),
// read under `root`. With `mutant_diff`, the hash of those and that mutant's diff.
std::string InputsHash(const std::string& root, const std::string& lab, const std::string& mutant_diff = "");

}  // namespace distlab::grader

#endif  // DISTLAB_TOOLS_GRADER_GRADING_DATA_H_
