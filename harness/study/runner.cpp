#include "harness/study/runner.hpp"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "kernels/cpu/cpu_isa.hpp"
#include "data/sha256.hpp"
#include "harness/backend_select.hpp"
#include "harness/interrupt.hpp"
#include "harness/memory_budget.hpp"
#include "harness/progress.hpp"
#include "harness/results/results_file.hpp"
#include "harness/study/grid.hpp"
#include "harness/study/input_hashes.hpp"

namespace fp8lab {
namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return text;
}

std::string command_output(const std::string& command) {
  std::string out;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    std::array<char, 256> chunk{};
    while (std::fgets(chunk.data(), chunk.size(), pipe)) out += chunk.data();
    ::pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::map<std::string, std::string> provenance(const StudySpec& spec, const StudyKind& kind, const Backend& backend,
                                              const std::vector<Point>& grid, const RunOptions& options) {
  const std::string source = FP8LAB_SOURCE_DIR;
  const std::string sha = command_output("git -C '" + source + "' rev-parse HEAD 2>/dev/null");
  const std::string dirty =
      command_output("test -z \"$(git -C '" + source + "' status --porcelain 2>/dev/null)\" && echo false || echo true");
  char host[256] = "unknown";
  ::gethostname(host, sizeof host - 1);
  nlohmann::json axes = nlohmann::json::object();
  for (const AxisDef& d : kind.axes()) {
    std::vector<std::string> values;
    for (const Point& p : grid)
      if (std::find(values.begin(), values.end(), p.at(d.name)) == values.end()) values.push_back(p.at(d.name));
    axes[d.name] = values;
  }
  const nlohmann::json resolved = {{"study", spec.name}, {"kind", spec.kind}, {"axes", axes}, {"points", grid.size()},
                                   {"shard", std::to_string(options.shard_index) + "/" + std::to_string(options.shard_count)}};
  return {{"study", spec.name},
          {"study_kind", spec.kind},
          {"description", spec.description},
          {"spec_file", spec.file.string()},
          {"spec_toml", spec.text},
          {"spec_sha256", sha256_hex(spec.text)},
          {"resolved_spec_json", resolved.dump()},
          {"fp8lab_version", "0.1.0"},
          {"git_sha", sha.empty() ? "unknown" : sha},
          {"git_dirty", sha.empty() ? "unknown" : dirty},
          {"backend", backend.name()},
          {"device", backend.device()},
          {"host", host},
          {"hdf5_version", hdf5_library_version()},
          {"compiler", "GCC-compatible " __VERSION__},
          {"build_march", cpu::compiled_baseline_isa()},
          {"cpu_isa", cpu::cpu_isa_name(cpu::active_cpu_isa())},
          {"operands", kind.operand_description()},
          {"utc_start", utc_now()},
          {"utc_end", ""}};
}

std::vector<ColumnDef> columns_for(const StudyKind& kind) {
  std::vector<ColumnDef> c = {{"grid_index", ColumnDef::Type::i64, "1", "index of the point in the full grid"},
                              {"point_key", ColumnDef::Type::str, "", "axis=value list identifying the point"},
                              {"status", ColumnDef::Type::str, "", "ok, skipped (invalid combination) or failed (no finite result)"},
                              {"skip_reason", ColumnDef::Type::str, "", "why the point was skipped or failed"}};
  for (const AxisDef& d : kind.axes()) c.push_back({d.name, ColumnDef::Type::str, "", d.long_name});
  for (const ColumnDef& r : kind.result_columns()) c.push_back(r);
  return c;
}

std::string short_description(const Point& p) {
  std::string s;
  for (const auto& [name, value] : p.values) s += (s.empty() ? "" : " ") + value;
  return s;
}

// The largest point of the grid must fit in the memory this machine has.
void require_grid_fits(const StudySpec& spec, const StudyKind& kind, const std::vector<Point>& grid, bool ignore) {
  const Point* largest = nullptr;
  MemoryEstimate most;
  for (const Point& p : grid) {
    const MemoryEstimate e = kind.memory_estimate(p);
    if (e.bytes > most.bytes) {
      most = e;
      largest = &p;
    }
  }
  if (!largest) return;
  try {
    require_memory(most.bytes, "point " + largest->key(), ignore);
  } catch (const std::invalid_argument& e) {
    throw spec.error(most.field, e.what());
  }
}

// A file whose parent "directory" is a regular file cannot be created: say so, naming both.
void create_parent_directories(const std::filesystem::path& out) {
  std::error_code error;
  std::filesystem::create_directories(out.parent_path(), error);
  if (error) throw std::invalid_argument(out.string() + ": cannot create directory " + out.parent_path().string() + ": " +
                                         error.message());
}

// --resume must not mix results computed from two versions of an input tensor file.
void require_same_inputs(const ResultsFile& existing, const std::filesystem::path& out, const StudyKind& kind,
                         const std::vector<Point>& grid) {
  bool has_sources = false;
  for (const ColumnDef& c : existing.columns()) has_sources = has_sources || c.name == "operand_source";
  if (!has_sources || existing.rows() == 0) return;
  std::vector<std::string> now;
  std::set<std::string> seen;
  for (const Point& p : grid) {
    const Row row = kind.skipped_row(p);
    const auto it = row.find("operand_source");
    if (it != row.end() && seen.insert(std::get<std::string>(it->second)).second) now.push_back(std::get<std::string>(it->second));
  }
  if (const auto changed = changed_input_file(input_file_hashes(existing.read_str("operand_source")), out.string(),
                                              input_file_hashes(now), "the file now"))
    throw std::invalid_argument(*changed + "; --resume would mix results from two versions of it (start a new results file)");
}

}  // namespace

