#include "kernels/train/precision_recipe.hpp"

#include <stdexcept>

#include "kernels/hadamard_transform.hpp"

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
  // One format, or the mix as "A x B" (e.g. e5m2 x e4m3).
  const std::string formats = a_format == b_format ? std::string(format_name(a_format))
                                                   : std::string(format_name(a_format)) + " x " + format_name(b_format);
  return "fp8 " + formats + " A " + a_granularity.to_string() + " B " +
         b_granularity.to_string() + " scale " + scale_rule_name(scale_rule) + " accum " +
         gemm.accumulation.to_string() + " N_C " + gemm.promotion.to_string() +
         (a_rounding == RoundingMode::stochastic ? " A stochastic" : "") +
         (b_rounding == RoundingMode::stochastic ? " B stochastic" : "") + (rht ? " rht" : "") +
         (requantize_transposed ? " requantized" : "") +
         (delayed_scaling ? " delayed history " + std::to_string(amax_history) + " " + amax_reduction_name(amax_reduction) +
                                " margin " + std::to_string(margin)
                          : "");
}

bool GemmPrecision::operator==(const GemmPrecision& o) const {
  if (kind != Kind::fp8 || o.kind != Kind::fp8) return kind == o.kind;  // the FP8 fields mean nothing otherwise
  return a_format == o.a_format && b_format == o.b_format && a_granularity == o.a_granularity && b_granularity == o.b_granularity &&
         scale_rule == o.scale_rule && gemm.accumulation == o.gemm.accumulation &&
         gemm.promotion.never == o.gemm.promotion.never && gemm.promotion.elements == o.gemm.promotion.elements &&
         gemm.output == o.gemm.output && a_rounding == o.a_rounding && b_rounding == o.b_rounding && rht == o.rht &&
         requantize_transposed == o.requantize_transposed &&
         delayed_scaling == o.delayed_scaling &&
         (!delayed_scaling || (amax_history == o.amax_history && amax_reduction == o.amax_reduction && margin == o.margin));
}

bool PrecisionRecipe::fp64() const { return fprop.kind == GemmPrecision::Kind::fp64; }

