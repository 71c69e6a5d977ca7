#include "reference/check_finite_and_unscale_ref.hpp"

#include <cmath>

#include "reference/loss_scaler_ref.hpp"

namespace fp8lab::ref {

bool check_finite_and_unscale_ref(std::vector<std::vector<double>>& tensors, double scale) {
  const double u = round_to_fp32(1.0 / scale);
  bool found_inf = false;
  for (std::vector<double>& t : tensors)
    for (double& x : t) {
      found_inf = found_inf || !std::isfinite(x);
      x = round_to_fp32(x * u);
    }
  return found_inf;
}

}  // namespace fp8lab::ref
