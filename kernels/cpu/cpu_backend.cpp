#include "kernels/cpu/cpu_backend.hpp"

#include <omp.h>

#include <fstream>

#include "kernels/cpu/quantize.hpp"
#include "kernels/cpu/requantize_transposed.hpp"

namespace fp8lab::cpu {
namespace {

std::string cpu_model() {
  std::ifstream info("/proc/cpuinfo");
  std::string line;
  while (std::getline(info, line))
    if (line.starts_with("model name")) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  std::string device() const override {
    return cpu_model() + ", " + std::to_string(omp_get_max_threads()) + " threads (CPU emulation, no GPU)";
  }
  QuantizedTensor quantize(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                           const QuantizeConfig& config) override {
    return cpu::quantize(x, rows, cols, config);
  }
  QuantizedTensor requantize_transposed(const QuantizedTensor& in) override { return cpu::requantize_transposed(in); }
  std::string gemm_unavailable_reason() const override { return ""; }
  std::string gemm_config_failure(const QuantizedTensor&, const QuantizedTensor&, const GemmConfig&) const override {
    return "";  // the emulation runs every configuration plan_gemm accepts
  }
  std::vector<float> gemm_nt(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                             const GemmOptions& options) override {
    return cpu::gemm_nt(a, b, config, options);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace fp8lab::cpu
