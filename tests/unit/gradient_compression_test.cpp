// Gradient compression (harness/train/gradient_compression.hpp): top-k's count, ties and bits
// against the FP64 reference (reference/gradient_compression_ref), the compression ratio of each
// kind, the residuals' bytes, read and restore, non-finite gradients, and the errors bad
// configurations get. The quantizer's exact and statistical tiers:
// gradient_compression_quantize_test.cpp; error feedback: gradient_compression_error_feedback_test.cpp.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "harness/train/gradient_compression.hpp"
#include "reference/gradient_compression_ref.hpp"
#include "tests/support/gradient_compression_cases.hpp"

using namespace fp8lab;
using namespace fp8lab::train;
using Catch::Matchers::StartsWith;

using test::normal_tensor;
using test::quantize_config;
using test::same_bits;
using test::topk_config;
using test::widen;

TEST_CASE("topk: k = max(1, ceil(ratio n)) with decimal ratios, ties to the lower index, module = reference, bits") {
  CHECK(topk_count(100, 0.07) == 7);  // 0.07 * 100 is 7.000000000000001 in double
  CHECK(topk_count(100, 0.14) == 14);  // 14.000000000000002
  CHECK(topk_count(30, 0.1) == 3);
  CHECK(topk_count(1000, 0.01) == 10);
  CHECK(topk_count(10, 0.01) == 1);  // at least one
  CHECK(topk_count(7, 1.0) == 7);
  CHECK(topk_count(3, 0.5) == 2);    // ceil(1.5)
  CHECK(topk_count(100, 0.333) == 34);
  CHECK(topk_count(3, 1.0 / 3.0) == 1);
  CHECK(topk_count(1001, 0.001) == 2);  // ceil(1.001)
  CHECK(topk_count(0, 0.5) == 0);

  const std::vector<float> x = {1.0f, -3.0f, 3.0f, 2.0f, -3.0f, 0.0f, -0.0f};
  CHECK(select_topk(x, 2).indices == std::vector<std::uint32_t>{1, 2});
  CHECK(select_topk(x, 3).indices == std::vector<std::uint32_t>{1, 2, 4});
  CHECK(select_topk(x, 3).values == std::vector<float>{-3.0f, 3.0f, -3.0f});
  CHECK(select_topk(x, 6).indices == std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5});  // 0 before -0
  std::vector<float> y(x.size());
  compress_decompress(topk_config(0.5), x, 0, y);  // k = ceil(3.5) = 4
  CHECK(y == std::vector<float>{0.0f, -3.0f, 3.0f, 2.0f, -3.0f, 0.0f, 0.0f});

  // Many ties (integers -8..8) on 1000 elements, several k: module and reference keep the same set.
  std::mt19937_64 rng(12);
  std::vector<float> ties(1000);
  for (float& v : ties) v = static_cast<float>(static_cast<int>(rng() % 17) - 8);
  for (const std::int64_t k : {1, 7, 100, 333, 999, 1000}) {
    const TopKSelection module = select_topk(ties, k);
    const ref::TopKRef reference = ref::topk_ref(widen(ties), k);
    INFO("k = " << k);
    CHECK(module.indices.size() == static_cast<std::size_t>(k));
    CHECK(std::vector<std::int64_t>(module.indices.begin(), module.indices.end()) == reference.indices);
    std::vector<float> dense(ties.size());
    scatter_topk(module, dense);
    CHECK(widen(dense) == reference.values);
  }

  // Bits: k (32 + 32) per tensor, summed over a step's tensors.
  WorkerCompressor compressor(topk_config(0.01), 0);
  CHECK(compressor.compress(0, normal_tensor(1000, 1), 0).bits_sent == 64u * 10);
  compressor.compress(1, normal_tensor(30, 2), 0);
  compressor.compress(2, normal_tensor(5, 3), 0);
  CHECK(compressor.step_bits() == 64u * (10 + 1 + 1));
  CHECK(compressor.step_elements() == 1035u);
  CHECK(compressor.step_compression_ratio() == Approx(64.0 * 12 / (32.0 * 1035)).epsilon(1e-15));
}

