#include "reference/hadamard_transform_ref.hpp"

#include <stdexcept>
#include <string>

namespace fp8lab::ref {
namespace {

Eigen::MatrixXd sylvester_hadamard(int n) {
  Eigen::MatrixXd h = Eigen::MatrixXd::Ones(1, 1);
  while (h.rows() < n) {
    const Eigen::Index m = h.rows();
    Eigen::MatrixXd next(2 * m, 2 * m);
    next << h, h, h, -h;
    h = next;
  }
  return h;
}

}  // namespace

Eigen::MatrixXd te_rht_matrix() {
  // TE's get_wgrad_sign_vector (transformer_engine/pytorch/tensor/nvfp4_tensor.py), in its order.
  const double signs[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};
  Eigen::MatrixXd m = sylvester_hadamard(16);
  for (int i = 0; i < 16; ++i) m.row(i) *= signs[i] / 4.0;
  return m;
}

RowMajorMatrixXd random_hadamard_transform_16_ref(const RowMajorMatrixXd& x) {
  if (x.cols() % 16 != 0)
    throw std::invalid_argument("random_hadamard_transform_16_ref: K = " + std::to_string(x.cols()) +
                                " is not a multiple of 16");
  const Eigen::MatrixXd m = te_rht_matrix();
  RowMajorMatrixXd y(x.rows(), x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r)
    for (Eigen::Index g = 0; g < x.cols(); g += 16)
      for (Eigen::Index j = 0; j < 16; ++j) {
        double sum = 0;
        for (Eigen::Index i = 0; i < 16; ++i) sum += x(r, g + i) * m(i, j);
        y(r, g + j) = sum;
      }
  return y;
}

}  // namespace fp8lab::ref
