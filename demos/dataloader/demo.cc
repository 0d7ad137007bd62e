// Lab 2 demo: what each way of dying looks like from the other side, and Megatron's indices worked by hand.
//
//   demo --out DIR     prints the tables (the last one: a loader stopped after batch 2 and resumed from its
//                      state, against one that never stopped), writes DIR/dataloader-topology.svg (Graphviz),
//                      DIR/dataloader-sample-index.svg, DIR/dataloader-blending.svg and DIR/summary.json.
#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "labs/dataloader/gpt_dataset.h"
#include "labs/dataloader/loader.h"
#include "labs/dataloader/state.h"
#include "labs/dataloader/traced_dataset.h"
#include "labs/dataloader/worker.h"
#include "reference/viz/viz.h"
#include "tools/base/cli.h"

namespace dl = distlab::dataloader;
using nlohmann::json;

namespace {

int CountFds() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n - 1;
}

int CountShm(const std::string& prefix) {
  int n = 0;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d)) n += std::string(e->d_name).rfind(prefix, 0) == 0;
    ::closedir(d);
  }
  return n;
}

bool HasChildren() {
  int st;
  return !(::waitpid(-1, &st, WNOHANG) == -1 && errno == ECHILD);
}

// The worker dies of `sig` as an uncaught signal would kill it, even where a sanitizer installed a handler
// (SIGKILL cannot be caught, so resetting it does nothing).
void RaiseWithDefaultAction(int sig) {
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

enum class Fault { kNone, kThrow, kExit3, kExit0, kSigkill, kSigsegv, kSigbus, kRagged };

class Faulty : public dl::MapDataset {
 public:
  explicit Faulty(Fault f) : f_(f) {}
  int64_t size() const override { return 12; }
  dl::Sample Get(int64_t i) const override {
    if (i == 3) {
      switch (f_) {
        case Fault::kThrow:
          throw std::out_of_range("token id 70000 is outside the vocabulary");
        case Fault::kExit0:
          std::exit(0);
        case Fault::kExit3:
          std::exit(3);
        case Fault::kSigkill:
          RaiseWithDefaultAction(SIGKILL);
          break;
        case Fault::kSigsegv:
          RaiseWithDefaultAction(SIGSEGV);
          break;
        case Fault::kSigbus:
          RaiseWithDefaultAction(SIGBUS);
          break;
        case Fault::kRagged:
          return dl::Sample{{3}, {0, 0, 0}};
        case Fault::kNone:
          break;
      }
    }
    return dl::Sample{{2}, {static_cast<float>(i), 0}};
  }

 private:
  Fault f_;
};

struct Row {
  std::string scenario, seen;
  int batches = 0, reclaimed = 0, shm_left = 0, fds_leaked = 0;
  bool children_left = false;
};

Row RunScenario(const std::string& name, Fault f) {
  Row row;
  row.scenario = name;
  const int fds = CountFds();
  std::string prefix;
  {
    dl::LoaderOptions o;
    o.batch_size = 2;
    o.num_workers = 2;
    o.timeout_s = 10;
    auto loader = dl::DataLoader::Create(std::make_shared<Faulty>(f), o);
    if (!loader.ok()) {
      row.seen = loader.status().ToString();
      return row;
    }
    prefix = (*loader)->shm_prefix();
    absl::Status st = (*loader)->StartEpoch();
    while (st.ok()) {
      dl::Batch b;
      auto more = (*loader)->Next(&b);
      if (!more.ok()) {
        st = more.status();
        break;
      }
      if (!*more) break;
      ++row.batches;
    }
    row.seen = st.ok() ? "(epoch ended normally)" : std::string(st.message());
    (void)(*loader)->Shutdown();
    row.reclaimed = (*loader)->reclaimed_segments();
  }
  row.shm_left = CountShm(prefix);
  row.fds_leaked = CountFds() - fds;
  row.children_left = HasChildren();
  return row;
}

// The main process is SIGKILLed; this process adopts the orphaned workers (subreaper) and times them.
Row MainKilled() {
  Row row;
  row.scenario = "main process SIGKILLed";
  int pipefd[2];
  if (::pipe(pipefd) != 0) return row;
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  std::fflush(nullptr);
  pid_t main_pid = ::fork();
  if (main_pid == 0) {
    ::close(pipefd[0]);
    dl::LoaderOptions o;
    o.num_workers = 2;
    auto loader = dl::DataLoader::Create(std::make_shared<Faulty>(Fault::kNone), o);
    if (!loader.ok() || !(*loader)->StartEpoch().ok()) ::_exit(2);
    dl::Batch b;
    (void)(*loader)->Next(&b);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::string msg = (*loader)->shm_prefix();
    for (pid_t p : (*loader)->worker_pids()) msg += " " + std::to_string(p);
    msg += " " + std::to_string(CountShm((*loader)->shm_prefix())) + "\n";
    (void)!::write(pipefd[1], msg.data(), msg.size());
    for (;;) ::pause();
  }
  ::close(pipefd[1]);
  char buf[256] = {0};
  (void)!::read(pipefd[0], buf, sizeof buf - 1);
  ::close(pipefd[0]);
  char prefix[128] = {0};
  int w0 = 0, w1 = 0, segments = 0;
  std::sscanf(buf, "%127s %d %d %d", prefix, &w0, &w1, &segments);
  ::kill(main_pid, SIGKILL);
  ::waitpid(main_pid, nullptr, 0);
  auto t0 = std::chrono::steady_clock::now();
  int exited = 0;
  for (pid_t w : {w0, w1}) {
    int st = 0;
    while (::waitpid(w, &st, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(5)) {
        ::kill(w, SIGKILL);
        ::waitpid(w, &st, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    exited += WIFEXITED(st);
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  std::ostringstream s;
  s << exited << " of 2 workers left on their own " << static_cast<int>(ms)
    << " ms after the main process died; " << segments << " unread segments before, " << CountShm(prefix)
    << " after";
  row.seen = s.str();
  row.shm_left = CountShm(prefix);
  row.children_left = HasChildren();
  return row;
}

// exit() vs _exit() vs ForkWorker after fork, with "parent" sitting in a stdio buffer and an atexit hook.
int g_hook_fd = -1;
void Hook() { (void)!::write(g_hook_fd, "[atexit]", 8); }

std::string ForkExperiment(int mode) {
  int p[2];
  if (::pipe(p) != 0) return "pipe failed";
  std::fflush(nullptr);
  pid_t outer = ::fork();
  if (outer == 0) {
    ::close(p[0]);
    FILE* f = ::fdopen(p[1], "w");
    std::setvbuf(f, nullptr, _IOFBF, 4096);
    g_hook_fd = p[1];
    std::atexit(Hook);
    std::fputs("[parent]", f);  // buffered, not written yet
    if (mode == 2) {
      auto pid = dl::ForkWorker([f] {
        std::fputs("[worker]", f);
        return 0;
      });
      if (pid.ok()) ::waitpid(*pid, nullptr, 0);
    } else {
      pid_t c = ::fork();  // naive: no flush before fork
      if (c == 0) {
        std::fputs("[worker]", f);
        if (mode == 0) std::exit(0);
        ::_exit(0);
      }
      ::waitpid(c, nullptr, 0);
    }
    std::fflush(f);
    ::_exit(0);
  }
  ::close(p[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  ::waitpid(outer, nullptr, 0);
  return out;
}

std::string TopologyDot() {
  return R"DOT(digraph loader {
  rankdir=LR; node [fontname="Helvetica", fontsize=11]; edge [fontname="Helvetica", fontsize=9];
  main [shape=box, style="rounded,filled", fillcolor="#dbe9f6", label="main process\nsampler -> tasks\nreorder buffer (task id)\nwaitpid(WNOHANG) on silence"];
  subgraph cluster_w { label="forked workers"; style=dashed;
    w0 [shape=box, style="rounded,filled", fillcolor="#e6f4e0", label="worker 0\nGet(i) -> pooled shm segment"];
    w1 [shape=box, style="rounded,filled", fillcolor="#e6f4e0", label="worker 1\nGet(i) -> pooled shm segment"]; }
  shm [shape=cylinder, style=filled, fillcolor="#fdf1d6", label="/dev/shm\n<prefix>w<k>_s<n>\n(reused while free)"];
  tracker [shape=note, label="resource tracker\nunlinks <prefix>* left by\ndead workers at shutdown"];
  main -> w0 [label="index queue 0 (pipe)\ntask t, indices"];
  main -> w1 [label="index queue 1 (pipe)"];
  w0 -> main [label="result channel (one pipe)\n{task, pool entry or new name, shape}\n<= PIPE_BUF, atomic", color="#2b6cb0"];
  w1 -> main [color="#2b6cb0"];
  w0 -> shm [label="new: shm_open, ftruncate;\nthen write; reuse when free", style=dotted];
  w1 -> shm [style=dotted];
  shm -> main [label="first batch: mmap, shm_unlink;\nBatch dropped: mark free", style=dotted];
  tracker -> shm [style=dotted, arrowhead=tee];
}
)DOT";
}

// Documents on the first row, each sample's window below; the token a sample ends on (and the next starts
// on) is drawn dark.
distlab::viz::WriteResult SampleIndexFigure(const std::vector<int32_t>& sizes, const std::vector<int64_t>& si,
                                            int L, const std::string& path) {
  distlab::viz::Timeline t;
  const int rows = static_cast<int>(si.size() / 2) - 1;
  std::vector<std::string> names = {"documents"};
  for (int j = 0; j < rows; ++j) names.push_back("sample " + std::to_string(j));
  t.Title("Sample index: documents of 5, 3, 4 tokens, L = " + std::to_string(L) +
          " (L + 1 tokens per sample)")
      .XLabel("token position in the concatenated documents")
      .Rows(names);
  std::vector<int> start(sizes.size() + 1, 0);
  for (size_t d = 0; d < sizes.size(); ++d) {
    start[d + 1] = start[d] + sizes[d];
    t.AddBox({0, double(start[d]), double(start[d + 1]), "doc " + std::to_string(d), "", int(d)});
  }
  for (int j = 0; j < rows; ++j) {
    const int a = start[static_cast<size_t>(si[2 * j])] + static_cast<int>(si[2 * j + 1]);
    const int b = start[static_cast<size_t>(si[2 * j + 2])] + static_cast<int>(si[2 * j + 3]);
    t.AddBox({j + 1, double(a), double(b + 1), "tokens " + std::to_string(a) + ".." + std::to_string(b),
              "#9ecae1", 0});
    t.AddBox({j + 1, double(b), double(b + 1), "end", "#2b6cb0", 0});
  }
  return t.Write(path);
}

distlab::viz::WriteResult BlendingFigure(const std::vector<int64_t>& idx, int datasets,
                                         const std::string& path) {
  std::vector<std::vector<double>> v(static_cast<size_t>(datasets), std::vector<double>(idx.size(), 0));
  std::vector<std::string> cols;
  for (size_t i = 0; i < idx.size(); ++i) {
    v[static_cast<size_t>(idx[i])][i] = 1;
    cols.push_back(std::to_string(i));
  }
  distlab::viz::HeatMap h;
  h.Title("Greedy blending, weights [0.5, 0.3, 0.2]: which dataset sample i comes from")
      .XLabel("blended sample i")
      .YLabel("dataset")
      .Values(v)
      .RowLabels({"0 (0.5)", "1 (0.3)", "2 (0.2)"})
      .ColumnLabels(cols)
      .CellSize(16);
  return h.Write(path);
}

}  // namespace

// Sample i = {i, a draw from the data generator}: a random augmentation.
class Noisy : public dl::MapDataset {
 public:
  int64_t size() const override { return 10; }
  dl::Sample Get(int64_t i) const override {
    return dl::Sample{{2}, {static_cast<float>(i), static_cast<float>(dl::DataRandom() % 1000)}};
  }
};

std::string BatchText(const dl::Batch& b) {
  std::string s;
  for (int64_t k = 0; k < b.shape[0]; ++k) {
    s += (k ? " " : "") + std::to_string(static_cast<int>(b.data()[2 * k])) + ":" +
         std::to_string(static_cast<int>(b.data()[2 * k + 1]));
  }
  return s;
}

// Stage E: one loader runs the epoch through; another stops after 2 batches (2 more are prefetched by then),
// saves its state as text, and a third loader resumes from that text. The resumed batches equal the
// uninterrupted ones, random draws included.
void ResumeDemo(json* summary) {
  std::printf("\n== 5. Stop after batch 2 and resume (2 workers, prefetch 2, shuffle, index:draw) ==\n");
  dl::LoaderOptions o;
  o.batch_size = 2;
  o.num_workers = 2;
  o.shuffle = true;
  o.seed = 3;
  o.generator_seed = 7;
  o.timeout_s = 20;
  // The uninterrupted run reads through a TracedDataset: under DISTLAB_TRACE (labctl demo) each worker's
  // fetches are a row of the trace beside the figures.
  auto whole = dl::DataLoader::Create(std::make_shared<dl::TracedDataset>(std::make_shared<Noisy>()), o);
  auto first = dl::DataLoader::Create(std::make_shared<Noisy>(), o);
  auto second = dl::DataLoader::Create(std::make_shared<Noisy>(), o);
  if (!whole.ok() || !first.ok() || !second.ok() || !(*whole)->StartEpoch().ok() ||
      !(*first)->StartEpoch().ok()) {
    std::printf("could not start the loaders\n");
    return;
  }
  std::vector<std::string> a, b;
  dl::Batch batch;
  while (true) {
    auto more = (*whole)->Next(&batch);
    if (!more.ok() || !*more) break;
    a.push_back(BatchText(batch));
  }
  for (int k = 0; k < 2; ++k) {
    if ((*first)->Next(&batch).ok()) b.push_back(BatchText(batch));
  }
  auto state = (*first)->state_dict();
  if (!state.ok()) {
    std::printf("state_dict: %s\n", std::string(state.status().message()).c_str());
    return;
  }
  const std::string text = dl::EncodeLoaderState(*state);
  first->reset();  // the first loader is gone, with the 2 batches its workers had prefetched
  auto decoded = dl::DecodeLoaderState(text);
  if (!decoded.ok() || !(*second)->load_state_dict(*decoded).ok() || !(*second)->StartEpoch().ok()) {
    std::printf("resume failed\n");
    return;
  }
  while (true) {
    auto more = (*second)->Next(&batch);
    if (!more.ok() || !*more) break;
    b.push_back(BatchText(batch));
  }
  std::printf("the state, as text:\n%s", text.c_str());
  std::printf("%5s  %-22s %-22s %s\n", "batch", "uninterrupted", "stopped + resumed", "same");
  bool all_same = a.size() == b.size();
  for (size_t k = 0; k < std::max(a.size(), b.size()); ++k) {
    const std::string x = k < a.size() ? a[k] : "-", y = k < b.size() ? b[k] : "-";
    all_same = all_same && x == y;
    std::printf("%5zu  %-22s %-22s %s%s\n", k, x.c_str(), y.c_str(), x == y ? "yes" : "NO",
                k == 2 ? "   <- resumed here" : "");
  }
  std::printf("resumed run identical: %s\n", all_same ? "yes" : "NO");
  (*summary)["resume"] = {{"state", text}, {"uninterrupted", a}, {"resumed", b}, {"identical", all_same}};
}

int main(int argc, char** argv) {
  distlab::cli::App app{"Lab 2 (dataloader) demo"};
  std::string out = "dataloader-demo";
  app.add_option("--out", out, "directory for the SVG figures and summary.json");
  DISTLAB_CLI_PARSE(app, argc, argv);
  ::mkdir(out.c_str(), 0755);
  json summary;

  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf(
      "== 1. How each death looks from the main process (2 workers, batch 2; sample 3 misbehaves) ==\n");
  std::printf("%-26s %7s %9s %8s %6s %8s  %s\n", "scenario", "batches", "reclaimed", "shm left", "fds+",
              "children", "message the main process saw");
  const std::pair<const char*, Fault> cases[] = {{"worker throws", Fault::kThrow},
                                                 {"worker exit(3)", Fault::kExit3},
                                                 {"worker exit(0) mid-epoch", Fault::kExit0},
                                                 {"worker SIGKILL", Fault::kSigkill},
                                                 {"worker SIGSEGV", Fault::kSigsegv},
                                                 {"worker SIGBUS", Fault::kSigbus},
                                                 {"ragged sample in worker", Fault::kRagged},
                                                 {"healthy epoch", Fault::kNone}};
  std::vector<Row> rows;
  for (const auto& [name, f] : cases) rows.push_back(RunScenario(name, f));
  rows.push_back(MainKilled());
  for (const Row& r : rows) {
    std::printf("%-26s %7d %9d %8d %6d %8s  %s\n", r.scenario.c_str(), r.batches, r.reclaimed, r.shm_left,
                r.fds_leaked, r.children_left ? "LEFT" : "none", r.seen.c_str());
    summary["scenarios"].push_back({{"scenario", r.scenario},
                                    {"message", r.seen},
                                    {"batches_before", r.batches},
                                    {"segments_reclaimed", r.reclaimed},
                                    {"segments_left", r.shm_left},
                                    {"fds_leaked", r.fds_leaked},
                                    {"children_left", r.children_left}});
  }

  std::printf(
      "\n== 2. Leaving a forked child: \"[parent]\" is buffered in stdio at fork, an atexit hook is set "
      "==\n");
  const char* modes[] = {"fork, child exit()", "fork, child _exit()", "ForkWorker (flush, _exit)"};
  for (int m = 0; m < 3; ++m) {
    std::string o = ForkExperiment(m);
    std::printf("%-28s -> %s\n", modes[m], o.c_str());
    summary["exit_vs__exit"][modes[m]] = o;
  }

  std::printf("\n== 3. Sample index: documents of 5, 3, 4 tokens, L = 4 (each sample 5 tokens) ==\n");
  const std::vector<int32_t> sizes = {5, 3, 4};
  auto si = dl::BuildSampleIndex(sizes, {0, 1, 2}, 4, 2);
  if (si.ok()) {
    std::printf("%6s %20s %20s\n", "sample", "start (doc pos, off)", "end (doc pos, off)");
    for (size_t j = 0; j + 1 < si->size() / 2; ++j) {
      std::printf("%6zu %14lld, %-5lld %14lld, %-5lld\n", j, (long long)(*si)[2 * j],
                  (long long)(*si)[2 * j + 1], (long long)(*si)[2 * j + 2], (long long)(*si)[2 * j + 3]);
    }
    summary["sample_index"] = *si;
    auto r = SampleIndexFigure(sizes, *si, 4, out + "/dataloader-sample-index.svg");
    if (!r.ok()) std::printf("figure: %s\n", r.error.c_str());
  }

  std::printf("\n== 4. Blending weights [1/2, 1/4, 1/4]: pick argmax w_d * max(i,1) - taken_d ==\n");
  auto bl = dl::BuildBlendingIndices({0.5, 0.25, 0.25}, 4);
  if (bl.ok()) {
    std::printf("%3s %14s %14s\n", "i", "dataset index", "sample index");
    for (size_t i = 0; i < bl->dataset_index.size(); ++i) {
      std::printf("%3zu %14lld %14lld\n", i, (long long)bl->dataset_index[i],
                  (long long)bl->dataset_sample_index[i]);
    }
    summary["blending"] = {{"dataset_index", bl->dataset_index},
                           {"dataset_sample_index", bl->dataset_sample_index}};
  }
  auto bl40 = dl::BuildBlendingIndices({0.5, 0.3, 0.2}, 40);
  if (bl40.ok()) {
    auto r = BlendingFigure(bl40->dataset_index, 3, out + "/dataloader-blending.svg");
    if (!r.ok()) std::printf("figure: %s\n", r.error.c_str());
  }
  ResumeDemo(&summary);
  auto topo = distlab::viz::RenderDot(TopologyDot(), out + "/dataloader-topology.svg");
  std::printf(
      "\nfigures in %s: dataloader-topology.svg%s, dataloader-sample-index.svg, dataloader-blending.svg\n",
      out.c_str(), topo.ok() ? "" : (" (" + topo.error + ")").c_str());
  std::ofstream(out + "/summary.json") << summary.dump(2) << "\n";
  return 0;
}
