// composition_bench: one 3D training step against the sum of its parts, measured side by side in one run.
//
// On a (dp, pp, tp) grid of threads (threads backend), each rank runs warm-up + K steps of Trainer3D, then,
// on the same communicators, each kind of communication of one step alone, K times:
//   tp   4 m L_s all-reduces of N h floats on the tp comm (the f's and g's of the rank's blocks),
//   pp   the step's point-to-point messages of N h floats with the neighbouring stages (m each way),
//   dp   one reduce-scatter and one all-gather of the stage's padded flat vector on the dp comm (ZeRO-1).
// The compute part is nn::Gpt's forward + backward + AdamW on the whole global batch on one thread, divided
// by the ranks this machine can run at once (min(world, cores): the threads share the cores), times 1F1B's (m
// + P - 1) / m for the pipeline's bubble. Counters: step_ms, parts_ms and
//   step_over_parts_ratio = step / (compute + tp + pp + dp)   (> 1: what the parts do not explain -- waits
//                                                              beyond the bubble, hand-offs between threads)
//   compute_frac, tp_frac, pp_frac, dp_frac = each part / parts.
// BM_SequenceOverTensorParallel/tp: stage F's block against stage B's on T threads, one micro-batch of two
// sequences of Config(): each pair runs the tensor-parallel block's forward + backward, then the
// sequence-parallel block's, back to back on the same communicator; sp_over_tp_ratio is the median over the
// pairs of t_sp / t_tp (rank 0's times), beside sp_cache_ratio, the two caches' bytes.
// Every time of BM_Step3DOverParts is the fastest of kSteps repetitions (the slowest rank's, for the grid's).
// Ratios, not times, are the result: absolute times on a shared machine are noise.
#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "labs/composition/grid.h"
#include "labs/composition/sp_block.h"
#include "labs/composition/tp_block.h"
#include "labs/composition/train3d.h"
#include "labs/parallel/zero.h"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "reference/nn/optim.h"
#include "reference/nn/transformer.h"
#include "reference/tensor/random.h"
#include "reference/tensor/tensor.h"
#include "tools/bench/ratio.h"

