// fp8lab.quantize / fp8lab.dequantize and the Quantized result (codes + scales).
#include <pybind11/stl.h>

#include <optional>

#include "harness/python/array_conversion.hpp"
#include "harness/python/bindings.hpp"
#include "harness/requests/quantize_request.hpp"
#include "kernels/cpu/quantize.hpp"

namespace fp8lab::python {
namespace {

QuantizedTensor quantize(const py::object& x, const std::string& granularity, const std::string& format,
                         const std::string& scale, const std::string& backend, const std::string& rounding,
                         const py::object& seed) {
  const Granularity g = Granularity::parse(granularity);  // first, as the CLI parses --granularity first
  const QuantizeJob job(QuantizeRequest{format, scale, backend, rounding, seed_of(seed, "--seed")});
  const FlatArray<float> values = float32_matrix(x, "x");
  py::gil_scoped_release unlocked;
  return job.quantize(values.values, values.shape[0], values.shape[1], g);
}

py::array_t<float> dequantize(const QuantizedTensor& q) {
  std::vector<float> values;
  {
    py::gil_scoped_release unlocked;
    values = cpu::dequantize(q);
  }
  return adopt(std::move(values), {q.rows, q.cols});
}

// codes and scales are views into the Quantized object (kept alive by them), not copies.
template <class T>
py::array_t<T> view(py::object self, std::vector<T>& storage, std::int64_t rows, std::int64_t cols) {
  return py::array_t<T>(std::vector<py::ssize_t>{rows, cols}, storage.data(), self);
}

}  // namespace

void add_quantize_bindings(py::module_& m) {
  const QuantizeRequest defaults;
  py::class_<QuantizedTensor>(m, "Quantized",
                              "FP8 codes and one float32 scale per tile, as fp8lab.quantize returns them; x is "
                              "approximately decode(codes) * scale of the element's tile")
      .def_property_readonly(
          "codes", [](py::object self) {
            auto& q = self.cast<QuantizedTensor&>();
            return view(self, q.codes, q.rows, q.cols);
          },
          "uint8 rows x cols FP8 bit patterns (a view into this object), as `fp8lab quantize --codes` writes them")
      .def_property_readonly(
          "scales", [](py::object self) {
            auto& q = self.cast<QuantizedTensor&>();
            return view(self, q.scales, q.scale_rows, q.scale_cols);
          },
          "float32 scale grid, ceil(rows / tile_rows) x ceil(cols / tile_cols), row-major (a view into this "
          "object), as `fp8lab quantize --scales` writes it")
      .def_property_readonly("shape", [](const QuantizedTensor& q) { return py::make_tuple(q.rows, q.cols); })
      .def_property_readonly("tile_shape",
                             [](const QuantizedTensor& q) { return py::make_tuple(q.tile_rows, q.tile_cols); })
      .def_property_readonly("format", [](const QuantizedTensor& q) { return format_name(q.config.format); })
      .def_property_readonly("granularity",
                             [](const QuantizedTensor& q) { return q.config.granularity.to_string(); })
      .def_property_readonly("scale_rule",
                             [](const QuantizedTensor& q) { return scale_rule_name(q.config.scale_rule); })
      .def_property_readonly("rounding",
                             [](const QuantizedTensor& q) { return rounding_mode_name(q.config.rounding.mode); })
      .def_property_readonly(
          "seed", [](const QuantizedTensor& q) { return q.config.rounding.seed; },
          "the seed of stochastic rounding (0 under nearest)")
      .def_property_readonly(
          "tensor_scale", [](const QuantizedTensor& q) { return q.tensor_scale.decode; },
          "the per-tensor decode factor of the two-level nvfp4 rules (1.0 otherwise): x ~ decode(code) * "
          "(scale * tensor_scale), as `fp8lab quantize --global-scale` writes it")
      .def("dequantize", &dequantize, "float32 fl32(decode(code) * scale), as `fp8lab quantize --dequant` writes it")
      .def("__repr__", [](const QuantizedTensor& q) {
        return "<fp8lab.Quantized " + std::to_string(q.rows) + "x" + std::to_string(q.cols) + " " +
               format_name(q.config.format) + " " + q.config.granularity.to_string() + " scale " +
               scale_rule_name(q.config.scale_rule) + ", " + std::to_string(q.scale_rows) + "x" +
               std::to_string(q.scale_cols) + " scales>";
      });

  m.def("quantize", &quantize, py::arg("x"), py::arg("granularity"), py::kw_only(),
        py::arg("format") = defaults.format, py::arg("scale") = defaults.scale,
        py::arg("backend") = defaults.backend, py::arg("rounding") = defaults.rounding, py::arg("seed") = py::none(),
        "Quantize a 2-D tensor x (rows = tokens or output channels, columns along K) to FP8 with one scale per "
        "tile: granularity 'tensor' | 'row' | 'tile:1xT' (T along K) | 'block:BxB', T and B powers of two from "
        "16 to 512; format 'e4m3' | 'e5m2' | 'e2m1' | 'e3m2' | 'e2m3' (FP4/FP6 codes one per uint8); scale "
        "'fp32' (amax / fmt_max) | 'pow2' | 'deepgemm' | 'te' | 'te-pow2' | 'div' | 'mx' | 'mx:ceil' | 'mx:even' | "
        "'mx:rceil' | 'nvfp4' | 'nvfp4:torchao' | 'nvfp4:4over6' (each a library's own scale arithmetic); rounding 'nearest' | "
        "'stochastic' with seed (an int, 0 to 2^64 - 1; only with 'stochastic'). The same as `fp8lab quantize X "
        "--granularity G --format F --scale S --rounding R --seed N --codes ... --scales ...`.");
  m.def("dequantize", &dequantize, py::arg("q"),
        "float32 fl32(decode(code) * scale) of a Quantized, as `fp8lab quantize --dequant` writes it");
}

}  // namespace fp8lab::python
