// Running the programs a grading is made of (bazel, the runner, the report, the symbol rules) from the
// grader's own programs (grade.cc, selfcheck.cc): fork and exec with the stop signals back at their defaults
// and an empty signal mask, output to files, an optional deadline, and a stop from outside passed on to the
// child.
#ifndef DISTLAB_TOOLS_GRADER_PROCESS_H_
#define DISTLAB_TOOLS_GRADER_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <string>
#include <vector>

namespace distlab::grader {

// Where a child's stdout or stderr goes.
struct Sink {
  enum Kind { kInherit, kNull, kStdout, kStderr, kFile } kind = kInherit;
  std::string path;  // kFile: appended to, created when missing
  static Sink Inherit() { return {}; }
  static Sink Null() { return {kNull, ""}; }
  static Sink ToStdout() { return {kStdout, ""}; }  // this process's stdout
  static Sink ToStderr() { return {kStderr, ""}; }  // this process's stderr
  static Sink File(std::string p) { return {kFile, std::move(p)}; }
};

struct Command {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  std::string cwd;                // "" = this process's
  Sink out, err;
  bool new_session = false;  // setsid(): its own session and process group
};

// The stop flag of a program that handles SIGTERM, SIGINT and SIGHUP itself: InstallStopHandlers makes each
// of them set it to the signal's number (the first one wins). Wait polls it.
extern volatile std::sig_atomic_t g_stop_signal;
void InstallStopHandlers();

struct WaitOptions {
  // When it passes, the child gets `timeout_signal`, then SIGKILL `kill_after_s` later.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  int timeout_signal = SIGTERM;
  // When g_stop_signal is set while the child runs, the child gets `stop_signal` once (0: nothing).
  int stop_signal = 0;
  double kill_after_s = 5;
  // Called once, when the stop is passed on to the child.
  std::function<void()> on_stop;
};

struct Exit {
  int status = 0;          // as a shell's $?: the exit code, or 128 + the signal that ended it
  bool timed_out = false;  // ended because the deadline passed
};

// Starts the command; -1 with `error` set when it cannot. The child has SIGTERM, SIGINT, SIGHUP and SIGPIPE
// at their default actions and no signal blocked, whatever this process does with them.
pid_t Start(const Command& c, std::string* error);

// Waits for a started child (see WaitOptions).
Exit Wait(pid_t pid, const WaitOptions& w = {});

// Start and Wait; a command that cannot start exits 127 (its error on stderr).
Exit Run(const Command& c, const WaitOptions& w = {});

// Runs the command and returns its stdout (c.out is ignored); *status gets its exit status.
std::string Capture(const Command& c, int* status, const WaitOptions& w = {});

// The folder of this program (/proc/self/exe), where labctl puts the grader's other programs.
std::string ExeDir();

// The whole file, or "" when it cannot be read.
std::string ReadFile(const std::string& path);

}  // namespace distlab::grader

#endif  // DISTLAB_TOOLS_GRADER_PROCESS_H_
