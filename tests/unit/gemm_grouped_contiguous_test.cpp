// The grouped (MoE) GEMM's CPU emulation in the contiguous layout: each expert's rows bit for
// bit what the plain CPU GEMM gives that expert's tokens alone (A sliced to them), padding rows
// 0, for every A granularity the GPU kernel takes, B per block and per row, E4M3 and E5M2, N_C
// 32 / 128 / never; and the layout's refusals.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/cpu/gemm_fp8_nt.hpp"
#include "kernels/cpu/gemm_grouped_contiguous.hpp"

using namespace fp8lab;

namespace {

QuantizedTensor random_operand(std::int64_t rows, std::int64_t cols, Fp8Format format, const char* granularity,
                               std::mt19937_64& rng) {
  QuantizedTensor q = make_quantized_tensor(rows, cols, {format, Granularity::parse(granularity), ScaleRule::fp32});
  for (std::uint8_t& code : q.codes) {
    do code = static_cast<std::uint8_t>(rng() & 0xFF);
    while (!std::isfinite(format == Fp8Format::e4m3 ? decode<E4M3>(code) : decode<E5M2>(code)));
  }
  std::uniform_real_distribution<float> log_scale(-8.0f, 8.0f);
  for (float& s : q.scales) s = std::exp2(log_scale(rng));
  return q;
}

std::size_t bit_mismatches(const float* x, const float* y, std::size_t n) {
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < n; ++i) mismatches += std::memcmp(&x[i], &y[i], sizeof(float)) != 0;
  return mismatches;
}

struct Case {
  const char* a_granularity;
  const char* b_granularity;
  const char* promotion;
  Fp8Format format;
};

}  // namespace

TEST_CASE("grouped contiguous GEMM: each expert's rows equal the plain GEMM on that expert's tokens, bit for bit") {
  // 3 experts over 7 blocks of 128 rows, one of them padding, expert 1 in two runs apart and
  // expert 2 idle: the blocks need not be sorted, and an expert may have no tokens.
  const std::vector<std::int32_t> block_expert = {0, 1, 1, -1, 0, 1, 0};
  const std::int64_t m = 128 * static_cast<std::int64_t>(block_expert.size()), n = 136, k = 400;
  const Case cases[] = {{"tile:1x128", "block:128x128", "128", Fp8Format::e4m3},
                        {"tile:1x128", "block:128x128", "32", Fp8Format::e4m3},
                        {"row", "row", "never", Fp8Format::e5m2},
                        {"tensor", "block:128x128", "64", Fp8Format::e5m2}};
  std::mt19937_64 rng(44);
  for (const Case& c : cases) {
    const QuantizedTensor a = random_operand(m, k, c.format, c.a_granularity, rng);
    std::vector<QuantizedTensor> experts;
    for (int e = 0; e < 3; ++e) experts.push_back(random_operand(n, k, c.format, c.b_granularity, rng));
    GemmConfig config;
    config.promotion = PromotionInterval::parse(c.promotion);
    const std::vector<float> grouped = cpu::gemm_grouped_contiguous_nt(a, experts, block_expert, config);
    REQUIRE(grouped.size() == static_cast<std::size_t>(m * n));
    for (std::int32_t e = -1; e < 3; ++e) {
      std::vector<std::int64_t> rows;
      for (std::size_t block = 0; block < block_expert.size(); ++block)
        if (block_expert[block] == e)
          for (std::int64_t r = 0; r < 128; ++r) rows.push_back(static_cast<std::int64_t>(block) * 128 + r);
      if (rows.empty()) continue;
      INFO(c.a_granularity << " x " << c.b_granularity << " N_C " << c.promotion << ", expert " << e << ": " << rows.size() << " rows");
      std::vector<float> expected(rows.size() * n, 0.0f);  // padding rows: 0
      if (e >= 0) expected = cpu::gemm_nt(quantized_rows(a, rows), experts[static_cast<std::size_t>(e)], config);
      std::vector<float> got;
      for (std::int64_t r : rows) got.insert(got.end(), grouped.begin() + r * n, grouped.begin() + (r + 1) * n);
      CHECK(bit_mismatches(got.data(), expected.data(), got.size()) == 0);
    }
  }
}

TEST_CASE("grouped contiguous GEMM: quantized_rows keeps each row's codes and scales") {
  std::mt19937_64 rng(7);
  const QuantizedTensor q = random_operand(5, 300, Fp8Format::e4m3, "tile:1x128", rng);
  const std::vector<std::int64_t> rows = {4, 1};
  const QuantizedTensor s = quantized_rows(q, rows);
  REQUIRE(s.rows == 2);
  REQUIRE(s.scale_rows == 2);
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::int64_t c = 0; c < q.cols; ++c) {
      CHECK(s.codes[i * 300 + c] == q.codes[rows[i] * 300 + c]);
      CHECK(s.scale_of(static_cast<std::int64_t>(i), c) == q.scale_of(rows[i], c));
    }
  const QuantizedTensor t = random_operand(5, 300, Fp8Format::e4m3, "tensor", rng);
  CHECK(quantized_rows(t, rows).scales == t.scales);
  CHECK_THROWS_WITH(quantized_rows(random_operand(256, 256, Fp8Format::e4m3, "block:128x128", rng), rows),
                    Catch::Contains("one row high"));
}

TEST_CASE("grouped contiguous GEMM: the layout's refusals name the problem") {
  std::mt19937_64 rng(3);
  const QuantizedTensor a = random_operand(256, 128, Fp8Format::e4m3, "tile:1x128", rng);
  const std::vector<QuantizedTensor> experts = {random_operand(64, 128, Fp8Format::e4m3, "block:128x128", rng),
                                                random_operand(64, 128, Fp8Format::e4m3, "block:128x128", rng)};
  const GemmConfig config;
  const std::vector<std::int32_t> two = {0, 1};
  CHECK_NOTHROW(cpu::gemm_grouped_contiguous_nt(a, experts, two, config));
  CHECK_THROWS_WITH(cpu::gemm_grouped_contiguous_nt(random_operand(200, 128, Fp8Format::e4m3, "tile:1x128", rng), experts,
                                                    two, config),
                    Catch::Contains("not a multiple of 128"));
  const std::vector<std::int32_t> one = {0};
  CHECK_THROWS_WITH(cpu::gemm_grouped_contiguous_nt(a, experts, one, config), Catch::Contains("1 entries for 2 blocks"));
  const std::vector<std::int32_t> bad = {0, 2};
  CHECK_THROWS_WITH(cpu::gemm_grouped_contiguous_nt(a, experts, bad, config), Catch::Contains("names expert 2 of 2"));
  const std::vector<QuantizedTensor> mixed = {experts[0], random_operand(72, 128, Fp8Format::e4m3, "block:128x128", rng)};
  CHECK_THROWS_WITH(cpu::gemm_grouped_contiguous_nt(a, mixed, two, config), Catch::Contains("expert 1 differs"));
  CHECK_THROWS_WITH(cpu::gemm_grouped_contiguous_nt(a, std::span<const QuantizedTensor>{}, two, config),
                    Catch::Contains("no expert"));
}
