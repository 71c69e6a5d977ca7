#pragma once
// Gradient compression with error feedback for simulated data-parallel workers (one of the seed
// techniques, harness/train/seed_techniques.hpp): pure functions over FP32 spans, and
// WorkerCompressor (one per worker), which holds that worker's residuals. The training loop
// all-reduces (averages) what compress() returns.
//
// One worker, one tensor g of n elements, step s:
//   x = fl32(g + r)   with error feedback; r is this worker's residual of this tensor (0 at first)
//   x = g             without it: r stays 0 and takes no memory
//   y = D(C(x))       what the worker sends, decompressed into FP32: compress()'s result
//   r <- fl32(x - y)  with error feedback (Seide et al. 2014, 1-bit SGD; Karimireddy et al. 2019,
//                     EF-SGD): what C dropped this step is added back the next, so over T steps
//                     sum_t y_t + r_T = sum_t g_t up to two FP32 roundings per step.
// The residual is in the units of g: pass unscaled gradients when a loss scale may change.
//
// C, by CompressionConfig::kind:
//   none      y = x; 32 n bits. (error_feedback is accepted and changes nothing: r stays 0.)
//   quantize  symmetric uniform integer quantization, QSGD / 1-bit Adam style (integers times one
//             FP32 scale per group, not a float format). Groups: `block` consecutive elements
//             (block 0: the whole tensor is one group; when block does not divide n, the last
//             group is shorter). With L = 2^(bits-1) - 1 and amax = max |x| over the group:
//               scale = fl32(amax / L)
//               t = fl32(x / scale),  a = |t|
//               a >= L: |q| = L (the clamp to [-L, L]; a exceeds L only by the rounding of
//                       scale, or by far when scale is an FP32 subnormal)
//               nearest:    |q| = a rounded to the nearest integer, ties to even
//               stochastic: |q| = lo + 1 if u < F else lo, where lo = floor(a) and
//                           F = floor(2^32 (a - lo)), u the element's 32-bit draw (below):
//                           QSGD's floor(a + v), v uniform on [0, 1), in distribution, up to F's
//                           truncation; so a - 2^-32 < E[|q|] <= a (below the clamp), and E[q scale]
//                           is x to within that and t's rounding (2^-24 |x|)
//               q carries t's sign;  y = fl32(q * scale)
//             amax 0, or a scale that underflows to 0 (amax <= L 2^-150), sends q = 0 (y = +0).
//             The stochastic rounding is that of kernels/formats/stochastic_rounding.hpp with a
//             spacing of 1; it is written out here because those functions round to a float
//             format's grid, not to the integers.
//             Bits: bits * n + 32 per group (the FP32 scale).
//   topk      keeps the k = topk_count(n, topk_ratio) largest |x|, ties to the lower index (so the
//             kept set is unique and the same on every machine); the others are sent as +0.
//             Bits: k * (32 + 32), an FP32 value and a 32-bit index per kept element (so a ratio
//             above 1/2 costs more than sending the tensor uncompressed). n must be < 2^32.
// Compression ratio = bits sent / (32 * elements): 1 for none, (8 n + 32) / (32 n) for 8-bit
// quantize with one scale per tensor, 2 k / n for topk.
//
// Stochastic draws. For element i of tensor `tensor` on worker `worker` at step `step`:
//   stream = mix(mix(mix(seed, step), worker), tensor), mix(z, v) = splitmix64_mix(z + (v + 1) gamma)
//   (the (v + 1)-th SplitMix64 output seeded with z, all arithmetic mod 2^64), and
//   u = stochastic_draw(stream, i), the draw of kernels/formats/stochastic_rounding.hpp, with i the
//   element's index in the whole tensor (not in its group).
// So the draws depend on (seed, step, worker, tensor, i) alone: not on call order, thread count,
// or what was compressed before. Nearest rounding and topk never read them.
//
// Non-finite x (an overflowed step under dynamic loss scaling): compress() returns x unchanged, so
// the overflow check after the all-reduce sees it and skips the step, and leaves the residual as it
// was (a skipped step must not poison every later one); the bits are counted as configured. The
// pure quantize_groups / select_topk throw std::invalid_argument on non-finite input instead.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/formats/stochastic_rounding.hpp"

namespace fp8lab::train {

enum class CompressionKind { none, quantize, topk };

// "none", "quantize", "topk"; the parse throws std::invalid_argument starting "compression: ".
CompressionKind parse_compression_kind(const std::string& text);
const char* compression_kind_name(CompressionKind kind);
// "nearest", "stochastic"; the parse throws std::invalid_argument starting "compression_rounding: ".
RoundingMode parse_compression_rounding(const std::string& text);
const char* compression_rounding_name(RoundingMode mode);

struct CompressionConfig {
  CompressionKind kind = CompressionKind::none;
  int bits = 8;                // quantize: 4..16
  std::int64_t block = 0;      // quantize: 0 = one scale per tensor, else elements per scale
  RoundingMode rounding = RoundingMode::nearest;  // quantize only
  double topk_ratio = 0.01;    // topk: fraction of each tensor's elements sent, in (0, 1]
  bool error_feedback = true;
  std::uint64_t seed = 0;      // stochastic rounding only

