#pragma once
// AdamW with torch.optim.AdamW's semantics (single-tensor CPU path, amsgrad off, maximize
// off), on FP32 master weights, with the moments stored in FP32, BF16 or FP8 (below). For step
// t >= 1, learning rate lr (all scalars formed in double, then rounded to FP32 as PyTorch passes
// a Python float to an FP32 tensor op; every FP32 operation rounded once, -ffp-contract=off):
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
//
// FP8 moments (one of the seed techniques, harness/train/seed_techniques.hpp): both moments as
// one-byte codes with power-of-two scales, one scale per group of consecutive elements of the
// flattened tensor:
//   e4m3        m and v in E4M3, one scale per tensor each;
//   e4m3_1x128  m and v in E4M3, one scale per group of 128 elements (a ragged last group is the
//               tail): COAT's group quantization of the optimizer states (arXiv 2410.19313),
//               without its dynamic-range expansion (x -> sign(x) |x|^k before quantizing), which
//               is not implemented here;
//   e4m3_e5m2   m in E4M3, v in E5M2 (v spans twice the octaves of m), one scale per tensor each
//               (Fishman et al., arXiv 2409.12517).
// A group's scale is s = 2^k, k = ceil(log2(amax / fmt_max)) (amax = max |x| over the group),
// i.e. the smallest power of two with amax / s <= fmt_max, but at least 2^-126 so that s is a
// normal FP32 and every code times s is exact in FP32; an all-zero group gets s = 1. The code of x
// is encode(x / s), RNE, satfinite (never reached: |x / s| <= fmt_max). A non-finite value, or an
// amax above 2^127 (where a code times s could round past FP32's largest value), makes the group's
// scale NaN: the whole group decodes to NaN, and the run's non-finite checks see it.
// Powers of two make the storage a projection: quantizing the decoded moments again (a checkpoint
// holds them decoded, its restore assigns them) gives the same decoded values, bit for bit; the
// codes and scales are the same too except in one case, where the scale halves and the codes
// double (the proof and the case: adamw.cpp, quantize_groups).
// As with BF16, the step computes the new m, v in FP32 from the decoded moments and uses those
// FP32 values, before storage, for denom and the update; then it quantizes the tensor's new
// moments group by group.
// A finding to be measured, not hidden: v spans the square of g's range, far more than E4M3's
// ~18 octaves (448 down to 2^-9), so with one scale per tensor the small v of elements with small
// gradients flush to zero. The step that stores them is unaffected (it uses FP32 values), but the
// next step starts from v = 0: v' = (1 - beta2) g^2 only, while m (whose range is g's, not g^2's)
// often survives, so that element's update is as if beta2 were 0:
// lr / bc1 * |m| / (sqrt((1 - beta2) / bc2) |g| + eps), large where the new g is small, up to
// lr / bc1 * |m| / eps where it is 0. Group scales (1x128) and E5M2 for v (~32 octaves: 57344 down
// to 2^-16) narrow this; nothing here corrects it. tests/unit/adamw_moment_formats_test.cpp shows
// it: of 4096 run-like v (adamw_test's tensor) 42% flush with e4m3, 13% with e4m3_1x128, 1.6% with
// e4m3_e5m2, and at t = 1000 their updates reach 40 to 70x the FP32-moment ones.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace fp8lab::train {

enum class MomentFormat { fp32, bf16, e4m3, e4m3_1x128, e4m3_e5m2 };
// Throws std::invalid_argument listing every accepted name ("fp8" is not one: it does not say
// which FP8 storage).
MomentFormat parse_moment_format(const std::string& text);
const char* moment_format_name(MomentFormat format);

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  MomentFormat moments = MomentFormat::fp32;
  // Throws std::invalid_argument naming the field: betas outside [0, 1), eps <= 0 or weight
  // decay < 0, or any of them not finite.
  void validate() const;
};

// Elements per scale of e4m3_1x128.
inline constexpr std::size_t kMomentGroupSize = 128;

// The FP32 operations of one element's step in adamw_update, as written (the storage rounding not
// counted): p * keep (1); m: g - m, * (1 - beta1), + m (3); v: v * beta2, (1 - beta2) * g, * g,
// + (4); denom: sqrt, / sqrt(bc2), + eps (3); the update: step * m, / denom, p + (3). 14 in all,
// sqrt and division counted as one each. A masked-out element with frozen moments costs none of
// them; one whose moments track costs the 7 of m and v (kAdamWMomentFlopsPerElement).
inline constexpr double kAdamWFlopsPerElement = 14.0;
inline constexpr double kAdamWMomentFlopsPerElement = 7.0;

// The optimizer state of one parameter tensor: both moments, in their storage format.
class AdamWMoments {
 public:
  AdamWMoments(std::size_t count, MomentFormat format);  // all moments 0
  std::size_t size() const { return count_; }
  MomentFormat format() const { return format_; }
  // What the two moments occupy, exactly: 2 * count * 4 (fp32) or 2 (bf16); for the FP8 formats
  // per moment count code bytes plus 4 bytes per FP32 scale (1 per tensor, or ceil(count / 128)).
  std::size_t bytes() const;
  float m(std::size_t i) const;  // decoded (exact: code times scale)
  float v(std::size_t i) const;
  // Both moments of every element, quantizing whole groups (all formats; sizes must be size()).
  void assign(std::span<const float> m, std::span<const float> v);
  // One element, rounded to the storage format: fp32 and bf16 only. The FP8 formats throw
  // std::logic_error: an element's code depends on its whole group's scale (use assign).
  void set(std::size_t i, float m, float v);

  // The FP8 formats' storage, for tests and checkpoints of the codes (empty for fp32 / bf16):
  // codes in element order, scales in group order (elements [j g, (j + 1) g) share scale j).
  std::size_t group_size() const { return group_; }
  std::span<const std::uint8_t> m_codes() const { return m8_; }
  std::span<const std::uint8_t> v_codes() const { return v8_; }
  std::span<const float> m_scales() const { return m_scale_; }
  std::span<const float> v_scales() const { return v_scale_; }

 private:
  bool fp8() const;
  std::size_t count_;
  MomentFormat format_;
  std::size_t group_ = 1;  // elements per scale (FP8 formats)
  std::vector<float> m32_, v32_;
  std::vector<std::uint16_t> m16_, v16_;  // BF16 bit patterns
  std::vector<std::uint8_t> m8_, v8_;     // FP8 codes
  std::vector<float> m_scale_, v_scale_;  // FP8 group scales, powers of two
};

// Dynamic sparse updates: which elements of a tensor this step updates (size = the tensor's).
// selected[i] != 0: the normal update. selected[i] == 0: the parameter is left as it is (no weight
// decay either); its moments are left as they are (frozen_moments_track false) or updated from g
// as usual (true: the moments keep tracking the gradient while the weight waits). With the FP8
// formats a left moment still shares its group's scale: when other elements of its group change
// the scale, its code is re-rounded to the new one (its group is quantized again from the decoded
// values, which leaves an all-left group's values bit-identical, see above).
struct UpdateMask {
  std::span<const std::uint8_t> selected;
  bool frozen_moments_track = false;
};

// One AdamW update of `param` from `gradient` (same size as the moments), step t >= 1, learning
// rate lr, weight decay `decay` (the config's, or 0 for tensors excluded from decay), only where
// `mask` selects (all elements when it is null).
void adamw_update(std::span<float> param, std::span<const float> gradient, AdamWMoments& moments,
                  const AdamWConfig& config, std::int64_t t, double lr, double decay,
                  const UpdateMask* mask = nullptr);

}  // namespace fp8lab::train
