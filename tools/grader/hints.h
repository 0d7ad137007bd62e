// "Name the likely mistake": matching a submission's failures against the mutants' recorded signatures.
//
// A mutant's signature is the set of graded cases it fails on each graded test that grades its piece
// (recorded by the gates into tests/<lab>/grading.json; an empty set where it fails none of a test's cases).
// A submission matches a mutant when, over the tests of that signature that were graded, the cases it fails
// -- leaving out the ones that fail because a function is still a stub (their output names a TODO) -- overlap
// the signature closely: Jaccard similarity |F & S| / |F | S| of at least kHintThreshold. The best matches
// come first (similarity, then the larger signature, then the mutant's name), one per distinct hint.
#ifndef DISTLAB_TOOLS_GRADER_HINTS_H_
#define DISTLAB_TOOLS_GRADER_HINTS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

namespace distlab::grader {

inline constexpr double kHintThreshold = 0.5;
inline constexpr size_t kMaxHints = 3;

// test -> cases
using CaseSets = std::map<std::string, std::set<std::string>>;

struct Signature {
  std::string mutant;  // <stem>__<what>
  std::string hint;
  CaseSets failing;  // every test that grades the mutant's piece, with the cases the mutant fails there
};

struct HintMatch {
  std::string mutant, hint;
  double similarity = 0;
  std::set<std::pair<std::string, std::string>>
      cases;  // (test, case) the submission fails that the mutant does
};

// `failing`: the submission's failed cases per graded test, TODO failures already left out; `graded`: the
// tests that were graded (a test absent from it does not count against a signature).
std::vector<HintMatch> MatchHints(const std::vector<Signature>& signatures, const CaseSets& failing,
                                  const std::set<std::string>& graded);

}  // namespace distlab::grader

#endif  // DISTLAB_TOOLS_GRADER_HINTS_H_
