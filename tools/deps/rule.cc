#include "tools/deps/rule.h"

#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace distlab::deps {
namespace {

// Besides itself, tools and third_party (which every folder may use), each folder may depend on these.
const std::map<std::string, std::set<std::string>>& Table() {
  static const auto* table = new std::map<std::string, std::set<std::string>>{
      {"third_party", {}},
      {"tools", {}},
      {"reference", {}},
      {"labs", {"reference"}},
      {"solutions", {"labs", "reference"}},
      {"tests", {"labs", "reference"}},
      {"demos", {"labs", "reference"}},
  };
  return *table;
}

// "//labs/moe:impl" -> ("labs/moe", "impl"); a label without ':' names the package's own target.
std::pair<std::string, std::string> Split(const std::string& label) {
  std::string rest = label.substr(2);
  const size_t colon = rest.find(':');
  if (colon == std::string::npos) return {rest, rest.substr(rest.rfind('/') + 1)};
  return {rest.substr(0, colon), rest.substr(colon + 1)};
}

bool StartsWith(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

std::optional<std::string> Folder(std::string_view path_or_label) {
  std::string_view p = path_or_label;
  if (p.substr(0, 1) == "@") return std::nullopt;
  if (p.substr(0, 2) == "//") p.remove_prefix(2);
  const size_t end = p.find_first_of("/:");
  const std::string top(p.substr(0, end));
  if (Table().count(top) == 0) return std::nullopt;
  return top;
}

bool Allowed(const std::string& from, const std::string& to) {
  if (from == to || to == "third_party") return true;
  if (to == "tools") return from != "third_party";
  auto it = Table().find(from);
  return it != Table().end() && it->second.count(to) > 0;
}

std::string AllowedList(const std::string& from) {
  std::set<std::string> all = {from, "third_party"};
  if (from != "third_party") all.insert("tools");
  auto it = Table().find(from);
  if (it != Table().end()) all.insert(it->second.begin(), it->second.end());
  std::string out;
  for (const std::string& f : all) out += (out.empty() ? "" : ", ") + f;
  return out;
}

std::vector<Violation> CheckIncludes(const std::string& path, const std::string& text) {
  std::vector<Violation> out;
  const std::optional<std::string> from = Folder(path);
  if (!from) return out;
  static const std::regex kInclude(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::smatch m;
    if (!std::regex_search(line, m, kInclude)) continue;
    const std::string target = m[1];
    const std::optional<std::string> to = Folder(target);
    if (!to || Allowed(*from, *to)) continue;
    out.push_back({path + ":" + std::to_string(number), *from + " -> " + *to + " (#include \"" + target +
                                                            "\"; " + *from + " may include only " +
                                                            AllowedList(*from) + ")"});
  }
  return out;
}

std::optional<Violation> CheckFirstLine(const std::string& path, const std::string& text) {
  static const std::regex kPath(R"re(^labs/([a-z0-9_]+)/[^/]+\.(h|cc)$)re");
  std::smatch p;
  if (!std::regex_match(path, p, kPath)) return std::nullopt;
  if (path.size() > 8 && path.compare(path.size() - 8, 8, "_test.cc") == 0) return std::nullopt;
  const std::string lab = p[1];
  const std::string first = text.substr(0, text.find('\n'));
  static const std::regex kLine(
      R"re(^// Lab [0-9]+ \(([a-z0-9_]+)\), (stages? [A-Z]((, [A-Z])* and [A-Z])?( \([^)]*\))?|given; not graded): \S.*)re");
  std::smatch m;
  if (std::regex_match(first, m, kLine) && m[1] == lab) return std::nullopt;
  return Violation{path + ":1", "first line \"" + first.substr(0, 60) + (first.size() > 60 ? "..." : "") +
                                    "\" is not \"// Lab <N> (" + lab +
                                    "), stage <S>: ...\" or \"// Lab <N> (" + lab +
                                    "), given; not graded: ...\""};
}

std::optional<Violation> CheckEdge(const std::string& from, const std::string& to) {
  if (!StartsWith(from, "//") || !StartsWith(to, "//")) return std::nullopt;  // external repositories
  const std::optional<std::string> a = Folder(from), b = Folder(to);
  if (!a || !b || Allowed(*a, *b)) return std::nullopt;
  const auto [from_pkg, from_name] = Split(from);
  const auto [to_pkg, to_name] = Split(to);
  if (*b == "solutions") {
    const std::string lab = to_pkg.substr(std::string("solutions/").size());
    // The :impl switch of --config=solution.
    if (from_pkg == "labs/" + lab && from_name == "impl" && to_name == "impl") return std::nullopt;
    // The gates' mutant targets: one solution file mutated, linked with the lab's other solution parts.
    if (from_pkg == "tests/" + lab &&
        (StartsWith(from_name, "mutant_src_") || StartsWith(from_name, "impl_mutant_")))
      return std::nullopt;
  }
  return Violation{from, *a + " -> " + *b + " (depends on " + to + "; " + *a + " may depend only on " +
                             AllowedList(*a) + ")"};
}

std::vector<std::pair<std::string, std::string>> ParseGraph(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> edges;
  static const std::regex kEdge(R"re(^\s*"([^"]+)"\s*->\s*"([^"]+)")re");
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, kEdge)) edges.emplace_back(m[1], m[2]);
  }
  return edges;
}

}  // namespace distlab::deps
