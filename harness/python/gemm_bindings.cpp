// fp8lab.gemm: C = A B^T through the emulated FP8 tensor-core GEMM, with the CLI's options.
#include <pybind11/stl.h>

#include <optional>

#include "harness/requests/gemm_request.hpp"
#include "kernels/hadamard_transform.hpp"
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

py::dict errors_dict(const GemmErrors& errors) {
  py::dict d;
  d["quantization"] = metrics_dict(errors.quantization.metrics);
  d["accumulation"] = metrics_dict(errors.accumulation.metrics);
  d["total"] = metrics_dict(errors.total.metrics);
  return d;
}

py::object gemm(const py::object& a, const py::object& b, const std::optional<std::string>& a_granularity,
                const std::optional<std::string>& b_granularity, const std::optional<std::string>& format,
                const std::optional<std::string>& b_format, const std::optional<std::string>& scale,
                const std::optional<std::string>& scheme, const std::optional<std::string>& accum,
                const py::object& promotion, const std::string& output, int threads, const std::string& backend,
                bool ignore_memory_limit, bool rht, const std::string& a_rounding, const std::string& b_rounding,
                const py::object& a_seed, const py::object& b_seed, bool errors) {
  GemmRequest request;
  if (scheme && (a_granularity || b_granularity || format || b_format || scale))
    throw std::invalid_argument("scheme= sets format, granularities and scale: pass none of them beside it");
  request.a_granularity = a_granularity.value_or(request.a_granularity);
  request.b_granularity = b_granularity.value_or(request.b_granularity);
  request.format = format.value_or(request.format);
  request.b_format = b_format.value_or("");
  request.scale = scale.value_or(request.scale);
  request.scheme = scheme.value_or("");
  request.accum = accum.value_or("");
  request.promotion = promotion.is_none() ? std::string() : promotion_text(promotion);
  request.output = output;
  request.threads = threads;
  request.backend = backend;
  request.ignore_memory_limit = ignore_memory_limit;
  request.rht = rht;
  request.a_rounding = a_rounding;
  request.b_rounding = b_rounding;
  request.a_seed = seed_of(a_seed, "--a-seed");
  request.b_seed = seed_of(b_seed, "--b-seed");
  const GemmJob job(request);
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

py::array_t<float> hadamard_transform(const py::object& x) {
  const FlatArray<float> v = float32_matrix(x, "x");
  if (v.shape[1] % kHadamardGroup != 0)
    throw std::invalid_argument("x has " + std::to_string(v.shape[1]) +
                                " columns, not a multiple of 16 (the Hadamard transform's group)");
  std::vector<float> y;
  {
    py::gil_scoped_release unlocked;
    y = random_hadamard_transform_16(v.values, v.shape[0], v.shape[1]);
  }
  return adopt(std::move(y), v.shape);
}

}  // namespace

void add_gemm_bindings(py::module_& m) {
  m.def("hadamard_transform", &hadamard_transform, py::arg("x"),
        "Transformer Engine's 16x16 Random Hadamard Transform along each row (groups of 16 columns), in FP32 in "
        "the documented order (kernels/hadamard_transform.hpp): what gemm(rht=True) applies to A and B first.");
  const GemmRequest d;
  m.def("gemm", &gemm, py::arg("a"), py::arg("b"), py::kw_only(), py::arg("a_granularity") = py::none(),
        py::arg("b_granularity") = py::none(), py::arg("format") = py::none(), py::arg("b_format") = py::none(),
        py::arg("scale") = py::none(), py::arg("scheme") = py::none(), py::arg("accum") = py::none(),
        py::arg("promotion") = py::none(), py::arg("output") = d.output, py::arg("threads") = d.threads,
        py::arg("backend") = d.backend, py::arg("ignore_memory_limit") = d.ignore_memory_limit,
        py::arg("rht") = d.rht, py::arg("a_rounding") = d.a_rounding, py::arg("b_rounding") = d.b_rounding,
        py::arg("a_seed") = py::none(), py::arg("b_seed") = py::none(), py::arg("errors") = false,
        "C = A B^T (A: M x K activations, B: N x K weights as nn.Linear stores them), both quantized to FP8 and "
        "multiplied by the emulation of the FP8 tensor-core GEMM; format is A's, and B's unless b_format names "
        "another (a mix such as format='e5m2', b_format='e4m3'); float32 M x N (with output='bf16' the values "
        "are rounded to BF16, RNE, and held in float32). accum: 'hopper' (= bits:13,depth:32,round:rz) | "
        "'hopper,zero:min' | 'fp32' | 'bits:F,depth:D,round:rz|rne[,zero:none|min]' | 'b200' (Blackwell's "
        "block-scaled MMA, promotion 'never'); scheme: 'deepseek' | 'mxfp8' | 'mxfp4' | 'nvfp4' in place of format, "
        "granularities and scale (accum then defaults to b200 but for deepseek). Defaults (None): a_granularity "
        "'tile:1x128', b_granularity 'block:128x128', format 'e4m3', scale 'fp32', accum 'hopper', promotion 128 "
        "(never under b200). promotion: N_C (a multiple "
        "of 32 that divides the scale tile along K) or 'never'. rht=True: Transformer Engine's 16x16 Random Hadamard "
        "Transform (fixed signs) on A and B along K before quantization (K a multiple of 16; errors stay against "
        "the untransformed A B^T). a_rounding / b_rounding: 'nearest' or 'stochastic' with a_seed / b_seed (an int, "
        "as fp8lab.quantize's seed=; a recipe's gradients round so, seeded by fp8lab.operand_rounding_seed). "
        "With errors=True returns (C, errors): the "
        "quantization, accumulation and total error metrics of `fp8lab gemm` (dicts). The same bits as "
        "`fp8lab gemm --a A --b B --out C` with the same options.");
}

}  // namespace fp8lab::python
