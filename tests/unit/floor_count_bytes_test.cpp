// The floor micro-tile's count (kernels/cpu/gemm_packing.hpp) rests on an int8 encoding: one
// wrapping byte add of two signed-lsb bytes, compared with count_threshold_byte(T), must say
// exactly "signs differ, neither is zero, and lsb_a + lsb_b <= T". Checked here for every pair
// of FP8 values of both formats (the premise: every lsb lies in [-16, 15]) and every T an int8
// threshold can carry, so no corner of the derivation is left to random data.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <vector>

#include "kernels/cpu/gemm_packing.hpp"
#include "kernels/formats/float_formats.hpp"

using namespace fp8lab;
using namespace fp8lab::cpu::detail;

namespace {

struct CountOperand {
  float value;
  int lsb;  // the exponent of the lowest set bit, computed with frexp (independent of the packing)
};

template <class F>
void add_finite_codes(std::vector<CountOperand>& to) {
  for (std::uint32_t code = 0; code < 256; ++code) {
    const float v = decode<F>(code);
    if (!std::isfinite(v)) continue;
    int lsb = 0;
    if (v != 0.0f) {
      // v = odd * 2^lsb: strip factors of two from the integer significand.
      int exponent = 0;
      double significand = std::ldexp(std::frexp(static_cast<double>(std::fabs(v)), &exponent), 24);
      lsb = exponent - 24;
      while (std::fmod(significand, 2.0) == 0.0) significand /= 2.0, ++lsb;
    }
    to.push_back({v, lsb});
  }
}

}  // namespace

TEST_CASE("floor count bytes: every nonzero FP8 value's lsb lies in [-16, 15]") {
  std::vector<CountOperand> operands;
  add_finite_codes<E4M3>(operands);
  add_finite_codes<E5M2>(operands);
  int lowest = 0, highest = 0;
  for (const CountOperand& o : operands)
    if (o.value != 0.0f) lowest = std::min(lowest, o.lsb), highest = std::max(highest, o.lsb);
  CHECK(lowest == -16);  // E5M2's smallest subnormal, 2^-16
  CHECK(highest == 15);  // E5M2's 2^15
}

TEST_CASE("floor count bytes: the wrapping byte sum counts exactly the negative products with a low lsb") {
  std::vector<CountOperand> operands;
  add_finite_codes<E4M3>(operands);
  add_finite_codes<E5M2>(operands);
  std::int64_t wrong = 0, counted = 0;
  std::ostringstream first_wrong;
  for (int t = -128; t <= 127; ++t) {
    const std::int8_t threshold = count_threshold_byte(t);
    for (const CountOperand& a : operands)
      for (const CountOperand& b : operands) {
        const bool expected = a.value * b.value < 0.0f && a.lsb + b.lsb <= t;
        const auto sum = static_cast<std::uint8_t>(signed_lsb_byte(a.value, a.lsb, kZeroLsbByteA) +
                                                   signed_lsb_byte(b.value, b.lsb, kZeroLsbByteB));
        const bool got = static_cast<std::int8_t>(sum) <= threshold;
        if (got != expected && wrong++ == 0)
          first_wrong << "a = " << a.value << " (lsb " << a.lsb << "), b = " << b.value << " (lsb " << b.lsb << "), T = " << t
                      << ": counted " << got << ", expected " << expected;
        counted += got;
      }
  }
  INFO("first wrong: " << first_wrong.str());
  CHECK(wrong == 0);
  CHECK(counted > 0);
}
