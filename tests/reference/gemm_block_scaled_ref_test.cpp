// Blackwell's block-scaled MMA (`--accum b200`): the CPU emulation (kernels/cpu/gemm_block_scaled)
// against the integer reference (reference/block_scaled_mma_ref), bit for bit, on operands the
// quantizer makes under every scheme the MMA takes and on hand-made ones at the corners
// (extreme UE8M0 scales, overflow, E4M3 subnormal scales); two cases derived by hand pin the
// model's truncation itself; and the refusals of plan_gemm.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/block_scaled_mma.hpp"
#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/gemm_fp8_nt.hpp"
#include "kernels/cpu/quantize.hpp"
#include "reference/block_scaled_mma_ref.hpp"

namespace fp8lab {
namespace {

const ref::FormatDefinition& ref_format(ElementFormat f) {
  switch (f.kind()) {
    case ElementFormat::Kind::e4m3: return ref::e4m3();
    case ElementFormat::Kind::e5m2: return ref::e5m2();
    case ElementFormat::Kind::e2m1: return ref::e2m1();
    case ElementFormat::Kind::e3m2: return ref::e3m2();
    case ElementFormat::Kind::e2m3: return ref::e2m3();
  }
  return ref::e4m3();
}

// The reference's view of a quantized operand (it keeps the matrices it points to).
struct RefView {
  ref::CodeMatrix codes;
  Eigen::MatrixXd scales;
  ref::BlockScaledOperandRef view;
  explicit RefView(const QuantizedTensor& q) : codes(q.rows, q.cols), scales(q.scale_rows, q.scale_cols) {
    for (std::int64_t r = 0; r < q.rows; ++r)
      for (std::int64_t c = 0; c < q.cols; ++c) codes(r, c) = q.codes[static_cast<std::size_t>(r * q.cols + c)];
    for (std::int64_t r = 0; r < q.scale_rows; ++r)
      for (std::int64_t c = 0; c < q.scale_cols; ++c) scales(r, c) = q.scales[static_cast<std::size_t>(r * q.scale_cols + c)];
    view = {&codes, &scales, q.tile_rows, q.tile_cols, &ref_format(q.config.format),
            scale_rule_math(q.config.scale_rule).two_level};
  }
};

const GemmConfig kB200{AccumulationModel::b200(), PromotionInterval::parse("never"), OutputType::fp32};

std::vector<float> reference_out(const QuantizedTensor& a, const QuantizedTensor& b, OutputType output) {
  const RefView ra(a), rb(b);
  const auto kind = block_scaled_mma_for(a, b).kind == BlockScaledKind::mxf8f6f4 ? ref::BlockScaledInstructionRef::mxf8f6f4
                                                                                  : ref::BlockScaledInstructionRef::mxf4nvf4;
  const Eigen::MatrixXf m = ref::block_scaled_mma_ref(ra.view, rb.view, kind, block_scaled_alpha(a, b), output == OutputType::bf16);
  std::vector<float> out(static_cast<std::size_t>(m.size()));
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) out[static_cast<std::size_t>(i * m.cols() + j)] = m(i, j);
  return out;
}

// gemm_nt on every instruction-step path this CPU can run: the scalar steps and, on AVX2 CPUs,
// the AVX2 ones (gemm_block_scaled_avx2.cpp), each of which must give want's bits.
template <class Check>
void on_every_isa(Check check) {
  for (int isa = 0; isa <= static_cast<int>(cpu::detected_cpu_isa()); ++isa) {
    cpu::set_cpu_isa(static_cast<cpu::CpuIsa>(isa));
    INFO(cpu::cpu_isa_name(static_cast<cpu::CpuIsa>(isa)) << " instruction steps");
    check();
  }
  cpu::set_cpu_isa(cpu::detected_cpu_isa());
}

std::size_t bit_mismatches(const std::vector<float>& x, const std::vector<float>& y) {
  REQUIRE(x.size() == y.size());
  std::size_t n = 0;
  for (std::size_t i = 0; i < x.size(); ++i) n += std::bit_cast<std::uint32_t>(x[i]) != std::bit_cast<std::uint32_t>(y[i]);
  return n;
}

// Inputs with structure the MMA's alignment sees: Gaussian, a few outlier columns (x 2^12),
// magnitudes over 2^-30..2^30 (per-block scales put most of a block in subnormals), and pairs
// that cancel next to small values.
std::vector<float> input(std::int64_t rows, std::int64_t cols, int kind, std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> log_magnitude(-30.0f, 30.0f);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      float v = normal(rng);
      if (kind == 1 && c % 37 == 5) v *= 4096.0f;
      if (kind == 2) v = std::copysign(std::exp2(log_magnitude(rng)), v);
      if (kind == 3) v = (c % 2 == 0 ? 1000.0f : -1000.0f) + (c % 5 == 0 ? v * 1e-3f : 0.0f);
      x[static_cast<std::size_t>(r * cols + c)] = v;
    }
  return x;
}

