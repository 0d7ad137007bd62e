// Lab 6 demo: the "Demons in the Detail" experiment on a toy MoE.
//
// Trains the same layer twice on the same multi-domain data (DP = 4, 2 micro-batches per rank, one domain per
// micro-batch), once with micro-batch LBL and once with global-batch LBL at the same coefficient, and prints
// global balance, per-domain specialization, routing entropy and loss. Writes moe-routing-micro.svg,
// moe-routing-global.svg (domain x expert share of tokens) and moe-demo.json into --out.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "labs/moe/specialization.h"
#include "nlohmann/json.hpp"
#include "reference/viz/viz.h"

namespace moe = distlab::moe;

int main(int argc, char** argv) {
  CLI::App app{"Lab 6 demo: micro-batch vs global-batch load-balancing loss"};
  std::string out = ".";
  moe::ExperimentConfig base;
  app.add_option("--out", out, "directory for the SVG figures and the JSON summary");
  app.add_option("--coeff", base.lbl_coeff, "load-balancing loss coefficient (both runs)");
  app.add_option("--steps", base.steps, "optimizer steps");
  app.add_option("--seed", base.seed, "seed of data and weights");
  app.add_option("--lr", base.lr, "AdamW learning rate");
  app.add_option("--tokens", base.tokens_per_micro, "tokens per micro-batch");
  CLI11_PARSE(app, argc, argv);

  std::printf("toy MoE: E=%d experts, top-%d, D=%d domains, h=%lld, DP=%d x %d micro-batches x %d tokens, "
              "%d steps, LBL coeff %.3g\n\n",
              base.experts, base.top_k, base.domains, static_cast<long long>(base.hidden), base.dp,
              base.micro_batches, base.tokens_per_micro, base.steps, base.lbl_coeff);
  std::printf("%-13s %14s %16s %14s %12s %12s %10s\n", "LBL scope", "max/mean load", "specialization",
              "entropy bits", "train MSE", "eval MSE", "LBL/coeff");
  nlohmann::json summary = {{"experts", base.experts}, {"domains", base.domains}, {"top_k", base.top_k},
                            {"dp", base.dp},           {"micro_batches", base.micro_batches},
                            {"tokens_per_micro", base.tokens_per_micro}, {"steps", base.steps},
                            {"lbl_coeff", base.lbl_coeff}, {"runs", nlohmann::json::array()}};
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
    std::printf("%-13s %14.3f %16.3f %14.3f %12.4f %12.4f %10.4f\n", (name + "-batch").c_str(), s.max_over_mean,
                s.specialization, s.entropy_bits, r->final_train_loss, r->eval_loss, r->final_lbl);
    std::vector<std::string> rows, cols;
    for (int d = 0; d < cfg.domains; ++d) rows.push_back("domain " + std::to_string(d));
    for (int e = 0; e < cfg.experts; ++e) cols.push_back("expert " + std::to_string(e));
    const std::string path = out + "/moe-routing-" + name + ".svg";
    auto w = distlab::viz::HeatMap()
                 .Title(name + "-batch LBL: share of each domain's tokens per expert")
                 .XLabel("expert")
                 .YLabel("domain")
                 .Values(s.share)
                 .RowLabels(rows)
                 .ColumnLabels(cols)
                 .Annotate(true)
                 .Write(path);
    if (!w.ok()) {
      std::fprintf(stderr, "%s\n", w.error.c_str());
      rc = 1;
    }
    summary["runs"].push_back({{"scope", name}, {"max_over_mean_load", s.max_over_mean},
                               {"specialization", s.specialization}, {"entropy_bits", s.entropy_bits},
                               {"train_mse", r->final_train_loss}, {"eval_mse", r->eval_loss},
                               {"lbl_over_coeff", r->final_lbl}, {"load", s.load}, {"share", s.share},
                               {"figure", "moe-routing-" + name + ".svg"}});
  }
  std::printf("\nspecialization = mean over domains of the share of a domain's tokens on its top expert "
              "(1/E = spread evenly, 1 = one expert);\nmax/mean load = E * the largest expert's share of all "
              "tokens (1 = balanced); entropy in bits (log2 E = %.2f is uniform).\n",
              std::log2(static_cast<double>(base.experts)));
  std::ofstream(out + "/moe-demo.json") << summary.dump(2) << "\n";
  std::printf("wrote %s/moe-routing-micro.svg, moe-routing-global.svg, moe-demo.json\n", out.c_str());
  return rc;
}
