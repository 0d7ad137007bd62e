// Lab 7 demo: a small GPT trained on a dp x pp x tp grid of threads, held to single-rank training and to
// the ledger's formulas; the FSDP-pipeline conflict measured.
//
//   bazel run --config=solution //demos/composition:demo -- --out DIR
//
// Prints (1) the (2, 2, 2) grid's coordinates and groups, (2) the equivalence table: layout -> max |dloss|,
// max |dparam| against nn::Gpt trained on the same batches (3 steps, B = 8), (3) the ledger of one step of
// (2, 2, 2), m = 2, per axis, measured beside the formulas of notes/07-composition.md section 4, (4) the
// conflict: dp payload and peak parameter memory of ZeRO-1, ZeRO-3 reshard and ZeRO-3 keep on (2, 2, 1) for
// m = 1, 2, 4, (5) sequence parallelism on one block (stage F): its cache and tp traffic beside stage B's for
// T = 1, 2, 4, 8, (6) the planner's table for the test model on 8 ranks and for a Llama-3-8B-sized model on
// 64 GPUs: the fastest layouts that fit, the fastest of each tp size, and the pick. Writes
// DIR/composition-grid.svg, DIR/composition-sp-memory.svg, DIR/composition-timeline.svg (one step of (2, 2,
// 2), every rank's ops and its tp, pp and dp communication from the comm trace events) and DIR/summary.json.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "labs/composition/fsdp_pipeline.h"
#include "labs/composition/grid.h"
#include "labs/composition/ledger.h"
#include "labs/composition/planner.h"
#include "labs/composition/sp_block.h"
#include "labs/composition/tp_block.h"
#include "labs/composition/train3d.h"
#include "nlohmann/json.hpp"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "reference/nn/optim.h"
#include "reference/nn/transformer.h"
#include "reference/tensor/memory.h"
#include "reference/tensor/ops.h"
#include "reference/tensor/random.h"
#include "reference/trace/trace.h"
#include "reference/viz/viz.h"
#include "tools/base/cli.h"

namespace cp = distlab::composition;
namespace nn = distlab::nn;
namespace tensor = distlab::tensor;
namespace comm = distlab::comm;
namespace trace = distlab::trace;
namespace viz = distlab::viz;
using cp::Axis;
using tensor::MemCategory;

