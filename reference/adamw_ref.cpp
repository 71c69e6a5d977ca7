#include "reference/adamw_ref.hpp"

#include <cmath>
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

}  // namespace fp8lab::ref
