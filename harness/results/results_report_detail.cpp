// Text and JSON of numbers, lists of names, and every point's position along the axes: shared by
// the report table and compare.
#include "harness/results/results_report_detail.hpp"

#include <cmath>
#include <cstdio>

namespace fp8lab::results_detail {

std::string format_number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

// A JSON number, or null for NaN / inf (JSON has neither).
nlohmann::json json_number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

std::string join(const std::vector<std::string>& names, const char* separator) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : separator) + n;
  return s;
}

// Position of every point along every axis (last axis fastest), computed once.
std::vector<std::vector<std::size_t>> positions(const ResultsFile& r) {
  const std::vector<GridAxis>& axes = r.axes();
  std::vector<std::vector<std::size_t>> at(static_cast<std::size_t>(r.points()), std::vector<std::size_t>(axes.size()));
  for (std::size_t p = 0; p < at.size(); ++p) {
    std::size_t rest = p;
    for (std::size_t a = axes.size(); a-- > 0;) {
      at[p][a] = rest % axes[a].values.size();
      rest /= axes[a].values.size();
    }
  }
  return at;
}

}  // namespace fp8lab::results_detail
