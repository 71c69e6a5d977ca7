#pragma once
// Input checks the harness applies before any kernel runs: the kernels propagate NaN, the
// studies want a clear refusal instead.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "data/tensor_io/tensor.hpp"

namespace fp8lab {

// Throws TensorFileError "FILE: element (r, c) is NaN ..." at the first non-finite value.
void require_finite(std::span<const float> values, std::int64_t cols, const std::filesystem::path& file);

// Throws PointFailure "operand NAME: element (r, c) is infinite in FP32 ..." at the first
// non-finite value (e.g. a synthetic operand whose outlier_scale overflowed FP32).
void require_finite_operand(std::span<const float> values, std::int64_t cols, const std::string& name);

// Throws TensorFileError unless the tensor is 2-D (rows x K) with no zero extent.
void require_matrix(const Tensor& tensor, const std::filesystem::path& file);

// A 2-D operand read from a tensor file, as FP32, checked finite.
struct MatrixOperand {
  std::int64_t rows = 0, cols = 0;
  DType dtype = DType::f32;
  std::vector<float> values;  // rows x cols, row-major
};
MatrixOperand load_matrix_operand(const std::filesystem::path& file, const std::string& name);

}  // namespace fp8lab
