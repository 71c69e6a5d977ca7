#include "kernels/train/precision_recipe.hpp"

#include <stdexcept>

namespace fp8lab::train {

const char* gemm_kind_name(GemmKind kind) {
  switch (kind) {
    case GemmKind::fprop: return "fprop";
    case GemmKind::dgrad: return "dgrad";
    case GemmKind::wgrad: return "wgrad";
  }
  return "?";
}

const char* gemm_precision_kind_name(GemmPrecision::Kind kind) {
  switch (kind) {
    case GemmPrecision::Kind::fp64: return "fp64";
    case GemmPrecision::Kind::fp32: return "fp32";
    case GemmPrecision::Kind::bf16: return "bf16";
    case GemmPrecision::Kind::fp16: return "fp16";
    case GemmPrecision::Kind::fp8: return "fp8";
  }
  return "?";
}

GemmPrecision::Kind parse_gemm_precision_kind(std::string_view text) {
  for (auto k : {GemmPrecision::Kind::fp64, GemmPrecision::Kind::fp32, GemmPrecision::Kind::bf16,
                 GemmPrecision::Kind::fp16, GemmPrecision::Kind::fp8})
    if (text == gemm_precision_kind_name(k)) return k;
  throw std::invalid_argument("'" + std::string(text) + "' is not one of fp64, fp32, bf16, fp16, fp8");
}

std::string GemmPrecision::describe() const {
  if (kind != Kind::fp8) return gemm_precision_kind_name(kind);
  return std::string("fp8 ") + format_name(format) + " A " + a_granularity.to_string() + " B " +
         b_granularity.to_string() + " scale " + scale_rule_name(scale_rule) + " accum " +
         gemm.accumulation.to_string() + " N_C " + gemm.promotion.to_string() +
         (requantize_transposed ? " requantized" : "");
}

bool GemmPrecision::operator==(const GemmPrecision& o) const {
  if (kind != Kind::fp8 || o.kind != Kind::fp8) return kind == o.kind;  // the FP8 fields mean nothing otherwise
  return format == o.format && a_granularity == o.a_granularity && b_granularity == o.b_granularity &&
         scale_rule == o.scale_rule && gemm.accumulation == o.gemm.accumulation &&
         gemm.promotion.never == o.gemm.promotion.never && gemm.promotion.elements == o.gemm.promotion.elements &&
         gemm.output == o.gemm.output && requantize_transposed == o.requantize_transposed;
}

bool PrecisionRecipe::fp64() const { return fprop.kind == GemmPrecision::Kind::fp64; }

namespace {
bool override_matches(const std::string& pattern, const std::string& layer) {
  if (pattern.starts_with("*.")) {
    const auto dot = layer.find('.');
    return dot != std::string::npos && layer.substr(dot) == pattern.substr(1);
  }
  return pattern == layer;
}
}  // namespace

const GemmPrecision& PrecisionRecipe::resolve(const std::string& layer, GemmKind kind) const {
  const GemmPrecision* chosen = kind == GemmKind::fprop ? &fprop : kind == GemmKind::dgrad ? &dgrad : &wgrad;
  for (const LayerOverride& o : overrides) {
    if (!override_matches(o.layer, layer)) continue;
    const auto& p = kind == GemmKind::fprop ? o.fprop : kind == GemmKind::dgrad ? o.dgrad : o.wgrad;
    if (p) chosen = &*p;
  }
  return *chosen;
}

void PrecisionRecipe::validate(const ModelConfig& model) const {
  const std::vector<std::string> layers = linear_layer_names(model);
  for (const LayerOverride& o : overrides) {
    bool found = false;
    for (const std::string& l : layers) found = found || override_matches(o.layer, l);
    if (!found)
      throw std::invalid_argument("layer '" + o.layer + "': model " + model.name + " has no such linear layer (L0.." +
                                  "L" + std::to_string(model.layers - 1) + " .wq .wk .wv .wo .w1 .w2 .w3, *.<kind>, classifier)");
  }
  for (const std::string& l : layers)
    for (GemmKind k : kGemmKinds) {
      const GemmPrecision& p = resolve(l, k);
      if ((p.kind == GemmPrecision::Kind::fp64) != fp64())
        throw std::invalid_argument(std::string(gemm_kind_name(k)) + " of " + l +
                                    ": fp64 cannot be mixed with other kinds (the step computes in one precision)");
      if (k == GemmKind::wgrad && p.kind == GemmPrecision::Kind::fp8 && p.requantize_transposed) {
        for (GemmKind source : {GemmKind::fprop, GemmKind::dgrad}) {
          const GemmPrecision& s = resolve(l, source);
          if (s.kind != GemmPrecision::Kind::fp8 || s.a_granularity.kind != Granularity::Kind::tile ||
              s.format != p.format || s.scale_rule != p.scale_rule || s.a_granularity != p.a_granularity)
            throw std::invalid_argument("wgrad.requantize_transposed of " + l + ": needs " + gemm_kind_name(source) +
                                        " in fp8 with A granularity " + p.a_granularity.to_string() + ", format " +
                                        format_name(p.format) + " and the same scale rule");
        }
      }
    }
}

PrecisionRecipe named_recipe(std::string_view name) {
  using K = GemmPrecision::Kind;
  const auto all = [&](GemmPrecision p) { return PrecisionRecipe{std::string(name), p, p, p, {}}; };
  if (name == "fp64") return all(GemmPrecision::plain(K::fp64));
  if (name == "fp32") return all(GemmPrecision::plain(K::fp32));
  if (name == "bf16") return all(GemmPrecision::plain(K::bf16));
  if (name == "fp16") return all(GemmPrecision::plain(K::fp16));
  if (name == "deepseek_v3") {
    GemmPrecision p;
    p.kind = K::fp8;
    PrecisionRecipe r = all(p);
    r.wgrad.requantize_transposed = true;
    r.wgrad.b_granularity = Granularity::tile(128);  // X^T re-quantized in 1x128 tiles along tokens
    const GemmPrecision bf16 = GemmPrecision::plain(K::bf16);
    r.overrides.push_back({"classifier", bf16, bf16, bf16});
    return r;
  }
  if (name == "hybrid") {
    GemmPrecision p;
    p.kind = K::fp8;
    p.a_granularity = p.b_granularity = Granularity::tensor();
    PrecisionRecipe r = all(p);
    r.dgrad.format = r.wgrad.format = Fp8Format::e5m2;
    return r;
  }
  throw std::invalid_argument("recipe '" + std::string(name) + "' is not one of fp64, fp32, bf16, fp16, deepseek_v3, hybrid");
}

}  // namespace fp8lab::train
