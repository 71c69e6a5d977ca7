// CUDA quantizer against the CPU backend: codes and scales bit-identical on random and
// adversarial tensors, every granularity, element format and one-level scale rule; the transposed
// re-quantization too. (Label gpu: skipped without a device.)
#include <catch2/catch.hpp>
#include <utility>
#include <vector>

#include "kernels/cpu/quantize.hpp"
#include "kernels/cpu/requantize_transposed.hpp"
#include "kernels/cuda/quantize_cuda.hpp"
#include "tests/support/adversarial_tensors.hpp"
#include "tests/support/format_points.hpp"

using namespace fp8lab;

TEST_CASE("gpu: cuda quantize is bit-identical to the CPU backend") {
  constexpr std::int64_t kRows = 70, kCols = 300;
  using Kind = ElementFormat::Kind;
  const std::pair<ElementFormat, test::TableFormat> formats[] = {{Kind::e4m3, test::kE4M3Table},
                                                                 {Kind::e5m2, test::kE5M2Table},
                                                                 {Kind::e2m1, test::kE2M1Table},
                                                                 {Kind::e3m2, test::kE3M2Table},
                                                                 {Kind::e2m3, test::kE2M3Table}};
  // Every one-level rule (the two-level nvfp4 rules run on the CPU backend only).
  const ScaleRule rules[] = {ScaleRule::fp32, ScaleRule::pow2,    ScaleRule::deepgemm, ScaleRule::te,
                             ScaleRule::te_pow2, ScaleRule::div,  ScaleRule::mx,       ScaleRule::mx_ceil,
                             ScaleRule::mx_even, ScaleRule::mx_rceil};
  for (const auto& [format, table] : formats) {
    const auto tensors = test::adversarial_tensors(kRows, kCols, format_max(format), test::midpoints(table));
    for (const test::NamedTensor& t : tensors)
      for (ScaleRule rule : rules)
        for (const char* g : {"tensor", "row", "tile:1x16", "tile:1x32", "tile:1x128", "tile:1x512", "block:32x32",
                              "block:128x128"}) {
          DYNAMIC_SECTION(format_name(format) << " " << g << " " << scale_rule_name(rule) << " on " << t.name) {
            const QuantizeConfig config{format, Granularity::parse(g), rule};
            const QuantizedTensor cpu = cpu::quantize(t.values, kRows, kCols, config);
            const QuantizedTensor gpu = cuda::quantize(t.values, kRows, kCols, config);
            std::size_t code_mismatches = 0, scale_mismatches = 0;
            for (std::size_t i = 0; i < cpu.codes.size(); ++i) code_mismatches += cpu.codes[i] != gpu.codes[i];
            for (std::size_t i = 0; i < cpu.scales.size(); ++i)
              scale_mismatches += float_bits(cpu.scales[i]) != float_bits(gpu.scales[i]);
            CHECK(code_mismatches == 0);
            CHECK(scale_mismatches == 0);
          }
        }
  }
}

TEST_CASE("gpu: cuda quantize refuses the two-level nvfp4 rules, naming the CPU backend") {
  const std::vector<float> x(64, 1.0f);
  CHECK_THROWS_WITH(cuda::quantize(x, 2, 32, {ElementFormat::Kind::e2m1, Granularity::tile(16), ScaleRule::nvfp4}),
                    Catch::Contains("runs on the CPU backend only"));
}

TEST_CASE("gpu: cuda requantize_transposed is bit-identical to the CPU backend") {
  const auto tensors = test::adversarial_tensors(200, 300, 448.0f, test::midpoints(test::kE4M3Table));
  for (const test::NamedTensor& t : tensors) {
    const QuantizedTensor forward = cpu::quantize(t.values, 200, 300, {Fp8Format::e4m3, Granularity::tile(128), ScaleRule::fp32});
    const QuantizedTensor cpu = cpu::requantize_transposed(forward);
    const QuantizedTensor gpu = cuda::requantize_transposed(forward);
    INFO(t.name);
    CHECK(cpu.codes == gpu.codes);
    std::size_t scale_mismatches = 0;
    for (std::size_t i = 0; i < cpu.scales.size(); ++i) scale_mismatches += float_bits(cpu.scales[i]) != float_bits(gpu.scales[i]);
    CHECK(scale_mismatches == 0);
  }
}
