#include "harness/results/results_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>

#include "harness/results/results_file.hpp"

namespace fp8lab {
namespace {

// Columns that identify or describe a point rather than vary in a study.
bool bookkeeping(const std::string& name) {
  return name == "point_key" || name == "skip_reason" || name == "operand_source" || name == "grid_index" ||
         name == "gemm_fallback_reason";
}

bool higher_is_worse(const std::string& metric) {
  for (const char* suffix : {"_rel_frobenius", "_deepgemm_diff", "_max_abs", "_max_rel", "_one_minus_cosine"})
    if (metric.ends_with(suffix)) return true;
  return false;
}

bool lower_is_worse(const std::string& metric) { return metric.ends_with("_sqnr_db"); }

std::string format_number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

}  // namespace

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

std::string format_columns(const std::vector<std::pair<std::string, std::vector<std::string>>>& cells, std::size_t rows) {
  std::vector<std::size_t> width;
  for (const auto& [name, values] : cells) {
    std::size_t w = name.size();
    for (const std::string& v : values) w = std::max(w, v.size());
    width.push_back(w);
  }
  std::string out;
  for (std::size_t c = 0; c < cells.size(); ++c) {
    out += cells[c].first;
    out.append(width[c] - cells[c].first.size() + 2, ' ');
  }
  out += "\n";
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::string& v = cells[c].second[i];
      out += v;
      out.append(width[c] - v.size() + 2, ' ');
    }
    out += "\n";
  }
  return out;
}

}  // namespace

std::string report_table(const std::filesystem::path& file, std::vector<std::string> group_by) {
  const ResultsFile r = ResultsFile::open(file, false);
  std::string out = file.string() + ": study " + r.root_attribute("study") + ", " + std::to_string(r.rows()) +
                    " points, backend " + r.root_attribute("backend") + ", git " + r.root_attribute("git_sha").substr(0, 12) +
                    (r.root_attribute("git_dirty") == "true" ? " (dirty)" : "") + "\n";
  std::vector<std::string> varying, metrics;
  std::map<std::string, std::vector<std::string>> text;
  std::map<std::string, std::vector<double>> numbers;
  for (const ColumnDef& c : r.columns()) {
    if (bookkeeping(c.name)) continue;
    if (c.type == ColumnDef::Type::str) {
      text[c.name] = r.read_str(c.name);
      const std::vector<std::string>& v = text[c.name];
      if (std::set<std::string>(v.begin(), v.end()).size() > 1 || c.name == "status") varying.push_back(c.name);
    } else if (c.type == ColumnDef::Type::f64 && (c.name.ends_with("_rel_frobenius") || c.name == "total_sqnr_db")) {
      numbers[c.name] = r.read_f64(c.name);
      metrics.push_back(c.name);
    }
  }
  const auto rows = static_cast<std::size_t>(r.rows());
  if (group_by.empty() && r.rows() <= kFullReportRows) {
    std::vector<std::pair<std::string, std::vector<std::string>>> cells;
    for (const std::string& v : varying) cells.emplace_back(v, text[v]);
    for (const std::string& m : metrics) {
      std::vector<std::string> f;
      for (double x : numbers[m]) f.push_back(format_number(x));
      cells.emplace_back(m, f);
    }
    return out + format_columns(cells, rows);
  }
  if (group_by.empty())
    for (const std::string& v : varying)
      if (v != "status" && v != "layer" && v != "gemm" && v != "seed" && v != "distribution") group_by.push_back(v);
  for (const std::string& g : group_by)
    if (!text.contains(g)) throw std::invalid_argument("report --by: no axis '" + g + "' in " + file.string());
  // Groups in order of first appearance; statistics over the points that ran.
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> group_values;
  std::map<std::string, std::vector<std::size_t>> members;
  std::map<std::string, std::size_t> skipped;
  for (std::size_t i = 0; i < rows; ++i) {
    std::string key;
    std::vector<std::string> values;
    for (const std::string& g : group_by) {
      key += text[g][i] + "\x1f";
      values.push_back(text[g][i]);
    }
    if (!group_values.contains(key)) {
      order.push_back(key);
      group_values[key] = values;
    }
    if (text["status"][i] == "ok") members[key].push_back(i);
    else ++skipped[key];
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> cells;
  for (const std::string& g : group_by) cells.emplace_back(g, std::vector<std::string>{});
  cells.emplace_back("points", std::vector<std::string>{});
  cells.emplace_back("skipped", std::vector<std::string>{});
  const std::vector<std::string> summarized = {"total_rel_frobenius", "accumulation_rel_frobenius"};
  for (const std::string& m : summarized)
    if (numbers.contains(m))
      for (const char* stat : {"mean", "min", "max"}) cells.emplace_back(m.substr(0, m.find('_')) + "_" + stat, std::vector<std::string>{});
  for (const std::string& key : order) {
    const std::vector<std::size_t>& idx = members[key];
    std::size_t c = 0;
    for (const std::string& value : group_values[key]) cells[c++].second.push_back(value);
    cells[c++].second.push_back(std::to_string(idx.size()));
    cells[c++].second.push_back(std::to_string(skipped[key]));
    for (const std::string& m : summarized) {
      if (!numbers.contains(m)) continue;
      double sum = 0, lo = 0, hi = 0;
      for (std::size_t j = 0; j < idx.size(); ++j) {
        const double x = numbers[m][idx[j]];
        sum += x;
        lo = j ? std::min(lo, x) : x;
        hi = j ? std::max(hi, x) : x;
      }
      const bool none = idx.empty();
      cells[c++].second.push_back(none ? "-" : format_number(sum / static_cast<double>(idx.size())));
      cells[c++].second.push_back(none ? "-" : format_number(lo));
      cells[c++].second.push_back(none ? "-" : format_number(hi));
    }
  }
  return out + "grouped by " + [&] {
    std::string g;
    for (const std::string& x : group_by) g += (g.empty() ? "" : ", ") + x;
    return g;
  }() + " (statistics over the points that ran)\n" + format_columns(cells, order.size());
}

std::string Comparison::table() const {
  std::string out = "compared " + std::to_string(points) + " points x " + std::to_string(metrics) + " metrics: " +
                    std::to_string(worse.size()) + " worse\n";
  const auto join = [](const std::vector<std::string>& names) {
    std::string s;
    for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
  };
  if (!missing_columns.empty())
    out += "the baseline's columns " + join(missing_columns) +
           " are not in NEW (renamed or removed?): they cannot be compared; regenerate the baseline if the change is "
           "intended\n";
  if (!new_columns.empty())
    out += "NEW has columns the baseline lacks, not compared: " + join(new_columns) + "\n";
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
    std::snprintf(header, sizeof header, "%-28s %12s %12s %9s %10s  %s\n", "metric", "baseline", "new", "change", "floor",
                  "point");
    out += header;
    for (const std::string& line : worse) out += line + "\n";
  }
  return out;
}

