// Shared pieces of the Lab 7 hidden tests: communicator options with a short watchdog, the dense reference
// slices a tensor-parallel rank must hold, the per-function precheck of the earlier labs' functions this lab
// links (on fixed inputs), and what the seeded cases draw from the grading seed: layouts, micro-batch
// counts, the model's and the data's seeds (tools/testing/test_support.h: CaseRandom).
#ifndef DISTLAB_TESTS_COMPOSITION_TEST_UTIL_H_
#define DISTLAB_TESTS_COMPOSITION_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "labs/composition/grid.h"
#include "labs/composition/ledger.h"
#include "labs/composition/train3d.h"
#include "labs/parallel/tensor_parallel.h"
#include "labs/parallel/zero.h"
#include "labs/pipeline/schedule.h"
#include "reference/comm/comm.h"
#include "reference/nn/optim.h"
#include "reference/nn/transformer.h"
#include "reference/tensor/ops.h"
#include "reference/tensor/random.h"
#include "tools/testing/test_support.h"

namespace distlab::composition::testing {

using tensor::Tensor;

// A short watchdog, so that a rank waiting for a peer that never comes fails the case in seconds.
inline comm::CommOptions Options() {
  comm::CommOptions o;
  o.timeout = distlab::testing::Scaled(std::chrono::seconds(3));
  return o;
}

inline bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Seeded cases draw their inputs from the grading seed (CaseRandom) and name them in every failure.
using distlab::testing::CaseRandom;

// "(dp 2, pp 2, tp 2)"
inline std::string Str(const GridShape& s) {
  return "(dp " + std::to_string(s.dp) + ", pp " + std::to_string(s.pp) + ", tp " + std::to_string(s.tp) +
         ")";
}

// The end of a seeded case's failure message, after the inputs it drew: how to draw them again.
inline std::string Again() { return "\n  " + distlab::testing::SeedNote(); }

enum class Split { kReplicated, kRows, kColumns };

// How tensor parallelism splits a parameter (tp_block.h): column-parallel q, k, v, fc1 (weights and
// biases) by rows, row-parallel o.weight and fc2.weight by columns, everything else replicated.
inline Split SplitOf(const std::string& name) {
  for (const char* s : {"attn.q.weight", "attn.k.weight", "attn.v.weight", "mlp.fc1.weight", "attn.q.bias",
                        "attn.k.bias", "attn.v.bias", "mlp.fc1.bias"}) {
    if (EndsWith(name, s)) return Split::kRows;
  }
  if (EndsWith(name, "attn.o.weight") || EndsWith(name, "mlp.fc2.weight")) return Split::kColumns;
  return Split::kReplicated;
}

// Rank r of t's part of a dense parameter's values (flat, row-major).
inline std::vector<float> ShardOf(const std::string& name, const std::vector<float>& all,
                                  const tensor::Shape& shape, int r, int t) {
  switch (SplitOf(name)) {
    case Split::kRows: {
      const int64_t n = static_cast<int64_t>(all.size()) / t;
      return {all.begin() + r * n, all.begin() + (r + 1) * n};
    }
    case Split::kColumns: {
      const int64_t out = shape[0], in = shape[1], w = in / t;
      std::vector<float> s;
      for (int64_t o = 0; o < out; ++o) {
        s.insert(s.end(), all.begin() + o * in + r * w, all.begin() + o * in + (r + 1) * w);
      }
      return s;
    }
    case Split::kReplicated:
      break;
  }
  return all;
}
inline std::vector<float> ShardOf(const std::string& name, const Tensor& dense, int r, int t) {
  return ShardOf(name, dense.ToVector(), dense.shape(), r, t);
}

inline float MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Norms and biases away from their initial 1 and 0, so that a bias added twice or a norm gradient lost
// shows in the numbers.
inline void Perturb(const std::vector<nn::Parameter*>& params, uint64_t seed = 9) {
  for (nn::Parameter* p : params) {
    if (p->value.ndim() == 1) tensor::FillNormal(p->value, tensor::SeedFor(seed, p->name().c_str()), 0.2f);
  }
}

// Stages B and F: one block's inputs for a seeded case. The width stays the test model's (h 32); the heads,
// the MLP's inner size and the sequence length are drawn so that t ranks divide heads and inner and
// `seq_multiple` divides seq, and the seeds of the weights, the norms and biases (Perturb), x and dy are
// drawn. Per row a drawn block costs at most about 1.3 times the default one (h 32, 8 heads, f 128, s 8), and
// N is at most 36 rows (the fixed cases used 8 to 24): milliseconds either way.
struct BlockInputs {
  nn::GptConfig cfg;
  int64_t rows = 0;  // N: `sequences` whole sequences of cfg.seq rows
  uint64_t norm_seed = 9, x_seed = 11, dy_seed = 12;
  int64_t sequences() const { return rows / cfg.seq; }
  // "h 32, 8 heads, inner 128, seq 8, N 16 (2 sequences), seeds: weights 5, norms 7, x 3, dy 4"
  std::string Label() const {
    return "h " + std::to_string(cfg.hidden) + ", " + std::to_string(cfg.heads) + " heads, inner " +
           std::to_string(cfg.inner) + ", seq " + std::to_string(cfg.seq) + ", N " + std::to_string(rows) +
           " (" + std::to_string(sequences()) + " sequences), seeds: weights " + std::to_string(cfg.seed) +
           ", norms " + std::to_string(norm_seed) + ", x " + std::to_string(x_seed) + ", dy " +
           std::to_string(dy_seed);
  }
};

inline BlockInputs DrawBlock(CaseRandom& rng, int t, int min_sequences = 1, int max_sequences = 3,
                             int seq_multiple = 1) {
  auto divisible = [](std::vector<int64_t> from, int64_t by) {
    std::vector<int64_t> out;
    for (int64_t v : from) {
      if (v % by == 0) out.push_back(v);
    }
    return out;
  };
  BlockInputs b;
  b.cfg.heads = rng.Pick(divisible({4, 8, 16}, t));
  b.cfg.inner = rng.Pick(divisible({96, 128, 160}, t));
  b.cfg.seq = rng.Pick(divisible({4, 8, 12}, seq_multiple));
  b.cfg.seed = static_cast<uint64_t>(rng.Int(1, 999999));
  b.rows = b.cfg.seq * rng.Int(min_sequences, max_sequences);
  b.norm_seed = static_cast<uint64_t>(rng.Int(1, 999999));
  b.x_seed = static_cast<uint64_t>(rng.Int(1, 999999));
  b.dy_seed = static_cast<uint64_t>(rng.Int(1, 999999));
  return b;
}

inline float MaxAbs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// The first index where `got` and `want` differ by more than tol (relative to want's largest magnitude, at
// least 1), or -1; a size mismatch is index 0 with *size_differs set.
inline int64_t FirstDiff(const std::vector<float>& got, const std::vector<float>& want, float tol,
                         bool* size_differs = nullptr) {
  if (size_differs != nullptr) *size_differs = got.size() != want.size();
  if (got.size() != want.size()) return 0;
  const float bound = tol * std::max(1.f, MaxAbs(want));
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= bound)) return static_cast<int64_t>(i);
  }
  return -1;
}

