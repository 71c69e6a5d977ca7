// The kernel codecs against the independent FP64 rounding routine (reference/), on every
// representable value, midpoint and neighbour, the overflow and subnormal edges, and a
// million random FP32 bit patterns. The exhaustive 2^32 sweep is in tests/slow.
#include <catch2/catch.hpp>
#include <limits>
#include <random>
#include <utility>

#include "tests/support/codec_vs_reference.hpp"
#include "tests/support/format_points.hpp"

using namespace fp8lab;

namespace {

template <class F>
void check_points(const test::TableFormat& table, const ref::FormatDefinition& def) {
  const std::vector<float> points = test::boundary_points(table);
  std::mt19937 rng(99);
  std::vector<float> random_points(1 << 20);
  for (float& p : random_points) p = float_from_bits(static_cast<std::uint32_t>(rng()));
  std::vector<Saturation> modes{Saturation::satfinite};
  if (FormatLayout<F>::has_nosat) modes.push_back(Saturation::nosat);
  for (Saturation s : modes) {
    DYNAMIC_SECTION(def.name << (s == Saturation::satfinite ? " satfinite" : " nosat")) {
      std::size_t disagreements = 0;
      for (const std::vector<float>* set : {&points, static_cast<const std::vector<float>*>(&random_points)})
        for (float x : *set)
          if (!test::codec_agrees<F>(x, def, s) && ++disagreements <= 5)
            UNSCOPED_INFO("x = " << x << " (bits " << std::hex << float_bits(x) << std::dec << ") -> code "
                                 << test::encode_in_mode<F>(x, s) << ", reference "
                                 << ref::round_to_format(x, def, s == Saturation::satfinite));
      INFO(points.size() << " boundary points, " << random_points.size() << " random patterns");
      CHECK(disagreements == 0);
    }
  }
}

}  // namespace

TEST_CASE("e4m3 encode agrees with the FP64 reference on boundaries and random patterns") {
  check_points<E4M3>(test::kE4M3Table, ref::e4m3());
}
TEST_CASE("e5m2 encode agrees with the FP64 reference on boundaries and random patterns") {
  check_points<E5M2>(test::kE5M2Table, ref::e5m2());
}
TEST_CASE("fp16 encode agrees with the FP64 reference on boundaries and random patterns") {
  check_points<FP16>(test::kFP16Table, ref::fp16());
}
TEST_CASE("bf16 encode agrees with the FP64 reference on boundaries and random patterns") {
  check_points<BF16>(test::kBF16Table, ref::bf16());
}

TEST_CASE("e2m1 encode agrees with the FP64 reference on boundaries and random patterns") {
  check_points<E2M1>(test::kE2M1Table, ref::e2m1());
}
TEST_CASE("e3m2 encode agrees with the FP64 reference on boundaries and random patterns") {
  check_points<E3M2>(test::kE3M2Table, ref::e3m2());
}
TEST_CASE("e2m3 encode agrees with the FP64 reference on boundaries and random patterns") {
  check_points<E2M3>(test::kE2M3Table, ref::e2m3());
}

TEST_CASE("reference rounding: frexp route and enumeration route agree on boundaries (satfinite)") {
  // Two independent FP64 roundings: a disagreement is a bug in one of them.
  const std::pair<const ref::FormatDefinition*, test::TableFormat> formats[] = {
      {&ref::e4m3(), test::kE4M3Table}, {&ref::e5m2(), test::kE5M2Table}, {&ref::e2m1(), test::kE2M1Table},
      {&ref::e3m2(), test::kE3M2Table}, {&ref::e2m3(), test::kE2M3Table}};
  for (const auto& [def, table] : formats) {
    const std::vector<double> values = ref::representable_values(*def);
    std::size_t disagreements = 0;
    for (float x : test::boundary_points(table)) {
      const double a = ref::round_to_format(x, *def, true), b = ref::round_by_enumeration(x, values);
      if (!test::same_value(a, b) && ++disagreements <= 5) UNSCOPED_INFO(def->name << ": x = " << x << ": " << a << " vs " << b);
    }
    INFO(def->name << ": " << values.size() << " non-negative values");
    CHECK(disagreements == 0);
  }
}

TEST_CASE("reference rounding: the MX element formats' values, ties and saturation") {
  CHECK(ref::representable_values(ref::e2m1()) == std::vector<double>{0, 0.5, 1, 1.5, 2, 3, 4, 6});
  CHECK(ref::representable_values(ref::e3m2()).size() == 32);
  CHECK(ref::representable_values(ref::e3m2()).back() == 28.0);
  CHECK(ref::representable_values(ref::e2m3()).size() == 32);
  CHECK(ref::representable_values(ref::e2m3())[1] == 0.125);
  // NVFP4's worked ties (FACTS.md): 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4.
  const std::pair<double, double> ties[] = {{0.25, 0}, {0.75, 1}, {1.25, 1}, {1.75, 2}, {2.5, 2}, {3.5, 4}, {5, 4}};
  for (const auto& [x, r] : ties) {
    INFO("x = " << x);
    CHECK(ref::round_to_format(x, ref::e2m1(), true) == r);
  }
  CHECK(ref::round_to_format(1e9, ref::e2m1(), true) == 6.0);
  CHECK(ref::round_to_format(-30.0, ref::e3m2(), true) == -28.0);
  CHECK(ref::round_to_format(0.03125, ref::e3m2(), true) == 0.0);   // half the smallest subnormal
  CHECK(ref::round_to_format(7.75, ref::e2m3(), true) == 7.5);      // above max: saturates
  CHECK_THROWS(ref::round_to_format(1.0, ref::e2m1(), false));       // no nosat without inf or NaN
  CHECK(ref::code_of_value(6.0, ref::e2m1()) == 0x7);
  CHECK(ref::code_of_value(-0.5, ref::e2m1()) == 0x9);
  CHECK(ref::code_of_value(28.0, ref::e3m2()) == 0x1F);
  CHECK(ref::code_of_value(-0.125, ref::e2m3()) == 0x21);
  CHECK(ref::code_of_value(std::numeric_limits<double>::quiet_NaN(), ref::e2m1()) == 0x8);  // the contract's NaN stand-in
}

TEST_CASE("reference rounding: spot values from the format definitions") {
  // Guards the reference itself with values worked out by hand.
  CHECK(ref::round_to_format(464.0, ref::e4m3(), false) == 448.0);
  CHECK(std::isnan(ref::round_to_format(465.0, ref::e4m3(), false)));
  CHECK(ref::round_to_format(465.0, ref::e4m3(), true) == 448.0);
  CHECK(std::isinf(ref::round_to_format(61440.0, ref::e5m2(), false)));
  CHECK(ref::round_to_format(0.0009765625, ref::e4m3(), true) == 0.0);          // 2^-10 ties to 0
  CHECK(ref::round_to_format(3 * 0.0009765625, ref::e4m3(), true) == 0.00390625);  // 1.5 quanta -> 2 quanta
  CHECK(ref::code_of_value(448.0, ref::e4m3()) == 0x7E);
  CHECK(ref::code_of_value(-0.001953125, ref::e4m3()) == 0x81);
  CHECK(ref::code_of_value(57344.0, ref::e5m2()) == 0x7B);
  CHECK(ref::code_of_value(65504.0, ref::fp16()) == 0x7BFF);
}
