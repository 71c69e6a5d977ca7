// fp8lab.torch on CUDA tensors (built only where the CUDA backend is, FP8LAB_HAVE_CUDA): a linear
// layer's three GEMMs by kernels/cuda/linear_gemms_cuda.hpp on device pointers torch owns, on
// torch's current stream, with the bits of the CPU engine's for the same precision. What the GPU
// has no kernel for is refused with its one line ("cuda fprop of recipe 'R' (...) cannot run on
// DEVICE: why"), never computed another way. Wgrad re-quantizes X from X itself (the GPU path keeps X).
#include <pybind11/stl.h>

#include <cstdint>

#include "harness/python/bindings.hpp"
#include "kernels/cuda/cuda_allocator.hpp"
#include "kernels/cuda/linear_gemms_cuda.hpp"
#include "kernels/train/linear_layer.hpp"

namespace fp8lab::python {
namespace py = pybind11;
namespace {

using train::GemmKind;

template <class T>
T* at(std::uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

// One GEMM's call: a ledger over cudaMalloc for its workspace, the Wgrad re-quantization's sources.
struct CudaCall {
  cuda::CudaAllocator allocator;
  MemoryLedger ledger{&allocator};
  cuda::LinearGemmCall call;
  CudaCall(const train::LinearLayer& l, GemmKind kind, const std::string& recipe, std::uintptr_t stream)
      : call{ledger, l.precision(kind), &l.precision(GemmKind::dgrad), &l.precision(GemmKind::fprop), recipe,
             reinterpret_cast<cudaStream_t>(stream)} {}
};

}  // namespace

void add_cuda_linear_bindings(py::module_& m) {
  m.attr("_has_cuda") = true;
  m.def(
      "_cuda_failure",
      [](const train::LinearLayer& l, const std::string& gemm, const std::string& recipe, std::int64_t rows,
         std::int64_t out, std::int64_t in) {
        const GemmKind kind = gemm == "fprop" ? GemmKind::fprop : gemm == "dgrad" ? GemmKind::dgrad : GemmKind::wgrad;
        CudaCall c(l, kind, recipe, 0);
        return cuda::linear_gemm_failure(c.call, kind, rows, out, in);
      },
      py::arg("layer"), py::arg("gemm"), py::arg("recipe"), py::arg("rows"), py::arg("out"), py::arg("in"),
      "Empty when the GPU runs this GEMM of these sizes, else the line it refuses with");
  m.def(
      "_cuda_fprop",
      [](const train::LinearLayer& l, const std::string& recipe, std::uintptr_t x, std::uintptr_t w, std::uintptr_t y,
         std::int64_t rows, std::int64_t in, std::int64_t out, std::uintptr_t stream) {
        py::gil_scoped_release unlocked;
        CudaCall c(l, GemmKind::fprop, recipe, stream);
        cuda::fprop(c.call, at<const float>(x), at<const float>(w), at<float>(y), rows, in, out);
      },
      py::arg("layer"), py::arg("recipe"), py::arg("x"), py::arg("w"), py::arg("y"), py::arg("rows"), py::arg("in"),
      py::arg("out"), py::arg("stream"));
  m.def(
      "_cuda_dgrad",
      [](const train::LinearLayer& l, const std::string& recipe, std::uintptr_t dy, std::uintptr_t w, std::uintptr_t dx,
         std::int64_t rows, std::int64_t out, std::int64_t in, std::uintptr_t stream) {
        py::gil_scoped_release unlocked;
        CudaCall c(l, GemmKind::dgrad, recipe, stream);
        cuda::dgrad(c.call, at<const float>(dy), at<const float>(w), at<float>(dx), rows, out, in);
      },
      py::arg("layer"), py::arg("recipe"), py::arg("dy"), py::arg("w"), py::arg("dx"), py::arg("rows"), py::arg("out"),
      py::arg("in"), py::arg("stream"));
  m.def(
      "_cuda_wgrad",
      [](const train::LinearLayer& l, const std::string& recipe, std::uintptr_t dy, std::uintptr_t x, std::uintptr_t dw,
         std::int64_t rows, std::int64_t out, std::int64_t in, std::uintptr_t stream) {
        py::gil_scoped_release unlocked;
        CudaCall c(l, GemmKind::wgrad, recipe, stream);
        cuda::wgrad(c.call, at<const float>(dy), at<const float>(x), at<float>(dw), rows, out, in, false);
      },
      py::arg("layer"), py::arg("recipe"), py::arg("dy"), py::arg("x"), py::arg("dw"), py::arg("rows"), py::arg("out"),
      py::arg("in"), py::arg("stream"));
}

}  // namespace fp8lab::python
