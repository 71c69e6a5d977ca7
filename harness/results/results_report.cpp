// fp8lab compare: the noise floors of the metrics (derived here), then a new results file
// compared point by point with a baseline of the same grid, as a regression table or JSON.
// (The report table is in results_summary.cpp, merge in results_merge.cpp.)
#include "harness/results/results_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "harness/results/results_file.hpp"
#include "harness/results/results_report_detail.hpp"

namespace fp8lab {
using namespace results_detail;

// Noise floors. Every metric of a point compares y (the backend's FP32 output, or for the
// quantization error the FP64 GEMM of the dequantized operands) with r, an FP64 GEMM, over
// outputs C = A B^T with reduction length K. Two valid FP64 evaluations of a GEMM (another
// summation order, FMA or not, another platform) differ per output by at most
// gamma_(K+1) (|A| |B|^T)_ij, gamma_m = m 2^-53 / (1 - m 2^-53) (K - 1 additions, and one
// rounding of a product of two dequantized values, 28 bits each). For operands of random
// signs (|A| |B|^T)_ij / RMS(C) ~ sqrt(K) E|a| E|b| / sqrt(E a^2 E b^2) <= sqrt(K), normwise
// too; allowing 2x for the largest output and 2x for y and r both moving:
//     eta = 4 sqrt(K) gamma_(K+1)   (K = 256: 1.8e-12; K = 7168: 2.7e-10)
// bounds ||dy||, ||dr|| <= eta ||r|| and |dy_i|, |dr_i| <= eta RMS(r). Then, v the baseline value:
//   rel_frobenius rho = ||e|| / ||r||: d rho <= ||de|| / ||r|| + rho ||dr|| / ||r|| -> eta (1 + v).
//   sqnr_db = -20 log10 rho: rho moving by eta (1 + rho) is 20 log10(1 + eta (1 + rho) / rho) dB,
//     rho = 10^(-v/20) (unbounded as rho -> 0: an SQNR at the noise level means nothing).
//   deepgemm_diff d = E / S, E = ||e||^2, S = ||y||^2 + ||r||^2 >= ||r||^2: dE / S <= (2 ||e|| ||de|| +
//     ||de||^2) / S <= 2 eta sqrt(d) + eta^2, dS / S <= 2 (||y|| + ||r||) eta ||r|| / S <= 3 eta, so
//     d d <= dE / S + d dS / S -> eta (2 sqrt(v) + 3 v + eta).
//   one_minus_cosine c = 0.5 ||y/||y|| - r/||r|| ||^2: a unit vector moves by at most 2 ||dx|| / ||x||,
//     so both by zeta <= 4 eta (taking ||y|| >= ||r|| / 2); dc <= sqrt(2c) zeta + zeta^2 / 2
//     -> 4 eta sqrt(2 v) + 8 eta^2.
//   max_abs: one output moves by at most 2 eta RMS(r) -> 2 eta reference_rms.
//   max_rel over |r_i| > 1% RMS(r): (|de_i| + v |dr_i|) / |r_i| -> 100 eta (1 + v). (An output
//     within eta of the 1% floor can also enter or leave the maximum: not covered.)
// The metrics' own FP64 evaluation adds (n + 3) 2^-53 relative (error_metrics.hpp), below rtol.
// Real regressions sit far above: an FP32 accumulation error is ~1e-7 relative, FP8 ~1e-2.
double reference_noise(std::int64_t k) {
  const double u = 0x1p-53, m = static_cast<double>(std::max<std::int64_t>(k, 1) + 1);
  return 4.0 * std::sqrt(static_cast<double>(std::max<std::int64_t>(k, 1))) * (m * u / (1.0 - m * u));
}

double noise_floor(const std::string& metric, double v, double eta, double reference_rms) {
  if (std::isnan(v)) return 0;
  if (metric.ends_with("_rel_frobenius")) return eta * (1 + v);
  if (metric.ends_with("_sqnr_db")) {
    const double rho = std::pow(10.0, -v / 20.0);
    return rho > 0 ? 20.0 * std::log10(1.0 + eta * (1.0 + rho) / rho) : std::numeric_limits<double>::infinity();
  }
  if (metric.ends_with("_deepgemm_diff")) return eta * (2.0 * std::sqrt(std::max(v, 0.0)) + 3.0 * std::fabs(v) + eta);
  if (metric.ends_with("_one_minus_cosine")) return 4.0 * eta * std::sqrt(2.0 * std::max(v, 0.0)) + 8.0 * eta * eta;
  if (metric.ends_with("_max_abs")) return std::isnan(reference_rms) ? 0.0 : 2.0 * eta * reference_rms;
  if (metric.ends_with("_max_rel")) return 100.0 * eta * (1.0 + v);
  return 0;
}

std::string noise_floor_rules() {
  return "eta = 4 sqrt(K) (K+1) 2^-53 per point (K: its reduction length), v: the baseline value\n"
         "  *_rel_frobenius     eta (1 + v)\n"
         "  *_sqnr_db           20 log10(1 + eta (1 + rho) / rho) dB, rho = 10^(-v/20)\n"
         "  *_deepgemm_diff     eta (2 sqrt(v) + 3 v + eta)\n"
         "  *_one_minus_cosine  4 eta sqrt(2 v) + 8 eta^2\n"
         "  *_max_abs           2 eta reference_rms\n"
         "  *_max_rel           100 eta (1 + v)   (max_rel's floor is 1% of reference_rms)\n";
}

namespace {

bool higher_is_worse(const std::string& metric) {
  for (const char* suffix : {"_rel_frobenius", "_deepgemm_diff", "_max_abs", "_max_rel", "_one_minus_cosine"})
    if (metric.ends_with(suffix)) return true;
  return false;
}

bool lower_is_worse(const std::string& metric) { return metric.ends_with("_sqnr_db"); }

// "axis=value ..." over the axes with more than one value (all of them when none varies).
std::string point_text(const ResultsFile& r, const std::vector<std::size_t>& at) {
  std::string s;
  bool any_varying = false;
  for (const GridAxis& a : r.axes()) any_varying = any_varying || a.values.size() > 1;
  for (std::size_t a = 0; a < r.axes().size(); ++a)
    if (!any_varying || r.axes()[a].values.size() > 1)
      s += (s.empty() ? "" : " ") + r.axes()[a].name + "=" + r.axes()[a].values[at[a]];
  return s;
}

nlohmann::json point_json(const ResultsFile& r, const std::vector<std::size_t>& at) {
  nlohmann::json j = nlohmann::json::object();
  for (std::size_t a = 0; a < r.axes().size(); ++a) j[r.axes()[a].name] = r.axes()[a].values[at[a]];
  return j;
}

// How a metric's change is stated: dB as a difference in dB, 1 - cosine as a difference of
// 1 - cosine (a percentage of a number near 0 or of an SQNR says nothing), errors relative.
std::string change_text(const std::string& metric, double old_value, double new_value) {
  char text[48];
  if (metric.ends_with("_sqnr_db")) std::snprintf(text, sizeof text, "%+.3g dB", new_value - old_value);
  else if (metric.ends_with("_one_minus_cosine")) std::snprintf(text, sizeof text, "%+.3g", new_value - old_value);
  else if (old_value != 0) std::snprintf(text, sizeof text, "%+.4g%%", 100.0 * (new_value - old_value) / std::fabs(old_value));
  else return "";
  return text;
}

std::string change_unit(const std::string& metric) {
  return metric.ends_with("_sqnr_db") ? "dB" : metric.ends_with("_one_minus_cosine") ? "1 - cosine" : "percent";
}

}  // namespace

std::string Comparison::table() const {
  std::string out = "compared " + std::to_string(points) + " points x " + std::to_string(metrics) + " metrics: " +
                    std::to_string(worse.size()) + " worse\n";
  if (!missing_columns.empty())
    out += "the baseline's columns " + join(missing_columns) +
           " are not in NEW (renamed or removed?): they cannot be compared; regenerate the baseline if the change is "
           "intended\n";
  if (!new_columns.empty()) out += "NEW has columns the baseline lacks, not compared: " + join(new_columns) + "\n";
  if (!new_points.empty()) {
    out += std::to_string(new_points.size()) + " points only in NEW, not compared:\n";
    for (const std::string& p : new_points) out += "  " + p + "\n";
  }
  char text[256];
  if (floors_available && floor_scale > 0)
    std::snprintf(text, sizeof text,
                  "worse: beyond max(rtol %.3g x |baseline|, %.3g x noise floor); %zu values changed within that\n", rtol,
                  floor_scale, changed_within_tolerance);
  else
    std::snprintf(text, sizeof text, "worse: beyond rtol %.3g x |baseline| (%s); %zu values changed within that\n", rtol,
                  floor_scale > 0 ? "no noise floors: the baseline has no column k" : "noise floors off",
                  changed_within_tolerance);
  out += text;
  if (!worse.empty()) {
    char header[256];
    std::snprintf(header, sizeof header, "%-28s %12s %12s %11s %10s  %s\n", "metric", "baseline", "new", "change", "floor",
                  "point");
    out += header;
    for (const std::string& line : worse) out += line + "\n";
  }
  return out;
}

std::string Comparison::json_text() const { return json.dump(2); }

Comparison compare_results(const std::filesystem::path& baseline, const std::filesystem::path& candidate, double rtol,
                           double floor_scale) {
  const ResultsFile base = ResultsFile::open(baseline, false), next = ResultsFile::open(candidate, false);
  // The same study kind over the same axes, and every baseline value present in NEW; else the
  // files do not describe the same grid, and one line says how.
  const std::string mismatch = "compare " + baseline.string() + " " + candidate.string() + ": ";
  if (base.root_attribute("study_kind") != next.root_attribute("study_kind"))
    throw std::invalid_argument(mismatch + "study kinds differ (" + base.root_attribute("study_kind") + " vs " +
                                next.root_attribute("study_kind") + ")");
  std::vector<std::string> base_axes, next_axes;
  for (const GridAxis& a : base.axes()) base_axes.push_back(a.name);
  for (const GridAxis& a : next.axes()) next_axes.push_back(a.name);
  if (base_axes != next_axes)
    throw std::invalid_argument(mismatch + "the grids have different axes (baseline: " + join(base_axes) +
                                "; NEW: " + join(next_axes) + ")");
  // value position in NEW of every baseline value, per axis
  std::vector<std::vector<std::size_t>> to_next(base.axes().size());
  for (std::size_t a = 0; a < base.axes().size(); ++a) {
    const std::vector<std::string>& bv = base.axes()[a].values;
    const std::vector<std::string>& nv = next.axes()[a].values;
    std::vector<std::string> absent;
    for (const std::string& v : bv) {
      const auto it = std::find(nv.begin(), nv.end(), v);
      if (it == nv.end()) absent.push_back(v);
      to_next[a].push_back(static_cast<std::size_t>(it - nv.begin()));
    }
    if (!absent.empty())
      throw std::invalid_argument(mismatch + "axis '" + base.axes()[a].name + "': the baseline's values " + join(absent) +
                                  " are not in NEW (the grids differ: run the baseline's spec, or regenerate the baseline)");
  }
  Comparison c;
  c.points = static_cast<std::size_t>(base.points());
  c.rtol = rtol;
  c.floor_scale = floor_scale;
  c.json = {{"baseline", baseline.string()}, {"new", candidate.string()}, {"rtol", rtol}, {"floor_scale", floor_scale},
            {"worse", nlohmann::json::array()}, {"new_points", nlohmann::json::array()}};
  const auto line = [](const std::string& metric, const std::string& b, const std::string& n, const std::string& change,
                       const std::string& key, const std::string& floor = "") {
    char text[1024];
    std::snprintf(text, sizeof text, "%-28s %12s %12s %11s %10s  %s", metric.c_str(), b.c_str(), n.c_str(), change.c_str(),
                  floor.c_str(), key.c_str());
    return std::string(text);
  };
  const auto add_worse = [&](const std::string& metric, const std::string& b, const std::string& n,
                             const std::string& change, const std::string& key, const nlohmann::json& detail) {
    c.worse.push_back(line(metric, b, n, change, key, detail.contains("floor") ? format_number(detail["floor"].get<double>()) : ""));
    nlohmann::json j = detail;
    j["metric"] = metric;
    c.json["worse"].push_back(j);
  };
  std::set<std::string> next_columns, base_columns;
  for (const ColumnDef& col : next.columns()) next_columns.insert(col.name);
  std::vector<ColumnDef> metric_columns;
  for (const ColumnDef& col : base.columns()) {
    base_columns.insert(col.name);
    if (!next_columns.contains(col.name)) {
      c.missing_columns.push_back(col.name);
      add_worse("(column) " + col.name, "present", "missing", "", "all points", {{"what", "column missing from NEW"}});
    } else if (col.type == ColumnDef::Type::f64 && (higher_is_worse(col.name) || lower_is_worse(col.name))) {
      metric_columns.push_back(col);
    }
  }
  for (const ColumnDef& col : next.columns())
    if (!base_columns.contains(col.name)) c.new_columns.push_back(col.name);
  c.metrics = metric_columns.size();

  const std::vector<std::vector<std::size_t>> base_at = positions(base), next_at = positions(next);
  std::vector<std::size_t> next_index(base_at.size());
  std::vector<bool> matched(next_at.size(), false);
  for (std::size_t p = 0; p < base_at.size(); ++p) {
    std::size_t i = 0;
    for (std::size_t a = 0; a < base.axes().size(); ++a) i = i * next.axes()[a].values.size() + to_next[a][base_at[p][a]];
    next_index[p] = i;
    matched[i] = true;
  }
  for (std::size_t i = 0; i < next_at.size(); ++i)
    if (!matched[i]) {
      c.new_points.push_back(point_text(next, next_at[i]));
      c.json["new_points"].push_back(point_json(next, next_at[i]));
    }
  // Per point: the noise eta of its FP64 references (from K) and the scale of max_abs's floor.
  std::vector<double> eta(base_at.size(), 0.0), rms(base_at.size(), std::numeric_limits<double>::quiet_NaN());
  c.floors_available = base_columns.contains("k");
  if (c.floors_available) {
    const std::vector<std::int64_t> k = base.read_i64("k");
    for (std::size_t i = 0; i < k.size(); ++i) eta[i] = reference_noise(k[i]);
  }
  if (base_columns.contains("reference_rms")) rms = base.read_f64("reference_rms");
  const std::vector<std::string> base_status = base.read_str("status"), next_status = next.read_str("status");
  for (std::size_t p = 0; p < base_at.size(); ++p) {
    const std::string& n = next_status[next_index[p]];
    if (base_status[p] != n)
      add_worse("status", base_status[p].empty() ? "(not run)" : base_status[p], n.empty() ? "(not run)" : n, "",
                point_text(base, base_at[p]),
                {{"point", point_json(base, base_at[p])}, {"baseline", base_status[p]}, {"new", n}});
  }
  for (const ColumnDef& col : metric_columns) {
    const std::string& m = col.name;
    const std::vector<double> b = base.read_f64(m), n = next.read_f64(m);
    const std::size_t width = col.extra ? col.extra->size() : 1;
    for (std::size_t p = 0; p < base_at.size(); ++p) {
      if (base_status[p] != "ok") continue;
      for (std::size_t e = 0; e < width; ++e) {
        const double old_value = b[p * width + e], new_value = n[next_index[p] * width + e];
        if (std::isnan(old_value) && std::isnan(new_value)) continue;
        const double floor = c.floors_available ? floor_scale * noise_floor(m, old_value, eta[p], rms[p]) : 0.0;
        const double slack = std::max(rtol * std::fabs(old_value), floor);
        const bool worse = std::isnan(new_value) != std::isnan(old_value) ||
                           (higher_is_worse(m) && new_value > old_value + slack) ||
                           (lower_is_worse(m) && new_value < old_value - slack);
        if (!worse) {
          c.changed_within_tolerance += new_value != old_value;
          continue;
        }
        std::string where = point_text(base, base_at[p]);
        nlohmann::json point = point_json(base, base_at[p]);
        if (col.extra) {
          const std::string label =
              col.extra->labels.empty() ? std::to_string(col.extra->numbers[e]) : col.extra->labels[e];
          where += " " + col.extra->name + "=" + label;
          point[col.extra->name] = label;
        }
        add_worse(m, format_number(old_value), format_number(new_value), change_text(m, old_value, new_value), where,
                  {{"point", point}, {"baseline", json_number(old_value)}, {"new", json_number(new_value)},
                   {"change", json_number(m.ends_with("_sqnr_db") || m.ends_with("_one_minus_cosine")
                                              ? new_value - old_value
                                              : 100.0 * (new_value - old_value) / std::fabs(old_value))},
                   {"change_unit", change_unit(m)}, {"floor", floor}});
      }
    }
  }
  c.json["points_compared"] = c.points;
  c.json["metrics_compared"] = c.metrics;
  c.json["changed_within_tolerance"] = c.changed_within_tolerance;
  c.json["missing_columns"] = c.missing_columns;
  c.json["new_columns"] = c.new_columns;
  c.json["regression"] = !c.worse.empty();
  return c;
}

}  // namespace fp8lab