// "" when `got` equals `want` within tol (FirstDiff), else what differs: "element 37 (row 1, column 5) is
// 0.25, the dense one's 0.5" (`cols` > 0 names the row and column; `reference` names `want`), or the sizes.
inline std::string DiffText(const std::vector<float>& got, const std::vector<float>& want, float tol,
                            int64_t cols = 0, const std::string& reference = "the dense one") {
  bool size_differs = false;
  const int64_t i = FirstDiff(got, want, tol, &size_differs);
  if (i < 0) return "";
  if (size_differs) {
    return "it has " + std::to_string(got.size()) + " elements, " + reference + " " +
           std::to_string(want.size());
  }
  std::ostringstream out;
  out << "element " << i;
  if (cols > 0) out << " (row " << i / cols << ", column " << i % cols << ")";
  out << " is " << got[i] << ", " << reference << "'s " << want[i];
  return out.str();
}

// The precheck of the earlier labs' functions this lab links (labs/composition/lab.bzl: prior). A case
// checks exactly the ones its code path calls (on the solution) and no other: a student without a working
// ZeRO or 1F1B loses only the cases that use them (README, "Grader workflow"). Each function is checked once
// per process, on fixed inputs, and a wrong result, an error status and an exception (a stub throws
// NotImplementedError) all give the same "[prior work] ... -- fix labs/<lab>/<file>.cc first" failure
// instead of a Lab 7 difference or a raw exception in the test body.
namespace prior {

enum : unsigned {
  kColumnShard = 1u << 0,  // Lab 4, labs/parallel/tensor_parallel.cc
  kRowShard = 1u << 1,
  kGForward = 1u << 2,
  kFBackward = 1u << 3,
  kShardSize = 1u << 4,  // Lab 4, labs/parallel/zero.cc
  kShardOffset = 1u << 5,
  kOneFOneB = 1u << 6,  // Lab 5, labs/pipeline/schedule.cc
};

// What each code path of this lab calls, read off the solution: SequenceParallelBlock::Create shards with
// ColumnShard and RowShard (its regions are joined by its own gathers and reduce-scatters, not by f and g);
// TensorParallelBlock shards the same way, its Forward runs g and its Backward f; the planner sizes shards
// with ShardSize; Trainer3D builds TensorParallelBlocks (on every T, 1 included), a sharder (ShardSize and
// ShardOffset, ZeRO-1 and ZeRO-3 alike) and runs OneFOneB (on every P, 1 included). A case whose code path
// returns an argument error before any of them needs none.
inline constexpr unsigned kSpBlock = kColumnShard | kRowShard;
inline constexpr unsigned kTpBlockForward = kColumnShard | kRowShard | kGForward;
inline constexpr unsigned kTpBlock = kTpBlockForward | kFBackward;
inline constexpr unsigned kPlanner = kShardSize;
inline constexpr unsigned kTrainer = kTpBlock | kShardSize | kShardOffset | kOneFOneB;

// "" when `check` finds nothing wrong, else the failure message: what was expected, what came instead
// (a value, an error status or an exception), and the file to fix.
template <typename Check>
std::string Verdict(const std::string& expected, const std::string& file, Check check) {
  std::string got;
  try {
    got = check();
  } catch (const std::exception& e) {
    got = std::string("it threw: ") + e.what();
  } catch (...) {
    got = "it threw an exception that is not a std::exception";
  }
  if (got.empty()) return "";
  return "[prior work] " + expected + ", but " + got + " -- fix " + file + " first";
}

inline std::string Floats(const std::vector<float>& v) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << v[i];
  return out.str() + "]";
}

