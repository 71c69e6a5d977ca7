#pragma once
// FP64 reference for stochastic rounding (the definition: kernels/formats/stochastic_rounding.hpp),
// written from the math and sharing no code with kernels/: the draw is SplitMix64 written from
// its published definition; the two neighbours of |v| come from the list of the format's values
// (representable_values), not from exponent arithmetic; the fraction is an FP64 quotient.
#include <cstdint>

#include "reference/float_formats_ref.hpp"

namespace fp8lab::ref {

struct RoundingRef {
  bool stochastic = false;  // false: round to nearest even (round_to_format)
  std::uint64_t seed = 0;
};

// u for element `index`: the high 32 bits of SplitMix64's (index + 1)-th output for `seed`.
std::uint32_t stochastic_draw_ref(std::uint64_t seed, std::uint64_t index);

// v (an FP32 value) rounded to `format` with draw u: NaN stays NaN; |v| >= max_finite gives
// +-max_finite; otherwise lo <= |v| < hi are the neighbouring values of the format, and the
// result is +-hi when u < floor(2^32 (|v| - lo) / (hi - lo)), else +-lo (the sign of v, zero too).
double round_stochastic_ref(double v, const FormatDefinition& format, std::uint32_t u);

// The element rounding of a quantizer: nearest (RNE, saturating) or stochastic with the draw of
// element `index` (its row-major index in the tensor).
double round_element_ref(double v, const FormatDefinition& format, const RoundingRef& rounding, std::uint64_t index);

}  // namespace fp8lab::ref
