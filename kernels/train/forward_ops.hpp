#pragma once
// The non-GEMM forward ops of the Llama block, in the step's compute precision Real (FP64
// for the fp64 recipe, FP32 otherwise), written from the same formulas as the FP64
// reference (reference/llama_fp64_ref.cpp) but independently of it. Rows are positions.
// Sums run in index order; transcendental functions are std:: ones in Real.
#include <cstdint>
#include <vector>

#include "kernels/train/tensor.hpp"

namespace fp8lab::train {

inline constexpr double kRmsEps = 1e-5, kRopeTheta = 10000.0;

// The elementwise and row-wise ops (here and in backward_ops.hpp) split their elements or rows
// between the thread team from this many elements: below it, waking the team costs more than
// the work (stories260K's 256 x 64 activations stay on one thread). Each element is computed by
// one thread as the plain loop computes it, and sums across rows keep their order, so the bits
// are the same on any number of threads.
inline constexpr std::int64_t kParallelElementwise = std::int64_t{1} << 15;

// y = x * g / sqrt(mean(x^2) + eps), row by row (g: 1 x cols).
template <class Real>
void rmsnorm_forward(const Tensor<Real>& x, const Tensor<Real>& g, Tensor<Real>& y);

// Rotates consecutive pairs (i, i+1) of row t by angle sign * t * theta^-((i mod hs) / hs),
// in place; `first_position` is the position of row 0. Angles in FP64, cos/sin rounded to Real.
template <class Real>
void rope_inplace(Tensor<Real>& x, int head_size, double sign, std::int64_t first_position = 0);

// The columns [column, column + hs) of x (T x cols) transposed into xt (hs x T, row-major):
// what the attention loops read when they run over positions.
template <class Real>
void transpose_head(const Tensor<Real>& x, std::int64_t column, std::int64_t hs, std::vector<Real>& xt);

// Causal attention of every head: p_h = softmax(q_h k_g^T / sqrt(hs)) (g = h / group),
// o_h = p_h v_g. p is (heads * T) x T, head h in rows [h T, (h+1) T).
template <class Real>
void attention_scores(const Tensor<Real>& q, const Tensor<Real>& k, int heads, int kv_heads, Tensor<Real>& p);
template <class Real>
void attention_output(const Tensor<Real>& p, const Tensor<Real>& v, int heads, int kv_heads, Tensor<Real>& o);

// g = silu(h1) * h3
template <class Real>
void swiglu_forward(const Tensor<Real>& h1, const Tensor<Real>& h3, Tensor<Real>& g);

// y += x
template <class Real>
void add_inplace(Tensor<Real>& y, const Tensor<Real>& x);

// Mean next-token cross-entropy over positions 0..T-2 of logits (T x vocab), and its
// gradient (softmax - one_hot(next)) / (T - 1) written over the logits.
template <class Real>
double cross_entropy_inplace(Tensor<Real>& logits, const int* tokens);

}  // namespace fp8lab::train