namespace {

namespace cp = distlab::composition;
namespace nn = distlab::nn;
namespace comm = distlab::comm;
using Clock = std::chrono::steady_clock;
using distlab::tensor::Tensor;

constexpr int kSteps =
    5;  // repetitions of the step and of each part (after one warm-up step); the fastest counts

double Ms(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

nn::GptConfig Config() {
  nn::GptConfig c;
  c.vocab = 64, c.hidden = 64, c.heads = 8, c.inner = 256, c.seq = 16, c.layers = 4;
  return c;
}

nn::AdamWConfig Adam() {
  nn::AdamWConfig a;
  a.lr = 1e-3f;
  return a;
}

absl::Status Barrier(comm::Comm& world, comm::Stream& stream) {
  float x = 0;
  absl::Status st = world.AllReduce(&x, &x, 1, comm::DataType::kF32, comm::RedOp::kSum, stream);
  return st.ok() ? stream.Synchronize() : st;
}

struct Times {
  double step = 0, tp = 0, pp = 0, dp = 0;  // ms per step
};

// args: dp, pp, tp, m, B (sequences per step)
void BM_Step3DOverParts(benchmark::State& state) {
  const cp::GridShape grid{static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
                           static_cast<int>(state.range(2))};
  const int m = static_cast<int>(state.range(3));
  const int64_t B = state.range(4);
  const nn::GptConfig cfg = Config();
  const int world = grid.world();
  const int64_t n = B / (grid.dp * m) * cfg.seq;  // rows per micro-batch
  const int Ls = cfg.layers / grid.pp;

  // The compute, on one thread: the dense model's step on the whole batch.
  double dense_ms = 0;
  {
    nn::Gpt model(cfg);
    nn::AdamW opt(model.Parameters(), Adam());
    auto one = [&](int step) {
      model.ZeroGrad();
      model.Forward(nn::SyntheticSequences(cfg.vocab, cfg.seq, 1, step, B));
      model.Backward();
      opt.Step();
    };
    one(0);
    dense_ms = 1e300;
    for (int s = 0; s < kSteps; ++s) {
      const auto t0 = Clock::now();
      one(s + 1);
      dense_ms = std::min(dense_ms, Ms(t0));
    }
  }

  std::vector<Times> times(world);
  for (auto _ : state) {
    comm::CommOptions opts;
    opts.timeout = std::chrono::seconds(60);
    auto statuses = comm::RunRanks(
        world,
        [&](int rank, comm::Comm& w, comm::Stream& stream) -> absl::Status {
          auto g = cp::ProcessGrid::Create(w, grid);
          if (!g.ok()) return g.status();
          cp::ProcessGrid& pg = **g;
          auto trainer = cp::Trainer3D::Create(pg, stream, cfg, {grid, m}, B, Adam());
          if (!trainer.ok()) return trainer.status();
          Times& t = times[rank];
          auto r = (*trainer)->Step(nn::SyntheticSequences(cfg.vocab, cfg.seq, 1, 0, B));
          if (!r.ok()) return r.status();
          RETURN_IF_ERROR(Barrier(w, stream));
          t.step = t.tp = t.pp = t.dp = 1e300;
          for (int s = 0; s < kSteps; ++s) {
            const auto t0 = Clock::now();
            r = (*trainer)->Step(nn::SyntheticSequences(cfg.vocab, cfg.seq, 1, s + 1, B));
            if (!r.ok()) return r.status();
            t.step = std::min(t.step, Ms(t0));
          }

          const comm::DataType f32 = comm::DataType::kF32;
          Tensor act({n, cfg.hidden}), other({n, cfg.hidden});
          // tp alone.
          comm::Comm& tp = pg.axis(cp::Axis::kTp);
          RETURN_IF_ERROR(Barrier(w, stream));
          for (int s = 0; s < kSteps; ++s) {
            const auto t0 = Clock::now();
            for (int i = 0; i < 4 * m * Ls && tp.size() > 1; ++i) {
              RETURN_IF_ERROR(
                  tp.AllReduce(act.f32(), act.f32(), act.numel(), f32, comm::RedOp::kSum, stream));
              RETURN_IF_ERROR(stream.Synchronize());
            }
            t.tp = std::min(t.tp, Ms(t0));
          }
          // pp alone: m activations down, m gradients up, per boundary.
          comm::Comm& pp = pg.axis(cp::Axis::kPp);
          const int p = pg.coord().pp, P = grid.pp;
          RETURN_IF_ERROR(Barrier(w, stream));
          for (int s = 0; s < kSteps; ++s) {
            const auto t0 = Clock::now();
            for (int i = 0; i < m; ++i) {
              if (p > 0) {
                RETURN_IF_ERROR(pp.Recv(other.f32(), other.numel(), f32, p - 1, stream));
                RETURN_IF_ERROR(stream.Synchronize());
                RETURN_IF_ERROR(pp.Send(other.f32(), other.numel(), f32, p - 1, stream));
                RETURN_IF_ERROR(stream.Synchronize());
              }
              if (p < P - 1) {
                RETURN_IF_ERROR(pp.Send(act.f32(), act.numel(), f32, p + 1, stream));
                RETURN_IF_ERROR(stream.Synchronize());
                RETURN_IF_ERROR(pp.Recv(act.f32(), act.numel(), f32, p + 1, stream));
                RETURN_IF_ERROR(stream.Synchronize());
              }
            }
            t.pp = std::min(t.pp, Ms(t0));
          }
          // dp alone: ZeRO-1's reduce-scatter and all-gather of the stage's flat vector.
          comm::Comm& dp = pg.axis(cp::Axis::kDp);
          int64_t numel = 0;
          for (const cp::Unit& u : (*trainer)->units()) numel += nn::CountParameters(u.params);
          const int64_t shard = distlab::parallel::ShardSize(numel, dp.size());
          Tensor flat({shard * dp.size()});
          RETURN_IF_ERROR(Barrier(w, stream));
          for (int s = 0; s < kSteps; ++s) {
            const auto t0 = Clock::now();
            if (dp.size() > 1) {
              float* own = flat.f32() + dp.rank() * shard;
              RETURN_IF_ERROR(dp.ReduceScatter(flat.f32(), own, shard, f32, comm::RedOp::kAvg, stream));
              RETURN_IF_ERROR(stream.Synchronize());
              RETURN_IF_ERROR(dp.AllGather(own, flat.f32(), shard, f32, stream));
              RETURN_IF_ERROR(stream.Synchronize());
            }
            t.dp = std::min(t.dp, Ms(t0));
          }
          return absl::OkStatus();
        },
        opts);
    const absl::Status st = comm::FirstError(statuses);
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      return;
    }
  }
  // The slowest rank sets each time.
  Times worst;
  for (const Times& t : times) {
    worst.step = std::max(worst.step, t.step), worst.tp = std::max(worst.tp, t.tp);
    worst.pp = std::max(worst.pp, t.pp), worst.dp = std::max(worst.dp, t.dp);
  }
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const double compute =
      dense_ms / std::min(world, cores) * static_cast<double>(m + grid.pp - 1) / static_cast<double>(m);
  const double parts = compute + worst.tp + worst.pp + worst.dp;
  state.counters["step_ms"] = worst.step;
  state.counters["parts_ms"] = parts;
  state.counters["dense_step_ms"] = dense_ms;
  state.counters["cores"] = std::min(world, cores);
  state.counters["step_over_parts_ratio"] = worst.step / parts;
  state.counters["compute_frac"] = compute / parts;
  state.counters["tp_frac"] = worst.tp / parts;
  state.counters["pp_frac"] = worst.pp / parts;
  state.counters["dp_frac"] = worst.dp / parts;
}

BENCHMARK(BM_Step3DOverParts)
    ->ArgNames({"dp", "pp", "tp", "m", "B"})
    ->Args({2, 2, 2, 2, 16})
    ->Args({2, 2, 2, 4, 16})
    ->Args({1, 4, 2, 4, 16})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

void BM_SequenceOverTensorParallel(benchmark::State& state) {
  const int t = static_cast<int>(state.range(0));
  constexpr int kPairs = 15;
  const nn::GptConfig cfg = Config();
  nn::GptBlock dense("blocks.0", cfg);
  const int64_t rows = 2 * cfg.seq;
  Tensor x({rows, cfg.hidden}), dy({rows, cfg.hidden});
  distlab::tensor::FillNormal(x, 1, 1.f);
  distlab::tensor::FillNormal(dy, 2, 1.f);
  std::vector<double> ratios;
  double tp_ms = 0, sp_ms = 0;
  size_t tp_cache = 0, sp_cache = 0;
  for (auto _ : state) {
    auto statuses = comm::RunRanks(t, [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
      ASSIGN_OR_RETURN(auto tp_block, cp::TensorParallelBlock::Create(tp, stream, dense));
      ASSIGN_OR_RETURN(auto sp_block, cp::SequenceParallelBlock::Create(tp, stream, dense));
      ASSIGN_OR_RETURN(Tensor x_s, cp::SequenceShard(x, cfg.seq, rank, t));
      ASSIGN_OR_RETURN(Tensor dy_s, cp::SequenceShard(dy, cfg.seq, rank, t));
      for (int k = 0; k <= kPairs; ++k) {  // pair 0 warms up
        RETURN_IF_ERROR(Barrier(tp, stream));
        nn::BlockCache c;
        Clock::time_point t0 = Clock::now();
        ASSIGN_OR_RETURN(Tensor y, tp_block->Forward(x, &c));
        if (rank == 0) tp_cache = c.bytes();
        RETURN_IF_ERROR(tp_block->Backward(dy, &c).status());
        const double t_tp = Ms(t0);
        RETURN_IF_ERROR(Barrier(tp, stream));
        t0 = Clock::now();
        ASSIGN_OR_RETURN(Tensor y_s, sp_block->Forward(x_s, &c));
        if (rank == 0) sp_cache = c.bytes();
        RETURN_IF_ERROR(sp_block->Backward(dy_s, &c).status());
        RETURN_IF_ERROR(sp_block->AllReduceSequenceParallelGrads());
        const double t_sp = Ms(t0);
        if (rank == 0 && k > 0) {
          ratios.push_back(t_sp / t_tp);
          tp_ms += t_tp / kPairs;
          sp_ms += t_sp / kPairs;
        }
      }
      return absl::OkStatus();
    });
    if (absl::Status st = comm::FirstError(statuses); !st.ok()) {
      state.SkipWithError(std::string(st.message()).c_str());
      return;
    }
  }
  std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
  state.counters["tp_block_ms"] = tp_ms;
  state.counters["sp_block_ms"] = sp_ms;
  state.counters["sp_over_tp_ratio"] = ratios[ratios.size() / 2];
  state.counters["sp_cache_ratio"] = static_cast<double>(sp_cache) / static_cast<double>(tp_cache);
}

BENCHMARK(BM_SequenceOverTensorParallel)
    ->ArgNames({"tp"})
    ->Arg(2)
    ->Arg(4)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

DISTLAB_BENCH_RATIO(BM_Step3DOverParts, "step_over_parts_ratio",
                    {"one 3D step's time over the sum of its parts measured alone in the same run: compute "
                     "(dense step / ranks the cores run at once, x (m + P - 1) / m) + tp all-reduces + pp "
                     "messages + dp reduce-scatter and all-gather",
                     "the sum of the parts", "parts_ms", 1.0, /*higher_is_better=*/false});
DISTLAB_BENCH_RATIO(
    BM_Step3DOverParts, "compute_frac",
    {"the compute part (dense step / ranks run at once, with the bubble) over the sum of the parts",
     "the sum of the parts", "parts_ms"});
DISTLAB_BENCH_RATIO(BM_Step3DOverParts, "tp_frac",
                    {"the tp all-reduces alone over the sum of the parts", "the sum of the parts",
                     "parts_ms"});
DISTLAB_BENCH_RATIO(BM_Step3DOverParts, "pp_frac",
                    {"the pp messages alone over the sum of the parts", "the sum of the parts", "parts_ms"});
DISTLAB_BENCH_RATIO(BM_Step3DOverParts, "dp_frac",
                    {"ZeRO-1's dp reduce-scatter + all-gather alone over the sum of the parts",
                     "the sum of the parts", "parts_ms"});
DISTLAB_BENCH_RATIO(BM_SequenceOverTensorParallel, "sp_over_tp_ratio",
                    {"one block's forward + backward with sequence parallelism (stage F) over the same with "
                     "tensor parallelism (stage B), median of back-to-back pairs: the two extra gathers and "
                     "the row reordering, which nothing overlaps here",
                     "the tensor-parallel block", "tp_block_ms", 0, /*higher_is_better=*/false});
DISTLAB_BENCH_RATIO(
    BM_SequenceOverTensorParallel, "sp_cache_ratio",
    {"one micro-batch's cache bytes with sequence parallelism over stage B's: ((r + p) / T) / (r "
     "+ p / T), r = 4h + 2 and p = 4h + 2f + a s values a row",
     "stage B's cache", "", 0, /*higher_is_better=*/false});

BENCHMARK_MAIN();
