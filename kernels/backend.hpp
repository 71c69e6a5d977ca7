#pragma once
// The operations every backend implements (DESIGN.md section 1): the harness picks one at
// run time (harness/requests/backend_select.hpp: --backend cpu|cuda|auto) and calls only this.
// Contracts are those of kernels/cpu/quantize.hpp, requantize_transposed.hpp and
// gemm_fp8_nt.hpp; results must be bit-identical across backends.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/gemm_fp8_nt.hpp"
#include "kernels/gemm_config.hpp"
#include "kernels/quantization.hpp"

namespace fp8lab {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;    // "cpu", "cuda"
  virtual std::string device() const = 0;  // what it runs on, for provenance
  virtual QuantizedTensor quantize(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                                   const QuantizeConfig& config) = 0;
  virtual QuantizedTensor requantize_transposed(const QuantizedTensor& in) = 0;
  // Empty when gemm_nt works; otherwise why not (checked before a sweep starts).
  virtual std::string gemm_unavailable_reason() const = 0;
  // Empty when gemm_nt runs this configuration (plan_gemm's checks aside); otherwise why not:
  // a GPU engine takes fewer shapes and models than the emulation (a sweep skips the point).
  virtual std::string gemm_config_failure(const QuantizedTensor& a, const QuantizedTensor& b,
                                          const GemmConfig& config) const = 0;
  virtual std::vector<float> gemm_nt(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                                     const cpu::GemmOptions& options) = 0;

  // Which backend's GEMM runs this configuration (when gemm_config_failure is empty): this
  // one's own, or, for a backend that hands what it cannot run to another (--backend auto,
  // harness/requests/backend_select.hpp), that one's name and why this one could not. Recorded per point.
  struct GemmRoute {
    std::string backend;
    std::string fallback_reason;  // empty when the backend itself runs it
  };
  virtual GemmRoute gemm_route(const QuantizedTensor&, const QuantizedTensor&, const GemmConfig&) const {
    return {name(), ""};
  }
};

}  // namespace fp8lab
