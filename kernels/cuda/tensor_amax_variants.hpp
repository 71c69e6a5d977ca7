#pragma once
// Benchmark-only forms of the two-level rules' tensor-amax pass (quantize_fast_paths.cuh's
// tensor_amax_kernel with other load settings), to find out on a GPU whether any of them reads
// the input at the device-to-device copy's rate (results/gpu/README.md: NVFP4's 0.8x target
// needs both of its passes near that rate). The quantizer itself runs the default form.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/amax_loads.hpp"

namespace fp8lab::cuda {

// The tensor's amax (abs bits) into *d_amax_bits with `unroll` (4 or 8) float4 loads in flight
// a thread; the grid as tensor_amax_device sizes it. Throws std::invalid_argument for another
// unroll.
void tensor_amax_variant_device(const float* d_x, std::int64_t n, unsigned* d_amax_bits, int unroll, AmaxLoads loads,
                                cudaStream_t stream);

}  // namespace fp8lab::cuda
