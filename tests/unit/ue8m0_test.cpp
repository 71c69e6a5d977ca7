// UE8M0 scale codes: value 2^(code - 127), 0xFF NaN, and the round-up encoder of the pow2 rule.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "kernels/formats/ue8m0.hpp"

using namespace fp8lab;

TEST_CASE("ue8m0: every code decodes to 2^(code - 127), 0xFF is NaN") {
  for (int code = 0; code < 255; ++code) {
    INFO("code " << code);
    CHECK(static_cast<double>(ue8m0_decode(static_cast<std::uint8_t>(code))) == std::ldexp(1.0, code - 127));
  }
  CHECK(std::isnan(ue8m0_decode(0xFF)));
  CHECK(float_bits(ue8m0_decode(0x00)) == 0x00400000u);  // 2^-127: the FP32 subnormal, not zero
  CHECK(float_bits(ue8m0_decode(0xFE)) == 0x7F000000u);  // 2^127
}

TEST_CASE("ue8m0: encode rounds up to the next power of two and saturates at the ends") {
  for (int k = -127; k <= 127; ++k) {
    const float p = static_cast<float>(std::ldexp(1.0, k));
    INFO("2^" << k);
    CHECK(ue8m0_encode_ceil(p) == k + 127);                                  // powers of two are exact
    if (k < 127) CHECK(ue8m0_encode_ceil(std::nextafter(p, 1e38f)) == k + 128);  // just above rounds up
  }
  CHECK(ue8m0_encode_ceil(0x1p-140f) == 0x00);   // below the smallest code: the smallest code
  CHECK(ue8m0_encode_ceil(std::numeric_limits<float>::max()) == 0xFE);
  CHECK(ue8m0_encode_ceil(std::numeric_limits<float>::infinity()) == 0xFE);
  CHECK(ue8m0_encode_ceil(std::numeric_limits<float>::quiet_NaN()) == 0xFF);
  CHECK(ue8m0_encode_ceil(0.0f) == 0xFF);        // no zero in UE8M0: not a scale
  CHECK(ue8m0_encode_ceil(-1.0f) == 0xFF);
  CHECK(ceil_pow2(3.0f) == 4.0f);
  CHECK(ceil_pow2(0.3f) == 0.5f);
}