// The dense layer the shard checks split: W [6, 4] = 0..23 row by row, bias 100..105.
inline std::unique_ptr<nn::Linear> PrecheckLinear() {
  auto dense = std::make_unique<nn::Linear>("precheck", 4, 6, true, 1);
  for (int i = 0; i < 24; ++i) dense->weight().value.Set(i, static_cast<float>(i));
  for (int i = 0; i < 6; ++i) dense->bias()->value.Set(i, 100.f + i);
  return dense;
}

constexpr char kTensorParallel[] = "labs/parallel/tensor_parallel.cc";

inline const std::string& ColumnShardVerdict() {
  static const std::string verdict =
      Verdict("Lab 4 ColumnShard(W [6, 4], rank 1, n 2) must be rows 3..5 with their bias", kTensorParallel,
              []() -> std::string {
                auto dense = PrecheckLinear();
                auto col = parallel::ColumnShard(*dense, 1, 2);
                if (!col.ok()) return "it returned " + col.status().ToString();
                const std::vector<float> w = (*col)->weight().value.ToVector();
                if (w != std::vector<float>{12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23})
                  return "its weight is " + Floats(w);
                if ((*col)->bias() == nullptr) return "it has no bias";
                const std::vector<float> b = (*col)->bias()->value.ToVector();
                if (b != std::vector<float>{103, 104, 105}) return "its bias is " + Floats(b);
                return "";
              });
  return verdict;
}

