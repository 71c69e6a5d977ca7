#pragma once
// AdamW with torch.optim.AdamW's semantics (single-tensor CPU path, amsgrad off, maximize
// off), on FP32 master weights, with the moments stored in FP32 or BF16. For step t >= 1,
// learning rate lr (all scalars formed in double, then rounded to FP32 as PyTorch passes a
// Python float to an FP32 tensor op; every FP32 operation rounded once, -ffp-contract=off):
//   p <- p * fl32(1 - lr * wd)                        decoupled weight decay, before the update
//   m <- m + fl32(1 - beta1) * (g - m)                 torch's lerp(m, g, 1 - beta1), unfused
//   v <- v * fl32(beta2) + (fl32(1 - beta2) * g) * g   torch's mul_ then addcmul_
//   denom <- sqrt(v) / fl32(sqrt(1 - beta2^t)) + fl32(eps)    eps outside the sqrt
//   p <- p + (fl32(-lr / (1 - beta1^t)) * m) / denom   torch's addcdiv_: value * t1, then / t2
// The semantics are torch's; its bits are not promised: ATen's vectorized lerp may fuse the
// m-update into one FMA (not checked against torch here), and its kernels may differ elsewhere.
// With BF16 moments (DeepSeek-V3 keeps them in BF16) m and v are computed as above from their
// stored BF16 values and rounded (RNE) back to BF16 for storage; `denom` and the update use the
// FP32 values before that rounding. The FP64 reference (reference/adamw_ref.hpp) computes the
// same update without intermediate roundings.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace fp8lab::train {

enum class MomentFormat { fp32, bf16 };
MomentFormat parse_moment_format(const std::string& text);  // throws std::invalid_argument
const char* moment_format_name(MomentFormat format);

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  MomentFormat moments = MomentFormat::fp32;
  // Throws std::invalid_argument naming the field: betas outside [0, 1), eps <= 0 or weight
  // decay < 0, or any of them not finite.
  void validate() const;
};

// The optimizer state of one parameter tensor: both moments, in their storage format.
class AdamWMoments {
 public:
  AdamWMoments(std::size_t count, MomentFormat format);
  std::size_t size() const { return count_; }
  MomentFormat format() const { return format_; }
  std::size_t bytes() const;  // what the two moments occupy: 2 * count * (4 or 2)
  float m(std::size_t i) const;
  float v(std::size_t i) const;
  void set(std::size_t i, float m, float v);  // rounds to the storage format

 private:
  std::size_t count_;
  MomentFormat format_;
  std::vector<float> m32_, v32_;
  std::vector<std::uint16_t> m16_, v16_;  // BF16 bit patterns
};

// One AdamW update of `param` from `gradient` (same size as the moments), step t >= 1, learning
// rate lr, weight decay `decay` (the config's, or 0 for tensors excluded from decay).
void adamw_update(std::span<float> param, std::span<const float> gradient, AdamWMoments& moments,
                  const AdamWConfig& config, std::int64_t t, double lr, double decay);

}  // namespace fp8lab::train
