#pragma once
// ErrorMetrics as JSON, one spelling of the field names for every --json report.
#include <nlohmann/json.hpp>

#include "harness/metrics/error_metrics.hpp"

namespace fp8lab {

inline nlohmann::json to_json(const ErrorMetrics& m) {
  return {{"rel_frobenius", m.rel_frobenius},
          {"sqnr_db", m.sqnr_db},
          {"deepgemm_diff", m.deepgemm_diff},
          {"max_abs", m.max_abs},
          {"max_rel", m.max_rel},
          {"rel_floor", m.rel_floor},
          {"rel_count", m.rel_count},
          {"one_minus_cosine", m.one_minus_cosine},
          {"count", m.count}};
}

}  // namespace fp8lab
