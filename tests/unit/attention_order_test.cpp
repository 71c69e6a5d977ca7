// The engine's attention loops (kernels/train/forward_ops.cpp, backward_ops.cpp) run their sums
// side by side so that they vectorize; each sum must keep the order of the plain loop nest,
// which defines the engine's bits (same results before and after that rewrite, and on every
// ISA). The plain loop nests are written out below as the oracle and compared bit for bit.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/memory_ledger.hpp"
#include "tests/support/random_train_tensor.hpp"
#include "kernels/train/backward_ops.hpp"
#include "kernels/train/forward_ops.hpp"

using namespace fp8lab;
using namespace fp8lab::train;

namespace {

template <class Real>
bool same_bits(const Tensor<Real>& a, const Tensor<Real>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.size()) * sizeof(Real)) == 0;
}

// The plain loop nests: a dot product per score over i; an output sum per (t, i) over u.
template <class Real>
void scores_oracle(const Tensor<Real>& q, const Tensor<Real>& k, int heads, int kv_heads, Tensor<Real>& p) {
  const std::int64_t T = q.rows, hs = q.cols / heads;
  const Real scale = static_cast<Real>(1.0 / std::sqrt(static_cast<double>(hs)));
  for (int h = 0; h < heads; ++h) {
    const std::int64_t qc = h * hs, kc = (h / (heads / kv_heads)) * hs;
    for (std::int64_t t = 0; t < T; ++t) {
      Real* row = p.row(h * T + t);
      Real top = -std::numeric_limits<Real>::infinity(), sum = 0;
      for (std::int64_t u = 0; u <= t; ++u) {
        Real dot = 0;
        for (std::int64_t i = 0; i < hs; ++i) dot += q(t, qc + i) * k(u, kc + i);
        row[u] = dot * scale;
        top = std::max(top, row[u]);
      }
      for (std::int64_t u = 0; u <= t; ++u) sum += (row[u] = std::exp(row[u] - top));
      for (std::int64_t u = 0; u <= t; ++u) row[u] /= sum;
      for (std::int64_t u = t + 1; u < T; ++u) row[u] = 0;
    }
  }
}

template <class Real>
void output_oracle(const Tensor<Real>& p, const Tensor<Real>& v, int heads, int kv_heads, Tensor<Real>& o) {
  const std::int64_t T = v.rows, hs = o.cols / heads;
  for (int h = 0; h < heads; ++h)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t i = 0; i < hs; ++i) {
        Real sum = 0;
        for (std::int64_t u = 0; u <= t; ++u) sum += p(h * T + t, u) * v(u, (h / (heads / kv_heads)) * hs + i);
        o(t, h * hs + i) = sum;
      }
}

template <class Real>
void backward_oracle(const Tensor<Real>& p, const Tensor<Real>& q, const Tensor<Real>& k, const Tensor<Real>& v,
                     const Tensor<Real>& d_o, int heads, int kv_heads, Tensor<Real>& dq, Tensor<Real>& dk, Tensor<Real>& dv) {
  const std::int64_t T = q.rows, hs = q.cols / heads;
  const int group = heads / kv_heads;
  const Real scale = static_cast<Real>(1.0 / std::sqrt(static_cast<double>(hs)));
  std::fill(dk.data(), dk.data() + dk.size(), Real(0));
  std::fill(dv.data(), dv.data() + dv.size(), Real(0));
  std::vector<Real> ds(static_cast<std::size_t>(T));
  for (int kvh = 0; kvh < kv_heads; ++kvh)
    for (int h = kvh * group; h < (kvh + 1) * group; ++h)
      for (std::int64_t t = 0; t < T; ++t) {
        const std::int64_t qc = h * hs, kc = kvh * hs;
        Real rowsum = 0;
        for (std::int64_t u = 0; u <= t; ++u) {
          Real dp = 0;
          for (std::int64_t i = 0; i < hs; ++i) dp += d_o(t, qc + i) * v(u, kc + i);
          ds[static_cast<std::size_t>(u)] = p(h * T + t, u) * dp;
          rowsum += ds[static_cast<std::size_t>(u)];
        }
        for (std::int64_t u = 0; u <= t; ++u)
          ds[static_cast<std::size_t>(u)] = (ds[static_cast<std::size_t>(u)] - p(h * T + t, u) * rowsum) * scale;
        for (std::int64_t i = 0; i < hs; ++i) {
          Real sum = 0;
          for (std::int64_t u = 0; u <= t; ++u) sum += ds[static_cast<std::size_t>(u)] * k(u, kc + i);
          dq(t, qc + i) = sum;
        }
        for (std::int64_t u = 0; u <= t; ++u)
          for (std::int64_t i = 0; i < hs; ++i) {
            dk(u, kc + i) += ds[static_cast<std::size_t>(u)] * q(t, qc + i);
            dv(u, kc + i) += p(h * T + t, u) * d_o(t, qc + i);
          }
      }
}

