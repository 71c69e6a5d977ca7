#pragma once
// Internal to results_report.hpp's implementation: the number and list text, JSON numbers and
// point positions that the report table (results_summary.cpp) and compare (results_report.cpp)
// share.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/results/results_file.hpp"

namespace fp8lab::results_detail {

std::string format_number(double v);
nlohmann::json json_number(double v);
std::string join(const std::vector<std::string>& names, const char* separator = ", ");
std::vector<std::vector<std::size_t>> positions(const ResultsFile& r);

}  // namespace fp8lab::results_detail
