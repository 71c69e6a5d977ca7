#include "kernels/train/forward_ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace fp8lab::train {

template <class Real>
void rmsnorm_forward(const Tensor<Real>& x, const Tensor<Real>& g, Tensor<Real>& y) {
  const std::int64_t d = x.cols;
#pragma omp parallel for schedule(static) if (x.size() >= kParallelElementwise)
  for (std::int64_t t = 0; t < x.rows; ++t) {
    const Real* xr = x.row(t);
    Real ss = 0;
    for (std::int64_t i = 0; i < d; ++i) ss += xr[i] * xr[i];
    const Real r = Real(1) / std::sqrt(ss / static_cast<Real>(d) + static_cast<Real>(kRmsEps));
    for (std::int64_t i = 0; i < d; ++i) y(t, i) = xr[i] * g.data()[i] * r;
  }
}

// The cos / sin of every (position, pair within a head) a rope_inplace call needs, computed as
// the plain loop computes them (angle in FP64, one rounding to Real) but once per pair rather
// than once per head, and kept for the next call with the same arguments: a step's layers, q and
// k, forward and backward all ask for the same table. Same values, so the same bits.
template <class Real>
struct RopeTable {
  std::int64_t rows = -1, first_position = 0;
  int head_size = 0;
  double sign = 0;
  std::vector<Real> cos, sin;  // rows x head_size / 2
};

template <class Real>
const RopeTable<Real>& rope_table(std::int64_t rows, int head_size, double sign, std::int64_t first_position) {
  thread_local RopeTable<Real> tables[2];  // forward's rotation and backward's inverse, used in turn
  RopeTable<Real>& table = tables[sign > 0 ? 0 : 1];
  if (table.rows == rows && table.head_size == head_size && table.sign == sign && table.first_position == first_position)
    return table;
  const int pairs = head_size / 2;
  table = {rows, first_position, head_size, sign, {}, {}};
  table.cos.resize(static_cast<std::size_t>(rows * pairs));
  table.sin.resize(table.cos.size());
  for (int j = 0; j < pairs; ++j) {
    const double freq = 1.0 / std::pow(kRopeTheta, static_cast<double>(2 * j) / head_size);
    for (std::int64_t t = 0; t < rows; ++t) {
      const double angle = sign * static_cast<double>(t + first_position) * freq;
      table.cos[static_cast<std::size_t>(t * pairs + j)] = static_cast<Real>(std::cos(angle));
      table.sin[static_cast<std::size_t>(t * pairs + j)] = static_cast<Real>(std::sin(angle));
    }
  }
  return table;
}

template <class Real>
void rope_inplace(Tensor<Real>& x, int head_size, double sign, std::int64_t first_position) {
  const RopeTable<Real>& table = rope_table<Real>(x.rows, head_size, sign, first_position);
  const std::int64_t pairs = head_size / 2;
#pragma omp parallel for schedule(static) if (x.size() >= kParallelElementwise)
  for (std::int64_t t = 0; t < x.rows; ++t) {
    const Real* cos = table.cos.data() + t * pairs;
    const Real* sin = table.sin.data() + t * pairs;
    for (std::int64_t i = 0; i + 1 < x.cols; i += 2) {
      const std::int64_t j = (i % head_size) / 2;
      const Real c = cos[j], s = sin[j];
      const Real a = x(t, i), b = x(t, i + 1);
      x(t, i) = a * c - b * s;
      x(t, i + 1) = a * s + b * c;
    }
  }
}

template <class Real>
void transpose_head(const Tensor<Real>& x, std::int64_t column, std::int64_t hs, std::vector<Real>& xt) {
  const std::int64_t T = x.rows;
  xt.resize(static_cast<std::size_t>(hs * T));
  for (std::int64_t u = 0; u < T; ++u)
    for (std::int64_t i = 0; i < hs; ++i) xt[static_cast<std::size_t>(i * T + u)] = x(u, column + i);
}

// Every sum below keeps its own order (over i for a score, over u for an output): the loops run
// the independent sums side by side (over u for the scores, over i for the outputs) so that
// they vectorize, and each one's additions happen in the order the plain loop nest has.
template <class Real>
void attention_scores(const Tensor<Real>& q, const Tensor<Real>& k, int heads, int kv_heads, Tensor<Real>& p) {
  const std::int64_t T = q.rows, hs = q.cols / heads;
  const int group = heads / kv_heads;
  const Real scale = static_cast<Real>(1.0 / std::sqrt(static_cast<double>(hs)));
#pragma omp parallel for schedule(static) if (T >= 1024)
  for (int h = 0; h < heads; ++h) {
    const std::int64_t qc = h * hs, kc = (h / group) * hs;
    std::vector<Real> kt;
    transpose_head(k, kc, hs, kt);
    for (std::int64_t t = 0; t < T; ++t) {
      Real* row = p.row(h * T + t);
      const std::int64_t n = t + 1;
      std::fill(row, row + n, Real(0));
      for (std::int64_t i = 0; i < hs; ++i) {  // row[u] = sum over i of q(t, i) k(u, i), i ascending
        const Real qi = q(t, qc + i);
        const Real* ki = kt.data() + i * T;
        for (std::int64_t u = 0; u < n; ++u) row[u] += qi * ki[u];
      }
      Real top = -std::numeric_limits<Real>::infinity();
      for (std::int64_t u = 0; u < n; ++u) {
        row[u] = row[u] * scale;
        top = std::max(top, row[u]);
      }
      Real sum = 0;
      for (std::int64_t u = 0; u < n; ++u) {
        row[u] = std::exp(row[u] - top);
        sum += row[u];
      }
      for (std::int64_t u = 0; u < n; ++u) row[u] /= sum;
      for (std::int64_t u = n; u < T; ++u) row[u] = 0;
    }
  }
}

