#pragma once
// --backend cpu|cuda|cuda-cublaslt|auto: cuda (GEMMs by fp8lab's WGMMA kernel) and
// cuda-cublaslt (GEMMs by cuBLASLt) need a build with the CUDA backend and a Hopper device;
// auto takes cuda when both are there and the run needs nothing it lacks, else cpu.
#include <memory>
#include <string_view>

#include "kernels/backend.hpp"

namespace fp8lab {

// needs_gemm: auto falls back to cpu when the CUDA backend cannot run GEMMs yet; an explicit
// cuda that cannot is an error naming why. Throws std::invalid_argument with the reason.
std::unique_ptr<Backend> select_backend(std::string_view name, bool needs_gemm);

}  // namespace fp8lab
