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

// d_x: rows x cols FP32; d_codes rows x cols; d_scales and d_amax_bits one per tile
// (make_quantized_tensor's geometry). d_amax_bits is workspace.
void quantize_device(const float* d_x, std::int64_t rows, std::int64_t cols, const QuantizeConfig& config,
                     std::uint8_t* d_codes, float* d_scales, unsigned* d_amax_bits, cudaStream_t stream);

}  // namespace fp8lab::cuda
