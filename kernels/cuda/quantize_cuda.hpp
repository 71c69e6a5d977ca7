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
// The two-level rules' first pass alone: the tensor's amax (abs bits) into *d_amax_bits.
void tensor_amax_device(const float* d_x, std::int64_t n, unsigned* d_amax_bits, cudaStream_t stream);

}  // namespace fp8lab::cuda
