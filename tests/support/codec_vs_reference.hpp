#pragma once
// One comparison of the kernel codec with the FP64 reference rounding, shared by the
// boundary-point test and the exhaustive (every FP32) test.
#include <cmath>

#include "kernels/formats/float_formats.hpp"
#include "reference/float_formats_ref.hpp"
#include "tests/support/spec_values.hpp"

namespace fp8lab::test {

// The kernel's encode in the given mode; the formats without nosat (E2M1, E3M2, E2M3) take
// satfinite only, and encode<F>(x) is theirs.
template <class F>
std::uint32_t encode_in_mode(float x, Saturation saturation) {
  if constexpr (FormatLayout<F>::has_nosat) return encode<F>(x, saturation);
  else return saturation == Saturation::satfinite ? encode<F>(x) : ~0u;
}

// True when encode<F>(x) is the code of round_to_format(x): same value and sign, or a NaN
// code where the reference says NaN (in a format without NaN: the code the reference names).
template <class F>
bool codec_agrees(float x, const ref::FormatDefinition& def, Saturation saturation) {
  const std::uint32_t code = encode_in_mode<F>(x, saturation);
  const double expected = ref::round_to_format(x, def, saturation == Saturation::satfinite);
  if (std::isnan(expected) && def.has_nan) return is_nan_code<F>(code);
  return code == ref::code_of_value(expected, def);
}

}  // namespace fp8lab::test