Comparison compare_results(const std::filesystem::path& baseline, const std::filesystem::path& candidate, double rtol,
                           double floor_scale) {
  const ResultsFile base = ResultsFile::open(baseline, false), next = ResultsFile::open(candidate, false);
  const std::vector<std::string> base_keys = base.read_str("point_key"), next_keys = next.read_str("point_key");
  const std::vector<std::string> base_status = base.read_str("status"), next_status = next.read_str("status");
  std::map<std::string, std::size_t> next_index;
  for (std::size_t i = 0; i < next_keys.size(); ++i) next_index[next_keys[i]] = i;
  Comparison c;
  c.points = base_keys.size();
  c.rtol = rtol;
  c.floor_scale = floor_scale;
  const auto line = [](const std::string& metric, const std::string& b, const std::string& n, const std::string& change,
                       const std::string& key, const std::string& floor = "") {
    char text[1024];
    std::snprintf(text, sizeof text, "%-28s %12s %12s %9s %10s  %s", metric.c_str(), b.c_str(), n.c_str(), change.c_str(),
                  floor.c_str(), key.c_str());
    return std::string(text);
  };
  // A column of the baseline that NEW lacks (renamed or removed) cannot be checked: that fails
  // the comparison, with the column named, until the baseline is regenerated.
  std::set<std::string> next_columns;
  for (const ColumnDef& col : next.columns()) next_columns.insert(col.name);
  std::set<std::string> base_columns;
  std::vector<std::string> metric_names;
  for (const ColumnDef& col : base.columns()) {
    base_columns.insert(col.name);
    if (!next_columns.contains(col.name)) {
      c.missing_columns.push_back(col.name);
      c.worse.push_back(line("(column) " + col.name, "present", "missing", "", "all points"));
    } else if (col.type == ColumnDef::Type::f64 && (higher_is_worse(col.name) || lower_is_worse(col.name))) {
      metric_names.push_back(col.name);
    }
  }
  for (const ColumnDef& col : next.columns())
    if (!base_columns.contains(col.name)) c.new_columns.push_back(col.name);
  c.metrics = metric_names.size();
  // Per point: the noise eta of its FP64 references (from K) and the scale of max_abs's floor.
  std::vector<double> eta(base_keys.size(), 0.0), rms(base_keys.size(), std::numeric_limits<double>::quiet_NaN());
  c.floors_available = base_columns.contains("k");
  if (c.floors_available) {
    const std::vector<std::int64_t> k = base.read_i64("k");
    for (std::size_t i = 0; i < k.size(); ++i) eta[i] = reference_noise(k[i]);
  }
  if (base_columns.contains("reference_rms")) rms = base.read_f64("reference_rms");
  for (std::size_t i = 0; i < base_keys.size(); ++i) {
    const auto it = next_index.find(base_keys[i]);
    if (it == next_index.end()) c.worse.push_back(line("(point)", "present", "missing", "", base_keys[i]));
    else if (base_status[i] != next_status[it->second])
      c.worse.push_back(line("status", base_status[i], next_status[it->second], "", base_keys[i]));
  }
  for (const std::string& m : metric_names) {
    const std::vector<double> b = base.read_f64(m), n = next.read_f64(m);
    for (std::size_t i = 0; i < base_keys.size(); ++i) {
      const auto it = next_index.find(base_keys[i]);
      if (it == next_index.end() || base_status[i] != "ok") continue;
      const double old_value = b[i], new_value = n[it->second];
      if (std::isnan(old_value) && std::isnan(new_value)) continue;
      const double floor = c.floors_available ? floor_scale * noise_floor(m, old_value, eta[i], rms[i]) : 0.0;
      const double slack = std::max(rtol * std::fabs(old_value), floor);
      const bool worse = std::isnan(new_value) != std::isnan(old_value) ||
                         (higher_is_worse(m) && new_value > old_value + slack) ||
                         (lower_is_worse(m) && new_value < old_value - slack);
      if (!worse) {
        c.changed_within_tolerance += new_value != old_value;
        continue;
      }
      const std::string change = old_value != 0 ? format_number(100.0 * (new_value - old_value) / std::fabs(old_value)) + "%" : "";
      c.worse.push_back(line(m, format_number(old_value), format_number(new_value), change, base_keys[i], format_number(floor)));
    }
  }
  return c;
}