bool override_matches(std::string_view pattern, std::string_view layer) {
  // Wildcard matching with backtracking to the last '*': linear in practice for these short names.
  std::size_t p = 0, l = 0, star = std::string_view::npos, resume = 0;
  while (l < layer.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = l;
    } else if (p < pattern.size() && pattern[p] == layer[l]) {
      ++p;
      ++l;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      l = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

RecipeLayers recipe_layers(const ModelConfig& model) {
  return {"model " + model.name, linear_layer_names(model),
          "L0..L" + std::to_string(model.layers - 1) + " .wq .wk .wv .wo .w1 .w2 .w3, *.<kind>, classifier"};
}

namespace {

// One quantized operand's format, rule, tiles and rounding, refused with the GEMM and layer
// named: the rule must serve the format (the nvfp4 rules take E2M1 only) and the tile
// (nvfp4:4over6: 1x16 or 16x16, nearest rounding), and the MX/NVFP4 element formats run on
// Blackwell's block-scaled MMA only.
void check_operand(const GemmPrecision& p, char which, const std::string& where) {
  const ElementFormat format = which == 'A' ? p.a_format : p.b_format;
  const Granularity& g = which == 'A' ? p.a_granularity : p.b_granularity;
  const bool stochastic = (which == 'A' ? p.a_rounding : p.b_rounding) == RoundingMode::stochastic;
  try {
    check_rule_serves_format(p.scale_rule, format);
    if (g.kind == Granularity::Kind::tile || g.kind == Granularity::Kind::block)
      check_rule_serves_tiles(p.scale_rule, g.kind == Granularity::Kind::tile ? 1 : g.size, g.size, stochastic);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ", operand " + which + ": " + e.what());
  }
  if (!format.is_fp8() && p.gemm.accumulation.kind != AccumulationModel::Kind::block_scaled)
    throw std::invalid_argument(where + ", operand " + which + ": format " + format.name() +
                                " runs on Blackwell's block-scaled MMA only (accumulation = \"b200\")");
  if (!format.is_fp8() && p.delayed_scaling)
    throw std::invalid_argument(where + ": delayed scaling takes e4m3 or e5m2, not " + std::string(format.name()));
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

void PrecisionRecipe::validate(const RecipeLayers& layers) const {
  for (const LayerOverride& o : overrides) {
    bool found = false;
    for (const std::string& l : layers.names) found = found || override_matches(o.layer, l);
    if (!found && layers.overrides_must_match)
      throw std::invalid_argument("layer '" + o.layer + "': " + layers.owner + " has no such linear layer (" +
                                  layers.naming + ")");
  }
  // No names (a listing): the recipe's own GEMMs are checked, as those of a layer no override names.
  const std::vector<std::string> checked = layers.names.empty() ? std::vector<std::string>{"every layer"} : layers.names;
  for (const std::string& l : checked)
    for (GemmKind k : kGemmKinds) {
      const GemmPrecision& p = resolve(l, k);
      if ((p.kind == GemmPrecision::Kind::fp64) != fp64())
        throw std::invalid_argument(std::string(gemm_kind_name(k)) + " of " + l +
                                    ": fp64 cannot be mixed with other kinds (the step computes in one precision)");
      if (p.kind == GemmPrecision::Kind::fp8) {
        const std::string where = std::string(gemm_kind_name(k)) + " of " + l;
        check_operand(p, 'A', where);
        check_operand(p, 'B', where);
        if (p.rht && k != GemmKind::wgrad)
          throw std::invalid_argument(where + ": rht applies to Wgrad's operands only (Transformer Engine's NVFP4 "
                                      "recipe), whose K is the step's tokens; the K of Fprop and Dgrad is a model "
                                      "dimension");
        if (p.rht && p.requantize_transposed)
          throw std::invalid_argument(where + ": rht transforms the high-precision operands, requantize_transposed "
                                      "re-quantizes FP8 ones: choose one");
      }
      if (p.kind == GemmPrecision::Kind::fp8 && p.delayed_scaling) {
        if (p.a_granularity != Granularity::tensor() || p.b_granularity != Granularity::tensor() || p.requantize_transposed)
          throw std::invalid_argument(std::string(gemm_kind_name(k)) + " of " + l +
                                      ": delayed scaling keeps one scale per tensor: both granularities must be "
                                      "'tensor', without requantize_transposed");
        if (p.a_rounding == RoundingMode::stochastic || p.b_rounding == RoundingMode::stochastic)
          throw std::invalid_argument(std::string(gemm_kind_name(k)) + " of " + l +
                                      ": delayed scaling rounds to nearest (its quantizer has no stochastic rounding)");
        DelayedScalingConfig{p.a_format.fp8(), p.amax_history, p.amax_reduction, p.margin}.validate();
      }
      if (k == GemmKind::wgrad && p.kind == GemmPrecision::Kind::fp8 && p.requantize_transposed) {
        // The re-quantization repeats Dgrad's and Fprop's A quantizations with nearest rounding.
        const auto stochastic = [](RoundingMode m) { return m == RoundingMode::stochastic; };
        if (stochastic(p.a_rounding) || stochastic(p.b_rounding) || stochastic(resolve(l, GemmKind::dgrad).a_rounding) ||
            stochastic(resolve(l, GemmKind::fprop).a_rounding))
          throw std::invalid_argument("wgrad.requantize_transposed of " + l +
                                      ": re-quantizes with nearest rounding, so neither it nor the Fprop and Dgrad A "
                                      "quantizations it repeats may round stochastically");
        // Dgrad's A (dY) becomes this A (dY^T), Fprop's A (X) this B (X^T): each keeps its format.
        for (GemmKind source : {GemmKind::fprop, GemmKind::dgrad}) {
          const GemmPrecision& s = resolve(l, source);
          const ElementFormat kept = source == GemmKind::dgrad ? p.a_format : p.b_format;
          if (s.kind != GemmPrecision::Kind::fp8 || s.a_granularity.kind != Granularity::Kind::tile ||
              s.a_format != kept || s.scale_rule != p.scale_rule || s.a_granularity != p.a_granularity)
            throw std::invalid_argument("wgrad.requantize_transposed of " + l + ": needs " + gemm_kind_name(source) +
                                        " in fp8 with A granularity " + p.a_granularity.to_string() + ", A format " +
                                        format_name(kept) + " (wgrad's " + (source == GemmKind::dgrad ? "A" : "B") +
                                        " format) and the same scale rule");
        }
      }
    }
}

void PrecisionRecipe::check_step_tokens(std::int64_t tokens, int slices) const {
  bool rht = fprop.rht || dgrad.rht || wgrad.rht;
  for (const LayerOverride& o : overrides)
    for (const auto* p : {&o.fprop, &o.dgrad, &o.wgrad}) rht = rht || (*p && (*p)->rht);
  if (rht && tokens % kHadamardGroup != 0)
    throw std::invalid_argument("recipe " + name + " runs the 16x16 Hadamard transform (rht) along a step's tokens, " +
                                std::to_string(tokens) + " here (seq_len + 1): they must be a multiple of 16");
  // Under slices:S the MLP's Wgrads run on T / S tokens at a time.
  if (rht && slices > 1 && (tokens % slices != 0 || (tokens / slices) % kHadamardGroup != 0))
    throw std::invalid_argument("recipe " + name + " runs the 16x16 Hadamard transform (rht) along each of the " +
                                std::to_string(slices) + " slices of a step's " + std::to_string(tokens) +
                                " tokens: tokens / slices must be a multiple of 16");
}

const std::vector<std::string>& named_recipe_names() {
  static const std::vector<std::string> names = {"fp64", "fp32", "bf16", "fp16", "deepseek_v3", "hybrid", "fp8_delayed"};
  return names;
}

PrecisionRecipe named_recipe(std::string_view name) {
  using K = GemmPrecision::Kind;
  const auto all = [&](GemmPrecision p, const char* description) {
    return PrecisionRecipe{std::string(name), description, p, p, p, {}};
  };
  if (name == "fp64") return all(GemmPrecision::plain(K::fp64), "every GEMM and op in FP64 (the reference)");
  if (name == "fp32") return all(GemmPrecision::plain(K::fp32), "every GEMM in FP32, sums in order of K");
  if (name == "bf16") return all(GemmPrecision::plain(K::bf16), "GEMM operands rounded to BF16, FP32 sums");
  if (name == "fp16") return all(GemmPrecision::plain(K::fp16), "GEMM operands rounded to FP16, FP32 sums (loss scaling)");
  if (name == "deepseek_v3") {
    GemmPrecision p;
    p.kind = K::fp8;
    PrecisionRecipe r = all(p, "DeepSeek-V3: E4M3, 1x128 activation tiles, 128x128 weight blocks, Hopper N_C 128, "
                               "Wgrad re-quantized, classifier BF16");
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
    PrecisionRecipe r = all(p, "Transformer Engine's HYBRID: E4M3 forward, E5M2 gradients, per-tensor scales, Hopper N_C 128");
    // Gradients in E5M2 (range), weights and activations in E4M3 (precision): the A operands
    // of Dgrad (dY) and Wgrad (dY^T); their B operands (W, X^T) stay E4M3.
    r.dgrad.a_format = r.wgrad.a_format = Fp8Format::e5m2;
    return r;
  }
  if (name == "fp8_delayed") {
    PrecisionRecipe r = named_recipe("hybrid");
    r.name = name;
    r.description = "hybrid with Transformer Engine's delayed scaling (amax history 1024, max, margin 0), classifier BF16";
    for (GemmPrecision* p : {&r.fprop, &r.dgrad, &r.wgrad}) p->delayed_scaling = true;
    const GemmPrecision bf16 = GemmPrecision::plain(K::bf16);
    r.overrides.push_back({"classifier", bf16, bf16, bf16});
    return r;
  }
  std::string known;
  for (const std::string& n : named_recipe_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("recipe '" + std::string(name) + "' is not one of " + known);
}

}  // namespace fp8lab::train
