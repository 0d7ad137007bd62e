#include "reference/nn/transformer.h"

#include <algorithm>
#include <cmath>

#include "reference/tensor/ops.h"
#include "reference/tensor/random.h"

namespace distlab::nn {

using tensor::Fail;
using tensor::ShapeString;

namespace {

void CheckMatrix(const Tensor& x, int64_t cols, const std::string& who) {
  if (x.ndim() != 2 || x.dim(1) != cols) {
    Fail(who, "expects [N, " + std::to_string(cols) + "], got " + ShapeString(x.shape()));
  }
}

void CheckRows(int64_t rows, int64_t seq, const std::string& who) {
  if (seq <= 0 || rows % seq != 0) {
    Fail(who, std::to_string(rows) + " rows are not whole sequences of " + std::to_string(seq) + " tokens");
  }
}

}  // namespace

// ----- LayerNorm -----

void LayerNorm::Cache::Release() {
  xhat = Tensor();
  rstd = Tensor();
}

LayerNorm::LayerNorm(std::string name, int64_t hidden, float eps)
    : hidden_(hidden), eps_(eps), gamma_(name + ".gamma", {hidden}), beta_(name + ".beta", {hidden}) {
  tensor::Fill(gamma_.value, 1.f);
}

Tensor LayerNorm::Forward(const Tensor& x, Cache* cache) {
  CheckMatrix(x, hidden_, "LayerNorm(" + gamma_.name() + ")::Forward");
  const int64_t n = x.dim(0), h = hidden_;
  Tensor y({n, h}), xhat({n, h}), rstd({n});
  const float *px = x.f32(), *pg = gamma_.value.f32(), *pb = beta_.value.f32();
  float *py = y.f32(), *pxh = xhat.f32(), *pr = rstd.f32();
  for (int64_t r = 0; r < n; ++r) {
    const float* row = px + r * h;
    double mean = 0, var = 0;
    for (int64_t c = 0; c < h; ++c) mean += row[c];
    mean /= h;
    for (int64_t c = 0; c < h; ++c) var += (row[c] - mean) * (row[c] - mean);
    var /= h;
    const float rs = static_cast<float>(1.0 / std::sqrt(var + eps_));
    pr[r] = rs;
    for (int64_t c = 0; c < h; ++c) {
      const float xh = static_cast<float>(row[c] - mean) * rs;
      pxh[r * h + c] = xh;
      py[r * h + c] = xh * pg[c] + pb[c];
    }
  }
  if (cache != nullptr) {
    cache->xhat = std::move(xhat);
    cache->rstd = std::move(rstd);
  }
  gamma_.MarkUsed();
  beta_.MarkUsed();
  return y;
}

Tensor LayerNorm::Backward(const Tensor& dy, Cache* cache) {
  const std::string who = "LayerNorm(" + gamma_.name() + ")::Backward";
  CheckMatrix(dy, hidden_, who);
  if (cache == nullptr || !cache->xhat.allocated() || cache->xhat.dim(0) != dy.dim(0)) {
    Fail(who, "no cache of " + std::to_string(dy.dim(0)) + " rows: call Forward with a cache first");
  }
  const int64_t n = dy.dim(0), h = hidden_;
  Tensor dx({n, h});
  const float *pdy = dy.f32(), *pxh = cache->xhat.f32(), *pr = cache->rstd.f32(), *pg = gamma_.value.f32();
  float *pdx = dx.f32(), *dg = gamma_.grad.f32(), *db = beta_.grad.f32();
  for (int64_t r = 0; r < n; ++r) {
    double mean_d = 0, mean_dx = 0;  // mean(dxhat), mean(dxhat * xhat)
    for (int64_t c = 0; c < h; ++c) {
      const double d = static_cast<double>(pdy[r * h + c]) * pg[c];
      mean_d += d;
      mean_dx += d * pxh[r * h + c];
      dg[c] += pdy[r * h + c] * pxh[r * h + c];
      db[c] += pdy[r * h + c];
    }
    mean_d /= h;
    mean_dx /= h;
    for (int64_t c = 0; c < h; ++c) {
      const double d = static_cast<double>(pdy[r * h + c]) * pg[c];
      pdx[r * h + c] = static_cast<float>(pr[r] * (d - mean_d - pxh[r * h + c] * mean_dx));
    }
  }
  gamma_.GradAccumulated();
  beta_.GradAccumulated();
  cache->Release();
  return dx;
}

// ----- Attention core -----

Tensor CausalAttention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, int64_t seq,
                       Tensor* probs) {
  const int64_t n = q.dim(0), width = q.dim(1);
  if (heads <= 0 || width % heads != 0) {
    Fail("CausalAttention",
         "width " + std::to_string(width) + " is not divisible by " + std::to_string(heads) + " heads");
  }
  if (k.shape() != q.shape() || v.shape() != q.shape()) {
    Fail("CausalAttention", "q " + ShapeString(q.shape()) + ", k " + ShapeString(k.shape()) + ", v " +
                                ShapeString(v.shape()) + " differ");
  }
  CheckRows(n, seq, "CausalAttention");
  const int64_t d = width / heads, batches = n / seq;
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  Tensor ctx({n, width});
  Tensor p({batches, heads, seq, seq});
  const float *pq = q.f32(), *pk = k.f32(), *pv = v.f32();
  float *pc = ctx.f32(), *pp = p.f32();
  std::vector<double> row(seq);
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t j = 0; j < heads; ++j) {
      float* P = pp + (b * heads + j) * seq * seq;
      for (int64_t i = 0; i < seq; ++i) {
        const float* qi = pq + (b * seq + i) * width + j * d;
        double mx = -INFINITY;
        for (int64_t t = 0; t <= i; ++t) {  // the causal mask: keys t <= i only
          const float* kt = pk + (b * seq + t) * width + j * d;
          double s = 0;
          for (int64_t c = 0; c < d; ++c) s += static_cast<double>(qi[c]) * kt[c];
          row[t] = s * scale;
          mx = std::max(mx, row[t]);
        }
        double sum = 0;
        for (int64_t t = 0; t <= i; ++t) {
          row[t] = std::exp(row[t] - mx);
          sum += row[t];
        }
        float* ci = pc + (b * seq + i) * width + j * d;
        for (int64_t t = 0; t < seq; ++t) {
          const float pt = t <= i ? static_cast<float>(row[t] / sum) : 0.f;
          P[i * seq + t] = pt;
          if (t > i) continue;
          const float* vt = pv + (b * seq + t) * width + j * d;
          for (int64_t c = 0; c < d; ++c) ci[c] += pt * vt[c];
        }
      }
    }
  }
  if (probs != nullptr) *probs = std::move(p);
  return ctx;
}

