#pragma once
// fp8lab run: a study spec to a results file (DESIGN.md section 5).
// Everything that can be wrong with the input is checked before the output file is
// touched: the spec, the grid, the layers, an existing output without --resume.
#include <cstdint>
#include <filesystem>
#include <string>

namespace fp8lab {

// Threads a GEMM may use: beyond this, OpenMP runtimes fail or overflow their stacks.
inline constexpr int kMaxThreads = 1024;

struct RunOptions {
  std::filesystem::path spec;
  // When not empty: the spec itself (fp8lab train builds one from its flags), `spec` only
  // names it in errors and relative paths in it are relative to the working directory.
  std::string spec_text;
  std::filesystem::path out;  // empty: results/<study>.h5 (or .shard-I-of-N.h5)
  std::string backend = "auto";
  bool resume = false;
  int shard_index = 0, shard_count = 1;
  int threads = 0;  // 0: all cores; at most kMaxThreads
  bool quiet = false;
  bool ignore_memory_limit = false;  // run even when the memory estimate exceeds what is available
};

struct RunSummary {
  std::filesystem::path file;
  std::int64_t points_total = 0;  // the whole grid
  std::int64_t points_done = 0;   // in the file (a shard holds only its own)
  std::int64_t evaluated = 0;     // by this command
  std::int64_t failed = 0;        // of those, status "failed"
  bool complete = false;          // every point of the grid is in the file
};

// Returns the results file written. Throws SpecError / std::invalid_argument for bad input.
// A point that gives no finite number is written with status "failed" and the reason; the
// run goes on and says on stderr how many failed.
std::filesystem::path run_study(const RunOptions& options);
RunSummary run_study_summary(const RunOptions& options);  // the same, saying what it did

}  // namespace fp8lab
