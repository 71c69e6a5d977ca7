// The kernel codecs against the independent FP64 rounding routine (reference/), on every
// representable value, midpoint and neighbour, the overflow and subnormal edges, and a
// million random FP32 bit patterns. The exhaustive 2^32 sweep is in tests/slow.
#include <catch2/catch.hpp>
#include <random>

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
  for (Saturation s : {Saturation::satfinite, Saturation::nosat}) {
    DYNAMIC_SECTION(def.name << (s == Saturation::satfinite ? " satfinite" : " nosat")) {
      std::size_t disagreements = 0;
      for (const std::vector<float>* set : {&points, static_cast<const std::vector<float>*>(&random_points)})
        for (float x : *set)
          if (!test::codec_agrees<F>(x, def, s) && ++disagreements <= 5)
            UNSCOPED_INFO("x = " << x << " (bits " << std::hex << float_bits(x) << std::dec << ") -> code "
                                 << encode<F>(x, s) << ", reference "
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
