// CUDA quantizer against the CPU backend: codes and scales bit-identical on random and
// adversarial tensors, every granularity, element format and scale rule (nvfp4:4over6 on the
// tiles and rounding it takes), nearest and stochastic rounding, on a shape the one-pass kernels take
// (cols % 4 == 0) and one that only the general path takes, a large one for the two-level rules
// and their tensor-amax pass; the transposed re-quantization too. (Label gpu: skipped without a
// device.)
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <sstream>
#include <utility>
#include <vector>

#include "harness/requests/backend_select.hpp"
#include "kernels/cpu/quantize.hpp"
#include "kernels/cpu/requantize_transposed.hpp"
#include "kernels/cuda/device_array.hpp"
#include "kernels/cuda/quantize_cuda.hpp"
#include "tests/support/adversarial_tensors.hpp"
#include "tests/support/format_points.hpp"

using namespace fp8lab;

namespace {

// Codes, scales and the tensor level of the two-level rules, bit for bit; the differences
// counted so that one failed check says how many.
void check_same_as_cpu(const std::vector<float>& x, std::int64_t rows, std::int64_t cols, const QuantizeConfig& config,
                       const std::string& what) {
  const QuantizedTensor cpu = cpu::quantize(x, rows, cols, config);
  const QuantizedTensor gpu = cuda::quantize(x, rows, cols, config);
  std::size_t code_mismatches = 0, scale_mismatches = 0;
  for (std::size_t i = 0; i < cpu.codes.size(); ++i) code_mismatches += cpu.codes[i] != gpu.codes[i];
  for (std::size_t i = 0; i < cpu.scales.size(); ++i) scale_mismatches += float_bits(cpu.scales[i]) != float_bits(gpu.scales[i]);
  INFO(what << " " << rows << "x" << cols << ": " << code_mismatches << " codes and " << scale_mismatches
            << " scales differ");
  CHECK(code_mismatches == 0);
  CHECK(scale_mismatches == 0);
  CHECK(float_bits(cpu.tensor_amax) == float_bits(gpu.tensor_amax));
  CHECK(float_bits(cpu.tensor_scale.encode) == float_bits(gpu.tensor_scale.encode));
  CHECK(float_bits(cpu.tensor_scale.decode) == float_bits(gpu.tensor_scale.decode));
}

}  // namespace

TEST_CASE("gpu: cuda quantize is bit-identical to the CPU backend") {
  using Kind = ElementFormat::Kind;
  const std::pair<ElementFormat, test::TableFormat> formats[] = {{Kind::e4m3, test::kE4M3Table},
                                                                 {Kind::e5m2, test::kE5M2Table},
                                                                 {Kind::e2m1, test::kE2M1Table},
                                                                 {Kind::e3m2, test::kE3M2Table},
                                                                 {Kind::e2m3, test::kE2M3Table}};
  const ScaleRule one_level[] = {ScaleRule::fp32, ScaleRule::pow2,    ScaleRule::deepgemm, ScaleRule::te,
                                 ScaleRule::te_pow2, ScaleRule::div,  ScaleRule::mx,       ScaleRule::mx_ceil,
                                 ScaleRule::mx_even, ScaleRule::mx_rceil};
  const ScaleRule two_level[] = {ScaleRule::nvfp4, ScaleRule::nvfp4_torchao};  // E2M1 only
  const char* granularities[] = {"tensor",      "row",         "tile:1x16",   "tile:1x32",   "tile:1x64",
                                 "tile:1x128",  "tile:1x512",  "block:16x16", "block:32x32", "block:64x64",
                                 "block:128x128"};
  const Rounding roundings[] = {Rounding{}, Rounding{RoundingMode::stochastic, 20261126}};
  // 300 columns: every one-pass kernel, with ragged last tiles and blocks; 301: the general path.
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{70, 300}, {37, 301}})
    for (const auto& [format, table] : formats) {
      std::vector<ScaleRule> rules(std::begin(one_level), std::end(one_level));
      if (format.kind() == Kind::e2m1) rules.insert(rules.end(), std::begin(two_level), std::end(two_level));
      for (const test::NamedTensor& t : test::adversarial_tensors(rows, cols, format_max(format), test::midpoints(table)))
        for (ScaleRule rule : rules)
          for (const char* g : granularities)
            for (const Rounding& rounding : roundings) {
              QuantizeConfig config{format, Granularity::parse(g), rule};
              config.rounding = rounding;
              std::ostringstream what;
              what << format_name(format) << " " << g << " " << scale_rule_name(rule) << " "
                   << (rounding.mode == RoundingMode::stochastic ? "stochastic" : "nearest") << " on " << t.name;
              check_same_as_cpu(t.values, rows, cols, config, what.str());
            }
    }
}

