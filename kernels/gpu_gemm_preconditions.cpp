#include "kernels/gpu_gemm_preconditions.hpp"

#include <stdexcept>

namespace fp8lab {
namespace {

std::string shape_text(std::int64_t m, std::int64_t n, std::int64_t k) {
  return "M=" + std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k);
}

bool is_tile128(const Granularity& g) { return g.kind == Granularity::Kind::tile && g.size == 128; }
bool is_block128(const Granularity& g) { return g.kind == Granularity::Kind::block && g.size == 128; }

}  // namespace

WgmmaLaunchPlan plan_wgmma_gemm(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                                bool b_tiles) {
  const GemmPlan plan = plan_gemm(a, b, config);  // K, format and interval/scale consistency
  auto refuse = [&](const std::string& why) {
    throw std::invalid_argument("the WGMMA kernel cannot run " + shape_text(plan.m, plan.n, plan.k) + ": " + why);
  };
  if (!(config.accumulation == AccumulationModel::hopper()))
    refuse("the tensor cores compute the hopper accumulation model only, not " + config.accumulation.to_string());
  using Kind = Granularity::Kind;
  const Granularity ga = a.config.granularity, gb = b.config.granularity;
  if (!(is_tile128(ga) || ga.kind == Kind::row || ga.kind == Kind::tensor))
    refuse("A must be scaled per tile:1x128, row or tensor, not " + ga.to_string());
  if (!((gb.kind == Kind::block && gb.size >= kWgmmaBlockN) || gb.kind == Kind::row || gb.kind == Kind::tensor ||
        (b_tiles && is_tile128(gb))))
    refuse(std::string("B must be scaled per block:BxB with B >= 128, ") + (b_tiles ? "tile:1x128, " : "") +
           "row or tensor, not " + gb.to_string());
  // K = 0 would reach cuTensorMapEncodeTiled with a zero dimension (an encode error, not a
  // readable refusal); the emulation defines that product (all zeros): the CPU runs it.
  if (plan.k == 0) refuse("K = 0 (an empty reduction: no tensor map can describe it)");
  if (plan.k % 16 != 0) refuse("K must be a multiple of 16 (TMA row strides are 16-byte multiples)");
  if (plan.n % 8 != 0) refuse("N must be a multiple of 8 (the epilogue writes 8-column groups)");
  if (plan.m == 0 || plan.n == 0) refuse("empty output");
  // wgmma itself takes e4m3 x e5m2 mixes, but this kernel is instantiated with one FP8 type
  // for both operands; a mix runs on the CPU emulation (--backend auto falls back to it).
  if (a.config.format != b.config.format)
    refuse(std::string("A is ") + format_name(a.config.format) + " and B is " + format_name(b.config.format) +
           ": the kernel is built for one FP8 format on both operands");

  WgmmaLaunchPlan launch;
  launch.k_blocks = (plan.k + kWgmmaBlockK - 1) / kWgmmaBlockK;
  launch.k_instructions = plan.padded_k / 32;
  launch.b_scale_per_column = gb.kind == Kind::row || gb.kind == Kind::tile;
  if (config.promotion.never || plan.interval >= kWgmmaBlockK) {
    if (plan.interval % kWgmmaBlockK != 0 && plan.interval != plan.padded_k)
      refuse("a promotion interval above 128 must be a multiple of 128, not " + config.promotion.to_string());
    launch.promotion_template = 128;
    launch.stages_per_promotion = (plan.interval + kWgmmaBlockK - 1) / kWgmmaBlockK;
  } else if (plan.interval == 32 || plan.interval == 64) {
    launch.promotion_template = static_cast<int>(plan.interval);
  } else {
    refuse("the promotion interval must be 32, 64 or a multiple of 128, not " + config.promotion.to_string());
  }
  return launch;
}

const char* cublaslt_mode_name(CublasLtMode mode) {
  switch (mode) {
    case CublasLtMode::block_scaled: return "fp8-block-scaled";
    case CublasLtMode::per_tensor: return "fp8-per-tensor";
    case CublasLtMode::bf16: return "bf16";
  }
  return "?";
}

