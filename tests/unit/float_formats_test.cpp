// FP8 / FP16 / BF16 and the MX element formats' (E2M1, E3M2, E2M3) codecs against the
// DESIGN.md format table, the FP64 reference, and their named edge cases.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "kernels/formats/float_formats.hpp"
#include "reference/float_formats_ref.hpp"
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

// Every code of a format without inf/NaN: its decoded value is the reference's value of the
// same magnitude code (the reference lists the values in code order), with the code's sign,
// and the reference derives the same code back from that value; encode gives it back too.
template <class F>
void check_every_code_against_reference(const ref::FormatDefinition& def) {
  using L = FormatLayout<F>;
  const std::vector<double> values = ref::representable_values(def);
  REQUIRE(values.size() == L::magnitude_mask + 1);
  for (std::uint32_t code = 0; code < (1u << L::total_bits); ++code) {
    const double magnitude = values[code & L::magnitude_mask];
    const double expected = (code & L::sign_bit) ? -magnitude : magnitude;
    const float got = decode<F>(code);
    INFO(def.name << " code 0x" << std::hex << code);
    CHECK(test::same_value(got, expected));
    CHECK(ref::code_of_value(got, def) == code);
    CHECK(encode<F>(got) == code);
    CHECK_FALSE(is_nan_code<F>(code));
  }
}

template <class F>
concept has_saturation_argument = requires(float x) { encode<F>(x, Saturation::satfinite); };

}  // namespace

// nosat has no meaning without an inf or NaN code: refused at compile time (the header says why).
static_assert(!has_saturation_argument<E2M1> && !has_saturation_argument<E3M2> && !has_saturation_argument<E2M3>);
static_assert(has_saturation_argument<E4M3> && has_saturation_argument<E5M2> && has_saturation_argument<BF16>);

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

TEST_CASE("e2m1, e3m2, e2m3: every code decodes to the spec value and to the reference's value") {
  check_every_code_decodes_to_spec<E2M1>(test::kE2M1Table);
  check_every_code_decodes_to_spec<E3M2>(test::kE3M2Table);
  check_every_code_decodes_to_spec<E2M3>(test::kE2M3Table);
  check_every_code_against_reference<E2M1>(ref::e2m1());
  check_every_code_against_reference<E3M2>(ref::e3m2());
  check_every_code_against_reference<E2M3>(ref::e2m3());
}

TEST_CASE("e2m1 encode: the NVFP4 ties to even, subnormal 0.5, saturation, zeros, NaN") {
  // Magnitude codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6; every midpoint goes to the even code.
  CHECK(encode<E2M1>(0.25f) == 0x0);        // 0 | 0.5
  CHECK(encode<E2M1>(above(0.25f)) == 0x1);
  CHECK(encode<E2M1>(0.75f) == 0x2);        // 0.5 | 1
  CHECK(encode<E2M1>(below(0.75f)) == 0x1);
  CHECK(encode<E2M1>(1.25f) == 0x2);        // 1 | 1.5
  CHECK(encode<E2M1>(above(1.25f)) == 0x3);
  CHECK(encode<E2M1>(1.75f) == 0x4);        // 1.5 | 2
  CHECK(encode<E2M1>(2.5f) == 0x4);         // 2 | 3
  CHECK(encode<E2M1>(3.5f) == 0x6);         // 3 | 4
  CHECK(encode<E2M1>(5.0f) == 0x6);         // 4 | 6
  CHECK(encode<E2M1>(above(5.0f)) == 0x7);
  CHECK(encode<E2M1>(-5.0f) == 0xE);
  CHECK(encode<E2M1>(7.0f) == 0x7);         // 6 | the would-be 8: saturates
  CHECK(encode<E2M1>(1e30f) == 0x7);
  CHECK(encode<E2M1>(kInf) == 0x7);
  CHECK(encode<E2M1>(-kInf) == 0xF);
  CHECK(encode<E2M1>(std::numeric_limits<float>::max()) == 0x7);
  CHECK(encode<E2M1>(0.0f) == 0x0);
  CHECK(encode<E2M1>(-0.0f) == 0x8);
  CHECK(encode<E2M1>(-0.25f) == 0x8);       // rounds to zero, keeps its sign
  CHECK(encode<E2M1>(-0x1p-149f) == 0x8);
  CHECK(encode<E2M1>(kNaN) == 0x8);         // the stated NaN stand-in, -0, for either sign
  CHECK(encode<E2M1>(-kNaN) == 0x8);
  CHECK(encode<E2M1>(float_from_bits(0x7F800001u)) == 0x8);
  CHECK(decode<E2M1>(0x8) == 0.0f);
  CHECK(std::signbit(decode<E2M1>(0x8)));
  CHECK(decode<E2M1>(0xF7) == 6.0f);        // bits above the low four are not part of the code
}

