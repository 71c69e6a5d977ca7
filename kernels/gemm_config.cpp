#include "kernels/gemm_config.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include "kernels/block_scaled_mma.hpp"

namespace fp8lab {
namespace {

int parse_int(std::string_view digits, std::string_view whole, const char* what) {
  int value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc() || end != digits.data() + digits.size() || value <= 0)
    throw std::invalid_argument("accumulation model '" + std::string(whole) + "': " + what + " '" +
                                std::string(digits) + "' is not a positive whole number");
  return value;
}

GemmPlan plan_block_scaled_gemm(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config) {
  if (!config.promotion.never)
    throw std::invalid_argument("promotion interval " + config.promotion.to_string() +
                                ": b200's block-scaled MMA keeps its FP32 accumulator in the tensor core over all of K "
                                "(promotion never)");
  const BlockScaledMma mma = block_scaled_mma_for(a, b);
  GemmPlan plan{a.rows, b.rows, a.cols, 0, 0, 1};
  plan.padded_k = std::max<std::int64_t>(mma.depth, (plan.k + mma.depth - 1) / mma.depth * mma.depth);
  plan.interval = plan.padded_k;
  return plan;
}

}  // namespace

AccumulationModel AccumulationModel::parse(std::string_view whole) {
  // The zero convention is a suffix of any fused model.
  std::string_view text = whole;
  ZeroExponent zero = ZeroExponent::none;
  for (const auto& [suffix, value] : {std::pair{std::string_view(",zero:none"), ZeroExponent::none},
                                      std::pair{std::string_view(",zero:min"), ZeroExponent::min}})
    if (text.ends_with(suffix)) {
      text.remove_suffix(suffix.size());
      zero = value;
      if (text == "fp32" || text == "b200")
        throw std::invalid_argument("accumulation model '" + std::string(whole) + "': the zero convention applies to the fused models only, not " +
                                    std::string(text));
      break;
    }
  AccumulationModel model = parse_without_zero(text);
  model.zero_exponent = zero;
  return model;
}

AccumulationModel AccumulationModel::parse_without_zero(std::string_view text) {
  if (text == "hopper") return hopper();
  if (text == "fp32") return fp32();
  if (text == "b200") return b200();
  const auto usage = [&] {
    return std::invalid_argument("accumulation model '" + std::string(text) +
                                 "' is not one of hopper, fp32, b200, bits:F,depth:D,round:rz|rne (fused ones "
                                 "optionally followed by ,zero:none|min)");
  };
  if (!text.starts_with("bits:")) throw usage();
  AccumulationModel model;
  std::string_view rest = text.substr(5);
  bool has_depth = false, has_round = false;
  // F first, then depth:D and round:R in any order.
  const std::size_t comma = rest.find(',');
  model.fraction_bits = parse_int(rest.substr(0, comma), text, "fraction bits");
  rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  while (!rest.empty()) {
    const std::size_t next = rest.find(',');
    const std::string_view field = rest.substr(0, next);
    rest = next == std::string_view::npos ? std::string_view() : rest.substr(next + 1);
    if (field.starts_with("depth:")) {
      model.depth = parse_int(field.substr(6), text, "depth");
      has_depth = true;
    } else if (field == "round:rz") {
      model.rounding = Rounding::rz;
      has_round = true;
    } else if (field == "round:rne") {
      model.rounding = Rounding::rne;
      has_round = true;
    } else {
      throw usage();
    }
  }
  if (!has_depth || !has_round) throw usage();
  if (model.fraction_bits > 30)
    throw std::invalid_argument("accumulation model '" + std::string(text) + "': at most 30 fraction bits");
  if (model.depth > 256)
    throw std::invalid_argument("accumulation model '" + std::string(text) + "': depth at most 256");
  return model;
}