struct SchemeCase {
  const char* name;
  ElementFormat format;
  const char* a_granularity;
  const char* b_granularity;
  ScaleRule rule;
};

const SchemeCase kSchemes[] = {
    {"mxfp8 rceil", Fp8Format::e4m3, "tile:1x32", "tile:1x32", ScaleRule::mx_rceil},
    {"mxfp8 floor e5m2", Fp8Format::e5m2, "tile:1x32", "tile:1x32", ScaleRule::mx},
    {"mxfp6 e3m2", ElementFormat::Kind::e3m2, "tile:1x32", "tile:1x32", ScaleRule::mx_even},
    {"mxfp6 e2m3", ElementFormat::Kind::e2m3, "tile:1x32", "tile:1x32", ScaleRule::mx_ceil},
    {"deepseek pow2 on b200", Fp8Format::e4m3, "tile:1x128", "block:128x128", ScaleRule::pow2},
    {"te-pow2 rows", Fp8Format::e4m3, "row", "block:32x32", ScaleRule::te_pow2},
    {"mxfp4", ElementFormat::Kind::e2m1, "tile:1x32", "tile:1x32", ScaleRule::mx},
    {"nvfp4", ElementFormat::Kind::e2m1, "tile:1x16", "block:16x16", ScaleRule::nvfp4},
    {"nvfp4 torchao", ElementFormat::Kind::e2m1, "tile:1x16", "tile:1x16", ScaleRule::nvfp4_torchao},
    {"nvfp4 4over6", ElementFormat::Kind::e2m1, "tile:1x16", "block:16x16", ScaleRule::nvfp4_4over6},
};

TEST_CASE("b200 block-scaled GEMM: emulation equals the integer reference on quantized operands") {
  std::mt19937_64 rng(20261125);
  for (const SchemeCase& s : kSchemes)
    for (const std::int64_t k : {64, 200, 448})
      for (int kind = 0; kind < 4; ++kind) {
        const std::int64_t m = 5, n = 7;
        const std::vector<float> xa = input(m, k, kind, rng), xb = input(n, k, kind, rng);
        const QuantizedTensor a = cpu::quantize(xa, m, k, {s.format, Granularity::parse(s.a_granularity), s.rule});
        const QuantizedTensor b = cpu::quantize(xb, n, k, {s.format, Granularity::parse(s.b_granularity), s.rule});
        for (const OutputType output : {OutputType::fp32, OutputType::bf16}) {
          const GemmConfig config{kB200.accumulation, kB200.promotion, output};
          INFO(s.name << ", K = " << k << ", input kind " << kind << ", " << output_type_name(output));
          const std::vector<float> want = reference_out(a, b, output);
          on_every_isa([&] { CHECK(bit_mismatches(cpu::gemm_nt(a, b, config), want) == 0); });
        }
      }
}

TEST_CASE("b200 block-scaled GEMM: thread count and output sampling do not change a bit") {
  std::mt19937_64 rng(7);
  const std::int64_t m = 19, n = 23, k = 256;
  const QuantizedTensor a = cpu::quantize(input(m, k, 1, rng), m, k, {Fp8Format::e4m3, Granularity::tile(32), ScaleRule::mx_rceil});
  const QuantizedTensor b = cpu::quantize(input(n, k, 0, rng), n, k, {Fp8Format::e4m3, Granularity::tile(32), ScaleRule::mx_rceil});
  const std::vector<float> one = cpu::gemm_nt(a, b, kB200, {1, false, {}, {}});
  CHECK(bit_mismatches(one, cpu::gemm_nt(a, b, kB200, {2, false, {}, {}})) == 0);
  const std::vector<std::int64_t> rows{17, 3, 8}, cols{0, 22, 5, 9};
  const std::vector<float> sampled = cpu::gemm_nt(a, b, kB200, {0, false, rows, cols});
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < cols.size(); ++j)
      CHECK(std::bit_cast<std::uint32_t>(sampled[i * cols.size() + j]) ==
            std::bit_cast<std::uint32_t>(one[static_cast<std::size_t>(rows[i] * n + cols[j])]));
}