template <class Real>
void attention_output(const Tensor<Real>& p, const Tensor<Real>& v, int heads, int kv_heads, Tensor<Real>& o) {
  const std::int64_t T = v.rows, hs = o.cols / heads;
  const int group = heads / kv_heads;
#pragma omp parallel for schedule(static) if (T >= 1024)
  for (int h = 0; h < heads; ++h) {
    const std::int64_t oc = h * hs, vc = (h / group) * hs;
    for (std::int64_t t = 0; t < T; ++t) {
      const Real* pr = p.row(h * T + t);
      Real* out = o.row(t) + oc;
      std::fill(out, out + hs, Real(0));
      for (std::int64_t u = 0; u <= t; ++u) {  // out[i] = sum over u of p(t, u) v(u, i), u ascending
        const Real pu = pr[u];
        const Real* vu = v.row(u) + vc;
        for (std::int64_t i = 0; i < hs; ++i) out[i] += pu * vu[i];
      }
    }
  }
}

template <class Real>
void swiglu_forward(const Tensor<Real>& h1, const Tensor<Real>& h3, Tensor<Real>& g) {
#pragma omp parallel for schedule(static) if (g.size() >= kParallelElementwise)
  for (std::int64_t i = 0; i < g.size(); ++i) {
    const Real z = h1.data()[i];
    g.data()[i] = z / (Real(1) + std::exp(-z)) * h3.data()[i];
  }
}

template <class Real>
void add_inplace(Tensor<Real>& y, const Tensor<Real>& x) {
#pragma omp parallel for schedule(static) if (y.size() >= kParallelElementwise)
  for (std::int64_t i = 0; i < y.size(); ++i) y.data()[i] += x.data()[i];
}

template <class Real>
double cross_entropy_inplace(Tensor<Real>& logits, const int* tokens) {
  const std::int64_t T = logits.rows, V = logits.cols;
  const Real n = static_cast<Real>(T - 1);
  // Rows on the thread team, each row's loss term kept; the terms are then added in order of t.
  std::vector<double> terms(static_cast<std::size_t>(std::max<std::int64_t>(T - 1, 0)));
  if (T > 0) std::fill(logits.row(T - 1), logits.row(T - 1) + V, Real(0));  // the last position predicts nothing
#pragma omp parallel for schedule(static) if (logits.size() >= kParallelElementwise)
  for (std::int64_t t = 0; t < T - 1; ++t) {
    Real* row = logits.row(t);
    Real top = row[0];
    for (std::int64_t j = 1; j < V; ++j) top = std::max(top, row[j]);
    const int next = tokens[t + 1];
    const Real target = row[next];
    Real z = 0;
    for (std::int64_t j = 0; j < V; ++j) {
      row[j] = std::exp(row[j] - top);
      z += row[j];
    }
    terms[static_cast<std::size_t>(t)] = -static_cast<double>(target - top - std::log(z));
    for (std::int64_t j = 0; j < V; ++j) row[j] = row[j] / z / n;
    row[next] -= Real(1) / n;
  }
  double loss = 0;
  for (const double term : terms) loss += term;
  return loss / static_cast<double>(T - 1);
}

#define FP8LAB_INSTANTIATE(Real)                                                                             \
  template void rmsnorm_forward(const Tensor<Real>&, const Tensor<Real>&, Tensor<Real>&);                    \
  template void rope_inplace(Tensor<Real>&, int, double, std::int64_t);                                      \
  template void transpose_head(const Tensor<Real>&, std::int64_t, std::int64_t, std::vector<Real>&);        \
  template void attention_scores(const Tensor<Real>&, const Tensor<Real>&, int, int, Tensor<Real>&);         \
  template void attention_output(const Tensor<Real>&, const Tensor<Real>&, int, int, Tensor<Real>&);         \
  template void swiglu_forward(const Tensor<Real>&, const Tensor<Real>&, Tensor<Real>&);                     \
  template void add_inplace(Tensor<Real>&, const Tensor<Real>&);                                             \
  template double cross_entropy_inplace(Tensor<Real>&, const int*);
FP8LAB_INSTANTIATE(float)
FP8LAB_INSTANTIATE(double)
#undef FP8LAB_INSTANTIATE

}  // namespace fp8lab::train
