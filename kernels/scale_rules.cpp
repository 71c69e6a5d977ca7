#include "kernels/scale_rules.hpp"

#include <array>
#include <stdexcept>
#include <string>
#include <utility>

namespace fp8lab {
namespace {

constexpr std::array<std::pair<ScaleRule, const char*>, 13> kNames = {{
    {ScaleRule::fp32, "fp32"},
    {ScaleRule::pow2, "pow2"},
    {ScaleRule::deepgemm, "deepgemm"},
    {ScaleRule::te, "te"},
    {ScaleRule::te_pow2, "te-pow2"},
    {ScaleRule::div, "div"},
    {ScaleRule::mx, "mx"},
    {ScaleRule::mx_ceil, "mx:ceil"},
    {ScaleRule::mx_even, "mx:even"},
    {ScaleRule::mx_rceil, "mx:rceil"},
    {ScaleRule::nvfp4, "nvfp4"},
    {ScaleRule::nvfp4_torchao, "nvfp4:torchao"},
    {ScaleRule::nvfp4_4over6, "nvfp4:4over6"},
}};

}  // namespace

const char* scale_rule_name(ScaleRule rule) {
  for (const auto& [r, name] : kNames)
    if (r == rule) return name;
  return "?";
}

std::string scale_rule_names() {
  std::string names;
  for (const auto& [rule, name] : kNames) names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

ScaleRule parse_scale_rule(std::string_view text) {
  for (const auto& [rule, name] : kNames)
    if (text == name) return rule;
  throw std::invalid_argument("scale rule '" + std::string(text) + "' is not one of " + scale_rule_names());
}

ScaleRule parse_gemm_scale_rule(std::string_view text) {
  const ScaleRule rule = parse_scale_rule(text);
  if (scale_rule_math(rule).two_level)
    throw std::invalid_argument("scale rule " + std::string(text) +
                                " is two-level (per-tensor and E4M3 per-block scales on E2M1 codes): the FP8 GEMMs "
                                "take one scale per tile");
  return rule;
}

void check_rule_serves_format(ScaleRule rule, ElementFormat format) {
  if (scale_rule_math(rule).two_level && format.kind() != ElementFormat::Kind::e2m1)
    throw std::invalid_argument(std::string("scale rule ") + scale_rule_name(rule) + " needs format e2m1, not " +
                                format.name() + " (its E4M3 block scales and 448 * 6 per-tensor scale are sized for "
                                "E2M1's maximum 6)");
}

void check_rule_serves_tiles(ScaleRule rule, std::int64_t tile_rows, std::int64_t tile_cols, bool stochastic) {
  if (rule != ScaleRule::nvfp4_4over6) return;
  if (!(tile_cols == 16 && (tile_rows == 1 || tile_rows == 16)))
    throw std::invalid_argument("scale rule nvfp4:4over6 takes granularity tile:1x16 or block:16x16 (Transformer "
                                "Engine's 1-D and 2-D NVFP4 blocks), not " + std::to_string(tile_rows) + "x" +
                                std::to_string(tile_cols) + " tiles");
  if (stochastic)
    throw std::invalid_argument("scale rule nvfp4:4over6 rounds to nearest only (Transformer Engine refuses "
                                "stochastic rounding with 4over6): use --rounding nearest");
}

}  // namespace fp8lab
