// One graded case, run alone and judged by the grader (the runner's core; runner.cc schedules the cases).
//
// A case passes only when all of these hold:
//   1. the test process sent "<key> PASS <case>" over the record pipe -- tools/testing/gtest_main.cc writes
//   it
//      from a GoogleTest listener after the case ended; <key> is a random number the runner makes for this
//      case alone and hands over in a way the harness removes before any student code runs;
//   2. nothing else arrived on the record pipe (a line without the key is a forgery attempt: the case fails);
//   3. the test process exited normally with status 0 (a FAIL record followed by an atexit hook that rewrites
//      the status still fails: FAIL wins, and PASS needs both);
//   4. the case is one the caller expected (its manifest), so extra cases a binary adds score nothing.
// stdout, stderr and XML files are never read for the verdict; the output is kept (capped) for the report and
// read only to explain a failure (the first assertion message, the watchdog's line, a failed allocation).
//
// Each case runs under case_init (case_init.cc): in fresh PID, network and mount namespaces when the runner
// is root and the kernel allows them (everything the case starts dies with it; no network; private /tmp and
// /dev/shm), else as a child subreaper that kills every descendant when the case ends. Resource limits
// (address space, processes, file size, open files, CPU seconds) are set on the test process; a case that
// runs into one fails naming it.
#ifndef DISTLAB_TOOLS_GRADER_CASE_RUNNER_H_
#define DISTLAB_TOOLS_GRADER_CASE_RUNNER_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

namespace distlab::grader {

enum class Status { kPassed, kFailed, kSkipped, kNotRun };

// Why a case did not pass (kNone when it did).
enum class Cause {
  kNone,
  kAssertion,   // the case ran and failed (FAIL record)
  kTimeout,     // killed after its timeout
  kWatchdog,    // the in-process watchdog ended it (its line names what was stuck)
  kCrash,       // killed by a signal
  kLimit,       // ran into a resource limit (the reason names it)
  kExitStatus,  // exited non-zero without a verdict
  kNoVerdict,   // exited 0 without a verdict
  kTampered,    // the record pipe received lines the harness did not write
  kBlocked,     // not run: the submission blocks before the first test starts
  kBudget,      // not run or cut: the grading time budget was spent
  kStopped,     // not run or cut: the grading was stopped from outside (a signal)
  kRunner,      // the runner itself could not run it
};

const char* StatusName(Status s);  // passed | failed | skipped | not_run
const char* CauseName(Cause c);    // assertion | timeout | ...

struct Limits {
  long long address_space_mb = 0;  // 0: no limit
  long long processes = 0;         // tasks (processes and threads) of the grading user
  long long file_size_mb = 0;
  long long open_files = 0;
  long long cpu_seconds = 0;
  long long tmpfs_mb = 512;    // size of each private /tmp, /var/tmp, /dev/shm (namespaces mode)
  double timeout_floor_s = 5;  // per-case timeout = max(floor, multiple x solution's time)
  double timeout_multiple = 10;
};

enum class Isolation { kNamespaces, kSubreaper };

// What every case of a grading shares.
struct Environment {
  Isolation isolation = Isolation::kSubreaper;
  std::string case_init;  // path of the case_init binary
  bool drop = false;      // run the test process as uid/gid (the runner is root)
  uid_t uid = 0;
  gid_t gid = 0;
  std::string tmp_root;  // per-case temporary directories (subreaper mode)
  size_t output_cap = 10240;
  double grace_s = 2;                 // after the in-process watchdog's deadline, before the case is killed
  std::vector<std::string> keep_env;  // variables passed through from the runner's environment
  std::string grading_seed;           // DISTLAB_GRADING_SEED of every case (seed.h); "": not set
};

struct CaseSpec {
  std::string binary;
  std::string workdir;
  std::string name;  // Suite.Case
  double timeout_s = 60;
  Limits limits;
};

// What the record pipe said about one case.
struct Records {
  bool hello = false;    // the harness's main() ran
  bool started = false;  // the case started
  bool pass = false, fail = false, skip = false;
  int foreign = 0;  // lines without this case's key, or with it but malformed
};

// Parses the record pipe's bytes (complete lines only; a last line without '\n' counts as foreign).
Records ParseRecords(const std::string& bytes, const std::string& key, const std::string& name);

// Everything observed about one run of a case, before judging it.
struct Observation {
  Records records;
  bool timed_out = false;
  Cause cut = Cause::kNone;  // kBudget or kStopped when the run was cut short from outside
  bool reported = false;     // case_init wrote its status line
  std::string init_error;    // case_init's own failure
  int exit_code = -1;
  int signal = 0;
  double seconds = 0;
  double vm_peak_mb = 0;
  long long tasks_peak = 0;
  long long fds_peak = 0;
  double cpu_s = 0;
  int left_running = 0;  // processes the case left behind, killed when it ended
  std::string output;
};

struct CaseResult {
  std::string name;
  Status status = Status::kNotRun;
  Cause cause = Cause::kNone;
  std::string reason;         // why it did not pass, first line first
  bool reached_main = false;  // the harness's main() ran: the submission got past its static initializers
  bool started = false;       // the case itself started
  std::string record;         // PASS | FAIL | SKIP | "" (none)
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  double seconds = 0;
  double timeout_s = 0;
  double vm_peak_mb = 0;
  long long tasks_peak = 0;
  int left_running = 0;
  std::string output;
};

// Judges an observation (pure: the verdict rules above, and the words that explain a failure).
CaseResult Decide(const CaseSpec& spec, const Observation& obs);

// The first line a student should read about a failed case's output: the line naming a TODO when there is
// one, else the first line of the first assertion failure; "" when there is none.
std::string FailureExcerpt(const std::string& output);

// Runs one case and judges it. `cut` is polled while it runs: when it holds kBudget or kStopped, the case is
// ended and reported as cut. `deadline` also ends it (as kBudget).
CaseResult RunCase(const CaseSpec& spec, const Environment& env, const std::atomic<int>& cut,
                   std::chrono::steady_clock::time_point deadline);

// Whether cases can run in fresh namespaces here (root, and the kernel allows PID, network and mount
// namespaces and the mounts case_init makes); `reason` says why not.
bool NamespacesWork(const std::string& case_init, std::string* reason);

}  // namespace distlab::grader

#endif  // DISTLAB_TOOLS_GRADER_CASE_RUNNER_H_
