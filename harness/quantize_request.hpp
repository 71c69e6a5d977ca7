#pragma once
// Quantizing one tensor as `fp8lab quantize` and the Python module's fp8lab.quantize do it:
// the options in their text spellings with their defaults (one place for the CLI's --help and
// the Python keywords), their parsing and the backend. The granularity is the caller's (the
// CLI takes several, and neither front end has a default for it).
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "kernels/backend.hpp"
#include "kernels/quantization.hpp"

namespace fp8lab {

struct QuantizeRequest {
  std::string format = "e4m3";
  std::string scale = "fp32";
  std::string backend = "auto";
};

class QuantizeJob {
 public:
  // Parses the options and selects the backend; throws std::invalid_argument saying why.
  explicit QuantizeJob(const QuantizeRequest& request);

  ElementFormat format() const { return format_; }
  ScaleRule scale_rule() const { return scale_rule_; }
  Backend& backend() const { return *backend_; }

  // x is rows x cols row-major.
  QuantizedTensor quantize(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                           const Granularity& granularity) const;

 private:
  ElementFormat format_;
  ScaleRule scale_rule_;
  std::unique_ptr<Backend> backend_;
};

// The floor max_rel counts elements above when none is given: 1% of the reference's RMS (so
// that near-zero references do not dominate the maximum relative error).
double default_rel_floor(std::span<const float> reference);
double default_rel_floor(std::span<const double> reference);

}  // namespace fp8lab
