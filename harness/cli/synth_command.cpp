// fp8lab synth: writes a synthetic operand (see data/synthetic_tensors.hpp) as .npy.
#include <cmath>
#include <cstdio>
#include <memory>

#include "data/synthetic_tensors.hpp"
#include "data/tensor_io/npy.hpp"
#include "harness/cli/commands.hpp"
#include "harness/requests/memory_budget.hpp"
#include "harness/runtime/output_files.hpp"

namespace fp8lab::cli {
namespace {

std::string shortest(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

}  // namespace

Command add_synth_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("synth", "Write a synthetic 2-D operand (Gaussian or Student-t, optional outlier channels) as .npy");
  auto spec = std::make_shared<SyntheticSpec>();
  auto out = std::make_shared<std::string>();
  sub->add_option("--rows", spec->rows, "Rows (tokens or output channels)")->required();
  sub->add_option("--cols", spec->cols, "Columns (along K)")->required();
  sub->add_option("--distribution", spec->distribution, "gaussian or student-t:NU")->capture_default_str();
  sub->add_option("--outlier-channels", spec->outlier_channels, "How many columns are scaled up")->capture_default_str();
  sub->add_option("--outlier-scale", spec->outlier_scale, "Factor applied to outlier columns")->capture_default_str();
  sub->add_option("--seed", spec->seed, "Random seed (mt19937_64)")->capture_default_str();
  sub->add_option("-o,--out", *out, "Output .npy file")->check(non_empty())->required();
  auto ignore_memory = std::make_shared<bool>(false);
  sub->add_flag(kIgnoreMemoryLimitFlag, *ignore_memory, "Allocate even when the estimate exceeds the available memory");
  return {sub, [spec, out, ignore_memory] {
            validate(*spec);
            require_writable_location(*out);
            // The values, their copy in the Tensor, and per-column bookkeeping.
            const auto elements = static_cast<std::uint64_t>(spec->rows) * static_cast<std::uint64_t>(spec->cols);
            require_memory(saturating_add(saturating_mul(elements, 8), saturating_mul(static_cast<std::uint64_t>(spec->cols), 16)),
                           "synth --rows " + std::to_string(spec->rows) + " --cols " + std::to_string(spec->cols),
                           *ignore_memory);
            const std::vector<float> values = synthesize(*spec);
            for (std::size_t i = 0; i < values.size(); ++i)
              if (!std::isfinite(values[i]))
                throw std::invalid_argument("--outlier-scale " + shortest(spec->outlier_scale) + " makes element (" +
                                            std::to_string(i / static_cast<std::size_t>(spec->cols)) + ", " +
                                            std::to_string(i % static_cast<std::size_t>(spec->cols)) +
                                            ") infinite in FP32; nothing written to " + *out);
            write_npy(*out, Tensor::from_f32({spec->rows, spec->cols}, values));
            std::printf("wrote %s: %lldx%lld f32, %s, %lld outlier channels x%g, seed %llu\n", out->c_str(),
                        static_cast<long long>(spec->rows), static_cast<long long>(spec->cols),
                        spec->distribution.c_str(), static_cast<long long>(spec->outlier_channels),
                        spec->outlier_scale, static_cast<unsigned long long>(spec->seed));
            return 0;
          }};
}

}  // namespace fp8lab::cli
