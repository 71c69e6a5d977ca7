// Exact tier for the CPU FP8 GEMM:
// 1. against the independent integer implementation of the accumulation model
//    (reference/fp8_gemm_ref): 0 mismatching bits on ragged shapes (K not a multiple of 32 or
//    128, M not of 4, N not of 8), every finite code (subnormals, extremes, mixed signs),
//    wide and positive-only data, every accumulation model, both vector and scalar paths;
// 2. against the FP64 GEMM on integer-valued operands with power-of-two scales, where both
//    arithmetics are exact (the bound on the sizes is derived below).
#include <catch2/catch.hpp>
#include <random>

#include "harness/metrics/error_metrics.hpp"
#include "kernels/cpu/gemm_fp8_nt.hpp"
#include "tests/support/gemm_operands.hpp"

using namespace fp8lab;

namespace {

struct Mismatch {
  std::size_t count = 0;
  std::uint64_t max_ulp = 0;
};

Mismatch compare(const std::vector<float>& got, const Eigen::MatrixXf& want) {
  std::vector<float> expected(got.size());
  const Eigen::Index n = want.cols();
  for (Eigen::Index i = 0; i < want.rows(); ++i)
    for (Eigen::Index j = 0; j < n; ++j) expected[static_cast<std::size_t>(i * n + j)] = want(i, j);
  const BitwiseComparison c = compare_bitwise(got, expected);
  return {c.mismatches + c.nan_mismatches, c.max_ulp};
}

void check_against_model(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config) {
  const test::RefOperand ra(a), rb(b);
  const Eigen::MatrixXf want =
      ref::fp8_gemm_model_ref(ra.view, rb.view, test::reference_model(config.accumulation),
                              config.promotion.never ? 0 : config.promotion.elements, config.output == OutputType::bf16);
  for (bool generic : {false, true})
    for (int threads : {1, 2}) {
      const std::vector<float> got = cpu::gemm_nt(a, b, config, {threads, generic, {}, {}});
      const Mismatch m = compare(got, want);
      INFO((generic ? "scalar path" : "vector path") << ", " << threads << " threads: " << m.count
                                                      << " mismatches, max ulp " << m.max_ulp);
      CHECK(m.count == 0);
    }
}

}  // namespace

TEST_CASE("cpu gemm matches the integer model reference bit for bit: random codes, every model") {
  std::mt19937_64 rng(2024);
  struct Shape { std::int64_t m, n, k; };
  const Shape shapes[] = {{5, 9, 32}, {13, 17, 100}, {8, 24, 300}, {6, 11, 640}};
  const char* models[] = {"hopper", "fp32", "bits:16,depth:16,round:rne", "bits:10,depth:64,round:rz",
                          "bits:25,depth:32,round:rz"};
  for (Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2})
    for (const Shape& s : shapes)
      for (const char* model : models)
        for (const char* promotion : {"64", "128", "never"}) {
          const AccumulationModel acc = AccumulationModel::parse(model);
          if (std::string(promotion) == "64" && acc.depth > 64) continue;  // N_C must hold whole instructions
          // "never" needs scales constant along K: per-row; otherwise DeepSeek-V3's tiles and blocks.
          const bool never = std::string(promotion) == "never";
          DYNAMIC_SECTION(format_name(format) << " " << s.m << "x" << s.n << "x" << s.k << " " << model
                                              << " N_C=" << promotion) {
            const QuantizedTensor a = test::random_code_operand(s.m, s.k, format, never ? "row" : "tile:1x128", rng, false);
            const QuantizedTensor b = test::random_code_operand(s.n, s.k, format, never ? "row" : "block:128x128", rng, false);
            GemmConfig config{acc, PromotionInterval::parse(promotion), OutputType::fp32};
            check_against_model(a, b, config);
          }
        }
}

TEST_CASE("cpu gemm matches the integer model reference: per-row, per-tensor, bf16 output, data operands") {
  std::mt19937_64 rng(7);
  const auto data = [&](std::int64_t rows, std::int64_t cols, bool positive, double spread_bits) {
    std::normal_distribution<double> normal;
    std::vector<float> x(static_cast<std::size_t>(rows * cols));
    for (float& v : x) {
      const double magnitude = std::exp2(spread_bits * normal(rng));  // wide dynamic range
      v = static_cast<float>(positive ? magnitude : (rng() & 1 ? magnitude : -magnitude));
    }
    return x;
  };
  for (Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2})
    for (bool positive : {true, false})
      for (const auto& [ga, gb] : {std::pair{"row", "row"}, {"tensor", "tensor"}, {"tile:1x128", "block:128x128"}})
        for (OutputType out : {OutputType::fp32, OutputType::bf16}) {
          DYNAMIC_SECTION(format_name(format) << (positive ? " positive" : " mixed-sign") << " A " << ga << " B " << gb
                                              << " " << output_type_name(out)) {
            const std::int64_t m = 7, n = 10, k = 520;
            const QuantizedTensor a =
                cpu::quantize(data(m, k, positive, 4.0), m, k, {format, Granularity::parse(ga), ScaleRule::fp32});
            const QuantizedTensor b =
                cpu::quantize(data(n, k, positive, 2.0), n, k, {format, Granularity::parse(gb), ScaleRule::pow2});
            check_against_model(a, b, {AccumulationModel::hopper(), PromotionInterval::parse("128"), out});
            if (std::string(ga) != "tile:1x128")  // scales constant along K: any interval, up to never
              check_against_model(a, b, {AccumulationModel::hopper(), PromotionInterval::parse("never"), out});
          }
        }
}

