// grade: grades one lab of one submission and writes Gradescope's results.json: the grading pipeline of
// docs/design.md §5 (tools/grader/README.md is its threat model). `./labctl grade` runs it after setup, with
// the grader's programs built beside it, the handout it made (make_handout, shared with the release) and the
// grading tree's place:
//
//   grade --root CHECKOUT --handout DIR --tree DIR [--user U] --submission DIR [--lab LAB] [--out
//   results.json]
//         [--budget S] [--seed N] [--visibility V] [--case-timeout S] [--only T,T] [--keep-server]
//
// In order:
//   1. the lab (given, or the one whose files DIR holds; a lab that links another's files wins over that
//   lab),
//      its graded tests, their manifests, its limits and the symbol rules of it and of the labs whose files
//      it links: from this checkout's own build (bazel query and build --config=solution in CHECKOUT);
//   2. what is taken: the lab's declared student files, DIR/labs/<lab>/x.cc before DIR/x.cc, and the earlier
//      labs' files it links (LAB.prior) the same way; regular files only (a symbolic link is never followed);
//      everything else in DIR is listed as ignored;
//   3. //tools/grader:scan refuses compile-time reads of other files before anything is built;
//   4. one grading at a time per machine (a lock beside the tree); the tree becomes the handout plus
//      tests/<lab> without its mutants plus the submission, copying only what changed, so its Bazel server
//      and cache stay warm;
//   5. the submission's objects are built first (--config=grading) and checked against the symbol rules
//      (//tools/grader:symbols); then the graded tests are built;
//   6. each built test binary is copied where the grading user can read it, and //tools/grader:runner runs
//   every
//      case alone and isolated (case_runner.h), as --user when this program runs as root, with the seed;
//   7. //tools/grader:report writes results.json.
// The seed (seed.h): --seed N, or a fresh one per grading; printed, passed to every case, recorded in
// results.json. The budget (--budget, default 540 s or DISTLAB_GRADE_BUDGET_S) counts from the moment the
// lock is held: each build gets what is left minus a reserve, the runner what is left minus the report's
// reserve, and cases not run in time are reported "not run". SIGTERM, SIGINT or SIGHUP: the running build or
// runner is stopped, results.json is written with what was graded, and the exit status is 128 + the signal
// (143, 130, 129). Otherwise the exit status is 0 whenever grading completed, whatever the score, and 1 when
// it could not grade (a bad command line, no such lab, the checkout's own build failing).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/base/cli.h"
#include "tools/grader/checkout.h"
#include "tools/grader/process.h"
#include "tools/grader/seed.h"

namespace {

namespace fs = std::filesystem;
using namespace distlab::grader;
using Clock = std::chrono::steady_clock;

// The default total time of one grading: the largest honest grading measured (dataloader, warm) takes about
// 70 s on 2 shared cores, and a hosted autograder (Gradescope) stops a run after 10 minutes by default.
// DISTLAB_GRADE_BUDGET_S replaces it (for a platform with another limit); --budget replaces both.
constexpr int kDefaultBudgetS = 540;

// What the output of a refused submission says before the findings of the scan or of the symbol rules.
constexpr char kScanRefusal[] =
    "\nREFUSED: the submission tries to pull files into the build that are not its own (.incbin, #embed,\n"
    "__has_include, or #include of hidden tests, solutions, absolute or ../ paths). Nothing was built "
    "or run.\n";
constexpr char kSymbolsRefusal[] =
    "\nREFUSED: the submission's compiled code uses or defines symbols this lab's code never needs. Nothing\n"
    "was linked or run. (A legitimate need: ask the course staff to widen the lab's list.)\n";

std::string DefaultBudget() {
  const char* s = std::getenv("DISTLAB_GRADE_BUDGET_S");
  return s != nullptr && *s != '\0' ? s : std::to_string(kDefaultBudgetS);
}

struct Options {
  std::string root, handout, tree, user, tools, submission, lab, out,
      visibility = "visible", case_timeout, only, seed, budget = DefaultBudget(), symbols = "enforce",
      jobs = "2";
  bool keep_server = false;
};

// A grading that cannot go on (a bad command line, no such lab, ...): main prints it and exits 1.
struct Fatal : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void Say(const std::string& what) { std::fprintf(stderr, "[labctl] %s\n", what.c_str()); }

std::string Join(const std::vector<std::string>& v, const std::string& sep = " ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, sep);) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

std::vector<std::string> Lines(const std::string& s) { return Split(s, '\n'); }

bool WholeNumber(const std::string& s) {
  return !s.empty() && s.size() < 10 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

const char* SignalName(int sig) { return sig == SIGINT ? "INT" : sig == SIGHUP ? "HUP" : "TERM"; }

// An absolute, normal path without a trailing slash (so paths under it compare by their text).
fs::path Clean(const fs::path& p) {
  fs::path c = fs::absolute(p).lexically_normal();
  return c.has_filename() || c == c.root_path() ? c : c.parent_path();
}

// A regular file (not a symbolic link) that lies inside `dir` however its path is resolved.
bool RegularFileInside(const fs::path& p, const fs::path& dir) {
  std::error_code ec;
  if (fs::symlink_status(p, ec).type() != fs::file_type::regular) return false;
  const std::string real = fs::canonical(p, ec).string();
  return !ec && real.rfind(dir.string() + "/", 0) == 0;
}

void WriteText(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) throw Fatal("cannot write " + path.string());
}

void CopyFile(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) throw Fatal("cannot copy " + from.string() + " to " + to.string() + ": " + ec.message());
}

// Copies a file or a folder, following symbolic links (as cp -rL), skipping what cannot be read.
void CopyFollowing(const fs::path& from, const fs::path& to, int depth = 0) {
  std::error_code ec;
  if (depth > 64) return;
  if (fs::is_directory(from, ec)) {
    fs::create_directories(to, ec);
    for (const auto& e : fs::directory_iterator(from, ec))
      CopyFollowing(e.path(), to / e.path().filename(), depth + 1);
  } else if (fs::is_regular_file(from, ec)) {
    fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  }
}

// chmod -R a+rX: everything readable by all, folders and executables enterable and runnable by all.
void MakeReadableByAll(const fs::path& root) {
  std::error_code ec;
  auto open_up = [](const fs::path& p) {
    std::error_code e;
    const fs::perms cur = fs::status(p, e).permissions();
    fs::perms add = fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read;
    if (fs::is_directory(p, e) ||
        (cur & (fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec)) != fs::perms::none) {
      add |= fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec;
    }
    fs::permissions(p, add, fs::perm_options::add, e);
  };
  open_up(root);
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    open_up(it->path());
  }
}

