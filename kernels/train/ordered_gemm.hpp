#pragma once
// C (m x n) (+)= A (m x k) B (k x n) with every output's sum in one fixed order: it starts from
// 0 (or the C already there, when accumulating) and adds a(i, p) b(p, j) for p = 0, 1, ..., k-1,
// one rounding per product and one per addition (the project compiles with -ffp-contract=off).
// That is the order of the plain loop nest, so a caller may swap its loops for this kernel, or
// split k into consecutive calls that accumulate, without changing a bit. The engine's linear
// layers (linear_gemm.cpp) and flash attention's tiles (flash_attention.cpp) both run on it.
//
// Speed: whole kRows x kCols blocks of C stay in registers over the whole of k (GCC vector types
// of 32 bytes: 8 floats or 4 doubles, two per row), so each b(p, :) load serves kRows rows; the
// edges run the plain loop with the n sums of a row side by side (vectorizable across j).
// Strides: A, B and C are row-major with row strides lda, ldb, ldc (a block of a larger matrix
// is read and written in place); ordered_gemm_at reads A transposed (A's element (i, p) at
// a[p lda + i]), which flash attention's dK = dS^T Q and dV = P^T dO need.
#include <algorithm>
#include <cstdint>
#include <cstring>

namespace fp8lab::train::ordered_gemm_detail {

inline constexpr std::int64_t kRows = 4, kVectors = 2;

template <class Real>
struct Vector32Of;
template <>
struct Vector32Of<float> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct Vector32Of<double> {
  typedef double type __attribute__((vector_size(32)));
};
template <class Real>
using Vector32 = typename Vector32Of<Real>::type;

template <class Real>
inline constexpr std::int64_t kLanes = static_cast<std::int64_t>(32 / sizeof(Real));
template <class Real>
inline constexpr std::int64_t kCols = kVectors * kLanes<Real>;

// Through a reference, not a return value: a 32-byte vector returned by value would change the
// function's ABI on a build without AVX (x86-64-v2, where GCC warns), though the arithmetic is
// the same there.
template <class Real>
inline void load(Vector32<Real>& v, const Real* p) {
  std::memcpy(&v, p, sizeof v);
}

// A's element (i, p): row-major, or stored transposed.
template <bool kTransposedA, class Real>
inline Real a_at(const Real* a, std::int64_t lda, std::int64_t i, std::int64_t p) {
  return kTransposedA ? a[p * lda + i] : a[i * lda + p];
}

// One kRows x kCols block of C, its sums in registers from first to last p.
template <bool kTransposedA, class Real>
inline void block(const Real* a, std::int64_t lda, const Real* b, std::int64_t ldb, Real* c, std::int64_t ldc,
                  std::int64_t k, bool accumulate) {
  Vector32<Real> acc[kRows][kVectors];
  for (std::int64_t r = 0; r < kRows; ++r)
    for (std::int64_t v = 0; v < kVectors; ++v) {
      acc[r][v] = Vector32<Real>{};
      if (accumulate) load(acc[r][v], c + r * ldc + v * kLanes<Real>);
    }
  for (std::int64_t p = 0; p < k; ++p) {
    Vector32<Real> bp[kVectors];
    for (std::int64_t v = 0; v < kVectors; ++v) load(bp[v], b + p * ldb + v * kLanes<Real>);
    for (std::int64_t r = 0; r < kRows; ++r) {
      const Real arp = a_at<kTransposedA>(a, lda, r, p);
      for (std::int64_t v = 0; v < kVectors; ++v) acc[r][v] += arp * bp[v];
    }
  }
  for (std::int64_t r = 0; r < kRows; ++r)
    for (std::int64_t v = 0; v < kVectors; ++v) std::memcpy(c + r * ldc + v * kLanes<Real>, &acc[r][v], sizeof acc[r][v]);
}

// One kRows x kLanes block: the shape of a head of 8 floats (stories260K's) or 4 doubles.
template <bool kTransposedA, class Real>
inline void narrow_block(const Real* a, std::int64_t lda, const Real* b, std::int64_t ldb, Real* c, std::int64_t ldc,
                         std::int64_t k, bool accumulate) {
  Vector32<Real> acc[kRows];
  for (std::int64_t r = 0; r < kRows; ++r) {
    acc[r] = Vector32<Real>{};
    if (accumulate) load(acc[r], c + r * ldc);
  }
  for (std::int64_t p = 0; p < k; ++p) {
    Vector32<Real> bp;
    load(bp, b + p * ldb);
    for (std::int64_t r = 0; r < kRows; ++r) acc[r] += a_at<kTransposedA>(a, lda, r, p) * bp;
  }
  for (std::int64_t r = 0; r < kRows; ++r) std::memcpy(c + r * ldc, &acc[r], sizeof acc[r]);
}

// Rows [i0, i1), columns [j_begin, n) of C: the register blocks, then what they leave by the
// plain loop.
template <bool kTransposedA, class Real>
inline void rows(const Real* a, std::int64_t lda, const Real* b, std::int64_t ldb, Real* c, std::int64_t ldc,
                 std::int64_t i0, std::int64_t i1, std::int64_t j_begin, std::int64_t n, std::int64_t k, bool accumulate) {
  const std::int64_t wide = j_begin + (n - j_begin) / kCols<Real> * kCols<Real>;
  const std::int64_t narrow = wide + (n - wide) / kLanes<Real> * kLanes<Real>;
  std::int64_t i = i0;
  for (; i + kRows <= i1; i += kRows) {
    const Real* ai = kTransposedA ? a + i : a + i * lda;  // A's rows i.. as the block reads them
    for (std::int64_t j0 = j_begin; j0 < wide; j0 += kCols<Real>)
      block<kTransposedA>(ai, lda, b + j0, ldb, c + i * ldc + j0, ldc, k, accumulate);
    for (std::int64_t j0 = wide; j0 < narrow; j0 += kLanes<Real>)
      narrow_block<kTransposedA>(ai, lda, b + j0, ldb, c + i * ldc + j0, ldc, k, accumulate);
  }
  const std::int64_t block_rows_end = i;
  for (std::int64_t r = i0; r < i1; ++r) {
    const std::int64_t j_first = r < block_rows_end ? narrow : j_begin;  // what the blocks left
    Real* out = c + r * ldc;
    if (!accumulate) std::fill(out + j_first, out + n, Real(0));
    for (std::int64_t p = 0; p < k; ++p) {
      const Real arp = a_at<kTransposedA>(a, lda, r, p);
      const Real* bp = b + p * ldb;
      for (std::int64_t j = j_first; j < n; ++j) out[j] += arp * bp[j];
    }
  }
}

// The K extent of a packed panel: kPanelDepth x kCols floats is 16 KiB, half a typical L1.
inline constexpr std::int64_t kPanelDepth = 256;

// Rows [i0, i1) of C = A B for large operands (A row-major, or stored transposed as in rows()):
// K in chunks of kPanelDepth; in each, B's kCols-wide column panels copied to a contiguous buffer
// once and run against every band of kRows rows while they sit in L1, instead of every band
// streaming all of B from L2 or beyond. The same bits as rows(): each register block carries its
// sums in FP32 to C between chunks and back (exact), so every output still adds its products in
// order of p. `panel` holds kPanelDepth x kCols values.
template <bool kTransposedA, class Real>
inline void rows_packed(const Real* a, std::int64_t lda, const Real* b, std::int64_t ldb, Real* c, std::int64_t ldc,
                        std::int64_t i0, std::int64_t i1, std::int64_t n, std::int64_t k, bool accumulate, Real* panel) {
  const std::int64_t bands_end = i0 + (i1 - i0) / kRows * kRows;
  const std::int64_t wide = n / kCols<Real> * kCols<Real>;
  if (k == 0 || bands_end == i0 || wide == 0) return rows<kTransposedA>(a, lda, b, ldb, c, ldc, i0, i1, 0, n, k, accumulate);
  for (std::int64_t p0 = 0; p0 < k; p0 += kPanelDepth) {
    const std::int64_t depth = std::min(kPanelDepth, k - p0);
    for (std::int64_t j0 = 0; j0 < wide; j0 += kCols<Real>) {
      for (std::int64_t p = 0; p < depth; ++p)
        std::memcpy(panel + p * kCols<Real>, b + (p0 + p) * ldb + j0, sizeof(Real) * kCols<Real>);
      for (std::int64_t i = i0; i < bands_end; i += kRows) {
        const Real* ai = kTransposedA ? a + p0 * lda + i : a + i * lda + p0;  // rows i.., from column p0
        block<kTransposedA>(ai, lda, panel, kCols<Real>, c + i * ldc + j0, ldc, depth, accumulate || p0 > 0);
      }
    }
  }
  rows<kTransposedA>(a, lda, b, ldb, c, ldc, i0, bands_end, wide, n, k, accumulate);  // the bands' last columns
  rows<kTransposedA>(a, lda, b, ldb, c, ldc, bands_end, i1, 0, n, k, accumulate);     // rows short of a band
}

}  // namespace fp8lab::train::ordered_gemm_detail