void CausalAttentionBackward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                             const Tensor& dctx, int64_t heads, int64_t seq, Tensor* dq, Tensor* dk,
                             Tensor* dv) {
  const int64_t n = q.dim(0), width = q.dim(1);
  if (heads <= 0 || width % heads != 0 || dctx.shape() != q.shape()) {
    Fail("CausalAttentionBackward", "q " + ShapeString(q.shape()) + ", dctx " + ShapeString(dctx.shape()) +
                                        ", " + std::to_string(heads) + " heads");
  }
  CheckRows(n, seq, "CausalAttentionBackward");
  const int64_t d = width / heads, batches = n / seq;
  if (probs.shape() != tensor::Shape{batches, heads, seq, seq}) {
    Fail("CausalAttentionBackward", "probs " + ShapeString(probs.shape()) + " for " +
                                        std::to_string(batches) + " sequences of " + std::to_string(heads) +
                                        " heads");
  }
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  *dq = Tensor({n, width});
  *dk = Tensor({n, width});
  *dv = Tensor({n, width});
  const float *pq = q.f32(), *pk = k.f32(), *pv = v.f32(), *pp = probs.f32(), *pdc = dctx.f32();
  float *pdq = dq->f32(), *pdk = dk->f32(), *pdv = dv->f32();
  std::vector<double> dp(seq);
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t j = 0; j < heads; ++j) {
      const float* P = pp + (b * heads + j) * seq * seq;
      for (int64_t i = 0; i < seq; ++i) {
        const float* dci = pdc + (b * seq + i) * width + j * d;
        double dot = 0;  // rowsum(dP * P)
        for (int64_t t = 0; t <= i; ++t) {
          const float* vt = pv + (b * seq + t) * width + j * d;
          float* dvt = pdv + (b * seq + t) * width + j * d;
          double s = 0;
          for (int64_t c = 0; c < d; ++c) {
            s += static_cast<double>(dci[c]) * vt[c];
            dvt[c] += P[i * seq + t] * dci[c];
          }
          dp[t] = s;
          dot += s * P[i * seq + t];
        }
        const float* qi = pq + (b * seq + i) * width + j * d;
        float* dqi = pdq + (b * seq + i) * width + j * d;
        for (int64_t t = 0; t <= i; ++t) {
          const float ds = static_cast<float>(P[i * seq + t] * (dp[t] - dot)) * scale;
          const float* kt = pk + (b * seq + t) * width + j * d;
          float* dkt = pdk + (b * seq + t) * width + j * d;
          for (int64_t c = 0; c < d; ++c) {
            dqi[c] += ds * kt[c];
            dkt[c] += ds * qi[c];
          }
        }
      }
    }
  }
}

