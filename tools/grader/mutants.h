// The mutants of a lab as the gates and the grader read them: tests/<lab>/mutants/<stem>__<what>.diff.
//
// A mutant file is a unified diff (`diff -u`) of the solution file solutions/<lab>/<stem>.cc, preceded by a
// preamble of "key: value" lines that the diff tools ignore. Every mutant has all three keys, once each:
//   bug: what the mutant gets wrong, for the course staff (may name the fix)
//   kind: logic | convention   (convention: it breaks a rule the handout states -- a message format, a
//                               rounding rule, an order of operations, a tie-break; gate 4 wants a public
//                               test to catch it)
//   hint: one line for students: the kind of mistake, never the fix (the grader shows it when a
//         submission's failures match the mutant's)
// The preamble ends at the diff's first "--- " (or "diff ", "@@") line. Blank lines in it are ignored;
// anything else -- an unknown key, a repeated key, an empty value, a line that is not "key: value" -- is an
// error, so a typo never silently drops a hint.
#ifndef DISTLAB_TOOLS_GRADER_MUTANTS_H_
#define DISTLAB_TOOLS_GRADER_MUTANTS_H_

#include <string>
#include <vector>

namespace distlab::grader {

struct Mutant {
  std::string stem;  // the solution file it replaces, without .cc ("ring")
  std::string what;  // the mistake's name ("remainder_lost")
  std::string path;  // the .diff file
  std::string bug;
  std::string kind;  // "logic" or "convention"
  std::string hint;
};

// The longest hint accepted: one line a student reads in a results page.
inline constexpr size_t kMaxHintLength = 200;

// The mutants in `dir` (tests/<lab>/mutants), sorted by file name; none when `dir` does not exist. Throws
// std::runtime_error listing every problem found (file:line: what is wrong), not only the first: a file name
// without "__", a preamble line that is not a known "key: value", a key given twice, a missing or empty key,
// a kind other than logic/convention, a hint longer than kMaxHintLength.
std::vector<Mutant> ReadMutants(const std::string& dir);

// One mutant file, with the same checks; `problems` collects them instead of throwing.
Mutant ReadMutant(const std::string& path, std::vector<std::string>* problems);

}  // namespace distlab::grader

#endif  // DISTLAB_TOOLS_GRADER_MUTANTS_H_
