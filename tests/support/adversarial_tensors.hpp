#pragma once
// Operands that stress a quantizer: each is rows x cols row-major FP32, with a name that
// goes into the test's section, so a failure says which data broke it.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace fp8lab::test {

struct NamedTensor {
  std::string name;
  std::int64_t rows, cols;
  std::vector<float> values;
};

inline std::vector<float> gaussian(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (float& v : x) v = normal(rng);
  return x;
}

// `format_max` and `midpoints` describe the target format: values that land exactly on its
// rounding ties once scaled by the tile's power-of-two scale.
inline std::vector<NamedTensor> adversarial_tensors(std::int64_t rows, std::int64_t cols, float format_max,
                                                    const std::vector<float>& midpoints) {
  std::vector<NamedTensor> out;
  const auto at = [cols](std::vector<float>& x, std::int64_t r, std::int64_t c) -> float& {
    return x[static_cast<std::size_t>(r * cols + c)];
  };

  out.push_back({"gaussian", rows, cols, gaussian(rows, cols, 1)});

  {  // Outlier channels: every 37th column 1000x larger (LLM activations' signature).
    std::vector<float> x = gaussian(rows, cols, 2);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; c += 37) at(x, r, c) *= 1000.0f;
    out.push_back({"outlier channels x1000", rows, cols, std::move(x)});
  }
  {  // All-zero tiles: the first 128 columns of the first half of the rows, and one whole row.
    std::vector<float> x = gaussian(rows, cols, 3);
    for (std::int64_t r = 0; r < rows / 2; ++r)
      for (std::int64_t c = 0; c < std::min<std::int64_t>(cols, 128); ++c) at(x, r, c) = 0.0f;
    for (std::int64_t c = 0; c < cols; ++c) at(x, rows - 1, c) = 0.0f;
    out.push_back({"all-zero tiles", rows, cols, std::move(x)});
  }
  {  // Subnormals: FP32-subnormal rows (the scale floor) and wide-range rows whose small
     // entries scale into the format's own subnormals (|x| / amax down to 2^-24).
    std::vector<float> x = gaussian(rows, cols, 4);
    std::mt19937_64 rng(40);
    std::uniform_real_distribution<float> exponent(-24.0f, 0.0f);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        if (r % 3 == 0) at(x, r, c) *= 1e-40f;
        else at(x, r, c) = std::copysign(std::exp2(exponent(rng)), at(x, r, c));
      }
    out.push_back({"subnormal tiles and wide range", rows, cols, std::move(x)});
  }
  {  // Rounding ties: each row holds format_max * 2^k (so the fp32-rule scale is exactly 2^k)
     // and otherwise exact format midpoints times 2^k, with mixed signs.
    std::vector<float> x(static_cast<std::size_t>(rows * cols));
    std::mt19937_64 rng(5);
    for (std::int64_t r = 0; r < rows; ++r) {
      const float scale = std::ldexp(1.0f, static_cast<int>(r % 9) - 4);
      for (std::int64_t c = 0; c < cols; ++c) {
        const float m = midpoints[rng() % midpoints.size()];
        at(x, r, c) = (c % 16 == 0 ? format_max : m) * scale * ((rng() & 1) ? -1.0f : 1.0f);
      }
    }
    out.push_back({"rounding ties", rows, cols, std::move(x)});
  }
  {  // Mixed signs of one magnitude, and all-negative rows.
    std::vector<float> x = gaussian(rows, cols, 6);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        at(x, r, c) = r % 2 ? -std::fabs(at(x, r, c)) : ((c % 2) ? 3.0f : -3.0f);
    out.push_back({"mixed and negative signs", rows, cols, std::move(x)});
  }
  return out;
}

}  // namespace fp8lab::test