// Hand-made operands: every code random (subnormals, zeros, extremes), UE8M0 scales over the
// whole range 2^-127..2^127 (products far below the zero exponent -133, sums that overflow),
// or E4M3 block scales including subnormal ones and 0.
TEST_CASE("b200 block-scaled GEMM: emulation equals the reference at the corners of the scale range") {
  std::mt19937_64 rng(99);
  for (const bool fp4 : {false, true})
    for (int trial = 0; trial < 6; ++trial) {
      const ElementFormat format = fp4 ? ElementFormat(ElementFormat::Kind::e2m1) : ElementFormat(Fp8Format::e4m3);
      const ScaleRule rule = fp4 && trial % 2 == 1 ? ScaleRule::nvfp4 : ScaleRule::mx;
      const char* granularity = rule == ScaleRule::nvfp4 ? "tile:1x16" : "tile:1x32";
      const std::int64_t m = 4, n = 6, k = 192;
      QuantizedTensor a = make_quantized_tensor(m, k, {format, Granularity::parse(granularity), rule});
      QuantizedTensor b = make_quantized_tensor(n, k, {format, Granularity::parse(granularity), rule});
      for (QuantizedTensor* q : {&a, &b}) {
        for (std::uint8_t& code : q->codes) {
          do code = static_cast<std::uint8_t>(rng() & (fp4 ? 0x0F : 0xFF));
          while (!fp4 && (code & 0x7F) == 0x7F);  // E4M3 NaN
        }
        // Whole range; products near 2^-150, where the zero exponent (-133) and FP32's
        // subnormal quantum decide; exponents close together, where the truncation to F bits does.
        const int low = trial < 2 ? -127 : trial < 4 ? -80 : -20, high = trial < 2 ? 127 : trial < 4 ? -68 : 20;
        std::uniform_int_distribution<int> exponent(low, high);
        std::uniform_int_distribution<int> e4m3_code(0, 0x7E);
        for (float& s : q->scales)
          s = rule == ScaleRule::nvfp4 ? decode<E4M3>(static_cast<std::uint32_t>(e4m3_code(rng)))
                                       : std::ldexp(1.0f, exponent(rng));
        q->tensor_amax = 1000.0f;
      }
      INFO((fp4 ? "e2m1 " : "e4m3 ") << scale_rule_name(rule) << ", trial " << trial);
      const std::vector<float> want = reference_out(a, b, OutputType::fp32);
      on_every_isa([&] { CHECK(bit_mismatches(cpu::gemm_nt(a, b, kB200), want) == 0); });
    }
}

// A 1 x k E4M3 operand under mx (a UE8M0 scale per 32 of K), every code 0: the hand cases below
// set the codes and scales they need.
QuantizedTensor mx_e4m3_row(std::int64_t k) {
  return make_quantized_tensor(1, k, {Fp8Format::e4m3, Granularity::tile(32), ScaleRule::mx});
}

// One mxf8f6f4 instruction (K = 32): a zero product at k = 0, then 31 products x * y, under
// the scales 2^scale_a and 2^scale_b.
std::pair<QuantizedTensor, QuantizedTensor> zero_then_products(float x, float y, int scale_a, int scale_b) {
  QuantizedTensor a = mx_e4m3_row(32), b = mx_e4m3_row(32);
  for (std::size_t k = 1; k < 32; ++k) {
    a.codes[k] = static_cast<std::uint8_t>(encode<E4M3>(x));
    b.codes[k] = static_cast<std::uint8_t>(encode<E4M3>(y));
  }
  a.scales = {std::ldexp(1.0f, scale_a)};
  b.scales = {std::ldexp(1.0f, scale_b)};
  return {a, b};
}

// kind::mxf8f6f4 truncates every term to 25 fraction bits of the largest exponent before the
// sum, then truncates the sum to FP32. K = 64: instruction 1 gives c = 1 (1 x 1, scales 1);
// instruction 2 adds 1.5 x 2^-24 (A's element 1.5 with scale 2^-24, B's 1 with scale 1):
// E = max(0 (c), 0 + 0 - 24) = 0, so the term in units of 2^-25 is trunc(3) = 3, and the sum
// 1 + 3 x 2^-25 truncates to FP32's 1. An FP32 FMA would round 1 + 0.75 ulp up to 1 + 2^-23.
TEST_CASE("b200 kind::mxf8f6f4 by hand: the sum is truncated, not rounded") {
  QuantizedTensor a = mx_e4m3_row(64), b = mx_e4m3_row(64);
  a.codes[0] = encode<E4M3>(1.0f, Saturation::satfinite);
  b.codes[0] = encode<E4M3>(1.0f, Saturation::satfinite);
  a.codes[32] = encode<E4M3>(1.5f, Saturation::satfinite);
  b.codes[32] = encode<E4M3>(1.0f, Saturation::satfinite);
  a.scales = {1.0f, 0x1p-24f};
  b.scales = {1.0f, 1.0f};
  CHECK(cpu::gemm_nt(a, b, kB200)[0] == 1.0f);
  CHECK(std::fmaf(1.5f * 0x1p-24f, 1.0f, 1.0f) == 1.0f + 0x1p-23f);  // what FP32 would give
}

