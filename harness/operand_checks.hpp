#pragma once
// Input checks the harness applies before any kernel runs: the kernels propagate NaN, the
// studies want a clear refusal instead.
#include <cstdint>
#include <filesystem>
#include <span>

#include "data/tensor_io/tensor.hpp"

namespace fp8lab {

// Throws TensorFileError "FILE: element (r, c) is NaN ..." at the first non-finite value.
void require_finite(std::span<const float> values, std::int64_t cols, const std::filesystem::path& file);

// Throws TensorFileError unless the tensor is 2-D (rows x K) with no zero extent.
void require_matrix(const Tensor& tensor, const std::filesystem::path& file);

}  // namespace fp8lab
