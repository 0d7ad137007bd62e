// runner: runs the cases of one or more GoogleTest binaries, each case alone under the grader's control, and
// decides each verdict itself (case_runner.h says what makes a case pass and how it is isolated).
//
//   runner --binary B --manifest M [--json OUT] [--binary B2 --manifest M2 --json OUT2 ...] [options]
//
// On top of the single case it adds what a whole grading needs:
//   - per-case timeouts from the solution's measured time for that case (--timings: the lab's committed
//     grading data), max(floor, multiple x time) with floor and multiple from the lab's limits (--limits),
//     else the manifest's timeout_s; --timeout caps them;
//   - a total time budget (--budget): when it is spent, running cases are ended and the rest are reported
//     "not run: grading time budget spent", and every report is still written;
//   - a submission that blocks before any test starts: once the first --blocked-after cases have all hung or
//     died before their case started (and none has started), every case left fails at once saying so;
//   - the grading seed (--seed N; seed.h): every case gets DISTLAB_GRADING_SEED=N in its clean environment,
//   and
//     each report records it;
//   - SIGTERM, SIGINT or SIGHUP (a platform's time limit, Ctrl-C): the running cases are ended, the rest are
//     reported "not run", the reports are written, and the runner exits with status 3;
//   - afterwards nothing is left: the runner is a child subreaper and kills every descendant, and when it ran
//     the cases as --user it kills every process of that user and removes that user's files from /tmp,
//     /var/tmp and /dev/shm.
// Progress: one line per case on stderr (--show); the last stdout line is "<passed> passed, <failed> failed,
// <skipped> skipped" over all binaries.
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/base/cli.h"
#include "tools/grader/case_runner.h"
#include "tools/grader/seed.h"
#include "tools/grader/sweep.h"

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
using namespace distlab::grader;

struct Options {
  std::vector<std::string> binaries, manifests, json_outs, labels, cases;
  double timeout_s = 0;  // cap on every case's timeout (0: none)
  double grace_s = 2;
  size_t output_cap = 10240;
  std::string user, workdir, limits_file, timings_file, init, isolation = "auto", seed;
  bool fail_fast = false;
  int jobs = 1;
  int blocked_after = 3;
  double budget_s = 0;  // 0: none
  std::string show = "all";
};

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  return json::parse(in);
}

Limits ReadLimits(const std::string& path) {
  Limits l;
  if (path.empty()) return l;
  json j = ReadJson(path);
  l.address_space_mb = j.value("address_space_mb", l.address_space_mb);
  l.processes = j.value("processes", l.processes);
  l.file_size_mb = j.value("file_size_mb", l.file_size_mb);
  l.open_files = j.value("open_files", l.open_files);
  l.cpu_seconds = j.value("cpu_seconds", l.cpu_seconds);
  l.tmpfs_mb = j.value("tmpfs_mb", l.tmpfs_mb);
  l.timeout_floor_s = j.value("timeout_floor_s", l.timeout_floor_s);
  l.timeout_multiple = j.value("timeout_multiple", l.timeout_multiple);
  return l;
}

// One binary and the cases expected of it.
struct Test {
  std::string binary, manifest, json_out, label, target;
  double manifest_timeout_s = 60;
  std::vector<size_t> cases;  // indices into the plan
};

struct PlannedCase {
  size_t test;
  CaseSpec spec;
  bool timed_from_solution = false;
};

// The signal that stopped the grading (0: none), set by the signal thread.
std::atomic<int> g_stop_signal{0};

void SignalThread(std::atomic<int>* cut, std::atomic<bool>* done) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, s);
  struct timespec tick = {0, 100 * 1000 * 1000};
  while (!done->load()) {
    int sig = ::sigtimedwait(&set, nullptr, &tick);
    if (sig > 0) {
      g_stop_signal = sig;
      *cut = static_cast<int>(Cause::kStopped);
    }
  }
}

std::string ExeDir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : p.parent_path().string();
}

