// Flash attention (kernels/train/flash_attention.cpp) against the naive attention ops evaluated in
// FP64 and an FP64 log-sum-exp written here from the formula, on seeded operands whose lengths
// straddle the 64-position block; the same bits on 1 and 4 threads, for the op and for a whole
// training step under attention = flash.
#include <catch2/catch.hpp>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "harness/metrics/error_metrics.hpp"
#include "kernels/train/backward_ops.hpp"
#include "kernels/train/flash_attention.hpp"
#include "kernels/train/forward_ops.hpp"
#include "kernels/train/model_weights.hpp"
#include "kernels/train/training_step.hpp"
#include "tests/support/random_train_tensor.hpp"

using namespace fp8lab;
using namespace fp8lab::train;

namespace {

struct Case {
  std::int64_t T;
  int heads, kv_heads, hs;
};

template <class Real>
std::vector<double> values(const Tensor<Real>& t) {
  return std::vector<double>(t.data(), t.data() + t.size());
}

template <class Real>
Tensor<Real> converted(MemoryLedger& ledger, const Tensor<double>& x) {
  Tensor<Real> t = make_tensor<Real>(ledger, x.rows, x.cols, MemoryCategory::workspace);
  for (std::int64_t i = 0; i < x.size(); ++i) t.data()[i] = static_cast<Real>(x.data()[i]);
  return t;
}

template <class Real>
bool same_bits(const Tensor<Real>& a, const Tensor<Real>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.size()) * sizeof(Real)) == 0;
}

// Everything one evaluation gives: o, L, dq, dk, dv.
template <class Real>
struct Outputs {
  Tensor<Real> o, lse, dq, dk, dv;
};

template <class Real>
Outputs<Real> run_flash(MemoryLedger& ledger, const Case& c, const Tensor<Real>& q, const Tensor<Real>& k,
                        const Tensor<Real>& v, const Tensor<Real>& d_o) {
  const auto make = [&](std::int64_t r, std::int64_t cols) { return make_tensor<Real>(ledger, r, cols, MemoryCategory::workspace); };
  Outputs<Real> out{make(c.T, q.cols), make(c.heads, c.T), make(c.T, q.cols), make(c.T, k.cols), make(c.T, k.cols)};
  Tensor<Real> fwd = make(c.heads, flash_forward_lane_elements(c.hs)), bwd = make(c.kv_heads, flash_backward_lane_elements(c.hs)),
               delta = make(c.heads, c.T);
  flash_attention_forward(q, k, v, c.heads, c.kv_heads, out.o, out.lse, fwd);
  flash_attention_backward(q, k, v, out.o, out.lse, d_o, c.heads, c.kv_heads, out.dq, out.dk, out.dv, delta, bwd);
  return out;
}

// The per-element error bound of both precisions, from the lengths of the sums. Every output
// is a short chain of sums: a score's dot product over hs, the softmax sum and o's sum over at
// most T keys, D's sum over hs, dq's sum over T keys, dk's and dv's over the group's heads times
// T queries (group <= 4 here, counted as 4 T), each with a few single roundings (scale, exp,
// log, division, the online rescaling). Two evaluations in unit roundoff u (flash in Real, the
// naive ops in FP64: they differ by flash's own rounding, FP64's is below it by 2^-29 or
// equal) differ per element by at most gamma_n times the sum of |terms|, n <= hs + 4 T + 16.
// In the relative Frobenius norm that sum of |terms| over the result's norm is the sums'
// cancellation: terms of random sign (operands uniform in [-1, 1)) cancel to ~sqrt(length),
// sqrt(4 T) <= 23 for T <= 130 here, once more by ~sqrt(hs) <= 3 in ds = p (dp - D); 64 covers
// their product (<= 69 at T = 130) within the looseness of gamma_n. An error of the algorithm
// (a lost rescaling, a wrong block edge or causal mask) is O(1) relative.
double bound(const Case& c, double u) { return 64.0 * (c.hs + 4.0 * static_cast<double>(c.T) + 16) * u; }

