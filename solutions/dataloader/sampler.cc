// Lab 2, stage A (solution): samplers and collate.
#include "labs/dataloader/sampler.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace distlab::dataloader {

int64_t SequentialSampler::size() const { return n_; }

std::vector<int64_t> SequentialSampler::Indices() {
  std::vector<int64_t> v(static_cast<size_t>(n_));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

int64_t RandomSampler::size() const { return num_samples_; }

std::vector<int64_t> RandomSampler::Indices() {
  const uint64_t seed = seed_ + static_cast<uint64_t>(pass_++);  // a new order every pass
  std::vector<int64_t> v;
  if (n_ <= 0) return v;
  if (replacement_) {
    uint64_t state = seed;
    v.reserve(static_cast<size_t>(num_samples_));
    for (int64_t i = 0; i < num_samples_; ++i) v.push_back(static_cast<int64_t>(SplitMix64(&state) % n_));
    return v;
  }
  // Whole permutations from one generator until num_samples are there (PyTorch: torch.randperm per n).
  uint64_t state = seed;
  v.reserve(static_cast<size_t>(num_samples_));
  std::vector<int64_t> perm(static_cast<size_t>(n_));
  while (static_cast<int64_t>(v.size()) < num_samples_) {
    std::iota(perm.begin(), perm.end(), 0);
    ShuffleFrom(&perm, &state);
    const size_t take =
        static_cast<size_t>(std::min<int64_t>(n_, num_samples_ - static_cast<int64_t>(v.size())));
    v.insert(v.end(), perm.begin(), perm.begin() + take);
  }
  return v;
}

SamplerState RandomSampler::state_dict() const { return SamplerState{pass_}; }

absl::Status RandomSampler::load_state_dict(const SamplerState& s) {
  if (s.pass < 0)
    return absl::InvalidArgumentError(absl::StrCat("RandomSampler: pass ", s.pass, " is negative"));
  pass_ = s.pass;  // the next Indices() is pass s.pass again, drawn from seed + s.pass
  return absl::OkStatus();
}

absl::StatusOr<BatchSampler> BatchSampler::Create(std::shared_ptr<Sampler> sampler, int64_t batch_size,
                                                  bool drop_last) {
  if (!sampler) return absl::InvalidArgumentError("BatchSampler: sampler is null");
  if (batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchSampler: batch_size must be >= 1, got ", batch_size));
  }
  return BatchSampler(std::move(sampler), batch_size, drop_last);
}

int64_t BatchSampler::size() const {
  const int64_t n = sampler_->size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

std::vector<std::vector<int64_t>> BatchSampler::Batches() {
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> cur;
  for (int64_t i : sampler_->Indices()) {
    cur.push_back(i);
    if (static_cast<int64_t>(cur.size()) == batch_size_) {
      out.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty() && !drop_last_) out.push_back(std::move(cur));  // the short last batch
  return out;
}

absl::StatusOr<std::shared_ptr<DistributedSampler>> DistributedSampler::Create(
    int64_t n, int64_t num_replicas, int64_t rank, bool shuffle, uint64_t seed, bool drop_last) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("DistributedSampler: n must be >= 0, got ", n));
  if (num_replicas < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("DistributedSampler: num_replicas must be >= 1, got ", num_replicas));
  }
  if (rank < 0 || rank >= num_replicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("DistributedSampler: rank ", rank, " is outside [0, ", num_replicas, ")"));
  }
  return std::make_shared<DistributedSampler>(n, num_replicas, rank, shuffle, seed, drop_last);
}

int64_t DistributedSampler::size() const {
  // Every rank must run the same number of steps, or the collectives of data parallelism deadlock.
  return drop_last_ ? n_ / replicas_ : (n_ + replicas_ - 1) / replicas_;
}

void DistributedSampler::set_epoch(int64_t epoch) { epoch_ = epoch; }

SamplerState DistributedSampler::state_dict() const { return SamplerState{epoch_}; }

absl::Status DistributedSampler::load_state_dict(const SamplerState& s) {
  if (s.pass < 0) {
    return absl::InvalidArgumentError(absl::StrCat("DistributedSampler: epoch ", s.pass, " is negative"));
  }
  epoch_ = s.pass;
  return absl::OkStatus();
}

std::vector<int64_t> DistributedSampler::Indices() {
  std::vector<int64_t> order(static_cast<size_t>(n_));
  std::iota(order.begin(), order.end(), 0);
  if (shuffle_) SeededShuffle(&order, seed_ + static_cast<uint64_t>(epoch_));
  const int64_t total = size() * replicas_;
  if (static_cast<int64_t>(order.size()) < total) {
    // Pad by repeating the order from its start, as many times as needed (n may be smaller than the padding).
    const size_t n = order.size();
    for (size_t i = 0; static_cast<int64_t>(order.size()) < total; ++i) order.push_back(order[i % n]);
  } else {
    order.resize(static_cast<size_t>(total));
  }
  std::vector<int64_t> mine;
  for (int64_t i = rank_; i < total; i += replicas_) mine.push_back(order[static_cast<size_t>(i)]);
  return mine;
}

absl::StatusOr<Batch> Collate(const std::vector<Sample>& samples) {
  if (samples.empty()) return absl::InvalidArgumentError("collate: no samples");
  const std::vector<int64_t>& shape = samples[0].shape;
  const int64_t per = NumElements(shape);
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "collate: sample ", i, " has shape ", ShapeString(samples[i].shape), " but sample 0 has shape ",
          ShapeString(shape), "; samples in one batch must have the same shape (pad them first)"));
    }
    if (static_cast<int64_t>(samples[i].data.size()) != per) {
      return absl::InvalidArgumentError(absl::StrCat("collate: sample ", i, " has ", samples[i].data.size(),
                                                     " values for shape ", ShapeString(shape), " (", per,
                                                     ")"));
    }
  }
  Batch b;
  b.shape.push_back(static_cast<int64_t>(samples.size()));
  b.shape.insert(b.shape.end(), shape.begin(), shape.end());
  b.numel = per * static_cast<int64_t>(samples.size());
  b.storage = std::shared_ptr<float>(new float[static_cast<size_t>(std::max<int64_t>(b.numel, 1))],
                                     std::default_delete<float[]>());
  for (size_t i = 0; i < samples.size(); ++i) {
    std::memcpy(b.storage.get() + i * per, samples[i].data.data(), sizeof(float) * per);
  }
  return b;
}

}  // namespace distlab::dataloader