json CaseJson(const CaseResult& r) {
  json c = {{"name", r.name},
            {"status", StatusName(r.status)},
            {"cause", CauseName(r.cause)},
            {"reason", r.reason},
            {"reached_main", r.reached_main},
            {"started", r.started},
            {"record", r.record},
            {"exit_code", r.exit_code},
            {"signal", r.signal},
            {"timed_out", r.timed_out},
            {"seconds", r.seconds},
            {"timeout_s", r.timeout_s},
            {"vm_peak_mb", r.vm_peak_mb},
            {"tasks_peak", r.tasks_peak},
            {"left_running", r.left_running}};
  // Output may be invalid UTF-8: stored as text with invalid bytes replaced, never rejected.
  c["output"] = json::parse(json(r.output).dump(-1, ' ', false, json::error_handler_t::replace));
  return c;
}

// A mistake in the command line or in a file it names: main prints it and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void AddOptions(distlab::cli::App& app, Options& opt) {
  app.add_option("--binary", opt.binaries, "a test binary (repeatable, one --manifest each)")->required();
  app.add_option("--manifest", opt.manifests, "its graded test's manifest (expected cases, timeout)");
  app.add_option("--json", opt.json_outs, "where to write its report (one per --binary)");
  app.add_option("--label", opt.labels,
                 "its name in progress lines (one per --binary; default: the file name)");
  app.add_option("--case", opt.cases,
                 "an expected case (repeatable; with one --binary; adds to its manifest's)");
  app.add_option("--timeout", opt.timeout_s, "cap on every case's timeout in seconds");
  app.add_option("--grace", opt.grace_s, "seconds past the in-process watchdog before a case is killed");
  app.add_option("--output-cap", opt.output_cap, "bytes of output kept per case");
  app.add_option("--user", opt.user, "when root, run the cases as this user");
  app.add_option("--workdir", opt.workdir, "the cases' working directory (default: the runfiles tree)");
  app.add_option("--limits", opt.limits_file, "the lab's per-case resource limits (JSON)");
  app.add_option("--timings", opt.timings_file,
                 "the lab's grading data: the solution's time per case (JSON)");
  app.add_option("--init", opt.init, "the case_init binary (default: next to this one)");
  app.add_option("--isolation", opt.isolation, "auto | namespaces | subreaper")
      ->check(distlab::cli::IsMember({"auto", "namespaces", "subreaper"}));
  app.add_flag("--fail-fast", opt.fail_fast, "stop at the first case that does not pass");
  app.add_option("--jobs", opt.jobs, "cases run at the same time")->check(distlab::cli::Range(1, 64));
  app.add_option("--budget", opt.budget_s, "total seconds for all cases (0: no budget)");
  app.add_option("--blocked-after", opt.blocked_after,
                 "cases that hang or die before starting, with none started, that end the grading");
  app.add_option("--seed", opt.seed, "the grading seed: DISTLAB_GRADING_SEED of every case (default: unset)");
  app.add_option("--show", opt.show, "which cases get a progress line")
      ->check(distlab::cli::IsMember({"all", "failed", "passed", "none"}));
}

// The counts of repeated options must line up: one manifest (and report, and label) per binary.
void CheckCounts(const Options& opt) {
  const auto counts = [&](const char* what, size_t n) {
    return std::string("give one --") + what + " per --binary (" + std::to_string(opt.binaries.size()) +
           " binaries, " + std::to_string(n) + " --" + what + ")";
  };
  if (opt.manifests.size() != opt.binaries.size() && !(opt.manifests.empty() && opt.binaries.size() == 1)) {
    throw UsageError(counts("manifest", opt.manifests.size()));
  }
  if (!opt.json_outs.empty() && opt.json_outs.size() != opt.binaries.size()) {
    throw UsageError(counts("json", opt.json_outs.size()));
  }
  if (!opt.cases.empty() && opt.binaries.size() != 1) throw UsageError("--case needs exactly one --binary");
}