namespace {

constexpr int64_t kBatch = 8;  // sequences per step
constexpr int kSteps = 3;

void Die(const absl::Status& st) {
  std::fprintf(stderr, "demo: %s\n", std::string(st.message()).c_str());
  std::exit(1);
}

nn::AdamWConfig Adam() {  // the hidden tests' AdamW
  nn::AdamWConfig a;
  a.lr = 0.05f;
  a.eps = 0.1f;
  a.weight_decay = 0.01f;
  return a;
}

nn::Batch GlobalBatch(const nn::GptConfig& cfg, int step) {
  return nn::SyntheticSequences(cfg.vocab, cfg.seq, /*seed=*/1, step, kBatch);
}

std::string Label(const cp::Layout& l) {
  return "(" + std::to_string(l.grid.dp) + ", " + std::to_string(l.grid.pp) + ", " +
         std::to_string(l.grid.tp) + "), m " + std::to_string(l.micro_batches) + ", " + cp::Name(l.sharding);
}

struct Dense {
  std::vector<float> losses;
  std::map<std::string, std::vector<float>> values;
  std::map<std::string, tensor::Shape> shapes;
};

Dense TrainDense(const nn::GptConfig& cfg) {
  Dense d;
  nn::Gpt model(cfg);
  nn::AdamW opt(model.Parameters(), Adam());
  for (int step = 0; step < kSteps; ++step) {
    model.ZeroGrad();
    d.losses.push_back(model.Forward(GlobalBatch(cfg, step)));
    model.Backward();
    opt.Step();
  }
  for (nn::Parameter* p : model.Parameters()) {
    d.values[p->name()] = p->value.ToVector();
    d.shapes[p->name()] = p->value.shape();
  }
  return d;
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Rank r of t's part of a dense parameter (tp_block.h: column-parallel by rows, row-parallel by columns).
std::vector<float> ShardOf(const std::string& name, const std::vector<float>& all, const tensor::Shape& shape,
                           int r, int t) {
  for (const char* s : {"attn.q.weight", "attn.k.weight", "attn.v.weight", "mlp.fc1.weight", "attn.q.bias",
                        "attn.k.bias", "attn.v.bias", "mlp.fc1.bias"}) {
    if (EndsWith(name, s)) {
      const size_t n = all.size() / t;
      return {all.begin() + r * n, all.begin() + (r + 1) * n};
    }
  }
  if (EndsWith(name, "attn.o.weight") || EndsWith(name, "mlp.fc2.weight")) {
    const int64_t out = shape[0], in = shape[1], w = in / t;
    std::vector<float> s;
    for (int64_t o = 0; o < out; ++o)
      s.insert(s.end(), all.begin() + o * in + r * w, all.begin() + o * in + (r + 1) * w);
    return s;
  }
  return all;
}

struct RankRun {
  cp::Coord coord;
  std::vector<cp::StepResult> steps;
  std::map<std::string, std::vector<float>> values;
  cp::Ledger ledger;  // of the last step
  std::vector<cp::Trainer3D::TimedEvent> timeline;
  int64_t last_step_start_ns = 0;  // trace clock
};

std::vector<RankRun> Run(const nn::GptConfig& cfg, const cp::Layout& layout) {
  const int world = layout.grid.world();
  std::vector<RankRun> runs(world);
  comm::CommOptions opts;
  opts.timeout = std::chrono::seconds(30);
  auto statuses = comm::RunRanks(
      world,
      [&](int rank, comm::Comm& c, comm::Stream& stream) -> absl::Status {
        tensor::MemoryTracker tracker("rank " + std::to_string(rank));
        tensor::ScopedMemoryTracker scope(&tracker);
        auto grid = cp::ProcessGrid::Create(c, layout.grid);
        if (!grid.ok()) return grid.status();
        RankRun& run = runs[rank];
        run.coord = (*grid)->coord();
        auto trainer = cp::Trainer3D::Create(**grid, stream, cfg, layout, kBatch, Adam());
        if (!trainer.ok()) return trainer.status();
        for (int step = 0; step < kSteps; ++step) {
          if (step == kSteps - 1) {
            cp::ResetLedger(**grid, tracker);
            run.last_step_start_ns = trace::NowNs();
          }
          auto r = (*trainer)->Step(GlobalBatch(cfg, step));
          if (!r.ok()) return r.status();
          run.steps.push_back(*r);
        }
        run.ledger = cp::MeasureLedger(**grid, tracker);
        run.timeline = (*trainer)->timeline();
        auto values = (*trainer)->LocalParameters();
        if (!values.ok()) return values.status();
        run.values = std::move(*values);
        return absl::OkStatus();
      },
      opts);
  const absl::Status first = comm::FirstError(statuses);
  if (!first.ok()) Die(first);
  return runs;
}

struct Equivalence {
  double max_dloss = 0, max_dparam = 0;
};

Equivalence Compare(const Dense& dense, const cp::Layout& layout, const std::vector<RankRun>& runs) {
  Equivalence e;
  const cp::GridShape& g = layout.grid;
  for (int step = 0; step < kSteps; ++step) {
    double sum = 0;
    int count = 0;
    for (const RankRun& r : runs) {
      if (r.coord.pp == g.pp - 1 && r.coord.tp == 0) sum += r.steps[step].loss, ++count;
    }
    e.max_dloss = std::max(e.max_dloss, std::fabs(sum / count - dense.losses[step]));
  }
  for (const RankRun& r : runs) {
    for (const auto& [name, values] : r.values) {
      const std::vector<float> want =
          ShardOf(name, dense.values.at(name), dense.shapes.at(name), r.coord.tp, g.tp);
      if (want.size() != values.size()) Die(absl::InternalError("shard of " + name + " has the wrong size"));
      for (size_t i = 0; i < want.size(); ++i) {
        e.max_dparam = std::max(e.max_dparam, static_cast<double>(std::fabs(values[i] - want[i])));
      }
    }
  }
  return e;
}

// notes/07-composition.md section 4: one rank of stage p, f32.
struct Formula {
  std::array<cp::Traffic, cp::kNumAxes> traffic;
  int64_t psi = 0, shard = 0;
};

Formula Predict(const nn::GptConfig& cfg, const cp::Layout& l, int p) {
  const int D = l.grid.dp, P = l.grid.pp, T = l.grid.tp, m = l.micro_batches;
  const int64_t h = cfg.hidden, V = cfg.vocab, s = cfg.seq, Ls = cfg.layers / P;
  const uint64_t act = 4 * (kBatch / (D * m) * s) * h;
  Formula x;
  x.psi = (p == 0 ? V * h + s * h : 0) + Ls * nn::BlockParameters(cfg, T) +
          (p == P - 1 ? 2 * h + (cfg.tie_embeddings && P == 1 ? 0 : V * h) : 0);
  x.shard = (x.psi + D - 1) / D;
  cp::Traffic& tp = x.traffic[static_cast<int>(Axis::kTp)];
  if (T > 1) tp.calls = 4 * m * Ls, tp.all_reduce = 4 * m * Ls * act;
  cp::Traffic& pp = x.traffic[static_cast<int>(Axis::kPp)];
  pp.sends = pp.recvs = m * ((p < P - 1 ? 1 : 0) + (p > 0 ? 1 : 0));
  pp.bytes_sent = pp.bytes_received = pp.sends * act;
  cp::Traffic& dp = x.traffic[static_cast<int>(Axis::kDp)];
  if (D > 1) dp.calls = 2, dp.reduce_scatter = dp.all_gather = 4 * D * x.shard;
  cp::Traffic& emb = x.traffic[static_cast<int>(Axis::kEmb)];
  if (cfg.tie_embeddings && P > 1 && (p == 0 || p == P - 1)) emb.calls = 1, emb.all_reduce = 4 * V * h;
  return x;
}

void GridFigure(const cp::GridShape& s, const std::string& path) {
  std::vector<std::vector<double>> values(6, std::vector<double>(s.world()));
  std::vector<std::string> cols;
  for (int r = 0; r < s.world(); ++r) {
    cols.push_back("rank " + std::to_string(r));
    const cp::Coord c = cp::CoordOf(s, r);
    values[0][r] = c.tp, values[1][r] = c.dp, values[2][r] = c.pp;
  }
  const Axis axes[] = {Axis::kTp, Axis::kDp, Axis::kPp};
  for (int a = 0; a < 3; ++a) {
    const auto groups = cp::Groups(s, axes[a]);
    for (size_t g = 0; g < groups.size(); ++g) {
      for (int r : groups[g]) values[3 + a][r] = static_cast<double>(g);
    }
  }
  const viz::WriteResult w =
      viz::HeatMap()
          .Title("(dp, pp, tp) = (" + std::to_string(s.dp) + ", " + std::to_string(s.pp) + ", " +
                 std::to_string(s.tp) +
                 "), order tp-dp-pp: rank = tp + T (dp + D pp); group rows: the group's index")
          .Values(values)
          .RowLabels({"tp coordinate", "dp coordinate", "pp coordinate", "tp group", "dp group", "pp group"})
          .ColumnLabels(cols)
          .Annotate(true)
          .CellSize(56)
          .Write(path);
  if (!w.ok()) Die(absl::InternalError(w.error));
}

// One step of a run as boxes: per rank a row of its ops (F, BW) and a row of its communication, from the
// trainer's timeline (ops, pp messages, dp finish) and the comm trace's stream events (AllReduce = tp:
// untied, so the embedding group is silent; ReduceScatter / AllGather = dp).
nlohmann::json TimelineFigure(const std::vector<RankRun>& runs, const std::string& trace_json,
                              const std::string& title, const std::string& path) {
  enum { kF, kBW, kTp, kPp, kDp };
  int64_t t0 = runs[0].last_step_start_ns;
  for (const RankRun& r : runs) t0 = std::min(t0, r.last_step_start_ns);
  viz::Timeline fig;
  std::vector<std::string> rows;
  for (size_t r = 0; r < runs.size(); ++r) {
    const cp::Coord& c = runs[r].coord;
    const std::string name = "rank " + std::to_string(r) + " (dp " + std::to_string(c.dp) + " pp " +
                             std::to_string(c.pp) + " tp " + std::to_string(c.tp) + ")";
    rows.push_back(name + " ops");
    rows.push_back(name + " comm");
  }
  std::map<std::string, int> counts;
  std::vector<double> rank_start_ms(runs.size()), rank_end_ms(runs.size());
  for (size_t r = 0; r < runs.size(); ++r) {
    const double base = (runs[r].last_step_start_ns - t0) / 1e6;
    rank_start_ms[r] = rank_end_ms[r] = base;
    for (const auto& e : runs[r].timeline) {
      rank_end_ms[r] = std::max(rank_end_ms[r], base + e.end_ms);
      const bool op = e.what[0] == 'F' || e.what[0] == 'B';
      if (!op && e.what.rfind("pp", 0) != 0) continue;  // "dp finish" is drawn from the trace
      const int cat = !op ? kPp : e.what[0] == 'F' ? kF : kBW;
      fig.AddBox({static_cast<int>(2 * r + (op ? 0 : 1)), base + e.start_ms, base + e.end_ms,
                  op ? e.what : "", "", cat});
      if (!op) ++counts["pp"];
    }
  }
  const nlohmann::json doc = nlohmann::json::parse(trace_json);
  const double origin_ns = doc["otherData"].value("origin_ns", 0.0);  // ts counts from it (trace.h)
  for (const auto& ev : doc["traceEvents"]) {
    if (ev.value("ph", "") != "X" || ev.value("cat", "") != "comm.stream") continue;
    const double ts_ns = origin_ns + ev["ts"].get<double>() * 1e3;
    const int rank = ev["pid"].get<int>();
    const double start = (ts_ns - t0) / 1e6, dur = ev["dur"].get<double>() / 1e3;
    if (rank < 0 || rank >= static_cast<int>(runs.size())) continue;
    if (start < rank_start_ms[rank] || start > rank_end_ms[rank]) continue;  // this rank's last step only
    const std::string op = ev["args"].value("op", "");
    const int cat = op == "AllReduce" ? kTp : (op == "ReduceScatter" || op == "AllGather") ? kDp : -1;
    if (cat < 0) continue;
    fig.AddBox({2 * rank + 1, start, start + dur,
                cat == kTp          ? ""
                : op == "AllGather" ? "AG"
                                    : "RS",
                "", cat});
    ++counts[cat == kTp ? "tp" : "dp"];
  }
  fig.Title(title).XLabel("ms since the step started").Rows(rows).Size(1100, 18);
  fig.Legend(kF, "forward").Legend(kBW, "backward").Legend(kTp, "tp all-reduce").Legend(kPp, "pp send/recv");
  fig.Legend(kDp, "dp reduce-scatter / all-gather");
  const viz::WriteResult w = fig.Write(path);
  if (!w.ok()) Die(absl::InternalError(w.error));
  return {{"tp_all_reduces", counts["tp"]}, {"pp_messages", counts["pp"]}, {"dp_collectives", counts["dp"]}};
}

// Bytes in decimal units, as memory sizes of accelerators are quoted ("71.9 GB").
std::string Decimal(double bytes) {
  char buf[32];
  if (bytes >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.1f GB", bytes / 1e9);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f MB", bytes / 1e6);
  }
  return buf;
}

// The planner's view of one cluster, playbook-style: the `top` fastest layouts that fit, then for each tp
// size the fastest layout that fits (or, when none does, the one needing the least memory), then the pick.
nlohmann::json PlannerTable(const std::string& what, const nn::GptConfig& cfg, int world, int64_t batch,
                            const cp::Cluster& cluster, size_t top) {
  auto plan = cp::MakePlan(cfg, world, batch, cluster);
  if (!plan.ok()) Die(plan.status());
  const std::vector<cp::Candidate>& all = plan->candidates;
  std::vector<size_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return all[a].step_s < all[b].step_s; });
  std::printf("  %s: %zu layouts\n", what.c_str(), all.size());
  std::printf("    %-24s %12s %5s %12s %10s %10s %10s\n", "(dp, pp, tp), m", "memory/rank", "fits",
              "pipeline", "dp", "emb", "step");
  nlohmann::json rows;
  auto print = [&](const char* tag, const cp::Candidate& c) {
    const cp::Layout& l = c.layout;
    const std::string label = "(" + std::to_string(l.grid.dp) + ", " + std::to_string(l.grid.pp) + ", " +
                              std::to_string(l.grid.tp) + "), " + std::to_string(l.micro_batches);
    std::printf("    %-24s %12s %5s %10.4g s %8.3g s %8.3g s %8.4g s  %s\n", label.c_str(),
                Decimal(c.memory_bytes).c_str(), c.fits ? "yes" : "no", c.pipeline_s, c.dp_s, c.emb_s,
                c.step_s, tag);
    rows.push_back({{"layout", label},
                    {"memory_bytes", c.memory_bytes},
                    {"fits", c.fits},
                    {"step_s", c.step_s},
                    {"row", tag}});
  };
  size_t shown = 0;
  for (size_t i : order) {
    if (all[i].fits && shown < top) print(shown++ == 0 ? "fastest that fits" : "", all[i]);
  }
  for (int tp = 1; tp <= world; tp *= 2) {
    int fastest = -1, smallest = -1;  // the fastest that fits; else the least memory
    for (size_t i : order) {
      if (all[i].layout.grid.tp != tp) continue;
      if (all[i].fits && fastest < 0) fastest = static_cast<int>(i);
      if (smallest < 0 || all[i].memory_bytes < all[smallest].memory_bytes) smallest = static_cast<int>(i);
    }
    if (fastest >= 0) {
      print(("fastest with tp " + std::to_string(tp)).c_str(), all[fastest]);
    } else if (smallest >= 0) {
      print(("tp " + std::to_string(tp) + ": none fits, least memory").c_str(), all[smallest]);
    }
  }
  const cp::Candidate& best = all[plan->best];
  std::printf("    pick: (%d, %d, %d), m %d: %.4g s a step, %s a rank\n", best.layout.grid.dp,
              best.layout.grid.pp, best.layout.grid.tp, best.layout.micro_batches, best.step_s,
              Decimal(best.memory_bytes).c_str());
  return {{"case", what}, {"layouts", all.size()}, {"rows", rows}};
}

