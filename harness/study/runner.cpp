#include "harness/study/runner.hpp"

#include <omp.h>

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <limits>
#include <set>
#include <stdexcept>

#include "data/sha256.hpp"
#include "harness/requests/backend_select.hpp"
#include "harness/runtime/build_info.hpp"
#include "kernels/quantization.hpp"
#include "harness/runtime/interrupt.hpp"
#include "harness/requests/memory_budget.hpp"
#include "harness/runtime/progress.hpp"
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

std::string git_text(const std::string& arguments) {
  return command_output("git -C '" + std::string(FP8LAB_SOURCE_DIR) + "' " + arguments + " 2>/dev/null");
}

std::string shard_text(const RunOptions& options) {
  return std::to_string(options.shard_index) + "/" + std::to_string(options.shard_count);
}

// Root attributes (CF where they fit, then fp8lab's provenance).
std::map<std::string, std::string> provenance(const StudySpec& spec, const StudyKind& kind, const Backend& backend,
                                              const std::vector<GridAxis>& axes, std::int64_t points,
                                              const RunOptions& options) {
  const std::string sha = git_text("rev-parse HEAD");
  const std::string describe = git_text("describe --always --dirty --tags");
  const std::string dirty =
      command_output("test -z \"$(git -C '" + std::string(FP8LAB_SOURCE_DIR) +
                     "' status --porcelain 2>/dev/null)\" && echo false || echo true");
  char host[256] = "unknown";
  ::gethostname(host, sizeof host - 1);
  nlohmann::json axis_json = nlohmann::json::object();
  for (const GridAxis& a : axes) axis_json[a.name] = a.values;
  const nlohmann::json resolved = {{"study", spec.name}, {"kind", spec.kind}, {"axes", axis_json}, {"points", points},
                                   {"shard", shard_text(options)}};
  std::map<std::string, std::string> a = {
      {"Conventions", "CF-1.10"},
      {"title", spec.description.empty() ? "fp8lab study " + spec.name : spec.description},
      {"history", utc_now() + ": " + command_line()},
      {"source", "fp8lab 0.1.0 (git " + (describe.empty() ? std::string("unknown") : describe) + ")"},
      {"study_name", spec.name},
      {"study_kind", spec.kind},
      {"description", spec.description},
      {"spec_file", spec.file.string()},
      {"spec_toml", spec.text},
      {"spec_sha256", sha256_hex(spec.text)},
      {"resolved_spec_json", resolved.dump()},
      {"shard", shard_text(options)},
      {"complete", "false"},
      {"fp8lab_version", "0.1.0"},
      {"git_sha", sha.empty() ? "unknown" : sha},
      {"git_dirty", sha.empty() ? "unknown" : dirty},
      {"backend", backend.name()},
      {"device", backend.device()},
      {"host", host},
      {"operands", kind.operand_description()},
      {"utc_start", utc_now()},
      {"utc_end", ""}};
  for (const auto& [name, value] : build_provenance()) a[name] = value;
  for (const auto& [name, value] : kind.settings_attributes()) a[name] = value;
  return a;
}

// The grid's dimensions as the results file stores them. Granularity axes get their tile sizes
// as numbers (-1: the whole extent, e.g. both for "tensor", the columns for "row"); an axis with
// parameter axes is stored as the labels of its entries ("lognormal[sigma=2,seed=1]") with each
// parameter's value as an int64 coordinate along it (missing where it does not apply).
std::vector<GridAxis> grid_axes(const StudySpec& spec, const StudyKind& kind) {
  const std::vector<AxisDef> defs = kind.axes();
  std::vector<GridAxis> axes;
  for (const GridDimension& dimension : grid_dimensions(spec, kind)) {
    const AxisDef& def = defs[dimension.axis];
    GridAxis a{def.name, def.long_name, dimension.parameters.empty() ? def.storage : AxisStorage::string, {}, {}};
    for (const GridEntry& entry : dimension.entries) a.values.push_back(entry.label);
    for (std::size_t p : dimension.parameters) {
      AuxiliaryCoordinate parameter{defs[p].name, defs[p].long_name, "1", {},
                                    "parameter of " + def.name + " (missing where it does not apply)"};
      for (const GridEntry& entry : dimension.entries) {
        std::int64_t value = kMissingInteger;
        for (const auto& [name, text] : entry.values)
          if (name == defs[p].name) value = std::stoll(text);
        parameter.values.push_back(value);
      }
      a.auxiliary.push_back(std::move(parameter));
    }
    if (a.storage == AxisStorage::granularity) {
      AuxiliaryCoordinate rows{a.name + "_tile_rows", "rows of one scale tile of " + a.name + " (-1: all)", "1", {}};
      AuxiliaryCoordinate cols{a.name + "_tile_cols", "columns (along K) of one scale tile of " + a.name + " (-1: all)",
                               "1", {}};
      for (const std::string& v : a.values) {
        const Granularity g = Granularity::parse(v);
        const bool whole_rows = g.kind == Granularity::Kind::tensor;
        const bool whole_cols = whole_rows || g.kind == Granularity::Kind::row;
        rows.values.push_back(whole_rows ? -1 : g.tile_rows(1));
        cols.values.push_back(whole_cols ? -1 : g.tile_cols(1));
      }
      a.auxiliary = {rows, cols};
    }
    axes.push_back(std::move(a));
  }
  return axes;
}

