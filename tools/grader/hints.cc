// Matching failures against mutant signatures (see hints.h).
#include "tools/grader/hints.h"

#include <algorithm>

namespace distlab::grader {

std::vector<HintMatch> MatchHints(const std::vector<Signature>& signatures, const CaseSets& failing,
                                  const std::set<std::string>& graded) {
  struct Scored {
    HintMatch m;
    size_t signature_size;
  };
  std::vector<Scored> scored;
  for (const Signature& sig : signatures) {
    std::set<std::pair<std::string, std::string>> f, s;
    for (const auto& [test, cases] : sig.failing) {
      if (!graded.count(test)) continue;
      for (const auto& c : cases) s.insert({test, c});
      auto it = failing.find(test);
      if (it != failing.end()) {
        for (const auto& c : it->second) f.insert({test, c});
      }
    }
    if (s.empty() || f.empty()) continue;
    HintMatch m{sig.mutant, sig.hint, 0, {}};
    std::set_intersection(f.begin(), f.end(), s.begin(), s.end(), std::inserter(m.cases, m.cases.begin()));
    const size_t uni = f.size() + s.size() - m.cases.size();
    m.similarity = static_cast<double>(m.cases.size()) / static_cast<double>(uni);
    if (m.cases.empty() || m.similarity < kHintThreshold) continue;
    scored.push_back({m, s.size()});
  }
  std::sort(scored.begin(), scored.end(), [](const Scored& a, const Scored& b) {
    if (a.m.similarity != b.m.similarity) return a.m.similarity > b.m.similarity;
    if (a.signature_size != b.signature_size) return a.signature_size > b.signature_size;
    return a.m.mutant < b.m.mutant;
  });
  std::vector<HintMatch> out;
  std::set<std::string> hints;
  for (const auto& s : scored) {
    if (out.size() >= kMaxHints) break;
    if (hints.insert(s.m.hint).second) out.push_back(s.m);
  }
  return out;
}

}  // namespace distlab::grader
