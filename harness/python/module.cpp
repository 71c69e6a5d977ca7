// fp8lab._core, the C++ of the `fp8lab` Python package (harness/python/fp8lab/ re-exports it):
// the quantizers, the emulated FP8 GEMM and the error metrics on NumPy arrays, computing what the
// CLI computes (the options and their defaults are the CLI's: harness/requests/gemm_request.hpp,
// harness/requests/quantize_request.hpp) and refusing what it refuses with its message: ValueError for a
// bad value, TypeError for a wrong dtype; and what fp8lab.torch runs (linear_bindings.cpp).
#include <pybind11/pybind11.h>

#include "data/tensor_io/tensor.hpp"
#include "harness/python/array_conversion.hpp"
#include "harness/python/bindings.hpp"
#include "harness/study/study_spec.hpp"

PYBIND11_MODULE(_core, m) {
  m.doc() =
      "fp8lab: FP8 quantization (tile/block/row/tensor scales, E4M3/E5M2) and the bit-exact CPU emulation of "
      "Hopper's FP8 tensor-core GEMM, on NumPy arrays.\n\n"
      "Inputs: a C-contiguous float32 array is read in place; any other layout or float dtype (float64, "
      "float16, bf16 as [('bf16', '<u2')]) is converted once, as the CLI converts a .npy file; objects with "
      "__dlpack__ (torch CPU tensors) are taken through numpy.from_dlpack without a copy. Outputs are new "
      "NumPy arrays. Keyword defaults are the CLI's, so fp8lab.gemm(a, b) gives the bits of "
      "`fp8lab gemm --a a.npy --b b.npy --out c.npy`.";
  m.attr("__version__") = FP8LAB_VERSION;
  // A tensor problem is a bad value (the CLI's exit 2), whatever its source.
  pybind11::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const fp8lab::TensorFileError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const fp8lab::SpecError& e) {  // a recipe file's error: file, line and field named
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  fp8lab::python::add_array_bindings(m);
  fp8lab::python::add_quantize_bindings(m);
  fp8lab::python::add_gemm_bindings(m);
  fp8lab::python::add_metrics_bindings(m);
  fp8lab::python::add_linear_bindings(m);
  fp8lab::python::add_torch_train_binding(m);
  fp8lab::python::add_train_data_bindings(m);
  fp8lab::python::add_grid_file_binding(m);
  fp8lab::python::add_codes_gemm_bindings(m);
#ifdef FP8LAB_HAVE_CUDA
  fp8lab::python::add_cuda_linear_bindings(m);
#else
  m.attr("_has_cuda") = false;
#endif
}