// The runner's own columns, then the kind's.
std::vector<ColumnDef> columns_for(const StudyKind& kind) {
  using T = ColumnDef::Type;
  std::vector<ColumnDef> c = {
      {"status", T::str, "", "ok, skipped (invalid combination), failed (no finite result); empty: not run yet"},
      {"reason", T::str, "", "why the point was skipped or failed (empty when ok)"},
      {"operands", T::str, "", "where the operand values of the point come from"},
      {"elapsed_seconds", T::f64, "s", "wall time of the point (operands, kernels and metrics)"}};
  for (const ColumnDef& r : kind.result_columns()) c.push_back(r);
  return c;
}

// "axis=value" of point `index` for the axes that vary (the others say nothing about where the
// sweep is); an axis with parameters shows its entry's label.
std::vector<std::pair<std::string, std::string>> varying_values(std::int64_t index, const ResultsFile& results) {
  const std::vector<GridAxis>& axes = results.axes();
  const std::vector<std::string> values = results.point_values(index);
  std::vector<std::pair<std::string, std::string>> v;
  for (std::size_t a = 0; a < axes.size(); ++a)
    if (axes[a].values.size() > 1) v.emplace_back(axes[a].name, values[a]);
  return v;
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
  if (!existing.has_column("operands")) return;
  std::set<std::string> now;
  for (const Point& p : grid) now.insert(kind.operand_provenance(p));
  if (const auto changed = changed_input_file(input_file_hashes(existing.read_str("operands")), out.string(),
                                              input_file_hashes({now.begin(), now.end()}), "the file now"))
    throw std::invalid_argument(*changed + "; --resume would mix results from two versions of it (start a new results file)");
}

// What `fp8lab run` says on Ctrl-C / SIGTERM: the exact command that completes the file.
std::string resume_command(const StudySpec& spec, const std::filesystem::path& out, const RunOptions& options) {
  return "fp8lab run " + spec.file.string() + " -o " + out.string() + " --resume" +
         (options.shard_count > 1 ? " --shard " + shard_text(options) : "");
}

struct Evaluation {
  std::int64_t failed = 0, evaluated = 0;
};

Evaluation evaluate_points(const RunOptions& options, const std::vector<Point>& grid, StudyKind& kind, Backend& backend,
                           ResultsFile& results);

}  // namespace

std::filesystem::path run_study(const RunOptions& options) { return run_study_summary(options).file; }

RunSummary run_study_summary(const RunOptions& options) {
  const StudySpec spec = options.spec_text.empty() ? load_study_spec(options.spec)
                                                  : parse_study_spec(options.spec_text, options.spec);
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
    throw std::invalid_argument("--shard " + shard_text(options) + " is not I/N with 0 <= I < N");
  if (options.threads < 0 || options.threads > kMaxThreads)
    throw std::invalid_argument("--threads must be 0 (all cores) to " + std::to_string(kMaxThreads) + ", got " +
                                std::to_string(options.threads));
  require_grid_fits(spec, *kind, grid, options.ignore_memory_limit);
  const std::unique_ptr<Backend> backend = select_backend(options.backend, /*needs_gemm=*/true);
  const std::vector<GridAxis> axes = grid_axes(spec, *kind);

  std::filesystem::path out = options.out;
  if (out.empty()) {
    out = std::filesystem::path("results") / (spec.name + (options.shard_count > 1
                                                               ? ".shard-" + std::to_string(options.shard_index) + "-of-" +
                                                                     std::to_string(options.shard_count) + ".h5"
                                                               : ".h5"));
  }
  bool created = false;
  ResultsFile results = [&] {
    if (options.resume) {
      ResultsFile r = ResultsFile::open(out, /*writable=*/true);
      if (r.root_attribute("spec_sha256") != sha256_hex(spec.text))
        throw std::invalid_argument(out.string() + ": was written from a different spec than " + spec.file.string() +
                                    "; --resume needs the same spec");
      if (r.root_attribute("shard") != shard_text(options))
        throw std::invalid_argument(out.string() + ": holds shard " + r.root_attribute("shard") + ", not --shard " +
                                    shard_text(options));
      require_same_inputs(r, out, *kind, grid);
      r.set_root_attribute("history", r.root_attribute("history") + "\n" + utc_now() + ": " + command_line());
      return r;
    }
    if (std::filesystem::exists(out))
      throw std::invalid_argument(out.string() + ": exists; use --resume to complete it, or remove it");
    if (out.has_parent_path()) create_parent_directories(out);
    created = true;
    const auto total = static_cast<std::int64_t>(grid.size());
    return ResultsFile::create(out, axes, columns_for(*kind), provenance(spec, *kind, *backend, axes, total, options),
                               {{"points_total", total}, {"points_done", 0}});
  }();
  // SIGINT / SIGTERM stop at once (the file holds every finished point) and say how to go on.
  set_interrupt_note(options.spec_text.empty()
                         ? "; " + out.string() + " keeps every finished point and is resumable: " +
                               resume_command(spec, out, options)
                         : "; " + out.string() + " is resumable from its last checkpoint: " + command_line() +
                               (options.resume ? "" : " --resume"));
  Evaluation e;
  try {
    e = evaluate_points(options, grid, *kind, *backend, results);
  } catch (...) {
    // A command that fails leaves no new file behind: a results file it created holding no
    // point is removed (one with points is kept: --resume completes it).
    if (created && results.root_counter("points_done").value_or(0) == 0) {
      results.close();
      std::error_code ignored;
      std::filesystem::remove(out, ignored);
    }
    throw;
  }
  set_interrupt_note("");
  RunSummary summary;
  summary.file = out;
  summary.points_total = static_cast<std::int64_t>(grid.size());
  summary.points_done = results.root_counter("points_done").value_or(0);
  summary.evaluated = e.evaluated;
  summary.failed = e.failed;
  summary.complete = results.root_attribute("complete") == "true";
  return summary;
}

