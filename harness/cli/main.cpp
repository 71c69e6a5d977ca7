// fp8lab: the command-line entry point. Exit codes: 0 success, 2 bad input or usage,
// 1 anything unexpected (a bug: please report it).
#include <cstdio>
#include <vector>
#include <stdexcept>

#include "data/tensor_io/tensor.hpp"
#include "harness/cli/commands.hpp"
#include "harness/results/h5_handles.hpp"
#include "harness/study/study_spec.hpp"

int main(int argc, char** argv) {
  CLI::App app{"fp8lab: study FP8 training numerics (tile/block quantization, GEMM accumulation)", "fp8lab"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "fp8lab 0.1.0");
  using namespace fp8lab::cli;
  const std::vector<Command> commands = {add_run_command(app),      add_report_command(app), add_compare_command(app),
                                         add_merge_command(app),    add_layers_command(app), add_quantize_command(app),
                                         add_gemm_command(app),     add_synth_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    for (const Command& command : commands)
      if (command.subcommand->parsed()) return command.run();
    return 2;
  } catch (const fp8lab::TensorFileError& e) {
    std::fprintf(stderr, "fp8lab: %s\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "fp8lab: %s\n", e.what());
    return 2;
  } catch (const fp8lab::SpecError& e) {
    std::fprintf(stderr, "fp8lab: %s\n", e.what());
    return 2;
  } catch (const fp8lab::h5::H5Error& e) {
    std::fprintf(stderr, "fp8lab: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp8lab: internal error: %s\n", e.what());
    return 1;
  }
}
