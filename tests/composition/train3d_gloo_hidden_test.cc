// Hidden test of Lab 7 stage C on processes: the (2, 2, 2) layout trained by 8 processes over the gloo
// backend equals single-rank training, and the thread run of the same layout, rank by rank.
//
// The case starts 8 copies of this very binary (the variant being graded: the student's files, a stub or a
// mutant) as the ranks, with what ./labctl launch gives a rank (tools/testing/case_processes.h). A rank joins
// with comm::CommInitFromEnv, trains, writes what it saw and returns; the parent waits for all 8 with a
// deadline (a straggler is killed and named), reads what they wrote and compares. Under TSan the case skips:
// Gloo is not instrumented. The case draws m in {2, 4} and the seeds of the model and of the data from the
// grading seed; the rank processes run the same case, so they draw the same.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/composition/train3d.h"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "tests/composition/test_util.h"
#include "tools/testing/case_processes.h"
#include "tools/testing/test_support.h"

namespace distlab::composition {
namespace {

using testing::Again;
using testing::RankRun;
using testing::Training;

constexpr float kTolerance = 2e-5f;
constexpr int kWorld = 8;

// What the case trains: (2, 2, 2), m in {2, 4}, the seeds drawn (the same in the parent and in every rank
// process: one case, one stream).
Training Drawn() {
  testing::CaseRandom rng;
  Training t;
  t.layout = {{2, 2, 2}, rng.Pick(std::vector<int>{2, 4})};
  testing::DrawSeeds(rng, &t);
  return t;
}

// One rank's run, as text: "coord dp pp tp", one "step has_loss loss" per step, one "param name n v..." per
// local parameter; floats with 9 significant digits, which round-trip an f32 exactly.
std::string Serialize(const RankRun& r) {
  std::ostringstream out;
  out << "coord " << r.coord.dp << " " << r.coord.pp << " " << r.coord.tp << "\n";
  char buf[32];
  for (const StepResult& s : r.steps) {
    std::snprintf(buf, sizeof buf, "%.9g", s.loss);
    out << "step " << (s.has_loss ? 1 : 0) << " " << buf << "\n";
  }
  for (const auto& [name, values] : r.values) {
    out << "param " << name << " " << values.size();
    for (float v : values) {
      std::snprintf(buf, sizeof buf, "%.9g", v);
      out << " " << buf;
    }
    out << "\n";
  }
  return out.str();
}

bool Parse(const std::string& text, RankRun* r) {
  std::istringstream in(text);
  std::string tag;
  bool coord = false;
  while (in >> tag) {
    if (tag == "coord") {
      coord = static_cast<bool>(in >> r->coord.dp >> r->coord.pp >> r->coord.tp);
    } else if (tag == "step") {
      int has = 0;
      StepResult s;
      if (!(in >> has >> s.loss)) return false;
      s.has_loss = has != 0;
      r->steps.push_back(s);
    } else if (tag == "param") {
      std::string name;
      size_t n = 0;
      if (!(in >> name >> n)) return false;
      std::vector<float>& v = r->values[name];
      v.resize(n);
      for (float& x : v) {
        if (!(in >> x)) return false;
      }
    } else {
      return false;
    }
  }
  return coord && static_cast<int>(r->steps.size()) == testing::kSteps;
}

// The rank side: this process is one of the 8.
absl::Status RunAsRank(const Training& t, const std::string& out_path) {
  comm::CommOptions options;
  options.timeout = distlab::testing::Scaled(std::chrono::seconds(20));
  ASSIGN_OR_RETURN(std::unique_ptr<comm::Comm> world, comm::CommInitFromEnv(options));
  comm::Stream stream;
  RankRun run;
  {
    ASSIGN_OR_RETURN(auto grid, ProcessGrid::Create(*world, t.layout.grid));
    run.coord = grid->coord();
    ASSIGN_OR_RETURN(auto trainer,
                     Trainer3D::Create(*grid, stream, t.cfg, t.layout, testing::kBatch, testing::Adam()));
    for (int step = 0; step < testing::kSteps; ++step) {
      ASSIGN_OR_RETURN(StepResult r, trainer->Step(testing::GlobalBatch(t.cfg, step, t.data_seed)));
      run.steps.push_back(r);
    }
    ASSIGN_OR_RETURN(run.values, trainer->LocalParameters());
  }
  RETURN_IF_ERROR(world->Destroy());
  std::ofstream out(out_path);
  out << Serialize(run);
  out.close();
  if (!out) return absl::InternalError("cannot write " + out_path);
  return absl::OkStatus();
}

TEST(Train3dGlooHidden, EightProcessesEqualSingleRankAndTheThreadRun) {
  const Training t = Drawn();
  if (const std::string out = distlab::testing::RankResultPath(); !out.empty()) {
    ASSERT_OK(RunAsRank(t, out));  // this process is one rank of the parent's run
    return;
  }
  if (distlab::testing::Sanitizer() == "tsan") {
    GTEST_SKIP() << "Gloo is not built with TSan: this case runs in the plain and ASan configurations";
  }
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  // The thread run first: it also tells a failing Trainer3D apart from a failing process run.
  auto threads = testing::RunLayout(t);
  ASSERT_OK(threads.status()) << "the same training as 8 threads: " << t.Label() << Again();
  absl::StatusOr<std::vector<distlab::testing::RankProcess>> ranks;
  {
    distlab::testing::Activity activity("8 gloo processes training (dp 2, pp 2, tp 2)");
    ranks = distlab::testing::RunCaseAsProcesses(kWorld, distlab::testing::Scaled(std::chrono::seconds(60)));
  }
  ASSERT_OK(ranks.status());
  std::vector<RankRun> runs(kWorld);
  for (int r = 0; r < kWorld; ++r) {
    const distlab::testing::RankProcess& p = (*ranks)[r];
    ASSERT_EQ(p.exit_code, 0) << "rank " << r << " of 8 gloo processes (" << t.Label()
                              << ") failed; its output:\n"
                              << p.output << Again();
    ASSERT_TRUE(Parse(p.result, &runs[r]))
        << "rank " << r << " of 8 gloo processes (" << t.Label() << ") wrote no complete run; its output:\n"
        << p.output << Again();
  }

  testing::ExpectEquivalent(t, runs, kTolerance, "8 gloo processes, ");
  float max_vs_threads = 0;
  int worst_rank = 0, worst_step = 0;
  for (int r = 0; r < kWorld; ++r) {
    const RankRun& th = (*threads)[r];
    EXPECT_TRUE(runs[r].coord == th.coord)
        << t.Label() << ": rank " << r << " has other coordinates on processes than on threads" << Again();
    for (int s = 0; s < testing::kSteps; ++s) {
      EXPECT_EQ(runs[r].steps[s].has_loss, th.steps[s].has_loss)
          << t.Label() << ": rank " << r << ", step " << s << ": has_loss on processes and on threads"
          << Again();
      const float d = std::fabs(runs[r].steps[s].loss - th.steps[s].loss);
      if (d > max_vs_threads) max_vs_threads = d, worst_rank = r, worst_step = s;
    }
  }
  std::printf("8 gloo processes against 8 threads: max |dloss| %.3g\n", max_vs_threads);
  EXPECT_LE(max_vs_threads, kTolerance)
      << t.Label() << ": rank " << worst_rank << "'s loss of step " << worst_step
      << " on 8 gloo processes differs from the thread run's by " << max_vs_threads << Again();
}

}  // namespace
}  // namespace distlab::composition
