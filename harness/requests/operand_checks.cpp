#include "harness/requests/operand_checks.hpp"

#include <cmath>
#include <string>

#include "harness/study/study_kind.hpp"

namespace fp8lab {

void require_finite(std::span<const float> values, std::int64_t cols, const std::filesystem::path& file) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (std::isfinite(values[i])) continue;
    const auto index = static_cast<std::int64_t>(i);
    throw TensorFileError(file, "element (" + std::to_string(index / cols) + ", " + std::to_string(index % cols) +
                                    ") is " + (std::isnan(values[i]) ? "NaN" : "infinite") +
                                    "; fp8lab studies finite data only");
  }
}

void require_finite_operand(std::span<const float> values, std::int64_t cols, const std::string& name) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (std::isfinite(values[i])) continue;
    const auto index = static_cast<std::int64_t>(i);
    throw PointFailure("operand " + name + ": element (" + std::to_string(index / cols) + ", " +
                       std::to_string(index % cols) + ") is " + (std::isnan(values[i]) ? "NaN" : "infinite") +
                       " in FP32 (too large an outlier_scale?); the kernels see finite values only");
  }
}

void require_matrix(const Tensor& tensor, const std::filesystem::path& file) {
  if (tensor.shape.size() != 2)
    throw TensorFileError(file, "shape " + tensor.shape_string() + " is not 2-D (rows x K)");
  if (tensor.shape[0] == 0 || tensor.shape[1] == 0)
    throw TensorFileError(file, "shape " + tensor.shape_string() + " is empty");
}

MatrixOperand load_matrix_operand(const std::filesystem::path& file, const std::string& name) {
  const Tensor tensor = read_tensor_file(file, name);
  require_matrix(tensor, file);
  MatrixOperand m{tensor.shape[0], tensor.shape[1], tensor.dtype, tensor.to_float32(file)};
  require_finite(m.values, m.cols, file);
  return m;
}

}  // namespace fp8lab