// A zero product's exponent is -133 (MMA-Sim's e_zero for FP32 accumulation), below the
// FP32 range, so tiny products keep bits a -126 would truncate. 32 products of 1.5 x 1 with
// scales 2^-76 x 2^-76 (exponent -152) and one zero product: E = max(-152, -133 (the zero and
// c = 0)) = -133, each term trunc(1.5 x 2^-152 / 2^-158) = 96 units of 2^-158, 31 of them:
// 2976 x 2^-158 = 5.8125 x 2^-149, truncated to FP32's quantum 2^-149: 5 x 2^-149. With the
// zero at -126 every term would truncate to 0 (1.5 x 2^-152 < 2^-151) and the result be 0.
TEST_CASE("b200 kind::mxf8f6f4 by hand: a zero product aligns at exponent -133") {
  const auto [a, b] = zero_then_products(1.5f, 1.0f, -76, -76);
  on_every_isa([&] { CHECK(std::bit_cast<std::uint32_t>(cpu::gemm_nt(a, b, kB200)[0]) == 5u); });  // 5 x 2^-149
}

// The case above cannot tell -133 from no zero exponent at all (E = -152 alone gives the same
// 5 x 2^-149). Here it can: 31 products 1.125 x 1.875 = 2.109375 (= 135 x 2^-6) with scales
// 2^-77 x 2^-78 (exponent -155), one zero product, c = 0. Both zeros sit at -133: E = -133, each
// term trunc(2.109375 x 2^-155 / 2^-158) = trunc(16.875) = 16, 31 x 16 = 496 units of 2^-158,
// below FP32's quantum 2^-149 (512 units): +0. Without a zero exponent: E = -155, every term
// exact, the sum 65.390625 x 2^-155 = 1.0217 x 2^-149 truncates to 2^-149: bits 1. (A nonzero c
// has an exponent of at least -126, above -133, so the zero exponent only ever decides through
// c = 0, as here, and a zero product's -133 never changes E beyond c's.)
TEST_CASE("b200 kind::mxf8f6f4 by hand: the zero product's exponent truncates tiny terms to +0") {
  const auto [a, b] = zero_then_products(1.125f, 1.875f, -77, -78);
  CHECK(bit_mismatches({0.0f}, reference_out(a, b, OutputType::fp32)) == 0);
  on_every_isa([&] { CHECK(std::bit_cast<std::uint32_t>(cpu::gemm_nt(a, b, kB200)[0]) == 0u); });
}

// An instruction of zero products under huge scales leaves the accumulator alone: its terms'
// exponent is the zero exponent -133, not 0 + 0 + 200. K = 64: instruction 1 gives c = 1 (1 x 1,
// scales 1); instruction 2 has only zero codes, scales 2^100 x 2^100: E = max(0 (c), -133) = 0
// and c stays 1. Were the scales added to a zero's exponent, E = 67 would truncate c to 0.
TEST_CASE("b200 kind::mxf8f6f4 by hand: zero products under large scales keep the accumulator") {
  QuantizedTensor a = mx_e4m3_row(64), b = mx_e4m3_row(64);
  a.codes[0] = encode<E4M3>(1.0f, Saturation::satfinite);
  b.codes[0] = encode<E4M3>(1.0f, Saturation::satfinite);
  a.scales = {1.0f, 0x1p100f};
  b.scales = {1.0f, 0x1p100f};
  CHECK(bit_mismatches({1.0f}, reference_out(a, b, OutputType::fp32)) == 0);
  on_every_isa([&] { CHECK(cpu::gemm_nt(a, b, kB200)[0] == 1.0f); });
}

