#pragma once
// FP64 dot products, sums and the FP64 GEMM of the references, in ONE summation order that
// this code fixes, so a reference gives the same bits on every x86-64 machine whatever the
// -march (SSE2, AVX2, AVX-512), compiler vectorization or thread count:
//
//   lane j (j = 0..7) sums the terms k = j, j + 8, j + 16, ... < n in increasing k, from +0,
//   each term a[k] * b[k] rounded once, then added (no FMA: the project compiles with
//   -ffp-contract=off, and GCC never reassociates without -ffast-math);
//   the lanes are combined as ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)).
//
// Eight independent lanes let the compiler keep them in SIMD registers of any width (four
// SSE2 or two AVX2 registers) without changing a single operation. Eigen's products and
// reductions (.sum(), .dot(), .squaredNorm(), a * b) choose their order from the SIMD width
// the translation unit was compiled for, and use FMA when -mfma is on: different bits.
// Error bound of this order: |computed - exact| <= gamma_(ceil(n/8) + 3) sum |a_k b_k|, with
// gamma_m = m 2^-53 / (1 - m 2^-53): each term meets one product rounding, at most
// ceil(n/8) - 1 additions in its lane and 3 in the tree.
#include <Eigen/Dense>
#include <cstdint>

namespace fp8lab::ref {

inline constexpr int kSumLanes = 8;

double dot_fp64(const double* a, const double* b, std::int64_t n);
double sum_fp64(const double* x, std::int64_t n);

// Vector conveniences (any Eigen vector or row/column expression; copied to contiguous
// storage first, so strided rows of column-major matrices are fine).
double dot_fp64(const Eigen::VectorXd& a, const Eigen::VectorXd& b);
double sum_fp64(const Eigen::VectorXd& x);

// a (M x K) times b (N x K) transposed, in FP64: c(i, j) = dot_fp64(row i of a, row j of b).
Eigen::MatrixXd gemm_fp64(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b);

}  // namespace fp8lab::ref