// Stage B's block and stage F's on T ranks, one micro-batch of two sequences: the cache bytes (rank 0),
// the tp payload bytes of forward and backward by kind, and the largest difference from the dense block.
struct BlockRun {
  size_t cache = 0;
  size_t norm_part = 0;  // of `cache`: the two norms' caches and outputs
  uint64_t all_reduce = 0, all_gather = 0, reduce_scatter = 0;
  float max_dy = 0;
};

BlockRun RunBlock(const nn::GptConfig& cfg, int t, bool sequence_parallel) {
  nn::GptBlock dense("blocks.0", cfg);
  const int64_t rows = 2 * cfg.seq;
  tensor::Tensor x({rows, cfg.hidden}), dy({rows, cfg.hidden});
  tensor::FillNormal(x, 1, 1.f);
  tensor::FillNormal(dy, 2, 1.f);
  nn::BlockCache dense_cache;
  const tensor::Tensor want = dense.Forward(x, &dense_cache);
  dense.Backward(dy, &dense_cache);
  std::vector<BlockRun> per_rank(t);
  auto statuses = comm::RunRanks(t, [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
    BlockRun& r = per_rank[rank];
    nn::BlockCache c;
    tensor::Tensor y, y_want;
    auto measure_cache = [&] {  // between Forward and Backward, which releases the cache
      r.cache = c.bytes();
      r.norm_part = c.ln1.bytes() + c.u.bytes() + c.ln2.bytes() + c.u2.bytes();
    };
    if (sequence_parallel) {
      ASSIGN_OR_RETURN(auto block, cp::SequenceParallelBlock::Create(tp, stream, dense));
      ASSIGN_OR_RETURN(auto x_s, cp::SequenceShard(x, cfg.seq, rank, t));
      ASSIGN_OR_RETURN(auto dy_s, cp::SequenceShard(dy, cfg.seq, rank, t));
      ASSIGN_OR_RETURN(y_want, cp::SequenceShard(want, cfg.seq, rank, t));
      ASSIGN_OR_RETURN(y, block->Forward(x_s, &c));
      measure_cache();
      RETURN_IF_ERROR(block->Backward(dy_s, &c).status());
      RETURN_IF_ERROR(block->AllReduceSequenceParallelGrads());
    } else {
      ASSIGN_OR_RETURN(auto block, cp::TensorParallelBlock::Create(tp, stream, dense));
      y_want = want;
      ASSIGN_OR_RETURN(y, block->Forward(x, &c));
      measure_cache();
      RETURN_IF_ERROR(block->Backward(dy, &c).status());
    }
    r.max_dy = tensor::MaxAbsDiff(y, y_want);
    r.all_reduce = tp.stats().all_reduce.bytes;
    r.all_gather = tp.stats().all_gather.bytes;
    r.reduce_scatter = tp.stats().reduce_scatter.bytes;
    return absl::OkStatus();
  });
  if (absl::Status st = comm::FirstError(statuses); !st.ok()) Die(st);
  BlockRun out = per_rank[0];
  for (const BlockRun& r : per_rank) out.max_dy = std::max(out.max_dy, r.max_dy);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  distlab::cli::App app{
      "Lab 7 (composition) demo: 3D training equal to one rank, its ledger, the FSDP-pipeline conflict"};
  std::string out;
  app.add_option("--out", out, "folder for the figures and summary.json")->required();
  DISTLAB_CLI_PARSE(app, argc, argv);
  nlohmann::json summary;

  // (1) The grid.
  const cp::GridShape g222{2, 2, 2};
  std::printf("== (1) the grid (dp, pp, tp) = (2, 2, 2), order tp-dp-pp\n");
  for (Axis a : {Axis::kTp, Axis::kDp, Axis::kPp, Axis::kEmb}) {
    std::printf("  %-3s groups:", cp::Name(a));
    for (const auto& grp : cp::Groups(g222, a)) {
      std::printf(" [");
      for (size_t i = 0; i < grp.size(); ++i) std::printf("%s%d", i ? "," : "", grp[i]);
      std::printf("]");
    }
    std::printf("\n");
    summary["grid"][cp::Name(a)] = cp::Groups(g222, a);
  }
  GridFigure(g222, out + "/composition-grid.svg");

  // (2) Equivalence with single-rank training.
  nn::GptConfig untied, tied;
  tied.tie_embeddings = true;
  const Dense dense_untied = TrainDense(untied), dense_tied = TrainDense(tied);
  struct Case {
    cp::Layout layout;
    bool tied;
  };
  const std::vector<Case> cases = {
      {{{2, 2, 2}, 2}, false},
      {{{1, 4, 2}, 4}, false},
      {{{4, 2, 1}, 2}, false},
      {{{1, 1, 8}, 1}, false},
      {{{8, 1, 1}, 1}, false},
      {{{1, 4, 1}, 4}, false},
      {{{1, 2, 2}, 2}, true},
      {{{2, 2, 1}, 2, cp::DpSharding::kZero3Reshard}, false},
      {{{2, 2, 1}, 2, cp::DpSharding::kZero3KeepGathered}, false},
  };
  std::printf(
      "\n== (2) equivalence with single-rank training (%d steps, B = %lld): max |dloss|, max |dparam|\n",
      kSteps, static_cast<long long>(kBatch));
  std::vector<RankRun> runs222;
  for (const Case& c : cases) {
    const std::vector<RankRun> runs = Run(c.tied ? tied : untied, c.layout);
    const Equivalence e = Compare(c.tied ? dense_tied : dense_untied, c.layout, runs);
    const std::string label = Label(c.layout) + (c.tied ? ", tied" : "");
    std::printf("  %-34s %.3g  %.3g\n", label.c_str(), e.max_dloss, e.max_dparam);
    summary["equivalence"].push_back(
        {{"layout", label}, {"max_dloss", e.max_dloss}, {"max_dparam", e.max_dparam}});
    if (c.layout.grid.dp == 2 && c.layout.grid.pp == 2 && c.layout.grid.tp == 2) runs222 = runs;
  }

  // (3) The ledger of (2, 2, 2), m = 2, against the formulas; one rank per stage (the others are equal).
  const cp::Layout l222{{2, 2, 2}, 2};
  std::printf("\n== (3) ledger of one step, %s: measured | formula (payload bytes)\n", Label(l222).c_str());
  bool all_equal = true;
  for (size_t r = 0; r < runs222.size(); ++r) {
    const Formula x = Predict(untied, l222, runs222[r].coord.pp);
    for (Axis a : cp::kAllAxes) {
      const cp::Traffic& got = runs222[r].ledger.of(a);
      const cp::Traffic& want = x.traffic[static_cast<int>(a)];
      all_equal = all_equal && got == want;
      if (r == 0 || r == 4) {
        std::printf("  rank %zu %-3s %s\n           %s%s\n", r, cp::Name(a), got.ToString().c_str(),
                    want.ToString().c_str(), got == want ? "" : "   <-- differs");
        summary["ledger"]["rank" + std::to_string(r)][cp::Name(a)] = {{"measured", got.ToString()},
                                                                      {"formula", want.ToString()}};
      }
    }
    const cp::MemoryUse& mem = runs222[r].ledger.memory;
    const bool mem_ok = mem.current_of(MemCategory::kParameters) == 4u * x.psi &&
                        mem.current_of(MemCategory::kGradients) == 4u * x.psi &&
                        mem.current_of(MemCategory::kOptimizerState) == 8u * x.shard;
    all_equal = all_equal && mem_ok;
    if (r == 0 || r == 4) {
      std::printf("  rank %zu memory: params %zu (4 Psi_s = %lld), grads %zu, optimizer %zu (8 S_s = %lld)\n",
                  r, mem.current_of(MemCategory::kParameters), static_cast<long long>(4 * x.psi),
                  mem.current_of(MemCategory::kGradients), mem.current_of(MemCategory::kOptimizerState),
                  static_cast<long long>(8 * x.shard));
    }
  }
  std::printf("  every rank's ledger equals the formulas: %s\n", all_equal ? "yes" : "NO");
  summary["ledger"]["all_ranks_equal_formulas"] = all_equal;

  // (4) The conflict on (2, 2, 1).
  std::printf(
      "\n== (4) ZeRO-3 inside a pipeline, (2, 2, 1), rank 0 (stage 0): dp payload per step, peak params\n");
  std::printf("  %-3s %-14s %12s %10s %14s\n", "m", "mode", "dp bytes", "/ zero1", "peak params B");
  for (int m : {1, 2, 4}) {
    uint64_t z1 = 0;
    for (cp::DpSharding mode :
         {cp::DpSharding::kZero1, cp::DpSharding::kZero3Reshard, cp::DpSharding::kZero3KeepGathered}) {
      const std::vector<RankRun> runs = Run(untied, {{2, 2, 1}, m, mode});
      const uint64_t bytes = runs[0].ledger.of(Axis::kDp).payload();
      if (mode == cp::DpSharding::kZero1) z1 = bytes;
      const size_t peak = runs[0].ledger.memory.peak_of(MemCategory::kParameters);
      std::printf("  %-3d %-14s %12llu %10.2f %14zu\n", m, cp::Name(mode),
                  static_cast<unsigned long long>(bytes), static_cast<double>(bytes) / z1, peak);
      summary["conflict"].push_back({{"m", m},
                                     {"mode", cp::Name(mode)},
                                     {"dp_payload_bytes", bytes},
                                     {"ratio_to_zero1", static_cast<double>(bytes) / z1},
                                     {"peak_param_bytes", peak}});
    }
  }
  std::printf("  (reshard / zero1 = 3m/2; keep moves zero1's bytes but holds the whole stage gathered)\n");

  // (5) Sequence parallelism on one block: its cache and tp payload beside stage B's.
  std::printf(
      "\n== (5) one block, N = %lld rows (2 sequences), rank 0: cache bytes and tp payload (fwd + bwd)\n",
      static_cast<long long>(2 * untied.seq));
  std::printf("  %-3s %10s %10s %6s   %-28s %-36s %s\n", "T", "TP cache", "SP cache", "ratio",
              "TP all-reduce", "SP all-gather + reduce-scatter", "max |dy|");
  std::vector<std::string> bars;
  std::vector<double> norm_part, tp_part;
  for (int t : {1, 2, 4, 8}) {
    const BlockRun tpr = RunBlock(untied, t, false), spr = RunBlock(untied, t, true);
    const size_t want = cp::SequenceParallelCacheBytes(untied, 2 * untied.seq, t);
    all_equal = all_equal && spr.cache == want &&
                tpr.cache == nn::BlockCacheBytes(untied, 2 * untied.seq, t) &&
                std::max(tpr.max_dy, spr.max_dy) < 1e-4f;
    std::printf("  %-3d %10zu %10zu %6.2f   %-28llu %-36s %.2g\n", t, tpr.cache, spr.cache,
                static_cast<double>(spr.cache) / tpr.cache, static_cast<unsigned long long>(tpr.all_reduce),
                (std::to_string(spr.all_gather) + " + " + std::to_string(spr.reduce_scatter)).c_str(),
                std::max(tpr.max_dy, spr.max_dy));
    for (const BlockRun* r : {&tpr, &spr}) {
      if (t == 1 && r == &spr) break;  // one rank: the two blocks are the same
      bars.push_back((t == 1      ? std::string("dense")
                      : r == &tpr ? "TP"
                                  : "TP+SP") +
                     ", T=" + std::to_string(t));
      norm_part.push_back(r->norm_part / 1024.0);
      tp_part.push_back((r->cache - r->norm_part) / 1024.0);
    }
    summary["sequence_parallel"].push_back({{"tp", t},
                                            {"tp_cache_bytes", tpr.cache},
                                            {"sp_cache_bytes", spr.cache},
                                            {"tp_all_reduce_bytes", tpr.all_reduce},
                                            {"sp_all_gather_bytes", spr.all_gather},
                                            {"sp_reduce_scatter_bytes", spr.reduce_scatter},
                                            {"max_abs_dy", std::max(tpr.max_dy, spr.max_dy)}});
  }
  std::printf(
      "  (S of each call, summed. On a ring an all-reduce puts 2 (T - 1)/T S on the wire per rank, an "
      "all-gather "
      "or a\n  reduce-scatter (T - 1)/T S: SP's forward moves what TP's does, its backward 1.5 times as "
      "much, "
      "since it\n  gathers the two norm outputs again)\n");
  const viz::WriteResult sp_fig =
      viz::BarChart()
          .Title("one block's activations per micro-batch, N = 16 rows, on one of T ranks")
          .YLabel("cache KiB")
          .Stacked(true)
          .Size(900, 440)
          .Categories(bars)
          .AddSeries("norm regions", norm_part)
          .AddSeries("tp regions", tp_part)
          .Write(out + "/composition-sp-memory.svg");
  if (!sp_fig.ok()) Die(absl::InternalError(sp_fig.error));

  // (6) The planner.
  std::printf("\n== (6) the planner (ZeRO-1, f32, no recomputation): predicted memory and step time\n");
  // The hidden tests' clusters: {GPUs per node, memory per rank, flop/s, intra-node link, inter-node link},
  // a link being {latency s, bytes/s}.
  const cp::Cluster two_nodes{4, 1e9, 2e8, {2e-6, 5e10}, {2e-5, 2e9}};
  const cp::Cluster gpus{8, 72e9, 4.9e14, {5e-6, 4e11}, {1.5e-5, 4.5e10}};
  summary["planner"].push_back(
      PlannerTable("test model, 8 ranks in nodes of 4, 1 GB each, B = 8", untied, 8, kBatch, two_nodes, 4));
  nn::GptConfig big;
  big.vocab = 128256, big.hidden = 4096, big.heads = 32, big.inner = 14336, big.seq = 4096, big.layers = 32;
  summary["planner"].push_back(
      PlannerTable("Llama-3-8B-sized (h 4096, L 32, f 14336, V 128256, s 4096), 64 GPUs in nodes of 8, 72 GB "
                   "each, B = 256",
                   big, 64, 256, gpus, 5));

  // One step's timeline of (2, 2, 2), m = 2, with the comm trace recorded.
  const bool was_tracing = trace::Enabled();
  if (!was_tracing) trace::Start();
  const std::vector<RankRun> traced = Run(untied, l222);
  const std::string events = trace::Json();
  if (!was_tracing) (void)trace::Stop();
  summary["timeline"] = TimelineFigure(
      traced, events,
      "one step of (dp, pp, tp) = (2, 2, 2), m = 2, 1F1B, 8 threads: ops and each axis's traffic",
      out + "/composition-timeline.svg");
  std::printf("\n== timeline of the last step: %s\n", summary["timeline"].dump().c_str());

  std::ofstream(out + "/summary.json") << summary.dump(2) << "\n";
  std::printf("\nfigures and summary.json written to %s\n", out.c_str());
  return all_equal ? 0 : 1;
}
