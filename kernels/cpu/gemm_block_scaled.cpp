#include "kernels/cpu/gemm_block_scaled.hpp"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/block_scaled_mma.hpp"
#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/gemm_block_scaled_terms.hpp"
#include "kernels/cpu/gemm_microtile.hpp"  // stored_output

namespace fp8lab::cpu {
namespace {

using namespace detail::block_scaled;

// One operand row as the instructions read it: each element's value and exponent (its
// format's subnormal exponent at least), K zero-padded; per hardware scale block the scale
// as sig * 2^exp (UE8M0: sig 1).
struct OperandRows {
  std::int64_t padded_k = 0, blocks = 0;
  std::vector<float> value;          // rows x padded_k
  std::vector<std::int16_t> exponent;
  std::vector<double> scale_sig;     // rows x blocks
  std::vector<int> scale_exp;
};

OperandRows prepare(const QuantizedTensor& q, const std::vector<std::int64_t>& selection, std::int64_t padded_k,
                    const BlockScaledMma& mma, const char* name) {
  const std::int64_t rows = selection.empty() ? q.rows : static_cast<std::int64_t>(selection.size());
  OperandRows o;
  o.padded_k = padded_k;
  o.blocks = padded_k / mma.scale_block;
  o.value.assign(static_cast<std::size_t>(rows * padded_k), 0.0f);
  o.exponent.assign(o.value.size(), 0);
  o.scale_sig.assign(static_cast<std::size_t>(rows * o.blocks), 0.0);
  o.scale_exp.assign(o.scale_sig.size(), 0);
  with_element_codec(q.config.format, [&](auto codec) {
    using F = decltype(codec);
    constexpr int kSubnormalExponent = 1 - F::bias;
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t r = selection.empty() ? i : selection[static_cast<std::size_t>(i)];
      for (std::int64_t k = 0; k < q.cols; ++k) {
        const float v = decode<F>(q.codes[static_cast<std::size_t>(r * q.cols + k)]);
        const auto at = static_cast<std::size_t>(i * padded_k + k);
        if (!std::isfinite(v))  // the truncations below are integer conversions: no NaN or inf may reach them
          throw std::invalid_argument(std::string("--accum b200: ") + name + "'s element at row " + std::to_string(r) +
                                      ", K " + std::to_string(k) + " is " + (std::isnan(v) ? "NaN" : "inf") +
                                      " (code " + std::to_string(q.codes[static_cast<std::size_t>(r * q.cols + k)]) +
                                      "): the block-scaled MMA emulation takes finite operands");
        o.value[at] = v;
        o.exponent[at] = static_cast<std::int16_t>(v == 0.0f ? 0 : std::max(floor_log2(v), kSubnormalExponent));
      }
      for (std::int64_t blk = 0; blk < o.blocks; ++blk) {
        const std::int64_t k = std::min(blk * mma.scale_block, q.cols - 1);  // K padding: the last scale
        const float s = q.scale_of(r, std::max<std::int64_t>(k, 0));
        const auto at = static_cast<std::size_t>(i * o.blocks + blk);
        if (mma.scale == HardwareScale::ue8m0) {
          const int e = s > 0.0f && std::isfinite(s) ? floor_log2(s) : INT_MIN;
          if (e < -127 || e > 127 || std::ldexp(1.0f, e) != s)
            throw std::invalid_argument(std::string("--accum b200: ") + name + "'s scale " + std::to_string(s) +
                                        " (row " + std::to_string(r) + ", K block " + std::to_string(blk) +
                                        ") is no UE8M0 value (a power of two in [2^-127, 2^127])");
          o.scale_sig[at] = 1.0;
          o.scale_exp[at] = e;
        } else {  // an E4M3 value >= 0, normalized with E4M3's subnormal exponent -6
          if (!(s >= 0.0f && s <= 448.0f))
            throw std::invalid_argument(std::string("--accum b200: ") + name + "'s scale " + std::to_string(s) + " (row " +
                                        std::to_string(r) + ", K block " + std::to_string(blk) +
                                        ") is no E4M3 block scale (a value in [0, 448])");
          const int e = s == 0.0f ? -6 : std::max(floor_log2(s), -6);
          o.scale_sig[at] = static_cast<double>(s) * pow2(-e);
          o.scale_exp[at] = e;
        }
      }
    }
  });
  return o;
}

// kind::mxf8f6f4: one instruction of `depth` products sharing one scale pair.
float mxf8f6f4_step(float c, const float* va, const std::int16_t* ea, const float* vb, const std::int16_t* eb,
                    int scale_exponent, const BlockScaledMma& mma) {
  if (!std::isfinite(c)) return c;  // an overflowed accumulator stays inf (finite products cannot undo it)
  double product[64];
  int e_max = accumulator_exponent(c, mma.zero_exponent);
  for (int k = 0; k < mma.depth; ++k) {
    product[k] = static_cast<double>(va[k]) * vb[k];
    e_max = std::max(e_max, product[k] == 0.0 ? mma.zero_exponent : ea[k] + eb[k] + scale_exponent);
  }
  const double product_unit = pow2(scale_exponent + mma.fraction_bits - e_max);
  std::int64_t sum = truncated(static_cast<double>(c) * pow2(mma.fraction_bits - e_max));
  for (int k = 0; k < mma.depth; ++k) sum += truncated(product[k] * product_unit);
  return round_toward_zero_fp32(static_cast<double>(sum) * pow2(e_max - mma.fraction_bits));
}

// kind::mxf4nvf4: one instruction of depth / group groups, each with its own scale pair.
float mxf4nvf4_step(float c, const float* va, const float* vb, const double* sig_a, const int* exp_a,
                    const double* sig_b, const int* exp_b, const BlockScaledMma& mma) {
  if (!std::isfinite(c)) return c;
  double group_sum[8];
  bool all_zero[8];
  for (int g = 0; g < mma.depth / mma.group; ++g) {
    group_sum[g] = 0.0;
    all_zero[g] = true;
    for (int k = g * mma.group; k < (g + 1) * mma.group; ++k) {
      const double product = static_cast<double>(va[k]) * vb[k];
      all_zero[g] = all_zero[g] && product == 0.0;
      group_sum[g] += product;  // exact: multiples of 2^-2 below 2^10
    }
  }
  return mxf4nvf4_align_groups(c, group_sum, all_zero, sig_a, exp_a, sig_b, exp_b, mma);
}

struct ScalarSteps {
  static float mxf8f6f4(float c, const float* va, const std::int16_t* ea, const float* vb, const std::int16_t* eb,
                        int scale_exponent, const BlockScaledMma& mma) {
    return mxf8f6f4_step(c, va, ea, vb, eb, scale_exponent, mma);
  }
  static float mxf4nvf4(float c, const float* va, const float* vb, const double* sig_a, const int* exp_a,
                        const double* sig_b, const int* exp_b, const BlockScaledMma& mma) {
    return mxf4nvf4_step(c, va, vb, sig_a, exp_a, sig_b, exp_b, mma);
  }
};

}  // namespace

