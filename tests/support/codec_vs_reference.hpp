#pragma once
// One comparison of the kernel codec with the FP64 reference rounding, shared by the
// boundary-point test and the exhaustive (every FP32) test.
#include <cmath>

#include "kernels/formats/float_formats.hpp"
#include "reference/float_formats_ref.hpp"
#include "tests/support/spec_values.hpp"

namespace fp8lab::test {

// True when encode<F>(x) is the code of round_to_format(x): same value and sign, or a NaN
// code where the reference says NaN.
template <class F>
bool codec_agrees(float x, const ref::FormatDefinition& def, Saturation saturation) {
  const std::uint32_t code = encode<F>(x, saturation);
  const double expected = ref::round_to_format(x, def, saturation == Saturation::satfinite);
  if (std::isnan(expected)) return is_nan_code<F>(code);
  return code == ref::code_of_value(expected, def);
}

}  // namespace fp8lab::test