bool SameFile(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::symlink_status(b, ec).type() != fs::file_type::regular) return false;
  if (fs::file_size(a, ec) != fs::file_size(b, ec) || ec) return false;
  if (fs::status(a, ec).permissions() != fs::status(b, ec).permissions()) return false;
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  char ba[65536], bb[65536];
  while (fa && fb) {
    fa.read(ba, sizeof ba);
    fb.read(bb, sizeof bb);
    if (fa.gcount() != fb.gcount() || std::memcmp(ba, bb, static_cast<size_t>(fa.gcount())) != 0)
      return false;
  }
  return fa.eof() && fb.eof();
}

// Adds the regular files under `dir` to `want` as `prefix`/<relative path> (leaving out the top-level folders
// in `skip`).
void AddFiles(const fs::path& dir, const std::string& prefix, const std::set<std::string>& skip,
              std::map<std::string, fs::path>* want) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string rel = it->path().lexically_relative(dir).string();
    if (it.depth() == 0 && skip.count(rel)) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->symlink_status().type() == fs::file_type::regular) {
      (*want)[prefix.empty() ? rel : prefix + "/" + rel] = it->path();
    }
  }
}

// Makes `tree` hold exactly the files of `want` (relative path -> source), leaving its top-level bazel-*
// links alone and copying only the files whose content or mode differs, so its Bazel server sees only real
// changes.
void SyncTree(const std::map<std::string, fs::path>& want, const fs::path& tree) {
  std::error_code ec;
  fs::create_directories(tree, ec);
  std::set<std::string> dirs;
  for (const auto& [rel, src] : want) {
    for (fs::path p = fs::path(rel).parent_path(); !p.empty(); p = p.parent_path()) dirs.insert(p.string());
  }
  std::vector<fs::path> remove;
  for (auto it = fs::recursive_directory_iterator(tree, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string rel = it->path().lexically_relative(tree).string();
    const auto type = it->symlink_status().type();
    if (it.depth() == 0 && rel.rfind("bazel-", 0) == 0) {
      it.disable_recursion_pending();
      continue;
    }
    if (type == fs::file_type::directory) {
      if (!dirs.count(rel)) {
        remove.push_back(it->path());
        it.disable_recursion_pending();
      }
    } else if (type != fs::file_type::regular || !want.count(rel)) {
      remove.push_back(it->path());
    }
  }
  for (const auto& p : remove) fs::remove_all(p, ec);
  for (const auto& [rel, src] : want) {
    const fs::path dst = tree / rel;
    if (SameFile(src, dst)) continue;
    fs::remove_all(dst, ec);
    CopyFile(src, dst);
  }
}

class Grading {
 public:
  explicit Grading(Options o) : o_(std::move(o)) {}
  ~Grading() {
    std::error_code ec;
    if (!sandbox_.empty()) fs::remove_all(sandbox_, ec);
    if (!work_.empty()) fs::remove_all(work_, ec);
  }
  // Grades; returns the exit status. Throws Fatal when it cannot grade.
  int Run();

 private:
  // Seconds of the budget left, minus a reserve for what follows (at least 1).
  int Left(int reserve) const {
    const long long spent = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - t0_).count();
    return std::max(1LL, budget_ - spent - reserve);
  }
  long long Elapsed() const {
    return std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - t0_).count();
  }
  // Whether a stop signal has arrived (saying so once).
  bool Stopped() {
    if (g_stop_signal != 0 && !stop_said_) {
      stop_said_ = true;
      Say(std::string("grade: SIG") + SignalName(g_stop_signal) +
          " received: ending the running cases and writing results.json with what was graded");
    }
    return g_stop_signal != 0;
  }
  WaitOptions StopWith(int sig, double kill_after_s = 5) {
    WaitOptions w;
    w.stop_signal = sig;
    w.kill_after_s = kill_after_s;
    w.on_stop = [this] { Stopped(); };
    return w;
  }
  std::string Tool(const std::string& name) const { return tools_ + "/" + name; }

  int Steps();
  void Validate();
  void FindLab();
  void ReadManifests();
  void TakeFiles();
  std::string Scan();
  bool Lock();
  void PrepareTree();
  Exit BazelInTree(const std::vector<std::string>& args, int reserve);
  bool CheckSymbols(const std::string& gbin, int* finish_status);
  int RunCases(const std::string& gbin, const std::vector<std::string>& built,
               std::vector<std::string> extra);
  void Report(std::vector<std::string> extra);
  int Finish(std::vector<std::string> extra = {});

  Options o_;
  std::string tools_;
  fs::path root_, sub_, out_, work_, tree_, handout_;
  long long budget_ = kDefaultBudgetS;
  uint64_t seed_ = 0;
  Clock::time_point t0_ = Clock::now();
  bool stop_said_ = false, tree_used_ = false;
  int lock_fd_ = -1;
  std::string lab_, sandbox_, notes_;
  std::vector<std::string> graded_, files_, prior_, checked_labs_, taken_, report_args_;
};

