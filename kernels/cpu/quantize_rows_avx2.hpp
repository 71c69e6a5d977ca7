#pragma once
// Internal to the CPU quantizer (quantize.cpp): the AVX2 path for tensors of 1xT tiles
// (granularity tile:1xT or row), the shape of DeepSeek-V3's 1x128, MXFP8's 1x32 and NVFP4's
// 1x16. Each tile's amax, scale and codes are made in one visit while its row segment is in
// L1, with the element codec written with intrinsics (the generic loop, auto-vectorized,
// spills and re-reads the tile). Same contract and same bits as quantize.cpp's general path:
// the scale comes from the same tile_scale(), and the codec is float_formats.hpp's encode_rn
// step by step, one exact integer or FP32 operation per element.
#include <cstdint>

#include "kernels/quantization.hpp"

namespace fp8lab::cpu::detail {

// Whether quantize_rows_avx2 serves q: 1xT tiles, round to nearest, and a rule whose scale
// comes from the tile's amax alone (nvfp4:4over6 chooses from the elements' errors: not served).
bool rows_avx2_serves(const QuantizedTensor& q);

// Quantizes rows [r_begin, r_end) of x (q.rows x q.cols, row-major) into q's codes and scales;
// q.tensor_scale must already hold the two-level rules' tensor scale. Needs an AVX2+FMA CPU.
void quantize_rows_avx2(const float* x, QuantizedTensor& q, std::int64_t r_begin, std::int64_t r_end);

// max |x| over n values, as quantize.cpp's tile_amax (the order of a max does not matter;
// NaN is the largest bit pattern, so it wins). Needs an AVX2 CPU.
float amax_avx2(const float* x, std::int64_t n);

}  // namespace fp8lab::cpu::detail
