// What a benchmark's ratio counter compares, said once beside the benchmark, so that `./labctl bench` can
// write every ratio it prints into one summary a program reads (out/bench/summary.json; benchsum.cc):
//
//   DISTLAB_BENCH_RATIO(BM_AllReduce64MiB, "frac_of_bound",
//                       {"algbw / (B/n): the all-reduce's algorithm bandwidth over the bound",  // of
//                        "B/n, B = memcpy bandwidth of all cores at 64 MiB",                   // bound
//                        "bound_GBps",                                                         // its counter
//                        0.5});                                                                // goal
//
// The braces hold a RatioInfo, fields in order (trailing ones may be left out).
// `family` is the benchmark's registered name before the first '/' (its arguments are not part of it);
// `counter` is the name given to state.counters. The description travels in the benchmark's JSON output as
// the custom context entry "ratio:<family>:<counter>" (benchmark::AddCustomContext), a small JSON object
// with the fields below. It is registered at static initialisation, so BENCHMARK_MAIN() binaries need
// nothing else.
#ifndef DISTLAB_TOOLS_BENCH_RATIO_H_
#define DISTLAB_TOOLS_BENCH_RATIO_H_

#include <string>

#include "benchmark/benchmark.h"
#include "nlohmann/json.hpp"
#include "tools/base/macros.h"

namespace distlab::bench {

struct RatioInfo {
  std::string of;             // numerator / denominator, in words
  std::string bound;          // what the denominator is: a physical bound, a peer library, a goal
  std::string bound_counter;  // optional: the counter that holds the denominator's value
  double goal = 0;            // optional (0 = none): the value the course aims for
  bool higher_is_better = true;
};

inline bool DescribeRatio(const std::string& family, const std::string& counter, const RatioInfo& info) {
  nlohmann::json j = {{"of", info.of}, {"bound", info.bound}, {"higher_is_better", info.higher_is_better}};
  if (!info.bound_counter.empty()) j["bound_counter"] = info.bound_counter;
  if (info.goal != 0) j["goal"] = info.goal;
  benchmark::AddCustomContext("ratio:" + family + ":" + counter, j.dump());
  return true;
}

}  // namespace distlab::bench

#define DISTLAB_BENCH_RATIO(family, counter, ...)                                     \
  [[maybe_unused]] static const bool DISTLAB_CONCAT(distlab_bench_ratio_, __LINE__) = \
      ::distlab::bench::DescribeRatio(#family, counter, ::distlab::bench::RatioInfo __VA_ARGS__)

#endif  // DISTLAB_TOOLS_BENCH_RATIO_H_
