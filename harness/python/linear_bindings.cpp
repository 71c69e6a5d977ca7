// What fp8lab.torch runs in C++: recipes resolved by the same reader as `fp8lab train --recipe`
// (harness/recipes/recipe_catalog.hpp), and a linear layer's three GEMMs
// (kernels/train/linear_layer.hpp) on memory torch owns, passed as addresses with their shapes:
// no copy in or out. The Python side (fp8lab/torch/_ops.py) checks dtype, contiguity and device
// before it passes an address; these functions trust them and release the GIL while computing.
#include <omp.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>

#include "harness/python/bindings.hpp"
#include "harness/recipes/recipe_catalog.hpp"
#include "harness/recipes/recipe_toml.hpp"
#include "kernels/train/linear_layer.hpp"

namespace fp8lab::python {
namespace py = pybind11;
namespace {

using train::GemmKind;
using train::LinearLayer;
using train::PrecisionRecipe;

template <class T>
T* at(std::uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

// The thread count of one call: torch's (or fp8lab.torch's) setting, on the calling thread
// (autograd runs backward on its own threads), restored after.
class Threads {
 public:
  explicit Threads(int n) : saved_(omp_get_max_threads()) {
    if (n < 1) throw std::invalid_argument("threads must be >= 1, got " + std::to_string(n));
    omp_set_num_threads(n);
  }
  ~Threads() { omp_set_num_threads(saved_); }
  Threads(const Threads&) = delete;
  Threads& operator=(const Threads&) = delete;

 private:
  int saved_;
};

// A module's layers: overrides that name none of them are left to fp8lab.torch, which warns.
train::RecipeLayers module_layers(const std::vector<std::string>& names) {
  return {"the module", names, "its torch.nn.Linear modules' qualified names; '*' matches any characters", false};
}

py::dict granularity_dict(const Granularity& g) {
  py::dict d;
  d["text"] = g.to_string();
  d["kind"] = g.kind == Granularity::Kind::tensor ? "tensor"
              : g.kind == Granularity::Kind::row  ? "row"
              : g.kind == Granularity::Kind::tile ? "tile"
                                                  : "block";
  d["size"] = g.size;
  return d;
}

// One GEMM's precision as data: its kind, and for fp8 the keywords fp8lab.gemm takes for it
// (format, b_format, granularities, scale, accum, promotion, rht, roundings) and what fp8lab.gemm
// cannot be told (requantize_transposed, delayed_scaling).
py::dict gemm_options(const train::GemmPrecision& p) {
  py::dict d;
  d["kind"] = train::gemm_precision_kind_name(p.kind);
  if (p.kind != train::GemmPrecision::Kind::fp8) return d;
  d["format"] = format_name(p.a_format);
  d["b_format"] = format_name(p.b_format);
  d["a_granularity"] = p.a_granularity.to_string();
  d["b_granularity"] = p.b_granularity.to_string();
  d["scale"] = scale_rule_name(p.scale_rule);
  d["accum"] = p.gemm.accumulation.to_string();
  d["promotion"] = p.gemm.promotion.to_string();
  d["rht"] = p.rht;
  d["a_rounding"] = p.a_rounding == RoundingMode::stochastic ? "stochastic" : "nearest";
  d["b_rounding"] = p.b_rounding == RoundingMode::stochastic ? "stochastic" : "nearest";
  d["requantize_transposed"] = p.requantize_transposed;
  d["delayed_scaling"] = p.delayed_scaling;
  return d;
}

GemmKind gemm_kind(const std::string& kind) {
  for (GemmKind k : train::kGemmKinds)
    if (kind == train::gemm_kind_name(k)) return k;
  throw std::invalid_argument("GEMM '" + kind + "' is not one of fprop, dgrad, wgrad");
}

// X as Fprop quantized it, rebuilt from the tensors fp8lab.torch kept: codes (m x k bytes), the
// scale grid and the per-tensor level (decode, encode, amax).
QuantizedTensor kept_x(const LinearLayer& layer, std::uintptr_t codes, std::uintptr_t scales, std::uintptr_t tensor_level,
                       std::int64_t m, std::int64_t k) {
  QuantizedTensor q = make_quantized_tensor(m, k, layer.x_fp8_config());
  std::memcpy(q.codes.data(), at<const std::uint8_t>(codes), q.codes.size());
  std::memcpy(q.scales.data(), at<const float>(scales), q.scales.size() * sizeof(float));
  const float* level = at<const float>(tensor_level);
  q.tensor_scale = {level[1], level[0]};
  q.tensor_amax = level[2];
  return q;
}

py::dict operand_dict(const train::OperandTally& t, const train::OperandRange& r) {
  py::dict d;
  d["elements"] = t.elements;
  d["signal"] = t.signal;
  d["noise"] = t.noise;
  d["sqnr_db"] = t.sqnr_db();
  d["saturated"] = t.saturated;
  d["flushed"] = t.flushed;
  d["amax"] = r.amax;
  d["scale_min"] = t.elements > 0 ? r.scale_min : std::numeric_limits<double>::quiet_NaN();
  d["scale_max"] = t.elements > 0 ? r.scale_max : std::numeric_limits<double>::quiet_NaN();
  return d;
}

// What a recorded GEMM's quantization did to its operands: {"a": ..., "b": ...}, or None when not
// asked or when the GEMM quantizes nothing (its precision is not fp8).
py::object record_object(const train::GemmRecord* record) {
  if (!record || record->tally.a.elements == 0) return py::none();
  py::dict d;
  d["a"] = operand_dict(record->tally.a, record->ranges.a);
  d["b"] = operand_dict(record->tally.b, record->ranges.b);
  return d;
}

void add_layer_class(py::module_& module) {
  py::class_<LinearLayer, std::shared_ptr<LinearLayer>>(module, "_LinearLayer",
                                                        "One linear layer's three GEMMs under a recipe (fp8lab.torch)")
      .def_property_readonly("layer", &LinearLayer::layer)
      .def_property_readonly("recipe", &LinearLayer::recipe)
      .def("set_recording", &LinearLayer::set_recording, py::arg("recording"),
           "Whether the next GEMMs record into the delayed-scaling history (False for passes that do not train)")
      .def_property_readonly("fp64", &LinearLayer::fp64)
      .def_property_readonly(
          "wgrad_rht",
          [](const LinearLayer& l) {
            const train::GemmPrecision& p = l.precision(GemmKind::wgrad);
            return p.kind == train::GemmPrecision::Kind::fp8 && p.rht;
          },
          "Wgrad runs the 16x16 Hadamard transform along the tokens (they must be a multiple of 16)")
      .def_property_readonly(
          "delayed_scaling",
          [](const LinearLayer& l) {
            bool any = false;
            for (GemmKind k : train::kGemmKinds)
              any = any || (l.precision(k).kind == train::GemmPrecision::Kind::fp8 && l.precision(k).delayed_scaling);
            return any;
          },
          "A GEMM of the layer scales by delayed scaling: the layer keeps amax histories (state)")
      .def_property_readonly("keeps_x_fp8", &LinearLayer::keeps_x_fp8,
                             "Wgrad re-quantizes X's Fprop quantization: backward keeps its FP8 codes and scales")
      .def_property_readonly("x_granularity", [](const LinearLayer& l) { return granularity_dict(l.x_fp8_config().granularity); })
      .def(
          "describe", [](const LinearLayer& l, const std::string& kind) { return l.precision(gemm_kind(kind)).describe(); },
          py::arg("gemm"), "What the GEMM computes, in one line")
      .def(
          "options", [](const LinearLayer& l, const std::string& kind) { return gemm_options(l.precision(gemm_kind(kind))); },
          py::arg("gemm"), "The GEMM's precision as data (fp8: fp8lab.gemm's keywords for it)")
      .def(
          "fprop",
          [](LinearLayer& l, std::uintptr_t x, std::int64_t m, std::int64_t k, std::uintptr_t w, std::int64_t n,
             std::uintptr_t bias, std::uintptr_t y, bool f64, std::uintptr_t codes, std::uintptr_t scales,
             std::uintptr_t tensor_level, int threads, bool record) {
            train::GemmRecord measured;
            train::GemmRecord* wanted = record ? &measured : nullptr;
            {
              py::gil_scoped_release unlocked;
              const Threads team(threads);
              if (f64) {
                l.fprop(at<const double>(x), m, k, at<const double>(w), n, at<const double>(bias), at<double>(y), nullptr,
                        wanted);
              } else {
                QuantizedTensor q;
                l.fprop(at<const float>(x), m, k, at<const float>(w), n, at<const float>(bias), at<float>(y),
                        l.keeps_x_fp8() ? &q : nullptr, wanted);
                if (!q.codes.empty()) {  // X kept in FP8 (and it has elements)
                  std::memcpy(at<std::uint8_t>(codes), q.codes.data(), q.codes.size());
                  std::memcpy(at<float>(scales), q.scales.data(), q.scales.size() * sizeof(float));
                  float* level = at<float>(tensor_level);
                  level[0] = q.tensor_scale.decode;
                  level[1] = q.tensor_scale.encode;
                  level[2] = q.tensor_amax;
                }
              }
            }
            return record_object(wanted);
          },
          py::arg("x"), py::arg("m"), py::arg("k"), py::arg("w"), py::arg("n"), py::arg("bias"), py::arg("y"), py::arg("f64"),
          py::arg("codes"), py::arg("scales"), py::arg("tensor_level"), py::arg("threads"), py::arg("record") = false)
      .def(
          "dgrad",
          [](LinearLayer& l, std::uintptr_t dy, std::int64_t m, std::int64_t n, std::uintptr_t w, std::int64_t k,
             std::uintptr_t dx, bool f64, int threads, bool record) {
            train::GemmRecord measured;
            train::GemmRecord* wanted = record ? &measured : nullptr;
            {
              py::gil_scoped_release unlocked;
              const Threads team(threads);
              if (f64) l.dgrad(at<const double>(dy), m, n, at<const double>(w), k, at<double>(dx), wanted);
              else l.dgrad(at<const float>(dy), m, n, at<const float>(w), k, at<float>(dx), wanted);
            }
            return record_object(wanted);
          },
          py::arg("dy"), py::arg("m"), py::arg("n"), py::arg("w"), py::arg("k"), py::arg("dx"), py::arg("f64"), py::arg("threads"),
          py::arg("record") = false)
      .def(
          "wgrad",
          [](LinearLayer& l, std::uintptr_t dy, std::int64_t m, std::int64_t n, std::uintptr_t x, std::int64_t k,
             std::uintptr_t dw, bool f64, int threads, bool record) {
            train::GemmRecord measured;
            train::GemmRecord* wanted = record ? &measured : nullptr;
            {
              py::gil_scoped_release unlocked;
              const Threads team(threads);
              if (f64) l.wgrad(at<const double>(dy), m, n, at<const double>(x), k, at<double>(dw), wanted);
              else l.wgrad(at<const float>(dy), m, n, at<const float>(x), k, at<float>(dw), wanted);
            }
            return record_object(wanted);
          },
          py::arg("dy"), py::arg("m"), py::arg("n"), py::arg("x"), py::arg("k"), py::arg("dw"), py::arg("f64"), py::arg("threads"),
          py::arg("record") = false)
      .def(
          "wgrad_from_fp8",
          [](LinearLayer& l, std::uintptr_t dy, std::int64_t m, std::int64_t n, std::uintptr_t codes, std::uintptr_t scales,
             std::uintptr_t tensor_level, std::int64_t k, std::uintptr_t dw, int threads, bool record, std::uintptr_t x_source) {
            train::GemmRecord measured;
            train::GemmRecord* wanted = record ? &measured : nullptr;
            {
              py::gil_scoped_release unlocked;
              const Threads team(threads);
              if (m == 0 || n == 0 || k == 0)
                std::fill_n(at<float>(dw), n * k, 0.0f);
              else
                l.wgrad(at<const float>(dy), m, n, kept_x(l, codes, scales, tensor_level, m, k), at<float>(dw), wanted,
                        at<const float>(x_source));
            }
            return record_object(wanted);
          },
          py::arg("dy"), py::arg("m"), py::arg("n"), py::arg("codes"), py::arg("scales"), py::arg("tensor_level"), py::arg("k"),
          py::arg("dw"), py::arg("threads"), py::arg("record") = false, py::arg("x_source") = 0);
}

}  // namespace

void add_linear_bindings(py::module_& m) {
  py::class_<PrecisionRecipe, std::shared_ptr<PrecisionRecipe>>(m, "_Recipe", "A precision recipe, resolved and checked")
      .def_readonly("name", &PrecisionRecipe::name)
      .def_readonly("description", &PrecisionRecipe::description)
      .def_property_readonly("fp64", &PrecisionRecipe::fp64)
      .def_property_readonly("override_layers",
                             [](const PrecisionRecipe& r) {
                               std::vector<std::string> layers;
                               for (const train::LayerOverride& o : r.overrides) layers.push_back(o.layer);
                               return layers;
                             })
      .def(
          "layer", [](const PrecisionRecipe& r, const std::string& name) { return std::make_shared<LinearLayer>(r, name); },
          py::arg("name"), "The three GEMMs of the layer of that (module) name, overrides resolved");
  add_layer_class(m);
  m.def(
      "_bias_grad",
      [](std::uintptr_t dy, std::int64_t rows, std::int64_t cols, std::uintptr_t db, bool f64) {
        py::gil_scoped_release unlocked;
        if (f64) return LinearLayer::bias_grad(at<const double>(dy), rows, cols, at<double>(db));
        LinearLayer::bias_grad(at<const float>(dy), rows, cols, at<float>(db));
      },
      py::arg("dy"), py::arg("m"), py::arg("n"), py::arg("db"), py::arg("f64"),
      "db = column sums of dY (m x n), in FP64 in order of rows, rounded once");
  m.def(
      "_resolve_recipe",
      [](const std::string& text, const std::string& base, const std::vector<std::string>& layers) {
        return std::make_shared<PrecisionRecipe>(resolve_recipe(text, base, module_layers(layers)));
      },
      py::arg("text"), py::arg("base"), py::arg("layers"),
      "A recipe name or .toml file (relative to base), its overrides checked against the layer names");
  m.def(
      "_parse_recipe",
      [](const std::string& toml_text, const std::string& label, const std::vector<std::string>& layers) {
        return std::make_shared<PrecisionRecipe>(parse_recipe_toml(toml_text, label, module_layers(layers)));
      },
      py::arg("toml_text"), py::arg("label"), py::arg("layers"), "A recipe from TOML text (errors name `label`)");
  m.def(
      "_list_recipes",
      [] {
        py::list out;
        for (const RecipeListing& r : list_recipes()) out.append(py::make_tuple(r.name, r.description, r.file.string()));
        return out;
      },
      "(name, description, file or '') of every recipe a name can give");
  m.def("_override_matches", &train::override_matches, py::arg("pattern"), py::arg("layer"),
        "Whether a recipe override's layer pattern names the layer ('*': any characters)");
  m.def("_recipe_folder", [] { return recipe_folder().string(); });
  m.def("_set_recipe_folder", [](const std::string& folder) { set_recipe_folder(folder); }, py::arg("folder"));
}

}  // namespace fp8lab::python
