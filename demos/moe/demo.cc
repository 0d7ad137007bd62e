// Lab 6 demo: the "Demons in the Detail" experiment on a toy MoE.
//
// Trains the same layer twice on the same multi-domain data (DP = 4, 2 micro-batches per rank, one domain per
// micro-batch), once with micro-batch LBL and once with global-batch LBL at the same coefficient, and prints
// global balance, per-domain specialization, routing entropy and loss. Then runs one layer expert-parallel on
// 4 ranks, forward and backward, beside the single-rank layer on the same tokens. Writes
// moe-routing-micro.svg, moe-routing-global.svg (domain x expert share of tokens) and moe-demo.json into
// --out.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "labs/moe/expert_parallel.h"
#include "labs/moe/specialization.h"
#include "nlohmann/json.hpp"
#include "reference/base/status.h"
#include "reference/tensor/ops.h"
#include "reference/tensor/random.h"
#include "reference/viz/viz.h"
#include "tools/base/cli.h"

namespace moe = distlab::moe;
namespace tensor = distlab::tensor;
using distlab::tensor::Tensor;

namespace {

// One MoE layer (E = 8 experts, top-2, h = 16) split over n = 4 ranks, each owning 2 experts: every rank
// routes its own 64 tokens, the rows travel to the experts' ranks and back (ExpertParallelForward), and the
// gradients walk the same path the other way (ExpertParallelBackward), the router's share of dx added on the
// token's rank. Beside it, the single-rank layer on the same tokens: y and dx must agree to float rounding.
int ExpertParallelSection(nlohmann::json& summary) {
  constexpr int n = 4;
  constexpr int64_t T = 64;
  moe::MoeConfig cfg;
  cfg.hidden = 16, cfg.inner = 32, cfg.experts = 8, cfg.top_k = 2, cfg.seed = 7;
  auto make = [&]() {
    std::unique_ptr<moe::MoeLayer> layer = moe::MoeLayer::Create(cfg).value();
    tensor::FillNormal(layer->router().weight().value, 11, 1.0f);  // logits of order 1: tokens spread out
    return layer;
  };
  std::vector<Tensor> x, dy, y_ref, dx_ref;
  std::unique_ptr<moe::MoeLayer> single = make();
  for (int r = 0; r < n; ++r) {
    x.push_back(Tensor::Zeros({T, cfg.hidden}));
    dy.push_back(Tensor::Zeros({T, cfg.hidden}));
    tensor::FillNormal(x[r], 100 + r, 1.0f);
    tensor::FillNormal(dy[r], 200 + r, 1.0f);
    y_ref.push_back(single->Forward(x[r]).value());
    dx_ref.push_back(single->Backward(dy[r]).value());
  }
  std::vector<std::unique_ptr<moe::MoeLayer>> layers;
  for (int r = 0; r < n; ++r) layers.push_back(make());
  std::vector<moe::EpStats> fwd(n), bwd(n);
  std::vector<float> y_err(n), dx_err(n);
  auto st = distlab::comm::RunRanks(
      n, [&](int rank, distlab::comm::Comm& c, distlab::comm::Stream& s) -> absl::Status {
        moe::MoeLayer& L = *layers[rank];
        Tensor logits = L.router().Forward(x[rank]);
        ASSIGN_OR_RETURN(moe::Routing rt, moe::Route(logits, cfg.top_k, cfg.normalize_gates));
        moe::ExpertFn expert = [&](int e, const Tensor& rows) { return L.expert(e).Forward(rows); };
        moe::ExpertBackwardFn expert_bwd = [&](int e, const Tensor& drows) {
          return L.expert(e).Backward(drows);
        };
        moe::EpCache cache;
        ASSIGN_OR_RETURN(Tensor y, moe::ExpertParallelForward(x[rank], rt, expert, c, s, &fwd[rank], &cache));
        ASSIGN_OR_RETURN(moe::EpGrads g,
                         moe::ExpertParallelBackward(dy[rank], rt, cache, expert_bwd, c, s, &bwd[rank]));
        ASSIGN_OR_RETURN(Tensor dlogits, moe::RouterBackward(rt, g.dgate));
        Tensor dx = tensor::Add(g.dx, L.router().BackwardInput(dlogits));
        y_err[rank] = tensor::MaxAbsDiff(y, y_ref[rank]);
        dx_err[rank] = tensor::MaxAbsDiff(dx, dx_ref[rank]);
        return absl::OkStatus();
      });
  const absl::Status first = distlab::comm::FirstError(st);
  std::printf(
      "\nexpert parallelism: E=%d experts on %d ranks (%d each), top-%d, h=%lld, %lld tokens per rank\n",
      cfg.experts, n, cfg.experts / n, cfg.top_k, static_cast<long long>(cfg.hidden),
      static_cast<long long>(T));
  if (!first.ok()) {
    std::fprintf(stderr, "expert-parallel run failed: %s\n", first.ToString().c_str());
    return 1;
  }
  std::printf("%-6s %16s %16s %16s %16s %16s %16s\n", "rank", "fwd rows sent", "fwd rows recv",
              "bwd rows sent", "bwd rows recv", "max |y - y1|", "max |dx - dx1|");
  nlohmann::json rows = nlohmann::json::array();
  for (int r = 0; r < n; ++r) {
    std::printf("%-6d %16lld %16lld %16lld %16lld %16.2e %16.2e\n", r,
                static_cast<long long>(fwd[r].rows_sent), static_cast<long long>(fwd[r].rows_received),
                static_cast<long long>(bwd[r].rows_sent), static_cast<long long>(bwd[r].rows_received),
                y_err[r], dx_err[r]);
    rows.push_back({{"rank", r},
                    {"forward_rows_sent", fwd[r].rows_sent},
                    {"forward_rows_received", fwd[r].rows_received},
                    {"backward_rows_sent", bwd[r].rows_sent},
                    {"backward_rows_received", bwd[r].rows_received},
                    {"max_abs_y_diff", y_err[r]},
                    {"max_abs_dx_diff", dx_err[r]}});
  }
  std::printf(
      "y1, dx1: the single-rank layer on the same tokens (dx includes the router's share). The backward\n"
      "sends the gradient rows along the forward's dispatch and brings the input gradients back, so its\n"
      "row counts mirror the forward's (tests: tests/moe/expert_parallel_hidden_test.cc).\n");
  summary["expert_parallel"] = {{"ranks", n},
                                {"experts", cfg.experts},
                                {"top_k", cfg.top_k},
                                {"tokens_per_rank", T},
                                {"per_rank", rows}};
  const float worst = std::max(*std::max_element(y_err.begin(), y_err.end()),
                               *std::max_element(dx_err.begin(), dx_err.end()));
  if (worst > 1e-3f) {
    std::fprintf(stderr, "expert-parallel result differs from the single-rank layer by %g\n", worst);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  distlab::cli::App app{"Lab 6 demo: micro-batch vs global-batch load-balancing loss"};
  std::string out = ".";
  moe::ExperimentConfig base;
  app.add_option("--out", out, "directory for the SVG figures and the JSON summary");
  app.add_option("--coeff", base.lbl_coeff, "load-balancing loss coefficient (both runs)");
  app.add_option("--steps", base.steps, "optimizer steps");
  app.add_option("--seed", base.seed, "seed of data and weights");
  app.add_option("--lr", base.lr, "AdamW learning rate");
  app.add_option("--tokens", base.tokens_per_micro, "tokens per micro-batch");
  DISTLAB_CLI_PARSE(app, argc, argv);

  std::printf(
      "toy MoE: E=%d experts, top-%d, D=%d domains, h=%lld, DP=%d x %d micro-batches x %d tokens, "
      "%d steps, LBL coeff %.3g\n\n",
      base.experts, base.top_k, base.domains, static_cast<long long>(base.hidden), base.dp,
      base.micro_batches, base.tokens_per_micro, base.steps, base.lbl_coeff);
  std::printf("%-13s %14s %16s %14s %12s %12s %10s\n", "LBL scope", "max/mean load", "specialization",
              "entropy bits", "train MSE", "eval MSE", "LBL/coeff");
  nlohmann::json summary = {{"experts", base.experts},
                            {"domains", base.domains},
                            {"top_k", base.top_k},
                            {"dp", base.dp},
                            {"micro_batches", base.micro_batches},
                            {"tokens_per_micro", base.tokens_per_micro},
                            {"steps", base.steps},
                            {"lbl_coeff", base.lbl_coeff},
                            {"runs", nlohmann::json::array()}};
  int rc = 0;
  for (moe::LblScope scope : {moe::LblScope::kMicroBatch, moe::LblScope::kGlobalBatch}) {
    moe::ExperimentConfig cfg = base;
    cfg.scope = scope;
    const std::string name = scope == moe::LblScope::kMicroBatch ? "micro" : "global";
    auto r = moe::RunSpecializationExperiment(cfg);
    if (!r.ok()) {
      std::fprintf(stderr, "%s-batch run failed: %s\n", name.c_str(), r.status().ToString().c_str());
      rc = 1;
      continue;
    }
    const moe::RoutingStats& s = r->eval;
    std::printf("%-13s %14.3f %16.3f %14.3f %12.4f %12.4f %10.4f\n", (name + "-batch").c_str(),
                s.max_over_mean, s.specialization, s.entropy_bits, r->final_train_loss, r->eval_loss,
                r->final_lbl);
    std::vector<std::string> rows, cols;
    for (int d = 0; d < cfg.domains; ++d) rows.push_back("domain " + std::to_string(d));
    for (int e = 0; e < cfg.experts; ++e) cols.push_back("expert " + std::to_string(e));
    const std::string path = out + "/moe-routing-" + name + ".svg";
    // Shares printed to two decimals; both figures on one colour scale, 0 to 1, so they compare at a glance;
    // the title carries the numbers the note's table quotes.
    std::vector<std::vector<double>> share = s.share;
    for (auto& row : share) {
      for (double& v : row) v = std::round(100 * v) / 100;
    }
    char title[160];
    std::snprintf(title, sizeof title, "%s-batch LBL: specialization %.3f, max/mean load %.3f", name.c_str(),
                  s.specialization, s.max_over_mean);
    auto w = distlab::viz::HeatMap()
                 .Title(title)
                 .XLabel("share of each domain's tokens per expert (scale 0 to 1)")
                 .YLabel("domain")
                 .Values(share)
                 .RowLabels(rows)
                 .ColumnLabels(cols)
                 .Annotate(true)
                 .CellSize(72)
                 .Range(0, 1)
                 .Write(path);
    if (!w.ok()) {
      std::fprintf(stderr, "%s\n", w.error.c_str());
      rc = 1;
    }
    summary["runs"].push_back({{"scope", name},
                               {"max_over_mean_load", s.max_over_mean},
                               {"specialization", s.specialization},
                               {"entropy_bits", s.entropy_bits},
                               {"train_mse", r->final_train_loss},
                               {"eval_mse", r->eval_loss},
                               {"lbl_over_coeff", r->final_lbl},
                               {"load", s.load},
                               {"share", s.share},
                               {"figure", "moe-routing-" + name + ".svg"}});
  }
  std::printf(
      "\nspecialization = mean over domains of the share of a domain's tokens on its top expert "
      "(1/E = spread evenly, 1 = one expert);\nmax/mean load = E * the largest expert's share of all "
      "tokens (1 = balanced); entropy in bits (log2 E = %.2f is uniform).\n",
      std::log2(static_cast<double>(base.experts)));
  if (ExpertParallelSection(summary) != 0) rc = 1;
  std::ofstream(out + "/moe-demo.json") << summary.dump(2) << "\n";
  std::printf("wrote %s/moe-routing-micro.svg, moe-routing-global.svg, moe-demo.json\n", out.c_str());
  return rc;
}