namespace {

// Fill values for the columns a skipped row leaves out.
Row completed(Row row, const std::vector<ColumnDef>& columns) {
  for (const ColumnDef& c : columns) {
    if (row.contains(c.name)) continue;
    if (c.extra) row[c.name] = std::vector<double>(c.extra->size(), std::numeric_limits<double>::quiet_NaN());
    else if (c.type == ColumnDef::Type::f64) row[c.name] = std::numeric_limits<double>::quiet_NaN();
    else if (c.type == ColumnDef::Type::i64) row[c.name] = kMissingInteger;
    else row[c.name] = std::string();
  }
  return row;
}

Evaluation evaluate_points(const RunOptions& options, const std::vector<Point>& grid, StudyKind& kind, Backend& backend,
                           ResultsFile& results) {
  const std::vector<std::string> status = results.read_str("status");
  std::int64_t done = 0;
  for (const std::string& s : status) done += !s.empty();
  std::vector<std::int64_t> todo;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(grid.size()); ++i)
    if (i % options.shard_count == options.shard_index && status[static_cast<std::size_t>(i)].empty()) todo.push_back(i);
  std::vector<double> cost;
  double total_cost = 0;
  for (std::int64_t i : todo) total_cost += cost.emplace_back(std::max(kind.point_cost(grid[static_cast<std::size_t>(i)]), 0.0));
  Progress progress(static_cast<std::int64_t>(todo.size()), total_cost, options.quiet);
  const RunContext context{options.threads, &backend, options.quiet, results.path(), options.resume};
  // --threads N caps every OpenMP team of the command (the engine's and the quantizers' included,
  // which take the default team), so shards sharing a machine do not oversubscribe it.
  if (options.threads > 0) omp_set_num_threads(options.threads);
  const std::vector<ColumnDef> columns = results.columns();
  Evaluation e;
  double cost_done = 0;
  for (std::size_t t = 0; t < todo.size(); ++t) {
    const Point& point = grid[static_cast<std::size_t>(todo[t])];
    progress.begin_point(static_cast<std::int64_t>(t), cost_done, varying_values(todo[t], results));
    const auto start = std::chrono::steady_clock::now();
    const std::optional<std::string> skip = kind.skip_reason(point, backend);
    std::string point_status = skip ? "skipped" : "ok", reason = skip.value_or("");
    Row row;
    if (skip) {
      row = completed(kind.skipped_row(point), columns);
    } else {
      try {
        row = kind.evaluate(point, context);
      } catch (const PointFailure& failure) {  // no number to record: say why instead
        row = completed(kind.skipped_row(point), columns);
        point_status = "failed";
        reason = failure.what();
        ++e.failed;
      }
    }
    row["status"] = point_status;
    row["reason"] = reason;
    row["operands"] = kind.operand_provenance(point);
    row["elapsed_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    results.write_point(todo[t], row, {{"points_done", ++done}});
    kind.point_recorded(point, context);
    // A signal deferred while the point ran (its last step) stops the command here, the row safe.
    if (interrupt_requested()) exit_interrupted();
    ++e.evaluated;
    cost_done += cost[t];
  }
  progress.finish(static_cast<std::int64_t>(todo.size()));
  results.set_root_attribute("utc_end", utc_now());
  results.set_root_attribute("complete", done == static_cast<std::int64_t>(grid.size()) ? "true" : "false");
  if (e.failed > 0)
    std::fprintf(stderr, "fp8lab: %lld of %zu points failed (status \"failed\", the reason in `reason`)\n",
                 static_cast<long long>(e.failed), todo.size());
  return e;
}

}  // namespace

}  // namespace fp8lab