// Binary i of the command line, its manifest read: the cases expected of it, their default timeout.
Test ReadTest(const Options& opt, size_t i, std::vector<std::string>* names) {
  Test t;
  t.binary = opt.binaries[i];
  if (t.binary[0] != '/') t.binary = std::filesystem::absolute(t.binary).string();
  t.manifest = opt.manifests.empty() ? "" : opt.manifests[i];
  t.json_out = opt.json_outs.empty() ? "" : opt.json_outs[i];
  t.label = i < opt.labels.size() ? opt.labels[i] : t.binary.substr(t.binary.rfind('/') + 1);
  if (!t.manifest.empty()) {
    try {
      json m = ReadJson(t.manifest);
      for (auto& [c, pts] : m.at("cases").items()) names->push_back(c);
      t.manifest_timeout_s = m.value("timeout_s", 60.0);
      const std::string target = m.value("target", std::string());
      t.target = target.substr(target.rfind(':') + 1);
    } catch (const std::exception& e) {
      throw UsageError("bad manifest " + t.manifest + ": " + e.what());
    }
  }
  for (const auto& c : opt.cases) names->push_back(c);
  if (names->empty()) throw UsageError("no expected cases for " + t.binary + " (give --manifest or --case)");
  return t;
}

// The plan: every expected case of every binary, in order, each with its limits and its timeout:
// max(floor, multiple x the solution's recorded time) where grading data has the case, else the manifest's;
// --timeout caps it.
void PlanCases(const Options& opt, const Limits& limits, const json& timings, std::vector<Test>* tests,
               std::vector<PlannedCase>* plan) {
  for (size_t i = 0; i < opt.binaries.size(); ++i) {
    std::vector<std::string> names;
    Test t = ReadTest(opt, i, &names);
    std::string workdir = opt.workdir;
    if (workdir.empty()) {
      struct stat st;
      const std::string rf = t.binary + ".runfiles/distlab";
      workdir = ::stat(rf.c_str(), &st) == 0 ? rf : t.binary.substr(0, t.binary.rfind('/'));
    }
    const json& per_test = timings.value(t.target, json::object());
    for (const auto& name : names) {
      PlannedCase pc;
      pc.test = tests->size();
      pc.spec.binary = t.binary;
      pc.spec.workdir = workdir;
      pc.spec.name = name;
      pc.spec.limits = limits;
      pc.spec.timeout_s = t.manifest_timeout_s;
      if (per_test.contains(name)) {
        pc.spec.timeout_s =
            std::max(limits.timeout_floor_s, limits.timeout_multiple * per_test[name].get<double>());
        pc.timed_from_solution = true;
      }
      if (opt.timeout_s > 0) pc.spec.timeout_s = std::min(pc.spec.timeout_s, opt.timeout_s);
      t.cases.push_back(plan->size());
      plan->push_back(pc);
    }
    tests->push_back(t);
  }
}

// How the cases run: the init binary, the user they run as, the isolation (namespaces where the kernel lets
// the runner make them, else a subreaper; *isolation_reason says which and why), a private /tmp root.
Environment MakeEnvironment(const Options& opt, std::string* isolation_reason) {
  Environment env;
  env.case_init = opt.init.empty() ? ExeDir() + "/case_init" : opt.init;
  env.output_cap = opt.output_cap;
  env.grace_s = opt.grace_s;
  env.keep_env = {"DISTLAB_TIMEOUT_SCALE", "DISTLAB_SANITIZER", "ASAN_OPTIONS",        "UBSAN_OPTIONS",
                  "TSAN_OPTIONS",          "DISTLAB_BACKEND",   "CUDA_VISIBLE_DEVICES"};
  if (!opt.seed.empty()) {
    const std::optional<uint64_t> seed = ParseSeed(opt.seed);
    if (!seed) throw UsageError("--seed wants a whole number from 0 to " + std::to_string(kMaxSeed));
    env.grading_seed = std::to_string(*seed);
  }
  if (::access(env.case_init.c_str(), X_OK) != 0) {
    throw UsageError("no case_init at " + env.case_init + " (give --init)");
  }
  if (!opt.user.empty() && ::geteuid() == 0) {
    struct passwd* pw = ::getpwnam(opt.user.c_str());
    if (pw == nullptr) throw UsageError("no such user " + opt.user + " (./labctl setup creates it)");
    env.drop = true;
    env.uid = pw->pw_uid;
    env.gid = pw->pw_gid;
  } else if (!opt.user.empty()) {
    std::fprintf(stderr, "runner: not root, so the cases run as the current user (not %s)\n",
                 opt.user.c_str());
  }
  if (opt.isolation == "subreaper") {
    *isolation_reason = "asked for (--isolation subreaper)";
  } else if (NamespacesWork(env.case_init, isolation_reason)) {
    env.isolation = Isolation::kNamespaces;
    *isolation_reason = "PID, network, mount, IPC and UTS namespaces per case";
  } else if (opt.isolation == "namespaces") {
    throw UsageError("--isolation namespaces, but they do not work here: " + *isolation_reason);
  }
  char tmpl[] = "/tmp/distlab-runner.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw UsageError(std::string("mkdtemp: ") + std::strerror(errno));
  env.tmp_root = tmpl;
  ::chmod(env.tmp_root.c_str(), 0711);
  return env;
}

