#pragma once
// The CPU quantizer's nvfp4:4over6 block: four_over_six::quantize_block (kernels/nvfp4_4over6.hpp,
// which holds the definition and is shared with the CUDA quantizer).
#include <cstdint>

#include "kernels/scale_rules.hpp"

namespace fp8lab::cpu {

// Quantizes rows [r0, r1) x cols [c0, c1) of x (row stride ld) as one 4over6 block of amax
// `block_amax` into codes (same stride), both candidates, and keeps the one with the smaller
// error; returns its E4M3 block scale (the stored decode scale). r1 - r0 <= 16, c1 - c0 <= 16.
float quantize_nvfp4_4over6_block(const float* x, std::uint8_t* codes, std::int64_t ld, std::int64_t r0,
                                  std::int64_t r1, std::int64_t c0, std::int64_t c1, float block_amax,
                                  float tensor_amax, TensorScale tensor_scale);

}  // namespace fp8lab::cpu
