#pragma once
// A precision recipe: how every linear layer's three GEMMs are computed, as data.
//   Fprop  Y  = X W^T      A = X (T x in),     B = W (out x in)
//   Dgrad  dX = dY W       A = dY (T x out),   B = W^T (in x out)
//   Wgrad  dW = dY^T X     A = dY^T (out x T), B = X^T (in x T)
// (every GEMM in the NT form C = A B^T of kernels/gemm_config.hpp, K-major operands).
// Non-GEMM ops (RMSNorm, RoPE, softmax, SwiGLU, residual adds, loss) run in the step's
// compute precision: FP64 for the fp64 recipe, FP32 for every other one (`elementwise`).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/gemm_config.hpp"
#include "kernels/loss_scaling/delayed_scaling.hpp"
#include "kernels/quantization.hpp"
#include "kernels/train/model_config.hpp"

namespace fp8lab::train {

enum class GemmKind { fprop, dgrad, wgrad };
inline constexpr GemmKind kGemmKinds[] = {GemmKind::fprop, GemmKind::dgrad, GemmKind::wgrad};
const char* gemm_kind_name(GemmKind kind);

struct GemmPrecision {
  // fp64: FP64 operands and sums; fp32: FP32 operands, FP32 sums in order of K;
  // bf16 / fp16: operands rounded (RNE) to BF16 / FP16, FP32 sums; fp8: quantized operands
  // through the CPU emulation of the tensor-core GEMM (FP8, or under accumulation b200 also
  // the MX/NVFP4 element formats E2M1, E3M2, E2M3).
  enum class Kind { fp64, fp32, bf16, fp16, fp8 };
  Kind kind = Kind::fp32;
  // fp8 only. Each operand's format: they may differ, as in Transformer Engine's HYBRID
  // backward (A = dY or dY^T in E5M2, B = W or X^T in E4M3), which Hopper's wgmma runs.
  ElementFormat a_format = Fp8Format::e4m3, b_format = Fp8Format::e4m3;
  // fp8 only. Each operand's element rounding: nearest (RNE) or stochastic, as TE's NVFP4
  // recipe rounds its gradients (dY in Dgrad, dY^T in Wgrad). The stochastic draws are seeded
  // by the operand's own bits (operand_rounding_seed in linear_gemm.hpp): a run repeats
  // bit for bit, and each step's new gradients get new draws.
  RoundingMode a_rounding = RoundingMode::nearest, b_rounding = RoundingMode::nearest;
  // fp8 only. Transformer Engine's 16 x 16 Random Hadamard Transform (kernels/hadamard_transform.hpp)
  // applied to both operands along K before quantization, as TE's NVFP4 recipe does to the
  // Wgrad operands (K = tokens). K must be a multiple of 16 when the GEMM runs.
  bool rht = false;
  Granularity a_granularity = Granularity::tile(128), b_granularity = Granularity::block(128);
  ScaleRule scale_rule = ScaleRule::fp32;
  GemmConfig gemm;  // accumulation model, promotion interval N_C (output FP32)
  // Wgrad only: take A = dY^T and B = X^T by re-quantizing the 1xT-quantized dY (of Dgrad)
  // and X (of Fprop) transposed (DeepSeek-V3's path, two roundings; needs tile:1xT on the
  // A operands of Fprop and Dgrad, Dgrad's A format equal to this A's (dY^T keeps dY's format,
  // E5M2 in the hybrid) and Fprop's A format equal to this B's (X^T keeps X's)), instead of
  // quantizing the transposes from their high-precision values.
  bool requantize_transposed = false;
  // fp8 with per-tensor operands only: Transformer Engine's delayed scaling instead of the scale
  // rule. Each operand's scale comes from the amax history of that operand in earlier steps
  // (kernels/loss_scaling/delayed_scaling.hpp; q = satfinite(x * scale), sf = fl32(1 / scale)),
  // kept by the caller across steps (kernels/train/delayed_operand_scales.hpp). TE's defaults.
  bool delayed_scaling = false;
  std::int64_t amax_history = 1024;
  AmaxReduction amax_reduction = AmaxReduction::max;
  int margin = 0;