void evaluate_points(const RunOptions& options, const std::vector<Point>& grid, StudyKind& kind, Backend& backend,
                     const std::set<std::string>& done, ResultsFile& results);

std::filesystem::path run_study(const RunOptions& options) {
  const StudySpec spec = load_study_spec(options.spec);
  std::unique_ptr<StudyKind> kind = make_study_kind(spec.kind);
  if (!kind) {
    std::string names;
    for (const std::string& n : study_kind_names()) names += (names.empty() ? "" : ", ") + n;
    throw spec.error("study.kind", "unknown study kind '" + spec.kind + "' (known: " + names + ")");
  }
  kind->configure(spec);
  spec.check_unknown_keys();
  const std::vector<Point> grid = expand_grid(spec, *kind);
  kind->check_grid(spec, grid);
  if (options.shard_count < 1 || options.shard_index < 0 || options.shard_index >= options.shard_count)
    throw std::invalid_argument("--shard " + std::to_string(options.shard_index) + "/" +
                                std::to_string(options.shard_count) + " is not I/N with 0 <= I < N");
  if (options.threads < 0 || options.threads > kMaxThreads)
    throw std::invalid_argument("--threads must be 0 (all cores) to " + std::to_string(kMaxThreads) + ", got " +
                                std::to_string(options.threads));
  require_grid_fits(spec, *kind, grid, options.ignore_memory_limit);
  const std::unique_ptr<Backend> backend = select_backend(options.backend, /*needs_gemm=*/true);

  std::filesystem::path out = options.out;
  if (out.empty()) {
    out = std::filesystem::path("results") / (spec.name + (options.shard_count > 1
                                                               ? ".shard-" + std::to_string(options.shard_index) + "-of-" +
                                                                     std::to_string(options.shard_count) + ".h5"
                                                               : ".h5"));
  }
  std::set<std::string> done;
  bool created = false;
  ResultsFile results = [&] {
    if (options.resume) {
      ResultsFile r = ResultsFile::open(out, /*writable=*/true);
      if (r.root_attribute("spec_sha256") != sha256_hex(spec.text))
        throw std::invalid_argument(out.string() + ": was written from a different spec than " + spec.file.string() +
                                    "; --resume needs the same spec");
      require_same_inputs(r, out, *kind, grid);
      for (const std::string& k : r.read_str("point_key")) done.insert(k);
      return r;
    }
    if (std::filesystem::exists(out))
      throw std::invalid_argument(out.string() + ": exists; use --resume to complete it, or remove it");
    if (out.has_parent_path()) create_parent_directories(out);
    created = true;
    return ResultsFile::create(out, columns_for(*kind), provenance(spec, *kind, *backend, grid, options));
  }();
  // SIGINT / SIGTERM stop at once (the file holds every finished point) and say how to go on.
  set_interrupt_note("; " + out.string() + " keeps every finished point: fp8lab run " + spec.file.string() + " -o " +
                     out.string() + " --resume completes it");
  try {
    evaluate_points(options, grid, *kind, *backend, done, results);
  } catch (...) {
    // A command that fails leaves no new file behind: a results file it created holding no
    // point is removed (one with points is kept: --resume completes it).
    if (created && results.rows() == 0) {
      results.close();
      std::error_code ignored;
      std::filesystem::remove(out, ignored);
    }
    throw;
  }
  set_interrupt_note("");
  return out;
}

void evaluate_points(const RunOptions& options, const std::vector<Point>& grid, StudyKind& kind, Backend& backend,
                     const std::set<std::string>& done, ResultsFile& results) {

  std::vector<std::int64_t> todo;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(grid.size()); ++i)
    if (i % options.shard_count == options.shard_index && !done.contains(grid[static_cast<std::size_t>(i)].key()))
      todo.push_back(i);
  Progress progress(static_cast<std::int64_t>(todo.size()), options.quiet);
  const RunContext context{options.threads, &backend};
  std::int64_t failed = 0;
  for (std::size_t t = 0; t < todo.size(); ++t) {
    const Point& point = grid[static_cast<std::size_t>(todo[t])];
    progress.begin_point(static_cast<std::int64_t>(t), short_description(point));
    const std::optional<std::string> skip = kind.skip_reason(point, backend);
    std::string status = skip ? "skipped" : "ok", reason = skip.value_or("");
    Row row;
    if (skip) {
      row = kind.skipped_row(point);
    } else {
      try {
        row = kind.evaluate(point, context);
      } catch (const PointFailure& e) {  // no number to record: say why instead
        row = kind.skipped_row(point);
        status = "failed";
        reason = e.what();
        ++failed;
      }
    }
    row["grid_index"] = todo[t];
    row["point_key"] = point.key();
    row["status"] = status;
    row["skip_reason"] = reason;
    for (const auto& [axis, value] : point.values) row[axis] = value;
    results.append(row);
  }
  progress.finish(static_cast<std::int64_t>(todo.size()));
  results.set_root_attribute("utc_end", utc_now());
  if (failed > 0)
    std::fprintf(stderr, "fp8lab: %lld of %zu points failed (status \"failed\", the reason in skip_reason)\n",
                 static_cast<long long>(failed), todo.size());
}

}  // namespace fp8lab
