#pragma once
// FP64 reference of one AdamW step, written from the algorithm as Loshchilov & Hutter (2019)
// and the torch.optim.AdamW documentation state it (no code shared with harness/train/adamw):
//   theta <- theta - lr * lambda * theta
//   m <- beta1 m + (1 - beta1) g;   v <- beta2 v + (1 - beta2) g^2
//   m_hat = m / (1 - beta1^t);      v_hat = v / (1 - beta2^t)
//   theta <- theta - lr * m_hat / (sqrt(v_hat) + eps)
// in double, in this order, element by element.
#include <cstdint>
#include <vector>

namespace fp8lab::ref {

struct AdamWRefState {
  std::vector<double> theta, m, v;
};

void adamw_ref_step(AdamWRefState& state, const std::vector<double>& gradient, double lr, double beta1, double beta2,
                    double eps, double weight_decay, std::int64_t t);

}  // namespace fp8lab::ref
