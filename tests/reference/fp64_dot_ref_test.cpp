// The fixed FP64 summation order of reference/fp64_dot_ref: dot_fp64, sum_fp64 and gemm_fp64
// against the order written out term by term, to the bit. Any change of order (an
// "optimization" with other lanes, another tree, Eigen's reductions, FMA contraction,
// -ffast-math) changes some of these bits: the inputs are random doubles of mixed signs and
// magnitudes, whose products are inexact and whose sums depend on the order (checked below:
// plain left-to-right summation gives other bits). The references run on one thread, so the
// thread count of a study cannot reach them (the study's own test, `cli: study
// threads_do_not_change_results`, checks the whole results file).
#include <catch2/catch.hpp>
#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "reference/fp64_dot_ref.hpp"

using namespace fp8lab;

namespace {

// The contract, written out: products first (stored, so no compiler can fuse them into an
// FMA with the sums), lane j the terms k = j, j + 8, ... in increasing k from +0, then
// ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)).
double fixed_order(const std::vector<double>& terms) {
  double s[8];
  for (std::size_t j = 0; j < 8; ++j) {
    s[j] = 0.0;
    for (std::size_t k = j; k < terms.size(); k += 8) s[j] = s[j] + terms[k];
  }
  const double left = (s[0] + s[4]) + (s[2] + s[6]);
  const double right = (s[1] + s[5]) + (s[3] + s[7]);
  return left + right;
}

std::vector<double> products(const double* a, const double* b, std::int64_t n) {
  std::vector<double> p(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k) p[static_cast<std::size_t>(k)] = a[k] * b[k];
  return p;
}

std::vector<double> random_doubles(std::mt19937_64& rng, std::int64_t n) {
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<double> x(static_cast<std::size_t>(n));
  for (double& v : x) v = std::ldexp(mantissa(rng), exponent(rng));
  return x;
}

bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

}  // namespace

TEST_CASE("fp64 dot and sum: the fixed lane order, bit for bit, for every length class mod 8") {
  std::mt19937_64 rng(21);
  int differs_from_sequential = 0, cases = 0;
  for (const std::int64_t n : {0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 64, 100, 511, 512, 513, 1029, 7168}) {
    for (int trial = 0; trial < 4; ++trial) {
      const std::vector<double> a = random_doubles(rng, n), b = random_doubles(rng, n);
      const double dot = ref::dot_fp64(a.data(), b.data(), n), want = fixed_order(products(a.data(), b.data(), n));
      INFO("n = " << n << ": dot_fp64 " << dot << ", fixed order " << want);
      CHECK(same_bits(dot, want));
      CHECK(same_bits(ref::sum_fp64(a.data(), n), fixed_order(a)));
      double sequential = 0;
      for (std::int64_t k = 0; k < n; ++k) sequential += a[static_cast<std::size_t>(k)] * b[static_cast<std::size_t>(k)];
      differs_from_sequential += !same_bits(dot, sequential);
      ++cases;
    }
  }
  INFO(differs_from_sequential << " of " << cases << " dot products differ from left-to-right summation");
  CHECK(differs_from_sequential > cases / 2);  // the inputs do tell orders apart
}

TEST_CASE("fp64 dot: the Eigen vector overloads take rows of column-major matrices") {
  std::mt19937_64 rng(22);
  Eigen::MatrixXd m(3, 21);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = random_doubles(rng, 1)[0];
  const Eigen::VectorXd r0 = m.row(0).transpose(), r2 = m.row(2).transpose();
  CHECK(same_bits(ref::dot_fp64(m.row(0).transpose(), m.row(2).transpose()), ref::dot_fp64(r0.data(), r2.data(), 21)));
  CHECK(same_bits(ref::sum_fp64(m.row(1).transpose()), fixed_order(std::vector<double>(m.row(1).begin(), m.row(1).end()))));
  CHECK_THROWS_WITH(ref::dot_fp64(Eigen::VectorXd(3), Eigen::VectorXd(4)), Catch::Contains("lengths 3 and 4"));
}

TEST_CASE("fp64 gemm: every output is the fixed-order dot of its rows (blocked shapes, ragged K)") {
  // 37 rows of B: two full blocks of 16 and a ragged one; K = 1029: two pieces of 512 and a
  // tail of 5 (not a multiple of 8); K = 512 and 7: one piece.
  std::mt19937_64 rng(23);
  for (const auto& [m, n, k] : {std::array<Eigen::Index, 3>{5, 37, 1029}, {3, 16, 512}, {4, 9, 7}, {1, 1, 0}}) {
    Eigen::MatrixXd a(m, k), b(n, k);
    for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = random_doubles(rng, 1)[0];
    for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = random_doubles(rng, 1)[0];
    const Eigen::MatrixXd c = ref::gemm_fp64(a, b);
    REQUIRE(c.rows() == m);
    REQUIRE(c.cols() == n);
    std::int64_t mismatches = 0;
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        const Eigen::VectorXd ai = a.row(i).transpose(), bj = b.row(j).transpose();
        mismatches += !same_bits(c(i, j), fixed_order(products(ai.data(), bj.data(), k)));
      }
    INFO(m << " x " << n << " x " << k << ": " << mismatches << " outputs differ from the fixed order");
    CHECK(mismatches == 0);
  }
  CHECK_THROWS_WITH(ref::gemm_fp64(Eigen::MatrixXd(2, 3), Eigen::MatrixXd(2, 4)), Catch::Contains("must share K"));
}
