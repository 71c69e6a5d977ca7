// Exact tier for every scale rule x element format: the kernel's tile_scale against the FP64
// reference's (reference/scale_rules_ref) over amax sweeps, and the CPU quantizer against
// reference::quantize_ref over tensors with the edge cases each rule defines (zero tiles,
// subnormal amax, amax near FLT_MAX, amax exactly a power of two, significands >= 1.75 that
// FLOOR clips, inf and NaN), bit for bit: codes, scales, tensor scales, dequantized values.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "kernels/cpu/quantize.hpp"
#include "reference/quantize_ref.hpp"
#include "tests/support/adversarial_tensors.hpp"
#include "tests/support/format_points.hpp"
#include "tests/support/quantize_cases.hpp"
#include "tests/support/quantized_vs_reference.hpp"

using namespace fp8lab;

namespace {

using test::ElementCase;
using test::element_cases;
using test::same_float;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kFltMax = std::numeric_limits<float>::max();

const std::vector<ScaleRule>& all_rules() {
  static const std::vector<ScaleRule> rules = {
      ScaleRule::fp32, ScaleRule::pow2,    ScaleRule::deepgemm, ScaleRule::te,       ScaleRule::te_pow2, ScaleRule::div,
      ScaleRule::mx,   ScaleRule::mx_ceil, ScaleRule::mx_even,  ScaleRule::mx_rceil, ScaleRule::nvfp4,
      ScaleRule::nvfp4_torchao};
  return rules;
}

bool serves(ScaleRule rule, ElementFormat f) {
  return !scale_rule_math(rule).two_level || f.kind() == ElementFormat::Kind::e2m1;
}

// Equal bit patterns, or both NaN (the rules do not promise a NaN payload).
// Every FP32 binade with several significands: exact powers of two and their neighbours,
// 1.75 and up (FLOOR's clipping range), random ones; and 0, subnormals, FLT_MAX, inf, NaN.
std::vector<float> amax_sweep() {
  std::vector<float> v = {0.0f, 150.0f, 448.0f, 464.0f, 6.0f, 1e-4f, 1e-40f, 0x1p-149f, 0x1p-127f,
                          kFltMax, std::nextafter(kFltMax, 0.0f), kInf, kNaN};
  std::mt19937 rng(24);
  std::uniform_real_distribution<float> significand(1.0f, 2.0f);
  for (int e = -149; e <= 127; ++e) {
    const float p = std::ldexp(1.0f, e);
    v.push_back(p);
    v.push_back(std::nextafter(p, 0.0f));
    v.push_back(std::nextafter(p, kInf));
    if (e >= -126) {
      for (float s : {1.5f, 1.75f, 1.8125f, 1.875f, 1.9375f, 1.96875f})
        if (std::isfinite(s * p)) v.push_back(s * p);
      for (int i = 0; i < 4; ++i)
        if (std::isfinite(significand(rng) * p)) v.push_back(significand(rng) * p);
    }
  }
  return v;
}

Eigen::MatrixXd to_matrix(const std::vector<float>& x, std::int64_t rows, std::int64_t cols) {
  Eigen::MatrixXd m(rows, cols);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) m(r, c) = x[static_cast<std::size_t>(r * cols + c)];
  return m;
}

// Rows of 64 values, each row one edge case for 1x16 / 1x32 tiles (and blocks, rows, tensor).
std::vector<test::NamedTensor> edge_tensors(std::int64_t rows, std::int64_t cols) {
  std::vector<float> x = test::gaussian(rows, cols, 77);
  const auto row = [&](std::int64_t r) { return x.begin() + r * cols; };
  std::fill(row(0), row(1), 0.0f);                                                     // zero tiles
  for (std::int64_t c = 0; c < cols; ++c) row(1)[c] *= 1e-40f;                         // subnormal amax
  for (std::int64_t c = 0; c < cols; ++c) row(2)[c] = row(2)[c] > 0 ? 3.0e38f : -1.0e38f;  // near FLT_MAX
  row(2)[3] = kFltMax;
  for (std::int64_t c = 0; c < cols; c += 16) row(3)[c] = std::ldexp(1.0f, static_cast<int>(c / 16) - 2);  // 2^k amax
  for (std::int64_t c = 0; c < cols; c += 16) row(4)[c] = 1.9375f * std::ldexp(1.0f, static_cast<int>(c / 16));  // FLOOR clips
  for (std::int64_t c = 0; c < cols; c += 16) row(5)[c] = 1.75f * std::ldexp(1.0f, static_cast<int>(c / 16) + 3);
  std::vector<test::NamedTensor> out = {{"edge rows", rows, cols, x}};
  std::vector<float> with_inf = x, with_nan = x;
  with_inf[static_cast<std::size_t>(6 * cols + 5)] = kInf;
  with_inf[static_cast<std::size_t>(6 * cols + 40)] = -kInf;
  with_nan[static_cast<std::size_t>(7 * cols + 9)] = kNaN;
  out.push_back({"edge rows with +-inf", rows, cols, with_inf});
  out.push_back({"edge rows with NaN", rows, cols, with_nan});
  return out;
}

}  // namespace