inline const std::string& RowShardVerdict() {
  static const std::string verdict =
      Verdict("Lab 4 RowShard(W [6, 4], rank 1, n 2) must be columns 2..3 without bias", kTensorParallel,
              []() -> std::string {
                auto dense = PrecheckLinear();
                auto row = parallel::RowShard(*dense, 1, 2);
                if (!row.ok()) return "it returned " + row.status().ToString();
                const std::vector<float> w = (*row)->weight().value.ToVector();
                if (w != std::vector<float>{2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23})
                  return "its weight is " + Floats(w);
                if ((*row)->bias() != nullptr) return "it has a bias";
                return "";
              });
  return verdict;
}

// `op` (GForward or FBackward) on 2 ranks: rank r passes [1 + r, 10 r]; both must get [3, 10].
template <typename Op>
std::string SumsOverTwoRanks(Op op) {
  std::string wrong[2];
  auto statuses = comm::RunRanks(
      2,
      [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
        Tensor y = Tensor::FromVector({1, 2}, {1.f + rank, 10.f * rank});
        if (absl::Status st = op(c, s, y); !st.ok()) return st;
        if (y.ToVector() != std::vector<float>{3.f, 10.f}) {
          wrong[rank] = "rank " + std::to_string(rank) + " got " + Floats(y.ToVector());
        }
        return absl::OkStatus();
      },
      Options());
  if (const absl::Status first = comm::FirstError(statuses); !first.ok())
    return "it returned " + first.ToString();
  return !wrong[0].empty() ? wrong[0] : wrong[1];
}

inline const std::string& GForwardVerdict() {
  static const std::string verdict =
      Verdict("Lab 4 GForward must sum [1, 0] and [2, 10] over 2 ranks into [3, 10] on both", kTensorParallel,
              [] { return SumsOverTwoRanks(parallel::GForward); });
  return verdict;
}

inline const std::string& FBackwardVerdict() {
  static const std::string verdict =
      Verdict("Lab 4 FBackward must sum [1, 0] and [2, 10] over 2 ranks into [3, 10] on both",
              kTensorParallel, [] { return SumsOverTwoRanks(parallel::FBackward); });
  return verdict;
}

inline const std::string& ShardSizeVerdict() {
  static const std::string verdict =
      Verdict("Lab 4 ShardSize(10, 4) must be 3", "labs/parallel/zero.cc", []() -> std::string {
        const int64_t s = parallel::ShardSize(10, 4);
        return s == 3 ? "" : "it is " + std::to_string(s);
      });
  return verdict;
}

inline const std::string& ShardOffsetVerdict() {
  static const std::string verdict =
      Verdict("Lab 4 ShardOffset(10, 3, 4) must be 9", "labs/parallel/zero.cc", []() -> std::string {
        const int64_t o = parallel::ShardOffset(10, 3, 4);
        return o == 9 ? "" : "it is " + std::to_string(o);
      });
  return verdict;
}

inline const std::string& OneFOneBVerdict() {
  static const std::string verdict =
      Verdict("Lab 5 OneFOneB(2, 4) stage 0 must be 'F0 F1 BW0 F2 BW1 F3 BW2 BW3'",
              "labs/pipeline/schedule.cc", []() -> std::string {
                auto sched = pipeline::OneFOneB(2, 4);
                if (!sched.ok()) return "it returned " + sched.status().ToString();
                if (sched->stages.size() != 2)
                  return "it has " + std::to_string(sched->stages.size()) + " stages";
                std::string row0;
                for (const pipeline::Op& op : sched->stages[0])
                  row0 += (row0.empty() ? "" : " ") + pipeline::ToString(op);
                return row0 == "F0 F1 BW0 F2 BW1 F3 BW2 BW3" ? "" : "it is '" + row0 + "'";
              });
  return verdict;
}

}  // namespace prior

// Checks the prior functions in `uses` (prior::k... bits), each once per process; adds one failure per
// function that is off (every case that uses it reports it again) and returns false when any is.
inline bool PriorWorkPrecheck(unsigned uses) {
  using Check = const std::string& (*)();
  static const std::pair<unsigned, Check> kChecks[] = {
      {prior::kColumnShard, prior::ColumnShardVerdict}, {prior::kRowShard, prior::RowShardVerdict},
      {prior::kGForward, prior::GForwardVerdict},       {prior::kFBackward, prior::FBackwardVerdict},
      {prior::kShardSize, prior::ShardSizeVerdict},     {prior::kShardOffset, prior::ShardOffsetVerdict},
      {prior::kOneFOneB, prior::OneFOneBVerdict},
  };
  bool ok = true;
  for (const auto& [bit, check] : kChecks) {
    if ((uses & bit) == 0) continue;
    const std::string& verdict = check();
    if (verdict.empty()) continue;
    ADD_FAILURE() << verdict;
    ok = false;
  }
  return ok;
}

