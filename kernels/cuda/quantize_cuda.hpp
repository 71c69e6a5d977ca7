#pragma once
// CUDA backend quantizer: the same contract as kernels/cpu/quantize.hpp, bit for bit (the
// codec and tile_scale are the very same host/device functions). Host-memory entry points
// copy in and out (tests, CLI); the device entry point works on device pointers (benchmarks).
#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "kernels/quantization.hpp"

namespace fp8lab::cuda {

QuantizedTensor quantize(std::span<const float> x, std::int64_t rows, std::int64_t cols, const QuantizeConfig& config);
QuantizedTensor requantize_transposed(const QuantizedTensor& in);  // as cpu::requantize_transposed

// d_x: rows x cols FP32; d_codes rows x cols; d_scales one per tile (make_quantized_tensor's
// geometry); d_amax_bits workspace of amax_workspace_slots(shape) entries: one per tile, and
// for the two-level nvfp4 rules one more, last, which holds the tensor's amax (abs bits) on return.
// Throws std::invalid_argument for a rule that cannot serve the format or the tiles.
void quantize_device(const float* d_x, std::int64_t rows, std::int64_t cols, const QuantizeConfig& config,
                     std::uint8_t* d_codes, float* d_scales, unsigned* d_amax_bits, cudaStream_t stream);
std::size_t amax_workspace_slots(const QuantizedTensor& shape);
// out (cols x rows) = in (rows x cols) on FP32 device arrays.
void transpose_device(const float* d_in, std::int64_t rows, std::int64_t cols, float* d_out, cudaStream_t stream);
// requantize_transposed on the device: the rows x cols codes and scales of a tile:1xT tensor
// quantized with `config`, dequantized, transposed and quantized again (cols x rows, same config)
// into d_out_codes / d_out_scales. d_work: 2 rows x cols floats; d_amax_bits: amax_workspace_slots
// of the output. Throws std::invalid_argument for another granularity or a two-level rule.
void requantize_transposed_device(const std::uint8_t* d_codes, const float* d_scales, std::int64_t rows, std::int64_t cols,
                                  const QuantizeConfig& config, float* d_work, std::uint8_t* d_out_codes,
                                  float* d_out_scales, unsigned* d_amax_bits, cudaStream_t stream);
// The two-level rules' first pass alone: the tensor's amax (abs bits) into *d_amax_bits.
void tensor_amax_device(const float* d_x, std::int64_t n, unsigned* d_amax_bits, cudaStream_t stream);

}  // namespace fp8lab::cuda