TEST_CASE("compression ratio: 8-bit per tensor (8n + 32) / 32n, per block 128, 4-bit, topk 2k / n, none 1, "
          "step counts restart with each step and totals do not") {
  const std::int64_t n = 1000;
  CHECK(compressed_bits(quantize_config(8, 0, RoundingMode::nearest), n) == 8u * 1000 + 32);
  CHECK(compression_ratio(quantize_config(8, 0, RoundingMode::nearest), n) == (8.0 * 1000 + 32) / (32.0 * 1000));
  CHECK(compressed_bits(quantize_config(8, 128, RoundingMode::nearest), n) == 8u * 1000 + 32 * 8);  // 7 full + 1 of 104
  CHECK(compressed_bits(quantize_config(4, 100, RoundingMode::stochastic), n) == 4u * 1000 + 32 * 10);
  CHECK(compressed_bits(quantize_config(16, 0, RoundingMode::nearest), 1) == 16u + 32);
  CHECK(compressed_bits(topk_config(0.01), n) == 64u * 10);
  CHECK(compression_ratio(topk_config(0.01), n) == 0.02);
  CHECK(compression_ratio(topk_config(1.0), n) == 2.0);  // values and indices: twice the tensor
  CHECK(compression_ratio(CompressionConfig{}, n) == 1.0);
  CHECK(compressed_bits(quantize_config(8, 0, RoundingMode::nearest), 0) == 0u);
  CHECK(compression_ratio(0, 0) == 1.0);

  WorkerCompressor compressor(quantize_config(8, 0, RoundingMode::nearest), 0);
  compressor.compress(0, normal_tensor(1000, 4), 0);
  compressor.compress(1, normal_tensor(24, 5), 0);
  CHECK(compressor.step_bits() == 8u * 1024 + 64);
  CHECK(compressor.step_compression_ratio() == (8.0 * 1024 + 64) / (32.0 * 1024));
  compressor.compress(1, normal_tensor(24, 6), 1);
  CHECK(compressor.step_bits() == 8u * 24 + 32);
  CHECK(compressor.step_elements() == 24u);
  CHECK(compressor.total_bits() == 8u * 1048 + 96);
  CHECK(compressor.total_elements() == 1048u);
}

TEST_CASE("residuals: bytes, read and restore (a checkpoint round trip gives the same bits), none without feedback") {
  const std::vector<std::size_t> sizes = {300, 17};
  CompressionConfig config = quantize_config(5, 16, RoundingMode::stochastic, 3);
  WorkerCompressor a(config, 2);
  CHECK(a.residual_bytes() == 0u);  // no tensor seen yet
  CHECK(a.residual(0).empty());
  for (std::int64_t step = 0; step < 5; ++step)
    for (std::size_t t = 0; t < sizes.size(); ++t) a.compress(t, normal_tensor(sizes[t], 10 * step + t), step);
  CHECK(a.residual_bytes() == 4u * (300 + 17));
  CHECK(a.residual(1).size() == 17u);
  CHECK(a.tensor_count() == 2u);
  const std::vector<float> saved0(a.residual(0).begin(), a.residual(0).end());
  const std::vector<float> saved1(a.residual(1).begin(), a.residual(1).end());
  CHECK(std::any_of(saved0.begin(), saved0.end(), [](float v) { return v != 0.0f; }));

  WorkerCompressor b(config, 2);
  b.restore_residual(1, saved1);  // any order; an unseen tensor takes the restored size
  b.restore_residual(0, saved0);
  CHECK(b.residual_bytes() == a.residual_bytes());
  std::size_t differing = 0;
  for (std::int64_t step = 5; step < 9; ++step)
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      const std::vector<float> g = normal_tensor(sizes[t], 10 * step + t);
      const std::vector<float> ya = a.compress(t, g, step).values, yb = b.compress(t, g, step).values;
      for (std::size_t i = 0; i < g.size(); ++i) differing += !same_bits(ya[i], yb[i]);
    }
  CHECK(differing == 0);
  CHECK_THROWS_WITH(b.restore_residual(0, saved1), StartsWith("WorkerCompressor: residual of tensor 0"));

  // Without error feedback (or with none) there is no residual; y is C of the gradient alone.
  config.error_feedback = false;
  WorkerCompressor plain(config, 2);
  const std::vector<float> g = normal_tensor(300, 1);
  std::vector<float> direct(300);
  compress_decompress(config, g, compression_stream(config.seed, 4, 2, 0), direct);
  plain.compress(0, g, 3);
  const std::vector<float> y = plain.compress(0, g, 4).values;
  CHECK(plain.residual_bytes() == 0u);
  CHECK(plain.residual(0).empty());
  CHECK_THROWS_WITH(plain.restore_residual(0, saved0), StartsWith("WorkerCompressor: no residuals"));
  std::size_t off = 0;
  for (std::size_t i = 0; i < y.size(); ++i) off += !same_bits(y[i], direct[i]);
  CHECK(off == 0);
  CompressionConfig none;
  none.error_feedback = true;
  WorkerCompressor uncompressed(none, 0);
  const CompressedTensor same = uncompressed.compress(0, g, 0);
  CHECK(uncompressed.residual_bytes() == 0u);
  off = 0;
  for (std::size_t i = 0; i < g.size(); ++i) off += !same_bits(same.values[i], g[i]);
  CHECK(off == 0);
  CHECK(same.bits_sent == 32u * 300);
}

