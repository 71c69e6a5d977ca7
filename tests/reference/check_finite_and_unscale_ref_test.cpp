// The fused CPU check-finite-and-unscale against its FP64 reference, under every SIMD path this
// CPU has: an inf or NaN anywhere in any tensor of a list is found (every position of every
// size 0..67, so every vector tail length modulo 8 and 16; each tensor of a list; the first,
// last and tail positions of a large tensor), and the unscaled values equal the reference bit
// for bit on random FP32 patterns (subnormals, products that overflow, awkward scales).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/check_finite_and_unscale.hpp"
#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/loss_scaling/found_inf_flag.hpp"
#include "reference/check_finite_and_unscale_ref.hpp"

using namespace fp8lab;

namespace {

float from_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}
std::uint32_t to_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Every SIMD path this CPU can run; the detected one is restored afterwards.
template <class Body>
void for_each_cpu_isa(Body&& body) {
  for (int isa = 0; isa <= static_cast<int>(cpu::detected_cpu_isa()); ++isa) {
    cpu::set_cpu_isa(static_cast<cpu::CpuIsa>(isa));
    INFO(cpu::cpu_isa_name(static_cast<cpu::CpuIsa>(isa)) << " path");
    body();
  }
  cpu::set_cpu_isa(cpu::detected_cpu_isa());
}

std::vector<float> finite_values(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> value(-1000.0f, 1000.0f);
  std::vector<float> v(n);
  for (float& x : v) x = value(rng);
  return v;
}

// The values that must be found: both infinities, quiet and signalling NaNs of either sign.
const std::vector<float> kNonFinite = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                       from_bits(0x7FC00000u), from_bits(0xFFC00001u), from_bits(0x7F800001u),
                                       from_bits(0x7FFFFFFFu)};

// Runs the kernel on a list of tensors with a freshly cleared ledger flag; returns the flag.
bool run(std::vector<std::vector<float>>& tensors, float inverse_scale) {
  HostAllocator host;
  MemoryLedger ledger(&host);
  FoundInfFlag flag(ledger);
  *flag.data() = 0.0f;
  std::vector<std::span<float>> spans(tensors.begin(), tensors.end());
  cpu::check_finite_and_unscale(spans, inverse_scale, flag.data());
  return *flag.data() == 1.0f;
}

}  // namespace

TEST_CASE("check_finite_and_unscale cpu: an inf or NaN at any position of sizes 0..67 is found") {
  std::mt19937 rng(1);
  for_each_cpu_isa([&] {
    for (std::size_t n = 0; n <= 67; ++n) {
      std::vector<std::vector<float>> clean = {finite_values(n, rng)};
      REQUIRE_FALSE(run(clean, 0.5f));
      for (std::size_t position = 0; position < n; ++position)
        for (float bad : kNonFinite) {
          std::vector<std::vector<float>> tensors = {finite_values(n, rng)};
          tensors[0][position] = bad;
          INFO("size " << n << ", position " << position << ", bits 0x" << std::hex << to_bits(bad));
          REQUIRE(run(tensors, 0.5f));
        }
    }
  });
}

TEST_CASE("check_finite_and_unscale cpu: an inf or NaN in any one tensor of a list is found") {
  std::mt19937 rng(2);
  const std::vector<std::size_t> sizes = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 64, 67, 0, 5};
  for_each_cpu_isa([&] {
    for (std::size_t which = 0; which < sizes.size(); ++which) {
      const std::size_t n = sizes[which];
      if (n == 0) continue;
      // First, last and the start of the last 8- and 16-lane tail.
      for (std::size_t position : {std::size_t{0}, n - 1, n - 1 - (n - 1) % 8, n - 1 - (n - 1) % 16})
        for (float bad : kNonFinite) {
          std::vector<std::vector<float>> tensors;
          for (std::size_t s : sizes) tensors.push_back(finite_values(s, rng));
          tensors[which][position] = bad;
          INFO("tensor " << which << " of " << sizes.size() << " (size " << n << "), position " << position);
          REQUIRE(run(tensors, 2.0f));
        }
    }
    std::vector<std::vector<float>> clean;
    for (std::size_t s : sizes) clean.push_back(finite_values(s, rng));
    CHECK_FALSE(run(clean, 2.0f));
    std::vector<std::vector<float>> none;  // an empty list is all finite
    CHECK_FALSE(run(none, 2.0f));
  });
}

