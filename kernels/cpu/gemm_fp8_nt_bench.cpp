// Speed of the CPU FP8 GEMM emulation on a 2048 x 2048 x 2048 problem (A 1x128 tiles, B
// 128x128 blocks, E4M3, N_C = 128; the Hopper, fp32 and B200 accumulation models; and the
// block-scaled MMA's MXFP8 and NVFP4, below), all cores, next to Eigen's FP32 and FP64 GEMMs of the
// same size in the same run (Eigen built with OpenMP, so it uses all cores too).
// Targets: hopper >= 0.3 x Eigen FP32 and fp32 model >= 0.3 x Eigen FP32, on AVX2 and AVX-512
// machines (an earlier target had asked 0.5 for the fp32 model against an AVX2 Eigen). The
// timed region is the whole gemm_nt call, operand packing included.
//
// The baseline is Eigen at the widest SIMD the run may use: where the CPU has AVX-512 (and
// FP8LAB_CPU_ISA does not lower it), Eigen's FP32 GEMM runs from its AVX-512 copy
// (eigen_sgemm_avx512.hpp), as the emulation runs its AVX-512 micro-tiles; else from the
// build's own Eigen (x86-64-v3: AVX2). The context output names the SIMD path the emulation
// ran (fp8lab_cpu_isa) and Eigen's (eigen_fp32_simd). FP8LAB_CPU_ISA=avx2 on an AVX-512 machine
// lowers both, for the AVX2 figures of the same machine. Eigen FP64, an informative ratio,
// is always the build's own.
#include <Eigen/Dense>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/benchmark_ratios.hpp"
#include "kernels/cpu/cpu_bench_context.hpp"
#include "kernels/cpu/eigen_sgemm_avx512.hpp"
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
// Blackwell's accumulator (experiments/recipes/deepseek_v3_b200_accum.toml): F = 25 is past the
// FP32 micro-tiles, so the floor micro-tile in FP64 lanes runs it (FP8LAB_CPU_ISA=scalar: the
// scalar definition, what ran before that tile).
void BM_Fp8GemmB200Nc128(benchmark::State& state) { run_fp8(state, "bits:25,depth:32,round:rz"); }

// Blackwell's block-scaled MMA (`--accum b200`, gemm_block_scaled.cpp) on the same size: MXFP8
// (E4M3, 1x32 tiles on both operands, mx:rceil: kind::mxf8f6f4) and NVFP4 (E2M1, 1x16 tiles and
// 16x16 blocks, TE's nvfp4 rule: kind::mxf4nvf4), as the mxfp8 and nvfp4 recipes run every
// GEMM. FP8LAB_CPU_ISA=scalar runs the scalar instruction steps, the AVX2 steps' oracle.
void run_block_scaled(benchmark::State& state, fp8lab::ElementFormat format, fp8lab::Granularity ga,
                      fp8lab::Granularity gb, fp8lab::ScaleRule rule) {
  using namespace fp8lab;
  const QuantizedTensor a = cpu::quantize(gaussian(kM * kK, 1), kM, kK, {format, ga, rule});
  const QuantizedTensor b = cpu::quantize(gaussian(kN * kK, 2), kN, kK, {format, gb, rule});
  const GemmConfig config{AccumulationModel::parse("b200"), PromotionInterval::parse("never"), OutputType::fp32};
  for (auto _ : state) benchmark::DoNotOptimize(cpu::gemm_nt(a, b, config));
  set_flops(state);
}
void BM_BlockScaledGemmMxfp8(benchmark::State& state) {
  using namespace fp8lab;
  run_block_scaled(state, Fp8Format::e4m3, Granularity::tile(32), Granularity::tile(32), ScaleRule::mx_rceil);
}
void BM_BlockScaledGemmNvfp4(benchmark::State& state) {
  using namespace fp8lab;
  run_block_scaled(state, ElementFormat::Kind::e2m1, Granularity::tile(16), Granularity::block(16), ScaleRule::nvfp4);
}

// Eigen's FP32 GEMM from its AVX-512 copy where the run uses AVX-512 (see the file comment).
bool eigen_fp32_from_avx512_copy() { return fp8lab::cpu::active_cpu_isa() == fp8lab::cpu::CpuIsa::avx512; }

// C = A B^T on row-major operands, by the build's own Eigen.
template <class Scalar>
void eigen_gemm_nt(const Scalar* a, const Scalar* b, Scalar* c) {
  using RowMajor = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Map<const RowMajor> ma(a, kM, kK), mb(b, kN, kK);
  Eigen::Map<RowMajor> mc(c, kM, kN);
  mc.noalias() = ma * mb.transpose();
}

