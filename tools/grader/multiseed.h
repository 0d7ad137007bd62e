// Checking a lab under several grading seeds (./labctl check-tests --seeds N, --hint-stability, --fairness K;
// docs/design.md §4): which seeds, whether a mutant still gets its own hint under a seed, and what the
// solution's runs under many seeds say about fairness.
//
// The hidden tests draw their inputs from the grading seed (seed.h), so the gates must hold under any seed:
// the solution passes, the stubs fail, every mutant dies, convention mutants fail a public case. The
// signatures of tests/<lab>/grading.json (the grader's hints) are measured under one seed
// (GradingData::seed, 1) and matched at grade time against failures under a fresh one; and each case's
// timeout, max(floor, multiple x the solution's recorded time), is fixed by that one measurement, so no draw
// may take a case near it.
#ifndef DISTLAB_TOOLS_GRADER_MULTISEED_H_
#define DISTLAB_TOOLS_GRADER_MULTISEED_H_

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "tools/grader/hints.h"

namespace distlab::grader {

// The seeds of a check: `given` in order without repeats, or the default seed 1 when none is given; then
// seeds from `fresh` (skipping repeats) until there are `count` of them (fewer given than count; count 0:
// just the given ones).
std::vector<uint64_t> SeedList(const std::vector<uint64_t>& given, size_t count,
                               const std::function<uint64_t()>& fresh);

// A mutant's failures under one seed, matched the way the grader matches a submission's (MatchHints).
struct OwnHint {
  bool first = false;        // its own hint comes first (the hint text: mutants may share one)
  std::string first_mutant;  // whose signature gave the first hint ("" when none matched)
  double first_similarity = 0;
  double own_similarity = 0;  // Jaccard of its failures and its own signature over the graded tests
  size_t failed = 0;          // its failed cases on the graded tests of its signature
};

// `mutant` names one of `sigs` (<stem>__<what>); `failing` holds its failed cases per test (TODO failures
// already left out); `graded` the tests graded. A mutant without a signature never gets its hint first.
OwnHint MatchOwnHint(const std::vector<Signature>& sigs, const std::string& mutant, const CaseSets& failing,
                     const std::set<std::string>& graded);

// One graded case of the solution under one seed, as the grader's runner judged it.
struct CaseRun {
  uint64_t seed = 0;
  std::string test, name, status;  // status: passed | failed | skipped | not_run
  double seconds = 0, timeout_s = 0;
  std::string reason;  // why it did not pass (the runner's reason, first line first)
  std::string again;   // a failed run's status when run again alone ("": not run again)
};

// A case is tight when some seed took more than this share of its timeout: the grader's multiple of the
// solution's time is there for a slower or busier machine, not for a larger draw.
inline constexpr double kTightShare = 0.5;

// A case over every seed: its largest time and the timeout the runner gave it.
struct CaseSpread {
  std::string test, name;
  double max_seconds = 0, min_seconds = 0;
  uint64_t max_seed = 0;
  double timeout_s = 0;         // the largest the runner gave it
  double base_seconds = -1;     // its time under the base seed (the one its timeout was measured under;
                                // -1: not run under it)
  bool timeout_varies = false;  // the runner gave it different timeouts under different seeds
  double rerun_seconds = -1;    // its time when run again alone under max_seed (-1: not run again)
  double share() const { return timeout_s > 0 ? max_seconds / timeout_s : 0; }
  // Over kTightShare, and again when run alone under the same seed: a busy machine slows one run, a large
  // draw every run.
  bool tight() const {
    return share() > kTightShare && (rerun_seconds < 0 || rerun_seconds > kTightShare * timeout_s);
  }
};

struct Fairness {
  int passed = 0, failed = 0, skipped = 0;  // case runs (seed x case)
  std::vector<CaseRun> failures;            // every run that did not pass or skip, by seed, test, case
  std::vector<CaseSpread> spreads;          // per case, the largest share of its timeout first
  int tight = 0;                            // tight cases (CaseSpread::tight)
  int varying_timeouts = 0;                 // cases whose timeout changed with the seed
};

// `base_seed`: the seed tests/<lab>/grading.json was measured under (GradingData::seed), whose times set the
// timeouts; a case's largest time over the base seed's time in the same runs says how much a draw costs.
// `reruns`: runs of single cases again, alone, after the others (of failed runs, and of a case's slowest seed
// when it was over kTightShare): they set each failure's `again` and each case's rerun_seconds, and count in
// nothing else.
Fairness SummarizeFairness(const std::vector<CaseRun>& runs, uint64_t base_seed = 1,
                           const std::vector<CaseRun>& reruns = {});

// The first line of `text`.
std::string FirstLineOf(const std::string& text);

}  // namespace distlab::grader

#endif  // DISTLAB_TOOLS_GRADER_MULTISEED_H_
