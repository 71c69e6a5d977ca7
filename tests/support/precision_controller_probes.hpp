#pragma once
// Synthetic probe tallies for the adaptive precision controller's tests
// (tests/unit/precision_controller*_test.cpp): a tally with signal 1 and noise 10^(-s/10) has
// SQNR s dB; one with signal 1 and noise r^2 has gradient noise ratio r. Also the SQNR band
// configuration they start from and the stories260K preset's linear layers.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/train/precision_controller.hpp"

namespace fp8lab::test {

inline train::OperandTally operand_with_sqnr(double db) { return {1.0, std::pow(10.0, -db / 10), 1, 0, 0}; }
inline train::OperandTally operand_with_ratio(double r) { return {1.0, r * r, 1, 0, 0}; }

// Every GEMM of `layers` measured at `db` for both operands.
inline std::vector<train::GemmOperandTally> probe(const std::vector<std::string>& layers, double db) {
  std::vector<train::GemmOperandTally> out;
  for (const std::string& l : layers)
    for (train::GemmKind k : train::kGemmKinds) out.push_back({l, k, operand_with_sqnr(db), operand_with_sqnr(db)});
  return out;
}

// `probe` with one GEMM's operands replaced.
inline std::vector<train::GemmOperandTally> probe_with(const std::vector<std::string>& layers, double db,
                                                       const std::string& layer, train::GemmKind kind, train::OperandTally a,
                                                       train::OperandTally b) {
  std::vector<train::GemmOperandTally> out = probe(layers, db);
  for (train::GemmOperandTally& t : out)
    if (t.layer == layer && t.kind == kind) t.a = a, t.b = b;
  return out;
}

inline std::vector<train::GemmOperandTally> probe_one(const std::vector<std::string>& layers, double db,
                                                      const std::string& layer, train::GemmKind kind, double one_db) {
  return probe_with(layers, db, layer, kind, operand_with_sqnr(one_db), operand_with_sqnr(one_db));
}

inline train::PrecisionControllerConfig sqnr_band(double low, double high, int patience, std::int64_t every = 1) {
  train::PrecisionControllerConfig c;
  c.every = every;
  c.statistic = train::PrecisionControllerConfig::Statistic::sqnr;
  c.band_low = low;
  c.band_high = high;
  c.patience = patience;
  return c;
}

// Function-local, so that the presets of another translation unit exist when they are read.
inline const train::ModelConfig& stories260k() {
  static const train::ModelConfig model = train::model_preset("stories260K");  // dim 64, hidden 172, 5 layers, kv_dim 32, vocab 512
  return model;
}
inline const std::vector<std::string>& stories260k_layers() {
  static const std::vector<std::string> layers = train::linear_layer_names(stories260k());
  return layers;
}

}  // namespace fp8lab::test
