// fp8lab report: a results file summarized as a header and one row per group of points (mean,
// min and max over the axes it averages over), as a table or JSON.
#include "harness/results/results_report.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "harness/results/results_file.hpp"
#include "harness/results/results_report_detail.hpp"

namespace fp8lab {
using namespace results_detail;
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

// The metrics a report summarizes: the relative errors and the total SQNR of a GEMM study;
// for other kinds, their first scalar f64 columns that are not timings or intervals.
std::vector<std::string> report_metrics(const ResultsFile& r) {
  std::vector<std::string> metrics, fallback;
  for (const ColumnDef& c : r.columns()) {
    if (c.type != ColumnDef::Type::f64 || c.extra) continue;
    if (c.name.ends_with("_rel_frobenius") || c.name == "total_sqnr_db") metrics.push_back(c.name);
    else if (c.name != "elapsed_seconds" && c.name != "seconds" && c.name != "reference_rms" &&
             !c.name.ends_with("_ci_low") && !c.name.ends_with("_ci_high") && fallback.size() < 6)
      fallback.push_back(c.name);
  }
  return metrics.empty() ? fallback : metrics;
}

struct ReportData {
  std::string header;
  nlohmann::json json;
  std::vector<std::pair<std::string, std::vector<std::string>>> cells;
  std::size_t rows = 0;
};

ReportData build_report(const std::filesystem::path& file, std::vector<std::string> group_by) {
  const ResultsFile r = ResultsFile::open(file, false);
  const std::vector<GridAxis>& axes = r.axes();
  const std::vector<std::string> status = r.read_str("status");
  std::map<std::string, std::size_t> counts;
  for (const std::string& s : status) ++counts[s.empty() ? "not run" : s];
  const bool complete = r.root_attribute("complete") == "true";
  ReportData d;
  std::string study = r.root_attribute("study_name");
  const std::string git = r.root_attribute("git_sha").substr(0, 12);
  d.header = file.string() + ": study " + study + ", " + std::to_string(r.points()) + " points (" +
             std::to_string(counts["ok"]) + " ok, " + std::to_string(counts["skipped"]) + " skipped, " +
             std::to_string(counts["failed"]) + " failed" +
             (counts["not run"] ? ", " + std::to_string(counts["not run"]) + " not run" : std::string()) + "), kind " +
             r.root_attribute("study_kind") + ", backend " + r.root_attribute("backend") + ", git " + git +
             (r.root_attribute("git_dirty") == "true" ? " (dirty)" : "") + "\n";
  if (!complete) {
    const std::string shard = r.root_attribute("shard");
    d.header += "INCOMPLETE: " + std::to_string(counts["not run"]) + " of " + std::to_string(r.points()) +
                " points not run" + (shard.empty() || shard == "0/1" ? "" : " (a shard, " + shard + ": fp8lab merge joins the shards)") +
                "; fp8lab run " + r.root_attribute("spec_file") + " -o " + file.string() + " --resume" +
                (shard.empty() || shard == "0/1" ? "" : " --shard " + shard) + " completes it\n";
  }
  const std::vector<std::string> operands = r.has_column("operands") ? r.read_str("operands") : std::vector<std::string>{};
  std::set<std::string> distinct_operands;
  for (const std::string& o : operands)
    if (!o.empty()) distinct_operands.insert(o);
  if (distinct_operands.size() == 1) d.header += "operands: " + *distinct_operands.begin() + "\n";
  else if (distinct_operands.size() > 1)
    d.header += "operands: " + std::to_string(distinct_operands.size()) + " sources, per point in `operands`\n";

  std::vector<std::string> varying, fixed;
  for (const GridAxis& a : axes) {
    if (a.values.size() > 1) varying.push_back(a.name);
    else fixed.push_back(a.name + "=" + a.values.front());
  }
  const bool default_grouping = group_by.empty();
  if (default_grouping) group_by = varying;
  std::vector<std::size_t> group_axes;
  for (const std::string& g : group_by) {
    std::size_t found = axes.size();
    for (std::size_t a = 0; a < axes.size(); ++a)
      if (axes[a].name == g) found = a;
    if (found == axes.size()) {
      std::vector<std::string> names;
      for (const GridAxis& a : axes) names.push_back(a.name);
      throw std::invalid_argument("report --by: no axis '" + g + "' in " + file.string() + " (axes: " + join(names) + ")");
    }
    group_axes.push_back(found);
  }
  std::vector<std::string> averaged;
  for (std::size_t a = 0; a < axes.size(); ++a)
    if (axes[a].values.size() > 1 && std::find(group_axes.begin(), group_axes.end(), a) == group_axes.end())
      averaged.push_back(axes[a].name + " (" + std::to_string(axes[a].values.size()) + " values)");
  if (!fixed.empty()) d.header += "fixed: " + join(fixed, " ") + "\n";
  if (!averaged.empty())
    d.header += "grouped by " + (group_by.empty() ? std::string("nothing") : join(group_by)) + "; AVERAGED OVER " +
                join(averaged) + " (statistics over the points that ran)\n";

  // Groups in grid order of the group axes.
  const std::vector<std::string> metrics = report_metrics(r);
  std::map<std::string, std::vector<double>> values;
  for (const std::string& m : metrics) values[m] = r.read_f64(m);
  const std::vector<std::vector<std::size_t>> at = positions(r);
  struct Group {
    std::vector<std::size_t> members;  // points that ran ok
    std::map<std::string, std::size_t> counts;
  };
  std::map<std::vector<std::size_t>, Group> groups;
  for (std::size_t p = 0; p < at.size(); ++p) {
    std::vector<std::size_t> key;
    for (std::size_t a : group_axes) key.push_back(at[p][a]);
    Group& g = groups[key];
    ++g.counts[status[p].empty() ? "not run" : status[p]];
    if (status[p] == "ok") g.members.push_back(p);
  }
  const bool one_point_each = averaged.empty();
  for (const std::string& g : group_by) d.cells.emplace_back(g, std::vector<std::string>{});
  if (one_point_each) d.cells.emplace_back("status", std::vector<std::string>{});
  else
    for (const char* s : {"ok", "skipped", "failed", "not run"})
      if (counts[s]) d.cells.emplace_back(s, std::vector<std::string>{});
  const std::size_t stats_at = d.cells.size();
  for (const std::string& m : metrics) {
    if (one_point_each) d.cells.emplace_back(m, std::vector<std::string>{});
    else
      for (const char* stat : {" mean", " min", " max"}) d.cells.emplace_back(m + stat, std::vector<std::string>{});
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [key, g] : groups) {
    std::size_t c = 0;
    nlohmann::json row = {{"group", nlohmann::json::object()}, {"counts", g.counts}, {"metrics", nlohmann::json::object()}};
    for (std::size_t i = 0; i < key.size(); ++i) {
      d.cells[c++].second.push_back(axes[group_axes[i]].values[key[i]]);
      row["group"][group_by[i]] = axes[group_axes[i]].values[key[i]];
    }
    if (one_point_each) d.cells[c++].second.push_back(g.counts.begin()->first);
    else
      for (const char* s : {"ok", "skipped", "failed", "not run"})
        if (counts[s]) d.cells[c++].second.push_back(std::to_string(g.counts.contains(s) ? g.counts.at(s) : 0));
    c = stats_at;
    for (const std::string& m : metrics) {
      double sum = 0, lo = std::numeric_limits<double>::infinity(), hi = -lo;
      for (std::size_t p : g.members) {
        const double x = values[m][p];
        sum += x;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
      const bool none = g.members.empty();
      const double mean = none ? std::numeric_limits<double>::quiet_NaN() : sum / static_cast<double>(g.members.size());
      if (one_point_each) {
        d.cells[c++].second.push_back(none ? "-" : format_number(mean));
        row["metrics"][m] = json_number(mean);
      } else {
        d.cells[c++].second.push_back(none ? "-" : format_number(mean));
        d.cells[c++].second.push_back(none ? "-" : format_number(lo));
        d.cells[c++].second.push_back(none ? "-" : format_number(hi));
        row["metrics"][m] = {{"mean", json_number(mean)}, {"min", json_number(none ? NAN : lo)}, {"max", json_number(none ? NAN : hi)}};
      }
    }
    rows.push_back(row);
  }
  d.rows = groups.size();
  std::vector<std::string> averaged_names;
  for (std::size_t a = 0; a < axes.size(); ++a)
    if (axes[a].values.size() > 1 && std::find(group_axes.begin(), group_axes.end(), a) == group_axes.end())
      averaged_names.push_back(axes[a].name);
  d.json = {{"file", file.string()},
            {"study", study},
            {"kind", r.root_attribute("study_kind")},
            {"points", r.points()},
            {"counts", counts},
            {"complete", complete},
            {"backend", r.root_attribute("backend")},
            {"git_sha", r.root_attribute("git_sha")},
            {"git_dirty", r.root_attribute("git_dirty") == "true"},
            {"operands", std::vector<std::string>(distinct_operands.begin(), distinct_operands.end())},
            {"grouped_by", group_by},
            {"averaged_over", averaged_names},
            {"metrics", metrics},
            {"rows", rows}};
  return d;
}

}  // namespace

std::string report_table(const std::filesystem::path& file, std::vector<std::string> group_by, std::size_t max_rows) {
  const ReportData d = build_report(file, std::move(group_by));
  if (max_rows > 0 && d.rows > max_rows)
    return d.header + "(" + std::to_string(d.rows) + " rows: fp8lab report " + file.string() +
           " prints them, --by AXIS,... summarizes)\n";
  return d.header + format_columns(d.cells, d.rows);
}

std::string report_json(const std::filesystem::path& file, std::vector<std::string> group_by) {
  return build_report(file, std::move(group_by)).json.dump(2);
}

}  // namespace fp8lab
