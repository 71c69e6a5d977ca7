#include "kernels/train/backward_ops.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/train/forward_ops.hpp"

namespace fp8lab::train {
namespace {

// The gain gradient's columns go to threads in runs of this many (two cache lines of floats, four
// of doubles), so that no two threads write one line.
constexpr std::int64_t kGainColumns = 32;

}  // namespace

template <class Real>
void rmsnorm_backward(const Tensor<Real>& x, const Tensor<Real>& g, const Tensor<Real>& dy, Tensor<Real>& dx,
                      Tensor<Real>& dg) {
  const std::int64_t d = x.cols;
  const Real* gain = g.data();
  // Rows on the thread team (each row's r and dx), then the gain's gradient by columns, each
  // column's sum over rows in order of t: the plain loop's sums, on any number of threads.
  std::vector<Real> rs(static_cast<std::size_t>(x.rows));
  const bool parallel = x.size() >= kParallelElementwise;
#pragma omp parallel if (parallel)
  {
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < x.rows; ++t) {
      const Real* xr = x.row(t);
      const Real* dyr = dy.row(t);
      Real ss = 0, dot = 0;
      for (std::int64_t i = 0; i < d; ++i) ss += xr[i] * xr[i];
      const Real r = Real(1) / std::sqrt(ss / static_cast<Real>(d) + static_cast<Real>(kRmsEps));
      for (std::int64_t i = 0; i < d; ++i) dot += dyr[i] * gain[i] * xr[i];
      const Real c = r * r * r / static_cast<Real>(d) * dot;
      for (std::int64_t i = 0; i < d; ++i) dx(t, i) = dyr[i] * gain[i] * r - xr[i] * c;
      rs[static_cast<std::size_t>(t)] = r;
    }
#pragma omp for schedule(static)
    for (std::int64_t i0 = 0; i0 < d; i0 += kGainColumns) {
      const std::int64_t i1 = std::min(d, i0 + kGainColumns);
      for (std::int64_t t = 0; t < x.rows; ++t) {
        const Real* xr = x.row(t);
        const Real* dyr = dy.row(t);
        const Real r = rs[static_cast<std::size_t>(t)];
        for (std::int64_t i = i0; i < i1; ++i) dg.data()[i] += dyr[i] * xr[i] * r;
      }
    }
  }
}

template <class Real>
void attention_backward(const Tensor<Real>& p, const Tensor<Real>& q, const Tensor<Real>& k, const Tensor<Real>& v,
                        const Tensor<Real>& d_o, int heads, int kv_heads, Tensor<Real>& dq, Tensor<Real>& dk,
                        Tensor<Real>& dv) {
  const std::int64_t T = q.rows, hs = q.cols / heads;
  const int group = heads / kv_heads;
  const Real scale = static_cast<Real>(1.0 / std::sqrt(static_cast<double>(hs)));
  std::fill(dk.data(), dk.data() + dk.size(), Real(0));
  std::fill(dv.data(), dv.data() + dv.size(), Real(0));
  // Each kv group is independent: its heads accumulate into its dk / dv columns in order. Every
  // sum keeps the order of the plain loop nest (dp over i, dq over u, dk and dv over t and then
  // heads); the loops run independent sums side by side so that they vectorize.
#pragma omp parallel for schedule(static) if (T >= 1024)
  for (int kvh = 0; kvh < kv_heads; ++kvh) {
    std::vector<Real> ds(static_cast<std::size_t>(T)), vt;
    const std::int64_t kc = kvh * hs;
    transpose_head(v, kc, hs, vt);
    for (int h = kvh * group; h < (kvh + 1) * group; ++h) {
      const std::int64_t qc = h * hs;
      for (std::int64_t t = 0; t < T; ++t) {
        const Real* pr = p.row(h * T + t);
        const std::int64_t n = t + 1;
        Real* dp = ds.data();
        std::fill(dp, dp + n, Real(0));
        for (std::int64_t i = 0; i < hs; ++i) {  // dp[u] = sum over i of dO(t, i) v(u, i)
          const Real di = d_o(t, qc + i);
          const Real* vi = vt.data() + i * T;
          for (std::int64_t u = 0; u < n; ++u) dp[u] += di * vi[u];
        }
        for (std::int64_t u = 0; u < n; ++u) ds[static_cast<std::size_t>(u)] = pr[u] * dp[u];
        Real rowsum = 0;
        for (std::int64_t u = 0; u < n; ++u) rowsum += ds[static_cast<std::size_t>(u)];
        for (std::int64_t u = 0; u < n; ++u) ds[static_cast<std::size_t>(u)] = (ds[static_cast<std::size_t>(u)] - pr[u] * rowsum) * scale;
        Real* dqr = dq.row(t) + qc;
        std::fill(dqr, dqr + hs, Real(0));
        for (std::int64_t u = 0; u < n; ++u) {  // dq[i] = sum over u of ds[u] k(u, i)
          const Real du = ds[static_cast<std::size_t>(u)];
          const Real* ku = k.row(u) + kc;
          for (std::int64_t i = 0; i < hs; ++i) dqr[i] += du * ku[i];
        }
        const Real* qr = q.row(t) + qc;
        const Real* dor = d_o.row(t) + qc;
        for (std::int64_t u = 0; u < n; ++u) {
          const Real du = ds[static_cast<std::size_t>(u)], pu = pr[u];
          Real* dku = dk.row(u) + kc;
          Real* dvu = dv.row(u) + kc;
          for (std::int64_t i = 0; i < hs; ++i) {
            dku[i] += du * qr[i];
            dvu[i] += pu * dor[i];
          }
        }
      }
    }
  }
}

template <class Real>
void swiglu_backward(const Tensor<Real>& h1, const Tensor<Real>& h3, const Tensor<Real>& dg, Tensor<Real>& dh1,
                     Tensor<Real>& dh3) {
#pragma omp parallel for schedule(static) if (dg.size() >= kParallelElementwise)
  for (std::int64_t i = 0; i < dg.size(); ++i) {
    const Real z = h1.data()[i], s = Real(1) / (Real(1) + std::exp(-z));
    dh1.data()[i] = dg.data()[i] * h3.data()[i] * (s * (Real(1) + z * (Real(1) - s)));
    dh3.data()[i] = dg.data()[i] * (z * s);
  }
}

template <class Real>
void embedding_backward(const Tensor<Real>& dx, const int* tokens, Tensor<Real>& d_embedding) {
  for (std::int64_t t = 0; t < dx.rows; ++t) {
    Real* out = d_embedding.row(tokens[t]);
    for (std::int64_t i = 0; i < dx.cols; ++i) out[i] += dx(t, i);
  }
}

#define FP8LAB_INSTANTIATE(Real)                                                                                    \
  template void rmsnorm_backward(const Tensor<Real>&, const Tensor<Real>&, const Tensor<Real>&, Tensor<Real>&,      \
                                 Tensor<Real>&);                                                                    \
  template void attention_backward(const Tensor<Real>&, const Tensor<Real>&, const Tensor<Real>&, const Tensor<Real>&, \
                                   const Tensor<Real>&, int, int, Tensor<Real>&, Tensor<Real>&, Tensor<Real>&);     \
  template void swiglu_backward(const Tensor<Real>&, const Tensor<Real>&, const Tensor<Real>&, Tensor<Real>&,       \
                                Tensor<Real>&);                                                                     \
  template void embedding_backward(const Tensor<Real>&, const int*, Tensor<Real>&);
FP8LAB_INSTANTIATE(float)
FP8LAB_INSTANTIATE(double)
#undef FP8LAB_INSTANTIATE

}  // namespace fp8lab::train
