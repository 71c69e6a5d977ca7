#include "kernels/cpu/check_finite_and_unscale.hpp"

#include <cstdint>
#include <stdexcept>

#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/formats/host_device.hpp"

namespace fp8lab::cpu {
namespace {

// |x| as a bit pattern is >= the pattern of +inf exactly when x is inf or NaN, so the largest
// |x| pattern of a tensor says whether any element is; a max of integers vectorizes without
// -ffast-math (which would let the compiler assume no NaN exists).
constexpr std::uint32_t kAbsMask = 0x7FFFFFFFu, kInfinityBits = 0x7F800000u;

std::uint32_t unscale_tensor(float* x, std::size_t n, float inverse_scale) {
  std::uint32_t max_abs_bits = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float v = x[i];
    const std::uint32_t abs_bits = float_bits(v) & kAbsMask;
    max_abs_bits = abs_bits > max_abs_bits ? abs_bits : max_abs_bits;
    x[i] = v * inverse_scale;
  }
  return max_abs_bits;
}

bool unscale_all(std::span<const std::span<float>> tensors, float inverse_scale) {
  std::uint32_t max_abs_bits = 0;
  for (const std::span<float>& t : tensors) {
    const std::uint32_t m = unscale_tensor(t.data(), t.size(), inverse_scale);
    max_abs_bits = m > max_abs_bits ? m : max_abs_bits;
  }
  return max_abs_bits >= kInfinityBits;
}

// The same loop compiled for wider targets (flatten inlines unscale_tensor into them).
FP8LAB_TARGET_AVX2 bool unscale_all_avx2(std::span<const std::span<float>> tensors, float inverse_scale) {
  return unscale_all(tensors, inverse_scale);
}
FP8LAB_TARGET_AVX512 bool unscale_all_avx512(std::span<const std::span<float>> tensors, float inverse_scale) {
  return unscale_all(tensors, inverse_scale);
}

}  // namespace

void check_finite_and_unscale(std::span<const std::span<float>> tensors, float inverse_scale, float* found_inf) {
  if (found_inf == nullptr) throw std::invalid_argument("check_finite_and_unscale: found_inf is null (no flag allocated)");
  bool found = false;
  switch (active_cpu_isa()) {
    case CpuIsa::avx512: found = unscale_all_avx512(tensors, inverse_scale); break;
    case CpuIsa::avx2: found = unscale_all_avx2(tensors, inverse_scale); break;
    case CpuIsa::scalar: found = unscale_all(tensors, inverse_scale); break;
  }
  if (found) *found_inf = 1.0f;
}

}  // namespace fp8lab::cpu
