// GPU GEMM speed (issues 5 and 6) on the DeepSeek-V3 shapes M = 4096 and M = 128 with
// (N, K) in (2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168),
// (7168, 2048): cuBLASLt FP8 block-scaled (A VEC128 x B BLK128x128), cuBLASLt FP8 per-tensor,
// cuBLASLt BF16, and fp8lab's WGMMA kernel with N_C = 128, 64 and 32 (1x128 x 128x128
// scales), all with BF16 output, in one run. Counter TFLOPS = 2 M N K / time; CUDA-event
// timing with the L2 flushed before every iteration (bench_support.hpp). Ratios printed:
// WGMMA (N_C = 128) / cuBLASLt block-scaled per shape and their geometric mean (target >= 1.0),
// N_C = 64 and 32 against N_C = 128, BF16 against FP8 block-scaled.
#include <random>
#include <vector>

#include "kernels/cuda/bench_support.hpp"
#include "kernels/cuda/cuda_allocator.hpp"
#include "kernels/cuda/gemm_cuda.hpp"

namespace {

using namespace fp8lab;

struct Shape {
  std::int64_t m, n, k;
  std::string text() const { return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k); }
};

std::vector<Shape> deepseek_shapes() {
  std::vector<Shape> shapes;
  for (std::int64_t m : {4096, 128})
    for (auto [n, k] : {std::pair<std::int64_t, std::int64_t>{2112, 7168}, {24576, 1536}, {32768, 512}, {7168, 16384},
                        {4096, 7168}, {7168, 2048}})
      shapes.push_back({m, n, k});
  return shapes;
}

// Random finite E4M3 codes (NaN codes 0x7F / 0xFF replaced) and scales in [0.5, 2).
std::vector<std::uint8_t> random_codes(std::size_t count, std::mt19937_64& rng) {
  std::vector<std::uint8_t> codes(count);
  for (std::uint8_t& c : codes) {
    c = static_cast<std::uint8_t>(rng());
    if ((c & 0x7F) == 0x7F) c ^= 0x01;
  }
  return codes;
}
std::vector<float> random_scales(std::size_t count, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(0.5f, 2.0f);
  std::vector<float> s(count);
  for (float& v : s) v = u(rng);
  return s;
}

struct Device {
  cuda::CudaAllocator allocator;
  MemoryLedger ledger{&allocator};
};
Device& device() {
  static Device d;
  return d;
}

void set_tflops(benchmark::State& state, const Shape& s) {
  state.counters["TFLOPS"] = benchmark::Counter(2.0 * s.m * s.n * s.k * static_cast<double>(state.iterations()) / 1e12,
                                                benchmark::Counter::kIsRate);
}

// Random DeepSeek-V3 operands: A per tile:1x128, B per block:128x128, E4M3; and the output.
struct Fp8Gemm {
  QuantizedTensor a, b;
  DeviceBuffer c;
  explicit Fp8Gemm(const Shape& s) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(s.m * 31 + s.n * 7 + s.k));
    a = make_quantized_tensor(s.m, s.k, {Fp8Format::e4m3, Granularity::tile(128), ScaleRule::fp32});
    b = make_quantized_tensor(s.n, s.k, {Fp8Format::e4m3, Granularity::block(128), ScaleRule::fp32});
    a.codes = random_codes(a.codes.size(), rng);
    b.codes = random_codes(b.codes.size(), rng);
    a.scales = random_scales(a.scales.size(), rng);
    b.scales = random_scales(b.scales.size(), rng);
    c = device().ledger.allocate(static_cast<std::size_t>(s.m * s.n) * 2, MemoryCategory::other);
  }
};

void bench_cublaslt_fp8(benchmark::State& state, Shape s, CublasLtMode mode) {
  Fp8Gemm gemm(s);
  const cuda::DeviceGemmOperands operands = cuda::upload_for_cublaslt(device().ledger, gemm.a, gemm.b);
  cuda::CublasLtProblem p = cuda::cublaslt_block_scaled_problem(gemm.a, gemm.b, operands, OutputType::bf16, gemm.c.data());
  p.mode = mode;  // per-tensor: the first scale of each grid stands for the tensor (timing does not see values)
  const cuda::CublasLt lt(device().ledger);
  const cuda::CublasLtMatmul matmul(lt, p);
  cuda::bench::time_iterations(state, [&] { matmul.launch(nullptr); });
  set_tflops(state, s);
}

