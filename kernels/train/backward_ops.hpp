#pragma once
// Backward of the non-GEMM ops of forward_ops.hpp, written by hand from the chain rule
// (the same derivations as the FP64 reference). Accumulating outputs (+=) run over rows in
// order, so a caller that feeds row slices in order gets the bits of one full pass.
#include "kernels/train/tensor.hpp"

namespace fp8lab::train {

// RMSNorm: dx = r g.dy - r^3 / D x sum(dy g x) with r = (mean x^2 + eps)^-1/2; dg += dy x r.
// dx is written (not accumulated), and must not alias x or dy: dg is summed after every row of
// dx is written.
template <class Real>
void rmsnorm_backward(const Tensor<Real>& x, const Tensor<Real>& g, const Tensor<Real>& dy, Tensor<Real>& dx,
                      Tensor<Real>& dg);

// Attention, every head (p, q, k, v as in forward_ops.hpp; d_o: T x dim):
// dp = d_o v^T; ds = p (dp - rowsum(p dp)) / sqrt(hs); dq = ds k; dk += ds^T q; dv += p^T d_o.
// dq, dk, dv are written (kv heads shared by a group accumulate in head order).
template <class Real>
void attention_backward(const Tensor<Real>& p, const Tensor<Real>& q, const Tensor<Real>& k, const Tensor<Real>& v,
                        const Tensor<Real>& d_o, int heads, int kv_heads, Tensor<Real>& dq, Tensor<Real>& dk,
                        Tensor<Real>& dv);

// SwiGLU g = silu(h1) h3: dh1 = dg h3 silu'(h1), dh3 = dg silu(h1).
template <class Real>
void swiglu_backward(const Tensor<Real>& h1, const Tensor<Real>& h3, const Tensor<Real>& dg, Tensor<Real>& dh1,
                     Tensor<Real>& dh3);

// Embedding: dE[token t] += dx[t] for t in order.
template <class Real>
void embedding_backward(const Tensor<Real>& dx, const int* tokens, Tensor<Real>& d_embedding);

}  // namespace fp8lab::train
