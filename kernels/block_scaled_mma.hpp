#pragma once
// Blackwell's block-scaled MMA, the accumulation model `--accum b200`: the operands' block
// scales enter the tensor-core instruction (tcgen05.mma ... .block_scale), and the FP32
// accumulator stays in the tensor core over all of K (no promotion on the CUDA cores). The
// arithmetic is MMA-Sim's (microsoft/MMA-Sim, mmasim.arithmetic.fdpa: MMA_ST_FDPA and
// MMA_GST_FDPA; FACTS.md "Accumulators"). Terms are written sig * 2^e with e unnormalized.
//
// kind::mxf8f6f4 (FP8 / FP6 / FP4 elements, a UE8M0 scale per 32 of K; 32 products per
// instruction, F = 25): term k is a_k b_k 2^(x_a + x_b) (x: the scales' exponents) with
//   e = e(a_k) + e(b_k) + x_a + x_b, e(v) = max(floor(log2 |v|), the format's 1 - bias);
// the accumulator c is a term too (e = FP32 exponent, -126 for subnormals). A zero term (a
// zero product, c = 0) has e = -133. E = max e; every term is truncated toward zero to a
// multiple of 2^(E - F); the sum is exact and is rounded toward zero to FP32 (subnormals
// kept, an overflow is inf, -0 is +0): the next c.
// kind::mxf4nvf4 (E2M1 x E2M1, a scale per 16 of K, UE4M3 = nvfp4's E4M3 block scale or
// UE8M0; 64 products per instruction, F = 35): every group of 16 products is summed exactly,
// p_g; the two scales' product sig_s 2^(e_s) (each scale normalized in its own format: E4M3
// subnormals at exponent -6, UE8M0 exact) makes the term p_g sig_s at exponent e_s (p_g sig_s
// not normalized). A group whose 16 products are all zero (not one that cancels to zero) or
// whose scale product is zero has e = -139, as has c = 0. Then as above with F = 35.
// Epilogue: D = fl32(c * alpha), alpha the two-level (nvfp4) rules' per-tensor factor
// (block_scaled_alpha), 1 for the MX rules; BF16 output rounds D to nearest even.
//
// Which scales the MMA takes (the hardware's scale types): UE8M0 scales come from the rules
// whose scales are powers of two (pow2, te-pow2, mx, mx:ceil, mx:even, mx:rceil); UE4M3 from
// the nvfp4 rules, with E2M1 elements only. A scale covering more of K than the hardware's
// block (1x128 tiles, 128x128 blocks, rows, tensors) is the same scale repeated per block, as
// DeepGEMM's SM100 kernels feed 1x128 UE8M0 scales to kind::mxf8f6f4.
#include <cstdint>

#include "kernels/quantization.hpp"

namespace fp8lab {

enum class BlockScaledKind : std::uint8_t { mxf8f6f4, mxf4nvf4 };
enum class HardwareScale : std::uint8_t { ue8m0, ue4m3 };

struct BlockScaledMma {
  BlockScaledKind kind = BlockScaledKind::mxf8f6f4;
  HardwareScale scale = HardwareScale::ue8m0;
  int fraction_bits = 25;   // F
  int depth = 32;           // products per instruction
  int group = 1;            // products summed exactly before alignment (16 for mxf4nvf4)
  int zero_exponent = -133;
  int scale_block = 32;     // products one hardware scale covers (the operand scales' K extent must be a multiple)
};

inline constexpr BlockScaledMma kMxf8f6f4{BlockScaledKind::mxf8f6f4, HardwareScale::ue8m0, 25, 32, 1, -133, 32};
inline constexpr BlockScaledMma kMxf4nvf4Ue8m0{BlockScaledKind::mxf4nvf4, HardwareScale::ue8m0, 35, 64, 16, -139, 16};
inline constexpr BlockScaledMma kMxf4nvf4Ue4m3{BlockScaledKind::mxf4nvf4, HardwareScale::ue4m3, 35, 64, 16, -139, 16};

const char* block_scaled_kind_name(BlockScaledKind kind);  // "mxf8f6f4", "mxf4nvf4"

// The instruction B200 runs for these operands; throws std::invalid_argument saying why none:
// a scale rule whose scales are no hardware scale type (fp32, deepgemm, te, div), nvfp4 scales
// on a non-E2M1 operand, operands with different scale types, a scale extent along K that is
// no multiple of the instruction's scale block.
BlockScaledMma block_scaled_mma_for(const QuantizedTensor& a, const QuantizedTensor& b);

// The epilogue factor: 1 unless a two-level (nvfp4) rule; Transformer Engine's rules (nvfp4,
// nvfp4:4over6 on both operands): fl32(fl32(amax_a * amax_b) * fl32(1 / (L_a L_b))), L the
// rule's 448 * 6, as TE's nvte_nvfp4_compute_per_tensor_scale (for 4over6 fp8lab takes 256 * 6, the
// bound of its S_enc: TE's own alpha for 4over6 was not read); otherwise
// (torchao's `result * (a.per_tensor_scale * b.per_tensor_scale)`) fl32(decode_a * decode_b).
float block_scaled_alpha(const QuantizedTensor& a, const QuantizedTensor& b);

}  // namespace fp8lab