std::string AccumulationModel::to_string() const {
  if (kind == Kind::fp32) return "fp32";
  if (kind == Kind::block_scaled) return "b200";
  const std::string zero = zero_exponent == ZeroExponent::min ? ",zero:min" : "";
  AccumulationModel with_default_zero = *this;
  with_default_zero.zero_exponent = ZeroExponent::none;
  if (with_default_zero == hopper()) return "hopper" + zero;
  return "bits:" + std::to_string(fraction_bits) + ",depth:" + std::to_string(depth) +
         ",round:" + (rounding == Rounding::rz ? "rz" : "rne") + zero;
}

PromotionInterval PromotionInterval::parse(std::string_view text) {
  if (text == "never") return {0, true};
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value <= 0)
    throw std::invalid_argument("promotion interval '" + std::string(text) + "' is not a positive number or never");
  return {value, false};
}

std::string PromotionInterval::to_string() const { return never ? "never" : std::to_string(elements); }

OutputType parse_output_type(std::string_view text) {
  if (text == "fp32") return OutputType::fp32;
  if (text == "bf16") return OutputType::bf16;
  throw std::invalid_argument("output type '" + std::string(text) + "' is not one of fp32, bf16");
}

const char* output_type_name(OutputType t) { return t == OutputType::fp32 ? "fp32" : "bf16"; }

GemmPlan plan_gemm(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config) {
  if (a.cols != b.cols)
    throw std::invalid_argument("A is " + std::to_string(a.rows) + "x" + std::to_string(a.cols) + " and B is " +
                                std::to_string(b.rows) + "x" + std::to_string(b.cols) +
                                ": both must be K-major with the same K (C = A * B^T)");
  if (config.accumulation.kind == AccumulationModel::Kind::block_scaled) return plan_block_scaled_gemm(a, b, config);
  // The promoted GEMMs take FP8 codes with one dequantization scale per tile: no FP4/FP6
  // element format, and no two-level (nvfp4) rule, whose tile scale is not the whole
  // dequantization.
  for (const auto& [name, q] : {std::pair<const char*, const QuantizedTensor*>{"A", &a}, {"B", &b}}) {
    q->config.format.fp8();  // throws naming the format
    if (scale_rule_math(q->config.scale_rule).two_level)
      throw std::invalid_argument(std::string(name) + " is quantized with scale rule " +
                                  scale_rule_name(q->config.scale_rule) +
                                  ": the promoted GEMMs take one scale per tile, not a two-level (nvfp4) rule (--accum b200 takes it)");
  }
  GemmPlan plan{a.rows, b.rows, a.cols, 0, 0, 0};
  const std::int64_t depth = config.accumulation.kind == AccumulationModel::Kind::fp32 ? 32 : config.accumulation.depth;
  plan.padded_k = (plan.k + depth - 1) / depth * depth;
  if (plan.padded_k == 0) plan.padded_k = depth;
  if (config.promotion.never) {
    plan.interval = plan.padded_k;
  } else {
    plan.interval = config.promotion.elements;
    if (plan.interval % depth != 0)
      throw std::invalid_argument("promotion interval " + std::to_string(plan.interval) +
                                  " is not a multiple of the instruction depth " + std::to_string(depth));
  }
  // A scale that varies along K must stay constant within one partial.
  for (const auto& [name, q] : {std::pair<const char*, const QuantizedTensor*>{"A", &a}, {"B", &b}}) {
    const bool varies_along_k = q->scale_cols > 1;
    if (varies_along_k && (q->tile_cols % plan.interval != 0))
      throw std::invalid_argument(std::string("promotion interval ") + config.promotion.to_string() +
                                  " does not divide " + name + "'s scale extent " + std::to_string(q->tile_cols) +
                                  " along K (" + q->config.granularity.to_string() +
                                  "): its scale would change inside one partial; set the promotion interval "
                                  "(--promotion, promotion =; default 128) to a divisor of " +
                                  std::to_string(q->tile_cols));
  }
  if (plan.interval > plan.padded_k) plan.interval = plan.padded_k;  // one partial covers all of K
  plan.intervals = (plan.padded_k + plan.interval - 1) / plan.interval;
  return plan;
}

}  // namespace fp8lab
