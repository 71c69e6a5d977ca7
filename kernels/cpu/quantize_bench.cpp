// Speed of the CPU tile quantizer on a DeepSeek-V3-size activation (4096 tokens x 7168
// channels, FP32), against a plain copy of the same bytes in the same run on one core:
// DeepSeek-V3's 1x128 E4M3 fp32 rule (target: >= 0.3 x copy), and the formats study's
// MXFP8 (1x32 E4M3, mx:rceil) and NVFP4 (1x16 E2M1, nvfp4: an extra pass for the tensor amax;
// BM_Nvfp4TensorAmaxPass times that pass alone, BM_ReadFp32 a plain one-stream read of the input).
// Bytes counted: the FP32 input read once (the quantity both benchmarks move).
#include <algorithm>
#include <bit>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/benchmark_ratios.hpp"
#include "kernels/cpu/cpu_bench_context.hpp"
#include "kernels/cpu/quantize.hpp"
#include "kernels/cpu/quantize_rows_avx2.hpp"

namespace {

constexpr std::int64_t kRows = 4096, kCols = 7168;

const std::vector<float>& activation() {
  static const std::vector<float> x = [] {
    std::vector<float> v(static_cast<std::size_t>(kRows * kCols));
    std::mt19937 rng(1234);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& e : v) e = normal(rng);
    return v;
  }();
  return x;
}

void BM_CopyFp32(benchmark::State& state) {
  const std::vector<float>& x = activation();
  std::vector<float> y(x.size(), 0.0f);
  for (auto _ : state) {
    std::memcpy(y.data(), x.data(), x.size() * sizeof(float));
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(x.size() * sizeof(float)));
}

void BM_QuantizeTile1x128E4M3(benchmark::State& state) {
  const std::vector<float>& x = activation();
  fp8lab::QuantizedTensor q = fp8lab::make_quantized_tensor(
      kRows, kCols, {fp8lab::Fp8Format::e4m3, fp8lab::Granularity::tile(128), fp8lab::ScaleRule::fp32});
  for (auto _ : state) {
    fp8lab::cpu::quantize_into(x, q);
    benchmark::DoNotOptimize(q.codes.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(x.size() * sizeof(float)));
}

void quantize_scheme(benchmark::State& state, const fp8lab::QuantizeConfig& config) {
  const std::vector<float>& x = activation();
  fp8lab::QuantizedTensor q = fp8lab::make_quantized_tensor(kRows, kCols, config);
  for (auto _ : state) {
    fp8lab::cpu::quantize_into(x, q);
    benchmark::DoNotOptimize(q.codes.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(x.size() * sizeof(float)));
}

void BM_QuantizeMxfp8(benchmark::State& state) {
  quantize_scheme(state, {fp8lab::Fp8Format::e4m3, fp8lab::Granularity::tile(32), fp8lab::ScaleRule::mx_rceil});
}
void BM_QuantizeNvfp4(benchmark::State& state) {
  quantize_scheme(state, {fp8lab::ElementFormat::Kind::e2m1, fp8lab::Granularity::tile(16), fp8lab::ScaleRule::nvfp4});
}

// NVFP4's first pass alone (the tile amaxes and the tensor amax), and a plain read of the
// input (the max of its bit patterns): where NVFP4's time goes, against what memory allows.
void BM_Nvfp4TensorAmaxPass(benchmark::State& state) {
  const std::vector<float>& x = activation();
  fp8lab::QuantizedTensor q = fp8lab::make_quantized_tensor(
      kRows, kCols, {fp8lab::ElementFormat::Kind::e2m1, fp8lab::Granularity::tile(16), fp8lab::ScaleRule::nvfp4});
  for (auto _ : state) {
    benchmark::DoNotOptimize(fp8lab::cpu::detail::tile_amaxes_avx2(x.data(), q, 0, kRows));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(x.size() * sizeof(float)));
}
void BM_ReadFp32(benchmark::State& state) {
  const std::vector<float>& x = activation();
  for (auto _ : state) {
    std::uint32_t m = 0;
    for (float v : x) m = std::max(m, std::bit_cast<std::uint32_t>(v) & 0x7FFFFFFFu);
    benchmark::DoNotOptimize(m);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(x.size() * sizeof(float)));
}

BENCHMARK(BM_CopyFp32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_QuantizeMxfp8)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_QuantizeNvfp4)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Nvfp4TensorAmaxPass)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ReadFp32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_QuantizeTile1x128E4M3)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  fp8lab::bench::add_cpu_isa_context();
  return fp8lab::bench::run_with_ratios(argc, argv, "bytes_per_second",
                                        {{"BM_QuantizeTile1x128E4M3", "BM_CopyFp32", "quantize 1x128 e4m3 vs copy"},
                                         {"BM_QuantizeMxfp8", "BM_CopyFp32", "quantize mxfp8 vs copy"},
                                         {"BM_QuantizeNvfp4", "BM_CopyFp32", "quantize nvfp4 vs copy"}});
}
