#pragma once
// CPU backend: the fused multi-tensor check-finite-and-unscale of dynamic loss scaling
// (PyTorch's _amp_foreach_non_finite_check_and_unscale_, one pass over each gradient).
//
// Contract (identical on every backend and in reference/check_finite_and_unscale_ref):
//   for every element x of every tensor, in place:  x <- fl32(x * inverse_scale)
//   *found_inf <- 1.0f if any x was inf or NaN *before* the multiply; otherwise unchanged
// inverse_scale is LossScaler::inverse_scale() = fl32(1 / scale). The check looks at the input,
// not the product: a finite gradient that the unscale pushes past FP32 (scale < 1) is not an
// overflow of the scaled backward pass. Non-finite elements are multiplied too (they stay
// non-finite; the step is skipped anyway). One thread; the SIMD path (scalar, AVX2, AVX-512,
// kernels/cpu/cpu_isa.hpp) changes speed, never bits: one FP32 product per element.
#include <span>

namespace fp8lab::cpu {

// found_inf: a FoundInfFlag's data() (kernels/loss_scaling/found_inf_flag.hpp); throws
// std::invalid_argument when it is null.
void check_finite_and_unscale(std::span<const std::span<float>> tensors, float inverse_scale, float* found_inf);

}  // namespace fp8lab::cpu