void Grading::Validate() {
  std::error_code ec;
  if (o_.submission.empty() || !fs::is_directory(o_.submission, ec)) {
    throw Fatal("grade: --submission DIR is required and must be a directory");
  }
  if (!WholeNumber(o_.jobs) || std::stoi(o_.jobs) < 1 || std::stoi(o_.jobs) > 99) {
    throw Fatal("grade: --jobs wants a number from 1 to 99, not " + o_.jobs);
  }
  if (!WholeNumber(o_.budget) || std::stoll(o_.budget) <= 30) {
    throw Fatal("grade: --budget wants whole seconds above 30, not " + o_.budget);
  }
  budget_ = std::stoll(o_.budget);
  if (o_.seed.empty()) {
    seed_ = FreshSeed();
  } else if (const auto s = ParseSeed(o_.seed)) {
    seed_ = *s;
  } else {
    throw Fatal("grade: --seed wants a whole number from 0 to " + std::to_string(kMaxSeed) + ", not " +
                o_.seed);
  }
  root_ = Clean(o_.root.empty() ? "." : o_.root);
  sub_ = fs::canonical(o_.submission, ec);
  if (o_.handout.empty() || !fs::is_directory(o_.handout, ec))
    throw Fatal("grade: --handout DIR is required");
  if (o_.tree.empty()) throw Fatal("grade: --tree DIR is required");
  tree_ = Clean(o_.tree);
  handout_ = Clean(o_.handout);
  tools_ = o_.tools.empty() ? ExeDir() : o_.tools;
  for (const char* t : {"runner", "case_init", "report", "scan", "symbols", "summarize"}) {
    if (::access(Tool(t).c_str(), X_OK) != 0) {
      throw Fatal(std::string("grade: no ") + t + " in " + tools_ +
                  " (labctl builds the grader's programs there)");
    }
  }
  out_ = o_.out.empty() ? root_ / "out/results.json" : fs::absolute(o_.out);
  fs::create_directories(out_.parent_path(), ec);
  char tmpl[] = "/tmp/distlab-grade-work.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw Fatal("grade: mkdtemp failed");
  work_ = tmpl;
}

