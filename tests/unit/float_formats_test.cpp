// FP8 / FP16 / BF16 codecs against the DESIGN.md format table and its named edge cases.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "kernels/formats/float_formats.hpp"
#include "tests/support/spec_values.hpp"

using namespace fp8lab;
using test::same_value;
using test::spec_value;

namespace {

template <class F>
void check_every_code_decodes_to_spec(const test::TableFormat& table) {
  const std::uint32_t codes = 1u << FormatLayout<F>::total_bits;
  std::uint32_t mismatches = 0;
  for (std::uint32_t code = 0; code < codes; ++code) {
    const double expected = spec_value(code, table);
    const double got = decode<F>(code);
    if (!same_value(got, expected)) {
      if (++mismatches <= 5) UNSCOPED_INFO("code " << code << ": decoded " << got << ", spec " << expected);
    }
    CHECK(is_nan_code<F>(code) == std::isnan(expected));
  }
  CHECK(mismatches == 0);
}

template <class F>
void check_round_trip_of_every_finite_code(Saturation saturation) {
  const std::uint32_t codes = 1u << FormatLayout<F>::total_bits;
  std::uint32_t mismatches = 0;
  for (std::uint32_t code = 0; code < codes; ++code) {
    const float value = decode<F>(code);
    if (!std::isfinite(value)) continue;
    if (encode<F>(value, saturation) != code && ++mismatches <= 5) UNSCOPED_INFO("code " << code << " did not round-trip");
  }
  CHECK(mismatches == 0);
}

float above(float x) { return std::nextafter(x, std::numeric_limits<float>::infinity()); }
float below(float x) { return std::nextafter(x, -std::numeric_limits<float>::infinity()); }
constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr auto kSat = Saturation::satfinite;
constexpr auto kNoSat = Saturation::nosat;

}  // namespace

TEST_CASE("e4m3: all 256 codes decode to the spec value") { check_every_code_decodes_to_spec<E4M3>(test::kE4M3Table); }
TEST_CASE("e5m2: all 256 codes decode to the spec value") { check_every_code_decodes_to_spec<E5M2>(test::kE5M2Table); }
TEST_CASE("fp16: all 65536 codes decode to the spec value") { check_every_code_decodes_to_spec<FP16>(test::kFP16Table); }
TEST_CASE("bf16: all 65536 codes decode to the spec value") { check_every_code_decodes_to_spec<BF16>(test::kBF16Table); }

TEST_CASE("every finite code survives encode(decode(code)) in both saturation modes") {
  for (Saturation s : {kSat, kNoSat}) {
    check_round_trip_of_every_finite_code<E4M3>(s);
    check_round_trip_of_every_finite_code<E5M2>(s);
    check_round_trip_of_every_finite_code<FP16>(s);
    check_round_trip_of_every_finite_code<BF16>(s);
  }
}

TEST_CASE("e4m3 encode: overflow edges 448 and 464, saturation modes, NaN, inf, zeros") {
  CHECK(encode<E4M3>(448.0f) == 0x7E);
  CHECK(encode<E4M3>(464.0f, kSat) == 0x7E);    // the midpoint ties to the even 448
  CHECK(encode<E4M3>(464.0f, kNoSat) == 0x7E);
  CHECK(encode<E4M3>(above(464.0f), kSat) == 0x7E);
  CHECK(encode<E4M3>(above(464.0f), kNoSat) == 0x7F);  // overflow without saturation is NaN
  CHECK(encode<E4M3>(-above(464.0f), kSat) == 0xFE);
  CHECK(encode<E4M3>(-above(464.0f), kNoSat) == 0xFF);
  CHECK(encode<E4M3>(kInf, kSat) == 0x7E);
  CHECK(encode<E4M3>(-kInf, kSat) == 0xFE);
  CHECK(encode<E4M3>(kInf, kNoSat) == 0x7F);
  CHECK(encode<E4M3>(kNaN, kSat) == 0x7F);
  CHECK(encode<E4M3>(-kNaN, kNoSat) == 0x7F);  // canonical NaN, sign dropped as CUDA's float path does
  CHECK(encode<E4M3>(0.0f) == 0x00);
  CHECK(encode<E4M3>(-0.0f) == 0x80);
  // Top binade: 384 (0x7C), 416 (0x7D), 448 (0x7E); midpoints tie to the even code.
  CHECK(encode<E4M3>(400.0f) == 0x7C);
  CHECK(encode<E4M3>(432.0f) == 0x7E);
  CHECK(encode<E4M3>(above(400.0f)) == 0x7D);
}

