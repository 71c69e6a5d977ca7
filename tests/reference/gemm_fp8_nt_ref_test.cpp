// Exact tier for the CPU FP8 GEMM:
// 1. against the independent integer implementation of the accumulation model
//    (reference/fp8_gemm_ref): 0 mismatching bits on ragged shapes (K not a multiple of 32 or
//    128, M not of 4, N not of 8), every finite code (subnormals, extremes, mixed signs),
//    wide and positive-only data, every accumulation model and zero convention, every SIMD
//    path this CPU has (scalar, AVX2, AVX-512: the floor micro-tile where the model allows it),
//    the AVX2 micro-tile with a conversion per term, both 16-lane AVX-512 micro-tiles
//    (with a conversion per term, and the floor one) built for AVX2, and the floor micro-tile in
//    FP64 lanes (gemm_fp8_nt_floor_fp64_ref_test.cpp checks it in depth),
//    for both single formats and both mixes (E4M3 x E5M2 and E5M2 x E4M3, as Transformer
//    Engine's HYBRID backward runs them);
// 2. against the FP64 GEMM on integer-valued operands with power-of-two scales, where both
//    arithmetics are exact (the bound on the sizes is derived below).
#include <catch2/catch.hpp>
#include <limits>
#include <random>
#include <vector>

#include "harness/metrics/error_metrics.hpp"
#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/gemm_fp8_nt.hpp"
#include "kernels/cpu/quantize.hpp"
#include "tests/support/gemm_operands.hpp"

using namespace fp8lab;

namespace {

using test::FormatPair;
using test::kFormatPairs;

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
  // Every micro-tile path this CPU can run (scalar, AVX2, AVX-512), at 1 and 2 threads.
  for (int isa = 0; isa <= static_cast<int>(cpu::detected_cpu_isa()); ++isa) {
    cpu::set_cpu_isa(static_cast<cpu::CpuIsa>(isa));
    for (int threads : {1, 2}) {
      const std::vector<float> got = cpu::gemm_nt(a, b, config, {threads, false, {}, {}});
      const Mismatch m = compare(got, want);
      INFO(cpu::cpu_isa_name(static_cast<cpu::CpuIsa>(isa)) << " path, " << threads << " threads: " << m.count
                                                              << " mismatches, max ulp " << m.max_ulp);
      CHECK(m.count == 0);
    }
  }
  cpu::set_cpu_isa(cpu::detected_cpu_isa());
  if (cpu::detected_cpu_isa() >= cpu::CpuIsa::avx2) {
    // The 16-lane micro-tiles of AVX-512 CPUs, built for AVX2, so every machine checks them.
    cpu::GemmOptions wide;
    wide.force_wide_tiles = true;
    Mismatch m = compare(cpu::gemm_nt(a, b, config, wide), want);
    INFO("16-lane (AVX-512 layout) path built for AVX2: " << m.count << " mismatches, max ulp " << m.max_ulp);
    CHECK(m.count == 0);
    // The 16-lane floor micro-tile of AVX-512 CPUs, built for AVX2 (for the models the floor
    // micro-tile holds; others run the paths above again).
    cpu::GemmOptions wide_floor;
    wide_floor.force_wide_floor_tiles = true;
    m = compare(cpu::gemm_nt(a, b, config, wide_floor), want);
    INFO("16-lane floor path built for AVX2: " << m.count << " mismatches, max ulp " << m.max_ulp);
    CHECK(m.count == 0);
    // The AVX2 tiles with a conversion per term, which the floor micro-tile replaces for
    // truncating models (the paths above ran the floor micro-tile where it holds).
    cpu::GemmOptions convert;
    convert.force_convert_tiles = true;
    m = compare(cpu::gemm_nt(a, b, config, convert), want);
    INFO("AVX2 conversion path: " << m.count << " mismatches, max ulp " << m.max_ulp);
    CHECK(m.count == 0);
    // The floor micro-tile in FP64 lanes (for every truncating fused model it holds; the default
    // selection runs it only past the FP32 micro-tiles' ranges).
    cpu::GemmOptions fp64_floor;
    fp64_floor.force_fp64_floor_tiles = true;
    m = compare(cpu::gemm_nt(a, b, config, fp64_floor), want);
    INFO("FP64 floor path: " << m.count << " mismatches, max ulp " << m.max_ulp);
    CHECK(m.count == 0);
  }
}

}  // namespace

