#include "harness/study/train_operand_columns.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace fp8lab {
namespace {

// What operand A / B of a GEMM kind is (kernels/train/precision_recipe.hpp).
std::string operand_name(train::GemmKind kind, char operand) {
  using train::GemmKind;
  if (kind == GemmKind::fprop) return operand == 'a' ? "operand A = X" : "operand B = W";
  if (kind == GemmKind::dgrad) return operand == 'a' ? "operand A = dY" : "operand B = W^T";
  return operand == 'a' ? "operand A = dY^T" : "operand B = X^T";
}

// The worse of two SQNRs; a NaN (a layer whose operand was not finite) wins, so it shows.
double worse(double so_far, double next, bool first) {
  if (first) return next;
  if (std::isnan(so_far) || std::isnan(next)) return std::numeric_limits<double>::quiet_NaN();
  return std::min(so_far, next);
}

// linear_layer_names reads only the block count.
train::ModelConfig layers_only(int layers) {
  train::ModelConfig c;
  c.layers = layers;
  return c;
}

}  // namespace

std::vector<ColumnDef> operand_stats_columns(const ExtraDimension& step, int model_layers) {
  std::vector<ColumnDef> columns;
  ExtraDimension layer{"linear_layer", "linear layer", "1", {}, linear_layer_names(layers_only(model_layers))};
  for (const train::GemmKind kind : train::kGemmKinds) {
    const std::string k = train::gemm_kind_name(kind);
    for (const char operand : {'a', 'b'}) {
      const std::string what = operand_name(kind, operand);
      columns.push_back({"sqnr_" + k + "_" + operand, ColumnDef::Type::f64, "dB",
                         "worst layer's SQNR of the FP8 " + what + " of " + k + " GEMMs", step});
      columns.push_back({"final_sqnr_" + k + "_" + operand, ColumnDef::Type::f64, "dB",
                         "SQNR of the FP8 " + what + " of each layer's " + k + " GEMM at the last sampled step", layer});
    }
    columns.push_back({"saturated_" + k, ColumnDef::Type::f64, "1",
                       "fraction of the FP8 operand elements of " + k + " GEMMs that satfinite clipped", step});
    columns.push_back({"flushed_" + k, ColumnDef::Type::f64, "1",
                       "fraction of the FP8 operand elements of " + k + " GEMMs quantized to zero from non-zero", step});
  }
  return columns;
}

void add_operand_stats(const std::vector<train::StepRecord>& steps, int model_layers, Row& row) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<std::string> names = linear_layer_names(layers_only(model_layers));
  const train::StepRecord* last_sampled = nullptr;
  for (const train::StepRecord& s : steps)
    if (!s.operand_stats.empty()) last_sampled = &s;
  for (const train::GemmKind kind : train::kGemmKinds) {
    const std::string k = train::gemm_kind_name(kind);
    std::vector<double> worst_a, worst_b, saturated, flushed;
    for (const train::StepRecord& s : steps) {
      double wa = nan, wb = nan;
      bool first = true;
      train::OperandTally all;
      for (const train::GemmOperandTally& t : s.operand_stats) {
        if (t.kind != kind) continue;
        wa = worse(wa, t.a.sqnr_db(), first);
        wb = worse(wb, t.b.sqnr_db(), first);
        first = false;
        all.add(t.a);
        all.add(t.b);
      }
      worst_a.push_back(wa);
      worst_b.push_back(wb);
      const double n = static_cast<double>(all.elements);
      saturated.push_back(all.elements > 0 ? static_cast<double>(all.saturated) / n : nan);
      flushed.push_back(all.elements > 0 ? static_cast<double>(all.flushed) / n : nan);
    }
    row["sqnr_" + k + "_a"] = std::move(worst_a);
    row["sqnr_" + k + "_b"] = std::move(worst_b);
    row["saturated_" + k] = std::move(saturated);
    row["flushed_" + k] = std::move(flushed);
    std::vector<double> final_a(names.size(), nan), final_b(names.size(), nan);
    if (last_sampled)
      for (const train::GemmOperandTally& t : last_sampled->operand_stats) {
        if (t.kind != kind) continue;
        const auto i = static_cast<std::size_t>(std::find(names.begin(), names.end(), t.layer) - names.begin());
        if (i == names.size()) throw std::logic_error("not a linear layer: " + t.layer);
        final_a[i] = t.a.sqnr_db();
        final_b[i] = t.b.sqnr_db();
      }
    row["final_sqnr_" + k + "_a"] = std::move(final_a);
    row["final_sqnr_" + k + "_b"] = std::move(final_b);
  }
}

}  // namespace fp8lab
