#include "reference/fp64_dot_ref.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <vector>

// The order below is the contract; compiler options that would let it change are refused.
#ifdef __FAST_MATH__
#error "reference/fp64_dot_ref.cpp must not be compiled with -ffast-math: it would reorder the fixed FP64 sums"
#endif

namespace fp8lab::ref {
namespace {

using Lanes = std::array<double, kSumLanes>;
using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Adds the terms k = 0..n-1 of a * b to the lanes, term k to lane k mod 8 in increasing k.
// Calls on consecutive pieces of a longer dot product, every piece but the last of a length
// divisible by 8, leave the lanes exactly as one call on the whole.
void accumulate(Lanes& s, const double* a, const double* b, std::int64_t n) {
  std::int64_t k = 0;
  for (; k + kSumLanes <= n; k += kSumLanes)
    for (int j = 0; j < kSumLanes; ++j) s[j] += a[k + j] * b[k + j];
  for (int j = 0; k + j < n; ++j) s[j] += a[k + j] * b[k + j];
}

double combine(const Lanes& s) { return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7])); }

}  // namespace

double dot_fp64(const double* a, const double* b, std::int64_t n) {
  Lanes s{};
  accumulate(s, a, b, n);
  return combine(s);
}

double sum_fp64(const double* x, std::int64_t n) {
  Lanes s{};
  std::int64_t k = 0;
  for (; k + kSumLanes <= n; k += kSumLanes)
    for (int j = 0; j < kSumLanes; ++j) s[j] += x[k + j];
  for (int j = 0; k + j < n; ++j) s[j] += x[k + j];
  return combine(s);
}

double dot_fp64(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
  if (a.size() != b.size())
    throw std::invalid_argument("dot_fp64: lengths " + std::to_string(a.size()) + " and " + std::to_string(b.size()));
  return dot_fp64(a.data(), b.data(), a.size());
}

double sum_fp64(const Eigen::VectorXd& x) { return sum_fp64(x.data(), x.size()); }

Eigen::MatrixXd gemm_fp64(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  if (a.cols() != b.cols())
    throw std::invalid_argument("gemm_fp64: A is " + std::to_string(a.rows()) + "x" + std::to_string(a.cols()) +
                                " and B is " + std::to_string(b.rows()) + "x" + std::to_string(b.cols()) +
                                ": they must share K");
  const RowMajor ar = a, br = b;  // rows contiguous
  const Eigen::Index M = a.rows(), N = b.rows(), K = a.cols();
  // c(i, j) is dot_fp64 of row i of A and row j of B, computed in pieces of K (multiples of 8)
  // so that a piece of a block of B's rows (16 x 512 doubles, 64 KiB) stays in cache while
  // every row of A passes; each output's lanes carry over from piece to piece, so every
  // operation is the one dot_fp64 does (the tests check gemm_fp64 against it to the bit).
  constexpr Eigen::Index kRowsB = 16, kPieceK = 512;
  static_assert(kPieceK % kSumLanes == 0);
  Eigen::MatrixXd c(M, N);
  std::vector<Lanes> lanes(static_cast<std::size_t>(M * kRowsB));
  for (Eigen::Index j0 = 0; j0 < N; j0 += kRowsB) {
    const Eigen::Index nb = std::min(kRowsB, N - j0);
    std::fill(lanes.begin(), lanes.end(), Lanes{});
    for (Eigen::Index k0 = 0; k0 < K; k0 += kPieceK)
      for (Eigen::Index i = 0; i < M; ++i)
        for (Eigen::Index j = 0; j < nb; ++j)
          accumulate(lanes[static_cast<std::size_t>(i * kRowsB + j)], ar.row(i).data() + k0, br.row(j0 + j).data() + k0,
                     std::min(kPieceK, K - k0));
    for (Eigen::Index i = 0; i < M; ++i)
      for (Eigen::Index j = 0; j < nb; ++j) c(i, j0 + j) = combine(lanes[static_cast<std::size_t>(i * kRowsB + j)]);
  }
  return c;
}

}  // namespace fp8lab::ref
