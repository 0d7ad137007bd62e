// Lab 7 (composition), stage C (solution): 3D training -- 1F1B over pp, tensor-parallel blocks, ZeRO-1
// over dp.
#include "labs/composition/train3d.h"

#include <chrono>
#include <cstring>
#include <string>

#include "labs/composition/fsdp_pipeline.h"
#include "labs/composition/tp_block.h"
#include "labs/parallel/zero.h"
#include "labs/pipeline/schedule.h"
#include "reference/base/status.h"
#include "reference/tensor/ops.h"

namespace distlab::composition {

using tensor::MemCategory;
using tensor::Tensor;

namespace {

std::vector<nn::Parameter*> AllParams(const std::vector<Unit>& units) {
  std::vector<nn::Parameter*> out;
  for (const Unit& u : units) out.insert(out.end(), u.params.begin(), u.params.end());
  return out;
}

// flat[0, numel) = the values (or gradients) of `params`, in order.
void Pack(const std::vector<nn::Parameter*>& params, bool grads, float* flat) {
  for (nn::Parameter* p : params) {
    const Tensor& t = grads ? p->grad : p->value;
    std::memcpy(flat, t.f32(), t.bytes());
    flat += t.numel();
  }
}
void Unpack(const float* flat, const std::vector<nn::Parameter*>& params) {
  for (nn::Parameter* p : params) {
    std::memcpy(p->value.f32(), flat, p->value.bytes());
    flat += p->value.numel();
  }
}

// ZeRO-1 for one stage: one flat vector of the stage's parameters, Adam state for the own shard only.
class Zero1Sharder : public DpSharder {
 public:
  Zero1Sharder(comm::Comm& dp, comm::Stream& stream, std::vector<Unit> units, nn::AdamWConfig adam)
      : dp_(dp), stream_(stream), units_(std::move(units)), params_(AllParams(units_)), adam_(adam) {
    numel_ = nn::CountParameters(params_);
    shard_ = parallel::ShardSize(numel_, dp.size());
    offset_ = parallel::ShardOffset(numel_, dp.rank(), dp.size());
    m_ = Tensor({shard_}, tensor::DType::kF32, MemCategory::kOptimizerState);
    v_ = Tensor({shard_}, tensor::DType::kF32, MemCategory::kOptimizerState);
  }

  absl::Status BeginStep() override {
    nn::ZeroGrads(params_);
    return absl::OkStatus();
  }
  absl::Status BeforeForward(int, int) override { return absl::OkStatus(); }
  absl::Status AfterForward(int, int) override { return absl::OkStatus(); }
  absl::Status BeforeBackward(int, int) override { return absl::OkStatus(); }
  absl::Status AfterBackward(int, int, bool) override { return absl::OkStatus(); }

