// Lab 4 stage C (solution): ZeRO-1/2/3 over TinyLM with AdamW, f32.
#include "labs/parallel/zero.h"

#include <algorithm>
#include <cstring>

#include "reference/base/status.h"
#include "reference/tensor/ops.h"

namespace distlab::parallel {

using comm::DataType;
using comm::RedOp;
using tensor::MemCategory;
using tensor::Tensor;

int64_t ShardSize(int64_t numel, int n) { return (numel + n - 1) / n; }
int64_t ShardOffset(int64_t numel, int rank, int n) { return rank * ShardSize(numel, n); }

namespace {

struct Unit {
  std::vector<nn::Parameter*> params;
  int64_t numel = 0;  // Psi_u
  int64_t shard = 0;  // S_u
  Tensor param_shard;  // Z3: the rank's parameters (kParameters)
  Tensor grad_shard;   // Z2, Z3: the rank's averaged gradients (kGradients)
  Tensor m, v;         // the rank's Adam state (kOptimizerState)
  Tensor gather;       // Z3: the flat all-gather buffer while in flight (kCommBuffers)
  std::unique_ptr<comm::Event> gathered;
};

// flat[0, Psi_u) = the unit's parameter values (or gradients), in order.
void Pack(const Unit& u, bool grads, float* flat) {
  for (nn::Parameter* p : u.params) {
    const Tensor& t = grads ? p->grad : p->value;
    std::memcpy(flat, t.f32(), t.bytes());
    flat += t.numel();
  }
}
void Unpack(const float* flat, const Unit& u) {
  for (nn::Parameter* p : u.params) {
    std::memcpy(p->value.f32(), flat, p->value.bytes());
    flat += p->value.numel();
  }
}

}  // namespace

struct ZeroTrainer::Impl {
  comm::Comm* comm;
  comm::Stream* stream;
  nn::TinyLM* model;
  ZeroStage stage;
  nn::AdamWConfig adam;
  int64_t step = 0;
  std::vector<Unit> units;
  std::vector<std::string> trace;

  int rank() const { return comm->rank(); }
  int n() const { return comm->size(); }

  // ----- ZeRO-3 parameter life cycle -----
  absl::Status LaunchGather(int i) {
    Unit& u = units[i];
    u.gather = Tensor({u.shard * n()}, tensor::DType::kF32, MemCategory::kCommBuffers);
    float* own = u.gather.f32() + rank() * u.shard;
    std::memcpy(own, u.param_shard.f32(), u.param_shard.bytes());
    RETURN_IF_ERROR(comm->AllGather(own, u.gather.f32(), u.shard, DataType::kF32, *stream));
    u.gathered = std::make_unique<comm::Event>();
    u.gathered->Record(*stream);
    trace.push_back("AG " + std::to_string(i));
    return absl::OkStatus();
  }
  absl::Status WaitGather(int i) {
    Unit& u = units[i];
    if (!u.gathered) return absl::InternalError("unit " + std::to_string(i) + " was never gathered");
    RETURN_IF_ERROR(u.gathered->Synchronize());
    RETURN_IF_ERROR(comm->GetAsyncError());
    for (nn::Parameter* p : u.params) p->value.Allocate();
    Unpack(u.gather.f32(), u);
    u.gather = Tensor();  // the flat buffer goes; the parameters stay until Free
    u.gathered.reset();
    return absl::OkStatus();
  }
  void Free(int i) {
    for (nn::Parameter* p : units[i].params) {
      p->value.Release();
      p->grad.Release();
    }
    trace.push_back("free " + std::to_string(i));
  }

  // Reduce-scatter (avg) unit i's full gradients; the rank's averaged shard lands in `out` [S_u].
  absl::Status ReduceScatterGrads(int i, Tensor& out) {
    Unit& u = units[i];
    Tensor flat({u.shard * n()}, tensor::DType::kF32, MemCategory::kCommBuffers);
    Pack(u, /*grads=*/true, flat.f32());
    float* own = flat.f32() + rank() * u.shard;
    RETURN_IF_ERROR(comm->ReduceScatter(flat.f32(), own, u.shard, DataType::kF32, RedOp::kAvg, *stream));
    RETURN_IF_ERROR(stream->Synchronize());
    std::memcpy(out.f32(), own, out.bytes());
    return absl::OkStatus();
  }

