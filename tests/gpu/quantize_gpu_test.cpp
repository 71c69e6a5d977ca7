// CUDA quantizer against the CPU backend: codes and scales bit-identical on random and
// adversarial tensors, every granularity, format and scale rule; the transposed
// re-quantization too. (Label gpu: skipped without a device.)
#include <catch2/catch.hpp>

#include "kernels/cpu/quantize.hpp"
#include "kernels/cpu/requantize_transposed.hpp"
#include "kernels/cuda/quantize_cuda.hpp"
#include "tests/support/adversarial_tensors.hpp"
#include "tests/support/format_points.hpp"

using namespace fp8lab;

TEST_CASE("gpu: cuda quantize is bit-identical to the CPU backend") {
  constexpr std::int64_t kRows = 70, kCols = 300;
  for (Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2}) {
    const auto tensors = test::adversarial_tensors(kRows, kCols, format_max(format),
                                                   test::midpoints(format == Fp8Format::e4m3 ? test::kE4M3Table : test::kE5M2Table));
    for (const test::NamedTensor& t : tensors)
      for (ScaleRule rule : {ScaleRule::fp32, ScaleRule::pow2})
        for (const char* g : {"tensor", "row", "tile:1x16", "tile:1x128", "tile:1x512", "block:32x32", "block:128x128"}) {
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
