#include "harness/results/results_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>

#include "harness/results/results_file.hpp"

namespace fp8lab {
namespace {

// Columns that identify or describe a point rather than vary in a study.
bool bookkeeping(const std::string& name) {
  return name == "point_key" || name == "skip_reason" || name == "operand_source" || name == "grid_index";
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
  if (!worse.empty()) {
    char header[256];
    std::snprintf(header, sizeof header, "%-28s %12s %12s %9s  %s\n", "metric", "baseline", "new", "change", "point");
    out += header;
    for (const std::string& line : worse) out += line + "\n";
  }
  return out;
}

Comparison compare_results(const std::filesystem::path& baseline, const std::filesystem::path& candidate, double rtol) {
  const ResultsFile base = ResultsFile::open(baseline, false), next = ResultsFile::open(candidate, false);
  const std::vector<std::string> base_keys = base.read_str("point_key"), next_keys = next.read_str("point_key");
  const std::vector<std::string> base_status = base.read_str("status"), next_status = next.read_str("status");
  std::map<std::string, std::size_t> next_index;
  for (std::size_t i = 0; i < next_keys.size(); ++i) next_index[next_keys[i]] = i;
  Comparison c;
  c.points = base_keys.size();
  const auto line = [](const std::string& metric, const std::string& b, const std::string& n, const std::string& change,
                       const std::string& key) {
    char text[1024];
    std::snprintf(text, sizeof text, "%-28s %12s %12s %9s  %s", metric.c_str(), b.c_str(), n.c_str(), change.c_str(),
                  key.c_str());
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
      const double slack = rtol * std::fabs(old_value);
      const bool worse = std::isnan(new_value) != std::isnan(old_value) ||
                         (higher_is_worse(m) && new_value > old_value + slack) ||
                         (lower_is_worse(m) && new_value < old_value - slack);
      if (!worse) continue;
      const std::string change = old_value != 0 ? format_number(100.0 * (new_value - old_value) / std::fabs(old_value)) + "%" : "";
      c.worse.push_back(line(m, format_number(old_value), format_number(new_value), change, base_keys[i]));
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
                           "hdf5_version", "operands", "utc_start", "utc_end"})
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
