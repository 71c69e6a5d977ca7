#include "kernels/hadamard_transform.hpp"

#include <array>
#include <stdexcept>
#include <string>

namespace fp8lab {
namespace {

// s_i * 1/4 for TE's sign vector, as the FP32 factors of step 1 (exact values +-0.25f).
constexpr std::array<float, kHadamardGroup> signed_quarter() {
  std::array<float, kHadamardGroup> f{};
  for (int i = 0; i < kHadamardGroup; ++i) f[static_cast<std::size_t>(i)] = ((kTeRhtSignMask >> i) & 1u) ? -0.25f : 0.25f;
  return f;
}
constexpr std::array<float, kHadamardGroup> kSignedQuarter = signed_quarter();

// One 1 x 16 group, in the order the header fixes (signs and 1/4 first, then the butterfly).
void transform_group(const float* x, float* y) {
  float v[kHadamardGroup];
  for (int i = 0; i < kHadamardGroup; ++i) v[i] = kSignedQuarter[static_cast<std::size_t>(i)] * x[i];
  for (int h = 1; h < kHadamardGroup; h *= 2)
    for (int j = 0; j < kHadamardGroup; ++j) {
      if (j & h) continue;  // j is the lower element of its pair (j, j + h)
      const float a = v[j], b = v[j + h];
      v[j] = a + b;
      v[j + h] = a - b;
    }
  for (int j = 0; j < kHadamardGroup; ++j) y[j] = v[j];
}

}  // namespace

std::vector<float> random_hadamard_transform_16(std::span<const float> x, std::int64_t rows, std::int64_t cols) {
  if (rows < 0 || cols < 0 || static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols) != x.size())
    throw std::invalid_argument("random_hadamard_transform_16: " + std::to_string(x.size()) + " values are not " +
                                std::to_string(rows) + " x " + std::to_string(cols));
  if (cols % kHadamardGroup != 0)
    throw std::invalid_argument("the 16 x 16 Hadamard transform needs K (" + std::to_string(cols) +
                                ") to be a multiple of 16");
  std::vector<float> y(x.size());
  // Groups are independent: their order changes no bit.
  for (std::size_t g = 0; g < x.size(); g += kHadamardGroup) transform_group(x.data() + g, y.data() + g);
  return y;
}

}  // namespace fp8lab
