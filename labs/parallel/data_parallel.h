// Lab 4 (parallel), stage A: data parallelism. Every rank holds the whole model, runs forward and backward on
// its own slice of the global batch, and the ranks combine their gradients before the optimizer step.
//
// Vocabulary: n = ranks, Psi = parameters, B = global batch (each rank takes B/n rows), bucket = a flat
// f32 buffer holding the gradients of a run of consecutive parameters (in reverse order).
//
// Gradient synchronisation leaves every rank with the gradient one process would compute on all B rows
// (each rank's loss being the mean over its own B/n rows), so every rank takes the same optimizer step.
//
// Left out: gradient compression, unused-parameter detection, uneven batches.
#ifndef DISTLAB_LABS_PARALLEL_DATA_PARALLEL_H_
#define DISTLAB_LABS_PARALLEL_DATA_PARALLEL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reference/comm/comm.h"
#include "reference/nn/parameter.h"

namespace distlab::parallel {

// Naive DDP, called after backward: every parameter's gradient becomes the single-process gradient (file
// comment), in place, with one all-reduce per parameter; all of them have completed on return (the stream
// is synchronized). One rank: no communication.
absl::Status AllReduceGradientsNaive(comm::Comm& comm, comm::Stream& stream,
                                     const std::vector<nn::Parameter*>& params);

// Bucket assignment: walk the parameters from last to first (the order backward finishes them) and cut a
// new bucket whenever adding the next parameter would push the current bucket over `bucket_bytes`; a
// parameter larger than `bucket_bytes` gets a bucket of its own; no bucket is empty.
// param_bytes[i] is parameter i's gradient size in bytes. Returns, per bucket, the parameter indices in
// the order they were added (descending).
std::vector<std::vector<int>> AssignBuckets(const std::vector<size_t>& param_bytes, size_t bucket_bytes);

// Bucketed, overlapped DDP (PyTorch DDP's reducer, in miniature).
//
// Create() deduplicates `params` (a tied weight listed twice is one parameter), assigns buckets, allocates
// one flat f32 buffer per bucket (MemCategory::kCommBuffers: the buffers hold every gradient once) and
// installs each parameter's on_grad_ready hook. Each bucket is one in-place AllReduce of its flat buffer on
// `stream` per step, launched from a hook during backward -- as early as correctness allows, and not waited
// for there -- so that communication overlaps the rest of backward; launched() records the launch order.
// After FinishGradientSync() every gradient is the single-process gradient (file comment).
class BucketedDataParallel {
 public:
  static absl::StatusOr<std::unique_ptr<BucketedDataParallel>> Create(comm::Comm& comm, comm::Stream& stream,
                                                                      std::vector<nn::Parameter*> params,
                                                                      size_t bucket_bytes);
  ~BucketedDataParallel();  // removes the hooks
  BucketedDataParallel(const BucketedDataParallel&) = delete;
  BucketedDataParallel& operator=(const BucketedDataParallel&) = delete;

  // Starts a step: forgets which buckets launched (call after ZeroGrad, before forward).
  void BeginStep();
  // Waits for every bucket's all-reduce and writes the synchronised gradients back. Error when a bucket never
  // launched (a parameter's gradient never became ready: call after backward), or when communication failed.
  // The first is FAILED_PRECONDITION naming the lowest-numbered bucket that did not launch, its FIRST
  // parameter (the first AssignBuckets put in it, the highest index) and how many of its gradients are not
  // ready, exactly:
  //   "bucket 1 (first parameter 'l0.bias') never launched: 2 of its gradients are not ready; call
  //    FinishGradientSync after backward"
  absl::Status FinishGradientSync();

  // Per bucket, the parameters in it (indices into the deduplicated list, as AssignBuckets returns them).
  const std::vector<std::vector<int>>& buckets() const;
  // The deduplicated parameters, in the order given.
  const std::vector<nn::Parameter*>& parameters() const;
  // Buckets launched since BeginStep, in launch order.
  std::vector<int> launched() const;
  // The first error a hook met while launching (hooks cannot return one); OK otherwise.
  absl::Status hook_status() const;

  struct Impl;

 private:
  explicit BucketedDataParallel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace distlab::parallel

#endif  // DISTLAB_LABS_PARALLEL_DATA_PARALLEL_H_
