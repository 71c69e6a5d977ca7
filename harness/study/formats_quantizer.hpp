#pragma once
// A value of the formats study's `quantizer` axis (harness/study/formats_study.cpp):
//   SCHEME                    deepseek, mxfp8, mxfp4, nvfp4 (harness/requests/quantize_request.hpp): format,
//                             rule, and the granularity the scheme gives the tensor's role
//                             (weights: 128x128 / 1x32 / 1x32 / 16x16 blocks, activations and
//                             gradients: 1x128 / 1x32 / 1x32 / 1x16 tiles);
//   FORMAT/GRANULARITY/RULE   e.g. "e4m3/tile:1x32/mx:ceil", "e2m1/block:16x16/nvfp4:4over6":
//                             any element format, granularity and scale rule, whatever the role.
// Parsing refuses what no tensor could run (unknown names, a rule that cannot serve the format:
// check_rule_serves_format); the tile checks that need the tensor's shape
// (check_rule_serves_tiles) are the study's, per tensor.
#include <string>
#include <string_view>
#include <vector>

#include "kernels/quantization.hpp"

namespace fp8lab {

struct FormatsQuantizer {
  std::string text;    // as written in the spec
  std::string scheme;  // empty for FORMAT/GRANULARITY/RULE
  ElementFormat format = Fp8Format::e4m3;
  std::string granularity;         // activations and gradients (and weights, when no scheme)
  std::string weight_granularity;  // weights
  ScaleRule rule = ScaleRule::fp32;

  // role: "weight", "activation" or "gradient".
  Granularity granularity_for(std::string_view role) const;
};

// Throws std::invalid_argument saying what is wrong with the value.
FormatsQuantizer parse_formats_quantizer(std::string_view text);

// Every scale rule, in the order of scale_rule_names().
std::vector<ScaleRule> all_scale_rules();

}  // namespace fp8lab
