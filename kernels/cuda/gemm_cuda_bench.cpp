// GPU GEMM speed on the DeepSeek-V3 shapes M = 4096 and M = 128 with
// (N, K) in (2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168),
// (7168, 2048): cuBLASLt FP8 block-scaled (A VEC128 x B BLK128x128), cuBLASLt FP8 per-tensor,
// cuBLASLt BF16, fp8lab's first WGMMA kernel (wgmma_*) and its tiled kernel (tiled_*, the width
// its plan picks for this device in the `block_n` counter), each with N_C = 128, 64 and 32
// (1x128 x 128x128 scales), all with BF16 output, in one run. Counter TFLOPS = 2 M N K / time; CUDA-event
// timing with the L2 flushed before every iteration (bench_support.hpp). Ratios printed:
// WGMMA (N_C = 128) / cuBLASLt block-scaled per shape and their geometric mean, the same for the
// tiled kernel (target >= 1.0) and tiled / first kernel, N_C = 64 and 32 against N_C = 128 for
// both kernels, BF16 against FP8 block-scaled. Operands are made once per
// shape and shared by that shape's six benchmarks; the timed region holds no setup (tensor
// maps, cudaFuncSetAttribute, cuBLASLt descriptors and heuristics are made before it).
// --benchmark_filter=/4096x or =/128x runs one M (run-gpu-all.sh splits the run that way).
#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "kernels/cuda/bench_support.hpp"
#include "kernels/cuda/cuda_allocator.hpp"
#include "kernels/cuda/gemm_cuda.hpp"
#include "kernels/cuda/gemm_tiled_cuda.hpp"

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

// Random finite E4M3 codes (NaN codes 0x7F / 0xFF replaced), eight per draw, and scales in [0.5, 2).
std::vector<std::uint8_t> random_codes(std::size_t count, std::mt19937_64& rng) {
  std::vector<std::uint8_t> codes(count);
  for (std::size_t i = 0; i < count; i += 8) {
    std::uint64_t bits = rng();
    for (std::size_t j = i; j < std::min(count, i + 8); ++j, bits >>= 8) {
      codes[j] = static_cast<std::uint8_t>(bits);
      if ((codes[j] & 0x7F) == 0x7F) codes[j] ^= 0x01;
    }
  }
  return codes;
}
std::vector<float> random_scales(std::size_t count, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(0.5f, 2.0f);
  std::vector<float> s(count);
  for (float& v : s) v = u(rng);
  return s;
}
// BF16 values in [2^-7, 2^-6) x (1..2), four per draw.
std::vector<std::uint16_t> random_bf16(std::size_t count, std::mt19937_64& rng) {
  std::vector<std::uint16_t> v(count);
  for (std::size_t i = 0; i < count; i += 4) {
    std::uint64_t bits = rng();
    for (std::size_t j = i; j < std::min(count, i + 4); ++j, bits >>= 16)
      v[j] = static_cast<std::uint16_t>(0x3C00 | (bits & 0x3FF));
  }
  return v;
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

// One shape's operands, made the first time a benchmark of that shape runs and kept for every
// other benchmark, repetition and iteration-count trial of it (random interleaving visits the
// shapes in any order): random DeepSeek-V3 operands (A per tile:1x128, B per block:128x128,
// E4M3; up to ~184 MB of codes at 4096 x 7168 x 16384) uploaded once in each engine's scale
// layout, the BF16 operands, and one BF16 output. About 3 GB of device memory for all 12
// shapes. Setup happens outside the timed region either way (CUDA events time the launch
// alone); the cache is for wall time, which the GPU window counts.
struct ShapeOperands {
  QuantizedTensor a, b;
  std::optional<cuda::DeviceGemmOperands> wgmma, cublaslt;
  std::optional<DeviceBuffer> bf16_a, bf16_b;
  DeviceBuffer c;

  explicit ShapeOperands(const Shape& s) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(s.m * 31 + s.n * 7 + s.k));
    a = make_quantized_tensor(s.m, s.k, {Fp8Format::e4m3, Granularity::tile(128), ScaleRule::fp32});
    b = make_quantized_tensor(s.n, s.k, {Fp8Format::e4m3, Granularity::block(128), ScaleRule::fp32});
    a.codes = random_codes(a.codes.size(), rng);
    b.codes = random_codes(b.codes.size(), rng);
    a.scales = random_scales(a.scales.size(), rng);
    b.scales = random_scales(b.scales.size(), rng);
    c = device().ledger.allocate(static_cast<std::size_t>(s.m * s.n) * 2, MemoryCategory::other);
  }
  const cuda::DeviceGemmOperands& for_wgmma() {
    if (!wgmma) wgmma = cuda::upload_for_wgmma(device().ledger, a, b);
    return *wgmma;
  }
  const cuda::DeviceGemmOperands& for_cublaslt() {
    if (!cublaslt) cublaslt = cuda::upload_for_cublaslt(device().ledger, a, b);
    return *cublaslt;
  }
  std::pair<const void*, const void*> bf16() {
    if (!bf16_a) {
      std::mt19937_64 rng(5);
      bf16_a = cuda::upload(device().ledger, random_bf16(a.codes.size(), rng), MemoryCategory::other);
      bf16_b = cuda::upload(device().ledger, random_bf16(b.codes.size(), rng), MemoryCategory::other);
    }
    return {bf16_a->data(), bf16_b->data()};
  }
};

