#pragma once
// FP64 reference of the fused check-finite-and-unscale, from its definition:
//   u = round_to_fp32(1 / scale)                (the unscale factor, reciprocal formed in FP64)
//   x <- round_to_fp32(x * u)                   (x and u are FP32 values, so the FP64 product is
//                                                exact and this is the correctly rounded FP32 product)
//   found_inf = some x was inf or NaN before
#include <vector>

namespace fp8lab::ref {

// tensors hold FP32 values; they are unscaled in place. Returns found_inf.
bool check_finite_and_unscale_ref(std::vector<std::vector<double>>& tensors, double scale);

}  // namespace fp8lab::ref