  // Unit i's forward (u = 0: embedding; 1..L: residual MLP block; L+1: head) on activation x.
  Tensor Forward(int i, const nn::Batch& b, const Tensor& x) {
    const int L = model->config().layers;
    if (i == 0) return model->embedding().Forward(b.ids);
    if (i <= L) {
      Tensor y = model->block(i - 1).Forward(x);
      tensor::Axpy(1.f, x, y);
      return y;
    }
    return model->head()->Forward(x);
  }
  Tensor Backward(int i, const Tensor& dy) {
    const int L = model->config().layers;
    if (i == 0) {
      model->embedding().Backward(dy);
      return Tensor();
    }
    if (i <= L) {
      Tensor d = model->block(i - 1).Backward(dy);
      tensor::Axpy(1.f, dy, d);
      return d;
    }
    return model->head()->Backward(dy);
  }

  absl::StatusOr<float> StepZero3(const nn::Batch& b) {
    trace.clear();
    const int U = static_cast<int>(units.size());
    // Forward: gather u+1 while u computes; free u as soon as it has run.
    RETURN_IF_ERROR(LaunchGather(0));
    Tensor x;
    for (int i = 0; i < U; ++i) {
      if (i + 1 < U) RETURN_IF_ERROR(LaunchGather(i + 1));
      RETURN_IF_ERROR(WaitGather(i));
      trace.push_back("F " + std::to_string(i));
      x = Forward(i, b, x);
      Free(i);
    }
    const float loss = model->loss().Forward(x, b.targets);
    // Backward: gather again (the parameters were freed), in reverse, prefetching u-1.
    Tensor d = model->loss().Backward();
    RETURN_IF_ERROR(LaunchGather(U - 1));
    for (int i = U - 1; i >= 0; --i) {
      if (i - 1 >= 0) RETURN_IF_ERROR(LaunchGather(i - 1));
      RETURN_IF_ERROR(WaitGather(i));
      for (nn::Parameter* p : units[i].params) p->grad.Allocate();  // zeroed
      trace.push_back("B " + std::to_string(i));
      d = Backward(i, d);
      trace.push_back("RS " + std::to_string(i));
      RETURN_IF_ERROR(ReduceScatterGrads(i, units[i].grad_shard));
      Free(i);
    }
    ++step;
    for (Unit& u : units) {
      nn::AdamWUpdate(adam, step, u.param_shard.f32(), u.grad_shard.f32(), u.m.f32(), u.v.f32(), u.shard);
    }
    return loss;
  }

  absl::StatusOr<float> StepZero12(const nn::Batch& b) {
    model->ZeroGrad();  // Z2 re-allocates the full gradients it freed last step
    const float loss = model->Forward(b);
    model->Backward();
    ++step;
    for (Unit& u : units) {
      // Z1 keeps the shard in a temporary, Z2 in its persistent grad_shard.
      Tensor tmp;
      Tensor* g = &u.grad_shard;
      if (stage == ZeroStage::kZero1) {
        tmp = Tensor({u.shard}, tensor::DType::kF32, MemCategory::kCommBuffers);
        g = &tmp;
      }
      RETURN_IF_ERROR(ReduceScatterGradsFor(u, *g));
      if (stage == ZeroStage::kZero2) {
        for (nn::Parameter* p : u.params) p->grad.Release();
      }
      // Update the own slice of the flat parameters, then all-gather everyone's slices in place.
      Tensor flat({u.shard * n()}, tensor::DType::kF32, MemCategory::kCommBuffers);
      Pack(u, /*grads=*/false, flat.f32());
      float* own = flat.f32() + rank() * u.shard;
      nn::AdamWUpdate(adam, step, own, g->f32(), u.m.f32(), u.v.f32(), u.shard);
      RETURN_IF_ERROR(comm->AllGather(own, flat.f32(), u.shard, DataType::kF32, *stream));
      RETURN_IF_ERROR(stream->Synchronize());
      Unpack(flat.f32(), u);
    }
    return loss;
  }