// ----- Block -----

size_t BlockCache::bytes() const {
  return ln1.bytes() + u.bytes() + q.bytes() + k.bytes() + v.bytes() + ctx.bytes() + probs.bytes() +
         ln2.bytes() + u2.bytes() + z.bytes() + g.bytes();
}

void BlockCache::Release() {
  ln1.Release();
  ln2.Release();
  for (Tensor* t : {&u, &q, &k, &v, &ctx, &probs, &u2, &z, &g}) *t = Tensor();
}

size_t BlockCacheBytes(const GptConfig& cfg, int64_t rows, int tp) {
  const int64_t h = cfg.hidden, f = cfg.inner, a = cfg.heads, s = cfg.seq;
  return static_cast<size_t>(4 * rows * ((4 * h + 2) + (4 * h + 2 * f + a * s) / tp));
}

GptBlock::GptBlock(std::string name, const GptConfig& cfg)
    : name_(name),
      cfg_(cfg),
      ln1_(name + ".ln1", cfg.hidden, cfg.ln_eps),
      q_(name + ".attn.q", cfg.hidden, cfg.hidden, true, cfg.seed),
      k_(name + ".attn.k", cfg.hidden, cfg.hidden, true, cfg.seed),
      v_(name + ".attn.v", cfg.hidden, cfg.hidden, true, cfg.seed),
      o_(name + ".attn.o", cfg.hidden, cfg.hidden, true, cfg.seed),
      ln2_(name + ".ln2", cfg.hidden, cfg.ln_eps),
      fc1_(name + ".mlp.fc1", cfg.hidden, cfg.inner, true, cfg.seed),
      fc2_(name + ".mlp.fc2", cfg.inner, cfg.hidden, true, cfg.seed) {
  if (cfg.heads <= 0 || cfg.hidden % cfg.heads != 0) {
    Fail("GptBlock", "hidden " + std::to_string(cfg.hidden) + " is not divisible by " +
                         std::to_string(cfg.heads) + " heads");
  }
}

Tensor GptBlock::Forward(const Tensor& x, BlockCache* cache) {
  BlockCache scratch;
  BlockCache& c = cache != nullptr ? *cache : scratch;
  c.u = ln1_.Forward(x, cache != nullptr ? &c.ln1 : nullptr);
  c.q = q_.Apply(c.u);
  c.k = k_.Apply(c.u);
  c.v = v_.Apply(c.u);
  c.ctx = CausalAttention(c.q, c.k, c.v, cfg_.heads, cfg_.seq, &c.probs);
  Tensor x1 = o_.Apply(c.ctx);
  tensor::Axpy(1.f, x, x1);  // residual
  c.u2 = ln2_.Forward(x1, cache != nullptr ? &c.ln2 : nullptr);
  c.z = fc1_.Apply(c.u2);
  c.g = Tensor(c.z.shape());
  tensor::GeluForward(c.z, c.g);
  Tensor y = fc2_.Apply(c.g);
  tensor::Axpy(1.f, x1, y);  // residual
  return y;
}

Tensor GptBlock::Backward(const Tensor& dy, BlockCache* cache) {
  if (cache == nullptr || !cache->u.allocated() || cache->u.dim(0) != dy.dim(0)) {
    Fail("GptBlock(" + name_ + ")::Backward", "no cache of " + std::to_string(dy.dim(0)) + " rows");
  }
  BlockCache& c = *cache;
  // MLP: y = x1 + fc2(GELU(fc1(LN2(x1)))).
  Tensor dg = fc2_.BackwardInput(dy);
  fc2_.BackwardWeight(c.g, dy);
  Tensor dz(c.z.shape());
  tensor::GeluBackward(c.z, dg, dz);
  Tensor du2 = fc1_.BackwardInput(dz);
  fc1_.BackwardWeight(c.u2, dz);
  Tensor dx1 = ln2_.Backward(du2, &c.ln2);
  tensor::Axpy(1.f, dy, dx1);  // the residual passes dy through
  // Attention: x1 = x + o(ctx).
  Tensor dctx = o_.BackwardInput(dx1);
  o_.BackwardWeight(c.ctx, dx1);
  Tensor dq, dk, dv;
  CausalAttentionBackward(c.q, c.k, c.v, c.probs, dctx, cfg_.heads, cfg_.seq, &dq, &dk, &dv);
  Tensor du = q_.BackwardInput(dq);
  tensor::Axpy(1.f, k_.BackwardInput(dk), du);
  tensor::Axpy(1.f, v_.BackwardInput(dv), du);
  q_.BackwardWeight(c.u, dq);
  k_.BackwardWeight(c.u, dk);
  v_.BackwardWeight(c.u, dv);
  Tensor dx = ln1_.Backward(du, &c.ln1);
  tensor::Axpy(1.f, dx1, dx);
  c.Release();
  return dx;
}

