#include "harness/python/array_conversion.hpp"

#include "data/tensor_io/npy.hpp"
#include "data/tensor_io/tensor.hpp"
#include "harness/requests/operand_checks.hpp"
#include "harness/requests/quantize_request.hpp"
#include "kernels/train/linear_gemm.hpp"

namespace fp8lab::python {
namespace {

py::array as_ndarray(py::handle object) {
  if (py::isinstance<py::array>(object)) return py::reinterpret_borrow<py::array>(object);
  py::module_ numpy = py::module_::import("numpy");
  if (py::hasattr(object, "__dlpack__")) return numpy.attr("from_dlpack")(object);
  return numpy.attr("asarray")(object);
}

std::vector<std::int64_t> shape_of(const py::array& array) {
  return std::vector<std::int64_t>(array.shape(), array.shape() + array.ndim());
}

// The dtype as a .npy header spells it ('<f4', or "[('bf16', '<u2')]" for a structured one),
// so that it is refused exactly as a file of it would be.
std::string npy_descr(const py::array& array) {
  const py::object dtype = array.attr("dtype");
  if (!dtype.attr("names").is_none()) return py::str(dtype.attr("descr"));
  return py::str(dtype.attr("str"));
}

bool readable_in_place(const py::array& array) {
  const py::object flags = array.attr("flags");
  return flags.attr("c_contiguous").cast<bool>() && flags.attr("aligned").cast<bool>();
}

py::array contiguous(const py::array& array) {
  return py::module_::import("numpy").attr("ascontiguousarray")(array);
}

}  // namespace

FlatArray<float> float32_values(py::handle object, const std::string& label) {
  FlatArray<float> out;
  py::array array = as_ndarray(object);
  out.shape = shape_of(array);
  DType dtype{};
  try {
    dtype = npy_descr_dtype(npy_descr(array), label);
    if (dtype != DType::f32) {
      const py::array bytes = contiguous(array);
      // nbytes from NumPy itself: Debian's pybind11 2.10 computes py::array::nbytes() from the
      // NumPy 1 layout of the dtype struct, which under NumPy 2 reads 0 (found by the peers
      // test pyapi_dlpack_test.py, whose venv has NumPy 2: every float64/float16 input failed)
      const auto nbytes = bytes.attr("nbytes").cast<std::size_t>();
      out.converted = to_float32(dtype, {static_cast<const std::byte*>(bytes.data()), nbytes}, label);
      out.values = out.converted;
      return out;
    }
  } catch (const TensorFileError& e) {
    throw py::type_error(e.what());
  }
  out.owner = readable_in_place(array) ? array : contiguous(array);
  const auto owner = py::reinterpret_borrow<py::array>(out.owner);
  out.values = {static_cast<const float*>(owner.data()), static_cast<std::size_t>(owner.size())};
  return out;
}

FlatArray<float> float32_matrix(py::handle object, const std::string& label) {
  FlatArray<float> out = float32_values(object, label);
  require_matrix(Tensor{DType::f32, out.shape, {}}, label);
  require_finite(out.values, out.shape[1], label);
  return out;
}

std::optional<FlatArray<double>> float64_values(py::handle object, const std::string& label) {
  py::array array = as_ndarray(object);
  try {
    if (npy_descr_dtype(npy_descr(array), label) != DType::f64) return std::nullopt;
  } catch (const TensorFileError&) {
    return std::nullopt;
  }
  FlatArray<double> out;
  out.shape = shape_of(array);
  out.owner = readable_in_place(array) ? array : contiguous(array);
  const auto owner = py::reinterpret_borrow<py::array>(out.owner);
  out.values = {static_cast<const double*>(owner.data()), static_cast<std::size_t>(owner.size())};
  return out;
}

std::optional<std::uint64_t> seed_of(const py::object& seed, const std::string& option) {
  if (seed.is_none()) return std::nullopt;
  const std::string text = py::str(seed);
  if (!py::isinstance<py::int_>(seed) || py::isinstance<py::bool_>(seed))
    throw std::invalid_argument(option + ": '" + text + "' is not a whole number from 0 to 2^64 - 1");
  try {
    return parse_seed(text);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(option + ": '" + text + "' is not a whole number from 0 to 2^64 - 1");
  }
}

void add_array_bindings(py::module_& m) {
  m.def(
      "_operand_address",
      [](const py::object& x) { return reinterpret_cast<std::uintptr_t>(float32_values(x, "x").values.data()); },
      py::arg("x"),
      "The address of the float32 data the kernels would read for x (tests: equal to x.ctypes.data when x "
      "is read in place, different when it was copied or converted)");
  m.def(
      "operand_rounding_seed",
      [](const py::object& x, const std::string& which) {
        if (which != "a" && which != "b") throw std::invalid_argument("which must be 'a' or 'b', got '" + which + "'");
        const FlatArray<float> v = float32_values(x, "x");
        return train::operand_rounding_seed(v.values, which[0]);
      },
      py::arg("x"), py::arg("which"),
      "The seed a recipe's stochastic rounding of GEMM operand `which` ('a' or 'b') with these float32 values "
      "gets (a hash of its bits: kernels/train/linear_gemm.hpp), for fp8lab.gemm's a_seed / b_seed");
}

}  // namespace fp8lab::python
