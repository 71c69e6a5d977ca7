// Speed of the CPU FP8 GEMM emulation on a 2048 x 2048 x 2048 problem (A 1x128 tiles, B
// 128x128 blocks, E4M3, N_C = 128), all cores, next to Eigen's FP32 and FP64 GEMMs of the
// same size in the same run (Eigen built with OpenMP, so it uses all cores too).
// Targets: hopper >= 0.3 x Eigen FP32, fp32 model >= 0.5 x Eigen FP32, on AVX2 and AVX-512
// machines. The context output names the SIMD path the emulation ran and Eigen's. hopper runs
// the floor micro-tile (gemm_fp8_nt_floor.cpp), the fp32 model the AVX2 FMA micro-tile.
// The timed region is the whole gemm_nt call, operand packing included.
#include <Eigen/Dense>
#include <random>

#include "kernels/benchmark_ratios.hpp"
#include "kernels/cpu/cpu_bench_context.hpp"
#include "kernels/cpu/gemm_fp8_nt.hpp"
#include "kernels/cpu/quantize.hpp"

namespace {

constexpr std::int64_t kM = 2048, kN = 2048, kK = 2048;

std::vector<float> gaussian(std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

void set_flops(benchmark::State& state) {
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * kM * kN * kK * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

void run_fp8(benchmark::State& state, const char* model) {
  using namespace fp8lab;
  static const QuantizedTensor a =
      cpu::quantize(gaussian(kM * kK, 1), kM, kK, {Fp8Format::e4m3, Granularity::tile(128), ScaleRule::fp32});
  static const QuantizedTensor b =
      cpu::quantize(gaussian(kN * kK, 2), kN, kK, {Fp8Format::e4m3, Granularity::block(128), ScaleRule::fp32});
  const GemmConfig config{AccumulationModel::parse(model), PromotionInterval::parse("128"), OutputType::fp32};
  for (auto _ : state) benchmark::DoNotOptimize(cpu::gemm_nt(a, b, config));
  set_flops(state);
}

void BM_Fp8GemmHopperNc128(benchmark::State& state) { run_fp8(state, "hopper"); }
void BM_Fp8GemmFp32Nc128(benchmark::State& state) { run_fp8(state, "fp32"); }

template <class Scalar>
void run_eigen(benchmark::State& state) {
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  const Matrix a = Matrix::Random(kM, kK), b = Matrix::Random(kN, kK);
  Matrix c(kM, kN);
  for (auto _ : state) {
    c.noalias() = a * b.transpose();
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(state);
}

void BM_EigenGemmFp32(benchmark::State& state) { run_eigen<float>(state); }
void BM_EigenGemmFp64(benchmark::State& state) { run_eigen<double>(state); }

BENCHMARK(BM_EigenGemmFp32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EigenGemmFp64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Fp8GemmHopperNc128)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Fp8GemmFp32Nc128)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  fp8lab::bench::add_cpu_isa_context();
  // Eigen picks its SIMD at compile time: with the default x86-64-v3 build it uses AVX2 even
  // on an AVX-512 machine (build with -DFP8LAB_MARCH=native to give it AVX-512).
  benchmark::AddCustomContext("eigen_simd", Eigen::SimdInstructionSetsInUse());
  return fp8lab::bench::run_with_ratios(argc, argv, "FLOP/s",
                                        {{"BM_Fp8GemmHopperNc128", "BM_EigenGemmFp32", "hopper N_C=128 vs Eigen FP32"},
                                         {"BM_Fp8GemmFp32Nc128", "BM_EigenGemmFp32", "fp32 model N_C=128 vs Eigen FP32"},
                                         {"BM_EigenGemmFp64", "BM_EigenGemmFp32", "Eigen FP64 vs Eigen FP32"}});
}