  absl::Status FinishStep() override {
    const int n = dp_.size();
    const int64_t padded = shard_ * n;
    Tensor grads({padded}, tensor::DType::kF32, MemCategory::kCommBuffers);
    Pack(params_, /*grads=*/true, grads.f32());
    float* own_grad = grads.f32() + offset_;
    if (n > 1) {  // one reduce-scatter (avg): the own shard of the averaged gradient, in place
      RETURN_IF_ERROR(
          dp_.ReduceScatter(grads.f32(), own_grad, shard_, comm::DataType::kF32, comm::RedOp::kAvg, stream_));
      RETURN_IF_ERROR(stream_.Synchronize());
    }
    Tensor values({padded}, tensor::DType::kF32, MemCategory::kCommBuffers);
    Pack(params_, /*grads=*/false, values.f32());
    float* own = values.f32() + offset_;
    nn::AdamWUpdate(adam_, ++step_, own, own_grad, m_.f32(), v_.f32(), shard_);
    if (n > 1) {  // one all-gather: every rank's updated shard, in place
      RETURN_IF_ERROR(dp_.AllGather(own, values.f32(), shard_, comm::DataType::kF32, stream_));
      RETURN_IF_ERROR(stream_.Synchronize());
    }
    Unpack(values.f32(), params_);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::vector<float>>> FullValues(int unit) override {
    std::vector<std::vector<float>> out;
    for (nn::Parameter* p : units_[unit].params) out.push_back(p->value.ToVector());
    return out;
  }

 private:
  comm::Comm& dp_;
  comm::Stream& stream_;
  std::vector<Unit> units_;
  std::vector<nn::Parameter*> params_;
  nn::AdamWConfig adam_;
  int64_t numel_ = 0, shard_ = 0, offset_ = 0, step_ = 0;
  Tensor m_, v_;
};

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

}  // namespace

absl::StatusOr<std::unique_ptr<DpSharder>> MakeZero1Sharder(comm::Comm& dp, comm::Stream& stream,
                                                            std::vector<Unit> units, nn::AdamWConfig adam) {
  return std::unique_ptr<DpSharder>(new Zero1Sharder(dp, stream, std::move(units), adam));
}

// The state of one micro-batch between its forward and its backward on this stage.
struct MicroBatch {
  std::vector<int32_t> ids, targets;
  std::vector<nn::BlockCache> blocks;
  nn::HeadCache head;
};

struct Trainer3D::Impl {
  ProcessGrid* grid = nullptr;
  comm::Stream* stream = nullptr;
  nn::GptConfig cfg;
  Layout layout;
  int64_t batch = 0;
  int stage = 0, stages = 1, first_block = 0;
  bool first = false, last = false;
  std::unique_ptr<nn::GptEmbedding> embed;  // first stage
  std::vector<std::unique_ptr<TensorParallelBlock>> blocks;
  std::unique_ptr<nn::Embedding> wte_copy;  // last stage, tied, P > 1
  std::unique_ptr<nn::GptHead> head;        // last stage
  std::vector<Unit> units;
  std::vector<std::vector<std::string>> names;  // per unit, per parameter
  std::unique_ptr<DpSharder> sharder;
  std::vector<pipeline::Op> ops;
  std::vector<TimedEvent> events;
  std::chrono::steady_clock::time_point t0;

  int BlockUnit(int j) const { return (first ? 1 : 0) + j; }
  int HeadUnit() const { return static_cast<int>(units.size()) - 1; }
  double Now() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  nn::Parameter* TiedWeight() {
    if (!cfg.tie_embeddings || stages == 1) return nullptr;
    return first ? &embed->wte().weight() : last ? &wte_copy->weight() : nullptr;
  }

