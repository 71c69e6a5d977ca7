#pragma once
// Where a training run's weights start: a llama2.c checkpoint (the stories260K one of the
// data folder, its sha256 checked, or a user's own file of the same format), or the seeded
// initialisation (kernels/train/model_weights.hpp) of a model preset.
#include <cstdint>
#include <string>

#include "kernels/train/llama_weights.hpp"

namespace fp8lab::train {

struct ModelInit {
  std::string init = "checkpoint";       // "checkpoint" or "seeded"
  std::string checkpoint = "stories260K"; // "stories260K" (../shared/data) or a path
  std::string preset = "stories260K";     // seeded: a preset of kernels/train/model_config.hpp
  // Throws std::invalid_argument naming the field (init, preset); TensorFileError for a bad file.
  LlamaWeights load(std::uint64_t seed) const;
  // "real checkpoint PATH (sha256 HEX)" or "synthetic: seeded init of PRESET, seed=N".
  std::string describe(const LlamaWeights& weights, std::uint64_t seed) const;
};

}  // namespace fp8lab::train