template <class Real>
void check_against_fp64(const Case& c) {
  HostAllocator host;
  MemoryLedger ledger(&host);
  std::mt19937_64 rng(static_cast<std::uint64_t>(c.T * 131 + c.heads * 7 + c.kv_heads));
  const std::int64_t d = static_cast<std::int64_t>(c.heads) * c.hs, kv = static_cast<std::int64_t>(c.kv_heads) * c.hs;
  const Tensor<double> q = test::random_train_tensor<double>(ledger, c.T, d, rng), k = test::random_train_tensor<double>(ledger, c.T, kv, rng),
                       v = test::random_train_tensor<double>(ledger, c.T, kv, rng),
                       d_o = test::random_train_tensor<double>(ledger, c.T, d, rng);
  // The FP64 truth: the naive ops in double and L from its definition.
  const auto make = [&](std::int64_t r, std::int64_t cols) { return make_tensor<double>(ledger, r, cols, MemoryCategory::workspace); };
  Tensor<double> p = make(c.heads * c.T, c.T), o = make(c.T, d), dq = make(c.T, d), dk = make(c.T, kv), dv = make(c.T, kv),
                 lse = make(c.heads, c.T);
  attention_scores(q, k, c.heads, c.kv_heads, p);
  attention_output(p, v, c.heads, c.kv_heads, o);
  attention_backward(p, q, k, v, d_o, c.heads, c.kv_heads, dq, dk, dv);
  for (int h = 0; h < c.heads; ++h)
    for (std::int64_t t = 0; t < c.T; ++t) {
      double sum = 0;
      for (std::int64_t u = 0; u <= t; ++u) {
        double dot = 0;
        for (int i = 0; i < c.hs; ++i) dot += q(t, h * c.hs + i) * k(u, (h / (c.heads / c.kv_heads)) * c.hs + i);
        sum += std::exp(dot / std::sqrt(static_cast<double>(c.hs)));
      }
      lse(h, t) = std::log(sum);
    }
  const Outputs<Real> f = run_flash<Real>(ledger, c, converted<Real>(ledger, q), converted<Real>(ledger, k),
                                          converted<Real>(ledger, v), converted<Real>(ledger, d_o));
  const double u = std::ldexp(1.0, -std::numeric_limits<Real>::digits), b = bound(c, u);
  const std::pair<const char*, std::pair<std::vector<double>, std::vector<double>>> pairs[] = {
      {"o", {values(f.o), values(o)}},    {"lse", {values(f.lse), values(lse)}}, {"dq", {values(f.dq), values(dq)}},
      {"dk", {values(f.dk), values(dk)}}, {"dv", {values(f.dv), values(dv)}}};
  for (const auto& [name, yr] : pairs) {
    const ErrorMetrics e = error_metrics(std::span<const double>(yr.first), std::span<const double>(yr.second), 0.0);
    INFO(name << ": rel_frobenius " << e.rel_frobenius << ", bound " << b << " (" << 100 * e.rel_frobenius / b << "% used)");
    CHECK(e.rel_frobenius <= b);
  }
}

}  // namespace

TEST_CASE("flash attention: o, log-sum-exp and gradients match FP64 naive attention, in FP64 and FP32") {
  for (const std::int64_t T : {1, 2, 63, 64, 65, 130})
    for (const Case c : {Case{T, 8, 4, 8}, Case{T, 3, 1, 6}, Case{T, 4, 4, 8}}) {
      INFO("T " << c.T << ", heads " << c.heads << "/" << c.kv_heads << ", hs " << c.hs);
      check_against_fp64<double>(c);
      check_against_fp64<float>(c);
    }
}

TEST_CASE("flash attention: the same bits on 1 and 4 threads (T above the threading threshold)") {
  const Case c{kFlashParallelMinPositions + 37, 4, 2, 8};
  HostAllocator host;
  MemoryLedger ledger(&host);
  std::mt19937_64 rng(11);
  const auto random = [&](std::int64_t cols) { return test::random_train_tensor<float>(ledger, c.T, cols, rng); };
  const Tensor<float> q = random(c.heads * c.hs), k = random(c.kv_heads * c.hs), v = random(c.kv_heads * c.hs), d_o = random(c.heads * c.hs);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Outputs<float> one = run_flash<float>(ledger, c, q, k, v, d_o);
  omp_set_num_threads(4);
  const Outputs<float> four = run_flash<float>(ledger, c, q, k, v, d_o);
  omp_set_num_threads(saved);
  CHECK(same_bits(one.o, four.o));
  CHECK(same_bits(one.lse, four.lse));
  CHECK(same_bits(one.dq, four.dq));
  CHECK(same_bits(one.dk, four.dk));
  CHECK(same_bits(one.dv, four.dv));
}