// Which lab: given, or the one whose files the submission holds.
void Grading::FindLab() {
  const std::vector<std::string> labs = Labs(root_);
  if (o_.lab.empty()) {
    const auto files_of = StudentFilesOfLabs(root_, labs);
    std::vector<std::string> cand;
    for (const auto& l : labs) {
      auto it = files_of.find(l);
      if (it == files_of.end()) continue;
      for (const auto& f : it->second) {
        if (RegularFileInside(sub_ / "labs" / l / f, sub_) || RegularFileInside(sub_ / f, sub_)) {
          cand.push_back(l);
          break;
        }
      }
    }
    if (cand.size() > 1) {  // a lab that links earlier labs' files wins over those labs
      std::map<std::string, std::vector<std::string>> prior_of;
      for (const auto& l : cand) prior_of[l] = PriorFiles(root_, l);
      std::vector<std::string> keep;
      for (const auto& c : cand) {
        bool covered = false;
        for (const auto& l : cand) {
          if (l == c) continue;
          for (const auto& p : prior_of[l]) covered = covered || p.rfind(c + "/", 0) == 0;
        }
        if (!covered) keep.push_back(c);
      }
      cand = keep;
    }
    if (cand.size() != 1) {
      throw Fatal("grade: cannot tell the lab from the files (candidates: " +
                  (cand.empty() ? "none" : Join(cand)) + "); give --lab");
    }
    o_.lab = cand[0];
  }
  lab_ = o_.lab;
  if (std::find(labs.begin(), labs.end(), lab_) == labs.end()) {
    throw Fatal("no lab '" + lab_ + "' (labs: " + Join(labs) + ")");
  }
  std::error_code ec;
  if (!fs::is_directory(root_ / "tests" / lab_, ec))
    throw Fatal("grade: lab " + lab_ + " has no hidden tests");
  Say("grade: lab " + lab_ + ", submission " + sub_.string() + ", budget " + std::to_string(budget_) +
      " s, seed " + std::to_string(seed_) + " (--seed " + std::to_string(seed_) +
      " grades again with the same inputs)");
}

// The expected cases and points, the limits and the symbol rules: this checkout's own build, copied out of
// it.
void Grading::ReadManifests() {
  graded_ = GradedTests(root_, lab_);
  if (!o_.only.empty()) {
    const std::vector<std::string> only = Split(o_.only, ',');
    for (const auto& t : only) {
      if (std::find(graded_.begin(), graded_.end(), t) == graded_.end()) {
        throw Fatal("grade: no graded test " + t + " in tests/" + lab_);
      }
    }
    graded_ = only;
  }
  files_ = StudentFiles(root_, lab_);
  prior_ = PriorFiles(root_, lab_);
  // The labs whose student objects are checked: this one and those whose files it links (LAB.prior).
  checked_labs_ = {lab_};
  std::set<std::string> prior_labs;
  for (const auto& p : prior_) prior_labs.insert(p.substr(0, p.find('/')));
  checked_labs_.insert(checked_labs_.end(), prior_labs.begin(), prior_labs.end());
  std::vector<std::string> targets = {"//tests/" + lab_ + ":limits"};
  for (const auto& pl : checked_labs_) {
    targets.push_back("//labs/" + pl + ":symbol_rules");
    targets.push_back("//solutions/" + pl + ":reference_symbols");
  }
  for (const auto& t : graded_) targets.push_back("//tests/" + lab_ + ":" + t + "_manifest");
  Command c;
  c.argv = {"bazel", "build"};
  c.argv.insert(c.argv.end(), kBazelFlags.begin(), kBazelFlags.end());
  c.argv.push_back("--config=solution");
  c.argv.insert(c.argv.end(), targets.begin(), targets.end());
  c.cwd = root_;
  c.out = c.err = Sink::File(work_ / "manifests.log");
  const int status = distlab::grader::Run(c, StopWith(SIGINT)).status;
  if (Stopped()) return;
  if (status != 0) {
    std::fputs(ReadFile(work_ / "manifests.log").c_str(), stderr);
    throw Fatal("grade: could not build the manifests");
  }
  const fs::path bin = BazelBin(root_, "solution");
  for (const auto& t : graded_) {
    CopyFile(bin / "tests" / lab_ / (t + ".manifest.json"), work_ / "manifests" / (t + ".manifest.json"));
  }
  CopyFile(bin / "tests" / lab_ / "limits.json", work_ / "limits.json");
  for (const auto& pl : checked_labs_) {
    CopyFile(bin / "labs" / pl / "symbol_rules.json", work_ / ("symbol_rules." + pl + ".json"));
    CopyFile(bin / "solutions" / pl / "reference_symbols.txt", work_ / ("reference_symbols." + pl + ".txt"));
  }
}

