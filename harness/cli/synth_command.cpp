// fp8lab synth: writes a synthetic operand (see data/synthetic_tensors.hpp) as .npy.
#include <cstdio>
#include <memory>

#include "data/synthetic_tensors.hpp"
#include "data/tensor_io/npy.hpp"
#include "harness/cli/commands.hpp"

namespace fp8lab::cli {

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
  sub->add_option("-o,--out", *out, "Output .npy file")->required();
  return {sub, [spec, out] {
            validate(*spec);
            write_npy(*out, Tensor::from_f32({spec->rows, spec->cols}, synthesize(*spec)));
            std::printf("wrote %s: %lldx%lld f32, %s, %lld outlier channels x%g, seed %llu\n", out->c_str(),
                        static_cast<long long>(spec->rows), static_cast<long long>(spec->cols),
                        spec->distribution.c_str(), static_cast<long long>(spec->outlier_channels),
                        spec->outlier_scale, static_cast<unsigned long long>(spec->seed));
            return 0;
          }};
}

}  // namespace fp8lab::cli
