#include "harness/requests/backend_select.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cpu/cpu_backend.hpp"
#if FP8LAB_WITH_CUDA
#include "kernels/cuda/cuda_backend.hpp"
#endif

namespace fp8lab {
namespace {

// Throws std::invalid_argument when this build or machine has no CUDA device to offer, and
// std::runtime_error when CUDA is installed but unusable.
std::unique_ptr<Backend> cuda_backend(bool cublaslt = false) {
#if FP8LAB_WITH_CUDA
  return cuda::make_cuda_backend(cublaslt ? cuda::GemmEngine::cublaslt : cuda::GemmEngine::wgmma);
#else
  (void)cublaslt;
  throw std::invalid_argument("--backend cuda: this fp8lab was built without the CUDA backend (cmake --preset cuda)");
#endif
}

class FallbackBackend final : public Backend {
 public:
  FallbackBackend(std::unique_ptr<Backend> primary, std::unique_ptr<Backend> fallback)
      : primary_(std::move(primary)), fallback_(std::move(fallback)) {}
  std::string name() const override { return primary_->name() + "+" + fallback_->name(); }
  std::string device() const override {
    return primary_->device() + "; GEMMs it cannot run on " + fallback_->name() + ": " + fallback_->device();
  }
  QuantizedTensor quantize(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                           const QuantizeConfig& config) override {
    return primary_->quantize(x, rows, cols, config);
  }
  QuantizedTensor requantize_transposed(const QuantizedTensor& in) override {
    // The CUDA one refuses the two-level rules (nvfp4:4over6 among them).
    return (scale_rule_math(in.config.scale_rule).two_level ? *fallback_ : *primary_).requantize_transposed(in);
  }
  std::string gemm_unavailable_reason() const override {
    if (primary_->gemm_unavailable_reason().empty()) return "";
    return fallback_->gemm_unavailable_reason();
  }
  std::string gemm_config_failure(const QuantizedTensor& a, const QuantizedTensor& b,
                                  const GemmConfig& config) const override {
    const std::string primary_why = primary_refusal(a, b, config);
    if (primary_why.empty()) return "";
    const std::string fallback_why = fallback_->gemm_unavailable_reason().empty()
                                         ? fallback_->gemm_config_failure(a, b, config)
                                         : fallback_->gemm_unavailable_reason();
    return fallback_why.empty() ? "" : primary_why + "; and " + fallback_->name() + ": " + fallback_why;
  }
  GemmRoute gemm_route(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config) const override {
    const std::string why = primary_refusal(a, b, config);
    if (why.empty()) return primary_->gemm_route(a, b, config);
    return {fallback_->gemm_route(a, b, config).backend, why};
  }
  std::vector<float> gemm_nt(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                             const cpu::GemmOptions& options) override {
    return (primary_refusal(a, b, config).empty() ? *primary_ : *fallback_).gemm_nt(a, b, config, options);
  }

 private:
  // Why the primary cannot run this GEMM (empty: it can).
  std::string primary_refusal(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config) const {
    if (std::string why = primary_->gemm_unavailable_reason(); !why.empty()) return primary_->name() + ": " + why;
    if (std::string why = primary_->gemm_config_failure(a, b, config); !why.empty()) return primary_->name() + ": " + why;
    return "";
  }
  std::unique_ptr<Backend> primary_, fallback_;
};

}  // namespace

std::unique_ptr<Backend> with_fallback(std::unique_ptr<Backend> primary, std::unique_ptr<Backend> fallback) {
  return std::make_unique<FallbackBackend>(std::move(primary), std::move(fallback));
}

std::unique_ptr<Backend> select_backend(std::string_view name, bool needs_gemm) {
  if (name == "cpu") return cpu::make_cpu_backend();
  if (name == "cuda" || name == "cuda-cublaslt") {
    std::unique_ptr<Backend> b;
    try {
      b = cuda_backend(name == "cuda-cublaslt");
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument("--backend " + std::string(name) + ": CUDA is installed but unusable: " + e.what());
    }
    if (needs_gemm && !b->gemm_unavailable_reason().empty())
      throw std::invalid_argument("--backend " + std::string(name) + ": " + b->gemm_unavailable_reason());
    return b;
  }
  if (name == "auto") {
    std::unique_ptr<Backend> b;
    try {
      b = cuda_backend();
    } catch (const std::invalid_argument&) {
      return cpu::make_cpu_backend();  // no CUDA build or no device here
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(std::string("--backend auto: CUDA is installed but unusable: ") + e.what() +
                                  " (--backend cpu runs without it)");
    }
    // A GPU that is not Hopper runs none of the sm_90a code (quantizers included): the CPU.
    if (!b->gemm_unavailable_reason().empty()) return cpu::make_cpu_backend();
    return with_fallback(std::move(b), cpu::make_cpu_backend());
  }
  throw std::invalid_argument("--backend '" + std::string(name) + "' is not one of cpu, cuda, cuda-cublaslt, auto");
}

}  // namespace fp8lab
