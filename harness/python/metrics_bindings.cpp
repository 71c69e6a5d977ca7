// fp8lab.error_metrics: harness/metrics/error_metrics.hpp on NumPy arrays, as a dict.
#include <pybind11/stl.h>

#include <optional>
#include <stdexcept>

#include "harness/metrics/error_metrics_json.hpp"
#include "harness/python/array_conversion.hpp"
#include "harness/python/bindings.hpp"
#include "harness/python/metrics_dict.hpp"
#include "harness/requests/quantize_request.hpp"

namespace fp8lab::python {

py::dict metrics_dict(const ErrorMetrics& m) {
  const nlohmann::json fields = to_json(m);
  py::dict d;
  for (const auto& field : fields.items()) {
    const nlohmann::json& value = field.value();
    if (value.is_number_integer())
      d[py::str(field.key())] = py::int_(value.get<std::uint64_t>());
    else
      d[py::str(field.key())] = py::float_(value.get<double>());
  }
  return d;
}

namespace {

// float64 is read in place; every other dtype goes through float32_values.
struct MetricInput {
  std::optional<FlatArray<double>> f64;
  std::optional<FlatArray<float>> f32;
  const std::vector<std::int64_t>& shape() const { return f64 ? f64->shape : f32->shape; }
  std::vector<double> as_double() const {
    return f64 ? std::vector<double>(f64->values.begin(), f64->values.end())
               : std::vector<double>(f32->values.begin(), f32->values.end());  // exact
  }
};

MetricInput metric_input(py::handle x, const std::string& label) {
  MetricInput in;
  in.f64 = float64_values(x, label);
  if (!in.f64) in.f32 = float32_values(x, label);
  return in;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s;
  for (std::int64_t n : shape) s += (s.empty() ? "" : "x") + std::to_string(n);
  return "(" + s + ")";
}

py::dict error_metrics_of(const py::object& y, const py::object& r, std::optional<double> rel_floor) {
  const MetricInput yi = metric_input(y, "y"), ri = metric_input(r, "r");
  if (yi.shape() != ri.shape())
    throw std::invalid_argument("y has shape " + shape_text(yi.shape()) + " and r " + shape_text(ri.shape()) +
                                ": the metrics compare element by element");
  ErrorMetrics m;
  {
    py::gil_scoped_release unlocked;
    if (ri.f64) {
      const std::span<const double> rv = ri.f64->values;
      const double floor = rel_floor.value_or(default_rel_floor(rv));
      m = yi.f32 ? error_metrics(yi.f32->values, rv, floor) : error_metrics(yi.f64->values, rv, floor);
    } else if (yi.f32) {
      const std::span<const float> rv = ri.f32->values;
      m = error_metrics(yi.f32->values, rv, rel_floor.value_or(default_rel_floor(rv)));
    } else {  // float64 y against a float32 reference: the reference widened (exactly)
      const std::vector<double> rv = ri.as_double();
      m = error_metrics(yi.f64->values, std::span<const double>(rv), rel_floor.value_or(default_rel_floor(std::span<const double>(rv))));
    }
  }
  return metrics_dict(m);
}

}  // namespace

void add_metrics_bindings(py::module_& m) {
  m.def("error_metrics", &error_metrics_of, py::arg("y"), py::arg("r"), py::kw_only(),
        py::arg("rel_floor") = py::none(),
        "Error metrics of y (under test) against r (reference), same shape, compared element by element in C "
        "order, sums in FP64 (harness/metrics/error_metrics.hpp): rel_frobenius, sqnr_db, deepgemm_diff, "
        "one_minus_cosine, max_abs, max_rel (over |r| > rel_floor; default 1% of r's RMS, as `fp8lab quantize`), "
        "rel_floor, rel_count, count. float32 and float64 are read in place.");
}

}  // namespace fp8lab::python