TEST_CASE("exact tier: integer operands with power-of-two scales equal the FP64 GEMM bit for bit") {
  // A, B integers in [-4, 4] times 2^t per tile, t in {0, 1, 2}. The pow2 rule maps a tile with
  // amax 2^t * {1..4} to codes 64, 128 or 256 times the integer: exact in E4M3, so the
  // dequantized operands equal the data. Products of codes are multiples of 2^12 below 2^17;
  // with K <= 512 every partial stays a multiple of 2^12 below 2^26 (within 14 significant
  // bits, so the 13-fraction-bit alignment and truncation drop nothing), and each promoted
  // term and acc fit 24 bits: the emulation is exact, as is the FP64 GEMM.
  std::mt19937_64 rng(11);
  const std::int64_t m = 12, n = 20, k = 512;
  const auto integers = [&](std::int64_t rows, std::int64_t cols, std::int64_t tile) {
    std::vector<float> x(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        const int t = static_cast<int>(((r / tile) * 7 + c / tile) % 3);
        x[static_cast<std::size_t>(r * cols + c)] =
            std::ldexp(static_cast<float>(static_cast<int>(rng() % 9) - 4), t);
      }
    return x;
  };
  const std::vector<float> xa = integers(m, k, 1 << 30), xb = integers(n, k, 1 << 30);
  Eigen::MatrixXd da(m, k), db(n, k);
  for (std::int64_t i = 0; i < m * k; ++i) da(i / k, i % k) = xa[static_cast<std::size_t>(i)];
  for (std::int64_t i = 0; i < n * k; ++i) db(i / k, i % k) = xb[static_cast<std::size_t>(i)];
  const Eigen::MatrixXd exact = ref::gemm_fp64(da, db);
  for (const char* model : {"hopper", "fp32"})
    for (const auto& [ga, gb] : {std::pair{"tile:1x128", "block:128x128"}, {"row", "row"}, {"tensor", "tensor"}})
      for (const char* promotion : {"128", "never"}) {
        if (std::string(ga) == "tile:1x128" && std::string(promotion) == "never") continue;
        DYNAMIC_SECTION(model << " A " << ga << " B " << gb << " N_C=" << promotion) {
          const QuantizedTensor a = cpu::quantize(xa, m, k, {Fp8Format::e4m3, Granularity::parse(ga), ScaleRule::pow2});
          const QuantizedTensor b = cpu::quantize(xb, n, k, {Fp8Format::e4m3, Granularity::parse(gb), ScaleRule::pow2});
          const std::vector<float> got = cpu::gemm_nt(
              a, b, {AccumulationModel::parse(model), PromotionInterval::parse(promotion), OutputType::fp32});
          std::size_t mismatches = 0;
          for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j)
              if (got[static_cast<std::size_t>(i * n + j)] != static_cast<float>(exact(i, j))) ++mismatches;
          CHECK(mismatches == 0);
        }
      }
}

TEST_CASE("sampled outputs equal the same entries of the full GEMM") {
  std::mt19937_64 rng(5);
  const QuantizedTensor a = test::random_code_operand(30, 300, Fp8Format::e4m3, "tile:1x128", rng, false);
  const QuantizedTensor b = test::random_code_operand(40, 300, Fp8Format::e4m3, "block:128x128", rng, false);
  const GemmConfig config{AccumulationModel::hopper(), PromotionInterval::parse("128"), OutputType::fp32};
  const std::vector<float> full = cpu::gemm_nt(a, b, config);
  const std::vector<std::int64_t> rows = {29, 3, 17}, cols = {0, 39, 8, 9, 21};
  const std::vector<float> sampled = cpu::gemm_nt(a, b, config, {0, false, rows, cols});
  REQUIRE(sampled.size() == rows.size() * cols.size());
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < cols.size(); ++j)
      CHECK(float_bits(sampled[i * cols.size() + j]) ==
            float_bits(full[static_cast<std::size_t>(rows[i] * 40 + cols[j])]));
}
