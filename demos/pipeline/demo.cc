// Lab 5 demo: where pipeline bubbles come from and how zero bubble removes them.
//
//   bazel run --config=solution //demos/pipeline:demo -- --out DIR [--p 4] [--m 8] [--v 2]
//                                                                       [--op-ms 25]
//
// Prints, for p stages and m microbatches at T_F = T_B = T_W = 1 (comm 0), each schedule's makespan,
// bubble, bubble rate and peak activations beside the closed forms -- interleaved 1F1B with v chunks per
// rank at per-chunk costs 1/v; writes one simulated timeline figure per schedule; runs 1F1B, ZB-H1 and
// interleaved 1F1B on the executor with op-ms per op (op-ms / v per chunk op) and compares the measured
// bubble rate with the simulator's; writes DIR/summary.json. Each executor run is also a trace,
// DIR/trace-<schedule>.json (F/B/W per stage and microbatch beside every Send/Recv; open it in
// https://ui.perfetto.dev or chrome://tracing), and ZB-H1's trace is drawn as DIR/pipeline-trace-zbh1.svg.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "labs/pipeline/exec_trace.h"
#include "labs/pipeline/executor.h"
#include "labs/pipeline/figures.h"
#include "labs/pipeline/schedule.h"
#include "labs/pipeline/simulator.h"
#include "labs/pipeline/zero_bubble.h"
#include "nlohmann/json.hpp"
#include "reference/trace/trace.h"
#include "reference/trace/trace_file.h"
#include "reference/trace/trace_svg.h"
#include "tools/base/cli.h"

namespace pl = distlab::pipeline;

