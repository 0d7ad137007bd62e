// Lab 4 stage C (solution): ZeRO-1/2/3 over TinyLM with AdamW, f32.
#include "labs/parallel/zero.h"

#include <algorithm>
#include <cstring>
#include <functional>

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
  int64_t numel = 0;   // Psi_u
  int64_t shard = 0;   // S_u
  Tensor param_shard;  // Z3: the rank's parameters (kParameters)
  Tensor grad_shard;   // Z2, Z3: the rank's averaged gradients (kGradients)
  Tensor m, v;         // the rank's Adam state (kOptimizerState)
  Tensor gather;       // Z3: the flat all-gather buffer while in flight (kCommBuffers)
  std::unique_ptr<comm::Event> gathered;
  // Z2: parameters whose gradient is not final yet this step; the flat reduce-scatter buffer in flight.
  int pending = 0;
  Tensor reduce;
  std::unique_ptr<comm::Event> reduced;
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
  bool tied = false;  // the embedding is also the output projection (unit 0 is used twice)
  int64_t step = 0;
  std::vector<Unit> units;
  std::vector<std::string> trace;
  // Z2: the hooks found on the parameters at Create (called after ours, restored by the destructor), the
  // units whose reduce-scatter is in flight, and the first error a hook met.
  std::vector<std::pair<nn::Parameter*, std::function<void(nn::Parameter&)>>> previous_hooks;
  std::vector<int> in_flight;
  absl::Status hook_status;
  // Gradient accumulation: the micro-batch being run; after the first, shards add up instead of being set.
  int micro = 0;
  float loss_scale = 1.f;  // 1/k for k micro-batches: the step's loss is the mean of theirs

  int rank() const { return comm->rank(); }
  // shard = averaged slice (first micro-batch) or shard += it (the next ones).
  void KeepShard(const float* slice, Tensor& shard) const {
    float* out = shard.f32();
    if (micro == 0) {
      std::memcpy(out, slice, shard.bytes());
    } else {
      for (int64_t j = 0; j < shard.numel(); ++j) out[j] += slice[j];
    }
  }
  int n() const { return comm->size(); }
  void Trace(const char* what, int i) { trace.push_back(std::string(what) + " " + std::to_string(i)); }

  // ----- ZeRO-3 parameter life cycle -----
  absl::Status LaunchGather(int i) {
    Unit& u = units[i];
    u.gather = Tensor({u.shard * n()}, tensor::DType::kF32, MemCategory::kCommBuffers);
    float* own = u.gather.f32() + rank() * u.shard;
    std::memcpy(own, u.param_shard.f32(), u.param_shard.bytes());
    RETURN_IF_ERROR(comm->AllGather(own, u.gather.f32(), u.shard, DataType::kF32, *stream));
    u.gathered = std::make_unique<comm::Event>();
    u.gathered->Record(*stream);
    Trace("AG", i);
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
    Trace("free", i);
  }
  void AllocateGrads(int i) {
    for (nn::Parameter* p : units[i].params) p->grad.Allocate();  // zeroed; a no-op when already there
  }

  // Reduce-scatter (avg) unit i's full gradients; the rank's averaged shard lands in `out` [S_u].
  absl::Status ReduceScatterGrads(int i, Tensor& out) {
    Unit& u = units[i];
    Tensor flat({u.shard * n()}, tensor::DType::kF32, MemCategory::kCommBuffers);
    Pack(u, /*grads=*/true, flat.f32());
    float* own = flat.f32() + rank() * u.shard;
    RETURN_IF_ERROR(comm->ReduceScatter(flat.f32(), own, u.shard, DataType::kF32, RedOp::kAvg, *stream));
    RETURN_IF_ERROR(stream->Synchronize());
    KeepShard(own, out);
    return absl::OkStatus();
  }

  // ----- ZeRO-2: one bucket per unit, reduce-scattered during backward -----
  // A parameter of unit i is final (on_grad_ready). When it was the unit's last one, pack the unit's
  // gradients into a flat buffer, free the full gradients right away (the buffer holds them now) and
  // launch the averaging reduce-scatter on the stream while backward goes on. At most two buckets stay in
  // flight: launching this one retires the previous one (its shard is kept, its buffer freed).
  void OnGradReady(int i) {
    Unit& u = units[i];
    if (--u.pending > 0) return;
    u.reduce = Tensor({u.shard * n()}, tensor::DType::kF32, MemCategory::kCommBuffers);
    Pack(u, /*grads=*/true, u.reduce.f32());
    for (nn::Parameter* p : u.params) p->grad.Release();
    Trace("RS", i);
    float* own = u.reduce.f32() + rank() * u.shard;
    absl::Status s = comm->ReduceScatter(u.reduce.f32(), own, u.shard, DataType::kF32, RedOp::kAvg, *stream);
    if (s.ok()) {
      u.reduced = std::make_unique<comm::Event>();
      u.reduced->Record(*stream);
      for (int j : in_flight) {
        if (s.ok()) s = Retire(j);
      }
      in_flight.assign(1, i);
    }
    if (!s.ok() && hook_status.ok()) hook_status = s;
  }
  // Waits for unit i's reduce-scatter, keeps the rank's averaged shard, frees the flat buffer.
  absl::Status Retire(int i) {
    Unit& u = units[i];
    if (!u.reduced) return absl::InternalError("unit " + std::to_string(i) + " has no reduce-scatter");
    RETURN_IF_ERROR(u.reduced->Synchronize());
    RETURN_IF_ERROR(comm->GetAsyncError());
    KeepShard(u.reduce.f32() + rank() * u.shard, u.grad_shard);
    u.reduce = Tensor();
    u.reduced.reset();
    return absl::OkStatus();
  }

  // Unit i's forward (u = 0: embedding; 1..L: residual MLP block; L+1: untied head) on activation x.
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

  // ZeRO-3. Untied: every unit is gathered before its forward, freed after it, gathered again for its
  // backward, reduce-scattered and freed. Tied: unit 0 (the embedding) is used first and last in forward
  // and first and last in backward, so it is gathered once and stays until the end of backward (FSDP keeps
  // a root unit's parameters the same way); its gradient collects both contributions -- the projection's,
  // then the lookup's -- before its one reduce-scatter.
  absl::StatusOr<float> PassZero3(const nn::Batch& b) {
    const int U = static_cast<int>(units.size());
    auto resident = [&](int i) { return tied && i == 0; };  // gathered for the whole step
    // Forward: gather u+1 while u computes; free u as soon as it has run.
    RETURN_IF_ERROR(LaunchGather(0));
    Tensor x;
    for (int i = 0; i < U; ++i) {
      if (i + 1 < U) RETURN_IF_ERROR(LaunchGather(i + 1));
      RETURN_IF_ERROR(WaitGather(i));
      Trace("F", i);
      x = Forward(i, b, x);
      if (!resident(i)) Free(i);
    }
    if (tied) {
      trace.push_back("F head");
      x = model->embedding().Project(x);
    }
    const float loss = model->loss().Forward(x, b.targets);
    // Backward: gather again (the parameters were freed), in reverse, prefetching u-1.
    Tensor d = model->loss().Backward(loss_scale);
    int i = U - 1;
    if (!resident(i)) RETURN_IF_ERROR(LaunchGather(i));
    if (tied) {
      AllocateGrads(0);
      trace.push_back("B head");
      d = model->embedding().ProjectBackward(d);  // first contribution to unit 0's gradient
    }
    for (; i >= 0; --i) {
      if (i - 1 >= 0 && !resident(i - 1)) RETURN_IF_ERROR(LaunchGather(i - 1));
      if (!resident(i)) RETURN_IF_ERROR(WaitGather(i));
      AllocateGrads(i);  // tied unit 0 keeps the projection's contribution
      Trace("B", i);
      d = Backward(i, d);
      Trace("RS", i);
      RETURN_IF_ERROR(ReduceScatterGrads(i, units[i].grad_shard));
      Free(i);
    }
    return loss;
  }
  absl::Status UpdateZero3() {
    ++step;
    for (Unit& u : units) {
      nn::AdamWUpdate(adam, step, u.param_shard.f32(), u.grad_shard.f32(), u.m.f32(), u.v.f32(), u.shard);
    }
    return absl::OkStatus();
  }

  // ZeRO-2: backward unit by unit so that a unit's full gradients exist only while it computes; the
  // gradient-ready hooks launch each unit's reduce-scatter the moment its last gradient is final.
  absl::StatusOr<float> PassZero2(const nn::Batch& b) {
    for (Unit& u : units) {
      for (nn::Parameter* p : u.params) {
        if (p->pending_uses() != 0) {
          return absl::FailedPreconditionError("parameter '" + p->name() + "' has " +
                                               std::to_string(p->pending_uses()) +
                                               " pending uses: a forward ran without its backward");
        }
      }
      u.pending = static_cast<int>(u.params.size());
    }
    hook_status = absl::OkStatus();
    in_flight.clear();
    const float loss = model->Forward(b);
    Tensor d = model->loss().Backward(loss_scale);
    const int U = static_cast<int>(units.size());
    int i = U - 1;
    if (tied) {
      AllocateGrads(0);
      trace.push_back("B head");
      d = model->embedding().ProjectBackward(d);
    }
    for (; i >= 0; --i) {
      AllocateGrads(i);
      Trace("B", i);
      d = Backward(i, d);
    }
    RETURN_IF_ERROR(hook_status);
    for (int j : in_flight) RETURN_IF_ERROR(Retire(j));
    in_flight.clear();
    for (size_t j = 0; j < units.size(); ++j) {
      if (units[j].pending != 0) {
        return absl::InternalError("unit " + std::to_string(j) + " was never reduce-scattered");
      }
    }
    return loss;
  }
  absl::Status UpdateZero2() {
    ++step;
    for (Unit& u : units) RETURN_IF_ERROR(UpdateAndGather(u, u.grad_shard));
    return absl::OkStatus();
  }

  // ZeRO-1 keeps full gradients, so micro-batches accumulate locally (PyTorch's no_sync): one
  // reduce-scatter per unit and step, into a temporary shard, whatever the number of micro-batches.
  absl::StatusOr<float> PassZero1(const nn::Batch& b) {
    if (micro == 0) model->ZeroGrad();
    const float loss = model->Forward(b);
    model->Backward(loss_scale);
    return loss;
  }
  absl::Status UpdateZero1() {
    ++step;
    micro = 0;  // one reduce-scatter of the locally accumulated gradients: its shard is set, not added
    for (size_t i = 0; i < units.size(); ++i) {
      Tensor g({units[i].shard}, tensor::DType::kF32, MemCategory::kCommBuffers);
      RETURN_IF_ERROR(ReduceScatterGrads(static_cast<int>(i), g));
      RETURN_IF_ERROR(UpdateAndGather(units[i], g));
    }
    return absl::OkStatus();
  }

  // k micro-batches, then one update. Z2/Z3 reduce-scatter every micro-batch's gradients (they have no
  // full gradient to accumulate into) and add the shards up: gradient traffic k times per step.
  absl::StatusOr<float> Step(const std::vector<nn::Batch>& micro_batches) {
    trace.clear();
    const int k = static_cast<int>(micro_batches.size());
    loss_scale = 1.f / static_cast<float>(k);
    float loss = 0.f;
    for (micro = 0; micro < k; ++micro) {
      absl::StatusOr<float> l;
      switch (stage) {
        case ZeroStage::kZero1:
          l = PassZero1(micro_batches[micro]);
          break;
        case ZeroStage::kZero2:
          l = PassZero2(micro_batches[micro]);
          break;
        case ZeroStage::kZero3:
          l = PassZero3(micro_batches[micro]);
          break;
      }
      RETURN_IF_ERROR(l.status());
      loss += *l * loss_scale;
    }
    switch (stage) {
      case ZeroStage::kZero1:
        RETURN_IF_ERROR(UpdateZero1());
        break;
      case ZeroStage::kZero2:
        RETURN_IF_ERROR(UpdateZero2());
        break;
      case ZeroStage::kZero3:
        RETURN_IF_ERROR(UpdateZero3());
        break;
    }
    return loss;
  }

  // Update the own slice of the flat parameters with the averaged gradient shard `g`, then all-gather
  // everyone's slices in place (Z1, Z2).
  absl::Status UpdateAndGather(Unit& u, const Tensor& g) {
    Tensor flat({u.shard * n()}, tensor::DType::kF32, MemCategory::kCommBuffers);
    Pack(u, /*grads=*/false, flat.f32());
    float* own = flat.f32() + rank() * u.shard;
    nn::AdamWUpdate(adam, step, own, g.f32(), u.m.f32(), u.v.f32(), u.shard);
    RETURN_IF_ERROR(comm->AllGather(own, flat.f32(), u.shard, DataType::kF32, *stream));
    RETURN_IF_ERROR(stream->Synchronize());
    Unpack(flat.f32(), u);
    return absl::OkStatus();
  }
};

