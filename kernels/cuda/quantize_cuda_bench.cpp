// GPU quantizer bandwidth: a DeepSeek-V3-size activation (4096 tokens x 7168 channels, FP32)
// quantized as DeepSeek-V3's 1x128 E4M3 tiles and 128x128 E4M3 blocks, as MXFP8 (1x32 E4M3,
// mx:rceil), as NVFP4 (1x16 E2M1, TE's two-level nvfp4: one more pass for the tensor's amax) and
// its 16x16 weight blocks, and as NVFP4 1x16 under nvfp4:4over6 (four_over_six_tile_kernel, a
// thread per tile), next to a device-to-device copy of the same FP32 bytes in the same run. Bytes
// counted for all: the FP32 input once (what each must read from HBM; a quantizer writes 1/4 of
// it back, the copy all of it). Target: ratio >= 0.8.
// CUDA-event timing, L2 flushed before every iteration (bench_support.hpp).
#include <random>
#include <vector>

#include "kernels/cuda/bench_support.hpp"
#include "kernels/cuda/quantize_cuda.hpp"
#include "kernels/cuda/tensor_amax_variants.hpp"

namespace {

using namespace fp8lab;
constexpr std::int64_t kRows = 4096, kCols = 7168;
constexpr std::size_t kCount = static_cast<std::size_t>(kRows * kCols);

const float* device_activation() {
  static cuda::DeviceArray<float> x(kCount);
  static const bool filled = [] {
    std::vector<float> host(kCount);
    std::mt19937 rng(1234);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& e : host) e = normal(rng);
    FP8LAB_CUDA_CHECK(cudaMemcpy(x.get(), host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice));
    return true;
  }();
  (void)filled;
  return x.get();
}

void BM_DeviceCopyFp32(benchmark::State& state) {
  const float* x = device_activation();
  cuda::DeviceArray<float> y(kCount);
  cuda::bench::time_iterations(state, [&] {
    FP8LAB_CUDA_CHECK(cudaMemcpyAsync(y.get(), x, kCount * sizeof(float), cudaMemcpyDeviceToDevice, nullptr));
  });
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(kCount * sizeof(float)));
}

void quantize_benchmark(benchmark::State& state, const QuantizeConfig& config) {
  const float* x = device_activation();
  const QuantizedTensor shape = make_quantized_tensor(kRows, kCols, config);
  cuda::DeviceArray<std::uint8_t> codes(kCount);
  cuda::DeviceArray<float> scales(shape.scales.size());
  cuda::DeviceArray<unsigned> amax(cuda::amax_workspace_slots(shape));
  cuda::bench::time_iterations(state, [&] {
    cuda::quantize_device(x, kRows, kCols, config, codes.get(), scales.get(), amax.get(), nullptr);
  });
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(kCount * sizeof(float)));
}

constexpr auto kE2M1 = ElementFormat::Kind::e2m1;
void BM_QuantizeTile1x128E4M3(benchmark::State& state) {
  quantize_benchmark(state, {Fp8Format::e4m3, Granularity::tile(128), ScaleRule::fp32});
}
void BM_QuantizeBlock128x128E4M3(benchmark::State& state) {
  quantize_benchmark(state, {Fp8Format::e4m3, Granularity::block(128), ScaleRule::fp32});
}
void BM_QuantizeMxfp8(benchmark::State& state) {
  quantize_benchmark(state, {Fp8Format::e4m3, Granularity::tile(32), ScaleRule::mx_rceil});
}
void BM_QuantizeNvfp4(benchmark::State& state) { quantize_benchmark(state, {kE2M1, Granularity::tile(16), ScaleRule::nvfp4}); }
void BM_QuantizeNvfp4Block16x16(benchmark::State& state) {
  quantize_benchmark(state, {kE2M1, Granularity::block(16), ScaleRule::nvfp4});
}
void BM_QuantizeNvfp4FourOverSix(benchmark::State& state) {
  quantize_benchmark(state, {kE2M1, Granularity::tile(16), ScaleRule::nvfp4_4over6});
}

// Where NVFP4's time goes: its first pass alone (the tensor amax), and the one-level MXFP4
// (E2M1 1x32, mx), which has the E2M1 encode without the two-level scale arithmetic.
void BM_TensorAmax(benchmark::State& state) {
  const float* x = device_activation();
  cuda::DeviceArray<unsigned> amax(1);
  cuda::bench::time_iterations(state, [&] { cuda::tensor_amax_device(x, kRows * kCols, amax.get(), nullptr); });
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(kCount * sizeof(float)));
}
void BM_QuantizeMxfp4(benchmark::State& state) { quantize_benchmark(state, {kE2M1, Granularity::tile(32), ScaleRule::mx}); }

