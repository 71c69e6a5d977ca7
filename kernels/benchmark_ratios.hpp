#pragma once
// Google Benchmark main with ratios: runs the registered benchmarks, remembers one counter
// of each (e.g. bytes_per_second), and prints numerator/denominator for named pairs from the
// same run, so a speed target is a ratio against a baseline measured alongside it.
// Header-only and used only by benchmark binaries.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace fp8lab::bench {

struct RatioPair {
  std::string numerator, denominator, label;
  std::string group = "";  // pairs of one group also get their geometric mean printed
};

class RecordingReporter : public benchmark::ConsoleReporter {
 public:
  explicit RecordingReporter(std::string counter) : counter_(std::move(counter)) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    // With --benchmark_repetitions the median stands for the benchmark; without, the one run.
    for (const Run& run : runs) {
      if (run.error_occurred) continue;
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (run.run_type != Run::RT_Iteration && !median) continue;
      const auto it = run.counters.find(counter_);
      if (it == run.counters.end()) continue;
      if (median || !medians_.contains(run.run_name.function_name)) values_[run.run_name.function_name] = it->second.value;
      if (median) medians_.insert(run.run_name.function_name);
    }
    ConsoleReporter::ReportRuns(runs);
  }
  const std::map<std::string, double>& values() const { return values_; }

 private:
  std::string counter_;
  std::map<std::string, double> values_;
  std::set<std::string> medians_;
};

// Returns the process exit code.
inline int run_with_ratios(int argc, char** argv, const std::string& counter, const std::vector<RatioPair>& pairs) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  RecordingReporter reporter(counter);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::map<std::string, std::pair<double, int>> log_sums;  // group -> (sum of log ratios, count)
  for (const RatioPair& pair : pairs) {
    const auto n = reporter.values().find(pair.numerator), d = reporter.values().find(pair.denominator);
    if (n == reporter.values().end() || d == reporter.values().end() || d->second == 0.0) continue;
    const double ratio = n->second / d->second;
    std::printf("ratio %-40s %s: %.3f  (%s / %s)\n", pair.label.c_str(), counter.c_str(), ratio,
                pair.numerator.c_str(), pair.denominator.c_str());
    if (!pair.group.empty() && ratio > 0) {
      log_sums[pair.group].first += std::log(ratio);
      ++log_sums[pair.group].second;
    }
  }
  for (const auto& [group, sum] : log_sums)
    std::printf("geomean %-38s %s: %.3f  (%d ratios)\n", group.c_str(), counter.c_str(), std::exp(sum.first / sum.second),
                sum.second);
  benchmark::Shutdown();
  return 0;
}

}  // namespace fp8lab::bench
