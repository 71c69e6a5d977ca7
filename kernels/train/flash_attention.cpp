#include "kernels/train/flash_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/train/exp_f32.hpp"
#include "kernels/train/ordered_gemm.hpp"

namespace fp8lab::train {
namespace {

// FP32 steps take the vectorized exp_f32 (within 1 ulp, same bits on every machine); the FP64
// step keeps std::exp. x[u] = exp(x[u] a - b).
template <class Real>
Real exp_of(Real x) {
  if constexpr (std::is_same_v<Real, float>)
    return exp_f32(x);
  else
    return std::exp(x);
}
template <class Real>
void exp_affine(Real* x, std::int64_t n, Real a, Real b) {
  if constexpr (std::is_same_v<Real, float>)
    exp_f32_affine(x, n, a, b);
  else
    for (std::int64_t u = 0; u < n; ++u) x[u] = std::exp(x[u] * a - b);
}

constexpr std::int64_t B = kFlashBlock;

void require(bool ok, const char* what, std::int64_t got, std::int64_t want) {
  if (!ok)
    throw std::invalid_argument(std::string("flash attention: ") + what + " is " + std::to_string(got) + ", expected " +
                                std::to_string(want));
}

template <class Real>
void check_operands(const Tensor<Real>& q, const Tensor<Real>& k, const Tensor<Real>& v, int heads, int kv_heads) {
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0 || q.cols % heads != 0)
    throw std::invalid_argument("flash attention: heads " + std::to_string(heads) + " / kv_heads " + std::to_string(kv_heads) +
                                " do not split q's " + std::to_string(q.cols) + " columns into groups");
  const std::int64_t hs = q.cols / heads;
  require(k.rows == q.rows && v.rows == q.rows, "k / v rows", k.rows, q.rows);
  require(k.cols == kv_heads * hs && v.cols == kv_heads * hs, "k / v columns", k.cols, kv_heads * hs);
}

// xt (hs x B, row i holds column c0 + i of rows [u0, u0 + n) of x): what the score loops read
// so that the sums over keys run side by side.
template <class Real>
void transpose_block(const Tensor<Real>& x, std::int64_t u0, std::int64_t n, std::int64_t c0, std::int64_t hs, Real* xt) {
  for (std::int64_t u = 0; u < n; ++u) {
    const Real* row = x.row(u0 + u) + c0;
    for (std::int64_t i = 0; i < hs; ++i) xt[i * B + u] = row[i];
  }
}

// The diagonal tile (key block k0 = query block q0, `rows` x `cols` in a row stride of B): row
// r's query t = q0 + r sees keys u <= r only, so the entries right of the diagonal are set to
// `value`. The tile then runs as a whole tile, which gives the row-by-row loop's bits for
// finite operands: a masked score is -inf, so its probability is exp(-inf) = 0 exactly
// (exp_f32 gives 0 below -103.97) and it moves neither the row's maximum nor its sum; in the
// backward pass its probability and dS are set to 0. Each output's sum then runs over the same
// terms in the same order plus terms 0 * finite = +-0, and x + +-0 = x. (A later key's inf or
// NaN in V, K, Q or dO would now reach earlier queries as 0 * inf = NaN; the row loop never
// read them. Operands are finite unless a run has already diverged.) Whole tiles keep the
// register-blocked ordered_gemm on the diagonal too.
template <class Real>
void mask_later_keys(Real* s, std::int64_t rows, std::int64_t cols, Real value) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t u = r + 1; u < cols; ++u) s[r * B + u] = value;
}

// Scales row[0, n) by `scale` in place and returns the largest of `top` and the scaled values,
// with the scalar loop's result (top = std::max(top, x) for each x in turn): 32-byte lanes keep
// their own maxima, folded into `top` at the end. Max is exact, so the order cannot change the
// value; a NaN score never wins and a NaN top stays, as in the loop. Only the sign of a zero
// maximum could differ, and no use of it can tell (exp(s - top) and m + log(l) are the same
// for +0 and -0).
template <class Real>
Real scale_and_max(Real* row, std::int64_t n, Real scale, Real top) {
  using V = ordered_gemm_detail::Vector32<Real>;
  constexpr std::int64_t kLanes = ordered_gemm_detail::kLanes<Real>;
  V lanes = V{} - std::numeric_limits<Real>::infinity();
  std::int64_t u = 0;
  for (; u + kLanes <= n; u += kLanes) {
    V x;
    std::memcpy(&x, row + u, sizeof x);
    x *= scale;
    std::memcpy(row + u, &x, sizeof x);
    lanes = lanes < x ? x : lanes;
  }
  for (; u < n; ++u) {
    row[u] = row[u] * scale;
    top = std::max(top, row[u]);
  }
  for (std::int64_t i = 0; i < kLanes; ++i) top = std::max(top, lanes[i]);
  return top;
}

