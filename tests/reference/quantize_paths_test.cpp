// Exact tier: the CPU quantizer's SIMD paths (quantize_rows_avx2.cpp's 1xT path and the
// auto-vectorized variants) against its scalar path (FP8LAB_CPU_ISA=scalar: quantize.cpp's
// general loops), bit for bit: codes, scales, tensor amax and tensor scale, over every element
// format x scale rule x granularity x rounding the quantizer takes, on adversarial data.
// The scalar path itself is held to the FP64 reference by quantize_ref_test.cpp.
// Shapes: 70 x 300 (every tile ragged along K), 3 x 2064 (129 tiles of 16: a full chunk of 128
// tiles plus one; 64.5 tiles of 32), 2 x 4128 (two chunks of 16-tiles plus 2), 5 x 7 (fewer
// columns than one vector), 1 x 16 (one tile), 0 x 32 (no rows).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/quantize.hpp"
#include "tests/support/adversarial_tensors.hpp"
#include "tests/support/format_points.hpp"
#include "tests/support/quantize_cases.hpp"

using namespace fp8lab;

namespace {

constexpr ScaleRule kRules[] = {ScaleRule::fp32,     ScaleRule::pow2,          ScaleRule::deepgemm,
                                ScaleRule::te,       ScaleRule::te_pow2,       ScaleRule::div,
                                ScaleRule::mx,       ScaleRule::mx_ceil,       ScaleRule::mx_even,
                                ScaleRule::mx_rceil, ScaleRule::nvfp4,         ScaleRule::nvfp4_torchao,
                                ScaleRule::nvfp4_4over6};

// The adversarial tensors plus one with NaN and +-inf in some tiles (their scales and codes
// go through the NaN selects the SIMD path skips for clean tiles), one with a single NaN, and
// one of huge values whose scaled elements overflow to inf under some rules.
std::vector<test::NamedTensor> inputs(std::int64_t rows, std::int64_t cols, const test::TableFormat& table,
                                      float format_max) {
  if (rows == 0) return {{"empty", rows, cols, {}}};  // adversarial_tensors writes into the last row
  std::vector<test::NamedTensor> out = test::adversarial_tensors(rows, cols, format_max, test::midpoints(table));
  std::vector<float> poisoned = test::gaussian(rows, cols, 7);
  for (std::size_t i = 0; i < poisoned.size(); i += 97) poisoned[i] = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t i = 13; i < poisoned.size(); i += 151) poisoned[i] = -std::numeric_limits<float>::infinity();
  for (std::size_t i = 29; i < poisoned.size(); i += 173) poisoned[i] = std::numeric_limits<float>::infinity();
  out.push_back({"NaN and inf", rows, cols, std::move(poisoned)});
  // One NaN in the middle of row 0: the 8-tile groups around it are clean while its chunk is not
  // (the two-level second pass then takes its per-group branch).
  std::vector<float> one_nan = test::gaussian(rows, cols, 9);
  one_nan[static_cast<std::size_t>(cols / 2)] = std::numeric_limits<float>::quiet_NaN();
  out.push_back({"one NaN", rows, cols, std::move(one_nan)});
  std::vector<float> huge = test::gaussian(rows, cols, 8);
  for (float& v : huge) v *= 3e37f;
  out.push_back({"near FLT_MAX", rows, cols, std::move(huge)});
  return out;
}

std::size_t differing_bits(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t n = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    n += float_bits(a[i]) != float_bits(b[i]);
  return n;
}

}  // namespace

TEST_CASE("cpu quantize: every SIMD path equals the scalar path bit for bit (formats, rules, 1xT, ragged)") {
  const auto best = cpu::detected_cpu_isa();
  if (best == cpu::CpuIsa::scalar) SUCCEED("this CPU has no SIMD path to compare");
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {{70, 300}, {3, 2064}, {2, 4128},
                                                                     {5, 7},    {1, 16},   {0, 32}};
  const std::vector<std::string> granularities = {"tensor",     "row",        "tile:1x16", "tile:1x32",
                                                  "tile:1x128", "tile:1x512", "block:16x16"};
  std::size_t compared = 0;
  for (const test::ElementCase& format : test::element_cases())
    for (const auto& [rows, cols] : shapes)
      for (const test::NamedTensor& tensor : inputs(rows, cols, format.table, format_max(format.kernel)))
        for (ScaleRule rule : kRules)
          for (const std::string& g : granularities)
            for (RoundingMode mode : {RoundingMode::nearest, RoundingMode::stochastic}) {
              // Stochastic rounding takes the general loops on every path: one shape checks that.
              if (mode == RoundingMode::stochastic && cols != 300) continue;
              const QuantizeConfig config{format.kernel, Granularity::parse(g), rule, {mode, 42}};
              try {
                make_quantized_tensor(rows, cols, config);
              } catch (const std::invalid_argument&) {
                continue;  // a pair the quantizer refuses (nvfp4 rules on FP8, 4over6's shapes)
              }
              cpu::set_cpu_isa(cpu::CpuIsa::scalar);
              const QuantizedTensor want = cpu::quantize(tensor.values, rows, cols, config);
              for (int isa = 1; isa <= static_cast<int>(best); ++isa) {
                cpu::set_cpu_isa(static_cast<cpu::CpuIsa>(isa));
                const QuantizedTensor got = cpu::quantize(tensor.values, rows, cols, config);
                INFO(format.reference.name << " " << rows << "x" << cols << " " << tensor.name << " "
                                           << scale_rule_name(rule) << " " << g << " " << rounding_mode_name(mode)
                                           << ": " << cpu::cpu_isa_name(static_cast<cpu::CpuIsa>(isa))
                                           << " path vs scalar");
                std::size_t code_mismatches = 0;
                for (std::size_t i = 0; i < want.codes.size(); ++i)
                  if (got.codes[i] != want.codes[i] && ++code_mismatches <= 3)
                    UNSCOPED_INFO("element " << i << " x = " << tensor.values[i] << ": code " << int(got.codes[i])
                                             << ", scalar path " << int(want.codes[i]));
                REQUIRE(got.codes.size() == want.codes.size());
                CHECK(code_mismatches == 0);
                CHECK(differing_bits(got.scales, want.scales) == 0);
                CHECK(float_bits(got.tensor_amax) == float_bits(want.tensor_amax));
                CHECK(float_bits(got.tensor_scale.encode) == float_bits(want.tensor_scale.encode));
                CHECK(float_bits(got.tensor_scale.decode) == float_bits(want.tensor_scale.decode));
                compared += want.codes.size();
              }
            }
  cpu::set_cpu_isa(best);
  INFO(compared << " codes compared");
  CHECK(compared > 0);
}
