// Exact tier of the 16 x 16 Random Hadamard Transform (kernels/hadamard_transform.hpp): TE's
// sign vector and H16 / 4 as the kernel applies them, the kernel against the definition's sum
// on integer-valued inputs (where every order gives the same bits), and against the header's
// documented FP32 order on random inputs, bit for bit.
#include <catch2/catch.hpp>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

#include "kernels/hadamard_transform.hpp"

using namespace fp8lab;

namespace {

// TE's get_wgrad_sign_vector, typed from its list (not from the kernel's bit mask).
constexpr int kTeSigns[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};

// H16[i][j] = (-1)^popcount(i & j), Sylvester's natural order.
int hadamard_entry(int i, int j) { return (std::popcount(static_cast<unsigned>(i & j)) % 2) ? -1 : 1; }

// The definition, y_j = sum_i x_i s_i H16[i][j] / 4, summed in FP64 and rounded once: exact
// (hence equal to any FP32 order) when every partial sum is representable.
std::vector<float> transform_by_definition(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (std::size_t g = 0; g < x.size(); g += 16)
    for (int j = 0; j < 16; ++j) {
      double sum = 0;
      for (int i = 0; i < 16; ++i) sum += static_cast<double>(x[g + i]) * kTeSigns[i] * hadamard_entry(i, j) / 4.0;
      y[g + static_cast<std::size_t>(j)] = static_cast<float>(sum);
    }
  return y;
}

// The header's documented FP32 order, written out from its text: v_i = (s_i * 0.25f) * x_i,
// then for h = 1, 2, 4, 8 the pairs (j, j + h), j with bit h clear, in increasing j.
std::vector<float> transform_in_documented_order(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (std::size_t g = 0; g < x.size(); g += 16) {
    float v[16];
    for (int i = 0; i < 16; ++i) v[i] = (static_cast<float>(kTeSigns[i]) * 0.25f) * x[g + static_cast<std::size_t>(i)];
    for (int h : {1, 2, 4, 8})
      for (int j = 0; j < 16; ++j)
        if ((j & h) == 0) {
          const float lo = v[j], hi = v[j + h];
          v[j] = lo + hi;
          v[j + h] = lo - hi;
        }
    for (int j = 0; j < 16; ++j) y[g + static_cast<std::size_t>(j)] = v[j];
  }
  return y;
}

void require_same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  std::size_t mismatches = 0, first = got.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i]) && mismatches++ == 0) first = i;
  std::ostringstream where;  // hexfloat: the bits that differ, whatever the magnitude
  if (first < got.size()) where << ": got " << std::hexfloat << got[first] << ", want " << want[first];
  INFO("mismatches " << mismatches << " of " << got.size() << "; first at " << first << where.str());
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("RHT 16x16: the kernel's bit mask is TE's sign vector") {
  for (int i = 0; i < 16; ++i) CHECK(((kTeRhtSignMask >> i) & 1u) == (kTeSigns[i] < 0 ? 1u : 0u));
}

TEST_CASE("RHT 16x16: unit vectors map to the rows of diag(s) H16 / 4, exactly") {
  // 16 rows x 32 columns: row i holds e_i in its first group and -2 e_i in its second.
  std::vector<float> x(16 * 32, 0.0f);
  for (int i = 0; i < 16; ++i) {
    x[static_cast<std::size_t>(i * 32 + i)] = 1.0f;
    x[static_cast<std::size_t>(i * 32 + 16 + i)] = -2.0f;
  }
  const std::vector<float> y = random_hadamard_transform_16(x, 16, 32);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      INFO("row " << i << ", column " << j);
      CHECK(y[static_cast<std::size_t>(i * 32 + j)] == 0.25f * static_cast<float>(kTeSigns[i] * hadamard_entry(i, j)));
      CHECK(y[static_cast<std::size_t>(i * 32 + 16 + j)] == -0.5f * static_cast<float>(kTeSigns[i] * hadamard_entry(i, j)));
    }
}

TEST_CASE("RHT 16x16: integer-valued inputs (exact sums) give the definition's bits, 37 rows x 64") {
  // |x| < 2^19 integers times a power of two per row: x / 4 and every partial sum of 16 of
  // them fit in 24 bits, so the FP32 butterfly is exact and must equal the exact definition.
  std::mt19937 rng(24);
  std::uniform_int_distribution<int> value(-(1 << 19) + 1, (1 << 19) - 1), exponent(-100, 100);
  const std::int64_t rows = 37, cols = 64;
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const int e = exponent(rng);
    for (std::int64_t k = 0; k < cols; ++k) x[static_cast<std::size_t>(r * cols + k)] = std::ldexp(static_cast<float>(value(rng)), e);
  }
  require_same_bits(random_hadamard_transform_16(x, rows, cols), transform_by_definition(x));
}

TEST_CASE("RHT 16x16: random FP32 inputs give the documented order's bits, 64 rows x 256 with outliers") {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 30);
  const std::int64_t rows = 64, cols = 256;
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float row_scale = std::ldexp(1.0f, exponent(rng));
    for (std::int64_t k = 0; k < cols; ++k)  // every 37th channel an outlier channel, 1000x
      x[static_cast<std::size_t>(r * cols + k)] = normal(rng) * row_scale * (k % 37 == 5 ? 1000.0f : 1.0f);
  }
  const std::vector<float> y = random_hadamard_transform_16(x, rows, cols);
  require_same_bits(y, transform_in_documented_order(x));
  // Not the identity by accident: random inputs round, so the exact-definition path differs somewhere.
  const std::vector<float> exact = transform_by_definition(x);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < y.size(); ++i) differ += y[i] != exact[i];
  CHECK(differ > 0);
}

TEST_CASE("RHT 16x16: NaN and inf stay inside their group") {
  std::vector<float> x(2 * 32, 1.0f);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[32 + 20] = std::numeric_limits<float>::infinity();
  const std::vector<float> y = random_hadamard_transform_16(x, 2, 32);
  for (int j = 0; j < 16; ++j) {
    CHECK(std::isnan(y[static_cast<std::size_t>(j)]));          // row 0, group 0
    CHECK(std::isfinite(y[static_cast<std::size_t>(16 + j)]));  // row 0, group 1
    CHECK(std::isfinite(y[static_cast<std::size_t>(32 + j)]));  // row 1, group 0
    CHECK(std::isinf(y[static_cast<std::size_t>(48 + j)]));     // row 1, group 1: +-inf, no inf - inf
  }
}

TEST_CASE("RHT 16x16: K not a multiple of 16 and a wrong size are refused") {
  const std::vector<float> x(3 * 24, 1.0f);
  CHECK_THROWS_WITH(random_hadamard_transform_16(x, 3, 24), Catch::Contains("K (24) to be a multiple of 16"));
  CHECK_THROWS_WITH(random_hadamard_transform_16(x, 4, 16), Catch::Contains("are not 4 x 16"));
}
