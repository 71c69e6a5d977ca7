#pragma once
// Internal to the CPU quantizer (quantize.cpp): the AVX2 path for tensors of 1xT tiles
// (granularity tile:1xT or row), the shape of DeepSeek-V3's 1x128, MXFP8's 1x32 and NVFP4's
// 1x16. One-level rules: a row is taken in chunks of about 8 KiB: the chunk's tile amaxes,
// their scales, then its codes while the chunk is in L1 (the next chunk prefetched meanwhile).
// Two-level rules: tile_amaxes_avx2 first, then one visit per row for scales and codes. The
// element codec is written with intrinsics (the generic loop, auto-vectorized, spills and
// re-reads the tile). Also taken on AVX-512 CPUs (AVX2 code runs there; the bits are the same). Same
// contract and same bits as quantize.cpp's general path: the scale comes from the same
// tile_scale(), and the codec is float_formats.hpp's encode_rn step by step, one exact integer
// or FP32 operation per element.
#include <cstdint>

#include "kernels/quantization.hpp"

namespace fp8lab::cpu::detail {

// Rows walked side by side by the two-level rules' tensor-amax pass (one core reads 4 streams
// from memory faster than one: quantize_bench's BM_Nvfp4TensorAmaxPass, 6.2-6.5 ms on a 2-core
// EPYC against 9.4 ms for one row at a time, the code before 184b8b7); callers splitting rows
// between threads for the two-level rules hand out groups of this many.
inline constexpr std::int64_t kLockstepRows = 4;

// Whether quantize_rows_avx2 serves q: 1xT tiles, round to nearest, and a rule whose scale
// comes from the tile's amax alone (nvfp4:4over6 chooses from the elements' errors: not served).
bool rows_avx2_serves(const QuantizedTensor& q);

// The two-level rules' first pass over rows [r_begin, r_end): each tile's amax into q.scales
// (as FP32 bit patterns, which quantize_rows_avx2 reads and replaces with the scales), and the
// largest of them as a bit pattern: the tensor amax of quantize.cpp's tile_amax over those rows
// (a max in any order; NaN is the largest pattern, so it wins). Needs an AVX2 CPU.
std::uint32_t tile_amaxes_avx2(const float* x, QuantizedTensor& q, std::int64_t r_begin, std::int64_t r_end);

// Quantizes rows [r_begin, r_end) of x (q.rows x q.cols, row-major) into q's codes and scales.
// For the two-level rules q.tensor_scale must hold the tensor scale and q.scales the tile
// amaxes of tile_amaxes_avx2. Needs an AVX2+FMA CPU.
void quantize_rows_avx2(const float* x, QuantizedTensor& q, std::int64_t r_begin, std::int64_t r_end);

}  // namespace fp8lab::cpu::detail
