#pragma once
// Quantizing one tensor as `fp8lab quantize` and the Python module's fp8lab.quantize do it:
// the options in their text spellings with their defaults (one place for the CLI's --help and
// the Python keywords), their parsing and the backend. The granularity is the caller's (the
// CLI takes several, and neither front end has a default for it).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kernels/backend.hpp"
#include "kernels/quantization.hpp"

namespace fp8lab {

struct QuantizeRequest {
  std::string format = "e4m3";
  std::string scale = "fp32";
  std::string backend = "auto";
  std::string rounding = "nearest";  // or "stochastic" (kernels/formats/stochastic_rounding.hpp)
  std::optional<std::uint64_t> seed = std::nullopt;  // stochastic only; 0 when not given
};

// A seed as --seed / seed= take it: a whole number from 0 to 2^64 - 1, in decimal; throws
// std::invalid_argument naming --seed.
std::uint64_t parse_seed(std::string_view text);

// A scheme sets format, granularity and scale rule in one word, as the libraries ship them; the
// granularity depends on the operand (activations and gradients, or weights):
//            format  activation, gradient   weight          rule
//   deepseek  e4m3   tile:1x128             block:128x128   fp32      (DeepSeek-V3)
//   mxfp8     e4m3   tile:1x32              tile:1x32       mx:rceil  (torchao / TE MXFP8)
//   mxfp4     e2m1   tile:1x32              tile:1x32       mx        (OCP MX v1.0 FP4)
//   nvfp4     e2m1   tile:1x16              block:16x16     nvfp4     (TE NVFP4: 2-D weight scaling)
struct QuantizeScheme {
  const char* name;
  const char* format;
  const char* granularity;         // activations and gradients
  const char* weight_granularity;  // weights
  const char* scale;
};
// Throws std::invalid_argument listing the schemes.
const QuantizeScheme& find_scheme(std::string_view name);
std::string scheme_names();
// The scheme's granularity for an operand: "activation", "gradient" or "weight"; throws
// std::invalid_argument naming --operand and listing them.
const char* scheme_granularity(const QuantizeScheme& scheme, std::string_view operand);

class QuantizeJob {
 public:
  // Parses the options and selects the backend; throws std::invalid_argument saying why.
  explicit QuantizeJob(const QuantizeRequest& request);

  ElementFormat format() const { return format_; }
  ScaleRule scale_rule() const { return scale_rule_; }
  Rounding rounding() const { return rounding_; }
  Backend& backend() const { return *backend_; }

  // x is rows x cols row-major.
  QuantizedTensor quantize(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                           const Granularity& granularity) const;

 private:
  ElementFormat format_;
  ScaleRule scale_rule_;
  Rounding rounding_;
  std::unique_ptr<Backend> backend_;
};

// The floor max_rel counts elements above when none is given: 1% of the reference's RMS (so
// that near-zero references do not dominate the maximum relative error).
double default_rel_floor(std::span<const float> reference);
double default_rel_floor(std::span<const double> reference);

}  // namespace fp8lab