void bench_cublaslt_bf16(benchmark::State& state, Shape s) {
  std::mt19937_64 rng(5);
  std::vector<std::uint16_t> a(static_cast<std::size_t>(s.m * s.k)), b(static_cast<std::size_t>(s.n * s.k));
  for (auto& v : a) v = static_cast<std::uint16_t>(0x3C00 | (rng() & 0x3FF));  // BF16 values in [2^-7, 2^-6) x (1..2)
  for (auto& v : b) v = static_cast<std::uint16_t>(0x3C00 | (rng() & 0x3FF));
  const DeviceBuffer da = cuda::upload(device().ledger, a, MemoryCategory::other);
  const DeviceBuffer db = cuda::upload(device().ledger, b, MemoryCategory::other);
  const DeviceBuffer c = device().ledger.allocate(static_cast<std::size_t>(s.m * s.n) * 2, MemoryCategory::other);
  cuda::CublasLtProblem p;
  p.mode = CublasLtMode::bf16;
  p.m = s.m;
  p.n = s.n;
  p.k = s.k;
  p.output = OutputType::bf16;
  p.a = da.data();
  p.b = db.data();
  p.c = c.data();
  const cuda::CublasLt lt(device().ledger);
  const cuda::CublasLtMatmul matmul(lt, p);
  cuda::bench::time_iterations(state, [&] { matmul.launch(nullptr); });
  set_tflops(state, s);
}

void bench_wgmma(benchmark::State& state, Shape s, int promotion) {
  Fp8Gemm gemm(s);
  GemmConfig config;
  config.promotion = PromotionInterval::parse(std::to_string(promotion));
  config.output = OutputType::bf16;
  const WgmmaLaunchPlan plan = plan_wgmma_gemm(gemm.a, gemm.b, config);
  const cuda::DeviceGemmOperands operands = cuda::upload_for_wgmma(device().ledger, gemm.a, gemm.b);
  const cuda::WgmmaGemmProblem p = cuda::wgmma_problem(gemm.a, gemm.b, operands, config.output, gemm.c.data());
  cuda::bench::time_iterations(state, [&] { cuda::wgmma_gemm_nt(p, plan, nullptr); });
  set_tflops(state, s);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<bench::RatioPair> ratios;
  for (const Shape& s : deepseek_shapes()) {
    const std::string t = s.text();
    auto add = [](const std::string& name, auto&& fn) {
      benchmark::RegisterBenchmark(name.c_str(), fn)->UseManualTime()->Unit(benchmark::kMicrosecond);
    };
    add("cublaslt_fp8_block/" + t, [s](benchmark::State& st) { bench_cublaslt_fp8(st, s, CublasLtMode::block_scaled); });
    add("cublaslt_fp8_tensor/" + t, [s](benchmark::State& st) { bench_cublaslt_fp8(st, s, CublasLtMode::per_tensor); });
    add("cublaslt_bf16/" + t, [s](benchmark::State& st) { bench_cublaslt_bf16(st, s); });
    for (int nc : {128, 64, 32})
      add("wgmma_nc" + std::to_string(nc) + "/" + t, [s, nc](benchmark::State& st) { bench_wgmma(st, s, nc); });
    ratios.push_back({"wgmma_nc128/" + t, "cublaslt_fp8_block/" + t, "wgmma N_C=128 / cuBLASLt block " + t, "wgmma / cuBLASLt block-scaled"});
    ratios.push_back({"wgmma_nc64/" + t, "wgmma_nc128/" + t, "wgmma N_C=64 / N_C=128 " + t, "N_C=64 / N_C=128"});
    ratios.push_back({"wgmma_nc32/" + t, "wgmma_nc128/" + t, "wgmma N_C=32 / N_C=128 " + t, "N_C=32 / N_C=128"});
    ratios.push_back({"cublaslt_bf16/" + t, "cublaslt_fp8_block/" + t, "cuBLASLt BF16 / FP8 block " + t, "BF16 / FP8 block-scaled"});
  }
  return cuda::bench::run_gpu_benchmarks(argc, argv, "TFLOPS", ratios);
}
