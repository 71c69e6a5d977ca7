#pragma once
// The Random Hadamard Transform (RHT) of Transformer Engine's NVFP4 recipe, 16 x 16, with TE's
// one fixed sign vector: a GEMM-operand option (fp8lab gemm --rht) and the Wgrad operands'
// transform of the nvfp4 recipe.
//
// Definition (read from NVIDIA/TransformerEngine, 2026 snapshot d0067d0:
// transformer_engine/pytorch/tensor/nvfp4_tensor.py get_wgrad_sign_vector / get_rht_matrix,
// transformer_engine/pytorch/custom_recipes/reference_nvfp4.py _apply_rht,
// transformer_engine/common/hadamard_transform/hadamard_transform_utils.cuh
// get_hadamard_matrix_fragment): a rows x K operand, K a multiple of 16, is cut along K into
// 1 x 16 groups x (row vectors), and each becomes
//     y = x * M,   M = diag(s) * H16 / 4,
// H16 the Sylvester Hadamard matrix (H16[i][j] = (-1)^popcount(i & j)) and s TE's sign vector
//     s = (+1 +1 +1 -1 +1 -1 -1 -1 -1 -1 -1 +1 -1 +1 -1 -1)   (bit i of 0xD7E8 set: s_i = -1),
// that is y_j = sum_i (s_i x_i / 4) (-1)^popcount(i & j). 1/4 = 1/sqrt(16), so M is orthogonal
// (M M^T = I): for A (M x K) and B (N x K) both transformed, (A M)(B M)^T = A B^T exactly, and
// only the quantization of the transformed operands changes. TE applies it to the Wgrad GEMM's
// operands (the columnwise copies of inputs and output gradients, K = tokens).
//
// Arithmetic (FP32, one fixed order, the same bits on every x86-64: the project compiles with
// -ffp-contract=off and no -ffast-math, so no FMA and no reassociation):
//   1. v_i = (s_i * 0.25f) * x_i: exact (a power of two and a sign) unless v_i is an FP32
//      subnormal that loses bits (|x_i| < 2^-124).
//   2. The natural-order fast Walsh-Hadamard butterfly: for h = 1, 2, 4, 8, for each pair
//      (j, j + h) with bit h of j clear, in increasing j: (v_j, v_{j+h}) <- (v_j + v_{j+h},
//      v_j - v_{j+h}), each rounded once (RNE). After the four stages v_j = y_j.
// Error: each output meets 4 roundings, so |computed y_j - y_j| <= gamma_4 * sum_i |x_i| / 4,
// gamma_4 = 4u / (1 - 4u), u = 2^-24 (the derivation is next to the test's bound).
// TE's own kernels differ in precision, not in the map: its CUDA path feeds BF16 inputs and
// the BF16 matrix (entries +-0.25, exact) to a tensor-core MMA with FP32 accumulation; the
// PyTorch reference multiplies in the input dtype. fp8lab transforms FP32 operands in FP32.
#include <cstdint>
#include <span>
#include <vector>

namespace fp8lab {

inline constexpr int kHadamardGroup = 16;
// TE's fixed sign vector as its bit mask: bit i set means s_i = -1.
inline constexpr std::uint16_t kTeRhtSignMask = 0xD7E8;

// x: rows x cols row-major FP32, cols a multiple of 16 (throws std::invalid_argument otherwise);
// returns y (same shape): every 1 x 16 group along cols transformed as above. NaN and inf
// propagate as the additions carry them.
std::vector<float> random_hadamard_transform_16(std::span<const float> x, std::int64_t rows, std::int64_t cols);

}  // namespace fp8lab
