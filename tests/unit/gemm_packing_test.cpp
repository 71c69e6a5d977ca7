// The floor micro-tiles' packing (kernels/cpu/gemm_packing.hpp) writes its layouts whole on the
// thread team, padding included (rows past A's last real row, columns past B's last real
// column up to whole groups, K past the operand's columns): every padded position must hold
// exactly what a zero code gives. Oracle: the same operand with that padding made real (zero
// codes appended as real rows, columns and K), packed again: it has no padding left, so the two
// packings must agree byte for byte, values (FP32 and FP64 layouts), exponents and lsb bytes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/gemm_packing.hpp"
#include "kernels/quantization.hpp"

using namespace fp8lab;
using namespace fp8lab::cpu::detail;

namespace {

// rows x cols of random finite E4M3 codes (NaN is 0x7f / 0xff), copied into a padded_rows x
// padded_cols tensor whose extra codes are zero when `pad` is set.
QuantizedTensor random_codes(std::int64_t rows, std::int64_t cols, std::int64_t padded_rows, std::int64_t padded_cols,
                             unsigned seed) {
  const QuantizeConfig config{Fp8Format::e4m3, Granularity::tile(128), ScaleRule::fp32};
  QuantizedTensor q = make_quantized_tensor(padded_rows, padded_cols, config);  // codes start at 0
  std::mt19937 rng(seed);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      std::uint8_t code = static_cast<std::uint8_t>(rng());
      if ((code & 0x7f) == 0x7f) code = 0x01;
      q.codes[static_cast<std::size_t>(r * padded_cols + c)] = code;
    }
  return q;
}

GemmPlan plan_for(std::int64_t k) {
  const std::int64_t padded_k = (k + 31) / 32 * 32;
  return {0, 0, k, padded_k, padded_k, 1};
}

template <class V>
bool same_bytes(const V& a, const V& b) {  // the layout a packing does not fill is empty in both
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0);
}

}  // namespace

TEST_CASE("gemm packing: the floor layouts' padding is what zero codes give, in both value widths") {
  for (const PackLayout layout : {PackLayout::floor, PackLayout::floor_fp64})
    for (const auto zero : {AccumulationModel::ZeroExponent::none, AccumulationModel::ZeroExponent::min})
      for (const std::int64_t rows : {1, 5, 8, 41})
        for (const std::int64_t k : {1, 37, 64, 100}) {
          const GemmPlan plan = plan_for(k);
          INFO("layout " << static_cast<int>(layout) << " zero " << static_cast<int>(zero) << " rows " << rows << " k " << k);
          bool finite = true;
          // A: rows padded to whole 4-row tiles.
          const std::int64_t a_rows = (rows + 3) / 4 * 4;
          const PackedA a = pack_a(random_codes(rows, k, rows, k, 7), plan, 32, zero, {}, 4, layout, finite);
          const PackedA a_real = pack_a(random_codes(rows, k, a_rows, plan.padded_k, 7), plan, 32, zero, {}, 4, layout, finite);
          CHECK(same_bytes(a.tile_value, a_real.tile_value));
          CHECK(same_bytes(a.tile_value64, a_real.tile_value64));
          CHECK(same_bytes(a.tile_exponent, a_real.tile_exponent));
          CHECK(same_bytes(a.tile_lsb, a_real.tile_lsb));
          // B: columns (its rows) padded to whole groups of 32.
          const std::int64_t b_cols = (rows + kGroupCols - 1) / kGroupCols * kGroupCols;
          const PackedB b = pack_b(random_codes(rows, k, rows, k, 9), plan, 32, zero, {}, layout, finite);
          const PackedB b_real = pack_b(random_codes(rows, k, b_cols, plan.padded_k, 9), plan, 32, zero, {}, layout, finite);
          CHECK(same_bytes(b.value, b_real.value));
          CHECK(same_bytes(b.value64, b_real.value64));
          CHECK(same_bytes(b.group_exponent, b_real.group_exponent));
          CHECK(same_bytes(b.group_lsb, b_real.group_lsb));
          CHECK(finite);
        }
}

namespace {

// rows x cols codes of `format` walking through every finite code (row r, column c: the
// (r * cols + c + offset)-th finite code), with `nonfinite` written at (bad_row, bad_col) when set.
QuantizedTensor every_finite_code(Fp8Format format, std::int64_t rows, std::int64_t cols, unsigned offset) {
  const QuantizeConfig config{format, Granularity::tile(128), ScaleRule::fp32};
  QuantizedTensor q = make_quantized_tensor(rows, cols, config);
  std::vector<std::uint8_t> finite;
  for (unsigned code = 0; code < 256; ++code) {
    const unsigned magnitude = code & 0x7f;
    const bool nonfinite = format == Fp8Format::e4m3 ? magnitude == 0x7f : magnitude >= 0x7c;
    if (!nonfinite) finite.push_back(static_cast<std::uint8_t>(code));
  }
  for (std::size_t i = 0; i < q.codes.size(); ++i) q.codes[i] = finite[(i + offset) % finite.size()];
  return q;
}

// pack_a and pack_b of q with the ISA pinned to `isa` (restored after); each clears its own flag
// (so a finite check broken in one of the two unpackings cannot hide behind the other's).
std::pair<PackedA, PackedB> pack_with(cpu::CpuIsa isa, const QuantizedTensor& q, const GemmPlan& plan,
                                      AccumulationModel::ZeroExponent zero, bool& finite_a, bool& finite_b) {
  const cpu::CpuIsa saved = cpu::active_cpu_isa();
  cpu::set_cpu_isa(isa);
  std::pair<PackedA, PackedB> packed{pack_a(q, plan, 32, zero, {}, 4, PackLayout::floor, finite_a),
                                     pack_b(q, plan, 32, zero, {}, PackLayout::floor, finite_b)};
  cpu::set_cpu_isa(saved);
  return packed;
}

// The first index where two byte layouts differ, or -1 (printed when a comparison fails).
template <class V>
std::int64_t first_difference(const V& a, const V& b) {
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(a[0])) != 0) return static_cast<std::int64_t>(i);
  return a.size() == b.size() ? -1 : static_cast<std::int64_t>(std::min(a.size(), b.size()));
}

}  // namespace

