// The 16 x 16 Random Hadamard Transform against its FP64 reference (reference/hadamard_transform_ref):
// M is orthogonal exactly, the FP32 kernel is within its derived rounding bound of the FP64
// transform, and a GEMM of transformed operands equals the untransformed GEMM within a derived
// bound (the property that makes --rht a pure quantization experiment).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/hadamard_transform.hpp"
#include "reference/fp64_dot_ref.hpp"
#include "reference/hadamard_transform_ref.hpp"

using namespace fp8lab;

namespace {

// gamma_n = n u / (1 - n u) for unit roundoff u (2^-24 FP32, 2^-53 FP64).
double gamma(double n, double u) { return n * u / (1.0 - n * u); }
const double kGamma4Fp32 = gamma(4, std::ldexp(1.0, -24));

// rows x cols of N(0, 1) times a power of two per row, with outlier channels (1000x) that
// make the 16-element groups very unequal, which is what the transform is for.
std::vector<float> operand(std::int64_t rows, std::int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float row_scale = std::ldexp(1.0f, exponent(rng));
    for (std::int64_t k = 0; k < cols; ++k)
      x[static_cast<std::size_t>(r * cols + k)] = normal(rng) * row_scale * (k % 29 == 3 ? 1000.0f : 1.0f);
  }
  return x;
}

ref::RowMajorMatrixXd to_fp64(const std::vector<float>& x, std::int64_t rows, std::int64_t cols) {
  ref::RowMajorMatrixXd m(rows, cols);
  for (std::int64_t i = 0; i < rows * cols; ++i) m.data()[i] = x[static_cast<std::size_t>(i)];
  return m;
}

// sum_i |x_i| over the 16-element group of row r that holds column k.
double group_l1(const ref::RowMajorMatrixXd& x, Eigen::Index r, Eigen::Index k) {
  const Eigen::Index g = k - k % 16;
  return x.row(r).segment(g, 16).cwiseAbs().sum();
}

}  // namespace

TEST_CASE("RHT 16x16 reference: M M^T = I exactly in FP64, and the kernel's matrix is M") {
  const Eigen::MatrixXd m = ref::te_rht_matrix();
  // Entries +-1/4: every product is +-1/16 and every sum of 16 of them is exact in FP64.
  CHECK((m * m.transpose()) == Eigen::MatrixXd::Identity(16, 16));
  CHECK((m.transpose() * m) == Eigen::MatrixXd::Identity(16, 16));
  // The kernel applied to the identity gives its matrix row by row (x = e_i gives row i of M).
  std::vector<float> identity(16 * 16, 0.0f);
  for (int i = 0; i < 16; ++i) identity[static_cast<std::size_t>(i * 16 + i)] = 1.0f;
  const ref::RowMajorMatrixXd kernel_m = to_fp64(random_hadamard_transform_16(identity, 16, 16), 16, 16);
  CHECK(kernel_m == ref::RowMajorMatrixXd(m));
}

TEST_CASE("RHT 16x16 reference: FP32 kernel within gamma_4 sum|x|/4 of FP64, 48 rows x 512 with outliers") {
  // Bound. The kernel first forms v_i = (s_i / 4) x_i exactly (a power of two and a sign; these
  // inputs are far from FP32's subnormals), then four butterfly stages, each output of a stage
  // fl(a +- b) = (a +- b)(1 + d), |d| <= u = 2^-24. By induction the value after stage t is
  // sum over its 2^t inputs of +-v_i prod_{t' <= t}(1 + d_{i,t'}), so after the 4 stages
  // |computed y_j - y_j| <= ((1 + u)^4 - 1) sum_i |v_i| <= gamma_4 sum_i |x_i| / 4.
  // The reference itself is within gamma_15 (FP64) sum_i |x_i| / 4 of the exact y_j (its header).
  const std::int64_t rows = 48, cols = 512;
  const std::vector<float> x = operand(rows, cols, 31);
  const ref::RowMajorMatrixXd xd = to_fp64(x, rows, cols);
  const ref::RowMajorMatrixXd y = to_fp64(random_hadamard_transform_16(x, rows, cols), rows, cols);
  const ref::RowMajorMatrixXd r = ref::random_hadamard_transform_16_ref(xd);
  const double gamma15_fp64 = gamma(15, std::ldexp(1.0, -53));
  double worst_used = 0;  // the largest |error| / bound over all outputs
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index k = 0; k < cols; ++k) {
      const double l1 = group_l1(xd, i, k);
      const double bound = (kGamma4Fp32 + gamma15_fp64) * l1 / 4.0;
      const double err = std::fabs(y(i, k) - r(i, k));
      worst_used = std::max(worst_used, bound > 0 ? err / bound : (err > 0 ? INFINITY : 0));
    }
  INFO("largest |kernel - reference| / bound = " << worst_used);
  CHECK(worst_used <= 1.0);
  CHECK(worst_used > 0.0);  // the kernel does round: a zero would mean the test compared nothing
}