// ---------------------------------------------------------------------------------------------------------
// Stage C and D: the dense single-rank reference and one training run on a layout.
// ---------------------------------------------------------------------------------------------------------

// The AdamW of the equivalence tests. eps = 0.1 makes an update nearly linear in its gradient (typical
// gradients are ~1e-2), so a gradient off by a factor moves a parameter by ~1e-3, far above the tolerance,
// and a tiny gradient cannot flip an update's sign.
inline nn::AdamWConfig Adam() {
  nn::AdamWConfig a;
  a.lr = 0.05f;
  a.beta1 = 0.9f;
  a.beta2 = 0.999f;
  a.eps = 0.1f;
  a.weight_decay = 0.01f;
  return a;
}

inline constexpr int64_t kBatch = 8;  // sequences per step
inline constexpr int kSteps = 3;
inline constexpr uint64_t kDataSeed = 1;

// One training run's inputs: the model (the test model's shape; its seed drawn), the layout, and the seed of
// the synthetic data. A seeded case draws the seeds and, among layouts of the same world size, the layout.
struct Training {
  nn::GptConfig cfg;
  Layout layout;
  uint64_t data_seed = kDataSeed;
  // "(dp 2, pp 2, tp 2), m 4, zero1, model seed 17, data seed 5" (", tied embeddings" when tied)
  std::string Label() const {
    return Str(layout.grid) + ", m " + std::to_string(layout.micro_batches) + ", " + Name(layout.sharding) +
           ", model seed " + std::to_string(cfg.seed) + ", data seed " + std::to_string(data_seed) +
           (cfg.tie_embeddings ? ", tied embeddings" : "");
  }
};

// The model's and the data's seeds (the shapes stay the test model's: its cost is the cases' budget).
inline void DrawSeeds(CaseRandom& rng, Training* t) {
  t->cfg.seed = static_cast<uint64_t>(rng.Int(1, 999999));
  t->data_seed = static_cast<uint64_t>(rng.Int(1, 999999));
}

// Every grid of `world` ranks the trainer accepts for `cfg` and kBatch sequences (L % pp, heads % tp,
// inner % tp and kBatch % dp all 0), by dp, then pp.
inline std::vector<GridShape> ShapesOf(int world, const nn::GptConfig& cfg = nn::GptConfig{}) {
  std::vector<GridShape> out;
  for (int dp = 1; dp <= world; ++dp) {
    for (int pp = 1; dp * pp <= world; ++pp) {
      if (world % (dp * pp) != 0) continue;
      const int tp = world / (dp * pp);
      if (kBatch % dp == 0 && cfg.layers % pp == 0 && cfg.heads % tp == 0 && cfg.inner % tp == 0) {
        out.push_back({dp, pp, tp});
      }
    }
  }
  return out;
}

// The micro-batch counts a grid can run kBatch sequences with: the divisors of kBatch / dp, ascending.
inline std::vector<int> MicroBatchesOf(const GridShape& g) {
  std::vector<int> out;
  for (int m = 1; m <= kBatch / g.dp; ++m) {
    if ((kBatch / g.dp) % m == 0) out.push_back(m);
  }
  return out;
}

inline nn::Batch GlobalBatch(const nn::GptConfig& cfg, int step, uint64_t data_seed = kDataSeed) {
  return nn::SyntheticSequences(cfg.vocab, cfg.seq, data_seed, step, kBatch);
}

struct DenseRun {
  std::vector<float> losses;                         // per step
  std::map<std::string, std::vector<float>> values;  // after the last step
  std::map<std::string, tensor::Shape> shapes;
};