TEST_CASE("non-finite gradients (an overflowed step) pass through unchanged and leave the residual as it was") {
  WorkerCompressor compressor(quantize_config(8, 0, RoundingMode::nearest), 0);
  compressor.compress(0, std::vector<float>{1.0f, 0.3f, -0.2f, 0.01f}, 0);
  const std::vector<float> kept(compressor.residual(0).begin(), compressor.residual(0).end());
  const CompressedTensor sent = compressor.compress(0, std::vector<float>{INFINITY, 0.5f, NAN, 1.0f}, 1);
  const std::vector<float>& y = sent.values;
  CHECK(sent.bits_sent == 8u * 4 + 32);
  CHECK(std::isinf(y[0]));
  CHECK(std::isnan(y[2]));
  CHECK(y[1] == 0.5f + kept[1]);
  CHECK(std::vector<float>(compressor.residual(0).begin(), compressor.residual(0).end()) == kept);
  CHECK_THROWS_WITH(quantize_groups(y, 8, 0, RoundingMode::nearest, 0), StartsWith("quantize_groups: the input has a non-finite"));
  CHECK_THROWS_WITH(select_topk(y, 1), StartsWith("select_topk: the input has a non-finite"));
}

TEST_CASE("bad configurations are refused with the spec's field name first") {
  CHECK(parse_compression_kind("topk") == CompressionKind::topk);
  CHECK(std::string(compression_kind_name(parse_compression_kind("quantize"))) == "quantize");
  CHECK(std::string(compression_kind_name(parse_compression_kind("none"))) == "none");
  CHECK(parse_compression_rounding("stochastic") == RoundingMode::stochastic);
  CHECK_THROWS_WITH(parse_compression_kind("zip"), StartsWith("compression: 'zip'"));
  CHECK_THROWS_WITH(parse_compression_rounding("up"), StartsWith("compression_rounding: 'up'"));

  for (const int bits : {3, 17, 0, -8}) {
    INFO("bits " << bits);
    CHECK_THROWS_WITH(quantize_config(bits, 0, RoundingMode::nearest).validate(), StartsWith("compression_bits: must be in 4..16"));
  }
  for (const int bits : {4, 16}) CHECK_NOTHROW(quantize_config(bits, 0, RoundingMode::nearest).validate());
  CHECK_THROWS_WITH(quantize_config(8, -1, RoundingMode::nearest).validate(), StartsWith("compression_block: "));
  for (const double ratio : {0.0, -0.1, 1.5, std::nan(""), static_cast<double>(INFINITY)}) {
    INFO("topk_ratio " << ratio);
    CHECK_THROWS_WITH(topk_config(ratio).validate(), StartsWith("topk_ratio: must be in (0, 1]"));
  }
  CHECK_NOTHROW(topk_config(1.0).validate());
  // Fields the kind does not read are not checked (as LrSchedule's).
  CompressionConfig none;
  none.bits = 2;
  none.topk_ratio = 0.0;
  CHECK_NOTHROW(none.validate());

  CHECK_THROWS_WITH(WorkerCompressor(topk_config(2.0), 0), StartsWith("topk_ratio: "));
  CHECK_THROWS_WITH(WorkerCompressor(quantize_config(20, 0, RoundingMode::nearest), 0), StartsWith("compression_bits: "));
  // A tensor keeps the size of its first call.
  WorkerCompressor compressor(topk_config(0.5), 0);
  compressor.compress(0, std::vector<float>(4), 0);
  CHECK_THROWS_WITH(compressor.compress(0, std::vector<float>(5), 1), StartsWith("WorkerCompressor: tensor 0 has 4 elements"));
  std::vector<float> out(3);
  CHECK_THROWS_AS(compressor.compress_into(1, std::vector<float>(4), 1, out), std::invalid_argument);
}
