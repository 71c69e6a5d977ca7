#include "kernels/train/fp8_operand_stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "kernels/cpu/quantize.hpp"
#include "kernels/formats/float_formats.hpp"

namespace fp8lab::train {
namespace {

// A tally's rows in chunks of this many, on the thread team from this many elements.
constexpr std::int64_t kTallyChunkRows = 16;
constexpr std::int64_t kParallelTallyElements = std::int64_t{1} << 16;

// Whether unclamped round-to-nearest-even of `scaled` leaves F's finite range.
template <class F>
bool clipped(float scaled) {
  return (encode<F>(std::fabs(scaled), Saturation::nosat) & 0x7Fu) > F::max_finite_code;
}

}  // namespace

void OperandTally::add(const OperandTally& o) {
  signal += o.signal;
  noise += o.noise;
  elements += o.elements;
  saturated += o.saturated;
  flushed += o.flushed;
}

double OperandTally::sqnr_db() const {
  if (elements == 0) return std::numeric_limits<double>::quiet_NaN();
  if (noise == 0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal / noise);
}

void OperandRange::add(const OperandRange& o) {
  amax = std::max(amax, o.amax);
  scale_min = std::min(scale_min, o.scale_min);
  scale_max = std::max(scale_max, o.scale_max);
}

OperandRange operand_range(const QuantizedTensor& q, std::span<const float> source) {
  OperandRange r;
  for (const float x : source) r.amax = std::max(r.amax, static_cast<double>(std::fabs(x)));
  for (const float s : q.scales) {
    const double effective = static_cast<double>(s) * q.tensor_scale.decode;
    r.scale_min = std::min(r.scale_min, effective);
    r.scale_max = std::max(r.scale_max, effective);
  }
  return r;
}

GemmOperandTally& Fp8OperandStats::entry(const std::string& layer, GemmKind kind) {
  for (GemmOperandTally& e : entries_)
    if (e.layer == layer && e.kind == kind) return e;
  entries_.push_back({layer, kind, {}, {}});
  return entries_.back();
}

void tally_operand(const QuantizedTensor& q, std::span<const float> source, OperandTally& tally,
                   std::span<const float> quantizer_input, float multiplier) {
  if (quantizer_input.empty()) quantizer_input = source;
  if (source.size() != static_cast<std::size_t>(q.rows * q.cols) || quantizer_input.size() != source.size())
    throw std::logic_error("tally_operand: the source is not the quantized tensor's size");
  const std::vector<float> restored = cpu::dequantize(q);
  const ElementFormat format = q.config.format;
  // MX/NVFP4 elements (no inf or NaN) have an all-ones significand at their largest value, so
  // unclamped RNE leaves the range from the tie above it on: fmt_max + ulp(fmt_max) / 2.
  const ElementTraits traits = format.traits();
  const float clip_from = traits.max_finite + std::ldexp(1.0f, traits.emax - traits.mantissa_bits - 1);
  // Rows in fixed chunks, each chunk's sums in element order, the chunks added in order: the same
  // bits on any thread count (the team only decides who computes which chunk).
  const std::int64_t chunks = (q.rows + kTallyChunkRows - 1) / kTallyChunkRows;
  std::vector<OperandTally> partial(static_cast<std::size_t>(chunks));
#pragma omp parallel for schedule(static) if (q.rows * q.cols >= kParallelTallyElements)
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    OperandTally& t = partial[static_cast<std::size_t>(chunk)];
    for (std::int64_t r = chunk * kTallyChunkRows; r < std::min(q.rows, (chunk + 1) * kTallyChunkRows); ++r)
      for (std::int64_t c0 = 0; c0 < q.cols; c0 += q.tile_cols) {
        // fl32(1 / decode) is the quantizer's own factor under every one-level rule but te and div
        // (exact reciprocals of powers of two, or fl32(1 / sf) itself). Under te and div it is
        // within two ulps of the quantizer's (fl32(fmt_max / amax), or division by sf), so no
        // element can be counted differently: |x| <= amax scales to at most fmt_max (1 + 2^-21),
        // far below the clip threshold (the tie above fmt_max: 464 = 448 (1 + 2^-5) for E4M3,
        // 61440 = 57344 (1 + 2^-4) for E5M2, 7 = 6 (1 + 1/6) for E2M1); both counts are 0.
        // The two-level (nvfp4) rules scale by the tile scale times the per-tensor decode factor
        // (1 for every other rule): TE's enc = fl32(1 / fl32(s_b * decode)) up to its FLT_MAX cap.
        // One factor per tile (a row's run of tile_cols elements shares its scale).
        const float factor = multiplier > 0 ? multiplier : 1.0f / (q.scale_of(r, c0) * q.tensor_scale.decode);
        const bool finite_factor = std::isfinite(factor);
        for (std::int64_t c = c0; c < std::min(q.cols, c0 + q.tile_cols); ++c) {
          const std::size_t i = static_cast<std::size_t>(r * q.cols + c);
          const double x = source[i], back = restored[i], error = x - back;
          t.signal += x * x;
          t.noise += error * error;
          const float scaled = quantizer_input[i] * factor;
          // Only finite values through a finite factor can be clipped (a NaN is not a clip), and
          // only those scaled past the format's largest value (the test before the encode: most
          // are not).
          if (finite_factor && std::isfinite(quantizer_input[i]) && std::fabs(scaled) > traits.max_finite)
            t.saturated += format == Fp8Format::e4m3   ? clipped<E4M3>(scaled)
                           : format == Fp8Format::e5m2 ? clipped<E5M2>(scaled)
                                                       : std::fabs(scaled) >= clip_from;
          t.flushed += x != 0 && back == 0;
        }
      }
  }
  OperandTally t;
  for (const OperandTally& p : partial) t.add(p);
  t.elements = q.rows * q.cols;
  tally.add(t);
}

}  // namespace fp8lab::train