std::vector<Parameter*> GptBlock::Parameters() {
  std::vector<Parameter*> p = ln1_.Parameters();
  for (Linear* l : {&q_, &k_, &v_, &o_}) {
    for (Parameter* x : l->Parameters()) p.push_back(x);
  }
  for (Parameter* x : ln2_.Parameters()) p.push_back(x);
  for (Linear* l : {&fc1_, &fc2_}) {
    for (Parameter* x : l->Parameters()) p.push_back(x);
  }
  return p;
}

std::vector<std::string> GptBlock::ParameterNames() const {
  std::vector<std::string> out;
  for (const char* s :
       {"ln1.gamma", "ln1.beta", "attn.q.weight", "attn.q.bias", "attn.k.weight", "attn.k.bias",
        "attn.v.weight", "attn.v.bias", "attn.o.weight", "attn.o.bias", "ln2.gamma", "ln2.beta",
        "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias"}) {
    out.push_back(name_ + "." + s);
  }
  return out;
}

// ----- Embedding and head -----

GptEmbedding::GptEmbedding(const GptConfig& cfg)
    : cfg_(cfg), wte_("wte", cfg.vocab, cfg.hidden, cfg.seed), wpe_("wpe.weight", {cfg.seq, cfg.hidden}) {
  tensor::FillNormal(wpe_.value, tensor::SeedFor(cfg.seed, "wpe.weight"),
                     1.f / std::sqrt(static_cast<float>(cfg.hidden)));
}

Tensor GptEmbedding::Forward(const std::vector<int32_t>& ids) {
  CheckRows(static_cast<int64_t>(ids.size()), cfg_.seq, "GptEmbedding::Forward");
  Tensor x = wte_.Lookup(ids);
  const int64_t n = x.dim(0), h = cfg_.hidden;
  const float* pe = wpe_.value.f32();
  float* px = x.f32();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < h; ++c) px[r * h + c] += pe[(r % cfg_.seq) * h + c];
  }
  wpe_.MarkUsed();
  return x;
}

void GptEmbedding::Backward(const std::vector<int32_t>& ids, const Tensor& dx) {
  wte_.BackwardAt(ids, dx);
  const int64_t n = dx.dim(0), h = cfg_.hidden;
  const float* pd = dx.f32();
  float* g = wpe_.grad.f32();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < h; ++c) g[(r % cfg_.seq) * h + c] += pd[r * h + c];
  }
  wpe_.GradAccumulated();
}

void HeadCache::Release() {
  lnf.Release();
  xf = Tensor();
  probs = Tensor();
  targets.clear();
}

GptHead::GptHead(const GptConfig& cfg, Parameter* tied_weight)
    : cfg_(cfg), lnf_("lnf", cfg.hidden, cfg.ln_eps), proj_(tied_weight) {
  if (proj_ == nullptr) {
    own_ = std::make_unique<Parameter>("head.weight", Shape{cfg.vocab, cfg.hidden});
    tensor::FillNormal(own_->value, tensor::SeedFor(cfg.seed, "head.weight"),
                       1.f / std::sqrt(static_cast<float>(cfg.hidden)));
    proj_ = own_.get();
  } else if (proj_->value.shape() != Shape{cfg.vocab, cfg.hidden}) {
    Fail("GptHead", "the tied weight is " + ShapeString(proj_->value.shape()) + ", not [V, h]");
  }
}