namespace fp8lab::train {

// The register-block height: callers that split rows between threads split on multiples of it.
inline constexpr std::int64_t kOrderedGemmRows = ordered_gemm_detail::kRows;

// C (m x n) (+)= A (m x k) B (k x n), one thread; see the header comment for the order.
template <class Real>
inline void ordered_gemm(const Real* a, std::int64_t lda, const Real* b, std::int64_t ldb, Real* c, std::int64_t ldc,
                         std::int64_t m, std::int64_t n, std::int64_t k, bool accumulate) {
  ordered_gemm_detail::rows<false>(a, lda, b, ldb, c, ldc, 0, m, 0, n, k, accumulate);
}

// C (m x n) (+)= A^T B where `a` holds A^T (k x m, row stride lda): the same order.
template <class Real>
inline void ordered_gemm_at(const Real* a, std::int64_t lda, const Real* b, std::int64_t ldb, Real* c, std::int64_t ldc,
                            std::int64_t m, std::int64_t n, std::int64_t k, bool accumulate) {
  ordered_gemm_detail::rows<true>(a, lda, b, ldb, c, ldc, 0, m, 0, n, k, accumulate);
}

// Rows [i0, i1) of that product (a thread's share; any split gives the same bits).
template <class Real>
inline void ordered_gemm_rows(const Real* a, std::int64_t lda, const Real* b, std::int64_t ldb, Real* c, std::int64_t ldc,
                              std::int64_t i0, std::int64_t i1, std::int64_t n, std::int64_t k, bool accumulate) {
  ordered_gemm_detail::rows<false>(a, lda, b, ldb, c, ldc, i0, i1, 0, n, k, accumulate);
}

// The same rows by the packed-panel path (ordered_gemm_detail::rows_packed), for operands too
// large for L1; `panel` holds kOrderedGemmPanelValues values. The same bits.
template <class Real>
inline constexpr std::int64_t kOrderedGemmPanelValues = ordered_gemm_detail::kPanelDepth * ordered_gemm_detail::kCols<Real>;
template <class Real>
inline void ordered_gemm_rows_packed(const Real* a, std::int64_t lda, const Real* b, std::int64_t ldb, Real* c,
                                     std::int64_t ldc, std::int64_t i0, std::int64_t i1, std::int64_t n, std::int64_t k,
                                     bool accumulate, Real* panel) {
  ordered_gemm_detail::rows_packed<false>(a, lda, b, ldb, c, ldc, i0, i1, n, k, accumulate, panel);
}

// The same with A stored transposed (`a` holds A^T, k x m, row stride lda), as ordered_gemm_at:
// the engine's Wgrad reads dY^T this way without making it. The same bits.
template <class Real>
inline void ordered_gemm_at_rows_packed(const Real* a, std::int64_t lda, const Real* b, std::int64_t ldb, Real* c,
                                        std::int64_t ldc, std::int64_t i0, std::int64_t i1, std::int64_t n, std::int64_t k,
                                        bool accumulate, Real* panel) {
  ordered_gemm_detail::rows_packed<true>(a, lda, b, ldb, c, ldc, i0, i1, n, k, accumulate, panel);
}

}  // namespace fp8lab::train