TEST_CASE("e3m2 encode: subnormals 2^-4, ties to even, top binade and saturation at 28") {
  const float q = 0x1p-4f;                  // subnormal quantum; min normal 2^-2 = code 0x04
  CHECK(encode<E3M2>(q / 2) == 0x00);        // half a quantum ties to even zero
  CHECK(encode<E3M2>(above(q / 2)) == 0x01);
  CHECK(encode<E3M2>(-above(q / 2)) == 0x21);
  CHECK(encode<E3M2>(1.5f * q) == 0x02);     // 1 | 2 quanta -> 2
  CHECK(encode<E3M2>(2.5f * q) == 0x02);     // 2 | 3 -> 2
  CHECK(encode<E3M2>(3.5f * q) == 0x04);     // 3 | 4 quanta = the smallest normal
  CHECK(encode<E3M2>(below(3.5f * q)) == 0x03);
  CHECK(encode<E3M2>(0x1p-2f) == 0x04);
  CHECK(encode<E3M2>(1.0f) == 0x0C);
  CHECK(encode<E3M2>(1.125f) == 0x0C);       // 1 | 1.25 -> 1 (even fraction)
  CHECK(encode<E3M2>(1.375f) == 0x0E);       // 1.25 | 1.5 -> 1.5
  CHECK(encode<E3M2>(26.0f) == 0x1E);        // 24 | 28 -> 24
  CHECK(encode<E3M2>(above(26.0f)) == 0x1F);
  CHECK(encode<E3M2>(28.0f) == 0x1F);
  CHECK(encode<E3M2>(30.0f) == 0x1F);        // the would-be 32's midpoint: saturates
  CHECK(encode<E3M2>(-1e10f) == 0x3F);
  CHECK(encode<E3M2>(kInf) == 0x1F);
  CHECK(encode<E3M2>(-0.0f) == 0x20);
  CHECK(encode<E3M2>(kNaN) == 0x20);
}

TEST_CASE("e2m3 encode: subnormals 2^-3, ties to even, saturation at 7.5") {
  const float q = 0x1p-3f;                  // subnormal quantum; min normal 1 = code 0x08
  CHECK(encode<E2M3>(q / 2) == 0x00);
  CHECK(encode<E2M3>(above(q / 2)) == 0x01);
  CHECK(encode<E2M3>(1.5f * q) == 0x02);
  CHECK(encode<E2M3>(7.5f * q) == 0x08);     // 7 | 8 quanta = the smallest normal 1.0
  CHECK(encode<E2M3>(below(7.5f * q)) == 0x07);
  CHECK(encode<E2M3>(1.0f) == 0x08);
  CHECK(encode<E2M3>(1.0625f) == 0x08);      // 1 | 1.125 -> 1
  CHECK(encode<E2M3>(1.1875f) == 0x0A);      // 1.125 | 1.25 -> 1.25
  CHECK(encode<E2M3>(7.25f) == 0x1E);        // 7 | 7.5 -> 7
  CHECK(encode<E2M3>(above(7.25f)) == 0x1F);
  CHECK(encode<E2M3>(7.75f) == 0x1F);        // the would-be 8's midpoint: saturates
  CHECK(encode<E2M3>(-8.0f) == 0x3F);
  CHECK(encode<E2M3>(-kInf) == 0x3F);
  CHECK(encode<E2M3>(-0.0f) == 0x20);
  CHECK(encode<E2M3>(-kNaN) == 0x20);
}
