#pragma once
// NumPy (and DLPack) arrays in and out of the fp8lab module.
//
// In: what the kernels read is a flat C-order span of float32 (or float64 for the metrics):
//   - an object with __dlpack__ that is not an ndarray (a torch CPU tensor) becomes one with
//     numpy.from_dlpack (no copy); anything else that is not an ndarray goes through numpy.asarray;
//   - float32, C-contiguous, aligned, native byte order: read in place, never copied;
//   - float32 otherwise (strided views, transposes): one copy, numpy.ascontiguousarray;
//   - float64 (and float16, bf16 as [('bf16', '<u2')]): converted to float32 exactly as the CLI
//     converts a .npy file of that dtype (to_float32), one new buffer; the metrics read float64
//     in place instead;
//   - any other dtype: TypeError with the CLI's message for a .npy file of that dtype.
// Messages that name a file in the CLI name the argument here ("a", "b", "x").
// Out: results are NumPy arrays that own the C++ buffer they were computed into (no copy).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace fp8lab::python {
namespace py = pybind11;

template <class T>
struct FlatArray {
  py::object owner;            // the array `values` points into, kept alive
  std::vector<T> converted;    // the values when they had to be converted
  std::span<const T> values;   // C order
  std::vector<std::int64_t> shape;
};

// float32 values of any array (rules above).
FlatArray<float> float32_values(py::handle object, const std::string& label);

// A 2-D, non-empty, finite float32 operand (rows x K), refused as the CLI refuses a file:
// ValueError naming `label`.
FlatArray<float> float32_matrix(py::handle object, const std::string& label);

// float64 arrays read in place (copied only when not C-contiguous); nothing for other dtypes.
std::optional<FlatArray<double>> float64_values(py::handle object, const std::string& label);

// A NumPy array of `shape` (C order) that takes `values` over without copying them.
template <class T>
py::array_t<T> adopt(std::vector<T>&& values, const std::vector<std::int64_t>& shape) {
  auto* owned = new std::vector<T>(std::move(values));
  py::capsule free_when_done(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(std::vector<py::ssize_t>(shape.begin(), shape.end()), owned->data(), free_when_done);
}

// A seed argument (seed=, a_seed=, ...): None or a Python int from 0 to 2^64 - 1, refused with
// parse_seed's message under the CLI option's name for anything else.
std::optional<std::uint64_t> seed_of(const py::object& seed, const std::string& option);

void add_array_bindings(py::module_& m);

}  // namespace fp8lab::python