  // Throws std::invalid_argument whose message starts with the spec's field name
  // (compression_bits, compression_block, topk_ratio). Only the fields the kind reads are
  // checked, as LrSchedule does: a spec reader that wants unused keys refused does so itself.
  void validate() const;
};

// k = max(1, ceil(ratio * n)), at most n (0 for n = 0). ratio usually comes from decimal text, whose
// binary value lies just above or below it (0.07 * 100 is 7.000000000000001 in double): a
// product within 1e-9 relative of an integer counts as that integer, so 0.07 of 100 elements is 7, not 8.
std::int64_t topk_count(std::int64_t n, double ratio);

// Bits one tensor of n elements costs under `config` (the table above).
std::uint64_t compressed_bits(const CompressionConfig& config, std::int64_t n);
// bits / (32 * elements); 1 when elements is 0 (nothing sent, nothing saved).
double compression_ratio(std::uint64_t bits, std::uint64_t elements);
double compression_ratio(const CompressionConfig& config, std::int64_t n);

// The stream seed of one (step, worker, tensor); see "Stochastic draws" above.
std::uint64_t compression_stream(std::uint64_t seed, std::int64_t step, std::size_t worker, std::size_t tensor);

// quantize, as sent: n codes in [-L, L] and one FP32 scale per group.
struct QuantizedGroups {
  std::vector<std::int32_t> q;
  std::vector<float> scales;  // scales[i / group] is element i's
  std::int64_t group = 0;     // elements per group: block, or n for block 0
};
QuantizedGroups quantize_groups(std::span<const float> x, int bits, std::int64_t block, RoundingMode rounding,
                                std::uint64_t stream);
void dequantize_groups(const QuantizedGroups& quantized, std::span<float> out);  // out: q.size() elements

// topk, as sent: the kept indices, increasing, and their values.
struct TopKSelection {
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
};
TopKSelection select_topk(std::span<const float> x, std::int64_t k);
void scatter_topk(const TopKSelection& selection, std::span<float> out);  // +0 where nothing was kept

// y = D(C(x)) for any kind (stream: quantize's stochastic draws). out.size() == x.size().
void compress_decompress(const CompressionConfig& config, std::span<const float> x, std::uint64_t stream,
                         std::span<float> out);

// What one worker sends of one tensor: the decompressed values (what the all-reduce averages) and
// the bits the compressed message costs.
struct CompressedTensor {
  std::vector<float> values;
  std::uint64_t bits_sent = 0;
};

// One simulated data-parallel worker: its residual per tensor and what it sent. A tensor is known
// by its index; the first compress() (or restore_residual()) of an index fixes its size, and with
// error feedback (and a kind other than none) allocates its FP32 residual, zero.
class WorkerCompressor {
 public:
  // Throws std::invalid_argument on a bad config (CompressionConfig::validate).
  WorkerCompressor(const CompressionConfig& config, std::size_t worker);

  // y for this worker's `gradient` of `tensor` at `step`; updates the residual and the bits sent.
  // Throws std::invalid_argument when the size differs from the tensor's first call.
  CompressedTensor compress(std::size_t tensor, std::span<const float> gradient, std::int64_t step);
  // The same into `out` (gradient.size() elements; it may be the gradient itself); returns the bits.
  std::uint64_t compress_into(std::size_t tensor, std::span<const float> gradient, std::int64_t step,
                              std::span<float> out);

  // Bits and elements sent by the calls that carried the latest step (a call with another step
  // starts the count again), and over the compressor's life.
  std::uint64_t step_bits() const { return step_bits_; }
  std::uint64_t step_elements() const { return step_elements_; }
  std::uint64_t total_bits() const { return total_bits_; }
  std::uint64_t total_elements() const { return total_elements_; }
  double step_compression_ratio() const { return compression_ratio(step_bits_, step_elements_); }

  // The memory error feedback costs: 4 bytes per element of every tensor seen, 0 without it.
  std::size_t residual_bytes() const;
  // A tensor's residual: empty without error feedback or for a tensor not seen yet.
  std::span<const float> residual(std::size_t tensor) const;
  // Sets a tensor's residual (a checkpoint's); an unseen tensor takes values.size() as its size,
  // a seen one must have that size. Without error feedback only an empty span is accepted.
  void restore_residual(std::size_t tensor, std::span<const float> values);

  const CompressionConfig& config() const { return config_; }
  std::size_t worker() const { return worker_; }
  std::size_t tensor_count() const { return sizes_.size(); }  // 1 + the largest index seen

 private:
  bool keeps_residuals() const { return config_.error_feedback && config_.kind != CompressionKind::none; }
  void register_tensor(std::size_t tensor, std::size_t n);

  CompressionConfig config_;
  std::size_t worker_;
  std::vector<std::int64_t> sizes_;            // per tensor index; -1 until seen
  std::vector<std::vector<float>> residuals_;  // per tensor index; empty without error feedback
  std::vector<float> x_;                       // g + r, reused across calls
  bool has_step_ = false;
  std::int64_t step_ = 0;
  std::uint64_t step_bits_ = 0, step_elements_ = 0, total_bits_ = 0, total_elements_ = 0;
};

}  // namespace fp8lab::train
