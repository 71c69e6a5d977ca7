#pragma once
// fp8lab run: a study spec to a results file (DESIGN.md section 5).
// Everything that can be wrong with the input is checked before the output file is
// touched: the spec, the grid, the layers, an existing output without --resume.
#include <filesystem>
#include <string>

namespace fp8lab {

// Threads a GEMM may use: beyond this, OpenMP runtimes fail or overflow their stacks.
inline constexpr int kMaxThreads = 1024;

struct RunOptions {
  std::filesystem::path spec;
  std::filesystem::path out;  // empty: results/<study>.h5 (or .shard-I-of-N.h5)
  std::string backend = "auto";
  bool resume = false;
  int shard_index = 0, shard_count = 1;
  int threads = 0;  // 0: all cores; at most kMaxThreads
  bool quiet = false;
  bool ignore_memory_limit = false;  // run even when the memory estimate exceeds what is available
};

// Returns the results file written. Throws SpecError / std::invalid_argument for bad input.
// A point that gives no finite number is written with status "failed" and the reason; the
// run goes on and says on stderr how many failed.
std::filesystem::path run_study(const RunOptions& options);

}  // namespace fp8lab
