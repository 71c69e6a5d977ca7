#pragma once
// FP64 reference of Transformer Engine's 16 x 16 Random Hadamard Transform (the kernel:
// kernels/hadamard_transform.hpp), written from the math and sharing no code with kernels/:
// H16 is built by Sylvester's recursion H_2n = [[H_n, H_n], [H_n, -H_n]] (not from popcounts),
// the signs are TE's list as TE writes it (not a bit mask), and each 1 x 16 group x of a row
// becomes x * M with M = diag(s) * H16 / 4, the sum of the 16 products taken in FP64.
#include <Eigen/Dense>

namespace fp8lab::ref {

using RowMajorMatrixXd = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// M = diag(s) * H16 / 4 (16 x 16, entries +-0.25).
Eigen::MatrixXd te_rht_matrix();

// x: rows x K (K a multiple of 16, else std::invalid_argument); every 1 x 16 group of a row is
// multiplied by M. Each output is a sum of 16 exact products (x_i * +-0.25) in increasing i,
// so |computed - exact| <= gamma_15 * sum_i |x_i| / 4 with gamma_15 = 15 * 2^-53 / (1 - 15 * 2^-53).
RowMajorMatrixXd random_hadamard_transform_16_ref(const RowMajorMatrixXd& x);

}  // namespace fp8lab::ref