TEST_CASE("e4m3 encode: subnormal edges 2^-10, 2^-9, 2^-6") {
  const float min_sub = 0x1p-9f;
  CHECK(encode<E4M3>(0x1p-10f) == 0x00);           // half the smallest subnormal ties to even zero
  CHECK(encode<E4M3>(above(0x1p-10f)) == 0x01);
  CHECK(encode<E4M3>(-above(0x1p-10f)) == 0x81);
  CHECK(encode<E4M3>(1.5f * min_sub) == 0x02);      // tie between 1 and 2 quanta -> 2 (even)
  CHECK(encode<E4M3>(2.5f * min_sub) == 0x02);      // tie between 2 and 3 -> 2
  CHECK(encode<E4M3>(7.5f * min_sub) == 0x08);      // rounds up into the smallest normal 2^-6
  CHECK(encode<E4M3>(0x1p-6f) == 0x08);
  CHECK(encode<E4M3>(below(0x1p-6f)) == 0x08);
  CHECK(encode<E4M3>(0x1p-149f) == 0x00);           // FP32 subnormals flush to zero
}

TEST_CASE("e5m2 encode: overflow edges 57344 and 61440, subnormal edge 2^-17") {
  CHECK(encode<E5M2>(57344.0f) == 0x7B);
  CHECK(encode<E5M2>(below(61440.0f), kNoSat) == 0x7B);
  CHECK(encode<E5M2>(61440.0f, kNoSat) == 0x7C);   // the midpoint ties to the even 65536 = inf
  CHECK(encode<E5M2>(61440.0f, kSat) == 0x7B);
  CHECK(encode<E5M2>(-61440.0f, kNoSat) == 0xFC);
  CHECK(encode<E5M2>(kInf, kNoSat) == 0x7C);
  CHECK(encode<E5M2>(kInf, kSat) == 0x7B);
  CHECK(encode<E5M2>(-kInf, kSat) == 0xFB);
  CHECK(encode<E5M2>(kNaN) == 0x7F);
  CHECK(encode<E5M2>(0x1p-17f) == 0x00);
  CHECK(encode<E5M2>(above(0x1p-17f)) == 0x01);
  CHECK(encode<E5M2>(-0.0f) == 0x80);
}

TEST_CASE("fp16 and bf16 encode: overflow to inf, ties to even, canonical NaN") {
  CHECK(encode<FP16>(65504.0f, kNoSat) == 0x7BFF);
  CHECK(encode<FP16>(65520.0f, kNoSat) == 0x7C00);   // midpoint of 65504 and 65536 ties to even (inf)
  CHECK(encode<FP16>(below(65520.0f), kNoSat) == 0x7BFF);
  CHECK(encode<FP16>(0x1p-25f) == 0x0000);
  CHECK(encode<FP16>(above(0x1p-25f)) == 0x0001);
  CHECK(encode<FP16>(kNaN) == 0x7FFF);
  CHECK(encode<BF16>(1.0f + 0x1p-8f) == 0x3F80);     // tie -> even
  CHECK(encode<BF16>(1.0f + 0x1p-8f + 0x1p-20f) == 0x3F81);
  CHECK(encode<BF16>(1.0f + 3 * 0x1p-8f) == 0x3F82);  // tie between 0x3F81 and 0x3F82 -> even
  CHECK(encode<BF16>(0x1p-149f) == 0x0000);           // FP32 smallest subnormal: below half of BF16's 2^-133
  CHECK(encode<BF16>(0x1p-133f) == 0x0001);
  CHECK(encode<BF16>(kInf, kNoSat) == 0x7F80);
  CHECK(encode<BF16>(kNaN) == 0x7FFF);
}
