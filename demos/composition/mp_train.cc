// Lab 7 on processes: the small GPT trained on a (dp, pp, tp) grid, one rank per process over Gloo.
//
//   bazel build --config=solution //demos/composition:mp_train
//   ./labctl launch -n 8 --backend gloo -- BIN     (8 processes; BIN = the built mp_train, by its full path)
//   BIN                                            (the same 8 ranks as threads)
//
// Prints, for every step, the loss of each data-parallel replica (from its last-stage, tp-0 rank) with
// nine significant digits, and nn::Gpt's loss on the whole batch from rank 0 (the mean of the replicas'
// losses equals it within f32 rounding): the process run and the thread run print the same numbers. Flags:
// --dp 2 --pp 2 --tp 2 --m 2 --steps 3.
#include <cstdio>
#include <memory>
#include <string>

#include "labs/composition/grid.h"
#include "labs/composition/train3d.h"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "reference/nn/optim.h"
#include "reference/nn/transformer.h"
#include "tools/base/cli.h"

namespace cp = distlab::composition;
namespace nn = distlab::nn;
namespace comm = distlab::comm;

namespace {

constexpr int64_t kBatch = 8;

nn::AdamWConfig Adam() {
  nn::AdamWConfig a;
  a.lr = 0.05f;
  a.eps = 0.1f;
  a.weight_decay = 0.01f;
  return a;
}

absl::Status Body(comm::Comm& world, comm::Stream& stream, const cp::Layout& layout, int steps) {
  const nn::GptConfig cfg;
  ASSIGN_OR_RETURN(auto grid, cp::ProcessGrid::Create(world, layout.grid));
  ASSIGN_OR_RETURN(auto trainer, cp::Trainer3D::Create(*grid, stream, cfg, layout, kBatch, Adam()));
  std::unique_ptr<nn::Gpt> dense;
  std::unique_ptr<nn::AdamW> opt;
  if (world.rank() == 0) {
    dense = std::make_unique<nn::Gpt>(cfg);
    opt = std::make_unique<nn::AdamW>(dense->Parameters(), Adam());
  }
  for (int step = 0; step < steps; ++step) {
    const nn::Batch batch = nn::SyntheticSequences(cfg.vocab, cfg.seq, 1, step, kBatch);
    ASSIGN_OR_RETURN(cp::StepResult r, trainer->Step(batch));
    if (r.has_loss && grid->coord().tp == 0) {
      std::printf("step %d replica %d (rank %d): loss %.9g\n", step, grid->coord().dp, world.rank(), r.loss);
    }
    if (dense) {
      dense->ZeroGrad();
      const float loss = dense->Forward(batch);
      dense->Backward();
      opt->Step();
      std::printf("step %d single rank: loss %.9g\n", step, loss);
    }
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  distlab::cli::App app{"Lab 7: 3D training of the small GPT, one rank per process (gloo) or per thread"};
  cp::Layout layout{{2, 2, 2}, 2};
  int steps = 3;
  app.add_option("--dp", layout.grid.dp);
  app.add_option("--pp", layout.grid.pp);
  app.add_option("--tp", layout.grid.tp);
  app.add_option("--m", layout.micro_batches, "micro-batches");
  app.add_option("--steps", steps);
  DISTLAB_CLI_PARSE(app, argc, argv);
  comm::CommOptions options;
  options.timeout = std::chrono::seconds(60);
  if (comm::LaunchedByLauncher()) {
    auto c = comm::CommInitFromEnv(options);
    if (!c.ok()) {
      std::fprintf(stderr, "mp_train: %s\n", c.status().ToString().c_str());
      return 1;
    }
    comm::Stream stream;
    const absl::Status st = Body(**c, stream, layout, steps);
    if (!st.ok()) {
      std::fprintf(stderr, "mp_train rank %d: %s\n", (*c)->rank(), st.ToString().c_str());
      return 1;
    }
    return 0;
  }
  auto statuses = comm::RunRanks(
      layout.grid.world(), [&](int, comm::Comm& c, comm::Stream& s) { return Body(c, s, layout, steps); },
      options);
  const absl::Status st = comm::FirstError(statuses);
  if (!st.ok()) {
    std::fprintf(stderr, "mp_train: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