// Why a case is not run at all, or nullopt: it runs. In order: an earlier failure under --fail-fast, a stop
// from outside or the spent budget, a submission that blocks before any test starts.
std::optional<CaseResult> NotRun(const std::string& name, const Options& opt, bool fail_fast_stop, int cut,
                                 bool budget_spent, bool blocked) {
  CaseResult r;
  r.name = name;
  if (fail_fast_stop) {
    r.status = Status::kNotRun;
    r.reason = "not run (fail-fast)";
  } else if (cut != 0 || budget_spent) {
    r.status = Status::kNotRun;
    r.cause = cut != 0 ? static_cast<Cause>(cut) : Cause::kBudget;
    r.reason = r.cause == Cause::kBudget ? "not run: grading time budget spent"
                                         : "not run: the grading was stopped from outside";
  } else if (blocked) {
    r.status = Status::kFailed;
    r.cause = Cause::kBlocked;
    r.reason = "not run: the submission blocks before the first test starts (" +
               std::to_string(opt.blocked_after) +
               " cases hung or died before starting); look at static initializers and global objects";
  } else {
    return std::nullopt;
  }
  return r;
}

// Runs the plan on --jobs threads and returns one result per planned case, printing a progress line for each
// case --show asks for.
std::vector<CaseResult> RunPlan(const Options& opt, const std::vector<Test>& tests,
                                const std::vector<PlannedCase>& plan, const Environment& env,
                                const std::atomic<int>& cut, Clock::time_point deadline) {
  std::vector<CaseResult> results(plan.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> stop_fail_fast{false};
  std::mutex mu;  // guards the blocked-detection counters and progress lines
  int unstarted = 0, started_any = 0;
  bool blocked = false;
  auto worker = [&] {
    for (size_t i = next.fetch_add(1); i < plan.size(); i = next.fetch_add(1)) {
      const CaseSpec& spec = plan[i].spec;
      bool is_blocked;
      {
        std::lock_guard<std::mutex> lock(mu);
        is_blocked = blocked;
      }
      std::optional<CaseResult> not_run =
          NotRun(spec.name, opt, stop_fail_fast.load(), cut.load(), Clock::now() >= deadline, is_blocked);
      CaseResult r = not_run ? std::move(*not_run) : RunCase(spec, env, cut, deadline);
      r.timeout_s = spec.timeout_s;
      std::lock_guard<std::mutex> lock(mu);
      if (r.started) ++started_any;
      if (!r.started && r.status == Status::kFailed && r.cause != Cause::kBlocked &&
          r.cause != Cause::kRunner) {
        ++unstarted;
        if (opt.blocked_after > 0 && started_any == 0 && unstarted >= opt.blocked_after) blocked = true;
      }
      if (r.status == Status::kFailed && opt.fail_fast) stop_fail_fast = true;
      const std::string status = StatusName(r.status);
      if (opt.show == "all" || opt.show == status) {
        std::fprintf(stderr, "  %-7s %s %s  (%.1f s of %.0f)%s%s\n", status.c_str(),
                     tests[plan[i].test].label.c_str(), spec.name.c_str(), r.seconds, spec.timeout_s,
                     r.reason.empty() ? "" : ": ", r.reason.c_str());
      }
      results[i] = std::move(r);
    }
  };
  std::vector<std::thread> threads;
  for (int j = 0; j < opt.jobs; ++j) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  return results;
}

// What the sweep after the cases found and removed.
struct Leftovers {
  int processes = 0;
  std::vector<std::string> files;
};

// Nothing of the grading may outlive it: every descendant, and when the cases ran as --user every process
// and every temporary file of that user, and the private /tmp root.
Leftovers SweepAfterCases(const Environment& env) {
  Leftovers left;
  left.processes = KillDescendants();
  if (env.drop) {
    left.processes += KillProcessesOfUser(env.uid);
    left.files = RemoveFilesOfUser(env.uid, {"/tmp", "/var/tmp", "/dev/shm"});
  }
  std::error_code ec;
  std::filesystem::remove_all(env.tmp_root, ec);
  return left;
}

// Writes each binary's report (where --json asked for one) and returns the counts over all binaries.
std::array<int, 3> WriteReports(const Options& opt, const std::vector<Test>& tests,
                                const std::vector<PlannedCase>& plan, const std::vector<CaseResult>& results,
                                const Environment& env, const std::string& isolation_reason,
                                const Leftovers& left) {
  std::array<int, 3> total = {0, 0, 0};  // passed, failed, skipped
  for (const Test& t : tests) {
    int tp = 0, tf = 0, ts = 0, tn = 0;
    json cases = json::array();
    for (size_t i : t.cases) {
      const CaseResult& r = results[i];
      tp += r.status == Status::kPassed;
      tf += r.status == Status::kFailed;
      ts += r.status == Status::kSkipped;
      tn += r.status == Status::kNotRun;
      cases.push_back(CaseJson(r));
      cases.back()["timed_from_solution"] = plan[i].timed_from_solution;
    }
    total[0] += tp;
    total[1] += tf;
    total[2] += ts;
    json report = {{"binary", t.binary},
                   {"manifest", t.manifest},
                   {"isolation", env.isolation == Isolation::kNamespaces ? "namespaces" : "subreaper"},
                   {"isolation_reason", isolation_reason},
                   {"user", env.drop ? opt.user : std::string()},
                   {"seed", env.grading_seed},
                   {"passed", tp},
                   {"failed", tf},
                   {"skipped", ts},
                   {"not_run", tn},
                   {"stopped_by_signal", g_stop_signal.load()},
                   {"swept_processes", left.processes},
                   {"swept_files", left.files},
                   {"cases", cases}};
    if (!t.json_out.empty()) {
      std::ofstream f(t.json_out);
      f << report.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    }
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  distlab::cli::App app{"Runs each case of GoogleTest binaries alone, isolated, and decides its verdict."};
  AddOptions(app, opt);
  DISTLAB_CLI_PARSE(app, argc, argv);
  const auto t0 = Clock::now();

  // SIGTERM/SIGINT/SIGHUP go to the signal thread only (blocked here, before any thread exists).
  sigset_t stop_set;
  sigemptyset(&stop_set);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&stop_set, s);
  ::pthread_sigmask(SIG_BLOCK, &stop_set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  std::vector<Test> tests;
  std::vector<PlannedCase> plan;
  Environment env;
  std::string isolation_reason;
  try {
    CheckCounts(opt);
    const Limits limits = ReadLimits(opt.limits_file);
    json timings = json::object();
    if (!opt.timings_file.empty()) timings = ReadJson(opt.timings_file).value("timings", json::object());
    PlanCases(opt, limits, timings, &tests, &plan);
    env = MakeEnvironment(opt, &isolation_reason);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "runner: %s\n", e.what());
    return 2;
  }

  std::atomic<int> cut{0};
  std::atomic<bool> signals_done{false};
  std::thread signal_thread(SignalThread, &cut, &signals_done);
  const auto deadline = opt.budget_s > 0
                            ? t0 + std::chrono::milliseconds(static_cast<long long>(opt.budget_s * 1000))
                            : Clock::time_point::max();
  const std::vector<CaseResult> results = RunPlan(opt, tests, plan, env, cut, deadline);
  const Leftovers left = SweepAfterCases(env);
  signals_done = true;
  signal_thread.join();

  const auto [passed, failed, skipped] = WriteReports(opt, tests, plan, results, env, isolation_reason, left);
  if (left.processes > 0 || !left.files.empty()) {
    std::fprintf(stderr, "runner: swept %d leftover process(es) and %zu file(s) after the cases\n",
                 left.processes, left.files.size());
  }
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  std::fflush(stdout);
  return g_stop_signal.load() != 0 ? 3 : 0;
}
