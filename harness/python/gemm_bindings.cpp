// fp8lab.gemm: C = A B^T through the emulated FP8 tensor-core GEMM, with the CLI's options.
#include <pybind11/stl.h>

#include <algorithm>
#include <cctype>

#include "harness/gemm_request.hpp"
#include "harness/python/array_conversion.hpp"
#include "harness/python/bindings.hpp"
#include "harness/python/metrics_dict.hpp"

namespace fp8lab::python {
namespace {

// N_C as Python users write it (128 or "never") in the CLI's spelling ("128", "never").
std::string promotion_text(py::handle promotion) {
  if (py::isinstance<py::str>(promotion)) return promotion.cast<std::string>();
  if (py::isinstance<py::int_>(promotion) && !py::isinstance<py::bool_>(promotion))
    return std::to_string(promotion.cast<long long>());
  throw py::type_error("promotion must be an int (N_C, elements of K) or 'never', got " +
                       std::string(py::str(py::type::of(promotion).attr("__name__"))));
}

// The CLI's default ("128") as Python users write it (128).
py::object promotion_default(const std::string& text) {
  const bool number = !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
  return number ? py::object(py::int_(std::stoll(text))) : py::object(py::str(text));
}

py::dict errors_dict(const GemmErrors& errors) {
  py::dict d;
  d["quantization"] = metrics_dict(errors.quantization.metrics);
  d["accumulation"] = metrics_dict(errors.accumulation.metrics);
  d["total"] = metrics_dict(errors.total.metrics);
  return d;
}

py::object gemm(const py::object& a, const py::object& b, const std::string& a_granularity, const std::string& b_granularity,
                const std::string& format, const std::string& scale, const std::string& accum, const py::object& promotion,
                const std::string& output, int threads, const std::string& backend, bool ignore_memory_limit,
                bool errors) {
  const GemmJob job(GemmRequest{a_granularity, b_granularity, format, scale, accum, promotion_text(promotion), output,
                                threads, backend, ignore_memory_limit});
  const FlatArray<float> av = float32_matrix(a, "a"), bv = float32_matrix(b, "b");
  GemmResult result;
  {
    py::gil_scoped_release unlocked;
    result = job.run({av.values, av.shape[0], av.shape[1], "a"}, {bv.values, bv.shape[0], bv.shape[1], "b"}, {}, {},
                     errors);
  }
  py::array_t<float> c = adopt(std::move(result.out), {av.shape[0], bv.shape[0]});
  if (!errors) return c;
  return py::make_tuple(c, errors_dict(*result.errors));
}

}  // namespace

void add_gemm_bindings(py::module_& m) {
  const GemmRequest d;
  m.def("gemm", &gemm, py::arg("a"), py::arg("b"), py::kw_only(), py::arg("a_granularity") = d.a_granularity,
        py::arg("b_granularity") = d.b_granularity, py::arg("format") = d.format, py::arg("scale") = d.scale,
        py::arg("accum") = d.accum, py::arg("promotion") = promotion_default(d.promotion),
        py::arg("output") = d.output, py::arg("threads") = d.threads, py::arg("backend") = d.backend,
        py::arg("ignore_memory_limit") = d.ignore_memory_limit, py::arg("errors") = false,
        "C = A B^T (A: M x K activations, B: N x K weights as nn.Linear stores them), both quantized to FP8 and "
        "multiplied by the emulation of the FP8 tensor-core GEMM; float32 M x N (with output='bf16' the values "
        "are rounded to BF16, RNE, and held in float32). accum: 'hopper' (= bits:13,depth:32,round:rz) | "
        "'hopper,zero:min' | 'fp32' | 'bits:F,depth:D,round:rz|rne[,zero:none|min]'; promotion: N_C (a multiple "
        "of 32 that divides the scale tile along K) or 'never'. With errors=True returns (C, errors): the "
        "quantization, accumulation and total error metrics of `fp8lab gemm` (dicts). The same bits as "
        "`fp8lab gemm --a A --b B --out C` with the same options.");
}

}  // namespace fp8lab::python