TEST_CASE("cpu gemm matches the integer model reference bit for bit: random codes, every model") {
  std::mt19937_64 rng(2024);
  struct Shape { std::int64_t m, n, k; };
  // n = 41 and 72 reach the floor micro-tile's full groups of 4 panels, groups past the first and
  // a last group of 2 and 1 panels.
  const Shape shapes[] = {{5, 9, 32}, {13, 17, 100}, {8, 24, 300}, {6, 11, 640}, {6, 41, 300}, {5, 72, 100}};
  const char* models[] = {"hopper", "hopper,zero:min", "fp32", "bits:16,depth:16,round:rne,zero:min",
                          "bits:10,depth:64,round:rz", "bits:25,depth:32,round:rz"};
  for (const FormatPair& formats : kFormatPairs)
    for (const Shape& s : shapes)
      for (const char* model : models)
        for (const char* promotion : {"64", "128", "never"}) {
          const AccumulationModel acc = AccumulationModel::parse(model);
          if (std::string(promotion) == "64" && acc.depth > 64) continue;  // N_C must hold whole instructions
          // "never" needs scales constant along K: per-row; otherwise DeepSeek-V3's tiles and blocks.
          const bool never = std::string(promotion) == "never";
          DYNAMIC_SECTION(format_name(formats.a) << " x " << format_name(formats.b) << " " << s.m << "x" << s.n << "x"
                                                 << s.k << " " << model << " N_C=" << promotion) {
            const QuantizedTensor a =
                test::random_code_operand(s.m, s.k, formats.a, never ? "row" : "tile:1x128", rng, false);
            const QuantizedTensor b =
                test::random_code_operand(s.n, s.k, formats.b, never ? "row" : "block:128x128", rng, false);
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
  for (const FormatPair& formats : kFormatPairs)
    for (bool positive : {true, false})
      for (const auto& [ga, gb] : {std::pair{"row", "row"}, {"tensor", "tensor"}, {"tile:1x128", "block:128x128"}})
        for (OutputType out : {OutputType::fp32, OutputType::bf16}) {
          DYNAMIC_SECTION(format_name(formats.a) << " x " << format_name(formats.b)
                                                 << (positive ? " positive" : " mixed-sign") << " A " << ga << " B "
                                                 << gb << " " << output_type_name(out)) {
            const std::int64_t m = 7, n = 10, k = 520;
            const QuantizedTensor a =
                cpu::quantize(data(m, k, positive, 4.0), m, k, {formats.a, Granularity::parse(ga), ScaleRule::fp32});
            const QuantizedTensor b =
                cpu::quantize(data(n, k, positive, 2.0), n, k, {formats.b, Granularity::parse(gb), ScaleRule::pow2});
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

// gemm_nt_into writes every element of the caller's buffer (pre-filled with NaN, which a missed
// write would leave) with gemm_nt's bits, whole and sampled, for the floor micro-tile (hopper),
// the conversion tiles (fp32 model) and the block-scaled path; a buffer of the wrong size is
// refused, naming both sizes.
TEST_CASE("gemm_nt_into writes gemm_nt's bits into every element of the caller's buffer") {
  std::mt19937_64 rng(6);
  const QuantizedTensor a = test::random_code_operand(30, 300, Fp8Format::e4m3, "tile:1x128", rng, false);
  const QuantizedTensor b = test::random_code_operand(41, 300, Fp8Format::e4m3, "block:128x128", rng, false);
  // The block-scaled MMA takes UE8M0 scales: MXFP8 operands of the same shapes.
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> xa(30 * 300), xb(41 * 300);
  for (float& v : xa) v = normal(rng);
  for (float& v : xb) v = normal(rng);
  const QuantizeConfig mx{Fp8Format::e4m3, Granularity::tile(32), ScaleRule::mx_rceil};
  const QuantizedTensor mxa = cpu::quantize(xa, 30, 300, mx), mxb = cpu::quantize(xb, 41, 300, mx);
  struct Case {
    const char* model;
    const char* interval;
    const QuantizedTensor& a;
    const QuantizedTensor& b;
  };
  for (const Case& c : {Case{"hopper", "128", a, b}, Case{"fp32", "128", a, b}, Case{"b200", "never", mxa, mxb}}) {
    INFO(c.model);
    const GemmConfig config{AccumulationModel::parse(c.model), PromotionInterval::parse(c.interval), OutputType::fp32};
    const std::vector<std::int64_t> rows = {29, 3, 17}, cols = {0, 40, 8, 9, 21};
    for (const cpu::GemmOptions& options : {cpu::GemmOptions{}, cpu::GemmOptions{0, false, rows, cols}}) {
      const std::vector<float> want = cpu::gemm_nt(c.a, c.b, config, options);
      std::vector<float> got(want.size(), std::numeric_limits<float>::quiet_NaN());
      cpu::gemm_nt_into(c.a, c.b, config, got, options);
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < want.size(); ++i) mismatches += float_bits(got[i]) != float_bits(want[i]);
      CHECK(mismatches == 0);
    }
    std::vector<float> short_buffer(30 * 41 - 1);
    CHECK_THROWS_WITH(cpu::gemm_nt_into(c.a, c.b, config, short_buffer), Catch::Contains("holds 1229 values, the GEMM gives 30 x 41"));
  }
}

namespace {

// One output C[0, 0] of the per-tensor-scaled GEMM of two rows, under `model`, promotion never,
// from the kernel (every SIMD path agreeing, checked by check_against_model) and the reference.
float single_output(const std::vector<float>& row_a, const std::vector<float>& row_b, Fp8Format format,
                    const char* model) {
  const auto k = static_cast<std::int64_t>(row_a.size());
  const QuantizeConfig per_tensor{format, Granularity::parse("tensor"), ScaleRule::fp32};
  const QuantizedTensor a = cpu::quantize(row_a, 1, k, per_tensor), b = cpu::quantize(row_b, 1, k, per_tensor);
  REQUIRE(a.scales[0] == 1.0f);  // amax = the format's max: the codes are the values themselves
  REQUIRE(b.scales[0] == 1.0f);
  const GemmConfig config{AccumulationModel::parse(model), PromotionInterval::parse("never"), OutputType::fp32};
  check_against_model(a, b, config);
  return cpu::gemm_nt(a, b, config)[0];
}

}  // namespace

TEST_CASE("zero exponent convention: the minimal E4M3 case (DESIGN.md section 2)") {
  // A = [0, 0.140625, 448], B = [448, 0.140625, 0]. 0.140625 = 1.125 * 2^-3, so the one nonzero
  // product is 1.265625 * 2^-6 (unnormalized significand 1.265625, exponent -6).
  // zero:none: 0 x 448 has exponent -126 + 8 = -118, so E = -6 and the product keeps all its
  //   bits: 1.265625 * 2^13 = 10368 units of 2^-19, the exact 0.019775390625 = 0x3ca20000.
  // zero:min: 0 x 448 has exponent -6 + 8 = 2, so E = 2 and the product is truncated to units
  //   of 2^(2-13): trunc(1.265625 * 2^5) = trunc(40.5) = 40, 40 * 2^-11 = 0.01953125 = 0x3ca00000.
  const std::vector<float> a = {0.0f, 0.140625f, 448.0f}, b = {448.0f, 0.140625f, 0.0f};
  CHECK(float_bits(single_output(a, b, Fp8Format::e4m3, "hopper")) == 0x3ca20000u);
  CHECK(float_bits(single_output(a, b, Fp8Format::e4m3, "hopper,zero:none")) == 0x3ca20000u);
  CHECK(float_bits(single_output(a, b, Fp8Format::e4m3, "hopper,zero:min")) == 0x3ca00000u);
}

TEST_CASE("zero exponent convention: an E5M2 zero x max in a second instruction truncates the accumulator") {
  // K = 34: instruction 1 (k < 32) holds 1.25 x 1.25 = 1.5625 (exponent 0) and 2^-7 x 2^-6 =
  // 2^-13, so E = 0 and S = 1.5625 * 2^13 + 1 = 12801: p = 1.5625 + 2^-13, exact in 13 bits.
  // Instruction 2 holds only 0 x 57344 (k = 32) and 57344 x 0 (k = 33); 57344 = 1.75 * 2^15
  // makes both per-tensor scales exactly 1.
  // zero:none: those products have exponent -126 + 15 = -111 < 0 = exponent(p): E = 0 and p
  //   passes unchanged, 1.5625 + 2^-13.
  // zero:min: their exponent is -14 + 15 = 1, E = 1, p in units of 2^-12 is 6400.5, truncated
  //   to 6400: the result is 1.5625, the accumulator's last bit lost.
  std::vector<float> a(34, 0.0f), b(34, 0.0f);
  a[0] = b[0] = 1.25f;
  a[1] = 0.0078125f;  // 2^-7
  b[1] = 0.015625f;   // 2^-6
  b[32] = 57344.0f;
  a[33] = 57344.0f;
  CHECK(single_output(a, b, Fp8Format::e5m2, "hopper") == 1.5625f + 0.0001220703125f);
  CHECK(single_output(a, b, Fp8Format::e5m2, "hopper,zero:min") == 1.5625f);
}

TEST_CASE("zero exponent convention: random zero-times-large operands, kernel and reference agree under both") {
  // Each k is one of three kinds, shared by all rows: A large and B zero, A zero and B large,
  // or both small. Every output then meets zero x large next to small x
  // small products, which zero:min lets the zero raise E over. Both conventions must match
  // the reference bit for bit, and they must differ from each other somewhere (else this case
  // could not tell them apart). A and B run in each format pairing, mixes included.
  std::mt19937_64 rng(99);
  const std::int64_t k = 4096;
  std::vector<int> kind(static_cast<std::size_t>(k));
  for (int& v : kind) v = static_cast<int>(rng() % 3);
  // Large: each format's largest finite exponent field (E4M3 15: 2^8, E5M2 30: 2^15); small:
  // field 2 (E4M3, 2^-5) or 8 (E5M2, 2^-7). Under zero:min, zero x large has exponent
  // emin(zero's format) + e(large): E4M3 x E4M3 -6 + 8 = 2, E5M2 x E5M2 -14 + 15 = 1, the
  // mixes -6 + 15 = 9 (E4M3 zero, E5M2 large) and -14 + 8 = -6 (E5M2 zero, E4M3 large); each
  // instruction of 32 holds both zero x large kinds with near certainty, so E >= 2, 1 or 9.
  // Small x small has exponent -10, -14 or -12 (mixes): 12, 15 or 21 binades below, more than
  // the 13 - (Ma + Mb) bits (7 to 9) that hold a product exactly, so zero:min truncates them.
  const auto mantissa_bits = [](Fp8Format f) { return f == Fp8Format::e4m3 ? 3 : 2; };
  const auto code = [&](Fp8Format format, bool large) {
    const int field = format == Fp8Format::e4m3 ? (large ? 15 : 2) : (large ? 30 : 8);
    const auto sign = static_cast<std::uint32_t>(rng() & 1) << 7;
    const auto mantissa = static_cast<std::uint32_t>(rng() % (format == Fp8Format::e4m3 ? 7 : 4));  // never E4M3's NaN
    return static_cast<std::uint8_t>(sign | static_cast<std::uint32_t>(field) << mantissa_bits(format) | mantissa);
  };
  const auto operand = [&](std::int64_t rows, Fp8Format format, const char* granularity, int large_kind) {
    QuantizedTensor q = test::random_code_operand(rows, k, format, granularity, rng, false);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < k; ++c) {
        const int t = kind[static_cast<std::size_t>(c)];
        q.codes[static_cast<std::size_t>(r * k + c)] = t == 2 ? code(format, false) : t == large_kind ? code(format, true) : 0;
      }
    return q;
  };
  for (const FormatPair& formats : kFormatPairs)
    for (const char* promotion : {"128", "never"}) {
      DYNAMIC_SECTION(format_name(formats.a) << " x " << format_name(formats.b) << " N_C=" << promotion) {
        const bool never = std::string(promotion) == "never";
        const QuantizedTensor a = operand(9, formats.a, never ? "row" : "tile:1x128", 0);
        const QuantizedTensor b = operand(17, formats.b, never ? "row" : "block:128x128", 1);
        std::vector<float> outputs[2];
        int i = 0;
        for (const char* model : {"hopper,zero:none", "hopper,zero:min"}) {
          const GemmConfig config{AccumulationModel::parse(model), PromotionInterval::parse(promotion), OutputType::fp32};
          check_against_model(a, b, config);
          outputs[i++] = cpu::gemm_nt(a, b, config);
        }
        const BitwiseComparison differ = compare_bitwise(outputs[0], outputs[1]);
        INFO(differ.mismatches << " of " << differ.count << " outputs differ between the conventions");
        CHECK(differ.mismatches > 0);
      }
    }
}
