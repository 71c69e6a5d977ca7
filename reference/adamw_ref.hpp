#pragma once
// FP64 reference of one AdamW step, written from the algorithm as Loshchilov & Hutter (2019)
// and the torch.optim.AdamW documentation state it (no code shared with harness/train/adamw):
//   theta <- theta - lr * lambda * theta
//   m <- beta1 m + (1 - beta1) g;   v <- beta2 v + (1 - beta2) g^2
//   m_hat = m / (1 - beta1^t);      v_hat = v / (1 - beta2^t)
//   theta <- theta - lr * m_hat / (sqrt(v_hat) + eps)
// in double, in this order, element by element.
//
// Moment storage (the FP8 moment formats of harness/train/adamw.hpp), from its definition: the
// tensor's elements in groups of `group` consecutive ones (the last possibly shorter); per group
// amax = max |x|, scale s = 2^k with k the smallest integer >= -126 such that fmt_max 2^k >= amax
// (found by counting k up, no logarithm, no bit patterns); s = 1 for amax = 0; s = NaN when a value
// is not finite or amax > 2^127 (the harness's guard against overflowing FP32 on decode); each
// element x / s rounded to nearest even in the format (reference/float_formats_ref's
// round_to_format, saturating), decoded as that times s. The step with stored moments is the
// step above, then m and v replaced by their stored values: denom and the update use the moments
// before storage.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "reference/float_formats_ref.hpp"

namespace fp8lab::ref {

struct AdamWRefState {
  std::vector<double> theta, m, v;
};

void adamw_ref_step(AdamWRefState& state, const std::vector<double>& gradient, double lr, double beta1, double beta2,
                    double eps, double weight_decay, std::int64_t t);

double pow2_group_scale_ref(double amax, const FormatDefinition& format);

struct Pow2GroupsRef {
  std::vector<double> scales;         // one per group
  std::vector<double> elements;       // x / s rounded to the format (NaN in a NaN-scale group)
  std::vector<double> values;         // elements * s: what the stored moment decodes to
  std::vector<std::uint32_t> codes;   // the elements' codes (0 in a NaN-scale group)
};

// group = 0: one group, the whole tensor (which then has one scale even when empty).
Pow2GroupsRef quantize_pow2_groups_ref(const std::vector<double>& x, std::size_t group, const FormatDefinition& format);

struct MomentStorageRef {
  const FormatDefinition* m_format = nullptr;  // null: that moment kept in FP64, unrounded
  const FormatDefinition* v_format = nullptr;
  std::size_t group = 0;                       // elements per scale; 0: one per tensor
};

void adamw_ref_step_stored(AdamWRefState& state, const std::vector<double>& gradient, double lr, double beta1,
                           double beta2, double eps, double weight_decay, std::int64_t t,
                           const MomentStorageRef& storage);

}  // namespace fp8lab::ref