// The amax pass with other load settings (tensor_amax_variants.hpp): does any read the input at
// the copy's rate? The copy moves the bytes twice and both count them once, so that rate is a
// printed ratio of about 2 (BM_TensorAmax: 1.52 on the H100). BM_TensorAmax itself is the
// fourth form, 4 plain loads. Each form's amax is first checked against tensor_amax_device's.
template <int kUnroll, cuda::AmaxLoads kLoads>
void BM_TensorAmaxForm(benchmark::State& state) {
  const float* x = device_activation();
  cuda::DeviceArray<unsigned> amax(1), expected(1);
  cuda::tensor_amax_device(x, kRows * kCols, expected.get(), nullptr);
  cuda::tensor_amax_variant_device(x, kRows * kCols, amax.get(), kUnroll, kLoads, nullptr);
  unsigned got = 0, want = 0;
  FP8LAB_CUDA_CHECK(cudaMemcpy(&got, amax.get(), sizeof got, cudaMemcpyDeviceToHost));
  FP8LAB_CUDA_CHECK(cudaMemcpy(&want, expected.get(), sizeof want, cudaMemcpyDeviceToHost));
  if (got != want) {
    state.SkipWithError("this form's amax differs from tensor_amax_device's");
    return;
  }
  cuda::bench::time_iterations(
      state, [&] { cuda::tensor_amax_variant_device(x, kRows * kCols, amax.get(), kUnroll, kLoads, nullptr); });
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(kCount * sizeof(float)));
}
void BM_TensorAmaxUnroll8Plain(benchmark::State& s) { BM_TensorAmaxForm<8, cuda::AmaxLoads::plain>(s); }
void BM_TensorAmaxUnroll4ReadOnly(benchmark::State& s) { BM_TensorAmaxForm<4, cuda::AmaxLoads::read_only>(s); }
void BM_TensorAmaxUnroll8ReadOnly(benchmark::State& s) { BM_TensorAmaxForm<8, cuda::AmaxLoads::read_only>(s); }
void BM_TensorAmaxUnroll4Streaming(benchmark::State& s) { BM_TensorAmaxForm<4, cuda::AmaxLoads::streaming>(s); }
void BM_TensorAmaxUnroll8Streaming(benchmark::State& s) { BM_TensorAmaxForm<8, cuda::AmaxLoads::streaming>(s); }

BENCHMARK(BM_DeviceCopyFp32)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QuantizeTile1x128E4M3)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QuantizeBlock128x128E4M3)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QuantizeMxfp8)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QuantizeNvfp4)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QuantizeNvfp4Block16x16)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QuantizeNvfp4FourOverSix)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TensorAmax)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QuantizeMxfp4)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TensorAmaxUnroll8Plain)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TensorAmaxUnroll4ReadOnly)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TensorAmaxUnroll8ReadOnly)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TensorAmaxUnroll4Streaming)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TensorAmaxUnroll8Streaming)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  return cuda::bench::run_gpu_benchmarks(argc, argv, "bytes_per_second",
                                {{"BM_QuantizeTile1x128E4M3", "BM_DeviceCopyFp32", "quantize 1x128 / D2D copy (target >= 0.8)"},
                                 {"BM_QuantizeBlock128x128E4M3", "BM_DeviceCopyFp32", "quantize 128x128 / D2D copy"},
                                 {"BM_QuantizeMxfp8", "BM_DeviceCopyFp32", "quantize mxfp8 / D2D copy"},
                                 {"BM_QuantizeNvfp4", "BM_DeviceCopyFp32", "quantize nvfp4 / D2D copy"},
                                 {"BM_QuantizeNvfp4Block16x16", "BM_DeviceCopyFp32", "quantize nvfp4 16x16 / D2D copy"},
                                 {"BM_QuantizeNvfp4FourOverSix", "BM_DeviceCopyFp32", "quantize nvfp4:4over6 / D2D copy"},
                                 {"BM_TensorAmax", "BM_DeviceCopyFp32", "tensor amax pass / D2D copy"},
                                 {"BM_QuantizeMxfp4", "BM_DeviceCopyFp32", "quantize mxfp4 / D2D copy"},
                                 {"BM_TensorAmaxUnroll8Plain", "BM_DeviceCopyFp32", "amax pass, 8 loads / D2D copy"},
                                 {"BM_TensorAmaxUnroll4ReadOnly", "BM_DeviceCopyFp32", "amax pass, 4 ld.nc / D2D copy"},
                                 {"BM_TensorAmaxUnroll8ReadOnly", "BM_DeviceCopyFp32", "amax pass, 8 ld.nc / D2D copy"},
                                 {"BM_TensorAmaxUnroll4Streaming", "BM_DeviceCopyFp32", "amax pass, 4 ld.cs / D2D copy"},
                                 {"BM_TensorAmaxUnroll8Streaming", "BM_DeviceCopyFp32", "amax pass, 8 ld.cs / D2D copy"}});
}
