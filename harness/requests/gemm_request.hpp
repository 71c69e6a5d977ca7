#pragma once
// One quantized GEMM as `fp8lab gemm` and the Python module's fp8lab.gemm run it: the options
// in their text spellings with their defaults (one place: the CLI's --help shows them and the
// Python keywords take them), their parsing, and the run on FP32 operands already in memory.
// Both front ends call this, so they refuse the same mistakes with the same messages and
// compute the same bits.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "harness/metrics/gemm_errors.hpp"
#include "kernels/backend.hpp"
#include "kernels/gemm_config.hpp"
#include "kernels/quantization.hpp"

namespace fp8lab {

struct GemmRequest {
  std::string a_granularity = "tile:1x128";
  std::string b_granularity = "block:128x128";
  std::string format = "e4m3";  // A's, and B's unless b_format names another (e2m1/e3m2/e2m3 under b200)
  std::string b_format;         // empty: the same as format; else a mix (E5M2 dY x E4M3 W, as TE's HYBRID)
  std::string scale = "fp32";
  std::string accum;      // empty: the scheme's (b200 for mxfp8, mxfp4, nvfp4), else hopper
  std::string promotion;  // empty: the model's default (never for b200, else 128)
  std::string output = "fp32";
  int threads = 0;  // 0: all cores
  std::string backend = "auto";
  bool ignore_memory_limit = false;
  // A scheme (harness/requests/quantize_request.hpp: deepseek, mxfp8, mxfp4, nvfp4) replaces format,
  // b_format, both granularities (A's the activation one, B's the weight one) and scale; the
  // front ends refuse it beside them.
  std::string scheme;
  // Transformer Engine's 16 x 16 Random Hadamard Transform (kernels/hadamard_transform.hpp)
  // applied to A and B along K before they are quantized; K must be a multiple of 16. The
  // exact product is unchanged ((A M)(B M)^T = A B^T), so the errors stay against the
  // untransformed originals and measure what the transform does to quantization.
  bool rht = false;
  // Each operand's element rounding, as the quantizer's --rounding / --seed (kernels/formats/
  // stochastic_rounding.hpp): "nearest", or "stochastic" with a seed (0 when not given), as a
  // recipe's a_rounding / b_rounding round gradients. A seed with nearest rounding is refused.
  std::string a_rounding = "nearest", b_rounding = "nearest";
  std::optional<std::uint64_t> a_seed, b_seed;
};

// What an empty accum / promotion means for a request, in their spellings.
std::string default_accum(const std::string& scheme);

// A row-major FP32 operand the caller owns; `label` names it in messages (a file path in the
// CLI, the argument name in Python).
struct GemmOperand {
  std::span<const float> values;
  std::int64_t rows = 0, cols = 0;
  std::string label;
};

struct GemmResult {
  QuantizedTensor qa, qb;
  GemmPlan plan;
  Backend::GemmRoute route;
  std::vector<float> out;  // rows.size() x cols.size() (all when empty), row-major
  double seconds = 0;      // of the GEMM alone
  std::optional<GemmErrors> errors;
};

class GemmJob {
 public:
  // Parses every option and selects the backend; throws std::invalid_argument saying why.
  explicit GemmJob(const GemmRequest& request);

  ElementFormat format() const { return format_; }      // A's
  ElementFormat b_format() const { return b_format_; }  // B's (format() unless --b-format names another)
  ScaleRule scale_rule() const { return scale_rule_; }
  const GemmRequest& request() const { return request_; }  // with the scheme and defaults spelled out
  const GemmConfig& config() const { return config_; }
  const Granularity& a_granularity() const { return a_granularity_; }
  const Granularity& b_granularity() const { return b_granularity_; }
  Backend& backend() const { return *backend_; }

  // Checks that A (M x K) and B (N x K) share K and that the work fits in memory, transforms
  // both when rht (refusing K not a multiple of 16), quantizes both, refuses an invalid combination (plan_gemm, the backend's own limits), and computes
  // the selected outputs (rows, cols: sorted indices, empty = all), with gemm_errors when
  // asked. Throws std::invalid_argument for every refusal.
  GemmResult run(const GemmOperand& a, const GemmOperand& b, const std::vector<std::int64_t>& rows,
                 const std::vector<std::int64_t>& cols, bool with_errors) const;

 private:
  GemmRequest request_;
  ElementFormat format_, b_format_;
  ScaleRule scale_rule_;
  GemmConfig config_;
  Granularity a_granularity_, b_granularity_;
  Rounding a_rounding_, b_rounding_;
  std::unique_ptr<Backend> backend_;
};

}  // namespace fp8lab