// The submission's files: the lab's own, and the earlier labs' files it links; the rest is listed as ignored.
void Grading::TakeFiles() {
  std::string missing;
  for (const auto& f : files_) {
    if (RegularFileInside(sub_ / "labs" / lab_ / f, sub_)) {
      CopyFile(sub_ / "labs" / lab_ / f, work_ / "submitted" / f);
      taken_.push_back("labs/" + lab_ + "/" + f);
    } else if (RegularFileInside(sub_ / f, sub_)) {
      CopyFile(sub_ / f, work_ / "submitted" / f);
      taken_.push_back(f);
    } else {
      missing += "not submitted: " + f + " (the starter stub is graded in its place)\n";
    }
  }
  for (const auto& pf : prior_) {
    const std::string f = pf.substr(pf.find('/') + 1);
    if (RegularFileInside(sub_ / "labs" / pf, sub_)) {
      CopyFile(sub_ / "labs" / pf, work_ / "prior" / pf);
      taken_.push_back("labs/" + pf);
    } else if (RegularFileInside(sub_ / f, sub_)) {
      CopyFile(sub_ / f, work_ / "prior" / pf);
      taken_.push_back(f);
    } else {
      missing += "not submitted: labs/" + pf +
                 " (an earlier lab's file this lab links; its starter stub is linked instead)\n";
    }
  }
  std::vector<std::string> all, links;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(sub_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const auto type = it->symlink_status().type();
    if (type == fs::file_type::directory) continue;
    const std::string rel = it->path().lexically_relative(sub_).string();
    if (std::find(taken_.begin(), taken_.end(), rel) != taken_.end()) continue;
    (type == fs::file_type::symlink ? links : all).push_back(rel);
  }
  std::sort(all.begin(), all.end());
  std::sort(links.begin(), links.end());
  notes_ = missing + "Graded files: " + (taken_.empty() ? "none" : Join(taken_)) + "\n";
  if (!all.empty()) notes_ += "Ignored (not student-editable files of lab " + lab_ + "): " + Join(all) + "\n";
  if (!links.empty()) notes_ += "Ignored (symbolic links are never followed): " + Join(links) + "\n";
  WriteText(work_ / "notes.txt", notes_);
  std::fputs(notes_.c_str(), stderr);

  report_args_ = {"--lab",        lab_,
                  "--visibility", o_.visibility,
                  "--out",        out_.string(),
                  "--notes",      (work_ / "notes.txt").string(),
                  "--mutants",    (root_ / "tests" / lab_ / "mutants").string()};
  if (fs::is_regular_file(root_ / "tests" / lab_ / "grading.json", ec)) {
    report_args_.insert(report_args_.end(),
                        {"--grading", (root_ / "tests" / lab_ / "grading.json").string()});
  }
  for (const auto& t : graded_) {
    report_args_.push_back("--test");
    report_args_.push_back((work_ / "manifests" / (t + ".manifest.json")).string() + "=" +
                           (work_ / (t + ".result.json")).string());
  }
}

// Compile-time reads of hidden sources: what //tools/grader:scan flags ("" when nothing).
std::string Grading::Scan() {
  std::string flagged;
  auto scan = [&](const fs::path& dir) {
    std::vector<std::string> names;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_regular_file()) names.push_back(it->path().lexically_relative(dir).string());
    }
    if (names.empty()) return;
    std::sort(names.begin(), names.end());
    Command c;
    c.argv = {Tool("scan")};
    c.argv.insert(c.argv.end(), names.begin(), names.end());
    c.cwd = dir;
    int status = 0;
    flagged += Capture(c, &status);
  };
  scan(work_ / "submitted");
  scan(work_ / "prior");
  return flagged;
}

// One grading at a time per machine: the tree and its Bazel output base are shared. False when stopped.
bool Grading::Lock() {
  const fs::path dir = tree_.parent_path();
  std::error_code ec;
  fs::create_directories(dir, ec);
  ::chmod(dir.c_str(), 0700);
  const std::string lock = (dir / ".lock").string();
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) throw Fatal("grade: cannot open " + lock);
  const auto give_up = Clock::now() + std::chrono::hours(1);
  while (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (Stopped()) return false;
    if (Clock::now() >= give_up) throw Fatal("grade: another grading holds " + lock);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  t0_ = Clock::now();  // the budget counts from here: waiting for another grading is not this one's time
  return true;
}

