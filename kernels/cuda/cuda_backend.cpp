#include "kernels/cuda/cuda_backend.hpp"

#include <cuda_runtime.h>

#include <stdexcept>

#include "kernels/cuda/float_formats_device.hpp"
#include "kernels/cuda/quantize_cuda.hpp"

namespace fp8lab::cuda {
namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) throw std::invalid_argument("cannot read CUDA device 0's properties");
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    device_ = std::string(p.name) + ", sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
              std::to_string(p.multiProcessorCount) + " SMs, driver " + std::to_string(driver) + ", runtime " +
              std::to_string(runtime);
  }
  std::string name() const override { return "cuda"; }
  std::string device() const override { return device_; }
  QuantizedTensor quantize(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                           const QuantizeConfig& config) override {
    return cuda::quantize(x, rows, cols, config);
  }
  QuantizedTensor requantize_transposed(const QuantizedTensor& in) override { return cuda::requantize_transposed(in); }
  std::string gemm_unavailable_reason() const override {
    return "the CUDA FP8 GEMMs (cuBLASLt, WGMMA) are not implemented yet; use --backend cpu for GEMMs";
  }
  std::vector<float> gemm_nt(const QuantizedTensor&, const QuantizedTensor&, const GemmConfig&,
                             const cpu::GemmOptions&) override {
    throw std::invalid_argument(gemm_unavailable_reason());
  }

 private:
  std::string device_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() {
  if (device_count() == 0) throw std::invalid_argument("--backend cuda: no usable CUDA device (or driver) on this machine");
  return std::make_unique<CudaBackend>();
}

}  // namespace fp8lab::cuda
