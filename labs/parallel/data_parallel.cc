// Lab 4 (parallel), stage A: data parallelism -- your implementation.
//
// The contracts are in labs/parallel/data_parallel.h; the why in notes/04-parallel.md section 2; the public
// tests draw the bucket tables and the hook timelines. Stuck after trying? ./labctl hint parallel A.
#include "labs/parallel/data_parallel.h"

#include <mutex>

#include "reference/base/status.h"
#include "reference/tensor/tensor.h"

namespace distlab::parallel {

// TODO(parallel stage A): AllReduceGradientsNaive -- contract: data_parallel.h (AllReduceGradientsNaive);
//   idea: notes/04-parallel.md §2. Tools: comm.AllReduce works in place (send == recv) on `stream` with a
//   RedOp (reference/comm/types.h lists them); stream.Synchronize() waits and returns the stream's error.
absl::Status AllReduceGradientsNaive(comm::Comm& comm, comm::Stream& stream,
                                     const std::vector<nn::Parameter*>& params) {
  return Unimplemented("parallel", "A", "AllReduceGradientsNaive");
}

// TODO(parallel stage A): AssignBuckets -- contract: data_parallel.h (AssignBuckets); idea:
//   notes/04-parallel.md §2. Which parameter's gradient does backward finish first?
std::vector<std::vector<int>> AssignBuckets(const std::vector<size_t>& param_bytes, size_t bucket_bytes) {
  throw NotImplementedError("parallel", "A", "AssignBuckets");
}

// Whatever state you need. Hooks run on the thread that runs backward while FinishGradientSync and the
// accessors may be called from the rank's own code: guard what both touch.
struct BucketedDataParallel::Impl {
  std::mutex mu;
};

BucketedDataParallel::BucketedDataParallel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

// TODO(parallel stage A): ~BucketedDataParallel -- contract: data_parallel.h (the destructor removes the
//   hooks Create installed).
BucketedDataParallel::~BucketedDataParallel() = default;

// TODO(parallel stage A): BucketedDataParallel::Create -- contract: data_parallel.h (BucketedDataParallel,
//   Create); idea: notes/04-parallel.md §2. Tools: Parameter::on_grad_ready runs once a step, when that
//   parameter's gradient is final (nn/parameter.h: a tied weight after its second use); a flat buffer is
//   tensor::Tensor({numel}, DType::kF32, MemCategory::kCommBuffers); launch without waiting.
//   Errors: InvalidArgument when bucket_bytes == 0 or a parameter is null.
//   A bucket holds several gradients that become final at different times: when may it leave?
absl::StatusOr<std::unique_ptr<BucketedDataParallel>> BucketedDataParallel::Create(
    comm::Comm& comm, comm::Stream& stream, std::vector<nn::Parameter*> params, size_t bucket_bytes) {
  return Unimplemented("parallel", "A", "BucketedDataParallel::Create");
}

// TODO(parallel stage A): BeginStep -- contract: data_parallel.h (BeginStep).
void BucketedDataParallel::BeginStep() { throw NotImplementedError("parallel", "A", "BeginStep"); }

// TODO(parallel stage A): FinishGradientSync -- contract: data_parallel.h (FinishGradientSync: its errors
//   and their exact message); idea: notes/04-parallel.md §2. The buffers belong to the stream until it has
//   been synchronized.
absl::Status BucketedDataParallel::FinishGradientSync() {
  return Unimplemented("parallel", "A", "FinishGradientSync");
}

// TODO(parallel stage A): buckets, parameters, launched, hook_status -- contract: data_parallel.h.
const std::vector<std::vector<int>>& BucketedDataParallel::buckets() const {
  throw NotImplementedError("parallel", "A", "buckets");
}
const std::vector<nn::Parameter*>& BucketedDataParallel::parameters() const {
  throw NotImplementedError("parallel", "A", "parameters");
}
std::vector<int> BucketedDataParallel::launched() const {
  throw NotImplementedError("parallel", "A", "launched");
}
absl::Status BucketedDataParallel::hook_status() const {
  return Unimplemented("parallel", "A", "hook_status");
}

}  // namespace distlab::parallel