// A baseline that computed the wrong product fast would be worthless: check 64 entries of C
// against dot products in long double, fixed order. Any order of summation in precision u
// is within gamma_K sum_k |a_k b_k| of the exact value (Higham, Accuracy and Stability of
// Numerical Algorithms, 3.1), gamma_K = K u / (1 - K u); the fixed-order reference's own
// error is below that by a factor 2^11 (long double), so twice gamma_K bounds the difference.
template <class Scalar>
std::string check_product(const std::vector<Scalar>& a, const std::vector<Scalar>& b, const std::vector<Scalar>& c) {
  const long double u = std::numeric_limits<Scalar>::epsilon() / 2, gamma = kK * u / (1 - kK * u);
  for (std::int64_t t = 0; t < 64; ++t) {
    const std::int64_t i = (t * 977) % kM, j = (t * 1531 + 7) % kN;
    long double dot = 0, magnitude = 0;
    for (std::int64_t k = 0; k < kK; ++k) {
      const long double term = static_cast<long double>(a[i * kK + k]) * b[j * kK + k];
      dot += term;
      magnitude += std::fabs(term);
    }
    const long double got = c[i * kN + j];
    if (!(std::fabs(got - dot) <= 2 * gamma * magnitude))
      return "Eigen's C(" + std::to_string(i) + ", " + std::to_string(j) + ") = " + std::to_string(static_cast<double>(got)) +
             ", expected " + std::to_string(static_cast<double>(dot));
  }
  return "";
}

template <class Scalar>
void run_eigen(benchmark::State& state) {
  const std::vector<float> a32 = gaussian(kM * kK, 3), b32 = gaussian(kN * kK, 4);
  const std::vector<Scalar> a(a32.begin(), a32.end()), b(b32.begin(), b32.end());
  std::vector<Scalar> c(static_cast<std::size_t>(kM * kN));
  const bool avx512_copy = std::is_same_v<Scalar, float> && eigen_fp32_from_avx512_copy();
  for (auto _ : state) {
    if constexpr (std::is_same_v<Scalar, float>) {
      if (avx512_copy)
        fp8lab_eigen_sgemm_nt_avx512(a.data(), b.data(), c.data(), kM, kN, kK);
      else
        eigen_gemm_nt(a.data(), b.data(), c.data());
    } else {
      eigen_gemm_nt(a.data(), b.data(), c.data());
    }
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  if (const std::string wrong = check_product(a, b, c); !wrong.empty()) state.SkipWithError(wrong.c_str());
  set_flops(state);
}

void BM_EigenGemmFp32(benchmark::State& state) { run_eigen<float>(state); }
void BM_EigenGemmFp64(benchmark::State& state) { run_eigen<double>(state); }

BENCHMARK(BM_EigenGemmFp32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EigenGemmFp64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Fp8GemmHopperNc128)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Fp8GemmFp32Nc128)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Fp8GemmB200Nc128)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_BlockScaledGemmMxfp8)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_BlockScaledGemmNvfp4)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  fp8lab::bench::add_cpu_isa_context();
  benchmark::AddCustomContext("eigen_fp32_simd", eigen_fp32_from_avx512_copy() ? fp8lab_eigen_simd_avx512()
                                                                              : Eigen::SimdInstructionSetsInUse());
  benchmark::AddCustomContext("eigen_fp64_simd", Eigen::SimdInstructionSetsInUse());
  return fp8lab::bench::run_with_ratios(argc, argv, "FLOP/s",
                                        {{"BM_Fp8GemmHopperNc128", "BM_EigenGemmFp32", "hopper N_C=128 vs Eigen FP32"},
                                         {"BM_Fp8GemmFp32Nc128", "BM_EigenGemmFp32", "fp32 model N_C=128 vs Eigen FP32"},
                                         {"BM_Fp8GemmB200Nc128", "BM_Fp8GemmHopperNc128", "b200 N_C=128 vs hopper N_C=128"},
                                         {"BM_BlockScaledGemmMxfp8", "BM_Fp8GemmHopperNc128", "mxfp8 block-scaled vs hopper N_C=128"},
                                         {"BM_BlockScaledGemmNvfp4", "BM_Fp8GemmHopperNc128", "nvfp4 block-scaled vs hopper N_C=128"},
                                         {"BM_EigenGemmFp64", "BM_EigenGemmFp32", "Eigen FP64 vs Eigen FP32"}});
}