// The AVX2 unpacking (gemm_packing_avx2.hpp) computes each code's value, exponent byte and
// signed-lsb byte from its fields; the scalar unpacking reads them from tables built from the
// codec. Over every finite code of both formats, both zero conventions, A's and B's zero bytes,
// K with and without a tail of fewer than 8, and row counts that leave null lines: same bytes.
TEST_CASE("gemm packing: the AVX2 unpacking gives the scalar tables' bytes for every finite code") {
  if (cpu::detected_cpu_isa() == cpu::CpuIsa::scalar) {
    WARN("this CPU has no AVX2: the AVX2 unpacking is not tested here");
    return;
  }
  for (const Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2})
    for (const auto zero : {AccumulationModel::ZeroExponent::none, AccumulationModel::ZeroExponent::min})
      for (const std::int64_t rows : {3, 8, 37})
        for (const std::int64_t k : {8, 61, 256}) {
          INFO("format " << static_cast<int>(format) << " zero " << static_cast<int>(zero) << " rows " << rows << " k " << k);
          const GemmPlan plan = plan_for(k);
          const QuantizedTensor q = every_finite_code(format, rows, k, static_cast<unsigned>(rows + k));
          bool finite_a = true, finite_b = true, finite_vector_a = true, finite_vector_b = true;
          const auto [a_scalar, b_scalar] = pack_with(cpu::CpuIsa::scalar, q, plan, zero, finite_a, finite_b);
          const auto [a_vector, b_vector] = pack_with(cpu::CpuIsa::avx2, q, plan, zero, finite_vector_a, finite_vector_b);
          CHECK(finite_a);
          CHECK(finite_b);
          CHECK(finite_vector_a);
          CHECK(finite_vector_b);
          CHECK(first_difference(a_scalar.tile_value, a_vector.tile_value) == -1);
          CHECK(first_difference(a_scalar.tile_exponent, a_vector.tile_exponent) == -1);
          CHECK(first_difference(a_scalar.tile_lsb, a_vector.tile_lsb) == -1);
          CHECK(first_difference(b_scalar.value, b_vector.value) == -1);
          CHECK(first_difference(b_scalar.group_exponent, b_vector.group_exponent) == -1);
          CHECK(first_difference(b_scalar.group_lsb, b_vector.group_lsb) == -1);
        }
}

// One non-finite code anywhere (inside an 8-k block the AVX2 unpacking takes, or in the
// scalar tail) clears the finite flag of both unpackings, for every non-finite code.
TEST_CASE("gemm packing: the AVX2 unpacking finds every non-finite code wherever it lies") {
  if (cpu::detected_cpu_isa() == cpu::CpuIsa::scalar) {
    WARN("this CPU has no AVX2: the AVX2 unpacking is not tested here");
    return;
  }
  const std::int64_t rows = 9, k = 45;  // the last 5 k are the scalar tail
  const GemmPlan plan = plan_for(k);
  for (const Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2})
    for (unsigned code = 0; code < 256; ++code) {
      const unsigned magnitude = code & 0x7f;
      if (format == Fp8Format::e4m3 ? magnitude != 0x7f : magnitude < 0x7c) continue;
      for (const auto& [row, col] : {std::pair<std::int64_t, std::int64_t>{0, 0}, {4, 17}, {8, 39}, {8, 44}, {5, 40}}) {
        INFO("format " << static_cast<int>(format) << " code " << code << " at " << row << ", " << col);
        QuantizedTensor q = every_finite_code(format, rows, k, 3);
        q.codes[static_cast<std::size_t>(row * k + col)] = static_cast<std::uint8_t>(code);
        bool finite_a = true, finite_b = true, finite_vector_a = true, finite_vector_b = true;
        pack_with(cpu::CpuIsa::scalar, q, plan, AccumulationModel::ZeroExponent::none, finite_a, finite_b);
        pack_with(cpu::CpuIsa::avx2, q, plan, AccumulationModel::ZeroExponent::none, finite_vector_a, finite_vector_b);
        CHECK_FALSE(finite_a);
        CHECK_FALSE(finite_b);
        CHECK_FALSE(finite_vector_a);
        CHECK_FALSE(finite_vector_b);
      }
    }
}
