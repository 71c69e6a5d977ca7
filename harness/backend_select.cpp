#include "harness/backend_select.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cpu/cpu_backend.hpp"
#if FP8LAB_WITH_CUDA
#include "kernels/cuda/cuda_backend.hpp"
#endif

namespace fp8lab {
namespace {

std::unique_ptr<Backend> cuda_backend(bool cublaslt = false) {
#if FP8LAB_WITH_CUDA
  return cuda::make_cuda_backend(cublaslt ? cuda::GemmEngine::cublaslt : cuda::GemmEngine::wgmma);
#else
  (void)cublaslt;
  throw std::invalid_argument("--backend cuda: this fp8lab was built without the CUDA backend (cmake --preset cuda)");
#endif
}

}  // namespace

std::unique_ptr<Backend> select_backend(std::string_view name, bool needs_gemm) {
  if (name == "cpu") return cpu::make_cpu_backend();
  if (name == "cuda" || name == "cuda-cublaslt") {
    std::unique_ptr<Backend> b = cuda_backend(name == "cuda-cublaslt");
    if (needs_gemm && !b->gemm_unavailable_reason().empty())
      throw std::invalid_argument("--backend " + std::string(name) + ": " + b->gemm_unavailable_reason());
    return b;
  }
  if (name == "auto") {
    try {
      std::unique_ptr<Backend> b = cuda_backend();
      if (!needs_gemm || b->gemm_unavailable_reason().empty()) return b;
    } catch (const std::invalid_argument&) {
      // no CUDA here: the CPU backend
    }
    return cpu::make_cpu_backend();
  }
  throw std::invalid_argument("--backend '" + std::string(name) + "' is not one of cpu, cuda, cuda-cublaslt, auto");
}

}  // namespace fp8lab