// nn::Gpt trained on the whole batch of every step; computed once per model, data and binary.
inline const DenseRun& Dense(const nn::GptConfig& cfg, uint64_t data_seed = kDataSeed) {
  static std::map<std::tuple<bool, int, uint64_t, uint64_t>, DenseRun> cache;
  const auto key = std::make_tuple(cfg.tie_embeddings, cfg.layers, cfg.seed, data_seed);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  DenseRun run;
  nn::Gpt model(cfg);
  nn::AdamW opt(model.Parameters(), Adam());
  for (int step = 0; step < kSteps; ++step) {
    model.ZeroGrad();
    run.losses.push_back(model.Forward(GlobalBatch(cfg, step, data_seed)));
    model.Backward();
    opt.Step();
  }
  for (nn::Parameter* p : model.Parameters()) {
    run.values[p->name()] = p->value.ToVector();
    run.shapes[p->name()] = p->value.shape();
  }
  return cache.emplace(key, std::move(run)).first->second;
}

// What one rank saw in a run.
struct RankRun {
  Coord coord;
  std::vector<StepResult> steps;
  std::map<std::string, std::vector<float>> values;  // LocalParameters after the last step
  Ledger ledger;                                     // of the last step
  MemoryUse after_create;                            // memory right after Trainer3D::Create
};

// Runs `steps` steps of Trainer3D on world = layout's ranks, every rank with its own tracker; measures the
// ledger of the last step. Returns the first rank error, or one RankRun per global rank.
inline absl::StatusOr<std::vector<RankRun>> RunLayout(const Training& t, int steps = kSteps) {
  const nn::GptConfig& cfg = t.cfg;
  const Layout& layout = t.layout;
  const int world = layout.grid.world();
  std::vector<RankRun> runs(world);
  auto statuses = comm::RunRanks(
      world,
      [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        tensor::MemoryTracker tracker("rank " + std::to_string(rank));
        tensor::ScopedMemoryTracker scope(&tracker);
        auto grid = ProcessGrid::Create(comm, layout.grid);
        if (!grid.ok()) return grid.status();
        RankRun& run = runs[rank];
        run.coord = (*grid)->coord();
        {
          auto trainer = Trainer3D::Create(**grid, stream, cfg, layout, kBatch, Adam());
          if (!trainer.ok()) return trainer.status();
          for (tensor::MemCategory c : tensor::kAllMemCategories) {
            run.after_create.current[static_cast<int>(c)] = tracker.current(c);
          }
          for (int step = 0; step < steps; ++step) {
            if (step == steps - 1) ResetLedger(**grid, tracker);
            auto r = (*trainer)->Step(GlobalBatch(cfg, step, t.data_seed));
            if (!r.ok()) return r.status();
            run.steps.push_back(*r);
          }
          run.ledger = MeasureLedger(**grid, tracker);
          auto values = (*trainer)->LocalParameters();
          if (!values.ok()) return values.status();
          run.values = std::move(*values);
        }
        return absl::OkStatus();
      },
      Options());
  absl::Status first = comm::FirstError(statuses);
  if (!first.ok()) return first;
  return runs;
}

struct Equivalence {
  float max_dloss = 0, max_dparam = 0;
  int worst_step = 0;  // the step with max_dloss
  std::string worst;   // the parameter with max_dparam, and the rank that holds it
};