ShapeOperands& operands(const Shape& s) {
  device();  // constructed before the cache, so destroyed after the buffers the cache returns to it
  static std::map<std::string, std::unique_ptr<ShapeOperands>> cache;
  std::unique_ptr<ShapeOperands>& entry = cache[s.text()];
  if (!entry) entry = std::make_unique<ShapeOperands>(s);
  return *entry;
}

// The cuBLASLt handle and workspace, made once.
const cuda::CublasLt& cublaslt() {
  static const cuda::CublasLt lt(device().ledger);
  return lt;
}

void bench_cublaslt_fp8(benchmark::State& state, Shape s, CublasLtMode mode) {
  ShapeOperands& ops = operands(s);
  cuda::CublasLtProblem p = cuda::cublaslt_block_scaled_problem(ops.a, ops.b, ops.for_cublaslt(), OutputType::bf16, ops.c.data());
  p.mode = mode;  // per-tensor: the first scale of each grid stands for the tensor (timing does not see values)
  const cuda::CublasLtMatmul matmul(cublaslt(), p);  // descriptors and heuristic: outside the timed region
  cuda::bench::time_iterations(state, [&] { matmul.launch(nullptr); });
  set_tflops(state, s);
}

void bench_cublaslt_bf16(benchmark::State& state, Shape s) {
  ShapeOperands& ops = operands(s);
  const auto [a, b] = ops.bf16();
  cuda::CublasLtProblem p;
  p.mode = CublasLtMode::bf16;
  p.m = s.m;
  p.n = s.n;
  p.k = s.k;
  p.output = OutputType::bf16;
  p.a = a;
  p.b = b;
  p.c = ops.c.data();
  const cuda::CublasLtMatmul matmul(cublaslt(), p);
  cuda::bench::time_iterations(state, [&] { matmul.launch(nullptr); });
  set_tflops(state, s);
}

void bench_wgmma(benchmark::State& state, Shape s, int promotion) {
  ShapeOperands& ops = operands(s);
  GemmConfig config;
  config.promotion = PromotionInterval::parse(std::to_string(promotion));
  config.output = OutputType::bf16;
  const WgmmaLaunchPlan plan = plan_wgmma_gemm(ops.a, ops.b, config);
  // Tensor maps encoded and the shared-memory limit raised here, once: the timed region is
  // the kernel launch alone.
  const cuda::WgmmaGemmLaunch gemm(cuda::wgmma_problem(ops.a, ops.b, ops.for_wgmma(), config.output, ops.c.data()), plan);
  cuda::bench::time_iterations(state, [&] { gemm.launch(nullptr); });
  set_tflops(state, s);
}