TEST_CASE("gpu: cuda nvfp4:4over6 is bit-identical to the CPU backend (1x16 tiles, 16x16 blocks, nearest)") {
  // 1x16 tiles run four_over_six_tile_kernel, with float4 loads at 70x300 and scalar loads at
  // 37x301; 16x16 blocks the general path. Both shapes end in ragged tiles and blocks.
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{70, 300}, {37, 301}})
    for (const test::NamedTensor& t : test::adversarial_tensors(rows, cols, 6.0f, test::midpoints(test::kE2M1Table)))
      for (const char* g : {"tile:1x16", "block:16x16"})
        check_same_as_cpu(t.values, rows, cols, {ElementFormat::Kind::e2m1, Granularity::parse(g), ScaleRule::nvfp4_4over6},
                          std::string("e2m1 ") + g + " nvfp4:4over6 nearest on " + t.name);
}

TEST_CASE("gpu: --backend cuda and auto quantize nvfp4:4over6 on the GPU, bit-identical to the CPU") {
  // The backends' own quantize, not only cuda::quantize: --backend cuda and auto (cuda with the
  // CPU fallback) must run the rule on the GPU and give the CPU's bits.
  const auto tensors = test::adversarial_tensors(70, 300, 6.0f, test::midpoints(test::kE2M1Table));
  const QuantizeConfig config{ElementFormat::Kind::e2m1, Granularity::tile(16), ScaleRule::nvfp4_4over6};
  for (const char* name : {"cuda", "auto"}) {
    const auto backend = select_backend(name, false);
    for (const test::NamedTensor& t : tensors) {
      const QuantizedTensor cpu = cpu::quantize(t.values, 70, 300, config);
      const QuantizedTensor gpu = backend->quantize(t.values, 70, 300, config);
      INFO(name << " on " << t.name);
      CHECK(gpu.codes == cpu.codes);
      std::size_t scale_mismatches = 0;
      for (std::size_t i = 0; i < cpu.scales.size(); ++i) scale_mismatches += float_bits(cpu.scales[i]) != float_bits(gpu.scales[i]);
      CHECK(scale_mismatches == 0);
      CHECK(float_bits(cpu.tensor_scale.encode) == float_bits(gpu.tensor_scale.encode));
    }
  }
}

