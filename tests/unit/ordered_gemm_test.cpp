// kernels/train/ordered_gemm.hpp promises the bits of the plain loop nest: every output starts
// from 0 (or C) and adds a(i, p) b(p, j) for p ascending, one rounding per product and per sum.
// Checked bit for bit against that loop nest, written here from the definition, over shapes
// that exercise every path (whole register blocks, the 8-wide narrow blocks, the scalar edges,
// rows short of a block), strided operands, A stored transposed, accumulation, float and double,
// and a row range split as threads split it; and the packed-panel path (K in chunks of 256,
// B's panels copied; A row-major or stored transposed), which must give the same bits.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/train/ordered_gemm.hpp"

using namespace fp8lab::train;

namespace {

template <class Real>
struct Problem {
  std::int64_t m, n, k, lda, ldb, ldc;
  bool transposed_a;
  std::vector<Real> a, b, c;
};

template <class Real>
Problem<Real> make_problem(std::int64_t m, std::int64_t n, std::int64_t k, bool transposed_a, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  Problem<Real> p{m, n, k, 0, n + 3, n + 5, transposed_a, {}, {}, {}};
  p.lda = transposed_a ? m + 2 : k + 1;  // strides wider than the rows: blocks read in place
  const std::int64_t a_rows = transposed_a ? k : m;
  p.a.resize(static_cast<std::size_t>(a_rows * p.lda));
  p.b.resize(static_cast<std::size_t>(k * p.ldb));
  p.c.resize(static_cast<std::size_t>(m * p.ldc));
  for (Real& x : p.a) x = static_cast<Real>(normal(rng));
  for (Real& x : p.b) x = static_cast<Real>(normal(rng));
  for (Real& x : p.c) x = static_cast<Real>(normal(rng));
  return p;
}

// The definition: C(i, j) = C(i, j) (or 0) + a(i, 0) b(0, j) + a(i, 1) b(1, j) + ..., in that order.
template <class Real>
std::vector<Real> loop_nest(const Problem<Real>& p, bool accumulate) {
  std::vector<Real> c = p.c;
  for (std::int64_t i = 0; i < p.m; ++i)
    for (std::int64_t j = 0; j < p.n; ++j) {
      Real sum = accumulate ? c[static_cast<std::size_t>(i * p.ldc + j)] : Real(0);
      for (std::int64_t q = 0; q < p.k; ++q) {
        const Real a = p.transposed_a ? p.a[static_cast<std::size_t>(q * p.lda + i)] : p.a[static_cast<std::size_t>(i * p.lda + q)];
        const Real product = a * p.b[static_cast<std::size_t>(q * p.ldb + j)];
        sum = sum + product;
      }
      c[static_cast<std::size_t>(i * p.ldc + j)] = sum;
    }
  return c;
}

template <class Real>
void check_shapes() {
  unsigned seed = 1;
  for (const std::int64_t m : {1, 3, 4, 5, 8, 13})
    for (const std::int64_t n : {1, 4, 7, 8, 9, 16, 17, 24, 33, 64})
      for (const std::int64_t k : {1, 2, 8, 31, 300})
        for (const bool transposed : {false, true})
          for (const bool accumulate : {false, true}) {
            Problem<Real> p = make_problem<Real>(m, n, k, transposed, seed++);
            const std::vector<Real> want = loop_nest(p, accumulate);
            if (transposed)
              ordered_gemm_at(p.a.data(), p.lda, p.b.data(), p.ldb, p.c.data(), p.ldc, m, n, k, accumulate);
            else if (m > kOrderedGemmRows) {  // two row ranges, split on a block boundary, as threads split
              ordered_gemm_rows(p.a.data(), p.lda, p.b.data(), p.ldb, p.c.data(), p.ldc, 0, kOrderedGemmRows, n, k, accumulate);
              ordered_gemm_rows(p.a.data(), p.lda, p.b.data(), p.ldb, p.c.data(), p.ldc, kOrderedGemmRows, m, n, k, accumulate);
            } else {
              ordered_gemm(p.a.data(), p.lda, p.b.data(), p.ldb, p.c.data(), p.ldc, m, n, k, accumulate);
            }
            INFO("m " << m << " n " << n << " k " << k << " transposed " << transposed << " accumulate " << accumulate);
            // Bits, padding between rows included (nothing outside the n columns is written).
            CHECK(std::memcmp(p.c.data(), want.data(), want.size() * sizeof(Real)) == 0);
          }
}

}  // namespace

// The packed-panel path over the same shapes, K past one panel's depth (256) and past two,
// a row range that starts inside the matrix, as a thread's share does.
template <class Real>
void check_packed_shapes() {
  unsigned seed = 1000;
  std::vector<Real> panel(static_cast<std::size_t>(kOrderedGemmPanelValues<Real>));
  for (const std::int64_t m : {1, 3, 4, 5, 8, 13})
    for (const std::int64_t n : {1, 7, 8, 16, 17, 33, 64})
      for (const std::int64_t k : {0, 1, 31, 256, 257, 600})
        for (const bool transposed : {false, true})
          for (const bool accumulate : {false, true}) {
            Problem<Real> p = make_problem<Real>(m, n, k, transposed, seed++);
            const std::vector<Real> want = loop_nest(p, accumulate);
            const std::int64_t split = m > kOrderedGemmRows ? kOrderedGemmRows : m;
            const auto run = transposed ? ordered_gemm_at_rows_packed<Real> : ordered_gemm_rows_packed<Real>;
            run(p.a.data(), p.lda, p.b.data(), p.ldb, p.c.data(), p.ldc, 0, split, n, k, accumulate, panel.data());
            run(p.a.data(), p.lda, p.b.data(), p.ldb, p.c.data(), p.ldc, split, m, n, k, accumulate, panel.data());
            INFO("packed: m " << m << " n " << n << " k " << k << " transposed " << transposed << " accumulate " << accumulate);
            CHECK(std::memcmp(p.c.data(), want.data(), want.size() * sizeof(Real)) == 0);
          }
}

TEST_CASE("ordered gemm: the bits of the plain loop nest, float") { check_shapes<float>(); }
TEST_CASE("ordered gemm: the packed-panel path has the bits of the plain loop nest") {
  check_packed_shapes<float>();
  check_packed_shapes<double>();
}
TEST_CASE("ordered gemm: the bits of the plain loop nest, double") { check_shapes<double>(); }
