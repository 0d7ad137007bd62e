// Lab 4 demo: one TinyLM training run under single-process, DP (bucketed), TP, ZeRO-1/2/3 on 4 ranks.
//
//   bazel run --config=solution //demos/parallel:demo -- --out DIR
//
// Prints the loss of each strategy (they must agree), a table of measured vs predicted memory and
// communication per rank, and writes DIR/parallel-loss.svg, DIR/parallel-memory.svg and DIR/parallel.json.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "labs/parallel/data_parallel.h"
#include "labs/parallel/memory_model.h"
#include "labs/parallel/tensor_parallel.h"
#include "labs/parallel/zero.h"
#include "nlohmann/json.hpp"
#include "reference/base/status.h"
#include "reference/nn/model.h"
#include "reference/nn/optim.h"
#include "reference/tensor/ops.h"
#include "reference/viz/viz.h"
#include "tools/base/cli.h"

namespace distlab::parallel {
namespace {

using tensor::MemCategory;
using tensor::Tensor;

struct Result {
  std::string name;
  std::vector<double> loss;                                   // mean over the global batch, per step
  double params = 0, grads = 0, optim = 0, comm_buffers = 0;  // bytes on rank 0 after the run
  double grads_peak = 0, comm_peak = 0;  // highest gradient / communication bytes during the training steps
  double predicted_states = 0;           // bytes, from the formulas
  double collective_bytes = 0;           // S summed over one step's collectives, rank 0
  double wire_bytes = 0, predicted_wire = 0;  // ring bytes sent per rank per step
};

constexpr int kRanks = 4;
constexpr int64_t kBatch = 32;
constexpr uint64_t kDataSeed = 11;

nn::TinyLMConfig Config() {
  return {/*vocab=*/32, /*hidden=*/16, /*inner=*/64,
          /*layers=*/2, false,         3};
}
nn::AdamWConfig Adam() {
  nn::AdamWConfig a;
  a.lr = 1e-2f;
  return a;
}
nn::Batch RankRows(int step, int rank) {
  const int64_t per = kBatch / kRanks;
  return nn::Slice(nn::SyntheticBatch(Config().vocab, kDataSeed, step, kBatch), rank * per, (rank + 1) * per);
}
void Snapshot(const tensor::MemoryTracker& t, Result& r) {
  r.params = t.current(MemCategory::kParameters);
  r.grads = t.current(MemCategory::kGradients);
  r.optim = t.current(MemCategory::kOptimizerState);
  r.comm_buffers = t.current(MemCategory::kCommBuffers);
  r.grads_peak = t.peak(MemCategory::kGradients);
  r.comm_peak = t.peak(MemCategory::kCommBuffers);
}

// Exercise E1's estimate: B_simple from kNoiseExamples per-example gradients (one backward per row) of a
// fixed batch, at the model's current parameters.
constexpr int64_t kNoiseExamples = 64;
std::string NoiseScaleAt(nn::TinyLM& model) {
  const nn::Batch rows = nn::SyntheticBatch(Config().vocab, /*seed=*/99, 0, kNoiseExamples);
  std::vector<std::vector<float>> grads;
  for (int64_t i = 0; i < kNoiseExamples; ++i) {
    model.ZeroGrad();
    model.Forward(nn::Slice(rows, i, i + 1));
    model.Backward();
    std::vector<float> g;
    for (nn::Parameter* p : model.Parameters()) {
      const std::vector<float> v = p->grad.ToVector();
      g.insert(g.end(), v.begin(), v.end());
    }
    grads.push_back(std::move(g));
  }
  model.ZeroGrad();
  model.ClearCache();
  absl::StatusOr<NoiseScale> ns = GradientNoiseScale(grads);
  if (!ns.ok()) return ns.status().ToString();
  char line[160];
  std::snprintf(line, sizeof line, "B_simple = %.1f (tr(Sigma) = %.3g, |G|^2 = %.3g)", ns->b_simple,
                ns->trace_sigma, ns->grad_norm_sq);
  return line;
}
std::string g_noise_first, g_noise_last;

Result Single(int steps, int64_t psi) {
  Result r{"single"};
  tensor::MemoryTracker tracker;
  tensor::ScopedMemoryTracker scope(&tracker);
  nn::TinyLM model(Config());
  nn::AdamW opt(model.Parameters(), Adam());
  g_noise_first = NoiseScaleAt(model);
  for (int s = 0; s < steps; ++s) {
    model.ZeroGrad();
    r.loss.push_back(model.Forward(nn::SyntheticBatch(Config().vocab, kDataSeed, s, kBatch)));
    model.Backward();
    opt.Step();
  }
  g_noise_last = NoiseScaleAt(model);
  model.ClearCache();
  Snapshot(tracker, r);
  r.predicted_states = ZeroModelStates(psi, 1, 0, false).total();
  return r;
}

// Runs `body` on kRanks ranks; rank-local losses are averaged into r.loss (equal slices: the global mean).
absl::Status RunStrategy(
    Result& r, int steps,
    const std::function<absl::Status(int, comm::Comm&, comm::Stream&, std::vector<double>&,
                                     tensor::MemoryTracker&)>& body) {
  std::vector<std::vector<double>> losses(kRanks);
  std::vector<std::unique_ptr<tensor::MemoryTracker>> trackers;
  for (int i = 0; i < kRanks; ++i) trackers.push_back(std::make_unique<tensor::MemoryTracker>());
  std::vector<double> coll(kRanks);
  RETURN_IF_ERROR(comm::FirstError(comm::RunRanks(kRanks, [&](int rank, comm::Comm& c, comm::Stream& s) {
    tensor::ScopedMemoryTracker scope(trackers[rank].get());
    absl::Status st = body(rank, c, s, losses[rank], *trackers[rank]);
    coll[rank] = static_cast<double>(c.stats().collective_bytes);
    return st;
  })));
  r.loss.assign(steps, 0.0);
  for (int k = 0; k < kRanks; ++k)
    for (int s = 0; s < steps; ++s) r.loss[s] += losses[k][s] / kRanks;
  r.collective_bytes = coll[0];
  return absl::OkStatus();
}

absl::StatusOr<Result> DataParallel(int steps, int64_t psi) {
  Result r{"DP (bucketed)"};
  RETURN_IF_ERROR(RunStrategy(r, steps,
                              [&](int rank, comm::Comm& c, comm::Stream& s, std::vector<double>& loss,
                                  tensor::MemoryTracker& tracker) -> absl::Status {
                                nn::TinyLM model(Config());
                                ASSIGN_OR_RETURN(
                                    auto ddp, BucketedDataParallel::Create(c, s, model.Parameters(), 4096));
                                nn::AdamW opt(model.Parameters(), Adam());
                                for (int step = 0; step < steps; ++step) {
                                  c.ResetStats();
                                  model.ZeroGrad();
                                  ddp->BeginStep();
                                  loss.push_back(model.Forward(RankRows(step, rank)));
                                  model.Backward();
                                  RETURN_IF_ERROR(ddp->FinishGradientSync());
                                  opt.Step();
                                }
                                model.ClearCache();
                                if (rank == 0) Snapshot(tracker, r);
                                return absl::OkStatus();
                              }));
  r.predicted_states = ZeroModelStates(psi, kRanks, 0, false).total();
  r.wire_bytes = 2.0 * r.collective_bytes * (kRanks - 1) / kRanks;  // all-reduce: 2 S (n-1)/n
  r.predicted_wire = 4.0 * CommElementsPerRank(psi, kRanks, 0);
  return r;
}

// TP over the MLP blocks; the embedding and the head are replicated (every rank sees the whole batch).
absl::StatusOr<Result> TensorParallel(int steps, int64_t psi) {
  Result r{"TP (MLP blocks)"};
  int64_t replicated = 0, sharded = 0;
  RETURN_IF_ERROR(
      RunStrategy(r, steps,
                  [&](int rank, comm::Comm& c, comm::Stream& s, std::vector<double>& loss,
                      tensor::MemoryTracker& tracker) -> absl::Status {
                    nn::TinyLMConfig cfg = Config();
                    std::vector<std::unique_ptr<TensorParallelMlp>> blocks;
                    std::vector<nn::Parameter*> params;
                    nn::Embedding embedding("embed", cfg.vocab, cfg.hidden, cfg.seed);
                    nn::Linear head("head", cfg.hidden, cfg.vocab, false, cfg.seed);
                    {
                      // Shard the blocks of a dense TinyLM (built and dropped here so only the shards stay
                      // counted).
                      nn::TinyLM dense(cfg);
                      for (int l = 0; l < cfg.layers; ++l) {
                        ASSIGN_OR_RETURN(auto b, TensorParallelMlp::Create(c, s, dense.block(l)));
                        blocks.push_back(std::move(b));
                      }
                      tensor::Copy(dense.embedding().weight().value, embedding.weight().value);
                      tensor::Copy(dense.head()->weight().value, head.weight().value);
                    }
                    tracker.ResetPeak();  // the dense model is gone; measure the sharded steps only
                    params.push_back(&embedding.weight());
                    for (auto& b : blocks)
                      for (nn::Parameter* p : b->Parameters()) params.push_back(p);
                    params.push_back(&head.weight());
                    if (rank == 0) {
                      // Replicated on every rank: embedding, head, each block's fc2 bias; the rest is 1/n of
                      // the blocks.
                      replicated = embedding.weight().numel() + head.weight().numel();
                      for (auto& b : blocks) replicated += b->Parameters().back()->numel();
                      sharded = nn::CountParameters(params) - replicated;
                    }
                    nn::AdamW opt(params, Adam());
                    nn::SoftmaxCrossEntropy ce;
                    for (int step = 0; step < steps; ++step) {
                      c.ResetStats();
                      nn::ZeroGrads(params);
                      const nn::Batch batch = nn::SyntheticBatch(cfg.vocab, kDataSeed, step, kBatch);
                      Tensor x = embedding.Forward(batch.ids);
                      for (auto& b : blocks) {
                        ASSIGN_OR_RETURN(Tensor y, b->Forward(x));
                        tensor::Axpy(1.f, x, y);
                        x = std::move(y);
                      }
                      loss.push_back(ce.Forward(head.Forward(x), batch.targets));
                      Tensor d = head.Backward(ce.Backward());
                      for (int l = cfg.layers - 1; l >= 0; --l) {
                        ASSIGN_OR_RETURN(Tensor dd, blocks[l]->Backward(d));
                        tensor::Axpy(1.f, d, dd);
                        d = std::move(dd);
                      }
                      embedding.Backward(d);
                      opt.Step();
                    }
                    if (rank == 0) Snapshot(tracker, r);
                    return absl::OkStatus();
                  }));
  r.predicted_states = 16.0 * (replicated + sharded);  // f32: 4 + 4 + 8 bytes per stored parameter
  (void)psi;
  r.wire_bytes = 2.0 * r.collective_bytes * (kRanks - 1) / kRanks;
  // Per block: one all-reduce of N h floats forward, one backward.
  r.predicted_wire = 2.0 * Config().layers * 2 * kBatch * Config().hidden * 4.0 * (kRanks - 1) / kRanks;
  return r;
}

absl::StatusOr<Result> Zero(ZeroStage stage, int steps, int64_t psi) {
  const int z = static_cast<int>(stage);
  Result r{"ZeRO-" + std::to_string(z)};
  RETURN_IF_ERROR(
      RunStrategy(r, steps,
                  [&](int rank, comm::Comm& c, comm::Stream& s, std::vector<double>& loss,
                      tensor::MemoryTracker& tracker) -> absl::Status {
                    nn::TinyLM model(Config());
                    ASSIGN_OR_RETURN(auto trainer, ZeroTrainer::Create(c, s, model, stage, Adam()));
                    tracker.ResetPeak();  // the model was built with full gradients; measure the steps only
                    for (int step = 0; step < steps; ++step) {
                      c.ResetStats();
                      ASSIGN_OR_RETURN(float l, trainer->Step(RankRows(step, rank)));
                      loss.push_back(l);
                    }
                    if (rank == 0) Snapshot(tracker, r);
                    return absl::OkStatus();
                  }));
  r.predicted_states = ZeroModelStates(psi, kRanks, z, false).total();
  r.wire_bytes = r.collective_bytes * (kRanks - 1) / kRanks;  // RS and AG: S (n-1)/n each
  r.predicted_wire = 4.0 * CommElementsPerRank(psi, kRanks, z);
  return r;
}

int Main(int argc, char** argv) {
  distlab::cli::App app{"Lab 4 demo: DP, TP and ZeRO-1/2/3 on 4 ranks against single-process training."};
  std::string out;
  int steps = 30;
  app.add_option("--out", out, "directory for the SVG figures and parallel.json");
  app.add_option("--steps", steps, "training steps")->check(distlab::cli::PositiveNumber());
  DISTLAB_CLI_PARSE(app, argc, argv);

  nn::TinyLM probe(Config());
  const int64_t psi = nn::CountParameters(probe.Parameters());
  std::vector<Result> results{Single(steps, psi)};
  auto add = [&](absl::StatusOr<Result> r) {
    if (!r.ok()) {
      std::fprintf(stderr, "demo: %s\n", r.status().ToString().c_str());
      return false;
    }
    results.push_back(*std::move(r));
    return true;
  };
  if (!add(DataParallel(steps, psi)) || !add(TensorParallel(steps, psi)) ||
      !add(Zero(ZeroStage::kZero1, steps, psi)) || !add(Zero(ZeroStage::kZero2, steps, psi)) ||
      !add(Zero(ZeroStage::kZero3, steps, psi))) {
    return 1;
  }

  std::printf(
      "TinyLM: V=%lld h=%lld f=%lld L=%d, Psi = %lld parameters; %d ranks, global batch %lld, %d steps\n\n",
      static_cast<long long>(Config().vocab), static_cast<long long>(Config().hidden),
      static_cast<long long>(Config().inner), Config().layers, static_cast<long long>(psi), kRanks,
      static_cast<long long>(kBatch), steps);
  std::printf("%-16s %10s %12s %10s %10s %10s %10s %12s %12s %12s %12s %12s\n", "strategy", "loss",
              "|dloss|max", "params B", "grads B", "optim B", "comm B", "states B", "predicted B",
              "wire B/step", "grads peak B", "comm peak B");
  nlohmann::json js = nlohmann::json::array();
  for (const Result& r : results) {
    double dmax = 0;
    for (size_t s = 0; s < r.loss.size(); ++s)
      dmax = std::max(dmax, std::fabs(r.loss[s] - results[0].loss[s]));
    const double states = r.params + r.grads + r.optim;
    std::printf("%-16s %10.4f %12.2e %10.0f %10.0f %10.0f %10.0f %12.0f %12.0f %7.0f/%-6.0f %12.0f %12.0f\n",
                r.name.c_str(), r.loss.back(), dmax, r.params, r.grads, r.optim, r.comm_buffers, states,
                r.predicted_states, r.wire_bytes, r.predicted_wire, r.grads_peak, r.comm_peak);
    js.push_back({{"strategy", r.name},
                  {"loss", r.loss},
                  {"max_loss_diff_vs_single", dmax},
                  {"params_bytes", r.params},
                  {"grads_bytes", r.grads},
                  {"optimizer_bytes", r.optim},
                  {"comm_buffer_bytes", r.comm_buffers},
                  {"states_bytes", states},
                  {"grads_peak_bytes", r.grads_peak},
                  {"comm_peak_bytes", r.comm_peak},
                  {"predicted_states_bytes", r.predicted_states},
                  {"collective_payload_bytes", r.collective_bytes},
                  {"wire_bytes_per_rank", r.wire_bytes},
                  {"predicted_wire_bytes_per_rank", r.predicted_wire}});
  }
  std::printf(
      "\nwire B/step: measured/predicted ring bytes each rank sends per step "
      "(DP, Z1, Z2: 2 Psi (n-1)/n floats; Z3: 3 Psi (n-1)/n).\n"
      "grads/comm peak B: the highest bytes during the steps (ZeRO: after Create). ZeRO-2 reduce-scatters "
      "each unit during backward: its gradient peak is the shards plus one unit, not 4 Psi.\n");
  std::printf(
      "\ngradient noise scale from %lld per-example gradients (exercise E1), global batch %lld:\n"
      "  step 0:  %s\n  step %d: %s\n",
      static_cast<long long>(kNoiseExamples), static_cast<long long>(kBatch), g_noise_first.c_str(), steps,
      g_noise_last.c_str());
  if (out.empty()) return 0;

  // The curves lie on top of each other (that is the point): the legend gives each one's largest distance
  // from single-process training, which the eye cannot.
  viz::LinePlot plot;
  plot.Title("TinyLM loss: every strategy on 4 ranks follows single-process training")
      .XLabel("step")
      .YLabel("loss (mean cross-entropy)");
  for (const Result& r : results) {
    std::vector<double> x(r.loss.size());
    double dmax = 0;
    for (size_t s = 0; s < x.size(); ++s) {
      x[s] = static_cast<double>(s);
      dmax = std::max(dmax, std::fabs(r.loss[s] - results[0].loss[s]));
    }
    const std::string shortname = r.name == "DP (bucketed)"     ? "DP"
                                  : r.name == "TP (MLP blocks)" ? "TP"
                                                                : r.name;
    char name[80];
    if (r.name == "single") {
      std::snprintf(name, sizeof name, "single process");
    } else {
      std::snprintf(name, sizeof name, "%s: max diff %.0e", shortname.c_str(), dmax);
    }
    plot.AddSeries(name, x, r.loss, r.name == "single");
  }
  viz::BarChart bars;
  std::vector<std::string> cats;
  std::vector<double> measured, predicted;
  for (const Result& r : results) {
    // Short category names: the long ones ("DP (bucketed)", "TP (MLP blocks)") ran into each other.
    cats.push_back(r.name == "DP (bucketed)" ? "DP" : r.name == "TP (MLP blocks)" ? "TP (MLP)" : r.name);
    measured.push_back((r.params + r.grads + r.optim) / 1024.0);
    predicted.push_back(r.predicted_states / 1024.0);
  }
  bars.Title("Model states per rank (KiB), " + std::to_string(kRanks) +
             " ranks, Psi = " + std::to_string(psi) + ", f32 + AdamW")
      .YLabel("KiB")
      .Categories(cats)
      .AddSeries("measured (tracker)", measured)
      .AddSeries("predicted (formula)", predicted);
  for (const auto& [name, w] :
       {std::make_pair("parallel-loss.svg", plot.Write(out + "/parallel-loss.svg")),
        std::make_pair("parallel-memory.svg", bars.Write(out + "/parallel-memory.svg"))}) {
    if (!w.ok()) {
      std::fprintf(stderr, "demo: %s: %s\n", name, w.error.c_str());
      return 1;
    }
  }
  std::ofstream(out + "/parallel.json") << nlohmann::json{{"parameters", psi},
                                                          {"ranks", kRanks},
                                                          {"strategies", js},
                                                          {"noise_scale_step0", g_noise_first},
                                                          {"noise_scale_last", g_noise_last}}
                                               .dump(2)
                                        << "\n";
  std::printf("wrote %s/parallel-loss.svg, parallel-memory.svg, parallel.json\n", out.c_str());
  return 0;
}

}  // namespace
}  // namespace distlab::parallel

int main(int argc, char** argv) { return distlab::parallel::Main(argc, argv); }
