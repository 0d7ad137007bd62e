// What the course checkout declares about a lab, read the way labctl reads it: the labs by convention
// (labs/<lab>/lab.bzl) and the rest through Bazel (bazel query, build and info in the checkout), so the BUILD
// files stay the one place that says which files are a student's and which tests are graded.
#ifndef DISTLAB_TOOLS_GRADER_CHECKOUT_H_
#define DISTLAB_TOOLS_GRADER_CHECKOUT_H_

#include <map>
#include <string>
#include <vector>

namespace distlab::grader {

// The flags every bazel command of the grader takes (plain output for logs).
extern const std::vector<std::string> kBazelFlags;

// The labs of the checkout at `root`: the folders labs/<lab> that hold a lab.bzl, sorted.
std::vector<std::string> Labs(const std::string& root);

// `bazel query --noshow_progress EXPR` in `root`, one label per element; throws with Bazel's error.
std::vector<std::string> BazelQuery(const std::string& root, const std::string& expr);

// The lab's declared student-editable files (labels(srcs, //labs/<lab>:student_files)): file names.
std::vector<std::string> StudentFiles(const std::string& root, const std::string& lab);

// The student files of every lab in one query: lab -> file names.
std::map<std::string, std::vector<std::string>> StudentFilesOfLabs(const std::string& root,
                                                                   const std::vector<std::string>& labs);

// The earlier labs' files this lab links (labels(srcs, //labs/<lab>:prior_files); LAB.prior, often none):
// "<lab>/<file>".
std::vector<std::string> PriorFiles(const std::string& root, const std::string& lab);

// The lab's graded tests (targets tagged "graded" in tests/<lab>): target names, sorted.
std::vector<std::string> GradedTests(const std::string& root, const std::string& lab);

// `bazel [startup...] info --config=CONFIG bazel-bin` in `dir`; throws when it fails.
std::string BazelBin(const std::string& dir, const std::string& config,
                     const std::vector<std::string>& startup = {});

}  // namespace distlab::grader

#endif  // DISTLAB_TOOLS_GRADER_CHECKOUT_H_