// Each step's loss (the mean over dp replicas of the last stage's) and every rank's every parameter shard
// against the dense run. Adds a failure when a rank reports a loss off the last stage, a rank lacks a
// parameter or holds one the dense model lacks.
inline Equivalence Compare(const Training& t, const std::vector<RankRun>& runs) {
  const DenseRun& dense = Dense(t.cfg, t.data_seed);
  Equivalence e;
  const GridShape& g = t.layout.grid;
  for (int step = 0; step < static_cast<int>(dense.losses.size()); ++step) {
    double sum = 0;
    int count = 0;
    for (size_t rank = 0; rank < runs.size(); ++rank) {
      const RankRun& r = runs[rank];
      if (r.coord.pp == g.pp - 1 && r.coord.tp == 0) {
        EXPECT_TRUE(r.steps[step].has_loss) << t.Label() << ": rank " << rank << " is on the last stage, "
                                            << "but its step " << step << " has no loss" << Again();
        sum += r.steps[step].loss;
        ++count;
      } else if (r.coord.pp != g.pp - 1) {
        EXPECT_FALSE(r.steps[step].has_loss)
            << t.Label() << ": rank " << rank << " reports a loss, but only the last stage knows it"
            << Again();
      }
    }
    if (count != g.dp) {
      ADD_FAILURE() << t.Label() << ": losses from " << count << " replicas, expected " << g.dp << Again();
    }
    const float d = static_cast<float>(std::fabs(sum / count - dense.losses[step]));
    if (d > e.max_dloss) e.max_dloss = d, e.worst_step = step;
  }
  std::map<std::string, int> seen;
  for (size_t rank = 0; rank < runs.size(); ++rank) {
    const RankRun& r = runs[rank];
    for (const auto& [name, values] : r.values) {
      auto it = dense.values.find(name);
      if (it == dense.values.end()) {
        ADD_FAILURE() << t.Label() << ": rank " << rank << " holds '" << name
                      << "', which the dense model does not have" << Again();
        continue;
      }
      ++seen[name];
      const float d = MaxDiff(values, ShardOf(name, it->second, dense.shapes.at(name), r.coord.tp, g.tp));
      if (d > e.max_dparam) {
        e.max_dparam = d;
        e.worst = name + " on rank " + std::to_string(rank) + " (dp " + std::to_string(r.coord.dp) + ", pp " +
                  std::to_string(r.coord.pp) + ", tp " + std::to_string(r.coord.tp) + ")";
      }
    }
  }
  for (const auto& [name, v] : dense.values) {
    if (seen[name] == 0) ADD_FAILURE() << t.Label() << ": no rank holds '" << name << "'" << Again();
  }
  return e;
}

// The losses and parameters of a run against single-rank training of the same model on the same data,
// each within `tolerance`; the failure names the run's inputs, the step or parameter that is off and by how
// much (a mismatch in size counts as infinitely off).
inline void ExpectEquivalent(const Training& t, const std::vector<RankRun>& runs, float tolerance,
                             const std::string& what = "") {
  const Equivalence eq = Compare(t, runs);
  std::printf("%s%s: max |dloss| %.3g, max |dparam| %.3g (%s)\n", what.c_str(), t.Label().c_str(),
              eq.max_dloss, eq.max_dparam, eq.worst.c_str());
  EXPECT_LE(eq.max_dloss, tolerance) << what << t.Label() << ": step " << eq.worst_step
                                     << "'s loss differs from single-rank training's by " << eq.max_dloss
                                     << Again();
  EXPECT_LE(eq.max_dparam, tolerance)
      << what << t.Label() << ": after " << kSteps << " steps " << eq.worst
      << " differs from single-rank training's by " << eq.max_dparam << Again();
}

// The fields of `got` that differ from `want`, with got's values: "calls 18, all-gather bytes 1024".
inline std::string Differences(const Traffic& got, const Traffic& want) {
  std::string out;
  auto field = [&](const char* name, uint64_t g, uint64_t w) {
    if (g != w) out += (out.empty() ? "" : ", ") + std::string(name) + " " + std::to_string(g);
  };
  field("calls", got.calls, want.calls);
  field("all-reduce bytes", got.all_reduce, want.all_reduce);
  field("reduce-scatter bytes", got.reduce_scatter, want.reduce_scatter);
  field("all-gather bytes", got.all_gather, want.all_gather);
  field("other collective bytes", got.other, want.other);
  field("sends", got.sends, want.sends);
  field("recvs", got.recvs, want.recvs);
  field("bytes sent", got.bytes_sent, want.bytes_sent);
  field("bytes received", got.bytes_received, want.bytes_received);
  return out;
}

// First in a case that calls earlier labs' functions, with the pieces its code path runs:
// PRIOR_WORK_OR_RETURN(testing::prior::kTpBlock). A case that calls none has no precheck.
#define PRIOR_WORK_OR_RETURN(uses)                                         \
  do {                                                                     \
    if (!::distlab::composition::testing::PriorWorkPrecheck(uses)) return; \
  } while (0)

}  // namespace distlab::composition::testing

#endif  // DISTLAB_TESTS_COMPOSITION_TEST_UTIL_H_