// kind::mxf4nvf4 sums groups of 16 exactly and aligns the groups to the largest scale
// exponent, even when the group's sum cancelled to 0 (MMA-Sim: only an all-zero group takes
// the zero exponent). Group 1: 6 x 6 - 6 x 6 = 0 with scales 2^20 x 2^20: exponent 40. Group 2:
// 6 x 6 = 36 with scales 1: 36 x 2^(0 + 35 - 40) truncates to 1, so c = 1 x 2^(40 - 35) = 32.
// Without the cancelled group E is 5 (36 = 1.125 x 2^5) and the result is 36.
TEST_CASE("b200 kind::mxf4nvf4 by hand: a cancelled group still sets the alignment") {
  const auto run = [](bool with_cancelled_group) {
    QuantizedTensor a = make_quantized_tensor(1, 64, {ElementFormat::Kind::e2m1, Granularity::tile(16), ScaleRule::mx});
    QuantizedTensor b = make_quantized_tensor(1, 64, {ElementFormat::Kind::e2m1, Granularity::tile(16), ScaleRule::mx});
    const auto six = static_cast<std::uint8_t>(encode<E2M1>(6.0f)), minus_six = static_cast<std::uint8_t>(encode<E2M1>(-6.0f));
    if (with_cancelled_group) {
      a.codes[0] = six, b.codes[0] = six;
      a.codes[1] = minus_six, b.codes[1] = six;
    }
    a.codes[16] = six, b.codes[16] = six;
    a.scales = {0x1p20f, 1.0f, 1.0f, 1.0f};
    b.scales = {0x1p20f, 1.0f, 1.0f, 1.0f};
    return cpu::gemm_nt(a, b, kB200)[0];
  };
  CHECK(run(true) == 32.0f);
  CHECK(run(false) == 36.0f);
}

TEST_CASE("b200 refuses what the block-scaled MMA cannot take, naming why") {
  std::mt19937_64 rng(1);
  const auto q = [&](ElementFormat f, const char* g, ScaleRule rule) {
    return cpu::quantize(input(4, 64, 0, rng), 4, 64, {f, Granularity::parse(g), rule});
  };
  const QuantizedTensor mx = q(Fp8Format::e4m3, "tile:1x32", ScaleRule::mx);
  CHECK_THROWS_WITH(plan_gemm(q(Fp8Format::e4m3, "tile:1x128", ScaleRule::fp32), mx, kB200),
                    Catch::Contains("gives FP32 scales"));
  CHECK_THROWS_WITH(plan_gemm(q(Fp8Format::e4m3, "tile:1x16", ScaleRule::mx), mx, kB200),
                    Catch::Contains("one scale per 32 of K"));
  CHECK_THROWS_WITH(plan_gemm(mx, mx, {AccumulationModel::b200(), PromotionInterval::parse("128"), OutputType::fp32}),
                    Catch::Contains("promotion never"));
  const QuantizedTensor nv = q(ElementFormat::Kind::e2m1, "tile:1x16", ScaleRule::nvfp4);
  CHECK_THROWS_WITH(plan_gemm(nv, q(ElementFormat::Kind::e2m1, "tile:1x32", ScaleRule::mx), kB200),
                    Catch::Contains("different scale types"));
  CHECK_NOTHROW(plan_gemm(nv, nv, kB200));
  // Hopper's promoted GEMM still refuses FP4 (no wgmma kind takes it).
  CHECK_THROWS_WITH(plan_gemm(nv, nv, {}), Catch::Contains("e2m1"));
  // NaN and inf codes (which no quantizer writes, a code file can hold): refused by name, on
  // every step path, before any truncation sees them; likewise an E4M3 block scale past 448.
  QuantizedTensor nan_code = mx, inf_code = q(Fp8Format::e5m2, "tile:1x32", ScaleRule::mx);
  nan_code.codes[70] = 0x7F;  // E4M3 NaN at row 1, K 6
  inf_code.codes[3] = 0x7C;   // E5M2 +inf at row 0, K 3
  QuantizedTensor bad_scale = nv;
  bad_scale.scales[5] = std::numeric_limits<float>::quiet_NaN();
  on_every_isa([&] {
    CHECK_THROWS_WITH(cpu::gemm_nt(nan_code, mx, kB200), Catch::Contains("A's element at row 1, K 6 is NaN"));
    CHECK_THROWS_WITH(cpu::gemm_nt(inf_code, inf_code, kB200), Catch::Contains("row 0, K 3 is inf"));
    CHECK_THROWS_WITH(cpu::gemm_nt(nv, bad_scale, kB200), Catch::Contains("B's scale nan"));
  });
}

}  // namespace
}  // namespace fp8lab