TEST_CASE("gpu: the two-level rules' tensor amax sees the last element, on aligned and unaligned inputs") {
  // tensor_amax_kernel reads float4 chunks and then the n % 4 tail (scalar loads throughout when
  // x is not 16-byte aligned): the tensor's one largest value sits in the last element, of a
  // 37 x 301 tensor (n % 4 = 1), so a tail the kernel skipped or misplaced changes every scale.
  // quantize() hands the kernels a cudaMalloc pointer (aligned); the second run starts x one
  // float in, which only quantize_device can be given.
  constexpr std::int64_t rows = 37, cols = 301, n = rows * cols;
  std::vector<float> x(static_cast<std::size_t>(n));
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  float top = 0.0f;
  for (float& v : x) top = std::fmax(top, std::fabs(v = normal(rng)));
  x.back() = -2.0f * top;
  for (const ScaleRule rule : {ScaleRule::nvfp4, ScaleRule::nvfp4_4over6}) {
    const QuantizeConfig config{ElementFormat::Kind::e2m1, Granularity::tile(16), rule};
    INFO(scale_rule_name(rule));
    check_same_as_cpu(x, rows, cols, config, std::string("e2m1 tile:1x16 ") + scale_rule_name(rule) + " aligned");
    const QuantizedTensor cpu = cpu::quantize(x, rows, cols, config);
    QuantizedTensor gpu = make_quantized_tensor(rows, cols, config);
    cuda::DeviceArray<float> d_x(x.size() + 1), d_scales(gpu.scales.size());
    cuda::DeviceArray<std::uint8_t> d_codes(gpu.codes.size());
    cuda::DeviceArray<unsigned> d_amax(cuda::amax_workspace_slots(gpu));
    FP8LAB_CUDA_CHECK(cudaMemcpy(d_x.get() + 1, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
    cuda::quantize_device(d_x.get() + 1, rows, cols, config, d_codes.get(), d_scales.get(), d_amax.get(), nullptr);
    unsigned amax_bits = 0;
    FP8LAB_CUDA_CHECK(cudaMemcpy(gpu.codes.data(), d_codes.get(), gpu.codes.size(), cudaMemcpyDeviceToHost));
    FP8LAB_CUDA_CHECK(cudaMemcpy(gpu.scales.data(), d_scales.get(), gpu.scales.size() * sizeof(float), cudaMemcpyDeviceToHost));
    FP8LAB_CUDA_CHECK(cudaMemcpy(&amax_bits, d_amax.get() + gpu.scales.size(), sizeof amax_bits, cudaMemcpyDeviceToHost));
    CHECK(float_from_bits(amax_bits) == 2.0f * top);
    CHECK(gpu.codes == cpu.codes);
    std::size_t scale_mismatches = 0;
    for (std::size_t i = 0; i < cpu.scales.size(); ++i) scale_mismatches += float_bits(cpu.scales[i]) != float_bits(gpu.scales[i]);
    CHECK(scale_mismatches == 0);
  }
}

TEST_CASE("gpu: the tensor-amax pass finds the largest value wherever it sits (16.8M elements, n % 4 = 3)") {
  // tensor_amax_kernel strides over float4 chunks with 4 loads a step, then a remainder loop,
  // then the scalar tail of n % 4 elements. Which chunks each loop reads depends on the grid
  // (the GPU's SM count and occupancy), so the largest value is placed at 3000 positions: 2000
  // drawn over the whole tensor (the remainder loop reads the last 3% to 25% of the chunks,
  // as the grid falls: some 60 to 500 draws), the first 500 and the last 500 (the tail among
  // them).
  constexpr std::int64_t n = 4096 * 4100 + 3;
  std::vector<float> x(static_cast<std::size_t>(n));
  std::mt19937 rng(13);
  std::normal_distribution<float> normal;
  for (float& v : x) v = normal(rng);
  cuda::DeviceArray<float> d_x(x.size());
  cuda::DeviceArray<unsigned> d_amax(1);
  FP8LAB_CUDA_CHECK(cudaMemcpy(d_x.get(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  std::vector<std::int64_t> positions;
  std::uniform_int_distribution<std::int64_t> anywhere(0, n - 1);
  for (int i = 0; i < 2000; ++i) positions.push_back(anywhere(rng));
  for (std::int64_t i = 0; i < 500; ++i) positions.insert(positions.end(), {i, n - 1 - i});
  std::size_t missed = 0;
  std::int64_t first_missed = -1;
  for (const std::int64_t at : positions) {
    const float largest = -1000.0f;  // |x| above every normal draw; negative, as abs_bits must see
    FP8LAB_CUDA_CHECK(cudaMemcpy(d_x.get() + at, &largest, sizeof largest, cudaMemcpyHostToDevice));
    cuda::tensor_amax_device(d_x.get(), n, d_amax.get(), nullptr);
    unsigned bits = 0;
    FP8LAB_CUDA_CHECK(cudaMemcpy(&bits, d_amax.get(), sizeof bits, cudaMemcpyDeviceToHost));
    FP8LAB_CUDA_CHECK(cudaMemcpy(d_x.get() + at, &x[static_cast<std::size_t>(at)], sizeof(float), cudaMemcpyHostToDevice));
    if (float_from_bits(bits) != 1000.0f && missed++ == 0) first_missed = at;
  }
  INFO(missed << " of " << positions.size() << " positions missed, the first at element " << first_missed);
  CHECK(missed == 0);
}

TEST_CASE("gpu: the two-level rules on a 4096 x 4100 tensor are bit-identical to the CPU") {
  // The tensor-amax pass and the narrow-tile kernel on a tensor of 16.8M elements (the cases
  // above are at most 70 x 300), the tensor's largest value in the first element, then in the
  // last: each must reach every tile's scale.
  constexpr std::int64_t rows = 4096, cols = 4100;
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  float top = 0.0f;
  for (float& v : x) top = std::fmax(top, std::fabs(v = normal(rng)));
  for (const std::size_t at : {std::size_t{0}, x.size() - 1}) {
    std::vector<float> placed = x;
    placed[at] = 3.0f * top;
    for (const ScaleRule rule : {ScaleRule::nvfp4, ScaleRule::nvfp4_torchao})
      for (const int tile : {16, 64})
        for (const Rounding& rounding : {Rounding{}, Rounding{RoundingMode::stochastic, 7}}) {
          QuantizeConfig config{ElementFormat::Kind::e2m1, Granularity::tile(tile), rule};
          config.rounding = rounding;
          std::ostringstream what;
          what << "e2m1 tile:1x" << tile << " " << scale_rule_name(rule)
               << (rounding.mode == RoundingMode::stochastic ? " stochastic" : " nearest") << ", largest at " << at;
          check_same_as_cpu(placed, rows, cols, config, what.str());
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
