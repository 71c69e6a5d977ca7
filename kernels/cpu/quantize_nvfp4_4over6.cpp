#include "kernels/cpu/quantize_nvfp4_4over6.hpp"

#include "kernels/nvfp4_4over6.hpp"

namespace fp8lab::cpu {

float quantize_nvfp4_4over6_block(const float* x, std::uint8_t* codes, std::int64_t ld, std::int64_t r0,
                                  std::int64_t r1, std::int64_t c0, std::int64_t c1, float block_amax,
                                  float tensor_amax, TensorScale tensor_scale) {
  return four_over_six::quantize_block(x, codes, ld, r0, r1, c0, c1, block_amax, tensor_amax, tensor_scale);
}

}  // namespace fp8lab::cpu
