// fp8lab run / report / compare / merge / layers: studies to HDF5 and back.
#include <charconv>
#include <cmath>
#include <map>
#include <cstdio>
#include <memory>

#include "data/layer_catalog.hpp"
#include "harness/cli/commands.hpp"
#include "harness/requests/memory_budget.hpp"
#include "harness/results/results_file.hpp"
#include "harness/results/results_report.hpp"
#include "harness/runtime/output_files.hpp"
#include "harness/study/input_hashes.hpp"
#include "harness/study/real_layers.hpp"
#include "harness/study/runner.hpp"

namespace fp8lab::cli {
namespace {

// `fp8lab run` prints the report's table up to this many rows (else its header and how to see it).
constexpr std::size_t kRunReportRows = 40;

void parse_shard(const std::string& text, RunOptions& o) {
  // Both numbers whole: "0/3x" or "0/" is a typo, not shard 0 of 3.
  const auto whole_number = [](const char* first, const char* last, int& value) {
    const auto [end, error] = std::from_chars(first, last, value);
    return error == std::errc() && end == last && first != last;
  };
  const std::size_t slash = text.find('/');
  const bool ok = slash != std::string::npos && whole_number(text.data(), text.data() + slash, o.shard_index) &&
                  whole_number(text.data() + slash + 1, text.data() + text.size(), o.shard_count);
  if (!ok) throw std::invalid_argument("--shard '" + text + "' is not I/N (e.g. 0/4)");
}

// Shards computed from different versions of an input tensor file must not be merged.
void require_same_inputs(const std::vector<std::filesystem::path>& shards) {
  std::map<std::string, std::string> first;
  std::filesystem::path first_shard;
  for (const std::filesystem::path& shard : shards) {
    const ResultsFile r = ResultsFile::open(shard, false);
    if (!r.has_column("operands")) continue;
    const std::map<std::string, std::string> hashes = input_file_hashes(r.read_str("operands"));
    if (first_shard.empty()) {
      first = hashes;
      first_shard = shard;
    } else if (const auto changed = changed_input_file(first, first_shard.string(), hashes, shard.string())) {
      throw std::invalid_argument(*changed + "; the shards were computed from different versions of it");
    }
  }
}

}  // namespace

Command add_run_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("run", "Run a study (experiments/*.toml) and write its results to HDF5");
  auto o = std::make_shared<RunOptions>();
  auto shard = std::make_shared<std::string>();
  sub->add_option("SPEC", o->spec, "Study spec (.toml)")->required();
  sub->add_option("-o,--out", o->out, "Results file (default results/<study>.h5)")->check(non_empty());
  sub->add_option("--backend", o->backend, "cpu, cuda or auto (auto: cuda when available, else cpu)")->capture_default_str();
  sub->add_flag("--resume", o->resume, "Complete an interrupted results file: compute only the missing points");
  sub->add_option("--shard", *shard, "Run only points I, I+N, I+2N, ... of the grid (I/N), for splitting across machines");
  add_threads_option(sub, o->threads);
  sub->add_flag("--quiet", o->quiet, "No progress on stderr");
  auto json = std::make_shared<bool>(false);
  sub->add_flag("--json", *json, "Print a JSON summary (file, points, counts, complete) instead of the table");
  sub->add_flag(kIgnoreMemoryLimitFlag, o->ignore_memory_limit,
                "Run even when a point's memory estimate exceeds what the machine has available");
  return {sub, [o, shard, json] {
            if (!shard->empty()) parse_shard(*shard, *o);
            const RunSummary r = run_study_summary(*o);
            if (*json) {
              const nlohmann::json j = {{"file", r.file.string()},   {"points_total", r.points_total},
                                        {"points_done", r.points_done}, {"evaluated", r.evaluated},
                                        {"failed", r.failed},           {"complete", r.complete},
                                        {"shard", std::to_string(o->shard_index) + "/" + std::to_string(o->shard_count)}};
              std::printf("%s\n", j.dump(2).c_str());
              return 0;
            }
            std::printf("%s", report_table(r.file, {}, kRunReportRows).c_str());
            std::printf("wrote %s\n", r.file.string().c_str());
            return 0;
          }};
}

Command add_report_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("report", "Print the summary table of a results file");
  auto file = std::make_shared<std::string>();
  auto by = std::make_shared<std::vector<std::string>>();
  sub->add_option("RESULTS", *file, "Results file (.h5)")->required();
  auto json = std::make_shared<bool>(false);
  sub->add_option("--by", *by, "Group by these axes (default: every axis with more than one value, one row per point); "
                               "the header names the varying axes averaged over")
      ->delimiter(',');
  sub->add_flag("--json", *json, "Print the report as JSON");
  return {sub, [file, by, json] {
            std::printf("%s", *json ? (report_json(*file, *by) + "\n").c_str() : report_table(*file, *by).c_str());
            return 0;
          }};
}