TEST_CASE("RHT 16x16 reference: (A M)(B M)^T = A B^T in FP64 within the derived bound, 24x40x320") {
  // Bound for one output c = a . b (a, b rows of A, B; a~ = fl32(a M), b~ = fl32(b M)).
  // Per element of group g, |e_a,j| = |a~_j - (a M)_j| <= gamma_4 ||a_g||_1 / 4 (the test above),
  // and |(a M)_j| <= ||a_g||_1 / 4 (entries of M are +-1/4). As (a M) . (b M) = a M M^T b^T = a . b,
  //   a~ . b~ - a . b = (a M) . e_b + e_a . (b M) + e_a . e_b,
  // and over the 16 elements of group g each of the first two is at most
  // 16 (||a_g||_1 / 4)(gamma_4 ||b_g||_1 / 4) = gamma_4 ||a_g||_1 ||b_g||_1, the third at most
  // gamma_4^2 ||a_g||_1 ||b_g||_1. So |a~ . b~ - a . b| <= (2 gamma_4 + gamma_4^2) sum_g ||a_g||_1 ||b_g||_1.
  // Both dots are then taken in FP64 (products of FP32 values exact) in fp64_dot_ref's order:
  // each within gamma_(ceil(K/8)+3) (FP64) sum_k |a_k b_k| of its exact value.
  const std::int64_t m = 24, n = 40, k = 320;
  const std::vector<float> a = operand(m, k, 41), b = operand(n, k, 42);
  const std::vector<float> ta = random_hadamard_transform_16(a, m, k), tb = random_hadamard_transform_16(b, n, k);
  const ref::RowMajorMatrixXd ad = to_fp64(a, m, k), bd = to_fp64(b, n, k), tad = to_fp64(ta, m, k),
                              tbd = to_fp64(tb, n, k);
  const double gamma_dot = gamma(std::ceil(static_cast<double>(k) / ref::kSumLanes) + 3, std::ldexp(1.0, -53));
  double worst_used = 0, largest_difference = 0;
  for (Eigen::Index i = 0; i < m; ++i)
    for (Eigen::Index j = 0; j < n; ++j) {
      const double plain = ref::dot_fp64(ad.row(i).data(), bd.row(j).data(), k);
      const double transformed = ref::dot_fp64(tad.row(i).data(), tbd.row(j).data(), k);
      double groups = 0;
      for (Eigen::Index g = 0; g < k; g += 16) groups += group_l1(ad, i, g) * group_l1(bd, j, g);
      const double bound = (2 * kGamma4Fp32 + kGamma4Fp32 * kGamma4Fp32) * groups +
                           gamma_dot * ((ad.row(i).cwiseAbs().array() * bd.row(j).cwiseAbs().array()).sum() +
                                        (tad.row(i).cwiseAbs().array() * tbd.row(j).cwiseAbs().array()).sum());
      const double diff = std::fabs(transformed - plain);
      largest_difference = std::max(largest_difference, diff);
      worst_used = std::max(worst_used, diff / bound);
    }
  INFO("largest |(A M)(B M)^T - A B^T| = " << largest_difference << "; largest share of its bound " << worst_used);
  CHECK(worst_used <= 1.0);
  CHECK(largest_difference > 0.0);  // FP32 rounding of the transform shows: the comparison is not vacuous
}
