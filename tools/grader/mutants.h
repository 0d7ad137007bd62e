// The mutants of a lab as the gates and the grader read them: tests/<lab>/mutants/<stem>__<what>.diff.
//
// A mutant file is a unified diff (`diff -u`) of the solution file solutions/<lab>/<stem>.cc, preceded by a
// preamble of "key: value" lines that the diff tools ignore:
//   bug: what the mutant gets wrong, for the course staff (may name the fix)
//   kind: logic | convention   (convention: it breaks a rule the handout states; gate 4 wants a public test
//                               to catch it)
//   hint: one line for students: the kind of mistake, never the fix
// Unknown keys are errors, so a typo never silently drops a hint.
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
  std::string kind;
  std::string hint;
};

// The mutants in `dir` (tests/<lab>/mutants), sorted by file name. Throws std::runtime_error naming the file
// and line for a file name without "__" or a preamble line that is not a known "key: value".
std::vector<Mutant> ReadMutants(const std::string& dir);

}  // namespace distlab::grader

#endif  // DISTLAB_TOOLS_GRADER_MUTANTS_H_
