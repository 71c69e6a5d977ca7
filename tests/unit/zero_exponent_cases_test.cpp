// The crafted inputs that decide the exponent of an FP8 zero on silicon
// (tests/support/zero_exponent_cases.hpp) must themselves be right: the CPU emulation, scalar
// and vector paths, gives each convention's stated bits, and only C[0][0] is nonzero.
#include <catch2/catch.hpp>

#include "kernels/cpu/gemm_fp8_nt.hpp"
#include "tests/support/zero_exponent_cases.hpp"

using namespace fp8lab;

TEST_CASE("crafted zero-exponent cases: the emulation gives each convention's bits") {
  for (const test::ZeroConvention& convention : test::zero_exponent_conventions()) {
    for (const test::CraftedZeroCase& c : test::crafted_zero_exponent_cases()) {
      const std::uint32_t expected = convention.name == "min" ? c.min_bits : c.none_bits;
      for (bool generic : {false, true}) {
        INFO(c.name << ", zero exponent " << convention.name << (generic ? ", scalar path" : ", vector path"));
        cpu::GemmOptions options;
        options.force_generic = generic;
        const std::vector<float> out = cpu::gemm_nt(c.a, c.b, test::crafted_zero_case_config(convention.model), options);
        REQUIRE(out.size() == 8);
        CHECK(float_bits(out[0]) == expected);
        for (std::size_t j = 1; j < out.size(); ++j) CHECK(out[j] == 0.0f);
      }
    }
  }
}

TEST_CASE("crafted zero-exponent cases: the two conventions give different bits") {
  for (const test::CraftedZeroCase& c : test::crafted_zero_exponent_cases()) {
    INFO(c.name);
    CHECK(c.min_bits != c.none_bits);
  }
}
