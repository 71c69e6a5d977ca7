#pragma once
// ErrorMetrics as a Python dict with the field names of every --json report (to_json).
#include <pybind11/pybind11.h>

#include "harness/metrics/error_metrics.hpp"

namespace fp8lab::python {

pybind11::dict metrics_dict(const ErrorMetrics& m);

}  // namespace fp8lab::python
