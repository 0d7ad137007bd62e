// Lab 7 (composition), stage D (solution): ZeRO-3 inside a pipeline stage, resharded after every use or
// kept gathered for the step.
#include "labs/composition/fsdp_pipeline.h"

#include <cstring>

#include "labs/parallel/zero.h"
#include "reference/base/status.h"
#include "reference/tensor/ops.h"

namespace distlab::composition {

using tensor::MemCategory;
using tensor::Tensor;

namespace {

// One unit's shards and the flat layout they live in.
struct ShardedUnit {
  std::vector<nn::Parameter*> params;
  int64_t numel = 0, shard = 0, offset = 0;
  Tensor values, grads, m, v;  // [S] each: kParameters, kGradients, kOptimizerState x 2
  bool gathered = false;       // keep mode: gathered for this step
};

class Zero3Sharder : public DpSharder {
 public:
  Zero3Sharder(comm::Comm& dp, comm::Stream& stream, std::vector<Unit> units, nn::AdamWConfig adam,
               bool reshard)
      : dp_(dp), stream_(stream), adam_(adam), reshard_(reshard) {
    const int n = dp.size();
    for (Unit& u : units) {
      ShardedUnit s;
      s.params = u.params;
      s.numel = nn::CountParameters(u.params);
      s.shard = parallel::ShardSize(s.numel, n);
      s.offset = parallel::ShardOffset(s.numel, dp.rank(), n);
      // The own shard of the flat parameters (the zero padding past numel included).
      std::vector<float> flat(s.shard * n, 0.f);
      int64_t at = 0;
      for (nn::Parameter* p : u.params) {
        std::memcpy(flat.data() + at, p->value.f32(), p->value.bytes());
        at += p->numel();
        p->value.Release();
        p->grad.Release();
      }
      s.values = Tensor::FromVector({s.shard}, {flat.begin() + s.offset, flat.begin() + s.offset + s.shard},
                                    MemCategory::kParameters);
      s.grads = Tensor({s.shard}, tensor::DType::kF32, MemCategory::kGradients);
      s.m = Tensor({s.shard}, tensor::DType::kF32, MemCategory::kOptimizerState);
      s.v = Tensor({s.shard}, tensor::DType::kF32, MemCategory::kOptimizerState);
      units_.push_back(std::move(s));
    }
  }

  absl::Status BeginStep() override {
    for (ShardedUnit& u : units_) tensor::Fill(u.grads, 0.f);
    return absl::OkStatus();
  }

  absl::Status BeforeForward(int unit, int) override {
    ShardedUnit& u = units_[unit];
    if (reshard_) return Gather(u);
    if (u.gathered) return absl::OkStatus();
    RETURN_IF_ERROR(Gather(u));
    AllocateGrads(u);
    u.gathered = true;
    return absl::OkStatus();
  }

  absl::Status AfterForward(int unit, int) override {
    if (reshard_) Free(units_[unit], /*grads=*/false);
    return absl::OkStatus();
  }

  absl::Status BeforeBackward(int unit, int) override {
    ShardedUnit& u = units_[unit];
    if (!reshard_) return absl::OkStatus();
    RETURN_IF_ERROR(Gather(u));
    AllocateGrads(u);
    return absl::OkStatus();
  }

  absl::Status AfterBackward(int unit, int, bool last_micro_batch) override {
    ShardedUnit& u = units_[unit];
    if (!reshard_ && !last_micro_batch) return absl::OkStatus();  // keep: accumulate in the full gradients
    RETURN_IF_ERROR(ReduceGrads(u));
    Free(u, /*grads=*/true);
    u.gathered = false;
    return absl::OkStatus();
  }

  absl::Status FinishStep() override {
    ++step_;
    for (ShardedUnit& u : units_) {
      nn::AdamWUpdate(adam_, step_, u.values.f32(), u.grads.f32(), u.m.f32(), u.v.f32(), u.shard);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::vector<float>>> FullValues(int unit) override {
    ShardedUnit& u = units_[unit];
    Tensor flat({u.shard * dp_.size()}, tensor::DType::kF32, MemCategory::kCommBuffers);
    RETURN_IF_ERROR(AllGather(u, flat));
    std::vector<std::vector<float>> out;
    const float* at = flat.f32();
    for (nn::Parameter* p : u.params) {
      out.emplace_back(at, at + p->numel());
      at += p->numel();
    }
    return out;
  }

 private:
  absl::Status AllGather(ShardedUnit& u, Tensor& flat) {
    std::memcpy(flat.f32() + u.offset, u.values.f32(), u.values.bytes());
    if (dp_.size() == 1) return absl::OkStatus();
    RETURN_IF_ERROR(dp_.AllGather(flat.f32() + u.offset, flat.f32(), u.shard, comm::DataType::kF32, stream_));
    return stream_.Synchronize();
  }

  // All-gather the unit's flat parameters into its tensors (allocated again).
  absl::Status Gather(ShardedUnit& u) {
    Tensor flat({u.shard * dp_.size()}, tensor::DType::kF32, MemCategory::kCommBuffers);
    RETURN_IF_ERROR(AllGather(u, flat));
    const float* at = flat.f32();
    for (nn::Parameter* p : u.params) {
      p->value.Allocate();
      std::memcpy(p->value.f32(), at, p->value.bytes());
      at += p->numel();
    }
    return absl::OkStatus();
  }

  static void AllocateGrads(ShardedUnit& u) {
    for (nn::Parameter* p : u.params) p->grad.Allocate();  // zeroed
  }

  static void Free(ShardedUnit& u, bool grads) {
    for (nn::Parameter* p : u.params) {
      p->value.Release();
      if (grads) p->grad.Release();
    }
  }

  // Reduce-scatter (avg) the unit's full gradients and add the own slice into the gradient shard.
  absl::Status ReduceGrads(ShardedUnit& u) {
    Tensor flat({u.shard * dp_.size()}, tensor::DType::kF32, MemCategory::kCommBuffers);
    float* at = flat.f32();
    for (nn::Parameter* p : u.params) {
      std::memcpy(at, p->grad.f32(), p->grad.bytes());
      at += p->numel();
    }
    float* own = flat.f32() + u.offset;
    if (dp_.size() > 1) {
      RETURN_IF_ERROR(
          dp_.ReduceScatter(flat.f32(), own, u.shard, comm::DataType::kF32, comm::RedOp::kAvg, stream_));
      RETURN_IF_ERROR(stream_.Synchronize());
    }
    float* g = u.grads.f32();
    for (int64_t i = 0; i < u.shard; ++i) g[i] += own[i];
    return absl::OkStatus();
  }

  comm::Comm& dp_;
  comm::Stream& stream_;
  nn::AdamWConfig adam_;
  bool reshard_;
  std::vector<ShardedUnit> units_;
  int64_t step_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DpSharder>> MakeZero3Sharder(comm::Comm& dp, comm::Stream& stream,
                                                            std::vector<Unit> units, nn::AdamWConfig adam,
                                                            bool reshard_after_use) {
  return std::unique_ptr<DpSharder>(new Zero3Sharder(dp, stream, std::move(units), adam, reshard_after_use));
}

}  // namespace distlab::composition