// sums[r] = s(r, 0) + s(r, 1) + ... + s(r, n - 1), added in that order (the plain loop's), for
// the rows of a tile (row stride B): eight rows' sums run side by side, so the additions of one
// row no longer wait on each other's latency.
template <class Real>
void row_sums(const Real* s, std::int64_t rows, std::int64_t n, Real* sums) {
  constexpr std::int64_t kSide = 8;
  std::int64_t r0 = 0;
  for (; r0 + kSide <= rows; r0 += kSide) {
    Real acc[kSide] = {};
    for (std::int64_t u = 0; u < n; ++u)
      for (std::int64_t j = 0; j < kSide; ++j) acc[j] += s[(r0 + j) * B + u];
    std::copy(acc, acc + kSide, sums + r0);
  }
  for (; r0 < rows; ++r0) {
    Real sum = 0;
    for (std::int64_t u = 0; u < n; ++u) sum += s[r0 * B + u];
    sums[r0] = sum;
  }
}

}  // namespace

std::int64_t flash_forward_lane_elements(std::int64_t hs) { return hs * B + B * B + 2 * B; }
std::int64_t flash_backward_lane_elements(std::int64_t hs) { return 2 * hs * B + 2 * B * B; }

template <class Real>
void flash_attention_forward(const Tensor<Real>& q, const Tensor<Real>& k, const Tensor<Real>& v, int heads,
                             int kv_heads, Tensor<Real>& o, Tensor<Real>& lse, Tensor<Real>& workspace) {
  check_operands(q, k, v, heads, kv_heads);
  const std::int64_t T = q.rows, hs = q.cols / heads;
  require(o.rows == T && o.cols == q.cols, "o's size", o.size(), q.size());
  require(lse.rows == heads && lse.cols == T, "the log-sum-exp's size", lse.size(), heads * T);
  require(workspace.rows >= heads && workspace.cols >= flash_forward_lane_elements(hs), "the workspace's lane size",
          workspace.cols, flash_forward_lane_elements(hs));
  const int group = heads / kv_heads;
  const Real scale = static_cast<Real>(1.0 / std::sqrt(static_cast<double>(hs)));
#pragma omp parallel for schedule(static) if (T >= kFlashParallelMinPositions)
  for (int h = 0; h < heads; ++h) {
    const std::int64_t qc = h * hs, kc = (h / group) * hs;
    Real* kt = workspace.row(h);      // hs x B
    Real* s = kt + hs * B;            // B x B: a tile's scores, then probabilities
    Real* m = s + B * B;              // B: running max of each row of the query block
    Real* l = m + B;                  // B: running sum
    // Row r's online-softmax update from its n scores in `row` (turned into probabilities), in
    // two halves so that a whole tile can sum its rows side by side (row_sums) in between:
    // start_row returns the factor that rescales the row's output so far, finish_row takes the
    // row's sum of probabilities.
    const auto start_row = [&](std::int64_t r, Real* row, std::int64_t n) {
      const Real top = scale_and_max(row, n, scale, m[r]);
      const Real alpha = exp_of(m[r] - top);  // 0 on the row's first block (m = -inf)
      exp_affine(row, n, Real(1), top);       // exp(s - top): s * 1 is s
      m[r] = top;
      return alpha;
    };
    const auto finish_row = [&](std::int64_t r, Real alpha, Real sum) { l[r] = l[r] * alpha + sum; };
    for (std::int64_t q0 = 0; q0 < T; q0 += B) {
      const std::int64_t rows = std::min(B, T - q0);
      std::fill(m, m + rows, -std::numeric_limits<Real>::infinity());
      std::fill(l, l + rows, Real(0));
      for (std::int64_t r = 0; r < rows; ++r) std::fill(o.row(q0 + r) + qc, o.row(q0 + r) + qc + hs, Real(0));
      for (std::int64_t k0 = 0; k0 < q0 + rows; k0 += B) {  // key blocks up to the diagonal
        const std::int64_t cols = std::min(B, T - k0);
        transpose_block(k, k0, cols, kc, hs, kt);
        ordered_gemm(q.row(q0) + qc, q.cols, kt, B, s, B, rows, cols, hs, false);  // S = Q K^T
        if (k0 == q0) mask_later_keys(s, rows, cols, -std::numeric_limits<Real>::infinity());
        Real alpha[B], sums[B];
        for (std::int64_t r = 0; r < rows; ++r) alpha[r] = start_row(r, s + r * B, cols);
        row_sums(s, rows, cols, sums);
        for (std::int64_t r = 0; r < rows; ++r) {
          finish_row(r, alpha[r], sums[r]);
          Real* out = o.row(q0 + r) + qc;
          for (std::int64_t i = 0; i < hs; ++i) out[i] *= alpha[r];
        }
        ordered_gemm(s, B, v.row(k0) + kc, v.cols, o.row(q0) + qc, o.cols, rows, hs, cols, true);  // O += P V
      }
      for (std::int64_t r = 0; r < rows; ++r) {
        Real* out = o.row(q0 + r) + qc;
        for (std::int64_t i = 0; i < hs; ++i) out[i] /= l[r];
        lse(h, q0 + r) = m[r] + std::log(l[r]);
      }
    }
  }
}

