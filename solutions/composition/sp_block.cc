// Lab 7 (composition), stage F (solution): sequence parallelism -- stage B's block with its norm regions
// sharded along the sequence, and each f / g pair turned into an all-gather and a reduce-scatter.
#include "labs/composition/sp_block.h"

#include <cstring>
#include <string>

#include "labs/parallel/tensor_parallel.h"
#include "reference/base/status.h"
#include "reference/tensor/ops.h"

namespace distlab::composition {

using comm::DataType;
using comm::RedOp;
using tensor::MemCategory;
using tensor::Tensor;

namespace {

std::string Str(int64_t v) { return std::to_string(v); }

absl::Status CheckSequence(int64_t rows, int64_t seq, int t) {
  if (seq <= 0 || rows % seq != 0) {
    return absl::InvalidArgumentError(Str(rows) + " rows are not whole sequences of " + Str(seq) + " tokens");
  }
  if (seq % t != 0) {
    return absl::InvalidArgumentError("sequence length " + Str(seq) + " is not divisible by " + Str(t) +
                                      " tp ranks");
  }
  return absl::OkStatus();
}

// Where the sequence shards sit in the full [N, h]: shard row i of rank r (of t) is full row FullRow(i, r),
// sequence b = i / (s/t), position r (s/t) + i % (s/t) in it.
struct ShardMap {
  int64_t rows;  // per rank: N / t
  int64_t per;   // positions per rank: s / t
  int64_t seq;   // s
  int64_t FullRow(int64_t i, int r) const { return (i / per) * seq + r * per + i % per; }
};

void CopyRow(const float* src, int64_t from, float* dst, int64_t to, int64_t h) {
  std::memcpy(dst + to * h, src + from * h, sizeof(float) * h);
}

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

}  // namespace

absl::StatusOr<Tensor> SequenceShard(const Tensor& full, int64_t seq, int rank, int t) {
  if (full.ndim() != 2) return absl::InvalidArgumentError("SequenceShard: the input must be [N, h]");
  if (t < 1 || rank < 0 || rank >= t) {
    return absl::InvalidArgumentError("SequenceShard: rank " + Str(rank) + " is not in [0, " + Str(t) + ")");
  }
  RETURN_IF_ERROR(CheckSequence(full.dim(0), seq, t));
  const int64_t h = full.dim(1), n = full.dim(0) / t;
  const ShardMap map{n, seq / t, seq};
  Tensor shard({n, h});
  for (int64_t i = 0; i < map.rows; ++i) CopyRow(full.f32(), map.FullRow(i, rank), shard.f32(), i, h);
  return shard;
}

absl::StatusOr<Tensor> GatherSequence(comm::Comm& tp, comm::Stream& stream, const Tensor& shard,
                                      int64_t seq) {
  if (shard.ndim() != 2) return absl::InvalidArgumentError("GatherSequence: the shard must be [N / t, h]");
  const int t = tp.size();
  const int64_t n = shard.dim(0), h = shard.dim(1);
  RETURN_IF_ERROR(CheckSequence(n * t, seq, t));
  if (t == 1) return shard;  // the shard is the whole sequence: nothing to move
  const ShardMap map{n, seq / t, seq};
  // The gathered buffer is rank-major (rank r's shard at rows [r n, (r+1) n)); the rows then go to their
  // places in the sequence-major result.
  Tensor by_rank({n * t, h}, tensor::DType::kF32, MemCategory::kCommBuffers);
  RETURN_IF_ERROR(tp.AllGather(shard.f32(), by_rank.f32(), n * h, DataType::kF32, stream));
  RETURN_IF_ERROR(stream.Synchronize());  // collectives run on the stream: wait before reading the buffer
  Tensor full({n * t, h});
  for (int r = 0; r < t; ++r) {
    for (int64_t i = 0; i < map.rows; ++i)
      CopyRow(by_rank.f32(), r * n + i, full.f32(), map.FullRow(i, r), h);
  }
  return full;
}

absl::StatusOr<Tensor> ReduceScatterSequence(comm::Comm& tp, comm::Stream& stream, const Tensor& partial,
                                             int64_t seq) {
  if (partial.ndim() != 2)
    return absl::InvalidArgumentError("ReduceScatterSequence: the input must be [N, h]");
  const int t = tp.size();
  RETURN_IF_ERROR(CheckSequence(partial.dim(0), seq, t));
  if (t == 1) return partial;
  const int64_t h = partial.dim(1), n = partial.dim(0) / t;
  const ShardMap map{n, seq / t, seq};
  // ReduceScatter hands rank r the r-th contiguous chunk, so rank r's rows are put there first.
  Tensor by_rank({n * t, h}, tensor::DType::kF32, MemCategory::kCommBuffers);
  for (int r = 0; r < t; ++r) {
    for (int64_t i = 0; i < map.rows; ++i)
      CopyRow(partial.f32(), map.FullRow(i, r), by_rank.f32(), r * n + i, h);
  }
  Tensor shard({n, h});
  RETURN_IF_ERROR(tp.ReduceScatter(by_rank.f32(), shard.f32(), n * h, DataType::kF32, RedOp::kSum, stream));
  RETURN_IF_ERROR(stream.Synchronize());
  return shard;
}

struct SequenceParallelBlock::Impl {
  comm::Comm* tp = nullptr;
  comm::Stream* stream = nullptr;
  int64_t seq = 0;
  int heads = 0;  // local: a / t
  std::vector<std::string> names;
  std::unique_ptr<nn::LayerNorm> ln1, ln2;          // replicated values, gradients partial over the sequence
  std::unique_ptr<nn::Linear> q, k, v, fc1;         // column-parallel, with their bias shards
  std::unique_ptr<nn::Linear> o, fc2;               // row-parallel, no bias
  std::unique_ptr<nn::Parameter> o_bias, fc2_bias;  // replicated, added to the shard after the RS