TEST_CASE("flash attention: a training step under flash gives the same bits on 1 and 4 threads") {
  // T above the threshold, so that the attention loops (and the GEMMs large enough) run on a team.
  const ModelConfig m{"small_gqa", 32, 48, 2, 4, 2, 40};
  const LlamaWeights w = seeded_llama_weights(m, 7);
  const std::int64_t T = kFlashParallelMinPositions + 5;
  StepInput in{m, &w, {}};
  for (std::int64_t t = 0; t < T; ++t) in.tokens.push_back(static_cast<int>((t * 13 + 5) % m.vocab));
  in.attention = AttentionKind::flash;
  const auto step = [&](int threads) {
    omp_set_num_threads(threads);
    HostAllocator host;
    MemoryLedger ledger(&host);
    return run_training_step(in, named_recipe("fp32"), make_policy("none", m, T, 4, AttentionKind::flash), ledger);
  };
  const int saved = omp_get_max_threads();
  const StepResult one = step(1), four = step(4);
  omp_set_num_threads(saved);
  CHECK(std::memcmp(&one.report.loss, &four.report.loss, sizeof(double)) == 0);
  REQUIRE(one.gradients.size() == four.gradients.size());
  for (std::size_t i = 0; i < one.gradients.size(); ++i) {
    INFO(one.gradients[i].name);
    CHECK(one.gradients[i].values == four.gradients[i].values);
  }
}

TEST_CASE("flash attention: no query sees a later key, inside the diagonal tile too (T 130, 4/2 heads, hs 8)") {
  // The diagonal tile runs as a whole tile with the later keys masked (a score of -inf, then a
  // probability and dS of 0). Keys and values after position t0 = 70 (inside the second
  // 64-position block, so the tile holds keys on both sides of it) are replaced by huge finite
  // values (finite: an inf there would reach earlier rows as 0 * inf, see mask_later_keys): o and L of every query up to t0, and its dq, must keep their bits. A mask off by one
  // or a masked score that still counted would change them by O(1).
  const Case c{130, 4, 2, 8};
  constexpr std::int64_t t0 = 70;
  HostAllocator host;
  MemoryLedger ledger(&host);
  std::mt19937_64 rng(29);
  const auto random = [&](std::int64_t cols) { return test::random_train_tensor<float>(ledger, c.T, cols, rng); };
  const Tensor<float> q = random(c.heads * c.hs), k = random(c.kv_heads * c.hs), v = random(c.kv_heads * c.hs),
                      d_o = random(c.heads * c.hs);
  Tensor<float> k_later = random(k.cols), v_later = random(v.cols);
  std::memcpy(k_later.data(), k.data(), static_cast<std::size_t>(k.size()) * sizeof(float));
  std::memcpy(v_later.data(), v.data(), static_cast<std::size_t>(v.size()) * sizeof(float));
  for (std::int64_t t = t0 + 1; t < c.T; ++t)
    for (std::int64_t i = 0; i < k.cols; ++i) {
      k_later(t, i) *= 1e6f;
      v_later(t, i) *= 1e30f;
    }
  const Outputs<float> a = run_flash<float>(ledger, c, q, k, v, d_o), b = run_flash<float>(ledger, c, q, k_later, v_later, d_o);
  const auto same_rows = [&](const Tensor<float>& x, const Tensor<float>& y) {
    return std::memcmp(x.data(), y.data(), static_cast<std::size_t>((t0 + 1) * x.cols) * sizeof(float)) == 0;
  };
  CHECK(same_rows(a.o, b.o));
  CHECK(same_rows(a.dq, b.dq));
  for (int h = 0; h < c.heads; ++h) {
    INFO("head " << h);
    CHECK(std::memcmp(a.lse.row(h), b.lse.row(h), static_cast<std::size_t>(t0 + 1) * sizeof(float)) == 0);
  }
  // the control: the later queries do see the changed keys
  CHECK(std::memcmp(a.o.data(), b.o.data(), static_cast<std::size_t>(a.o.size()) * sizeof(float)) != 0);
}

TEST_CASE("flash attention: shapes that do not fit are refused with the reason") {
  HostAllocator host;
  MemoryLedger ledger(&host);
  const auto make = [&](std::int64_t r, std::int64_t c) { return make_tensor<float>(ledger, r, c, MemoryCategory::workspace); };
  Tensor<float> q = make(10, 16), k = make(10, 8), v = make(10, 8), o = make(10, 16), lse = make(2, 10), small = make(2, 4);
  CHECK_THROWS_WITH(flash_attention_forward(q, k, v, 2, 1, o, lse, small), Catch::Contains("workspace"));
  Tensor<float> ws = make(2, flash_forward_lane_elements(8)), wrong_lse = make(10, 2);
  CHECK_THROWS_WITH(flash_attention_forward(q, k, v, 2, 1, o, wrong_lse, ws), Catch::Contains("log-sum-exp"));
  CHECK_THROWS_WITH(flash_attention_forward(q, k, v, 3, 1, o, lse, ws), Catch::Contains("do not split"));
}
