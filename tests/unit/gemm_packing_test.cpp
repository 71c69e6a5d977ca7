// The floor micro-tiles' packing (kernels/cpu/gemm_packing.hpp) writes its layouts whole on the
// thread team, padding included (rows past A's last real row, columns past B's last real
// column up to whole groups, K past the operand's columns): every padded position must hold
// exactly what a zero code gives. Oracle: the same operand with that padding made real (zero
// codes appended as real rows, columns and K), packed again: it has no padding left, so the two
// packings must agree byte for byte, values (FP32 and FP64 layouts), exponents and lsb bytes.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

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
