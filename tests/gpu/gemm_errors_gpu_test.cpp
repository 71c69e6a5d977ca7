// The three errors (DESIGN.md section 2) computed from the CUDA backend's GEMM agree with
// the CPU backend's. Quantization error depends only on the codes and scales, which the
// backends produce bit-identically, so it must be equal. For accumulation and total error
// the triangle inequality gives the derived bound
//   | relF(y_gpu, r) - relF(y_cpu, r) | <= ||y_gpu - y_cpu|| / ||r||,
// checked exactly; with bit-identical outputs (the WGMMA claim) both sides are 0, and the
// cuBLASLt engine, whose fold may differ, must stay inside it too.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "harness/metrics/error_metrics.hpp"
#include "harness/metrics/gemm_errors.hpp"
#include "harness/requests/backend_select.hpp"

using namespace fp8lab;

TEST_CASE("gpu: the three errors from the CUDA backends agree with the CPU backend within the derived bound") {
  constexpr std::int64_t m = 96, n = 256, k = 1024;
  std::mt19937_64 rng(11);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> x(m * k), w(n * k);
  for (float& v : x) v = gauss(rng);
  for (std::int64_t r = 0; r < m; ++r) x[static_cast<std::size_t>(r * k + 5)] *= 60.0f;  // an outlier channel
  for (float& v : w) v = 0.02f * gauss(rng);
  const QuantizeConfig qa_config{Fp8Format::e4m3, Granularity::tile(128), ScaleRule::fp32};
  const QuantizeConfig qb_config{Fp8Format::e4m3, Granularity::block(128), ScaleRule::fp32};
  const auto cpu = select_backend("cpu", true);
  const QuantizedTensor qa = cpu->quantize(x, m, k, qa_config), qb = cpu->quantize(w, n, k, qb_config);
  const std::vector<float> y_cpu = cpu->gemm_nt(qa, qb, GemmConfig{}, {});
  const GemmErrors e_cpu = gemm_errors(x, w, qa, qb, y_cpu, {}, {});

  for (const char* name : {"cuda", "cuda-cublaslt"}) {
    const auto gpu = select_backend(name, true);
    const QuantizedTensor ga = gpu->quantize(x, m, k, qa_config), gb = gpu->quantize(w, n, k, qb_config);
    REQUIRE(ga.codes == qa.codes);
    REQUIRE(gb.codes == qb.codes);
    const std::vector<float> y_gpu = gpu->gemm_nt(ga, gb, GemmConfig{}, {});
    const GemmErrors e_gpu = gemm_errors(x, w, ga, gb, y_gpu, {}, {});
    // ||y_gpu - y_cpu|| / ||r|| for r = the FP64 product of the dequantized operands (accumulation)
    // and of the originals (total): relF of y_gpu against y_cpu, rescaled by ||y_cpu|| / ||r||.
    double diff2 = 0, ycpu2 = 0;
    for (std::size_t i = 0; i < y_cpu.size(); ++i) {
      diff2 += (double{y_gpu[i]} - y_cpu[i]) * (double{y_gpu[i]} - y_cpu[i]);
      ycpu2 += double{y_cpu[i]} * y_cpu[i];
    }
    // ||r|| from relF: ||y_cpu - r|| = relF ||r||, so ||r|| >= ||y_cpu|| / (1 + relF).
    auto bound = [&](double rel) { return std::sqrt(diff2) * (1.0 + rel) / std::sqrt(ycpu2); };
    INFO(name << ": accumulation " << e_gpu.accumulation.metrics.rel_frobenius << " vs " << e_cpu.accumulation.metrics.rel_frobenius
              << ", total " << e_gpu.total.metrics.rel_frobenius << " vs " << e_cpu.total.metrics.rel_frobenius);
    CHECK(e_gpu.quantization.metrics.rel_frobenius == e_cpu.quantization.metrics.rel_frobenius);
    CHECK(std::abs(e_gpu.accumulation.metrics.rel_frobenius - e_cpu.accumulation.metrics.rel_frobenius) <=
          bound(e_cpu.accumulation.metrics.rel_frobenius) + 1e-15);
    CHECK(std::abs(e_gpu.total.metrics.rel_frobenius - e_cpu.total.metrics.rel_frobenius) <=
          bound(e_cpu.total.metrics.rel_frobenius) + 1e-15);
    if (std::string(name) == "cuda") CHECK(diff2 == 0.0);  // the WGMMA claim: bit-identical
  }
}
