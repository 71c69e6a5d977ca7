#include "harness/train/model_init.hpp"

#include <stdexcept>

#include "harness/train/llama2c_weights.hpp"
#include "kernels/train/model_config.hpp"
#include "kernels/train/model_weights.hpp"

namespace fp8lab::train {

LlamaWeights ModelInit::load(std::uint64_t seed) const {
  if (init == "checkpoint") {
    if (checkpoint == "stories260K")
      return load_llama2c_checkpoint(find_data_file("stories260K/stories260K.bin"), kStories260kSha256);
    return load_llama2c_checkpoint(checkpoint, "");
  }
  if (init == "seeded") return seeded_llama_weights(model_preset(preset), seed);
  throw std::invalid_argument("init: '" + init + "' is not one of checkpoint, seeded");
}

std::string ModelInit::describe(const LlamaWeights& weights, std::uint64_t seed) const {
  if (init == "seeded") return "synthetic: seeded init of " + preset + ", seed=" + std::to_string(seed);
  return "real checkpoint " + weights.file.string() + " (sha256 " + weights.sha256 + ")";
}

}  // namespace fp8lab::train
