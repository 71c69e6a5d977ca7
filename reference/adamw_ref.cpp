#include "reference/adamw_ref.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace fp8lab::ref {

void adamw_ref_step(AdamWRefState& state, const std::vector<double>& gradient, double lr, double beta1, double beta2,
                    double eps, double weight_decay, std::int64_t t) {
  if (gradient.size() != state.theta.size() || state.m.size() != state.theta.size() || state.v.size() != state.theta.size())
    throw std::invalid_argument("adamw_ref_step: sizes differ");
  const double t_real = static_cast<double>(t);
  for (std::size_t i = 0; i < state.theta.size(); ++i) {
    const double g = gradient[i];
    double theta = state.theta[i];
    theta = theta - lr * weight_decay * theta;
    state.m[i] = beta1 * state.m[i] + (1.0 - beta1) * g;
    state.v[i] = beta2 * state.v[i] + (1.0 - beta2) * g * g;
    const double m_hat = state.m[i] / (1.0 - std::pow(beta1, t_real));
    const double v_hat = state.v[i] / (1.0 - std::pow(beta2, t_real));
    state.theta[i] = theta - lr * m_hat / (std::sqrt(v_hat) + eps);
  }
}

double pow2_group_scale_ref(double amax, const FormatDefinition& format) {
  if (!std::isfinite(amax) || amax > std::ldexp(1.0, 127)) return std::numeric_limits<double>::quiet_NaN();
  if (amax == 0.0) return 1.0;
  int k = -126;
  while (std::ldexp(format.max_finite, k) < amax) ++k;
  return std::ldexp(1.0, k);
}

Pow2GroupsRef quantize_pow2_groups_ref(const std::vector<double>& x, std::size_t group,
                                       const FormatDefinition& format) {
  const std::size_t n = x.size();
  const std::size_t size = group == 0 ? std::max<std::size_t>(n, 1) : group;
  const std::size_t groups = group == 0 ? 1 : (n + group - 1) / group;
  Pow2GroupsRef r{std::vector<double>(groups), std::vector<double>(n), std::vector<double>(n),
                  std::vector<std::uint32_t>(n)};
  for (std::size_t j = 0; j < groups; ++j) {
    const std::size_t begin = j * size, end = std::min(n, begin + size);
    double amax = 0.0;
    for (std::size_t i = begin; i < end; ++i)
      amax = std::isnan(x[i]) ? x[i] : std::max(amax, std::fabs(x[i]));  // a NaN stays
    const double s = pow2_group_scale_ref(amax, format);
    r.scales[j] = s;
    for (std::size_t i = begin; i < end; ++i) {
      const double element = std::isnan(s) ? s : round_to_format(x[i] / s, format, true);
      r.elements[i] = element;
      r.values[i] = element * s;
      r.codes[i] = std::isnan(s) ? 0u : code_of_value(element, format);
    }
  }
  return r;
}

void adamw_ref_step_stored(AdamWRefState& state, const std::vector<double>& gradient, double lr, double beta1,
                           double beta2, double eps, double weight_decay, std::int64_t t,
                           const MomentStorageRef& storage) {
  adamw_ref_step(state, gradient, lr, beta1, beta2, eps, weight_decay, t);
  if (storage.m_format) state.m = quantize_pow2_groups_ref(state.m, storage.group, *storage.m_format).values;
  if (storage.v_format) state.v = quantize_pow2_groups_ref(state.v, storage.group, *storage.v_format).values;
}

}  // namespace fp8lab::ref
