#pragma once
// Each fp8lab subcommand registers its options on the CLI11 app and returns itself with
// the function that runs it once parsing succeeded. The run function returns the exit code
// and throws for bad input (main turns that into one line on stderr and exit 2).
#include <CLI/CLI.hpp>
#include <functional>

#include "harness/study/runner.hpp"  // kMaxThreads

namespace fp8lab::cli {

struct Command {
  CLI::App* subcommand = nullptr;
  std::function<int()> run;
};

// `fp8lab compare` found a metric that got worse (1 stays "internal error", 2 "bad input").
inline constexpr int kRegressionExitCode = 3;

// For options whose value names something (a file, a scheme, a rule): an empty value is
// refused ("--scheme: must not be empty") rather than taken as the option not given.
inline CLI::Validator non_empty() {
  return CLI::Validator([](std::string& v) { return v.empty() ? std::string("must not be empty") : std::string(); },
                        "", "NONEMPTY");
}

// --threads for commands that run GEMMs: 0 (all cores) to kMaxThreads, anything else refused.
CLI::Option* add_threads_option(CLI::App* sub, int& threads);

Command add_quantize_command(CLI::App& app);
Command add_synth_command(CLI::App& app);
Command add_gemm_command(CLI::App& app);
Command add_run_command(CLI::App& app);
Command add_report_command(CLI::App& app);
Command add_compare_command(CLI::App& app);
Command add_merge_command(CLI::App& app);
Command add_layers_command(CLI::App& app);
Command add_train_command(CLI::App& app);
Command add_recipes_command(CLI::App& app);

}  // namespace fp8lab::cli