  std::vector<nn::Parameter*> SequenceParallelParams() {
    return {&ln1->gamma(), &ln1->beta(), o_bias.get(), &ln2->gamma(), &ln2->beta(), fc2_bias.get()};
  }
};

SequenceParallelBlock::SequenceParallelBlock(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SequenceParallelBlock::~SequenceParallelBlock() = default;

absl::StatusOr<std::unique_ptr<SequenceParallelBlock>> SequenceParallelBlock::Create(
    comm::Comm& tp, comm::Stream& stream, const nn::GptBlock& dense) {
  const nn::GptConfig& cfg = dense.config();
  const int t = tp.size(), r = tp.rank();
  if (cfg.heads % t != 0) {
    return absl::InvalidArgumentError(Str(cfg.heads) + " heads are not divisible by " + Str(t) + " tp ranks");
  }
  if (cfg.inner % t != 0) {
    return absl::InvalidArgumentError("inner size " + Str(cfg.inner) + " is not divisible by " + Str(t) +
                                      " tp ranks");
  }
  if (cfg.seq % t != 0) {
    return absl::InvalidArgumentError("sequence length " + Str(cfg.seq) + " is not divisible by " + Str(t) +
                                      " tp ranks");
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
  return std::unique_ptr<SequenceParallelBlock>(new SequenceParallelBlock(std::move(m)));
}

absl::StatusOr<Tensor> SequenceParallelBlock::Forward(const Tensor& x_s, nn::BlockCache* cache) {
  Impl& m = *impl_;
  nn::BlockCache scratch;
  nn::BlockCache& c = cache != nullptr ? *cache : scratch;
  // Attention. The norm runs on this rank's tokens only; the cache keeps the shard of its output, and the
  // column-parallel layers read the whole sequence, gathered.
  c.u = m.ln1->Forward(x_s, &c.ln1);
  Tensor u;
  ASSIGN_OR_RETURN(u, GatherSequence(*m.tp, *m.stream, c.u, m.seq));
  c.q = m.q->Apply(u);  // [N, h/t]: the local heads over the whole sequence
  c.k = m.k->Apply(u);
  c.v = m.v->Apply(u);
  c.ctx = nn::CausalAttention(c.q, c.k, c.v, m.heads, m.seq, &c.probs);
  // The row-parallel partial sums are reduced and scattered in one step: each rank keeps its tokens' sum.
  Tensor x1;
  ASSIGN_OR_RETURN(x1, ReduceScatterSequence(*m.tp, *m.stream, m.o->Apply(c.ctx), m.seq));
  tensor::AddRowBias(m.o_bias->value, x1);
  m.o_bias->MarkUsed();
  tensor::Axpy(1.f, x_s, x1);
  // MLP: the same pattern around fc1 and fc2.
  c.u2 = m.ln2->Forward(x1, &c.ln2);
  Tensor u2;
  ASSIGN_OR_RETURN(u2, GatherSequence(*m.tp, *m.stream, c.u2, m.seq));
  c.z = m.fc1->Apply(u2);  // [N, f/t]
  c.g = Tensor(c.z.shape());
  tensor::GeluForward(c.z, c.g);
  Tensor y;
  ASSIGN_OR_RETURN(y, ReduceScatterSequence(*m.tp, *m.stream, m.fc2->Apply(c.g), m.seq));
  tensor::AddRowBias(m.fc2_bias->value, y);
  m.fc2_bias->MarkUsed();
  tensor::Axpy(1.f, x1, y);
  return y;
}

absl::StatusOr<Tensor> SequenceParallelBlock::Backward(const Tensor& dy_s, nn::BlockCache* cache) {
  Impl& m = *impl_;
  if (cache == nullptr || !cache->u.allocated() || cache->u.dim(0) != dy_s.dim(0)) {
    return absl::FailedPreconditionError("SequenceParallelBlock::Backward: no cache of " + Str(dy_s.dim(0)) +
                                         " shard rows (run Forward with a cache first)");
  }
  nn::BlockCache& c = *cache;
  // MLP. The bias saw only this rank's tokens: its gradient is a partial sum (AllReduceSequenceParallelGrads
  // completes it). The RS's backward is an all-gather of the output gradient.
  tensor::SumRowsInto(dy_s, m.fc2_bias->grad);
  m.fc2_bias->GradAccumulated();
  Tensor dy;
  ASSIGN_OR_RETURN(dy, GatherSequence(*m.tp, *m.stream, dy_s, m.seq));
  Tensor dg = m.fc2->BackwardInput(dy);
  m.fc2->BackwardWeight(c.g, dy);
  Tensor dz(c.z.shape());
  tensor::GeluBackward(c.z, dg, dz);
  // fc1's weight gradient needs its whole input: gather the cached shard again (Megatron does the same, and
  // overlaps this gather with the input-gradient product).
  Tensor u2;
  ASSIGN_OR_RETURN(u2, GatherSequence(*m.tp, *m.stream, c.u2, m.seq));
  m.fc1->BackwardWeight(u2, dz);
  // The AG's backward: sum the partial input gradients over tp and keep this rank's tokens.
  Tensor du2;
  ASSIGN_OR_RETURN(du2, ReduceScatterSequence(*m.tp, *m.stream, m.fc1->BackwardInput(dz), m.seq));
  Tensor dx1 = m.ln2->Backward(du2, &c.ln2);
  tensor::Axpy(1.f, dy_s, dx1);
  // Attention.
  tensor::SumRowsInto(dx1, m.o_bias->grad);
  m.o_bias->GradAccumulated();
  Tensor d_attn;
  ASSIGN_OR_RETURN(d_attn, GatherSequence(*m.tp, *m.stream, dx1, m.seq));
  Tensor dctx = m.o->BackwardInput(d_attn);
  m.o->BackwardWeight(c.ctx, d_attn);
  Tensor dq, dk, dv;
  nn::CausalAttentionBackward(c.q, c.k, c.v, c.probs, dctx, m.heads, m.seq, &dq, &dk, &dv);
  Tensor u;
  ASSIGN_OR_RETURN(u, GatherSequence(*m.tp, *m.stream, c.u, m.seq));
  m.q->BackwardWeight(u, dq);
  m.k->BackwardWeight(u, dk);
  m.v->BackwardWeight(u, dv);
  Tensor du_partial = m.q->BackwardInput(dq);
  tensor::Axpy(1.f, m.k->BackwardInput(dk), du_partial);
  tensor::Axpy(1.f, m.v->BackwardInput(dv), du_partial);
  Tensor du;
  ASSIGN_OR_RETURN(du, ReduceScatterSequence(*m.tp, *m.stream, du_partial, m.seq));
  Tensor dx = m.ln1->Backward(du, &c.ln1);
  tensor::Axpy(1.f, dx1, dx);
  c.Release();
  return dx;
}

absl::Status SequenceParallelBlock::AllReduceSequenceParallelGrads() {
  Impl& m = *impl_;
  if (m.tp->size() == 1) return absl::OkStatus();
  const std::vector<nn::Parameter*> params = m.SequenceParallelParams();
  // One coalesced buffer, one call: six small all-reduces would pay the latency six times.
  int64_t total = 0;
  for (const nn::Parameter* p : params) {
    if (!p->grad.allocated()) {
      return absl::FailedPreconditionError("AllReduceSequenceParallelGrads: " + p->name() +
                                           " has no gradient (run Backward first)");
    }
    total += p->grad.numel();
  }
  Tensor flat({total}, tensor::DType::kF32, MemCategory::kCommBuffers);
  int64_t at = 0;
  for (const nn::Parameter* p : params) {
    std::memcpy(flat.f32() + at, p->grad.f32(), p->grad.bytes());
    at += p->grad.numel();
  }
  RETURN_IF_ERROR(m.tp->AllReduce(flat.f32(), flat.f32(), total, DataType::kF32, RedOp::kSum, *m.stream));
  RETURN_IF_ERROR(m.stream->Synchronize());
  at = 0;
  for (nn::Parameter* p : params) {
    std::memcpy(p->grad.f32(), flat.f32() + at, p->grad.bytes());
    at += p->grad.numel();
  }
  return absl::OkStatus();
}

std::vector<nn::Parameter*> SequenceParallelBlock::Parameters() {
  Impl& m = *impl_;
  return {&m.ln1->gamma(),  &m.ln1->beta(), &m.q->weight(),   m.q->bias(),
          &m.k->weight(),   m.k->bias(),    &m.v->weight(),   m.v->bias(),
          &m.o->weight(),   m.o_bias.get(), &m.ln2->gamma(),  &m.ln2->beta(),
          &m.fc1->weight(), m.fc1->bias(),  &m.fc2->weight(), m.fc2_bias.get()};
}

std::vector<std::string> SequenceParallelBlock::ParameterNames() const { return impl_->names; }

}  // namespace distlab::composition
