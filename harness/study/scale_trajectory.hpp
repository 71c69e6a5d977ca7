#pragma once
// A short training run of the engine (kernels/train) under dynamic loss scaling, for the
// scale_trajectory study. Every step:
//   1. forward and backward of the fp16 recipe on the real stories260K weights being trained,
//      the loss multiplied by the scale (StepInput::loss_scale: dLoss/dlogits times S);
//   2. optionally a synthetic overflow: +inf written into one gradient element (tensor and
//      element drawn from mt19937_64(seed * 1000003 + step)) on every overflow_every-th step;
//   3. the fused check-finite-and-unscale (kernels/cpu/check_finite_and_unscale.hpp) over every
//      gradient tensor with fl32(1/S), its found-inf flag through the memory ledger;
//   4. the scaler's update(found_inf): the optimizer step is skipped when it says so, else plain
//      SGD (kernels/train/sgd.hpp) on every weight.
// Variants:
//   pytorch, megatron  kernels/loss_scaling LossScaler with that preset's rules;
//   fp8_delayed        FP8 per-tensor delayed scaling of the gradient tensors
//                      (kernels/loss_scaling/delayed_scaling.hpp): the backward runs at a fixed
//                      loss scale (static, as before dynamic scaling), the unscaled gradients are
//                      checked (an inf skips the step), then every linear weight gradient (the
//                      RMSNorm gains stay FP32) is cast to the
//                      FP8 format with its own scale from its amax history, q = sat(fl32(g s)),
//                      and the optimizer applies fl32(decode(q) * fl32(1/s)); each tensor's
//                      history then records amax(g). The recorded `scale` is that of one tensor.
// Tokens: each step a window of `tokens` positions from the model's own greedy continuation of
// BOS (harness/metrics/train_step_errors stories260k_greedy_tokens, `stream_tokens` long), at an offset
// drawn from mt19937_64(seed).
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/loss_scaling/delayed_scaling.hpp"
#include "kernels/loss_scaling/loss_scaler_config.hpp"
#include "kernels/train/attention_kind.hpp"

namespace fp8lab {

struct TrajectoryConfig {
  std::string variant = "pytorch";  // pytorch, megatron, fp8_delayed
  LossScalerConfig scaler;          // pytorch / megatron
  DelayedScalingConfig delayed{Fp8Format::e5m2, 16};
  std::string delayed_tensor = "L2.w1";  // whose delayed scale is recorded
  double delayed_loss_scale = 1024.0;    // the fixed loss scale of the fp8_delayed runs
  std::int64_t steps = 200;
  std::int64_t tokens = 64, stream_tokens = 160;
  float learning_rate = 0.05f;
  std::int64_t overflow_every = 0;  // 0: no injected overflow
  std::uint64_t seed = 1;
  // The engine step's attention: naive by default, so that the study's committed figures stay
  // reproducible (kernels/train/attention_kind.hpp).
  train::AttentionKind attention = train::AttentionKind::naive;
};

struct Trajectory {
  // Per step (the scale used in that step's backward, or the recorded tensor's delayed scale).
  std::vector<double> scale, found_inf, skipped, loss, saturated_tensors;
};

// Throws std::invalid_argument for an unknown variant or tensor, or a config the scaler refuses.
Trajectory run_scale_trajectory(const TrajectoryConfig& config);

}  // namespace fp8lab