// The grading tree: the handout + tests/<lab> without mutants + the submission.
void Grading::PrepareTree() {
  std::map<std::string, fs::path> want;
  AddFiles(handout_, "", {}, &want);
  AddFiles(root_ / "tests" / lab_, "tests/" + lab_, {"mutants"}, &want);
  std::error_code ec;
  for (auto it = fs::directory_iterator(work_ / "submitted", ec); !ec && it != fs::directory_iterator();
       ++it) {
    want["labs/" + lab_ + "/" + it->path().filename().string()] = it->path();
  }
  for (const auto& pf : prior_) {
    if (fs::is_regular_file(work_ / "prior" / pf, ec)) want["labs/" + pf] = work_ / "prior" / pf;
  }
  SyncTree(want, tree_);
  tree_used_ = true;
}

// bazel build in the grading tree, within the budget left minus `reserve`; its output goes to build.log.
Exit Grading::BazelInTree(const std::vector<std::string>& args, int reserve) {
  Command c;
  c.argv = {"bazel", "--max_idle_secs=600", "build"};
  c.argv.insert(c.argv.end(), kBazelFlags.begin(), kBazelFlags.end());
  c.argv.push_back("--config=grading");
  c.argv.insert(c.argv.end(), args.begin(), args.end());
  c.cwd = tree_;
  c.out = c.err = Sink::File(work_ / "build.log");
  WaitOptions w = StopWith(SIGINT);
  w.deadline = Clock::now() + std::chrono::seconds(Left(reserve));
  w.timeout_signal = SIGINT;  // Bazel cancels the build, then the client exits
  return distlab::grader::Run(c, w);
}

// Each lab's student objects against that lab's own rules (a prior lab's files against the prior lab's).
// False when the submission is refused (*finish_status: this program's exit status).
bool Grading::CheckSymbols(const std::string& gbin, int* finish_status) {
  std::string refusal;
  bool broken = false;
  for (const auto& pl : checked_labs_) {
    std::vector<std::string> pfiles;
    if (pl == lab_) {
      pfiles = files_;
    } else {
      for (const auto& p : prior_) {
        if (p.rfind(pl + "/", 0) == 0) pfiles.push_back(p.substr(pl.size() + 1));
      }
    }
    std::vector<std::string> objs;
    for (const auto& f : pfiles) {
      const std::string stem =
          f.substr(0, f.size() - (f.size() > 3 && f.compare(f.size() - 3, 3, ".cc") == 0 ? 3 : 0));
      std::string o = gbin + "/labs/" + pl + "/_objs/student_impl/" + stem + ".pic.o";
      std::error_code ec;
      if (!fs::is_regular_file(o, ec)) o = gbin + "/labs/" + pl + "/_objs/student_impl/" + stem + ".o";
      objs.push_back("--object");
      objs.push_back((pl == lab_ ? f : "labs/" + pl + "/" + f) + "=" + o);
    }
    if (objs.empty()) continue;
    Command c;
    c.argv = {Tool("symbols"), "check",
              "--rules",       (work_ / ("symbol_rules." + pl + ".json")).string(),
              "--reference",   (work_ / ("reference_symbols." + pl + ".txt")).string()};
    c.argv.insert(c.argv.end(), objs.begin(), objs.end());
    c.err = Sink::ToStdout();
    int status = 0;
    const std::string out = Capture(c, &status);
    if (status != 0) {
      broken = true;
      refusal += out + (out.empty() || out.back() == '\n' ? "" : "\n");
    }
  }
  if (!broken) return true;
  std::string text;
  if (o_.symbols == "report") {
    text = "\nSYMBOL RULES (reported, not enforced in this staff grading):\n" + refusal;
  } else {
    text = std::string(kSymbolsRefusal) + refusal;
  }
  notes_ += text;
  WriteText(work_ / "notes.txt", notes_);
  std::fputs(text.c_str(), stderr);
  if (o_.symbols == "report") return true;
  *finish_status = Finish({"--refused"});
  return false;
}

