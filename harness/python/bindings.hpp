#pragma once
// Each function group of the fp8lab module registers itself here (module.cpp calls them).
#include <pybind11/pybind11.h>

namespace fp8lab::python {

void add_quantize_bindings(pybind11::module_& m);
void add_gemm_bindings(pybind11::module_& m);
void add_metrics_bindings(pybind11::module_& m);
void add_linear_bindings(pybind11::module_& m);
void add_torch_train_binding(pybind11::module_& m);
void add_train_data_bindings(pybind11::module_& m);
void add_grid_file_binding(pybind11::module_& m);
void add_codes_gemm_bindings(pybind11::module_& m);
// Only in a build with the CUDA backend (FP8LAB_HAVE_CUDA): fp8lab.torch on CUDA tensors.
void add_cuda_linear_bindings(pybind11::module_& m);

}  // namespace fp8lab::python
