#pragma once
// The configurations the quantizer tests sweep, described without kernel code, so the
// reference side of a comparison gets its tile shape from here and not from the kernel.
#include <string>
#include <vector>

#include "kernels/quantization.hpp"
#include "reference/float_formats_ref.hpp"
#include "reference/quantize_ref.hpp"
#include "tests/support/spec_values.hpp"

namespace fp8lab::test {

struct FormatCase {
  Fp8Format kernel;
  const ref::FormatDefinition& reference;
  TableFormat table;
};

inline std::vector<FormatCase> format_cases() {
  return {{Fp8Format::e4m3, ref::e4m3(), kE4M3Table}, {Fp8Format::e5m2, ref::e5m2(), kE5M2Table}};
}

// Every element format of the quantizer (the FP8 pair, FP4 and the FP6 pair), as FormatCase pairs
// the FP8 ones.
struct ElementCase {
  ElementFormat kernel;
  const ref::FormatDefinition& reference;
  TableFormat table;
};

inline std::vector<ElementCase> element_cases() {
  using Kind = ElementFormat::Kind;
  return {{Kind::e4m3, ref::e4m3(), kE4M3Table},
          {Kind::e5m2, ref::e5m2(), kE5M2Table},
          {Kind::e2m1, ref::e2m1(), kE2M1Table},
          {Kind::e3m2, ref::e3m2(), kE3M2Table},
          {Kind::e2m3, ref::e2m3(), kE2M3Table}};
}

struct GranularityCase {
  std::string text;      // as the CLI takes it
  bool whole_rows;       // tile spans all rows (tensor)
  bool whole_cols;       // tile spans all columns (tensor, row)
  long tile_rows, tile_cols;  // otherwise
};

inline std::vector<GranularityCase> granularity_cases() {
  std::vector<GranularityCase> cases = {{"tensor", true, true, 0, 0}, {"row", false, true, 1, 0}};
  for (long t : {16, 32, 64, 128, 256, 512}) cases.push_back({"tile:1x" + std::to_string(t), false, false, 1, t});
  for (long b : {16, 32, 128}) cases.push_back({"block:" + std::to_string(b) + "x" + std::to_string(b), false, false, b, b});
  return cases;
}

// The reference's rule of the same name (the name is the only thing the two sides share).
inline ref::ScaleRuleRef reference_rule(ScaleRule rule) { return ref::scale_rule_ref_named(scale_rule_name(rule)); }

}  // namespace fp8lab::test
