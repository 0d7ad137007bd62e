// Lab 4 (parallel), given; not graded: memcalc, per-rank memory of a transformer under each ZeRO stage (stage
// D's formulas).
//
//   bazel run --config=solution //labs/parallel:memcalc -- --seq 4096 --tp 2 --dp 8 --out /tmp/mem
//
// Prints one row per (ZeRO stage, recomputation) with parameters, gradients, optimizer state and
// activations in GiB; writes memcalc.svg (stacked bars) and memcalc.json into --out when given.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "labs/parallel/memory_model.h"
#include "nlohmann/json.hpp"
#include "reference/viz/viz.h"
#include "tools/base/cli.h"

using distlab::parallel::EstimateMemory;
using distlab::parallel::MemoryBreakdown;
using distlab::parallel::Parallelism;
using distlab::parallel::ParameterCount;
using distlab::parallel::Recompute;
using distlab::parallel::TransformerShape;

int main(int argc, char** argv) {
  distlab::cli::App app{"Per-rank training memory of a decoder-only transformer (defaults: Llama-3-8B)."};
  TransformerShape shape;
  Parallelism par;
  par.dp = 8;  // a node of 8 accelerators: ZeRO has something to shard over
  int64_t seq = 4096, batch = 1;
  std::string out;
  app.add_option("--layers", shape.layers, "transformer layers L");
  app.add_option("--hidden", shape.hidden, "hidden size h");
  app.add_option("--heads", shape.heads, "attention heads a");
  app.add_option("--kv-heads", shape.kv_heads, "key/value heads");
  app.add_option("--ffn", shape.ffn, "MLP inner size f");
  app.add_option("--vocab", shape.vocab, "vocabulary V");
  app.add_option("--seq", seq, "sequence length s");
  app.add_option("--micro-batch", batch, "micro-batch size b");
  app.add_option("--tp", par.tp, "tensor-parallel degree (with sequence parallelism)")
      ->check(distlab::cli::PositiveNumber());
  app.add_option("--pp", par.pp, "pipeline-parallel degree")->check(distlab::cli::PositiveNumber());
  app.add_option("--dp", par.dp, "data-parallel degree (ZeRO shards over it; default 8)")
      ->check(distlab::cli::PositiveNumber());
  app.add_flag("!--fp32", par.mixed_precision, "f32 training (4+4+8 bytes) instead of mixed precision");
  app.add_option("--out", out, "directory for memcalc.svg and memcalc.json");
  DISTLAB_CLI_PARSE(app, argc, argv);

  constexpr double kGiB = 1024.0 * 1024 * 1024;
  const int64_t psi = ParameterCount(shape);
  std::printf("parameters %.3f B; s=%lld b=%lld tp=%d pp=%d dp=%d, %s\n\n", psi / 1e9,
              static_cast<long long>(seq), static_cast<long long>(batch), par.tp, par.pp, par.dp,
              par.mixed_precision ? "mixed precision (2+2+12 B/param)" : "f32 (4+4+8 B/param)");
  std::printf("%-6s %-10s %12s %12s %12s %14s %12s\n", "ZeRO", "recompute", "params GiB", "grads GiB",
              "optim GiB", "activ. GiB", "total GiB");
  const std::pair<Recompute, const char*> recomputes[] = {
      {Recompute::kNone, "none"}, {Recompute::kSelective, "selective"}, {Recompute::kFull, "full"}};
  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::string> cats;
  std::vector<double> p, g, o, a;
  for (int stage = 0; stage <= 3; ++stage) {
    for (const auto& [rc, name] : recomputes) {
      Parallelism q = par;
      q.zero_stage = stage;
      const MemoryBreakdown m = EstimateMemory(shape, seq, batch, rc, q);
      std::printf("%-6d %-10s %12.2f %12.2f %12.2f %14.2f %12.2f\n", stage, name, m.states.params / kGiB,
                  m.states.grads / kGiB, m.states.optimizer / kGiB, m.activations / kGiB, m.total() / kGiB);
      rows.push_back({{"zero_stage", stage},
                      {"recompute", name},
                      {"params_bytes", m.states.params},
                      {"grads_bytes", m.states.grads},
                      {"optimizer_bytes", m.states.optimizer},
                      {"activation_bytes", m.activations},
                      {"total_bytes", m.total()}});
    }
    // The chart shows selective recomputation, the usual setting.
    Parallelism q = par;
    q.zero_stage = stage;
    const MemoryBreakdown m = EstimateMemory(shape, seq, batch, Recompute::kSelective, q);
    cats.push_back("ZeRO-" + std::to_string(stage));
    p.push_back(m.states.params / kGiB);
    g.push_back(m.states.grads / kGiB);
    o.push_back(m.states.optimizer / kGiB);
    a.push_back(m.activations / kGiB);
  }
  if (!out.empty()) {
    distlab::viz::BarChart chart;
    char title[160];
    std::snprintf(title, sizeof title,
                  "Memory per rank (GiB): Psi %.2f B, s %lld, b %lld, tp %d pp %d dp %d, selective",
                  psi / 1e9, static_cast<long long>(seq), static_cast<long long>(batch), par.tp, par.pp,
                  par.dp);
    chart.Title(title)
        .YLabel("GiB")
        .Stacked(true)
        .Categories(cats)
        .AddSeries("parameters", p)
        .AddSeries("gradients", g)
        .AddSeries("optimizer state", o)
        .AddSeries("activations", a);
    const auto w = chart.Write(out + "/memcalc.svg");
    if (!w.ok()) {
      std::fprintf(stderr, "memcalc: %s\n", w.error.c_str());
      return 1;
    }
    std::ofstream(out + "/memcalc.json")
        << nlohmann::json{{"parameters", psi}, {"rows", rows}}.dump(2) << "\n";
    std::printf("\nwrote %s/memcalc.svg and %s/memcalc.json\n", out.c_str(), out.c_str());
  }
  return 0;
}
