// Lab 7 (composition), stage B (solution): the tensor-parallel GPT block, built from Lab 4's shards and f/g.
#include "labs/composition/tp_block.h"

#include <string>

#include "labs/parallel/tensor_parallel.h"
#include "reference/base/status.h"
#include "reference/tensor/ops.h"

namespace distlab::composition {

using tensor::Tensor;

struct TensorParallelBlock::Impl {
  comm::Comm* tp = nullptr;
  comm::Stream* stream = nullptr;
  int64_t seq = 0;
  int heads = 0;  // local: a / t
  std::vector<std::string> names;
  std::unique_ptr<nn::LayerNorm> ln1, ln2;          // replicated
  std::unique_ptr<nn::Linear> q, k, v, fc1;         // column-parallel, with their bias shards
  std::unique_ptr<nn::Linear> o, fc2;               // row-parallel, no bias
  std::unique_ptr<nn::Parameter> o_bias, fc2_bias;  // replicated, added once after the sum
};

namespace {

std::unique_ptr<nn::LayerNorm> CopyNorm(const nn::LayerNorm& dense, const nn::GptConfig& cfg,
                                        const std::string& name) {
  auto ln = std::make_unique<nn::LayerNorm>(name, cfg.hidden, cfg.ln_eps);
  tensor::Copy(dense.gamma().value, ln->gamma().value);
  tensor::Copy(dense.beta().value, ln->beta().value);
  return ln;
}

std::unique_ptr<nn::Parameter> CopyBias(const nn::Linear& dense) {
  auto b = std::make_unique<nn::Parameter>(dense.bias()->name(), dense.bias()->value.shape());
  tensor::Copy(dense.bias()->value, b->value);
  return b;
}

// The row-parallel output: all-reduce the partial sums (g), then add the replicated bias once.
absl::Status FinishRowParallel(comm::Comm& tp, comm::Stream& stream, nn::Parameter& bias, Tensor& y) {
  RETURN_IF_ERROR(parallel::GForward(tp, stream, y));
  tensor::AddRowBias(bias.value, y);
  bias.MarkUsed();
  return absl::OkStatus();
}

// g backward is the identity, so the replicated bias sees the full output gradient on every rank.
void BiasBackward(nn::Parameter& bias, const Tensor& dy) {
  tensor::SumRowsInto(dy, bias.grad);
  bias.GradAccumulated();
}

}  // namespace

TensorParallelBlock::TensorParallelBlock(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TensorParallelBlock::~TensorParallelBlock() = default;

absl::StatusOr<std::unique_ptr<TensorParallelBlock>> TensorParallelBlock::Create(comm::Comm& tp,
                                                                                 comm::Stream& stream,
                                                                                 const nn::GptBlock& dense) {
  const nn::GptConfig& cfg = dense.config();
  const int t = tp.size(), r = tp.rank();
  if (cfg.heads % t != 0) {
    return absl::InvalidArgumentError(std::to_string(cfg.heads) + " heads are not divisible by " +
                                      std::to_string(t) + " tp ranks");
  }
  if (cfg.inner % t != 0) {
    return absl::InvalidArgumentError("inner size " + std::to_string(cfg.inner) + " is not divisible by " +
                                      std::to_string(t) + " tp ranks");
  }
  auto m = std::make_unique<Impl>();
  m->tp = &tp;
  m->stream = &stream;
  m->seq = cfg.seq;
  m->heads = static_cast<int>(cfg.heads / t);
  m->names = dense.ParameterNames();
  m->ln1 = CopyNorm(dense.ln1(), cfg, dense.name() + ".ln1");
  m->ln2 = CopyNorm(dense.ln2(), cfg, dense.name() + ".ln2");
  ASSIGN_OR_RETURN(m->q, parallel::ColumnShard(dense.q(), r, t));
  ASSIGN_OR_RETURN(m->k, parallel::ColumnShard(dense.k(), r, t));
  ASSIGN_OR_RETURN(m->v, parallel::ColumnShard(dense.v(), r, t));
  ASSIGN_OR_RETURN(m->o, parallel::RowShard(dense.o(), r, t));
  ASSIGN_OR_RETURN(m->fc1, parallel::ColumnShard(dense.fc1(), r, t));
  ASSIGN_OR_RETURN(m->fc2, parallel::RowShard(dense.fc2(), r, t));
  m->o_bias = CopyBias(dense.o());
  m->fc2_bias = CopyBias(dense.fc2());
  return std::unique_ptr<TensorParallelBlock>(new TensorParallelBlock(std::move(m)));
}

absl::StatusOr<Tensor> TensorParallelBlock::Forward(const Tensor& x, nn::BlockCache* cache) {
  Impl& m = *impl_;
  nn::BlockCache scratch;
  nn::BlockCache& c = cache != nullptr ? *cache : scratch;
  // Attention. f is the identity forward: every rank reads the same u.
  c.u = m.ln1->Forward(x, &c.ln1);
  c.q = m.q->Apply(c.u);  // [N, h/t]: the local heads
  c.k = m.k->Apply(c.u);
  c.v = m.v->Apply(c.u);
  c.ctx = nn::CausalAttention(c.q, c.k, c.v, m.heads, m.seq, &c.probs);
  Tensor x1 = m.o->Apply(c.ctx);  // [N, h] partial sums
  RETURN_IF_ERROR(FinishRowParallel(*m.tp, *m.stream, *m.o_bias, x1));
  tensor::Axpy(1.f, x, x1);
  // MLP: column then row, GELU elementwise on the local columns.
  c.u2 = m.ln2->Forward(x1, &c.ln2);
  c.z = m.fc1->Apply(c.u2);  // [N, f/t]
  c.g = Tensor(c.z.shape());
  tensor::GeluForward(c.z, c.g);
  Tensor y = m.fc2->Apply(c.g);
  RETURN_IF_ERROR(FinishRowParallel(*m.tp, *m.stream, *m.fc2_bias, y));
  tensor::Axpy(1.f, x1, y);
  return y;
}

absl::StatusOr<Tensor> TensorParallelBlock::Backward(const Tensor& dy, nn::BlockCache* cache) {
  Impl& m = *impl_;
  if (cache == nullptr || !cache->u.allocated() || cache->u.dim(0) != dy.dim(0)) {
    return absl::FailedPreconditionError("TensorParallelBlock::Backward: no cache of " +
                                         std::to_string(dy.dim(0)) +
                                         " rows (run Forward with a cache first)");
  }
  nn::BlockCache& c = *cache;
  // MLP.
  BiasBackward(*m.fc2_bias, dy);
  Tensor dg = m.fc2->BackwardInput(dy);
  m.fc2->BackwardWeight(c.g, dy);
  Tensor dz(c.z.shape());
  tensor::GeluBackward(c.z, dg, dz);
  Tensor du2 = m.fc1->BackwardInput(dz);  // partial: this rank's f/t columns only
  m.fc1->BackwardWeight(c.u2, dz);
  RETURN_IF_ERROR(parallel::FBackward(*m.tp, *m.stream, du2));  // f backward: sum over tp
  Tensor dx1 = m.ln2->Backward(du2, &c.ln2);
  tensor::Axpy(1.f, dy, dx1);
  // Attention.
  BiasBackward(*m.o_bias, dx1);
  Tensor dctx = m.o->BackwardInput(dx1);
  m.o->BackwardWeight(c.ctx, dx1);
  Tensor dq, dk, dv;
  nn::CausalAttentionBackward(c.q, c.k, c.v, c.probs, dctx, m.heads, m.seq, &dq, &dk, &dv);
  Tensor du = m.q->BackwardInput(dq);
  tensor::Axpy(1.f, m.k->BackwardInput(dk), du);
  tensor::Axpy(1.f, m.v->BackwardInput(dv), du);
  m.q->BackwardWeight(c.u, dq);
  m.k->BackwardWeight(c.u, dk);
  m.v->BackwardWeight(c.u, dv);
  RETURN_IF_ERROR(parallel::FBackward(*m.tp, *m.stream, du));
  Tensor dx = m.ln1->Backward(du, &c.ln1);
  tensor::Axpy(1.f, dx1, dx);
  c.Release();
  return dx;
}

std::vector<nn::Parameter*> TensorParallelBlock::Parameters() {
  Impl& m = *impl_;
  return {&m.ln1->gamma(),  &m.ln1->beta(), &m.q->weight(),   m.q->bias(),
          &m.k->weight(),   m.k->bias(),    &m.v->weight(),   m.v->bias(),
          &m.o->weight(),   m.o_bias.get(), &m.ln2->gamma(),  &m.ln2->beta(),
          &m.fc1->weight(), m.fc1->bias(),  &m.fc2->weight(), m.fc2_bias.get()};
}

std::vector<std::string> TensorParallelBlock::ParameterNames() const { return impl_->names; }

int TensorParallelBlock::local_heads() const { return impl_->heads; }

}  // namespace distlab::composition
