#pragma once
// GPU tests report what they measured whatever the outcome (mismatch counts and max ULP
// distance), as lines on stdout and, when FP8LAB_GPU_FINDINGS names a file, appended to
// it as tab-separated rows (test, case, count, mismatches, max_ulp, note) for results/gpu/.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "harness/metrics/error_metrics.hpp"

namespace fp8lab::test {

inline void record_finding(const std::string& test, const std::string& which, const BitwiseComparison& c,
                           const std::string& note = "") {
  std::printf("[finding] %s | %s | %zu outputs | %zu mismatches | max %llu ULP | %s\n", test.c_str(), which.c_str(),
              c.count, c.mismatches, static_cast<unsigned long long>(c.max_ulp), note.c_str());
  if (const char* path = std::getenv("FP8LAB_GPU_FINDINGS")) {
    if (std::FILE* f = std::fopen(path, "a")) {
      std::fprintf(f, "%s\t%s\t%zu\t%zu\t%llu\t%s\n", test.c_str(), which.c_str(), c.count, c.mismatches,
                   static_cast<unsigned long long>(c.max_ulp), note.c_str());
      std::fclose(f);
    }
  }
}

}  // namespace fp8lab::test
