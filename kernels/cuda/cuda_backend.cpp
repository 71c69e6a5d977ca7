#include "kernels/cuda/cuda_backend.hpp"

#include <cuda_runtime.h>

#include <stdexcept>

#include "kernels/cuda/cublaslt_gemm.hpp"
#include "kernels/cuda/cuda_allocator.hpp"
#include "kernels/cuda/float_formats_device.hpp"
#include "kernels/cuda/gemm_cuda.hpp"
#include "kernels/cuda/quantize_cuda.hpp"
#include "kernels/gpu_gemm_preconditions.hpp"

namespace fp8lab::cuda {
namespace {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(GemmEngine engine) : engine_(engine), ledger_(&allocator_) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) throw std::invalid_argument("cannot read CUDA device 0's properties");
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    device_ = std::string(p.name) + ", sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
              std::to_string(p.multiProcessorCount) + " SMs, driver " + std::to_string(driver) + ", runtime " +
              std::to_string(runtime) + ", cuBLASLt " + cublaslt_version_text() + ", GEMMs by " +
              (engine_ == GemmEngine::wgmma ? "fp8lab's WGMMA kernel" : "cuBLASLt block-scaled FP8");
    if (p.major != 9) gemm_unavailable_ = "the CUDA GEMMs need an sm_90 (Hopper) GPU; this one is sm_" +
                                          std::to_string(p.major) + std::to_string(p.minor);
  }
  std::string name() const override { return engine_ == GemmEngine::wgmma ? "cuda" : "cuda-cublaslt"; }
  std::string device() const override { return device_; }
  QuantizedTensor quantize(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                           const QuantizeConfig& config) override {
    return cuda::quantize(x, rows, cols, config);
  }
  QuantizedTensor requantize_transposed(const QuantizedTensor& in) override { return cuda::requantize_transposed(in); }
  std::string gemm_unavailable_reason() const override { return gemm_unavailable_; }
  std::string gemm_config_failure(const QuantizedTensor& a, const QuantizedTensor& b,
                                  const GemmConfig& config) const override {
    if (engine_ == GemmEngine::cublaslt) return cublaslt_backend_failure(a, b, config);
    try {
      plan_wgmma_gemm(a, b, config);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  }
  std::vector<float> gemm_nt(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                             const cpu::GemmOptions& options) override {
    if (!gemm_unavailable_.empty()) throw std::invalid_argument(gemm_unavailable_);
    return engine_ == GemmEngine::wgmma ? wgmma_gemm_nt_host(a, b, config, options, ledger_)
                                        : cublaslt_gemm_nt_host(a, b, config, options, ledger_);
  }

 private:
  GemmEngine engine_;
  CudaAllocator allocator_;
  MemoryLedger ledger_;
  std::string device_, gemm_unavailable_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(GemmEngine engine) {
  if (device_count() == 0) throw std::invalid_argument("--backend cuda: no usable CUDA device (or driver) on this machine");
  return std::make_unique<CudaBackend>(engine);
}

}  // namespace fp8lab::cuda
