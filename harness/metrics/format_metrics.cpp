#include "harness/metrics/format_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace fp8lab {
namespace {

double fraction(std::int64_t part, std::int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : std::numeric_limits<double>::quiet_NaN();
}

// The factor the quantizer scaled the tile with (kernels/cpu/quantize.cpp): tile_scale's encode,
// or for nvfp4:4over6 the candidate whose block scale the tile stored. Checked against the
// stored scale, so that this file and the quantizer cannot silently disagree.
float tile_encode(const QuantizedTensor& q, float amax, float stored_decode) {
  const ElementTraits traits = q.config.format.traits();
  const auto same = [](float a, float b) { return float_bits(a) == float_bits(b); };
  if (q.config.scale_rule == ScaleRule::nvfp4_4over6) {
    const scale_detail::FourOverSixCandidates c = scale_detail::nvfp4_4over6_candidates(amax, traits, q.tensor_scale);
    if (same(c.map6.decode, stored_decode)) return c.map6.encode;
    if (same(c.map4.decode, stored_decode)) return c.map4.encode;
  } else {
    const TileScale s = tile_scale(amax, q.config.scale_rule, traits, q.tensor_scale);
    if (same(s.decode, stored_decode)) return s.encode;
  }
  throw std::logic_error(std::string("block_clip_counts: the scale recomputed for a tile of amax ") +
                         std::to_string(amax) + " under rule " + scale_rule_name(q.config.scale_rule) +
                         " is not the stored " + std::to_string(stored_decode));
}

// Whether RNE, without saturation, would give a value above fmt_max (header comment).
bool clips(double s, ElementTraits f) {
  const double max = f.max_finite;
  const double ulp = std::ldexp(1.0, f.emax - f.mantissa_bits);
  const double midpoint = max + ulp / 2;
  const bool max_is_odd = std::fmod(max / ulp, 2.0) == 1.0;  // max / ulp is a whole number
  return s > midpoint || (s == midpoint && max_is_odd);
}

}  // namespace

double BlockClipCounts::over_max_fraction() const { return fraction(over_max, blocks); }
double BlockClipCounts::clipped_fraction() const { return fraction(clipped, blocks); }

BlockClipCounts block_clip_counts(std::span<const float> x, const QuantizedTensor& q) {
  if (static_cast<std::int64_t>(x.size()) != q.rows * q.cols)
    throw std::invalid_argument("block_clip_counts: " + std::to_string(x.size()) + " values for a " +
                                std::to_string(q.rows) + "x" + std::to_string(q.cols) + " tensor");
  const ElementTraits traits = q.config.format.traits();
  const ApplyScale apply = scale_rule_math(q.config.scale_rule).apply;
  BlockClipCounts counts;
  for (std::int64_t tr = 0; tr < q.scale_rows; ++tr)
    for (std::int64_t tc = 0; tc < q.scale_cols; ++tc) {
      const std::int64_t r1 = std::min(q.rows, (tr + 1) * q.tile_rows), c1 = std::min(q.cols, (tc + 1) * q.tile_cols);
      float amax = 0.0f;
      for (std::int64_t r = tr * q.tile_rows; r < r1; ++r)
        for (std::int64_t c = tc * q.tile_cols; c < c1; ++c)
          amax = std::max(amax, std::fabs(x[static_cast<std::size_t>(r * q.cols + c)]));
      if (amax == 0.0f) continue;
      ++counts.blocks;
      const float encode = tile_encode(q, amax, q.scales[static_cast<std::size_t>(tr * q.scale_cols + tc)]);
      const double s = std::fabs(scaled_element(amax, encode, apply));
      if (s > traits.max_finite) ++counts.over_max;
      if (clips(s, traits)) ++counts.clipped;
    }
  return counts;
}

double CodeDifference::code_fraction() const { return fraction(codes, elements); }
double CodeDifference::value_fraction() const { return fraction(values, elements); }
double CodeDifference::scale_fraction() const { return fraction(scales, tiles); }

CodeDifference code_difference(const QuantizedTensor& a, std::span<const float> a_values, const QuantizedTensor& b,
                               std::span<const float> b_values) {
  if (a.rows != b.rows || a.cols != b.cols || !(a.config.format == b.config.format) || a.tile_rows != b.tile_rows ||
      a.tile_cols != b.tile_cols)
    throw std::invalid_argument("code_difference: the two quantizations differ in shape, format or tiles");
  if (a_values.size() != a.codes.size() || b_values.size() != b.codes.size())
    throw std::invalid_argument("code_difference: a dequantized tensor is not of its quantization's size");
  CodeDifference d;
  d.elements = static_cast<std::int64_t>(a.codes.size());
  for (std::size_t i = 0; i < a.codes.size(); ++i) {
    d.codes += a.codes[i] != b.codes[i];
    d.values += a_values[i] != b_values[i];
  }
  d.tiles = static_cast<std::int64_t>(a.scales.size());
  for (std::size_t t = 0; t < a.scales.size(); ++t)
    d.scales += float_bits(a.scales[t] * a.tensor_scale.decode) != float_bits(b.scales[t] * b.tensor_scale.decode);
  return d;
}

}  // namespace fp8lab