  static GemmPrecision plain(Kind kind) {
    GemmPrecision p;
    p.kind = kind;
    return p;
  }
  std::string describe() const;
  // The kind, and for fp8 every field (the others are unused by the other kinds).
  bool operator==(const GemmPrecision& other) const;
};
const char* gemm_precision_kind_name(GemmPrecision::Kind kind);
GemmPrecision::Kind parse_gemm_precision_kind(std::string_view text);  // throws std::invalid_argument

// Per-layer override (precision decoupling): `layer` is a linear layer name ("L3.wo",
// "classifier") or a pattern in which '*' stands for any run of characters ("*.wo": that kind in
// every layer; "layers.*.attention.wo" for a PyTorch module's names); unset kinds keep the recipe's.
struct LayerOverride {
  std::string layer;
  std::optional<GemmPrecision> fprop, dgrad, wgrad;
};

// Whether an override's `layer` pattern names `layer` ('*': any run of characters, dots included).
bool override_matches(std::string_view pattern, std::string_view layer);

// The linear layers a recipe is checked against: an engine model's (recipe_layers(model)) or a
// PyTorch module's (fp8lab.torch.convert), with how their names are written, for messages.
struct RecipeLayers {
  std::string owner;  // "model stories260K", "the module"
  std::vector<std::string> names;  // empty (a listing): the recipe's own GEMMs are checked
  std::string naming;  // e.g. "L0..L4 .wq .wk .wv .wo .w1 .w2 .w3, *.<kind>, classifier"
  // An override that names none of them is an error (the engine: a typo would silently change
  // nothing), or left to the caller (a listing; fp8lab.torch, which warns: a shipped recipe's
  // "classifier" may have no counterpart in a PyTorch module).
  bool overrides_must_match = true;
};
RecipeLayers recipe_layers(const ModelConfig& model);

struct PrecisionRecipe {
  std::string name;
  std::string description;  // one line, for listings (`fp8lab recipes`); empty when not given
  GemmPrecision fprop, dgrad, wgrad;
  std::vector<LayerOverride> overrides;  // later ones win

  bool fp64() const;                     // the step then computes in FP64 throughout
  const char* elementwise() const { return fp64() ? "fp64" : "fp32"; }
  const GemmPrecision& resolve(const std::string& layer, GemmKind kind) const;
  // Throws std::invalid_argument naming the field: an override for a layer the model
  // lacks, fp64 mixed with other kinds, requantize_transposed without tile:1xT A operands
  // or beside rht, a scale rule that cannot serve a format or tile, MX/NVFP4 element formats
  // outside accumulation b200, delayed scaling with them, rht on a GEMM other than Wgrad.
  void validate(const RecipeLayers& layers) const;
  void validate(const ModelConfig& model) const { validate(recipe_layers(model)); }
  // Throws std::invalid_argument when a GEMM of the recipe runs the RHT (rht) and a step's
  // token count, the K of its Wgrad, is no multiple of 16, or (slices:S policies, whose MLP
  // Wgrads run a slice at a time) tokens / S is not: caught before a run starts.
  void check_step_tokens(std::int64_t tokens, int slices = 1) const;
};

// fp64, fp32, bf16, fp16, deepseek_v3 (E4M3, 1x128 activations / 128x128 weights, hopper
// N_C 128, Wgrad re-quantized, classifier in BF16), hybrid (Transformer Engine's HYBRID:
// E4M3 forward, E5M2 gradients: Fprop X, W in E4M3; Dgrad dY E5M2 x W E4M3; Wgrad dY^T E5M2 x
// X^T E4M3; per-tensor scales, hopper N_C 128), fp8_delayed (hybrid with Transformer Engine's
// DelayedScaling defaults: amax history 1024, max reduction, margin 0, classifier in BF16).
PrecisionRecipe named_recipe(std::string_view name);  // throws std::invalid_argument listing names
// The names named_recipe knows, in the order above.
const std::vector<std::string>& named_recipe_names();

}  // namespace fp8lab::train