ZeroTrainer::ZeroTrainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ZeroTrainer::~ZeroTrainer() {
  if (!impl_) return;
  // Nothing may stay in flight on buffers we are about to free; then give the hooks back.
  (void)impl_->stream->Synchronize();
  for (auto& [p, hook] : impl_->previous_hooks) p->on_grad_ready = std::move(hook);
}

absl::StatusOr<std::unique_ptr<ZeroTrainer>> ZeroTrainer::Create(comm::Comm& comm, comm::Stream& stream,
                                                                 nn::TinyLM& model, ZeroStage stage,
                                                                 nn::AdamWConfig adam) {
  auto impl = std::make_unique<Impl>();
  impl->comm = &comm;
  impl->stream = &stream;
  impl->model = &model;
  impl->stage = stage;
  impl->adam = adam;
  impl->tied = model.config().tie_embeddings;
  const int n = comm.size(), rank = comm.rank();
  // Units: the embedding (with the tied projection it is one weight, one unit), each block, the untied head.
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
    // Full gradients exist only inside backward, one unit at a time; the hooks reduce-scatter them.
    Impl* raw = impl.get();
    for (size_t i = 0; i < raw->units.size(); ++i) {
      for (nn::Parameter* p : raw->units[i].params) {
        p->grad.Release();
        raw->previous_hooks.emplace_back(p, p->on_grad_ready);
        p->on_grad_ready = [raw, i, prev = p->on_grad_ready](nn::Parameter& q) {
          raw->OnGradReady(static_cast<int>(i));
          if (prev) prev(q);
        };
      }
    }
  }
  return std::unique_ptr<ZeroTrainer>(new ZeroTrainer(std::move(impl)));
}

absl::StatusOr<float> ZeroTrainer::Step(const std::vector<nn::Batch>& micro_batches) {
  if (micro_batches.empty()) return absl::InvalidArgumentError("Step needs at least one micro-batch");
  for (const nn::Batch& b : micro_batches) {
    if (b.ids.empty() || b.ids.size() != micro_batches[0].ids.size()) {
      return absl::InvalidArgumentError(
          "micro-batches must be non-empty and of equal size (the step's loss is the mean of theirs): got " +
          std::to_string(b.ids.size()) + " rows next to " + std::to_string(micro_batches[0].ids.size()));
    }
  }
  absl::StatusOr<float> loss = impl_->Step(micro_batches);
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
      RETURN_IF_ERROR(
          m.comm->AllGather(u.param_shard.f32(), flat.data(), u.shard, DataType::kF32, *m.stream));
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