TEST_CASE("tile_scale equals the FP64 reference for every rule and element format over an amax sweep") {
  const std::vector<float> amaxes = amax_sweep();
  for (const ElementCase& format : element_cases())
    for (ScaleRule rule : all_rules()) {
      if (!serves(rule, format.kernel)) continue;
      DYNAMIC_SECTION(format.kernel.name() << " " << scale_rule_name(rule)) {
        const ref::ScaleRuleRef ref_rule = test::reference_rule(rule);
        // One-level rules ignore the tensor level; two-level ones see tensor amaxes at and above
        // each block amax (a block's amax never exceeds its tensor's), down to those whose
        // nvfp4:torchao per-tensor scale is subnormal (1e-36, 1e-40) or 0 (1e-42, 1e-45), where
        // its factors overflow.
        const std::vector<float> tensor_amaxes =
            scale_rule_math(rule).two_level
                ? std::vector<float>{0.0f, 1e-45f, 1e-42f, 1e-40f, 1e-36f, 1e-34f, 1e-30f, 1.0f, 2688.0f, 3e5f, kFltMax}
                : std::vector<float>{0.0f};
        std::size_t mismatches = 0, compared = 0;
        std::ostringstream first_mismatches;
        for (float tensor_amax : tensor_amaxes) {
          const TensorScale t = tensor_scale(tensor_amax, rule, format.kernel.traits());
          const ref::TensorScaleRef rt = ref::tensor_scale_ref(tensor_amax, ref_rule, format.reference);
          INFO("tensor amax " << tensor_amax);
          CHECK(same_float(t.encode, rt.encode));
          CHECK(same_float(t.decode, rt.decode));
          for (float amax : amaxes) {
            if (scale_rule_math(rule).two_level && !(amax <= tensor_amax)) continue;
            const TileScale s = tile_scale(amax, rule, format.kernel.traits(), t);
            const ref::TileScaleRef r = ref::tile_scale_ref(amax, ref_rule, format.reference, rt);
            ++compared;
            if ((!same_float(s.decode, r.decode) || !same_float(s.encode, r.encode)) && ++mismatches <= 5)
              first_mismatches << "tensor amax " << tensor_amax << ", amax " << amax << " (0x" << std::hex
                               << std::bit_cast<std::uint32_t>(amax) << std::dec << "): decode " << s.decode
                               << " / reference " << r.decode << ", encode " << s.encode << " / reference " << r.encode
                               << "\n";
          }
        }
        INFO(compared << " amax values compared; first mismatches:\n" << first_mismatches.str());
        CHECK(mismatches == 0);
      }
    }
}

TEST_CASE("cpu quantize equals the FP64 reference for every rule and element format (codes, scales, dequantized)") {
  constexpr std::int64_t kRows = 24, kCols = 100;  // 100: ragged for 1x16, 1x32 and 16x16 blocks
  for (const ElementCase& format : element_cases()) {
    std::vector<test::NamedTensor> tensors =
        test::adversarial_tensors(kRows, kCols, format_max(format.kernel), test::midpoints(format.table));
    for (test::NamedTensor& t : edge_tensors(kRows, kCols)) tensors.push_back(std::move(t));
    for (const test::NamedTensor& tensor : tensors) {
      const Eigen::MatrixXd x = to_matrix(tensor.values, kRows, kCols);
      for (ScaleRule rule : all_rules()) {
        if (!serves(rule, format.kernel)) continue;
        for (const char* granularity : {"tensor", "row", "tile:1x16", "tile:1x32", "block:16x16"}) {
          DYNAMIC_SECTION(format.kernel.name() << " " << granularity << " " << scale_rule_name(rule) << " on "
                                               << tensor.name) {
            const Granularity g = Granularity::parse(granularity);
            const QuantizedTensor q = cpu::quantize(tensor.values, kRows, kCols, {format.kernel, g, rule});
            const std::vector<float> dq = cpu::dequantize(q);
            const ref::QuantizedRef r = ref::quantize_ref(x, q.tile_rows, q.tile_cols, format.reference,
                                                          test::reference_rule(rule));
            test::check_matches_reference(q, tensor.values, dq, r);
          }
        }
      }
    }
  }
}
