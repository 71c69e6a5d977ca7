#pragma once
// --backend cpu|cuda|cuda-cublaslt|auto: cuda (GEMMs by fp8lab's WGMMA kernel) and
// cuda-cublaslt (GEMMs by cuBLASLt) need a build with the CUDA backend and a CUDA device;
// auto takes cuda on a Hopper GPU, with the CPU emulation running every GEMM the CUDA engine
// cannot (with_fallback below), and the CPU backend alone elsewhere. An explicit
// cuda or cuda-cublaslt runs only what its engine takes: a study skips the rest, saying why.
#include <memory>
#include <string_view>

#include "kernels/backend.hpp"

namespace fp8lab {

// needs_gemm: an explicit cuda whose GEMMs cannot run here (no Hopper GPU) is an error naming
// why. A CUDA install that is present but broken (driver/runtime mismatch) is an error for
// cuda and for auto alike, never a silent "no GPU". Throws std::invalid_argument with the reason.
std::unique_ptr<Backend> select_backend(std::string_view name, bool needs_gemm);

// A backend that runs each GEMM on `primary` when primary can run it (gemm_unavailable_reason
// and gemm_config_failure both empty) and on `fallback` otherwise, so a point the primary's
// engine refuses (e.g. --accum fp32 on the tensor cores) is computed, not skipped;
// gemm_route says per point which ran it and why. Quantization stays on the primary (every
// backend quantizes bit-identically). name() is "<primary>+<fallback>", e.g. "cuda+cpu".
std::unique_ptr<Backend> with_fallback(std::unique_ptr<Backend> primary, std::unique_ptr<Backend> fallback);

}  // namespace fp8lab
