// Lab 4 (parallel), stage C: ZeRO-1/2/3 -- your implementation.
//
// The contracts are in labs/parallel/zero.h (the units, flat sharding, what each stage keeps, the trace);
// the ideas in notes/04-parallel.md section 4; the public tests in zero_test.cc and zero_trace_test.cc draw
// small cases. Stuck after trying? ./labctl hint parallel C.
#include "labs/parallel/zero.h"

#include "reference/base/status.h"

namespace distlab::parallel {

// TODO(parallel stage C): ShardSize, ShardOffset -- contract: zero.h (flat sharding); idea:
//   notes/04-parallel.md §4. Lab 7 calls both: keep them exactly as zero.h says.
int64_t ShardSize(int64_t numel, int n) { throw NotImplementedError("parallel", "C", "ShardSize"); }
int64_t ShardOffset(int64_t numel, int rank, int n) {
  throw NotImplementedError("parallel", "C", "ShardOffset");
}

// Whatever state your trainer needs. The one contract on it: the destructor waits for any collective still
// in flight on buffers it frees, and puts back the on_grad_ready hooks Create replaced (zero.h).
struct ZeroTrainer::Impl {};

ZeroTrainer::ZeroTrainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ZeroTrainer::~ZeroTrainer() = default;

// TODO(parallel stage C): ZeroTrainer::Create -- contract: zero.h (Create; units, flat sharding, what each
//   stage keeps); idea: notes/04-parallel.md §4.
//   Tools: Tensor(shape, DType::kF32, MemCategory::k...) is counted by the rank's tracker in that category;
//   Tensor::Release() frees a tensor's storage and keeps its shape, Allocate() brings it back zeroed;
//   Parameter::on_grad_ready runs once a step, when that parameter's gradient is final.
//   Which of a rank's bytes must outlive a step, and in which tracker category does each belong?
absl::StatusOr<std::unique_ptr<ZeroTrainer>> ZeroTrainer::Create(comm::Comm& comm, comm::Stream& stream,
                                                                 nn::TinyLM& model, ZeroStage stage,
                                                                 nn::AdamWConfig adam) {
  return Unimplemented("parallel", "C", "ZeroTrainer::Create");
}

// TODO(parallel stage C): ZeroTrainer::Step -- contract: zero.h (Step, trace); idea: notes/04-parallel.md §4.
//   Tools: comm ReduceScatter/AllGather on `stream` (RedOp::kAvg exists) with a comm::Event to wait for one
//   collective; nn::AdamWUpdate (AdamW on a flat slice); TinyLM's pieces to run one unit at a time
//   (embedding(), block(l), head(), loss(), Project/ProjectBackward); TinyLM::Backward and loss().Backward
//   take a loss scale; ClearCache().
//   A hook returns nothing: keep the first error it meets and report it from Step.
//   For each buffer you allocate inside a step: which event of the trace may free it, at the earliest?
absl::StatusOr<float> ZeroTrainer::Step(const std::vector<nn::Batch>& micro_batches) {
  return Unimplemented("parallel", "C", "ZeroTrainer::Step");
}

// TODO(parallel stage C): FullParameters -- contract: zero.h (FullParameters). Under ZeRO-3 it is a
//   collective: every rank calls it.
absl::StatusOr<std::vector<float>> ZeroTrainer::FullParameters() {
  return Unimplemented("parallel", "C", "ZeroTrainer::FullParameters");
}

// TODO(parallel stage C): trace -- contract: zero.h (trace): the entries your last Step recorded.
std::vector<std::string> ZeroTrainer::trace() const { throw NotImplementedError("parallel", "C", "trace"); }

}  // namespace distlab::parallel