// Copies each built graded binary where the grading user can read it (the tree stays closed to it) and runs
// the cases under the runner.
int Grading::RunCases(const std::string& gbin, const std::vector<std::string>& built,
                      std::vector<std::string> extra) {
  char tmpl[] = "/tmp/distlab-grade.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw Fatal("grade: mkdtemp failed");
  sandbox_ = tmpl;
  ::chmod(sandbox_.c_str(), 0755);
  std::vector<std::string> args = {"--jobs",          o_.jobs,
                                   "--show",          "all",
                                   "--limits",        (work_ / "limits.json").string(),
                                   "--blocked-after", "3",
                                   "--seed",          std::to_string(seed_)};
  if (::geteuid() == 0 && !o_.user.empty()) args.insert(args.end(), {"--user", o_.user});
  if (!o_.case_timeout.empty()) args.insert(args.end(), {"--timeout", o_.case_timeout});
  std::error_code ec;
  if (fs::is_regular_file(root_ / "tests" / lab_ / "grading.json", ec)) {
    args.insert(args.end(), {"--timings", (root_ / "tests" / lab_ / "grading.json").string()});
  }
  int nbin = 0;
  for (const auto& t : graded_) {
    if (std::find(built.begin(), built.end(), "BUILT //tests/" + lab_ + ":" + t) == built.end()) continue;
    const fs::path dir = fs::path(sandbox_) / t;
    const fs::path from = fs::path(gbin) / "tests" / lab_ / t;
    CopyFile(from, dir / t);  // follows the link bazel-bin may hold
    if (fs::is_directory(from.string() + ".runfiles", ec))
      CopyFollowing(from.string() + ".runfiles", dir / (t + ".runfiles"));
    args.insert(args.end(), {"--binary", (dir / t).string(), "--manifest",
                             (work_ / "manifests" / (t + ".manifest.json")).string(), "--json",
                             (work_ / (t + ".result.json")).string()});
    ++nbin;
  }
  MakeReadableByAll(sandbox_);
  if (nbin > 0 && !Stopped()) {
    const int left = Left(15);
    Say("grade: running the cases of " + std::to_string(nbin) + " graded test(s) (" + std::to_string(left) +
        " s of the budget left)");
    Command c;
    c.argv = {Tool("runner"), "--budget", std::to_string(left)};
    c.argv.insert(c.argv.end(), args.begin(), args.end());
    c.out = Sink::Null();
    // The runner ends its cases and writes its reports when stopped; it is killed only if it has not within
    // 60 s.
    const Exit e = distlab::grader::Run(c, StopWith(SIGTERM, 30));
    if (e.status != 0) Say("grade: the runner exited with status " + std::to_string(e.status));
  }
  return Finish(std::move(extra));
}

void Grading::Report(std::vector<std::string> extra) {
  if (report_args_.empty()) {  // stopped before the manifests were read: no case to list
    nlohmann::ordered_json r;
    r["seed"] = seed_;
    r["score"] = 0;
    r["output"] = SeedLine(seed_, lab_) + "\nThe grading was stopped from outside (SIG" +
                  SignalName(g_stop_signal) + ") before any case ran.\n";
    r["tests"] = nlohmann::ordered_json::array();
    r["extra_data"] = {{"seed", seed_}};
    WriteText(out_, r.dump(2) + "\n");
  } else {
    Command c;
    c.argv = {Tool("report")};
    c.argv.insert(c.argv.end(), report_args_.begin(), report_args_.end());
    c.argv.insert(c.argv.end(), extra.begin(), extra.end());
    c.argv.insert(c.argv.end(),
                  {"--execution-time", std::to_string(Elapsed()), "--seed", std::to_string(seed_)});
    c.out = Sink::ToStderr();
    if (distlab::grader::Run(c).status != 0) Say("grade: the report failed");
  }
  Say("grade: results in " + out_.string());
}

