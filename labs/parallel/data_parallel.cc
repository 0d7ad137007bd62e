// Lab 4 (parallel), stage A: data parallelism -- your implementation.
//
// Read labs/parallel/data_parallel.h for the contracts and notes/04-parallel.md section 2 for the why.
#include "labs/parallel/data_parallel.h"

#include <mutex>

#include "reference/base/status.h"
#include "reference/tensor/tensor.h"

namespace distlab::parallel {

// TODO(parallel stage A): AllReduceGradientsNaive
//  1. World size 1: nothing to do, return OK.
//  2. For every parameter, all-reduce its gradient in place (send == recv) with RedOp::kAvg on `stream`
//     (or kSum and then divide by comm.size(): the mean, not the sum, equals single-process training).
//  3. Synchronize the stream before returning and return its status.
absl::Status AllReduceGradientsNaive(comm::Comm& comm, comm::Stream& stream,
                                     const std::vector<nn::Parameter*>& params) {
  return Unimplemented("parallel", "A", "AllReduceGradientsNaive");
}

// TODO(parallel stage A): AssignBuckets
//  1. Visit parameters from the LAST to the FIRST (backward produces gradients in that order).
//  2. Start a new bucket when the current one is non-empty and adding the parameter would exceed
//     bucket_bytes; a parameter bigger than bucket_bytes therefore sits alone.
//  3. Example: bytes {4, 4, 4, 8}, bucket_bytes 8 -> {{3}, {2, 1}, {0}}. No parameters -> no buckets.
std::vector<std::vector<int>> AssignBuckets(const std::vector<size_t>& param_bytes, size_t bucket_bytes) {
  throw NotImplementedError("parallel", "A", "AssignBuckets");
}

// Your per-instance state: the communicator and stream, the deduplicated parameters, the buckets and
// their flat buffers (MemCategory::kCommBuffers), per-bucket counts of gradients still pending, the
// buckets launched this step, and the first error a hook met.
struct BucketedDataParallel::Impl {
  std::mutex mu;
};

BucketedDataParallel::BucketedDataParallel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

// TODO(parallel stage A): ~BucketedDataParallel -- clear the on_grad_ready hooks you installed.
BucketedDataParallel::~BucketedDataParallel() = default;

// TODO(parallel stage A): BucketedDataParallel::Create
//  1. bucket_bytes == 0 or a null parameter: InvalidArgument.
//  2. Deduplicate `params`, keeping first occurrences (a tied weight listed twice is one parameter).
//  3. buckets = AssignBuckets(gradient bytes of each parameter, bucket_bytes); one flat f32 buffer per
//     bucket (tensor::Tensor with MemCategory::kCommBuffers).
//  4. Install each parameter's on_grad_ready hook. The hook runs when that gradient is FINAL (after the
//     last of its uses: a tied weight is used twice). When the last pending parameter of a bucket is
//     ready: copy the bucket's gradients into its buffer and launch ONE in-place averaging AllReduce on the
//     stream, without waiting for it. A bucket launched earlier would send an incomplete gradient.
//  5. Start in the state BeginStep() leaves.
absl::StatusOr<std::unique_ptr<BucketedDataParallel>> BucketedDataParallel::Create(
    comm::Comm& comm, comm::Stream& stream, std::vector<nn::Parameter*> params, size_t bucket_bytes) {
  return Unimplemented("parallel", "A", "BucketedDataParallel::Create");
}

// TODO(parallel stage A): BeginStep -- every bucket pending in full again, nothing launched, no error.
void BucketedDataParallel::BeginStep() { throw NotImplementedError("parallel", "A", "BeginStep"); }

// TODO(parallel stage A): FinishGradientSync
//  1. A hook error: return it.
//  2. A bucket that never launched: FailedPrecondition naming the bucket and its first parameter.
//  3. Synchronize the stream (return its error), then copy each buffer back into its gradients.
absl::Status BucketedDataParallel::FinishGradientSync() {
  return Unimplemented("parallel", "A", "FinishGradientSync");
}

// TODO(parallel stage A): the accessors below.
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