template <class Real>
void check_attention(std::int64_t T, int heads, int kv_heads, int hs) {
  HostAllocator host;
  MemoryLedger ledger(&host);
  std::mt19937_64 rng(static_cast<std::uint64_t>(T * 1000 + heads * 10 + kv_heads));
  const std::int64_t kv = static_cast<std::int64_t>(kv_heads) * hs;
  const Tensor<Real> q = test::random_train_tensor<Real>(ledger, T, heads * hs, rng), k = test::random_train_tensor<Real>(ledger, T, kv, rng),
                     v = test::random_train_tensor<Real>(ledger, T, kv, rng), d_o = test::random_train_tensor<Real>(ledger, T, heads * hs, rng);
  Tensor<Real> p = make_tensor<Real>(ledger, heads * T, T, MemoryCategory::workspace),
               p_oracle = make_tensor<Real>(ledger, heads * T, T, MemoryCategory::workspace);
  attention_scores(q, k, heads, kv_heads, p);
  scores_oracle(q, k, heads, kv_heads, p_oracle);
  CHECK(same_bits(p, p_oracle));
  Tensor<Real> o = make_tensor<Real>(ledger, T, heads * hs, MemoryCategory::workspace),
               o_oracle = make_tensor<Real>(ledger, T, heads * hs, MemoryCategory::workspace);
  attention_output(p, v, heads, kv_heads, o);
  output_oracle(p, v, heads, kv_heads, o_oracle);
  CHECK(same_bits(o, o_oracle));
  Tensor<Real> dq = make_tensor<Real>(ledger, T, heads * hs, MemoryCategory::workspace), dk = make_tensor<Real>(ledger, T, kv, MemoryCategory::workspace),
               dv = make_tensor<Real>(ledger, T, kv, MemoryCategory::workspace);
  Tensor<Real> dq_o = make_tensor<Real>(ledger, T, heads * hs, MemoryCategory::workspace), dk_o = make_tensor<Real>(ledger, T, kv, MemoryCategory::workspace),
               dv_o = make_tensor<Real>(ledger, T, kv, MemoryCategory::workspace);
  attention_backward(p, q, k, v, d_o, heads, kv_heads, dq, dk, dv);
  backward_oracle(p, q, k, v, d_o, heads, kv_heads, dq_o, dk_o, dv_o);
  CHECK(same_bits(dq, dq_o));
  CHECK(same_bits(dk, dk_o));
  CHECK(same_bits(dv, dv_o));
}

}  // namespace

TEST_CASE("attention loops: scores, output and backward equal the plain loop nests bit for bit") {
  for (const std::int64_t T : {1, 2, 7, 33, 100}) {
    INFO("T = " << T);
    check_attention<float>(T, 8, 4, 8);   // stories260K's heads
    check_attention<float>(T, 3, 1, 6);   // an odd head count, one kv head
    check_attention<double>(T, 4, 2, 8);  // the fp64 recipe's instantiation
  }
}