// Writes results.json (with `extra` report arguments), shuts the tree's Bazel server down unless kept,
// releases the lock. Returns the exit status: 128 + the signal after a stop, else 0.
int Grading::Finish(std::vector<std::string> extra) {
  std::error_code ec;
  if (!sandbox_.empty()) fs::remove_all(sandbox_, ec);
  sandbox_.clear();
  const int sig = g_stop_signal;
  if (sig != 0) {
    Stopped();
    const auto it = std::find(extra.begin(), extra.end(), "--stopped");  // the stop outranks a spent budget
    if (it != extra.end() && it + 1 != extra.end()) extra.erase(it, it + 2);
    extra.insert(extra.end(), {"--stopped", std::string("the grading was stopped from outside (SIG") +
                                                SignalName(sig) + ")"});
  }
  Report(extra);
  if (!o_.keep_server && tree_used_) {
    Command c;
    c.argv = {"bazel", "--max_idle_secs=600", "shutdown"};
    c.cwd = tree_;
    c.out = c.err = Sink::Null();
    distlab::grader::Run(c);
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the grading lock
  lock_fd_ = -1;
  Say("grade: done in " + std::to_string(Elapsed()) + " s");
  return sig != 0 ? 128 + sig : 0;
}

int Grading::Run() {
  try {
    return Steps();
  } catch (const std::exception&) {
    if (g_stop_signal == 0 || work_.empty()) throw;
    return Finish();  // a step cut short by the stop (a bazel command it interrupted): results.json all the
                      // same
  }
}

int Grading::Steps() {
  Validate();
  if (Stopped()) return Finish();
  FindLab();
  if (Stopped()) return Finish();
  ReadManifests();
  if (Stopped()) return Finish();
  TakeFiles();
  const std::string flagged = Scan();
  if (!flagged.empty()) {
    const std::string text = kScanRefusal + flagged;
    notes_ += text;
    WriteText(work_ / "notes.txt", notes_);
    std::fputs(text.c_str(), stderr);
    return Finish({"--refused"});
  }
  Say("grade: preparing the grading tree " + tree_.string());
  if (!Lock()) return Finish();
  PrepareTree();

  // The submission's objects first: the symbol rules refuse what the lab never needs before anything links.
  std::vector<std::string> impls;
  for (const auto& pl : checked_labs_) impls.push_back("//labs/" + pl + ":student_impl");
  Say("grade: compiling the submission (" + Join(impls) + ")");
  Exit b = BazelInTree(impls, 20);
  if (Stopped()) return Finish();
  std::string gbin;
  try {
    gbin = BazelBin(tree_, "grading", {"--max_idle_secs=600"});
  } catch (const std::exception&) {
  }
  const std::string log = (work_ / "build.log").string();
  if (b.timed_out) {
    Say("grade: the build did not finish within the grading budget");
    return Finish(
        {"--build-failed", "--build-log", log, "--stopped", "grading time budget spent during the build"});
  }
  if (b.status == 0) {
    int status = 0;
    if (!CheckSymbols(gbin, &status)) return status;
  }

  Say("grade: building the graded tests in the grading tree");
  if (b.status == 0) {
    std::vector<std::string> args = {"--keep_going",
                                     "--build_event_json_file=" + (work_ / "build.bep.json").string()};
    for (const auto& t : graded_) args.push_back("//tests/" + lab_ + ":" + t);
    b = BazelInTree(args, 20);
  }
  if (Stopped()) return Finish();
  std::vector<std::string> built;
  {
    Command c;
    c.argv = {Tool("summarize"), "--built", (work_ / "build.bep.json").string()};
    c.err = Sink::Null();
    int status = 0;
    built = Lines(Capture(c, &status));
  }
  std::vector<std::string> extra;
  if (b.status != 0 || b.timed_out) {
    Say("grade: the build failed (exit " + std::to_string(b.timed_out ? 124 : b.status) +
        "); unbuilt tests score 0");
    int shown = 0;
    for (const auto& line : Lines(ReadFile(log))) {
      if (shown < 20 && (line.find("error") != std::string::npos || line.find("Error") != std::string::npos ||
                         line.find("ERROR") != std::string::npos)) {
        std::fprintf(stderr, "%s\n", line.c_str());
        ++shown;
      }
    }
    extra = {"--build-failed", "--build-log", log};
    if (b.timed_out) extra.insert(extra.end(), {"--stopped", "grading time budget spent during the build"});
  }
  return RunCases(gbin, built, extra);
}

}  // namespace

int main(int argc, char** argv) {
  InstallStopHandlers();
  Options o;
  distlab::cli::App app{
      "Grades one lab of one submission and writes Gradescope's results.json (docs/design.md §5). "
      "./labctl grade runs it; its --help says what each option does."};
  app.add_option("--root", o.root, "the course checkout (default: here)");
  app.add_option("--handout", o.handout, "the handout made from it (labctl's make_handout)")->required();
  app.add_option("--tree", o.tree, "the grading tree (its folder holds the lock)")->required();
  app.add_option("--user", o.user, "when root, run the cases as this user");
  app.add_option("--tools", o.tools, "where the grader's other programs are (default: beside this one)");
  app.add_option("--submission", o.submission, "the submission's folder");
  app.add_option("--lab", o.lab, "the lab (default: found from the files)");
  app.add_option("--out", o.out, "results.json to write (default: CHECKOUT/out/results.json)");
  app.add_option("--budget", o.budget,
                 "total seconds for the whole grading (default 540, DISTLAB_GRADE_BUDGET_S)");
  app.add_option("--seed", o.seed, "the grading seed (default: a fresh one)");
  app.add_option("--visibility", o.visibility, "each test's Gradescope visibility")
      ->check(distlab::cli::IsMember({"hidden", "after_due_date", "after_published", "visible"}));
  app.add_option("--case-timeout", o.case_timeout, "cap every case's timeout at S seconds");
  app.add_option("--only", o.only, "grade only these graded tests (TEST[,TEST])");
  app.add_flag("--keep-server", o.keep_server, "leave the grading tree's Bazel server running");
  app.add_option("--symbol-rules", o.symbols, "staff: report the symbol rules' findings instead of refusing")
      ->check(distlab::cli::IsMember({"enforce", "report"}));
  app.add_option("--jobs", o.jobs, "staff: cases run at the same time");
  DISTLAB_CLI_PARSE(app, argc, argv);
  try {
    Grading g(std::move(o));
    return g.Run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[labctl] error: %s\n", e.what());
    return 1;
  }
}