void merge_results(const std::filesystem::path& out, const std::vector<std::filesystem::path>& shards) {
  if (shards.empty()) throw std::invalid_argument("merge needs at least one shard");
  if (std::filesystem::exists(out)) throw std::invalid_argument(out.string() + ": exists; merge writes a new file");
  std::vector<ResultsFile> inputs;
  for (const auto& s : shards) inputs.push_back(ResultsFile::open(s, false));
  const std::string spec = inputs.front().root_attribute("spec_sha256");
  for (std::size_t i = 1; i < inputs.size(); ++i)
    if (inputs[i].root_attribute("spec_sha256") != spec)
      throw std::invalid_argument(shards[i].string() + ": comes from a different spec than " + shards[0].string());
  // Every row of every shard, ordered by grid index, first occurrence of a point kept.
  struct Source {
    std::size_t file;
    std::int64_t row, grid_index;
  };
  std::vector<Source> rows;
  for (std::size_t f = 0; f < inputs.size(); ++f) {
    const std::vector<std::int64_t> g = inputs[f].read_i64("grid_index");
    for (std::int64_t r = 0; r < inputs[f].rows(); ++r) rows.push_back({f, r, g[static_cast<std::size_t>(r)]});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Source& a, const Source& b) { return a.grid_index < b.grid_index; });
  std::map<std::string, std::string> attributes;
  for (const char* name : {"study", "study_kind", "description", "spec_file", "spec_toml", "spec_sha256",
                           "resolved_spec_json", "fp8lab_version", "git_sha", "git_dirty", "backend", "device", "host",
                           "hdf5_version", "compiler", "build_march", "cpu_isa", "operands", "utc_start", "utc_end"})
    attributes[name] = inputs.front().root_attribute(name);
  std::string hosts;
  for (const ResultsFile& in : inputs) hosts += (hosts.empty() ? "" : ",") + in.root_attribute("host");
  attributes["host"] = hosts;
  attributes["merged_from"] = std::to_string(shards.size()) + " shards";
  ResultsFile merged = ResultsFile::create(out, inputs.front().columns(), attributes);
  // Columns read once per file.
  std::vector<std::map<std::string, std::vector<Value>>> data(inputs.size());
  for (std::size_t f = 0; f < inputs.size(); ++f)
    for (const ColumnDef& c : inputs.front().columns()) {
      std::vector<Value>& v = data[f][c.name];
      if (c.type == ColumnDef::Type::f64) for (double x : inputs[f].read_f64(c.name)) v.emplace_back(x);
      else if (c.type == ColumnDef::Type::i64) for (std::int64_t x : inputs[f].read_i64(c.name)) v.emplace_back(x);
      else for (std::string& x : inputs[f].read_str(c.name)) v.emplace_back(std::move(x));
    }
  std::set<std::string> seen;
  for (const Source& s : rows) {
    const std::string key = std::get<std::string>(data[s.file]["point_key"][static_cast<std::size_t>(s.row)]);
    if (!seen.insert(key).second) continue;
    Row row;
    for (const ColumnDef& c : inputs.front().columns()) row[c.name] = data[s.file][c.name][static_cast<std::size_t>(s.row)];
    merged.append(row);
  }
}

}  // namespace fp8lab
