#pragma once
// FP64 reference of gradient compression (the definition: harness/train/gradient_compression.hpp),
// written from the definition and sharing no code with harness/ or kernels/:
// - symmetric integer quantization: L = 2^(bits-1) - 1; per group scale = fl32(amax / L) (the one
//   FP32 rounding the definition has: the scale is sent as FP32); t = x / scale in FP64 (not
//   rounded to FP32, which is where the module may differ, by one step, at near-ties); |q| = L when
//   |t| >= L, else |t| rounded to an integer by comparing its fraction with 1/2 (ties to even) or,
//   stochastically, going up when the draw u < floor(2^32 frac); value = q * scale, exact in FP64
//   (|q| < 2^15 times a 24-bit scale), so the module's FP32 output is fl32(value);
// - top-k: all indices sorted by |x| decreasing with a stable sort (so ties keep the lower index
//   first), the first k kept;
// - the draw of element i: SplitMix64 written out here, stream = out(out(out(seed, step + 1),
//   worker + 1), tensor + 1) with out(s, m) the m-th SplitMix64 output seeded with s, then
//   stochastic_draw_ref(stream, i) (reference/stochastic_rounding_ref).
#include <cstdint>
#include <vector>

namespace fp8lab::ref {

// Where a stochastic draw belongs.
struct CompressionDrawRef {
  std::uint64_t seed = 0;
  std::int64_t step = 0;
  std::uint64_t worker = 0, tensor = 0;
};

std::uint64_t compression_stream_ref(const CompressionDrawRef& at);
std::uint32_t compression_draw_ref(const CompressionDrawRef& at, std::uint64_t index);

struct SymmetricQuantizedRef {
  std::vector<std::int64_t> q;   // per element, in [-L, L]
  std::vector<double> scales;    // per group (FP32 values)
  std::vector<double> values;    // q * scale, exact
};

// block 0: one group; otherwise groups of `block` consecutive elements, the last one shorter.
// x must be finite (FP32 values held in doubles).
SymmetricQuantizedRef quantize_symmetric_ref(const std::vector<double>& x, int bits, std::int64_t block,
                                             bool stochastic, const CompressionDrawRef& at);

struct TopKRef {
  std::vector<std::int64_t> indices;  // kept, increasing
  std::vector<double> values;         // the dense result: x at kept indices, 0 elsewhere
};

TopKRef topk_ref(const std::vector<double>& x, std::int64_t k);

}  // namespace fp8lab::ref
