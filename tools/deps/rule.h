// The dependency rule between the repository's top-level folders (docs/design.md §1), as data and two
// checks: one over the #include lines of a C++ file, one over an edge of the Bazel target graph.
//
// Allowed (besides a folder depending on itself; "everything" includes reference):
//   everything -> tools, third_party
//   labs -> reference        solutions, tests, demos -> labs, reference
//   tools -> third_party only
// Two edges into solutions/ are the build's own switches, allowed for Bazel targets only (never for an
// #include): //labs/<lab>:impl selects //solutions/<lab>:impl under --config=solution, and the gates' mutant
// targets in tests/<lab> (mutant_src_<m>, impl_mutant_<m>) take one solution file and link the others.
// Paths outside these folders (the system's and libraries' headers, external repositories "@...") are not
// checked.
#ifndef DISTLAB_TOOLS_DEPS_RULE_H_
#define DISTLAB_TOOLS_DEPS_RULE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace distlab::deps {

// The top-level folder a repository path or a label "//folder/...:name" is in, when it is one the rule
// knows (labs, solutions, tests, demos, reference, tools, third_party); otherwise nullopt.
std::optional<std::string> Folder(std::string_view path_or_label);

// Whether code in folder `from` may depend on code in folder `to` (both known folders).
bool Allowed(const std::string& from, const std::string& to);

// The folders `from` may depend on, for messages ("labs, reference, third_party, tools").
std::string AllowedList(const std::string& from);

struct Violation {
  std::string where;  // "labs/x/y.cc:12" or "//labs/x:y"
  std::string edge;   // "labs -> solutions (#include \"solutions/x/y.h\")"
};

// The #include "..." lines of `text`, the contents of repository file `path`, that break the rule.
std::vector<Violation> CheckIncludes(const std::string& path, const std::string& text);

// The first line of a lab's header or starter file (labs/<lab>/*.h and *.cc, not its tests), when it breaks
// the handout's one format (docs/design.md §1):
//   // Lab <N> (<lab>), stage <S>: <what the file is>          a piece the student writes (or its interface)
//   // Lab <N> (<lab>), stages <S> and <T>: ...                 one file for two stages
//   // Lab <N> (<lab>), given; not graded: <what it is>         a file the student must not edit
// where <lab> is the file's own folder and a stage may carry a remark in parentheses ("stage D (stretch):").
std::optional<Violation> CheckFirstLine(const std::string& path, const std::string& text);

// One edge "from -> to" of `bazel query --output=graph --nograph:factored`, when it breaks the rule.
std::optional<Violation> CheckEdge(const std::string& from, const std::string& to);

// The edges of a graph written by `bazel query --output=graph --nograph:factored` (lines "a" -> "b").
std::vector<std::pair<std::string, std::string>> ParseGraph(const std::string& text);

}  // namespace distlab::deps

#endif  // DISTLAB_TOOLS_DEPS_RULE_H_