template <class Real>
void flash_attention_backward(const Tensor<Real>& q, const Tensor<Real>& k, const Tensor<Real>& v, const Tensor<Real>& o,
                              const Tensor<Real>& lse, const Tensor<Real>& d_o, int heads, int kv_heads, Tensor<Real>& dq,
                              Tensor<Real>& dk, Tensor<Real>& dv, Tensor<Real>& delta, Tensor<Real>& workspace) {
  check_operands(q, k, v, heads, kv_heads);
  const std::int64_t T = q.rows, hs = q.cols / heads;
  require(o.size() == q.size() && d_o.size() == q.size() && dq.size() == q.size(), "o / dO / dq's size", d_o.size(), q.size());
  require(dk.size() == k.size() && dv.size() == k.size(), "dk / dv's size", dk.size(), k.size());
  require(lse.rows == heads && lse.cols == T && delta.rows == heads && delta.cols == T, "the log-sum-exp / D size",
          delta.size(), heads * T);
  require(workspace.rows >= kv_heads && workspace.cols >= flash_backward_lane_elements(hs), "the workspace's lane size",
          workspace.cols, flash_backward_lane_elements(hs));
  const int group = heads / kv_heads;
  const Real scale = static_cast<Real>(1.0 / std::sqrt(static_cast<double>(hs)));
  std::fill(dk.data(), dk.data() + dk.size(), Real(0));
  std::fill(dv.data(), dv.data() + dv.size(), Real(0));
#pragma omp parallel for schedule(static) if (T >= kFlashParallelMinPositions)
  for (int g = 0; g < kv_heads; ++g) {
    const std::int64_t kc = g * hs;
    Real* kt = workspace.row(g);  // hs x B
    Real* vt = kt + hs * B;       // hs x B
    Real* p = vt + hs * B;        // B x B: a tile's recomputed probabilities
    Real* ds = p + B * B;         // B x B: dp, then ds
    for (int h = g * group; h < (g + 1) * group; ++h) {
      const std::int64_t qc = h * hs;
      for (std::int64_t t = 0; t < T; ++t) {
        const Real* dor = d_o.row(t) + qc;
        const Real* orow = o.row(t) + qc;
        Real d = 0;
        for (std::int64_t i = 0; i < hs; ++i) d += dor[i] * orow[i];
        delta(h, t) = d;
        std::fill(dq.row(t) + qc, dq.row(t) + qc + hs, Real(0));
      }
      // p = exp(s scale - L) and ds = p (dp - D) scale for one row of n keys.
      const auto row_grads = [&](std::int64_t t, Real* pr, Real* dsr, std::int64_t n) {
        exp_affine(pr, n, scale, lse(h, t));
        const Real D = delta(h, t);
        for (std::int64_t u = 0; u < n; ++u) dsr[u] = pr[u] * (dsr[u] - D) * scale;
      };
      for (std::int64_t q0 = 0; q0 < T; q0 += B) {
        const std::int64_t rows = std::min(B, T - q0);
        for (std::int64_t k0 = 0; k0 < q0 + rows; k0 += B) {
          const std::int64_t cols = std::min(B, T - k0);
          transpose_block(k, k0, cols, kc, hs, kt);
          transpose_block(v, k0, cols, kc, hs, vt);
          ordered_gemm(q.row(q0) + qc, q.cols, kt, B, p, B, rows, cols, hs, false);     // S = Q K^T
          ordered_gemm(d_o.row(q0) + qc, d_o.cols, vt, B, ds, B, rows, cols, hs, false);  // dP = dO V^T
          for (std::int64_t r = 0; r < rows; ++r) row_grads(q0 + r, p + r * B, ds + r * B, cols);
          if (k0 == q0) {
            mask_later_keys(p, rows, cols, Real(0));
            mask_later_keys(ds, rows, cols, Real(0));
          }
          ordered_gemm(ds, B, k.row(k0) + kc, k.cols, dq.row(q0) + qc, dq.cols, rows, hs, cols, true);        // dQ += dS K
          ordered_gemm_at(ds, B, q.row(q0) + qc, q.cols, dk.row(k0) + kc, dk.cols, cols, hs, rows, true);     // dK += dS^T Q
          ordered_gemm_at(p, B, d_o.row(q0) + qc, d_o.cols, dv.row(k0) + kc, dv.cols, cols, hs, rows, true);  // dV += P^T dO
        }
      }
    }
  }
}

#define FP8LAB_INSTANTIATE(Real)                                                                                    \
  template void flash_attention_forward(const Tensor<Real>&, const Tensor<Real>&, const Tensor<Real>&, int, int,     \
                                        Tensor<Real>&, Tensor<Real>&, Tensor<Real>&);                               \
  template void flash_attention_backward(const Tensor<Real>&, const Tensor<Real>&, const Tensor<Real>&,              \
                                         const Tensor<Real>&, const Tensor<Real>&, const Tensor<Real>&, int, int,    \
                                         Tensor<Real>&, Tensor<Real>&, Tensor<Real>&, Tensor<Real>&, Tensor<Real>&);
FP8LAB_INSTANTIATE(float)
FP8LAB_INSTANTIATE(double)
#undef FP8LAB_INSTANTIATE

}  // namespace fp8lab::train