namespace {

struct Row {
  std::string name, file;
  absl::StatusOr<pl::Schedule> schedule;
  double bubble_formula;  // < 0: no closed form
  double rate_formula;
  double peak_formula;  // in M_B
  int v = 1;            // chunks per rank: ops cost 1/v, memory counts in M_B / v
};

void Die(const absl::Status& st) {
  std::fprintf(stderr, "demo: %s\n", std::string(st.message()).c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  distlab::cli::App app{"Lab 5 (pipeline) demo: bubbles of GPipe, 1F1B, ZB-H1, ZB-H2"};
  std::string out;
  int p = 4, m = 8, v = 2;
  double op_ms = 25;
  app.add_option("--out", out, "folder for the figures and summary.json")->required();
  app.add_option("--p", p, "pipeline stages");
  app.add_option("--m", m, "microbatches");
  app.add_option("--v", v, "model chunks per rank for interleaved 1F1B (v > 1: m a multiple of p)");
  app.add_option("--op-ms", op_ms, "artificial cost of F, B and W on the executor (ms; 0 skips the run)");
  DISTLAB_CLI_PARSE(app, argc, argv);

  const pl::Costs unit{1, 1, 1, 0};
  const double F = 1, B = 1, W = 1;
  std::vector<Row> rows;
  rows.push_back({"GPipe", "pipeline-gpipe.svg", pl::GPipe(p, m), (p - 1) * (F + B + W),
                  pl::GPipeBubbleFraction(p, m), 1.0 * m});
  rows.push_back({"1F1B", "pipeline-1f1b.svg", pl::OneFOneB(p, m), (p - 1) * (F + B + W),
                  (p - 1) * (F + B + W) / pl::OneFOneBMakespan(p, m, unit), 1.0 * p});
  rows.push_back({"ZB-H1", "pipeline-zbh1.svg", pl::ZeroBubbleH1(p, m),
                  pl::ZeroBubbleTable2(pl::Table2Schedule::kZeroBubbleH1, p, unit).bubble, -1, 1.0 * p});
  rows.push_back({"ZB-H2", "pipeline-zbh2.svg", pl::ZeroBubbleH2(p, m),
                  pl::ZeroBubbleTable2(pl::Table2Schedule::kZeroBubbleH2, p, unit).bubble, -1, 2.0 * p - 1});
  // Interleaved: per-chunk costs 1/v; the bubble (p-1)(F+B+W)/v is a fraction (p-1)/(v m) of the ideal step,
  // (p-1)/(v m + p - 1) of the makespan; rank 0 holds 2(p-1) + (v-1)p + 1 chunks = p + (p-1)/v M_B.
  rows.push_back({"interleaved", "pipeline-interleaved.svg", pl::InterleavedOneFOneB(p, m, v),
                  (p - 1) * (F + B + W) / v, (p - 1.0) / (v * m + p - 1.0),
                  std::min<double>(v * m, 2 * (p - 1) + (v - 1) * p + 1) / v, v});

  nlohmann::json summary;
  summary["p"] = p;
  summary["m"] = m;
  summary["costs"] = {{"T_F", F}, {"T_B", B}, {"T_W", W}, {"comm", 0}};
  summary["v"] = v;
  std::printf("Pipeline schedules, p = %d stages, m = %d microbatches, T_F = T_B = T_W = 1, comm = 0\n", p,
              m);
  std::printf(
      "(interleaved: v = %d chunks per rank, each chunk op costs 1/v; its memory in M_B = chunks / v)\n", v);
  std::printf(
      "(bubble = max over stages of idle time inside the stage's own span; rate = (makespan - m(F+B+W)) / "
      "makespan)\n\n");
  std::printf("%-11s %10s %10s %10s %10s %10s %10s %10s\n", "schedule", "makespan", "bubble", "formula",
              "rate", "formula", "peak M_B", "formula");
  std::printf("%-11s %10s %10s %10s %10s %10s %10s %10s\n", "", "(T)", "(T)", "(T)", "(%)", "(%)", "stage 0",
              "");
  for (Row& r : rows) {
    if (!r.schedule.ok()) Die(r.schedule.status());
    const pl::Costs costs{F / r.v, B / r.v, W / r.v, 0};
    absl::StatusOr<pl::SimResult> sim = pl::Simulate(*r.schedule, costs);
    if (!sim.ok()) Die(sim.status());
    const std::string rate_f = r.rate_formula >= 0 ? std::to_string(100 * r.rate_formula).substr(0, 5) : "-";
    const double peak = static_cast<double>(sim->peak_activations[0]) / r.v;
    std::printf("%-11s %10.1f %10.1f %10.1f %10.1f %10s %10.1f %10.1f\n", r.name.c_str(), sim->makespan,
                sim->bubble, r.bubble_formula, 100 * sim->bubble_rate, rate_f.c_str(), peak, r.peak_formula);
    // The numbers the note's table quotes, on the figure too.
    char numbers[160];
    std::snprintf(numbers, sizeof numbers, ": makespan %g T, bubble %g T, peak %g M_B on stage 0",
                  sim->makespan, sim->bubble, peak);
    std::string title = r.name + " (simulated), p = " + std::to_string(p) + ", m = " + std::to_string(m);
    if (r.v > 1) title += ", v = " + std::to_string(r.v);
    title += numbers;
    const absl::Status fig = pl::WriteTimelineFigure(sim->timeline, title, "T", out + "/" + r.file);
    if (!fig.ok()) Die(fig);
    summary["schedules"][r.name] = {{"makespan", sim->makespan},
                                    {"bubble", sim->bubble},
                                    {"bubble_formula", r.bubble_formula},
                                    {"bubble_rate", sim->bubble_rate},
                                    {"peak_activations", sim->peak_activations},
                                    {"peak_m_b_stage0", peak},
                                    {"v", r.v},
                                    {"peak_formula", r.peak_formula},
                                    {"figure", r.file}};
  }
  std::printf(
      "\nZB-H1's bubble is (p-1)(F+B-W) = a third of 1F1B's (p-1)(F+B+W) here; ZB-H2's is 0 per stage, but\n"
      "one step still pays the (p-1) T_F fill unless the optimizer-step synchronisation is removed.\n"
      "Interleaving divides the fill and drain by v instead, for (p-1)/v more M_B on stage 0 and v times "
      "the\n"
      "messages.\n");

  if (op_ms > 0) {
    std::printf(
        "\nExecutor (p ranks of the threads backend), every op padded to %.1f ms by sleeping\n"
        "(interleaved: %.1f ms per chunk op)\n\n",
        op_ms, op_ms / v);
    std::printf("%-11s %14s %14s %12s %12s %10s\n", "schedule", "makespan (ms)", "simulated (ms)", "rate (%)",
                "sim rate (%)", "diff (pp)");
    for (int k : {1, 2, 4}) {
      Row& r = rows[k];
      const pl::PipelineProblem problem = pl::MakeProblem(p, m, 16, 4, 1, r.v);
      const double ms = op_ms / r.v;
      pl::ExecutorOptions opt;
      opt.forward_ms = opt.backward_ms = opt.weight_ms = ms;
      // The run as a trace beside the figures: the runtime records the Send/Recv, RecordExecTrace the ops.
      const std::string suffix = r.file.substr(std::string("pipeline-").size());  // "zbh1.svg"
      const std::string trace_file = "trace-" + suffix.substr(0, suffix.size() - 4) + ".json";
      distlab::trace::Start(out + "/" + trace_file);
      const int64_t origin = distlab::trace::NowNs();
      absl::StatusOr<pl::ExecResult> run = pl::RunPipeline(*r.schedule, problem, opt);
      if (run.ok()) pl::RecordExecTrace(*run, origin);
      const absl::Status written = distlab::trace::Stop();
      if (!run.ok()) Die(run.status());
      if (!written.ok()) Die(written);
      absl::StatusOr<pl::SimResult> sim = pl::Simulate(*r.schedule, pl::Costs{ms, ms, ms, 0});
      if (!sim.ok()) Die(sim.status());
      std::printf("%-11s %14.1f %14.1f %12.2f %12.2f %10.2f\n", r.name.c_str(), run->makespan_ms,
                  sim->makespan, 100 * run->bubble_rate, 100 * sim->bubble_rate,
                  100 * (run->bubble_rate - sim->bubble_rate));
      const std::string file = "pipeline-executor-" + suffix;
      char title[200];
      std::snprintf(title, sizeof title,
                    "%s, executor, %g ms per op: makespan %.1f ms, bubble rate %.1f %% (simulator: %.1f ms, "
                    "%.1f %%)",
                    r.name.c_str(), ms, run->makespan_ms, 100 * run->bubble_rate, sim->makespan,
                    100 * sim->bubble_rate);
      const absl::Status fig = pl::WriteTimelineFigure(run->timeline, title, "ms", out + "/" + file);
      if (!fig.ok()) Die(fig);
      summary["executor"][r.name] = {{"op_ms", ms},
                                     {"makespan_ms", run->makespan_ms},
                                     {"simulated_makespan_ms", sim->makespan},
                                     {"bubble_rate", run->bubble_rate},
                                     {"simulated_bubble_rate", sim->bubble_rate},
                                     {"loss", run->loss},
                                     {"figure", file},
                                     {"trace", trace_file}};
      if (r.name == "ZB-H1") {  // the same run drawn from its trace, messages included
        absl::StatusOr<distlab::trace::TraceDoc> doc = distlab::trace::ReadTrace(out + "/" + trace_file);
        if (!doc.ok()) Die(doc.status());
        distlab::trace::SvgOptions svg;
        absl::StatusOr<pl::TraceBubble> back = pl::BubbleFromTrace(*doc);
        if (!back.ok()) Die(back.status());
        std::snprintf(title, sizeof title,
                      "ZB-H1, executor, %g ms per op, from its trace: makespan %.1f ms, bubble rate %.1f %%",
                      ms, back->makespan_ms, 100 * back->bubble_rate);
        svg.title = title;
        svg.categories = {"pipeline", "comm"};  // the ops, and each Send/Recv as its caller saw it
        svg.palette = {{"F", 0}, {"B", 1}, {"W", 4}, {"BW", 3}, {"Send", 2}, {"Recv", 5}};
        const absl::Status drawn = distlab::trace::WriteSvg(*doc, svg, out + "/pipeline-trace-zbh1.svg");
        if (!drawn.ok()) Die(drawn);
        summary["executor"][r.name]["trace_figure"] = "pipeline-trace-zbh1.svg";
      }
    }
  }
  std::ofstream(out + "/summary.json") << summary.dump(2) << "\n";
  std::printf(
      "\nfigures, traces and summary.json written to %s (open a trace-*.json in https://ui.perfetto.dev or "
      "chrome://tracing)\n",
      out.c_str());
  return 0;
}