TEST_CASE("check_finite_and_unscale cpu: a large tensor, non-finite at its ends, tails and random positions") {
  std::mt19937 rng(3);
  constexpr std::size_t n = (1u << 20) + 13;
  std::vector<std::size_t> positions = {0, 1, 7, 8, 15, 16, 63, 64, n / 2};
  for (std::size_t back = 1; back <= 17; ++back) positions.push_back(n - back);
  std::uniform_int_distribution<std::size_t> anywhere(0, n - 1);
  for (int i = 0; i < 8; ++i) positions.push_back(anywhere(rng));
  std::vector<float> base = finite_values(n, rng);
  for_each_cpu_isa([&] {
    std::vector<std::vector<float>> clean = {base};
    REQUIRE_FALSE(run(clean, 1.0f));
    for (std::size_t i = 0; i < positions.size(); ++i) {
      std::vector<std::vector<float>> tensors = {base};
      tensors[0][positions[i]] = kNonFinite[i % kNonFinite.size()];
      INFO("position " << positions[i] << " of " << n);
      REQUIRE(run(tensors, 1.0f));
    }
  });
}

TEST_CASE("check_finite_and_unscale cpu: the flag is set, never cleared, and a null flag is refused") {
  std::vector<float> finite = {1.0f, 2.0f};
  std::vector<std::span<float>> spans = {finite};
  float flag = 1.0f;  // set by an earlier bucket of the same step
  cpu::check_finite_and_unscale(spans, 0.5f, &flag);
  CHECK(flag == 1.0f);
  CHECK_THROWS_WITH(cpu::check_finite_and_unscale(spans, 0.5f, nullptr), Catch::Contains("found_inf is null"));
  MemoryLedger shapes_only(nullptr);
  CHECK_THROWS_WITH(FoundInfFlag(shapes_only), Catch::Contains("shapes-only"));
}

TEST_CASE("check_finite_and_unscale cpu: unscaled values equal the FP64 reference bit for bit") {
  std::mt19937 rng(4);
  std::uniform_int_distribution<std::uint32_t> bits;
  // Powers of two (exact), awkward scales (fl32(1/scale) rounds), a scale < 1 (products
  // overflow to inf), and scales whose reciprocal is subnormal-adjacent (products underflow).
  const std::vector<double> scales = {65536.0, 1.0, 3.0, 0.1, 1e-3, 7.0e30, 1.5e38, 0x1p-20, 12345.678};
  const std::vector<std::size_t> sizes = {0, 1, 3, 8, 13, 16, 31, 67, 1000, 4099};
  for_each_cpu_isa([&] {
    for (double scale : scales) {
      std::vector<std::vector<float>> tensors;
      for (std::size_t s : sizes) {
        std::vector<float> t(s);
        for (float& x : t) {
          do x = from_bits(bits(rng));  // any finite FP32 pattern: subnormals, zeros, huge values
          while (!std::isfinite(x));
        }
        tensors.push_back(t);
      }
      std::vector<std::vector<double>> expected;
      for (const std::vector<float>& t : tensors) expected.emplace_back(t.begin(), t.end());
      const bool ref_found = ref::check_finite_and_unscale_ref(expected, scale);
      const float inverse_scale = static_cast<float>(1.0 / scale);  // LossScaler::inverse_scale's rule
      REQUIRE(run(tensors, inverse_scale) == ref_found);
      std::size_t mismatches = 0;
      for (std::size_t k = 0; k < tensors.size(); ++k)
        for (std::size_t i = 0; i < tensors[k].size(); ++i)
          mismatches += to_bits(tensors[k][i]) != to_bits(static_cast<float>(expected[k][i]));
      INFO("scale " << scale << ": " << mismatches << " elements differ from the reference");
      CHECK(mismatches == 0);
    }
  });
}