  absl::Status Exchange(Tensor* send, int to, Tensor* recv, int from);
  absl::Status Forward(MicroBatch& mb, int i, float* loss, Tensor* out);
  absl::Status Backward(MicroBatch& mb, int i, bool last_mb, Tensor in, Tensor* out);
};

// The messages between two ops: what the previous op sends and what the next op needs. Megatron's pairing:
// one group in the steady phase (both go to the same neighbour there), else the send first.
absl::Status Trainer3D::Impl::Exchange(Tensor* send, int to, Tensor* recv, int from) {
  if (send == nullptr && recv == nullptr) return absl::OkStatus();
  comm::Comm& pp = grid->axis(Axis::kPp);
  const double start = Now();
  const comm::DataType f32 = comm::DataType::kF32;
  const bool steady = layout.micro_batches > stages - 1 - stage;  // fewer warm-up forwards than micro-batches
  if (send != nullptr && recv != nullptr && to == from && steady) {
    absl::Status st = comm::GroupStart();
    if (st.ok()) st = pp.Send(send->f32(), send->numel(), f32, to, *stream);
    if (st.ok()) st = pp.Recv(recv->f32(), recv->numel(), f32, from, *stream);
    const absl::Status end = comm::GroupEnd();  // always close the group
    RETURN_IF_ERROR(st);
    RETURN_IF_ERROR(end);
    RETURN_IF_ERROR(stream->Synchronize());
    events.push_back({"pp send+recv", start, Now()});
    return absl::OkStatus();
  }
  if (send != nullptr) {
    RETURN_IF_ERROR(pp.Send(send->f32(), send->numel(), f32, to, *stream));
    RETURN_IF_ERROR(stream->Synchronize());
    events.push_back({"pp send", start, Now()});
  }
  if (recv != nullptr) {
    const double r0 = Now();
    RETURN_IF_ERROR(pp.Recv(recv->f32(), recv->numel(), f32, from, *stream));
    RETURN_IF_ERROR(stream->Synchronize());
    events.push_back({"pp recv", r0, Now()});
  }
  return absl::OkStatus();
}

// F of one micro-batch: `out` gets the activation to send (not on the last stage), `loss` the loss (last).
absl::Status Trainer3D::Impl::Forward(MicroBatch& mb, int i, float* loss, Tensor* out) {
  Tensor x = std::move(*out);  // the received activation (not on the first stage)
  if (first) {
    RETURN_IF_ERROR(sharder->BeforeForward(0, i));
    x = embed->Forward(mb.ids);
    RETURN_IF_ERROR(sharder->AfterForward(0, i));
  }
  for (size_t j = 0; j < blocks.size(); ++j) {
    RETURN_IF_ERROR(sharder->BeforeForward(BlockUnit(j), i));
    ASSIGN_OR_RETURN(x, blocks[j]->Forward(x, &mb.blocks[j]));
    RETURN_IF_ERROR(sharder->AfterForward(BlockUnit(j), i));
  }
  if (last) {
    RETURN_IF_ERROR(sharder->BeforeForward(HeadUnit(), i));
    *loss = head->Forward(x, mb.targets, &mb.head);
    RETURN_IF_ERROR(sharder->AfterForward(HeadUnit(), i));
    *out = Tensor();
  } else {
    *out = std::move(x);
  }
  return absl::OkStatus();
}

// BW of one micro-batch (loss scale 1/m): `in` is the received gradient (not on the last stage), `out` gets
// the input gradient to send (not on the first stage).
absl::Status Trainer3D::Impl::Backward(MicroBatch& mb, int i, bool last_mb, Tensor in, Tensor* out) {
  Tensor dx = std::move(in);
  if (last) {
    RETURN_IF_ERROR(sharder->BeforeBackward(HeadUnit(), i));
    dx = head->Backward(&mb.head, 1.f / static_cast<float>(layout.micro_batches));
    RETURN_IF_ERROR(sharder->AfterBackward(HeadUnit(), i, last_mb));
  }
  for (int j = static_cast<int>(blocks.size()) - 1; j >= 0; --j) {
    RETURN_IF_ERROR(sharder->BeforeBackward(BlockUnit(j), i));
    ASSIGN_OR_RETURN(dx, blocks[j]->Backward(dx, &mb.blocks[j]));
    RETURN_IF_ERROR(sharder->AfterBackward(BlockUnit(j), i, last_mb));
  }
  if (first) {
    RETURN_IF_ERROR(sharder->BeforeBackward(0, i));
    embed->Backward(mb.ids, dx);
    RETURN_IF_ERROR(sharder->AfterBackward(0, i, last_mb));
    *out = Tensor();
  } else {
    *out = std::move(dx);
  }
  return absl::OkStatus();
}

Trainer3D::Trainer3D(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Trainer3D::~Trainer3D() = default;

absl::StatusOr<std::unique_ptr<Trainer3D>> Trainer3D::Create(ProcessGrid& grid, comm::Stream& stream,
                                                             const nn::GptConfig& cfg, const Layout& layout,
                                                             int64_t global_batch, nn::AdamWConfig adam) {
  const GridShape& g = grid.shape();
  const GridShape& l = layout.grid;
  if (l.dp != g.dp || l.pp != g.pp || l.tp != g.tp) {
    return Invalid("the layout's grid (dp " + std::to_string(l.dp) + ", pp " + std::to_string(l.pp) +
                   ", tp " + std::to_string(l.tp) + ") is not the ProcessGrid's (dp " + std::to_string(g.dp) +
                   ", pp " + std::to_string(g.pp) + ", tp " + std::to_string(g.tp) + ")");
  }
  const int m = layout.micro_batches;
  if (m < 1) return Invalid("micro_batches must be >= 1 (got " + std::to_string(m) + ")");
  if (cfg.layers % g.pp != 0) {
    return Invalid(std::to_string(cfg.layers) + " blocks do not split into " + std::to_string(g.pp) +
                   " pipeline stages");
  }
  if (global_batch % (static_cast<int64_t>(g.dp) * m) != 0) {
    return Invalid("a global batch of " + std::to_string(global_batch) + " sequences does not split into " +
                   std::to_string(g.dp) + " replicas x " + std::to_string(m) + " micro-batches");
  }
  if (cfg.tie_embeddings && layout.sharding != DpSharding::kZero1) {
    return Invalid(std::string("tied embeddings cannot be sharded with ") + Name(layout.sharding) +
                   " here: use untied embeddings or zero1");
  }
  auto m_ = std::make_unique<Impl>();
  Impl& t = *m_;
  t.grid = &grid;
  t.stream = &stream;
  t.cfg = cfg;
  t.layout = layout;
  t.batch = global_batch;
  t.stage = grid.coord().pp;
  t.stages = g.pp;
  t.first = grid.first_stage();
  t.last = grid.last_stage();
  const int per_stage = cfg.layers / g.pp;
  t.first_block = t.stage * per_stage;
  if (t.first) {
    t.embed = std::make_unique<nn::GptEmbedding>(cfg);
    t.units.push_back({"embed", t.embed->Parameters()});
    t.names.push_back({"wte.weight", "wpe.weight"});
  }
  // The dense blocks to shard from are counted on a scratch tracker: only the shards are this rank's memory.
  tensor::MemoryTracker scratch("dense blocks");
  for (int b = t.first_block; b < t.first_block + per_stage; ++b) {
    std::unique_ptr<nn::GptBlock> dense;
    {
      tensor::ScopedMemoryTracker scope(&scratch);
      dense = std::make_unique<nn::GptBlock>("blocks." + std::to_string(b), cfg);
    }
    ASSIGN_OR_RETURN(auto block, TensorParallelBlock::Create(grid.axis(Axis::kTp), stream, *dense));
    t.units.push_back({dense->name(), block->Parameters()});
    t.names.push_back(block->ParameterNames());
    t.blocks.push_back(std::move(block));
  }
  if (t.last) {
    nn::Parameter* tied = nullptr;
    if (cfg.tie_embeddings) {
      if (t.first) {
        tied = &t.embed->wte().weight();
      } else {
        t.wte_copy = std::make_unique<nn::Embedding>("wte", cfg.vocab, cfg.hidden, cfg.seed);
        tied = &t.wte_copy->weight();
      }
    }
    t.head = std::make_unique<nn::GptHead>(cfg, tied);
    Unit head{"head", t.head->Parameters()};
    std::vector<std::string> names{"lnf.gamma", "lnf.beta"};
    if (!cfg.tie_embeddings) names.push_back("head.weight");
    if (t.wte_copy) {
      head.params.push_back(tied);
      names.push_back("wte.weight");
    }
    t.units.push_back(head);
    t.names.push_back(names);
  }
  comm::Comm& dp = grid.axis(Axis::kDp);
  if (layout.sharding == DpSharding::kZero1) {
    ASSIGN_OR_RETURN(t.sharder, MakeZero1Sharder(dp, stream, t.units, adam));
  } else {
    ASSIGN_OR_RETURN(
        t.sharder, MakeZero3Sharder(dp, stream, t.units, adam, layout.sharding == DpSharding::kZero3Reshard));
  }
  ASSIGN_OR_RETURN(pipeline::Schedule schedule, pipeline::OneFOneB(g.pp, m));
  t.ops = schedule.stages[t.stage];
  return std::unique_ptr<Trainer3D>(new Trainer3D(std::move(m_)));
}

absl::StatusOr<StepResult> Trainer3D::Step(const nn::Batch& global_batch) {
  Impl& t = *impl_;
  const int64_t s = t.cfg.seq, rows = t.batch * s;
  if (static_cast<int64_t>(global_batch.ids.size()) != rows ||
      global_batch.targets.size() != global_batch.ids.size()) {
    return Invalid("the global batch has " + std::to_string(global_batch.ids.size()) + " rows, expected " +
                   std::to_string(t.batch) + " sequences x " + std::to_string(s) + " = " +
                   std::to_string(rows));
  }
  const int D = t.grid->shape().dp, m = t.layout.micro_batches;
  const int64_t per_replica = t.batch / D, b = per_replica / m, n = b * s;
  std::vector<MicroBatch> mbs(m);
  for (int i = 0; i < m; ++i) {
    const int64_t begin = t.grid->coord().dp * per_replica + i * b;
    const nn::Batch slice = nn::Slice(global_batch, begin * s, (begin + b) * s);
    mbs[i].ids = slice.ids;
    mbs[i].targets = slice.targets;
    mbs[i].blocks.resize(t.blocks.size());
  }
  int last_bw = 0;
  for (const pipeline::Op& op : t.ops) {
    if (op.kind == pipeline::OpKind::kFullBackward) last_bw = op.mb;
  }
  t.events.clear();
  t.t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(t.sharder->BeginStep());
  StepResult result;
  result.has_loss = t.last;
  Tensor pending;  // what the previous op sends
  int pending_to = -1;
  for (const pipeline::Op& op : t.ops) {
    const bool forward = op.kind == pipeline::OpKind::kForward;
    if (!forward && op.kind != pipeline::OpKind::kFullBackward) {
      return absl::InternalError("1F1B gave an op of kind " + std::string(pipeline::KindName(op.kind)));
    }
    const bool needs = forward ? !t.first : !t.last;
    const int from = forward ? t.stage - 1 : t.stage + 1;
    Tensor in;
    if (needs) in = Tensor({n, t.cfg.hidden});
    RETURN_IF_ERROR(
        t.Exchange(pending_to >= 0 ? &pending : nullptr, pending_to, needs ? &in : nullptr, from));
    pending = Tensor();
    pending_to = -1;
    const double start = t.Now();
    MicroBatch& mb = mbs[op.mb];
    if (forward) {
      float loss = 0;
      Tensor out = std::move(in);
      RETURN_IF_ERROR(t.Forward(mb, op.mb, &loss, &out));
      result.loss += loss / static_cast<float>(m);
      if (!t.last) pending = std::move(out), pending_to = t.stage + 1;
    } else {
      Tensor out;
      RETURN_IF_ERROR(t.Backward(mb, op.mb, op.mb == last_bw, std::move(in), &out));
      if (!t.first) pending = std::move(out), pending_to = t.stage - 1;
    }
    t.events.push_back({pipeline::ToString(op), start, t.Now()});
  }
  RETURN_IF_ERROR(t.Exchange(pending_to >= 0 ? &pending : nullptr, pending_to, nullptr, -1));
  pending = Tensor();
  if (nn::Parameter* tied = t.TiedWeight(); tied != nullptr) {
    // The two copies of wte (first and last stage) get the sum of their gradients.
    const double start = t.Now();
    comm::Comm* emb = t.grid->embedding();
    RETURN_IF_ERROR(emb->AllReduce(tied->grad.f32(), tied->grad.f32(), tied->grad.numel(),
                                   comm::DataType::kF32, comm::RedOp::kSum, *t.stream));
    RETURN_IF_ERROR(t.stream->Synchronize());
    t.events.push_back({"emb AR", start, t.Now()});
  }
  const double start = t.Now();
  RETURN_IF_ERROR(t.sharder->FinishStep());
  t.events.push_back({"dp finish", start, t.Now()});
  if (!t.last) result.loss = 0;
  return result;
}

absl::StatusOr<std::map<std::string, std::vector<float>>> Trainer3D::LocalParameters() {
  Impl& t = *impl_;
  std::map<std::string, std::vector<float>> out;
  for (size_t u = 0; u < t.units.size(); ++u) {
    ASSIGN_OR_RETURN(auto values, t.sharder->FullValues(static_cast<int>(u)));
    for (size_t i = 0; i < values.size(); ++i) out[t.names[u][i]] = std::move(values[i]);
  }
  return out;
}

const std::vector<Unit>& Trainer3D::units() const { return impl_->units; }

std::vector<Trainer3D::TimedEvent> Trainer3D::timeline() const { return impl_->events; }

}  // namespace distlab::composition
