#pragma once
// NumPy .npy files (format versions 1.0, 2.0, 3.0), little-endian, C order.
// dtypes: '<f4' f32, '<f8' f64, '<f2' f16, '|u1' u8, '<u2' plain u16, '<i4' i32 (token ids),
// and bf16 written as
// the structured dtype [('bf16', '<u2')]: NumPy has no bfloat16, and its header admits no
// extra keys, so the field name is where the file itself says what the 16 bits mean
// (np.load gives a record array; a['bf16'] is the raw uint16).
#include <cstddef>
#include <filesystem>
#include <string_view>
#include <vector>

#include "data/tensor_io/tensor.hpp"

namespace fp8lab {

Tensor read_npy(const std::filesystem::path& file);
// The same from the file's bytes (`file` names it in errors): what the fuzz target drives.
Tensor parse_npy(const std::vector<std::byte>& bytes, const std::filesystem::path& file);
// The dtype a .npy descr names ('<f4', '|u1', ..., or the bf16 structured descr above, as
// NumPy prints dtype.descr); TensorFileError naming `file` and what is supported otherwise.
// The Python module maps a NumPy array's dtype with it, so it refuses what a file would be.
DType npy_descr_dtype(std::string_view descr, const std::filesystem::path& file);
void write_npy(const std::filesystem::path& file, const Tensor& tensor);  // f32, f64, f16, bf16, u8, u16

}  // namespace fp8lab