float GptHead::Forward(const Tensor& x, const std::vector<int32_t>& targets, HeadCache* cache) {
  HeadCache scratch;
  HeadCache& c = cache != nullptr ? *cache : scratch;
  c.xf = lnf_.Forward(x, cache != nullptr ? &c.lnf : nullptr);
  Tensor logits({x.dim(0), cfg_.vocab});
  tensor::Gemm(false, true, 1.f, c.xf, proj_->value, 0.f, logits);  // [N, h] x [V, h]^T
  const float loss = SoftmaxCrossEntropy::ForwardAt(logits, targets, &c.probs);
  if (cache != nullptr) c.targets = targets;
  proj_->MarkUsed();
  return loss;
}

Tensor GptHead::Backward(HeadCache* cache, float loss_scale) {
  if (cache == nullptr || !cache->probs.allocated())
    Fail("GptHead::Backward", "no cache: call Forward first");
  Tensor dlogits = SoftmaxCrossEntropy::BackwardAt(cache->probs, cache->targets, loss_scale);
  Tensor dxf = tensor::MatMul(dlogits, proj_->value);                    // [N, V] x [V, h]
  tensor::Gemm(true, false, 1.f, dlogits, cache->xf, 1.f, proj_->grad);  // [V, N] x [N, h]
  proj_->GradAccumulated();
  Tensor dx = lnf_.Backward(dxf, &cache->lnf);
  cache->Release();
  return dx;
}

std::vector<Parameter*> GptHead::Parameters() {
  std::vector<Parameter*> p = lnf_.Parameters();
  if (own_) p.push_back(own_.get());
  return p;
}

// ----- Gpt -----

Gpt::Gpt(const GptConfig& cfg) : cfg_(cfg), embedding_(cfg) {
  for (int l = 0; l < cfg.layers; ++l) {
    blocks_.push_back(std::make_unique<GptBlock>("blocks." + std::to_string(l), cfg));
  }
  head_ = std::make_unique<GptHead>(cfg, cfg.tie_embeddings ? &embedding_.wte().weight() : nullptr);
}

float Gpt::Forward(const Batch& batch) {
  ids_ = batch.ids;
  caches_.assign(blocks_.size(), BlockCache());
  Tensor x = embedding_.Forward(batch.ids);
  for (size_t l = 0; l < blocks_.size(); ++l) x = blocks_[l]->Forward(x, &caches_[l]);
  return head_->Forward(x, batch.targets, &head_cache_);
}

void Gpt::Backward(float loss_scale) {
  if (caches_.size() != blocks_.size()) Fail("Gpt::Backward", "call Forward first");
  Tensor dx = head_->Backward(&head_cache_, loss_scale);
  for (int l = static_cast<int>(blocks_.size()) - 1; l >= 0; --l) dx = blocks_[l]->Backward(dx, &caches_[l]);
  embedding_.Backward(ids_, dx);
  caches_.clear();
}

std::vector<Parameter*> Gpt::Parameters() {
  std::vector<Parameter*> p = embedding_.Parameters();
  for (auto& b : blocks_) {
    for (Parameter* x : b->Parameters()) p.push_back(x);
  }
  for (Parameter* x : head_->Parameters()) p.push_back(x);
  return p;
}

int64_t BlockParameters(const GptConfig& cfg, int tp) {
  const int64_t h = cfg.hidden, f = cfg.inner;
  return 6 * h + (4 * h * h + 3 * h + 2 * h * f + f) / tp;
}

int64_t GptParameters(const GptConfig& cfg) {
  const int64_t h = cfg.hidden, v = cfg.vocab;
  return v * h + cfg.seq * h + cfg.layers * BlockParameters(cfg) + 2 * h + (cfg.tie_embeddings ? 0 : v * h);
}

Batch SyntheticSequences(int64_t vocab, int64_t seq, uint64_t seed, int64_t step, int64_t count) {
  Batch b;
  const uint64_t stream = tensor::Mix64(seed * 1000033u + static_cast<uint64_t>(step));
  for (int64_t i = 0; i < count; ++i) {
    std::vector<int64_t> x(seq + 1);
    x[0] = static_cast<int64_t>(tensor::UniformAt(stream, static_cast<uint64_t>(i)) * vocab);
    if (seq >= 1) x[1] = (3 * x[0] + 1) % vocab;
    for (int64_t j = 1; j < seq; ++j) x[j + 1] = (x[j] + 2 * x[j - 1] + 1) % vocab;
    for (int64_t j = 0; j < seq; ++j) {
      b.ids.push_back(static_cast<int32_t>(x[j]));
      b.targets.push_back(static_cast<int32_t>(x[j + 1]));
    }
  }
  return b;
}

}  // namespace distlab::nn
