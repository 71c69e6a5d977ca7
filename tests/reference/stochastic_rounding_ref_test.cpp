// Exact tier for stochastic rounding: the kernels' draw and element rounding
// (kernels/formats/stochastic_rounding.hpp) against the FP64 reference
// (reference/stochastic_rounding_ref), and the CPU quantizer with rounding = stochastic against
// reference::quantize_ref with the same seed, bit for bit: codes, scales, dequantized values, on
// random, outlier-channel, subnormal-range and tie-valued tensors, E4M3 / E5M2 / E2M1 under
// several scale rules.
#include <catch2/catch.hpp>
#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "kernels/cpu/quantize.hpp"
#include "reference/quantize_ref.hpp"
#include "reference/stochastic_rounding_ref.hpp"
#include "tests/support/adversarial_tensors.hpp"
#include "tests/support/format_points.hpp"
#include "tests/support/quantize_cases.hpp"
#include "tests/support/quantized_vs_reference.hpp"

using namespace fp8lab;

namespace {

// Boundary points of the format (values, midpoints, their FP32 neighbours, overflow, inf, NaN)
// and random FP32 values over every binade from FP32 subnormals to twice the format's maximum.
std::vector<float> element_points(const test::TableFormat& table) {
  std::vector<float> v = test::boundary_points(table);
  std::mt19937 rng(2024);
  std::uniform_real_distribution<float> significand(1.0f, 2.0f);
  for (int e = -149; e <= 17; ++e)
    for (int i = 0; i < 8; ++i) {
      const float x = std::ldexp(significand(rng), e);
      v.push_back(x);
      v.push_back(-x);
    }
  return v;
}

}  // namespace

TEST_CASE("stochastic draw: SplitMix64's published first outputs for seed 0, and the reference's draws") {
  // SplitMix64 seeded with 0 (Vigna's splitmix64.c): 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F.
  CHECK(stochastic_draw(0, 0) == 0xE220A839u);
  CHECK(stochastic_draw(0, 1) == 0x6E789E6Au);
  CHECK(stochastic_draw(0, 2) == 0x06C45D18u);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t seed = rng(), index = rng() >> (i % 64);
    REQUIRE(stochastic_draw(seed, index) == ref::stochastic_draw_ref(seed, index));
  }
}

TEST_CASE("stochastic element rounding equals the FP64 reference for every element format, value and draw") {
  std::mt19937 rng(11);
  for (const test::ElementCase& format : test::element_cases()) {
    DYNAMIC_SECTION(format.kernel.name()) {
      const std::vector<float> points = element_points(format.table);
      // Draws at the ends and middle of the range, and random ones.
      std::vector<std::uint32_t> draws = {0u, 1u, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFEu, 0xFFFFFFFFu};
      for (int i = 0; i < 26; ++i) draws.push_back(static_cast<std::uint32_t>(rng()));
      std::size_t mismatches = 0;
      for (const float v : points)
        for (const std::uint32_t u : draws) {
          const std::uint32_t code = with_element_codec(format.kernel, [&](auto codec) {
            return encode_stochastic<decltype(codec)>(v, u);
          });
          const std::uint32_t expected = ref::code_of_value(ref::round_stochastic_ref(v, format.reference, u), format.reference);
          if (code != expected && ++mismatches <= 5)
            UNSCOPED_INFO("v = " << v << " (0x" << std::hex << std::bit_cast<std::uint32_t>(v) << "), u = 0x" << u
                                 << ": code 0x" << code << ", reference 0x" << expected << std::dec);
        }
      INFO(points.size() << " values x " << draws.size() << " draws");
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("cpu quantize with stochastic rounding equals the FP64 reference (E4M3, E5M2, E2M1; several rules)") {
  constexpr std::int64_t kRows = 32, kCols = 100;  // ragged for 1x16, 1x32 and 16x16
  const std::vector<ScaleRule> one_level = {ScaleRule::fp32, ScaleRule::pow2,    ScaleRule::deepgemm, ScaleRule::te,
                                            ScaleRule::div,  ScaleRule::mx,      ScaleRule::mx_rceil};
  for (const test::ElementCase& format : test::element_cases()) {
    if (format.kernel.kind() == ElementFormat::Kind::e3m2 || format.kernel.kind() == ElementFormat::Kind::e2m3)
      continue;  // the element test above covers the FP6 formats
    std::vector<ScaleRule> rules = one_level;
    if (format.kernel.kind() == ElementFormat::Kind::e2m1) {
      rules.push_back(ScaleRule::nvfp4);
      rules.push_back(ScaleRule::nvfp4_torchao);
    }
    const std::vector<test::NamedTensor> tensors =
        test::adversarial_tensors(kRows, kCols, format_max(format.kernel), test::midpoints(format.table));
    for (const test::NamedTensor& tensor : tensors) {
      Eigen::MatrixXd x(kRows, kCols);
      for (std::int64_t r = 0; r < kRows; ++r)
        for (std::int64_t c = 0; c < kCols; ++c) x(r, c) = tensor.values[static_cast<std::size_t>(r * kCols + c)];
      for (const ScaleRule rule : rules)
        for (const char* granularity : {"row", "tile:1x16", "tile:1x32", "block:16x16"})
          for (const std::uint64_t seed : {std::uint64_t{0}, std::uint64_t{0x5EEDF00DDEADBEEF}}) {
            DYNAMIC_SECTION(format.kernel.name() << " " << granularity << " " << scale_rule_name(rule) << " seed "
                                                 << seed << " on " << tensor.name) {
              const QuantizeConfig config{format.kernel, Granularity::parse(granularity), rule,
                                          {RoundingMode::stochastic, seed}};
              const QuantizedTensor q = cpu::quantize(tensor.values, kRows, kCols, config);
              const std::vector<float> dq = cpu::dequantize(q);
              const ref::QuantizedRef r = ref::quantize_ref(x, q.tile_rows, q.tile_cols, format.reference,
                                                            test::reference_rule(rule), {true, seed});
              test::check_matches_reference(q, tensor.values, dq, r);
            }
          }
    }
  }
}
