// fp8lab: the command-line entry point. Exit codes:
//   0  success
//   1  anything unexpected (a bug: please report it)
//   2  bad input or usage: one line on stderr naming the file and the field
//   3  `fp8lab compare` found a regression (its table says which metrics got worse)
//   128+N  ended by signal N (SIGINT 130, SIGTERM 143), with one line saying what is resumable
#include <cstdio>
#include <filesystem>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/tensor_io/tensor.hpp"
#include "harness/cli/commands.hpp"
#include "harness/results/h5_handles.hpp"
#include "harness/runtime/build_info.hpp"
#include "harness/runtime/interrupt.hpp"
#include "harness/study/study_spec.hpp"

namespace fp8lab::cli {

CLI::Option* add_threads_option(CLI::App* sub, int& threads) {
  const CLI::Validator bounds(
      [](std::string& text) -> std::string {
        int n = -1;
        const bool ok = CLI::detail::lexical_cast(text, n) && n >= 0 && n <= kMaxThreads;
        return ok ? "" : "must be 0 (all cores) to " + std::to_string(kMaxThreads) + ", got " + text;
      },
      "0.." + std::to_string(kMaxThreads));
  return sub->add_option("--threads", threads, "Threads (0: all cores; at most " + std::to_string(kMaxThreads) + ")")
      ->check(bounds)
      ->capture_default_str();
}

namespace {
// One line on stderr with one program name: messages that already begin with "fp8lab <command>:"
// (the train command's flag-named errors) keep theirs, the others get "fp8lab: ".
void print_error(const std::string& message) {
  const bool named = message.rfind("fp8lab ", 0) == 0 || message.rfind("fp8lab:", 0) == 0;
  std::fprintf(stderr, "%s%s\n", named ? "" : "fp8lab: ", message.c_str());
}
}  // namespace

}  // namespace fp8lab::cli

int main(int argc, char** argv) {
  CLI::App app{"fp8lab: study FP8 training numerics (tile/block quantization, GEMM accumulation)", "fp8lab"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "fp8lab 0.1.0");
  // Usage errors in one line, like every other error.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("fp8lab: ") + e.what() + " (see fp8lab --help)\n";
  });
  using namespace fp8lab::cli;
  const std::vector<Command> commands = {add_run_command(app),      add_report_command(app), add_compare_command(app),
                                         add_merge_command(app),    add_layers_command(app), add_quantize_command(app),
                                         add_gemm_command(app),     add_synth_command(app),  add_train_command(app),
                                         add_recipes_command(app)};
  if (argc > 1 && argv[1][0] != '-') {  // CLI11 would only say "A subcommand is required"
    std::string names;
    bool known = false;
    for (const Command& command : commands) {
      known = known || command.subcommand->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + command.subcommand->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "fp8lab: unknown command '%s' (commands: %s)\n", argv[1], names.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  fp8lab::record_command_line(argc, argv);
  fp8lab::install_interrupt_handlers();
  try {
    for (const Command& command : commands)
      if (command.subcommand->parsed()) return command.run();
    return 2;
  } catch (const fp8lab::TensorFileError& e) {
    print_error(e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    print_error(e.what());
    return 2;
  } catch (const fp8lab::SpecError& e) {
    print_error(e.what());
    return 2;
  } catch (const fp8lab::h5::H5Error& e) {
    print_error(e.what());
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {  // a path the user gave: missing, not a directory, no permission
    std::fprintf(stderr, "fp8lab: %s: %s\n", e.path1().c_str(), e.code().message().c_str());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "fp8lab: internal error: out of memory (the command's memory estimate missed; please report)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp8lab: internal error: %s\n", e.what());
    return 1;
  }
}
