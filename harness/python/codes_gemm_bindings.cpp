// fp8lab's GEMM models on operands already quantized (codes and scales as a user's kernel takes
// them), for fp8lab.torch.check_gemm: _gemm_codes runs the CPU emulation on them with any
// accumulation model and promotion interval, and _fma32 is FP32's fused multiply-add elementwise
// (std::fma on floats: one rounding), with which check_gemm composes the cuBLASLt folds.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>

#include "harness/python/array_conversion.hpp"
#include "harness/python/bindings.hpp"
#include "kernels/cpu/gemm_fp8_nt.hpp"
#include "kernels/quantization.hpp"

namespace fp8lab::python {
namespace py = pybind11;
namespace {

// A QuantizedTensor from uint8 codes (rows x cols) and its scale grid, as fp8lab.quantize returns them.
QuantizedTensor from_codes(const py::array_t<std::uint8_t, py::array::c_style>& codes,
                           const py::array_t<float, py::array::c_style>& scales, const std::string& granularity,
                           const std::string& format, const char* label) {
  if (codes.ndim() != 2) throw std::invalid_argument(std::string(label) + ": codes must be 2-D (rows x K)");
  QuantizeConfig config{parse_element_format(format), Granularity::parse(granularity), ScaleRule::fp32};
  QuantizedTensor q = make_quantized_tensor(codes.shape(0), codes.shape(1), config);
  if (static_cast<std::size_t>(scales.size()) != q.scales.size())
    throw std::invalid_argument(std::string(label) + ": " + std::to_string(scales.size()) + " scales, the " + granularity +
                                " grid of a " + std::to_string(q.rows) + "x" + std::to_string(q.cols) + " operand has " +
                                std::to_string(q.scales.size()));
  std::memcpy(q.codes.data(), codes.data(), q.codes.size());
  std::memcpy(q.scales.data(), scales.data(), q.scales.size() * sizeof(float));
  return q;
}

py::array_t<float> gemm_codes(const py::array_t<std::uint8_t, py::array::c_style>& a_codes,
                              const py::array_t<float, py::array::c_style>& a_scales, const std::string& a_granularity,
                              const py::array_t<std::uint8_t, py::array::c_style>& b_codes,
                              const py::array_t<float, py::array::c_style>& b_scales, const std::string& b_granularity,
                              const std::string& format, const std::string& b_format, const std::string& accum,
                              const std::string& promotion) {
  const QuantizedTensor qa = from_codes(a_codes, a_scales, a_granularity, format, "a");
  const QuantizedTensor qb = from_codes(b_codes, b_scales, b_granularity, b_format.empty() ? format : b_format, "b");
  if (qa.cols != qb.cols) throw std::invalid_argument("a and b must share K");
  const GemmConfig config{AccumulationModel::parse(accum), PromotionInterval::parse(promotion), OutputType::fp32};
  plan_gemm(qa, qb, config);  // refuses an invalid combination with its reason
  std::vector<float> out;
  {
    py::gil_scoped_release unlocked;
    out = cpu::gemm_nt(qa, qb, config);
  }
  return adopt(std::move(out), {qa.rows, qb.rows});
}

py::array_t<float> fma32(const py::array_t<float, py::array::c_style | py::array::forcecast>& a,
                         const py::array_t<float, py::array::c_style | py::array::forcecast>& b,
                         const py::array_t<float, py::array::c_style | py::array::forcecast>& c) {
  if (a.size() != b.size() || a.size() != c.size()) throw std::invalid_argument("_fma32: a, b and c must have one size");
  std::vector<float> out(static_cast<std::size_t>(a.size()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::fma(a.data()[i], b.data()[i], c.data()[i]);
  std::vector<std::int64_t> shape(a.shape(), a.shape() + a.ndim());
  return adopt(std::move(out), shape);
}

}  // namespace

void add_codes_gemm_bindings(py::module_& m) {
  m.def("_gemm_codes", &gemm_codes, py::arg("a_codes"), py::arg("a_scales"), py::arg("a_granularity"), py::arg("b_codes"),
        py::arg("b_scales"), py::arg("b_granularity"), py::arg("format"), py::arg("b_format"), py::arg("accum"),
        py::arg("promotion"),
        "C = A B^T by the CPU emulation from quantized operands: uint8 codes (rows x K) and their scale grids as "
        "fp8lab.quantize gives them; accum and promotion as fp8lab.gemm takes them");
  m.def("_fma32", &fma32, py::arg("a"), py::arg("b"), py::arg("c"), "fl32(a * b + c), one rounding, elementwise");
}

}  // namespace fp8lab::python
