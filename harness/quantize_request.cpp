#include "harness/quantize_request.hpp"

#include "harness/backend_select.hpp"
#include "harness/metrics/error_metrics.hpp"

namespace fp8lab {

QuantizeJob::QuantizeJob(const QuantizeRequest& request)
    : format_(parse_element_format(request.format)),
      scale_rule_(parse_scale_rule(request.scale)),
      backend_(select_backend(request.backend, /*needs_gemm=*/false)) {
  check_rule_serves_format(scale_rule_, format_);  // before any input is read
}

QuantizedTensor QuantizeJob::quantize(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                                      const Granularity& granularity) const {
  return backend_->quantize(x, rows, cols, {format_, granularity, scale_rule_});
}

double default_rel_floor(std::span<const float> reference) { return 0.01 * root_mean_square(reference); }
double default_rel_floor(std::span<const double> reference) { return 0.01 * root_mean_square(reference); }

}  // namespace fp8lab
