#include "data/synthetic_tensors.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <numbers>
#include <random>
#include <stdexcept>
#include <string>

namespace fp8lab {
namespace {

class NormalSource {
 public:
  explicit NormalSource(std::uint64_t seed) : engine_(seed) {}
  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    // Uniforms in (0, 1] from the top 53 bits, so log(u1) is finite.
    const double u1 = (static_cast<double>(engine_() >> 11) + 1.0) * 0x1p-53;
    const double u2 = static_cast<double>(engine_() >> 11) * 0x1p-53;
    const double radius = std::sqrt(-2.0 * std::log(u1));
    spare_ = radius * std::sin(2.0 * std::numbers::pi * u2);
    has_spare_ = true;
    return radius * std::cos(2.0 * std::numbers::pi * u2);
  }
  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
  double spare_ = 0;
  bool has_spare_ = false;
};

constexpr int kUniform = -1;

// 0 for gaussian, NU for student-t:NU, kUniform for uniform.
int degrees_of_freedom(std::string_view distribution) {
  if (distribution == "gaussian") return 0;
  if (distribution == "uniform") return kUniform;
  constexpr std::string_view prefix = "student-t:";
  if (distribution.starts_with(prefix)) {
    const std::string_view digits = distribution.substr(prefix.size());
    int nu = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), nu);
    if (error == std::errc() && end == digits.data() + digits.size() && nu >= 1 && nu <= 1000) return nu;
  }
  throw std::invalid_argument("distribution '" + std::string(distribution) +
                              "' is not gaussian, uniform or student-t:NU (NU a whole number from 1 to 1000)");
}

}  // namespace

void validate(const SyntheticSpec& spec) {
  if (spec.rows <= 0 || spec.cols <= 0) throw std::invalid_argument("rows and cols must be positive");
  std::int64_t elements = 0;
  if (__builtin_mul_overflow(spec.rows, spec.cols, &elements) || elements > (std::int64_t{1} << 60))
    throw std::invalid_argument("rows x cols (" + std::to_string(spec.rows) + " x " + std::to_string(spec.cols) +
                                ") is more elements than any machine can hold");
  if (spec.outlier_channels < 0 || spec.outlier_channels > spec.cols)
    throw std::invalid_argument("outlier_channels must be between 0 and cols (" + std::to_string(spec.cols) + ")");
  if (!(spec.outlier_scale > 0) || !(spec.outlier_scale <= std::numeric_limits<float>::max()))
    throw std::invalid_argument("outlier_scale must be a positive number within the FP32 range (at most 3.4e38)");
  degrees_of_freedom(spec.distribution);
}

std::vector<float> synthesize(const SyntheticSpec& spec) {
  validate(spec);
  const int nu = degrees_of_freedom(spec.distribution);
  NormalSource normal(spec.seed);

  // Outlier channels: a seeded Fisher-Yates shuffle of the columns, first k taken.
  std::vector<double> channel_scale(static_cast<std::size_t>(spec.cols), 1.0);
  std::vector<std::int64_t> order(static_cast<std::size_t>(spec.cols));
  for (std::int64_t c = 0; c < spec.cols; ++c) order[static_cast<std::size_t>(c)] = c;
  for (std::int64_t i = spec.cols - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(normal.engine()() % static_cast<std::uint64_t>(i + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  for (std::int64_t k = 0; k < spec.outlier_channels; ++k)
    channel_scale[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])] = spec.outlier_scale;

  std::vector<float> x(static_cast<std::size_t>(spec.rows * spec.cols));
  for (std::int64_t r = 0; r < spec.rows; ++r)
    for (std::int64_t c = 0; c < spec.cols; ++c) {
      double v = nu == kUniform ? static_cast<double>(normal.engine()() >> 11) * 0x1p-53 : normal.next();
      if (nu > 0) {
        double chi2 = 0;
        for (int k = 0; k < nu; ++k) {
          const double z = normal.next();
          chi2 += z * z;
        }
        v /= std::sqrt(chi2 / nu);
      }
      x[static_cast<std::size_t>(r * spec.cols + c)] = static_cast<float>(v * channel_scale[static_cast<std::size_t>(c)]);
    }
  return x;
}

}  // namespace fp8lab