void bench_tiled(benchmark::State& state, Shape s, int promotion) {
  ShapeOperands& ops = operands(s);
  GemmConfig config;
  config.promotion = PromotionInterval::parse(std::to_string(promotion));
  config.output = OutputType::bf16;
  const WgmmaTiledPlan plan = plan_wgmma_tiled_gemm(ops.a, ops.b, config, cuda::device_sm_count());
  // Same operands and scale layout as the first kernel (QuantizedTensor's row-major grids).
  const cuda::WgmmaTiledLaunch gemm(cuda::wgmma_tiled_problem(ops.a, ops.b, ops.for_wgmma(), config.output, ops.c.data()), plan);
  cuda::bench::time_iterations(state, [&] { gemm.launch(nullptr); });
  set_tflops(state, s);
  state.counters["block_n"] = plan.block_n;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<bench::RatioPair> ratios;
  for (const Shape& s : deepseek_shapes()) {
    const std::string t = s.text();
    const auto add = [](const std::string& name, auto fn) { cuda::bench::register_timed(name, fn); };
    add("cublaslt_fp8_block/" + t, [s](benchmark::State& st) { bench_cublaslt_fp8(st, s, CublasLtMode::block_scaled); });
    add("cublaslt_fp8_tensor/" + t, [s](benchmark::State& st) { bench_cublaslt_fp8(st, s, CublasLtMode::per_tensor); });
    add("cublaslt_bf16/" + t, [s](benchmark::State& st) { bench_cublaslt_bf16(st, s); });
    for (int nc : {128, 64, 32})
      add("wgmma_nc" + std::to_string(nc) + "/" + t, [s, nc](benchmark::State& st) { bench_wgmma(st, s, nc); });
    for (int nc : {128, 64, 32})
      add("tiled_nc" + std::to_string(nc) + "/" + t, [s, nc](benchmark::State& st) { bench_tiled(st, s, nc); });
    ratios.push_back({"wgmma_nc128/" + t, "cublaslt_fp8_block/" + t, "wgmma N_C=128 / cuBLASLt block " + t, "wgmma / cuBLASLt block-scaled"});
    ratios.push_back({"tiled_nc128/" + t, "cublaslt_fp8_block/" + t, "tiled N_C=128 / cuBLASLt block " + t, "tiled / cuBLASLt block-scaled"});
    ratios.push_back({"tiled_nc128/" + t, "wgmma_nc128/" + t, "tiled / first wgmma N_C=128 " + t, "tiled / first wgmma"});
    ratios.push_back({"tiled_nc64/" + t, "tiled_nc128/" + t, "tiled N_C=64 / N_C=128 " + t, "tiled N_C=64 / N_C=128"});
    ratios.push_back({"tiled_nc32/" + t, "tiled_nc128/" + t, "tiled N_C=32 / N_C=128 " + t, "tiled N_C=32 / N_C=128"});
    ratios.push_back({"wgmma_nc64/" + t, "wgmma_nc128/" + t, "wgmma N_C=64 / N_C=128 " + t, "N_C=64 / N_C=128"});
    ratios.push_back({"wgmma_nc32/" + t, "wgmma_nc128/" + t, "wgmma N_C=32 / N_C=128 " + t, "N_C=32 / N_C=128"});
    ratios.push_back({"cublaslt_bf16/" + t, "cublaslt_fp8_block/" + t, "cuBLASLt BF16 / FP8 block " + t, "BF16 / FP8 block-scaled"});
  }
  return cuda::bench::run_gpu_benchmarks(argc, argv, "TFLOPS", ratios);
}
