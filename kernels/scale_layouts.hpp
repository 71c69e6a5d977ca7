#pragma once
// Scale tensors in the layouts cuBLASLt's block-scaled FP8 GEMMs take (CUDA >= 12.9; FACTS.md),
// converted by named functions rather than ad hoc. Layouts are named by what varies fastest in
// memory; which cuBLASLt operand (A or B, after the row-major / column-major swap of
// C = A * B^T) receives which is the wrapper's business and must be checked on a GPU.
//
//   VEC128_32F   one FP32 scale per 128 elements along K; for an R x K operand quantized with
//                tile:1x128 the scales are R x L (L = ceil(K / 128)) stored with R fastest:
//                index l * R + r ("M-major for A, N-major for B").
//   BLK128x128_32F one FP32 scale per 128 x 128 block; for an R x K operand quantized with
//                block:128x128, ceil(R / 128) x L blocks stored with K fastest and the K
//                extent padded to L4 = L rounded up to a multiple of 4: index rb * L4 + l;
//                padding entries hold 1.0 (they scale nothing: the data there is absent).
#include <cstdint>
#include <vector>

#include "kernels/quantization.hpp"

namespace fp8lab {

// Throws std::invalid_argument unless q is quantized with tile:1x128.
std::vector<float> vec128_scales_rows_fastest(const QuantizedTensor& q);

// Throws std::invalid_argument unless q is quantized with block:128x128.
std::vector<float> blk128x128_scales_k_fastest(const QuantizedTensor& q);
std::int64_t blk128x128_padded_k_blocks(std::int64_t k);  // L4

}  // namespace fp8lab
