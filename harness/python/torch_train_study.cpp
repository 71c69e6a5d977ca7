// The study kind "torch_train": training runs of a PyTorch model under fp8lab.torch recipes
// (experiments/torch_llama_train.py), written by the study runner exactly as the train kind's
// runs are (harness/study/train_study.cpp): axes recipe x seed, the train kind's columns along
// `step` (harness/study/train_run_columns.hpp), status and reason, provenance, --resume, progress.
// Each point is evaluated by a Python function, evaluate(recipe, seed) -> {column: value}; columns
// it leaves out keep their fill value (NaN, INT64_MIN, ""), as the engine-only ones do (its
// ledger's bytes, FP8 operand statistics).
//
// Spec: [study] kind = "torch_train"; [axes] recipe, seed; [torch] steps (the step dimension),
// layers (the model's, for the per-layer columns), settings (the script's arguments, recorded as
// the root attribute torch_settings).
#include <pybind11/stl.h>

#include <cmath>
#include <limits>

#include "harness/python/bindings.hpp"
#include "harness/recipes/recipe_catalog.hpp"
#include "harness/study/integer_axis_value.hpp"
#include "harness/study/runner.hpp"
#include "harness/study/study_kind.hpp"
#include "harness/study/train_run_columns.hpp"

namespace fp8lab::python {
namespace py = pybind11;
namespace {

// The evaluate function of the run in progress (one at a time: the GIL is held throughout).
py::function* current_evaluate = nullptr;

double number(const py::handle& v) { return v.is_none() ? std::numeric_limits<double>::quiet_NaN() : v.cast<double>(); }

class TorchTrainStudy final : public StudyKind {
 public:
  std::string name() const override { return "torch_train"; }

  std::vector<AxisDef> axes() const override {
    return {{"recipe", {"fp32"}, "precision recipe of every GEMM (fp8lab.torch, harness/recipes/recipe_catalog.hpp)"},
            {"seed", {"1"}, "seed of the initialisation and of the data order", AxisStorage::integer}};
  }

  void validate_value(const std::string& axis, const std::string& v) const override {
    if (axis == "recipe") recipe_file(v, {});
    if (axis == "seed" && parse_integer_axis_value("seed", v) < 0) throw std::invalid_argument("seed " + v + " is negative");
  }

  void configure(const StudySpec& spec) override {
    steps_ = spec.get_int("torch.steps", 0);
    layers_ = static_cast<int>(spec.get_int("torch.layers", 1));
    settings_ = spec.get_string("torch.settings", "");
    if (steps_ < 1) throw spec.error("torch.steps", "must be >= 1");
    if (layers_ < 1) throw spec.error("torch.layers", "must be >= 1");
  }

  void check_grid(const StudySpec&, const std::vector<Point>&) const override {}
  std::optional<std::string> skip_reason(const Point&, const Backend&) const override { return std::nullopt; }
  std::vector<ColumnDef> result_columns() const override { return train_run_columns(steps_, layers_); }

  Row evaluate(const Point& point, const RunContext&) override {
    if (!current_evaluate) throw std::logic_error("torch_train: no evaluate function (run through fp8lab.torch)");
    const py::dict got = (*current_evaluate)(point.at("recipe"), std::stoll(point.at("seed")));
    Row row;
    for (const ColumnDef& c : result_columns()) {
      const py::str key(c.name);
      const bool given = got.contains(key);
      if (c.extra) {
        std::vector<double> series(c.extra->size(), std::numeric_limits<double>::quiet_NaN());
        if (given) {
          const py::sequence values = got[key];
          if (values.size() > series.size())
            throw std::invalid_argument("torch_train: column " + c.name + " has " + std::to_string(values.size()) +
                                        " values, the run " + std::to_string(series.size()) + " steps");
          for (std::size_t i = 0; i < values.size(); ++i) series[i] = number(values[i]);
        }
        row[c.name] = series;
      } else if (c.type == ColumnDef::Type::f64) {
        row[c.name] = given ? number(got[key]) : std::numeric_limits<double>::quiet_NaN();
      } else if (c.type == ColumnDef::Type::i64) {
        row[c.name] = given ? got[key].cast<std::int64_t>() : kMissingInteger;
      } else {
        row[c.name] = given ? got[key].cast<std::string>() : std::string();
      }
    }
    return row;
  }

  Row skipped_row(const Point&) const override { return {}; }
  std::string operand_description() const override { return "PyTorch training runs under fp8lab.torch recipes"; }
  std::map<std::string, std::string> settings_attributes() const override { return {{"torch_settings", settings_}}; }

 private:
  std::int64_t steps_ = 0;
  int layers_ = 1;
  std::string settings_;
};

}  // namespace

void add_torch_train_binding(py::module_& m) {
  register_study_kind("torch_train", [] { return std::make_unique<TorchTrainStudy>(); });
  m.def(
      "_run_torch_train_study",
      [](const std::string& spec_text, const std::string& label, const std::string& out, py::function evaluate, bool resume,
         bool quiet) {
        RunOptions options;
        options.spec = label;
        options.spec_text = spec_text;
        options.out = out;
        options.backend = "cpu";
        options.resume = resume;
        options.quiet = quiet;
        current_evaluate = &evaluate;
        try {
          const RunSummary summary = run_study_summary(options);
          current_evaluate = nullptr;
          return summary.file.string();
        } catch (...) {
          current_evaluate = nullptr;
          throw;
        }
      },
      py::arg("spec_text"), py::arg("label"), py::arg("out"), py::arg("evaluate"), py::arg("resume") = false,
      py::arg("quiet") = false,
      "Runs a torch_train study spec through the study runner, each point by evaluate(recipe, seed) -> {column: "
      "value}; returns the results file");
}

}  // namespace fp8lab::python