std::vector<float> gemm_block_scaled(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                                     const GemmOptions& options) {
  const GemmPlan plan = plan_gemm(a, b, config);
  const BlockScaledMma mma = block_scaled_mma_for(a, b);
  const OperandRows pa = prepare(a, options.rows, plan.padded_k, mma, "A");
  const OperandRows pb = prepare(b, options.cols, plan.padded_k, mma, "B");
  const std::int64_t rows = options.rows.empty() ? a.rows : static_cast<std::int64_t>(options.rows.size());
  const std::int64_t cols = options.cols.empty() ? b.rows : static_cast<std::int64_t>(options.cols.size());
  const std::int64_t instructions = plan.padded_k / mma.depth, blocks_per_instruction = mma.depth / mma.scale_block;
  const float alpha = block_scaled_alpha(a, b);
  const bool bf16 = config.output == OutputType::bf16;
  const int threads = options.threads > 0 ? options.threads : omp_get_max_threads();
  // The AVX2 steps (same bits) on an AVX2 CPU; FP8LAB_CPU_ISA=scalar keeps the scalar ones,
  // which the tests run beside them (every MMA here has depth 32 or 64 and groups of 16).
  const bool vector_steps = active_cpu_isa() != CpuIsa::scalar && mma.depth % 8 == 0 && mma.depth <= 64 &&
                            (mma.kind == BlockScaledKind::mxf8f6f4 || (mma.group % 8 == 0 && mma.depth / mma.group <= 8));
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
#pragma omp parallel for schedule(dynamic) num_threads(threads)
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* va = &pa.value[static_cast<std::size_t>(i * plan.padded_k)];
    const std::int16_t* ea = &pa.exponent[static_cast<std::size_t>(i * plan.padded_k)];
    const std::size_t sa = static_cast<std::size_t>(i * pa.blocks);
    for (std::int64_t j = 0; j < cols; ++j) {
      const float* vb = &pb.value[static_cast<std::size_t>(j * plan.padded_k)];
      const std::int16_t* eb = &pb.exponent[static_cast<std::size_t>(j * plan.padded_k)];
      const std::size_t sb = static_cast<std::size_t>(j * pb.blocks);
      const OperandView row{va, ea, &pa.scale_sig[sa], &pa.scale_exp[sa]}, col{vb, eb, &pb.scale_sig[sb], &pb.scale_exp[sb]};
      const float c = vector_steps ? block_scaled_dot_avx2(row, col, instructions, blocks_per_instruction, mma)
                                   : dot_over_instructions<ScalarSteps>(row, col, instructions, blocks_per_instruction, mma);
      out[static_cast<std::size_t>(i * cols + j)] = detail::stored_output(c * alpha, bf16);
    }
  }
  return out;
}

}  // namespace fp8lab::cpu