Command add_compare_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "compare", "Compare a results file with a baseline; exit 3 with a table of every metric that got worse");
  sub->footer("A metric is worse when it moves the bad way (errors and 1 - cosine up, SQNR down) by more than\n"
              "max(rtol |baseline|, floor-scale x its noise floor). The floor is what FP64 rounding of the\n"
              "references alone can move the metric at that point (derivation: harness/results/results_report.cpp):\n" +
              noise_floor_rules() +
              "A changed status (also a point NEW has not run) or a baseline column missing from NEW is worse too.\n"
              "Changes: SQNR in dB, 1 - cosine as a difference, other errors in percent. Files of different grids\n"
              "(study kind, axes, or a baseline axis value NEW lacks) are refused (exit 2); points only in NEW are listed.");
  auto base = std::make_shared<std::string>(), next = std::make_shared<std::string>();
  auto rtol = std::make_shared<double>(1e-6);
  auto floor_scale = std::make_shared<double>(1.0);
  sub->add_option("BASELINE", *base, "Baseline results (.h5)")->required();
  sub->add_option("NEW", *next, "New results (.h5)")->required();
  const CLI::Validator finite_non_negative(
      [](std::string& text) -> std::string {
        double v = -1;
        return CLI::detail::lexical_cast(text, v) && v >= 0 && std::isfinite(v) ? ""
                                                                             : "must be a finite number >= 0, got " + text;
      },
      "a finite number >= 0");
  sub->add_option("--rtol", *rtol, "Relative tolerance before a change counts as worse (a finite number >= 0)")
      ->check(finite_non_negative)
      ->capture_default_str();
  sub->add_option("--floor-scale", *floor_scale, "Multiplier of the absolute noise floors (0: relative tolerance only)")
      ->check(finite_non_negative)
      ->capture_default_str();
  auto json = std::make_shared<bool>(false);
  sub->add_flag("--json", *json, "Print the comparison as JSON (exit codes unchanged)");
  return {sub, [base, next, rtol, floor_scale, json] {
            const Comparison c = compare_results(*base, *next, *rtol, *floor_scale);
            std::printf("%s", *json ? (c.json_text() + "\n").c_str() : c.table().c_str());
            return c.worse.empty() ? 0 : kRegressionExitCode;
          }};
}

Command add_merge_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("merge", "Merge shard results files (fp8lab run --shard) into one");
  auto out = std::make_shared<std::string>();
  auto shards = std::make_shared<std::vector<std::string>>();
  sub->add_option("OUT", *out, "Merged results file (must not exist)")->required();
  sub->add_option("SHARDS", *shards, "Shard results files")->required();
  auto allow_partial = std::make_shared<bool>(false);
  sub->add_flag("--allow-partial", *allow_partial,
                "Merge even when shards are missing, duplicated or incomplete (the file then says complete=false)");
  return {sub, [out, shards, allow_partial] {
            const std::vector<std::filesystem::path> inputs(shards->begin(), shards->end());
            if (std::filesystem::exists(*out)) throw std::invalid_argument(*out + ": exists; merge writes a new file");
            require_same_inputs(inputs);
            // Written under a temporary name and renamed once complete: a failed merge leaves nothing.
            PendingOutputs pending;
            const MergeSummary m = merge_results(pending.add(*out), inputs, *allow_partial);
            pending.commit();
            if (!m.problem.empty()) std::fprintf(stderr, "fp8lab: merge --allow-partial: %s\n", m.problem.c_str());
            std::printf("%s", report_table(*out).c_str());
            return 0;
          }};
}

Command add_layers_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("layers", "List the layers a gemm study accepts: the catalog of model shapes "
                                               "(synthetic operands) and the real stories260K layers");
  auto json = std::make_shared<bool>(false);
  sub->add_flag("--json", *json, "Print the list as JSON");
  return {sub, [json] {
            const std::vector<LayerShape> catalog = load_layer_catalog();
            // The real layers need the checkpoint (data/): without it they are listed as unavailable.
            std::vector<RealLayerShape> real;
            std::string real_problem;
            try {
              real = real_layer_shapes();
            } catch (const std::exception& e) {
              real_problem = e.what();
            }
            if (*json) {
              nlohmann::json j = {{"catalog_file", layer_catalog_path().string()}, {"layers", nlohmann::json::array()}};
              for (const LayerShape& l : catalog)
                j["layers"].push_back({{"layer", l.name}, {"out", l.out_features}, {"in", l.in_features},
                                       {"operands", "synthetic"}, {"source", l.source}});
              for (const RealLayerShape& l : real)
                j["layers"].push_back({{"layer", l.name}, {"out", l.out_features}, {"in", l.in_features},
                                       {"tokens", l.tokens}, {"operands", "real"}, {"source", l.source}});
              if (!real_problem.empty()) j["real_layers_unavailable"] = real_problem;
              std::printf("%s\n", j.dump(2).c_str());
              return 0;
            }
            std::printf("%-26s %12s %12s  %s\n", "layer", "out (N)", "in (K)", "source");
            for (const LayerShape& l : catalog)
              std::printf("%-26s %12lld %12lld  %s\n", l.name.c_str(), static_cast<long long>(l.out_features),
                          static_cast<long long>(l.in_features), l.source.c_str());
            std::printf("(catalog layers run on synthetic operands of their shape; any shape: layer = \"shape:NxK\"; "
                        "catalog file %s)\n\n", layer_catalog_path().c_str());
            if (!real_problem.empty()) {
              std::printf("real stories260K layers: unavailable here (%s)\n", real_problem.c_str());
              return 0;
            }
            std::printf("%-26s %12s %12s  %s\n", "real layer", "out (N)", "in (K)", "operands");
            for (const RealLayerShape& l : real)
              std::printf("%-26s %12lld %12lld  %s\n", l.name.c_str(), static_cast<long long>(l.out_features),
                          static_cast<long long>(l.in_features), l.source.c_str());
            return 0;
          }};
}

}  // namespace fp8lab::cli
