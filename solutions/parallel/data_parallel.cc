// Lab 4 stage A (solution): naive and bucketed data-parallel gradient averaging.
#include "labs/parallel/data_parallel.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

#include "reference/base/status.h"
#include "reference/tensor/tensor.h"

namespace distlab::parallel {

using comm::DataType;
using comm::RedOp;

absl::Status AllReduceGradientsNaive(comm::Comm& comm, comm::Stream& stream,
                                     const std::vector<nn::Parameter*>& params) {
  if (comm.size() == 1) return absl::OkStatus();  // the mean of one rank is itself
  for (nn::Parameter* p : params) {
    float* g = p->grad.f32();
    RETURN_IF_ERROR(comm.AllReduce(g, g, p->numel(), DataType::kF32, RedOp::kAvg, stream));
  }
  return stream.Synchronize();
}

std::vector<std::vector<int>> AssignBuckets(const std::vector<size_t>& param_bytes, size_t bucket_bytes) {
  std::vector<std::vector<int>> buckets;
  size_t filled = 0;
  for (int i = static_cast<int>(param_bytes.size()) - 1; i >= 0; --i) {
    // Cut before a parameter that would overflow a non-empty bucket.
    if (buckets.empty() || (!buckets.back().empty() && filled + param_bytes[i] > bucket_bytes)) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(i);
    filled += param_bytes[i];
  }
  return buckets;
}

struct BucketedDataParallel::Impl {
  comm::Comm* comm = nullptr;
  comm::Stream* stream = nullptr;
  std::vector<nn::Parameter*> params;
  std::vector<std::vector<int>> buckets;
  std::vector<int> bucket_of;        // parameter -> bucket
  std::vector<tensor::Tensor> flat;  // one buffer per bucket (kCommBuffers)
  std::vector<int> pending;          // per bucket: parameters not ready yet this step
  std::vector<int> launched;
  absl::Status hook_status;
  mutable std::mutex mu;

  // A parameter's gradient is final: count it off its bucket, and launch the bucket when it was the last.
  void OnReady(int index) {
    const int b = bucket_of[index];
    if (--pending[b] > 0) return;
    // Pack the bucket: its parameters' gradients, one after another, into the flat buffer.
    float* dst = flat[b].f32();
    for (int i : buckets[b]) {
      std::memcpy(dst, params[i]->grad.f32(), params[i]->grad.bytes());
      dst += params[i]->numel();
    }
    absl::Status s =
        comm->AllReduce(flat[b].f32(), flat[b].f32(), flat[b].numel(), DataType::kF32, RedOp::kAvg, *stream);
    std::lock_guard<std::mutex> lock(mu);
    launched.push_back(b);
    if (!s.ok() && hook_status.ok()) hook_status = s;
  }
};

BucketedDataParallel::BucketedDataParallel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

BucketedDataParallel::~BucketedDataParallel() {
  if (impl_) {
    for (nn::Parameter* p : impl_->params) p->on_grad_ready = nullptr;
  }
}

absl::StatusOr<std::unique_ptr<BucketedDataParallel>> BucketedDataParallel::Create(
    comm::Comm& comm, comm::Stream& stream, std::vector<nn::Parameter*> params, size_t bucket_bytes) {
  if (bucket_bytes == 0) return absl::InvalidArgumentError("bucket_bytes must be positive");
  auto impl = std::make_unique<Impl>();
  impl->comm = &comm;
  impl->stream = &stream;
  // Tied weights: the same Parameter may be listed by two modules; it is one gradient, one slot.
  for (nn::Parameter* p : params) {
    if (p == nullptr) return absl::InvalidArgumentError("null parameter");
    if (std::find(impl->params.begin(), impl->params.end(), p) == impl->params.end()) {
      impl->params.push_back(p);
    }
  }
  std::vector<size_t> bytes;
  for (nn::Parameter* p : impl->params) bytes.push_back(p->grad.bytes());
  impl->buckets = AssignBuckets(bytes, bucket_bytes);
  impl->bucket_of.assign(impl->params.size(), -1);
  for (size_t b = 0; b < impl->buckets.size(); ++b) {
    int64_t numel = 0;
    for (int i : impl->buckets[b]) {
      impl->bucket_of[i] = static_cast<int>(b);
      numel += impl->params[i]->numel();
    }
    impl->flat.emplace_back(tensor::Shape{numel}, tensor::DType::kF32, tensor::MemCategory::kCommBuffers);
  }
  Impl* raw = impl.get();
  for (size_t i = 0; i < raw->params.size(); ++i) {
    raw->params[i]->on_grad_ready = [raw, i](nn::Parameter&) { raw->OnReady(static_cast<int>(i)); };
  }
  auto ddp = std::unique_ptr<BucketedDataParallel>(new BucketedDataParallel(std::move(impl)));
  ddp->BeginStep();
  return ddp;
}

void BucketedDataParallel::BeginStep() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->pending.clear();
  for (const auto& b : impl_->buckets) impl_->pending.push_back(static_cast<int>(b.size()));
  impl_->launched.clear();
  impl_->hook_status = absl::OkStatus();
}

absl::Status BucketedDataParallel::FinishGradientSync() {
  Impl& m = *impl_;
  RETURN_IF_ERROR(hook_status());
  if (m.launched.size() != m.buckets.size()) {
    for (size_t b = 0; b < m.buckets.size(); ++b) {
      if (std::find(m.launched.begin(), m.launched.end(), static_cast<int>(b)) == m.launched.end()) {
        return absl::FailedPreconditionError(
            "bucket " + std::to_string(b) + " (first parameter '" + m.params[m.buckets[b].front()]->name() +
            "') never launched: " + std::to_string(m.pending[b]) +
            " of its gradients are not ready; call FinishGradientSync after backward");
      }
    }
  }
  RETURN_IF_ERROR(m.stream->Synchronize());
  for (size_t b = 0; b < m.buckets.size(); ++b) {
    const float* src = m.flat[b].f32();
    for (int i : m.buckets[b]) {
      std::memcpy(m.params[i]->grad.f32(), src, m.params[i]->grad.bytes());
      src += m.params[i]->numel();
    }
  }
  return absl::OkStatus();
}

const std::vector<std::vector<int>>& BucketedDataParallel::buckets() const { return impl_->buckets; }
const std::vector<nn::Parameter*>& BucketedDataParallel::parameters() const { return impl_->params; }
std::vector<int> BucketedDataParallel::launched() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->launched;
}
absl::Status BucketedDataParallel::hook_status() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->hook_status;
}

}  // namespace distlab::parallel
