// Grouped (MoE) FP8 GEMM speed, contiguous layout: fp8lab's tiled WGMMA kernel in one
// launch over every expert (tiled_grouped/...) against cuBLASLt's block-scaled FP8 GEMM called
// once per expert on the same operands (cublaslt_per_group/...: its A rows, VEC128 scales of
// those rows, the expert's BLK128x128 B, its rows of C), BF16 output, E4M3, A per tile:1x128 and
// B per block:128x128, N_C = 128. Shapes (experts x rows each, N, K) after DeepSeek-V3's MoE
// (hidden 7168, expert intermediate 2048: up/gate N = 4096 over K = 7168, down N = 7168 over
// K = 2048), rows per expert uneven (multiples of 128). Counter TFLOPS = 2 M N K / time over
// all experts' rows; CUDA events, L2 flushed (bench_support.hpp). Ratio printed: tiled grouped
// / cuBLASLt per group, per shape and as a geometric mean.
#include <exception>
#include <memory>
#include <random>
#include <vector>

#include "kernels/cuda/bench_support.hpp"
#include "kernels/cuda/gemm_tiled_cuda.hpp"
#include "kernels/scale_layouts.hpp"

namespace {

using namespace fp8lab;

struct GroupedShape {
  std::vector<std::int64_t> rows;  // per expert, multiples of 128
  std::int64_t n, k;
  std::string text() const {
    std::int64_t m = 0;
    for (std::int64_t r : rows) m += r;
    return std::to_string(rows.size()) + "x" + std::to_string(m / static_cast<std::int64_t>(rows.size())) + "avg_" +
           std::to_string(n) + "x" + std::to_string(k);
  }
};

std::vector<GroupedShape> shapes() {
  const std::vector<std::int64_t> four = {7808, 8448, 8192, 8320}, eight = {3968, 4224, 4096, 3840, 4352, 4096, 4224, 3968};
  return {{four, 4096, 7168}, {four, 7168, 2048}, {eight, 4096, 7168}, {eight, 7168, 2048}};
}

// Random finite E4M3 codes and scales in [0.5, 2) for every operand of one shape.
QuantizedTensor random_operand(std::int64_t rows, std::int64_t cols, const char* granularity, std::mt19937_64& rng) {
  QuantizedTensor q = make_quantized_tensor(rows, cols, {Fp8Format::e4m3, Granularity::parse(granularity), ScaleRule::fp32});
  for (std::uint8_t& c : q.codes) {
    c = static_cast<std::uint8_t>(rng());
    if ((c & 0x7F) == 0x7F) c ^= 0x01;  // no NaN codes
  }
  std::uniform_real_distribution<float> u(0.5f, 2.0f);
  for (float& s : q.scales) s = u(rng);
  return q;
}

struct Operands {
  QuantizedTensor a;
  std::vector<QuantizedTensor> experts;
  std::vector<std::int32_t> block_expert;
  std::int64_t m = 0;
  explicit Operands(const GroupedShape& s) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(s.n * 7 + s.k));
    for (std::size_t e = 0; e < s.rows.size(); ++e) {
      m += s.rows[e];
      block_expert.insert(block_expert.end(), static_cast<std::size_t>(s.rows[e] / kGroupedBlockRows), static_cast<std::int32_t>(e));
      experts.push_back(random_operand(s.n, s.k, "block:128x128", rng));
    }
    a = random_operand(m, s.k, "tile:1x128", rng);
  }
};

void set_tflops(benchmark::State& state, std::int64_t m, const GroupedShape& s) {
  state.counters["TFLOPS"] = benchmark::Counter(2.0 * m * s.n * s.k * static_cast<double>(state.iterations()) / 1e12,
                                                benchmark::Counter::kIsRate);
}

void bench_tiled_grouped(benchmark::State& state, const GroupedShape& s) {
  const Operands ops(s);
  const cuda::DeviceGroupedOperands d = cuda::upload_grouped(cuda::bench::bench_ledger(), ops.a, ops.experts, ops.block_expert);
  const DeviceBuffer c = cuda::bench::bench_ledger().allocate(static_cast<std::size_t>(ops.m * s.n) * 2, MemoryCategory::other);
  GemmConfig config;
  config.output = OutputType::bf16;
  const WgmmaTiledPlan plan = plan_wgmma_tiled_gemm(ops.a, ops.experts.front(), config, cuda::device_sm_count());
  const cuda::WgmmaTiledLaunch gemm(cuda::wgmma_tiled_grouped_problem(ops.a, ops.experts, d, config.output, c.data()), plan);
  cuda::bench::time_iterations(state, [&] { gemm.launch(nullptr); });
  set_tflops(state, ops.m, s);
  state.counters["block_n"] = plan.block_n;
}

void bench_cublaslt_per_group(benchmark::State& state, const GroupedShape& s) {
  const Operands ops(s);
  static const cuda::CublasLt lt(cuda::bench::bench_ledger());
  const DeviceBuffer c = cuda::bench::bench_ledger().allocate(static_cast<std::size_t>(ops.m * s.n) * 2, MemoryCategory::other);
  std::vector<cuda::DeviceGemmOperands> uploaded;
  std::vector<std::unique_ptr<cuda::CublasLtMatmul>> matmuls;
  std::int64_t row0 = 0;
  for (std::size_t e = 0; e < ops.experts.size(); ++e) {
    std::vector<std::int64_t> rows;
    for (std::int64_t r = row0; r < row0 + s.rows[e]; ++r) rows.push_back(r);
    const QuantizedTensor a_e = quantized_rows(ops.a, rows);
    uploaded.push_back(cuda::upload_for_cublaslt(cuda::bench::bench_ledger(), a_e, ops.experts[e]));
    void* c_e = static_cast<std::uint8_t*>(c.data()) + row0 * s.n * 2;
    matmuls.push_back(std::make_unique<cuda::CublasLtMatmul>(
        lt, cuda::cublaslt_block_scaled_problem(a_e, ops.experts[e], uploaded.back(), OutputType::bf16, c_e)));
    row0 += s.rows[e];
  }
  cuda::bench::time_iterations(state, [&] {
    for (const auto& matmul : matmuls) matmul->launch(nullptr);
  });
  set_tflops(state, ops.m, s);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<bench::RatioPair> ratios;
  for (const GroupedShape& s : shapes()) {
    const std::string t = s.text();
    const auto add = [](const std::string& name, auto fn) { cuda::bench::register_timed(name, fn); };
    add("tiled_grouped/" + t, [s](benchmark::State& st) { bench_tiled_grouped(st, s); });
    add("cublaslt_per_group/" + t, [s](benchmark::State& st) { bench_cublaslt_per_group(st, s); });
    ratios.push_back({"tiled_grouped/" + t, "cublaslt_per_group/" + t, "tiled grouped / cuBLASLt per group " + t,
                      "tiled grouped / cuBLASLt per group"});
  }
  return cuda::bench::run_gpu_benchmarks(argc, argv, "TFLOPS", ratios);
}
