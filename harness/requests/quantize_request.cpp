#include "harness/requests/quantize_request.hpp"

#include <charconv>
#include <stdexcept>
#include <string>

#include "harness/metrics/error_metrics.hpp"
#include "harness/requests/backend_select.hpp"

namespace fp8lab {

namespace {

constexpr QuantizeScheme kSchemes[] = {
    {"deepseek", "e4m3", "tile:1x128", "block:128x128", "fp32"},
    {"mxfp8", "e4m3", "tile:1x32", "tile:1x32", "mx:rceil"},
    {"mxfp4", "e2m1", "tile:1x32", "tile:1x32", "mx"},
    {"nvfp4", "e2m1", "tile:1x16", "block:16x16", "nvfp4"},
};

}  // namespace

std::string scheme_names() {
  std::string names;
  for (const QuantizeScheme& s : kSchemes) names += (names.empty() ? "" : ", ") + std::string(s.name);
  return names;
}

const QuantizeScheme& find_scheme(std::string_view name) {
  for (const QuantizeScheme& s : kSchemes)
    if (name == s.name) return s;
  throw std::invalid_argument("scheme '" + std::string(name) + "' is not one of " + scheme_names());
}

const char* scheme_granularity(const QuantizeScheme& scheme, std::string_view operand) {
  if (operand == "activation" || operand == "gradient") return scheme.granularity;
  if (operand == "weight") return scheme.weight_granularity;
  throw std::invalid_argument("--operand: operand '" + std::string(operand) + "' is not one of activation, gradient, weight");
}

namespace {

// Errors name their option as the CLI spells it (the Python keywords carry the same names).
template <class Parse>
auto parsed_option(const char* option, const std::string& text, Parse parse) {
  try {
    return parse(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(option) + ": " + e.what());
  }
}

// A seed given with nearest rounding would be ignored in silence: refused instead.
Rounding parse_rounding(const QuantizeRequest& request) {
  const RoundingMode mode = parsed_option("--rounding", request.rounding, parse_rounding_mode);
  if (request.seed && mode != RoundingMode::stochastic)
    throw std::invalid_argument("--seed: only --rounding stochastic takes a seed");
  return {mode, request.seed.value_or(0)};
}

}  // namespace

std::uint64_t parse_seed(std::string_view text) {
  std::uint64_t seed = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seed);
  if (text.empty() || error != std::errc() || end != text.data() + text.size())
    throw std::invalid_argument("--seed: '" + std::string(text) + "' is not a whole number from 0 to 2^64 - 1");
  return seed;
}

QuantizeJob::QuantizeJob(const QuantizeRequest& request)
    : format_(parsed_option("--format", request.format, parse_element_format)),
      scale_rule_(parsed_option("--scale", request.scale, parse_scale_rule)),
      rounding_(parse_rounding(request)),
      backend_(select_backend(request.backend, /*needs_gemm=*/false)) {
  check_rule_serves_format(scale_rule_, format_);  // before any input is read
}

QuantizedTensor QuantizeJob::quantize(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                                      const Granularity& granularity) const {
  return backend_->quantize(x, rows, cols, {format_, granularity, scale_rule_, rounding_});
}

double default_rel_floor(std::span<const float> reference) { return 0.01 * root_mean_square(reference); }
double default_rel_floor(std::span<const double> reference) { return 0.01 * root_mean_square(reference); }

}  // namespace fp8lab