  absl::Status ReduceScatterGradsFor(Unit& u, Tensor& out) {
    const int i = static_cast<int>(&u - units.data());
    return ReduceScatterGrads(i, out);
  }
};

ZeroTrainer::ZeroTrainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ZeroTrainer::~ZeroTrainer() = default;

absl::StatusOr<std::unique_ptr<ZeroTrainer>> ZeroTrainer::Create(comm::Comm& comm, comm::Stream& stream,
                                                                 nn::TinyLM& model, ZeroStage stage,
                                                                 nn::AdamWConfig adam) {
  if (stage == ZeroStage::kZero3 && model.config().tie_embeddings) {
    return absl::InvalidArgumentError(
        "ZeRO-3 needs tie_embeddings = false: a tied weight would belong to two units");
  }
  auto impl = std::make_unique<Impl>();
  impl->comm = &comm;
  impl->stream = &stream;
  impl->model = &model;
  impl->stage = stage;
  impl->adam = adam;
  const int n = comm.size(), rank = comm.rank();
  std::vector<std::vector<nn::Parameter*>> groups;
  groups.push_back({&model.embedding().weight()});
  for (int l = 0; l < model.config().layers; ++l) groups.push_back(model.block(l).Parameters());
  if (model.head() != nullptr) groups.push_back(model.head()->Parameters());
  for (auto& g : groups) {
    Unit u;
    u.params = g;
    u.numel = nn::CountParameters(g);
    u.shard = ShardSize(u.numel, n);
    u.m = Tensor({u.shard}, tensor::DType::kF32, MemCategory::kOptimizerState);
    u.v = Tensor({u.shard}, tensor::DType::kF32, MemCategory::kOptimizerState);
    if (stage != ZeroStage::kZero1) {
      u.grad_shard = Tensor({u.shard}, tensor::DType::kF32, MemCategory::kGradients);
    }
    if (stage == ZeroStage::kZero3) {
      // Keep this rank's slice of the (identical) full parameters, then release the full tensors.
      std::vector<float> flat(u.shard * n, 0.f);
      Pack(u, false, flat.data());
      u.param_shard = Tensor({u.shard}, tensor::DType::kF32, MemCategory::kParameters);
      std::memcpy(u.param_shard.f32(), flat.data() + rank * u.shard, u.param_shard.bytes());
      for (nn::Parameter* p : g) {
        p->value.Release();
        p->grad.Release();
      }
    }
    impl->units.push_back(std::move(u));
  }
  if (stage == ZeroStage::kZero2) {
    for (auto& u : impl->units)
      for (nn::Parameter* p : u.params) p->grad.Release();
  }
  return std::unique_ptr<ZeroTrainer>(new ZeroTrainer(std::move(impl)));
}

absl::StatusOr<float> ZeroTrainer::Step(const nn::Batch& local) {
  absl::StatusOr<float> loss = impl_->stage == ZeroStage::kZero3 ? impl_->StepZero3(local)
                                                                 : impl_->StepZero12(local);
  impl_->model->ClearCache();
  return loss;
}

absl::StatusOr<std::vector<float>> ZeroTrainer::FullParameters() {
  Impl& m = *impl_;
  std::vector<float> out;
  for (int i = 0; i < static_cast<int>(m.units.size()); ++i) {
    Unit& u = m.units[i];
    std::vector<float> flat(u.shard * m.n());
    if (m.stage == ZeroStage::kZero3) {
      RETURN_IF_ERROR(m.comm->AllGather(u.param_shard.f32(), flat.data(), u.shard, DataType::kF32, *m.stream));
      RETURN_IF_ERROR(m.stream->Synchronize());
    } else {
      Pack(u, false, flat.data());
    }
    out.insert(out.end(), flat.begin(), flat.begin() + u.numel);
  }
  return out;
}

std::vector<std::string> ZeroTrainer::trace() const { return impl_->trace; }

}  // namespace distlab::parallel