std::string cublaslt_precondition_failure(CublasLtMode mode, std::int64_t m, std::int64_t n, std::int64_t k,
                                          OutputType output) {
  const std::string where = std::string("cuBLASLt ") + cublaslt_mode_name(mode) + " GEMM " + shape_text(m, n, k) + ": ";
  if (m <= 0 || n <= 0 || k <= 0) return where + "every dimension must be positive";
  const std::int64_t k_multiple = mode == CublasLtMode::bf16 ? 8 : 16;  // 16-byte leading dimensions
  if (k % k_multiple != 0)
    return where + "K must be a multiple of " + std::to_string(k_multiple) + " (16-byte leading dimensions)";
  const std::int64_t out_bytes = output == OutputType::bf16 ? 2 : 4;
  if ((n * out_bytes) % 16 != 0)
    return where + "N must be a multiple of " + std::to_string(16 / out_bytes) + " for " + output_type_name(output) +
           " output (16-byte output rows)";
  if (mode == CublasLtMode::block_scaled && (m % 4 != 0 || n % 4 != 0))
    return where + "block-scaled FP8 needs M and N multiples of 4";
  return {};
}

std::string cublaslt_format_failure(CublasLtMode mode, Fp8Format a, Fp8Format b) {
  if (mode != CublasLtMode::bf16 && a == Fp8Format::e5m2 && b == Fp8Format::e5m2)
    return "cuBLASLt has no E5M2 x E5M2 FP8 GEMM (one operand must be E4M3)";
  return {};
}

std::string cublaslt_operand_failure(CublasLtMode mode, const Granularity& a, const Granularity& b) {
  switch (mode) {
    case CublasLtMode::block_scaled:
      if (!is_tile128(a)) return "cuBLASLt block scaling takes A per tile:1x128 (VEC128_32F), not " + a.to_string();
      if (!is_tile128(b) && !is_block128(b))
        return "cuBLASLt block scaling takes B per block:128x128 (BLK128x128_32F) or tile:1x128 (VEC128_32F), not " +
               b.to_string();
      return {};
    case CublasLtMode::per_tensor:
      if (a.kind != Granularity::Kind::tensor || b.kind != Granularity::Kind::tensor)
        return "cuBLASLt per-tensor FP8 takes tensor scales on both operands, not " + a.to_string() + " and " +
               b.to_string();
      return {};
    case CublasLtMode::bf16: return {};
  }
  return "unknown cuBLASLt mode";
}

std::string cublaslt_config_failure(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config) {
  if (std::string why = cublaslt_operand_failure(CublasLtMode::block_scaled, a.config.granularity, b.config.granularity);
      !why.empty())
    return why;
  if (!(config.accumulation == AccumulationModel::hopper()) || config.promotion.never || config.promotion.elements != 128)
    return "cuBLASLt's block-scaled GEMM has one fixed arithmetic (hopper partials promoted every 128, as measured on an H200 with cuBLASLt 13.1); "
           "it cannot run accumulation " +
           config.accumulation.to_string() + " with promotion " + config.promotion.to_string();
  if (!a.config.format.is_fp8() || !b.config.format.is_fp8())
    return std::string("cuBLASLt takes FP8 operands, not ") + a.config.format.name() + " x " + b.config.format.name();
  if (std::string why = cublaslt_format_failure(CublasLtMode::block_scaled, a.config.format.fp8(), b.config.format.fp8());
      !why.empty())
    return why;
  return cublaslt_precondition_failure(CublasLtMode::block_scaled, a.rows, b.rows, a.cols, config.output);
}

std::string cublaslt_backend_failure(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config) {
  if (std::string why = cublaslt_config_failure(a, b, config); !why.empty()) return why;
  if (!is_block128(b.config.granularity))
    return "cuBLASLt with B per " + b.config.granularity.to_string() +
           " (VEC128) folds each 128-block as fma(fl(p*sa), sb, y), not the promotion fma(p, fl(sa*sb), y) the CPU "
           "emulation computes (measured on an H200): as a backend it takes B per block:128x128 only";
  return "";
}

}  // namespace fp8lab
