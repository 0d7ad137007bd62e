// Checking a lab under several grading seeds (see multiseed.h).
#include "tools/grader/multiseed.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

namespace distlab::grader {

std::vector<uint64_t> SeedList(const std::vector<uint64_t>& given, size_t count,
                               const std::function<uint64_t()>& fresh) {
  std::vector<uint64_t> out;
  std::set<uint64_t> seen;
  for (uint64_t s : given) {
    if (seen.insert(s).second) out.push_back(s);
  }
  if (out.empty()) {
    out.push_back(1);
    seen.insert(1);
  }
  // A fresh source that keeps repeating itself would loop for ever: give up after many repeats in a row.
  for (int repeats = 0; out.size() < count && repeats < 1000;) {
    const uint64_t s = fresh();
    if (seen.insert(s).second) {
      out.push_back(s);
      repeats = 0;
    } else {
      ++repeats;
    }
  }
  return out;
}

OwnHint MatchOwnHint(const std::vector<Signature>& sigs, const std::string& mutant, const CaseSets& failing,
                     const std::set<std::string>& graded) {
  OwnHint out;
  const Signature* own = nullptr;
  for (const Signature& s : sigs) {
    if (s.mutant == mutant) own = &s;
  }
  if (own == nullptr) return out;
  std::set<std::pair<std::string, std::string>> f, s;
  for (const auto& [test, cases] : own->failing) {
    if (!graded.count(test)) continue;
    for (const auto& c : cases) s.insert({test, c});
    auto it = failing.find(test);
    if (it != failing.end()) {
      for (const auto& c : it->second) f.insert({test, c});
    }
  }
  out.failed = f.size();
  size_t both = 0;
  for (const auto& x : f) both += s.count(x);
  const size_t either = f.size() + s.size() - both;
  out.own_similarity = either == 0 ? 0 : static_cast<double>(both) / static_cast<double>(either);
  const std::vector<HintMatch> m = MatchHints(sigs, failing, graded);
  if (!m.empty()) {
    out.first_mutant = m[0].mutant;
    out.first_similarity = m[0].similarity;
    out.first = m[0].hint == own->hint;
  }
  return out;
}

Fairness SummarizeFairness(const std::vector<CaseRun>& runs, uint64_t base_seed,
                           const std::vector<CaseRun>& reruns) {
  std::map<std::tuple<uint64_t, std::string, std::string>, const CaseRun*> again;
  for (const CaseRun& r : reruns) again[{r.seed, r.test, r.name}] = &r;
  Fairness out;
  std::map<std::pair<std::string, std::string>, CaseSpread> by_case;
  std::map<std::pair<std::string, std::string>, std::set<double>> timeouts;
  for (const CaseRun& r : runs) {
    if (r.status == "passed") {
      ++out.passed;
    } else if (r.status == "skipped") {
      ++out.skipped;
    } else {
      ++out.failed;
      out.failures.push_back(r);
      auto a = again.find({r.seed, r.test, r.name});
      if (a != again.end()) out.failures.back().again = a->second->status;
    }
    const auto key = std::make_pair(r.test, r.name);
    auto [it, fresh] = by_case.try_emplace(key);
    CaseSpread& c = it->second;
    if (fresh) {
      c.test = r.test;
      c.name = r.name;
      c.min_seconds = r.seconds;
    }
    if (fresh || r.seconds > c.max_seconds) {
      c.max_seconds = r.seconds;
      c.max_seed = r.seed;
    }
    c.min_seconds = std::min(c.min_seconds, r.seconds);
    if (r.seed == base_seed) c.base_seconds = r.seconds;
    c.timeout_s = std::max(c.timeout_s, r.timeout_s);
    timeouts[key].insert(r.timeout_s);
  }
  std::sort(out.failures.begin(), out.failures.end(), [](const CaseRun& a, const CaseRun& b) {
    return std::tie(a.seed, a.test, a.name) < std::tie(b.seed, b.test, b.name);
  });
  for (auto& [key, c] : by_case) {
    c.timeout_varies = timeouts[key].size() > 1;
    out.varying_timeouts += c.timeout_varies;
    auto a = again.find({c.max_seed, c.test, c.name});
    if (a != again.end()) c.rerun_seconds = a->second->seconds;
    out.tight += c.tight();
    out.spreads.push_back(c);
  }
  std::stable_sort(out.spreads.begin(), out.spreads.end(),
                   [](const CaseSpread& a, const CaseSpread& b) { return a.share() > b.share(); });
  return out;
}

std::string FirstLineOf(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace distlab::grader
