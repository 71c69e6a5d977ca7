// fp8lab merge: the shards of one sweep joined into one results file, after checking that they
// are the whole set (unless --allow-partial).
#include "harness/results/results_report.hpp"

#include <cstdio>
#include <map>
#include <stdexcept>

#include "harness/results/results_file.hpp"

namespace fp8lab {

MergeSummary merge_results(const std::filesystem::path& out, const std::vector<std::filesystem::path>& shards,
                           bool allow_partial) {
  if (shards.empty()) throw std::invalid_argument("merge needs at least one shard");
  if (std::filesystem::exists(out)) throw std::invalid_argument(out.string() + ": exists; merge writes a new file");
  std::vector<ResultsFile> inputs;
  for (const auto& s : shards) inputs.push_back(ResultsFile::open(s, false));
  const ResultsFile& first = inputs.front();
  const std::string spec = first.root_attribute("spec_sha256");
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    if (inputs[i].root_attribute("spec_sha256") != spec)
      throw std::invalid_argument(shards[i].string() + ": comes from a different spec than " + shards[0].string());
    if (inputs[i].points() != first.points())
      throw std::invalid_argument(shards[i].string() + ": its grid differs from " + shards[0].string());
  }
  // The set must be shards 0..N-1 of one N, each once, each with all its points; else say
  // what is wrong (unless --allow-partial: then whatever points the files hold).
  const auto parse_shard = [](const std::string& text, int& i, int& n) {
    return std::sscanf(text.c_str(), "%d/%d", &i, &n) == 2 && n >= 1 && i >= 0 && i < n;
  };
  std::map<int, std::size_t> seen;
  int count = 0;
  std::string problem;
  std::vector<std::vector<std::string>> status;
  for (std::size_t f = 0; f < inputs.size(); ++f) {
    status.push_back(inputs[f].read_str("status"));
    int i = 0, n = 0;
    if (!parse_shard(inputs[f].root_attribute("shard"), i, n)) {
      problem = shards[f].string() + ": has no valid shard attribute";
      continue;
    }
    if (count == 0) count = n;
    if (n != count && problem.empty())
      problem = shards[f].string() + ": is shard " + std::to_string(i) + "/" + std::to_string(n) + ", the others of " +
                std::to_string(count);
    if (seen.contains(i) && problem.empty())
      problem = shards[f].string() + ": shard " + std::to_string(i) + "/" + std::to_string(n) + " is also " +
                shards[seen[i]].string() + " (duplicated)";
    seen.emplace(i, f);
    std::int64_t missing = 0;
    for (std::size_t p = static_cast<std::size_t>(i); p < status[f].size(); p += static_cast<std::size_t>(n))
      missing += status[f][p].empty();
    if (missing > 0 && problem.empty())
      problem = shards[f].string() + ": shard " + std::to_string(i) + "/" + std::to_string(n) + " is incomplete (" +
                std::to_string(missing) + " of its points not run; fp8lab run ... --resume --shard " + std::to_string(i) +
                "/" + std::to_string(n) + " completes it)";
  }
  if (problem.empty())
    for (int i = 0; i < count; ++i)
      if (!seen.contains(i)) {
        problem = "shard " + std::to_string(i) + "/" + std::to_string(count) + " is missing";
        break;
      }
  if (!problem.empty() && !allow_partial)
    throw std::invalid_argument("merge: " + problem + " (--allow-partial merges what there is)");

  std::map<std::string, std::string> attributes;
  for (const char* name : {"Conventions", "title", "history", "source", "study_name", "study_kind", "description",
                           "spec_file", "spec_toml", "spec_sha256", "resolved_spec_json", "fp8lab_version", "git_sha",
                           "git_dirty", "backend", "device", "compiler", "compiler_flags", "build_march", "cpu_isa",
                           "eigen_version", "openmp_version", "hdf5_version", "operands", "utc_start", "utc_end"})
    attributes[name] = first.root_attribute(name);
  std::string hosts;
  for (const ResultsFile& in : inputs) hosts += (hosts.empty() ? "" : ",") + in.root_attribute("host");
  attributes["host"] = hosts;
  attributes["shard"] = "0/1";
  attributes["merged_from"] = std::to_string(shards.size()) + " shards";
  std::string shard_names;
  for (const auto& s : shards) shard_names += " " + s.string();
  attributes["history"] += "\nmerged:" + shard_names;
  // Each point from the first file that has it.
  MergeSummary summary;
  summary.problem = problem;
  summary.points_total = first.points();
  std::vector<std::int64_t> source(static_cast<std::size_t>(first.points()), -1);
  for (std::size_t p = 0; p < source.size(); ++p)
    for (std::size_t f = 0; f < inputs.size() && source[p] < 0; ++f)
      if (!status[f][p].empty()) source[p] = static_cast<std::int64_t>(f);
  for (std::int64_t s : source) summary.points_done += s >= 0;
  attributes["complete"] = summary.points_done == summary.points_total ? "true" : "false";
  ResultsFile merged = ResultsFile::create(out, first.axes(), first.columns(), attributes,
                                           {{"points_total", summary.points_total}, {"points_done", 0}});
  std::int64_t done = 0;
  for (std::size_t p = 0; p < source.size(); ++p)
    if (source[p] >= 0)
      merged.write_point(static_cast<std::int64_t>(p), inputs[static_cast<std::size_t>(source[p])].read_point(static_cast<std::int64_t>(p)),
                         {{"points_done", ++done}});
  return summary;
}

}  // namespace fp8lab
