// fp8lab gemm: quantize A (M x K) and B (N x K), run C = A * B^T through the CPU emulation
// of the FP8 tensor-core GEMM, and report the quantization, accumulation and total errors
// against FP64 GEMMs (optionally on a random sample of output rows and columns).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <stdexcept>

#include "data/tensor_io/npy.hpp"
#include "harness/cli/commands.hpp"
#include "harness/runtime/progress.hpp"
#include "harness/metrics/gemm_errors.hpp"
#include "harness/requests/gemm_request.hpp"
#include "harness/requests/quantize_request.hpp"
#include "harness/metrics/error_metrics_json.hpp"
#include "harness/requests/memory_budget.hpp"
#include "harness/requests/operand_checks.hpp"
#include "harness/runtime/output_files.hpp"

namespace fp8lab::cli {
namespace {

// The computation's options (and their defaults) are GemmRequest's, shared with the Python
// module; the rest are the CLI's own: files, sampling, output.
struct GemmOptionsCli {
  GemmRequest request;
  std::string a, b, a_name, b_name;
  std::string out;
  std::int64_t sample_rows = 0, sample_cols = 0;
  std::uint64_t seed = 0;
  bool json = false;
};

nlohmann::json error_json(const ErrorWithInterval& e) {
  nlohmann::json j = to_json(e.metrics);
  if (e.sampled)
    j["ci95"] = {{"rel_frobenius", {e.rel_frobenius.low, e.rel_frobenius.high}},
                 {"sqnr_db", {e.sqnr_db.low, e.sqnr_db.high}},
                 {"deepgemm_diff", {e.deepgemm_diff.low, e.deepgemm_diff.high}}};
  return j;
}

void print_error_table(const GemmErrors& g) {
  const bool sampled = g.total.sampled;
  std::printf("%-13s %10s %9s %11s %10s %10s %10s%s\n", "error", "rel_frob", "sqnr_db", "1-cosine", "diff",
              "max_abs", "max_rel", sampled ? "   95% CI rel_frob        95% CI sqnr_db" : "");
  for (const auto& [name, e] : {std::pair<const char*, const ErrorWithInterval*>{"quantization", &g.quantization},
                                {"accumulation", &g.accumulation},
                                {"total", &g.total}}) {
    const ErrorMetrics& m = e->metrics;
    std::printf("%-13s %10.3e %9.2f %11.3e %10.3e %10.3e %10.3e", name, m.rel_frobenius, m.sqnr_db, m.one_minus_cosine,
                m.deepgemm_diff, m.max_abs, m.max_rel);
    if (sampled)
      std::printf("   [%.3e, %.3e]  [%.2f, %.2f]", e->rel_frobenius.low, e->rel_frobenius.high, e->sqnr_db.low,
                  e->sqnr_db.high);
    std::printf("\n");
  }
}

int run_gemm(const GemmOptionsCli& o) {
  const GemmJob job(o.request);  // every option parsed, the backend selected
  if (o.sample_rows < 0 || o.sample_cols < 0) throw std::invalid_argument("--sample-rows/--sample-cols must be >= 0");
  if (!o.out.empty()) {
    require_writable_location(o.out);
    for (const std::string& input : {o.a, o.b}) require_not_input(o.out, input);
  }

  const MatrixOperand a = load_matrix_operand(o.a, o.a_name);
  const MatrixOperand b = load_matrix_operand(o.b, o.b_name);
  std::mt19937_64 rng(o.seed);
  const std::vector<std::int64_t> rows = sample_without_replacement(o.sample_rows, a.rows, rng);
  const std::vector<std::int64_t> cols = sample_without_replacement(o.sample_cols, b.rows, rng);
  // A GEMM of a minute says it is alive (stderr, after a few seconds; gone when it ends).
  std::optional<Heartbeat> heartbeat(std::in_place, "gemm " + std::to_string(a.rows) + "x" + std::to_string(b.rows) + "x" +
                                                        std::to_string(a.cols), false);
  const GemmResult result = job.run({a.values, a.rows, a.cols, o.a}, {b.values, b.rows, b.cols, o.b}, rows, cols,
                                    /*with_errors=*/true);
  heartbeat.reset();
  const GemmErrors& errors = *result.errors;
  const std::vector<float>& out = result.out;
  if (const std::optional<std::string> why = non_finite_reason(errors, out))
    throw std::invalid_argument(o.a + " x " + o.b + ": " + *why);
  if (!o.out.empty())
    write_npy(o.out, Tensor::from_f32({errors.rows_computed, errors.cols_computed}, out));

  const GemmConfig& config = job.config();
  const Granularity &ga = job.a_granularity(), &gb = job.b_granularity();
  const GemmPlan& plan = result.plan;
  const Backend::GemmRoute& route = result.route;
  const Backend& backend = job.backend();
  const double seconds = result.seconds;
  const GemmRequest& r = job.request();
  if (o.json) {
    const nlohmann::json report = {
        {"a", o.a}, {"b", o.b}, {"m", a.rows}, {"n", b.rows}, {"k", a.cols},
        {"format", r.format}, {"b_format", format_name(job.b_format())}, {"scale_rule", r.scale}, {"a_granularity", ga.to_string()},
        {"b_granularity", gb.to_string()}, {"accumulation", config.accumulation.to_string()},
        {"promotion", config.promotion.to_string()}, {"promotion_elements", plan.interval},
        {"output", r.output}, {"rht", r.rht}, {"a_rounding", r.a_rounding}, {"b_rounding", r.b_rounding},
        {"backend", backend.name()}, {"device", backend.device()},
        {"gemm_backend", route.backend}, {"gemm_fallback_reason", route.fallback_reason},
        {"rows_computed", errors.rows_computed}, {"cols_computed", errors.cols_computed},
        {"seconds", seconds},
        {"quantization", error_json(errors.quantization)}, {"accumulation_error", error_json(errors.accumulation)},
        {"total", error_json(errors.total)}};
    nlohmann::json with_scheme = report;
    if (!r.scheme.empty()) with_scheme["scheme"] = r.scheme;
    std::printf("%s\n", with_scheme.dump(2).c_str());
    return 0;
  }
  // K is padded with zeros to whole instructions; say so where the padded K is not K.
  const std::string padded = plan.padded_k == a.cols ? "K = " + std::to_string(plan.padded_k)
                                                     : "K padded to " + std::to_string(plan.padded_k);
  const std::string promotion =
      config.promotion.never ? "never (one partial over " + padded + ")" : "every " + std::to_string(plan.interval);
  // One format, or the mix as "A x B" (e.g. e5m2 x e4m3).
  const std::string formats = job.format() == job.b_format()
                                  ? std::string(format_name(job.format()))
                                  : std::string(format_name(job.format())) + " x " + format_name(job.b_format());
  std::printf("C = A * B^T: M=%lld N=%lld K=%lld, %s, %sA %s, B %s, scale %s, accumulation %s, promotion %s, "
              "%s output, %s backend\n",
              static_cast<long long>(a.rows), static_cast<long long>(b.rows), static_cast<long long>(a.cols),
              formats.c_str(), r.rht ? "RHT 16x16 (TE signs) on A and B along K, " : "", ga.to_string().c_str(),
              gb.to_string().c_str(), r.scale.c_str(), config.accumulation.to_string().c_str(), promotion.c_str(),
              r.output.c_str(), route.backend.c_str());
  if (!route.fallback_reason.empty())
    std::printf("GEMM on %s: %s\n", route.backend.c_str(), route.fallback_reason.c_str());
  std::printf("computed %lld of %lld rows x %lld of %lld columns in %.2f s; max_rel over |ref| > %.4g (1%% of RMS)\n",
              static_cast<long long>(errors.rows_computed), static_cast<long long>(a.rows),
              static_cast<long long>(errors.cols_computed), static_cast<long long>(b.rows), seconds,
              errors.total.metrics.rel_floor);
  print_error_table(errors);
  if (errors.total.sampled)
    std::printf("sampled: rows are clusters of a simple random sample; intervals by the ratio estimator "
                "(delta method); max_abs / max_rel are lower bounds\n");
  return 0;
}

}  // namespace

Command add_gemm_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "gemm",
      "Quantize A (M x K) and B (N x K), compute C = A * B^T with the emulated FP8 tensor-core GEMM, and report the "
      "quantization, accumulation and total errors against FP64");
  auto o = std::make_shared<GemmOptionsCli>();
  sub->add_option("--a", o->a, "A: M x K tensor file (activations, K-major)")->required();
  sub->add_option("--b", o->b, "B: N x K tensor file (weights as nn.Linear stores them)")->required();
  sub->add_option("--a-name", o->a_name, "Tensor name of A inside a .safetensors file")->check(non_empty());
  sub->add_option("--b-name", o->b_name, "Tensor name of B inside a .safetensors file")->check(non_empty());
  CLI::Option* ga = sub->add_option("--a-granularity", o->request.a_granularity, "A's scales: tile:1xT | row | tensor (| block:BxB)")->capture_default_str();
  CLI::Option* gb = sub->add_option("--b-granularity", o->request.b_granularity, "B's scales: block:BxB | row | tensor (| tile:1xT)")->capture_default_str();
  CLI::Option* format = sub->add_option("--format", o->request.format,
                                        "Element format of A, and of B unless --b-format: e4m3 or e5m2 (with --accum b200 "
                                        "also e2m1, e3m2, e2m3)")
                            ->capture_default_str();
  CLI::Option* b_format = sub->add_option("--b-format", o->request.b_format,
                  "Format of B when it differs from A's (a mix, e.g. --format e5m2 --b-format e4m3 as a "
                  "gradient times a weight); default: --format")
                                  ->check(non_empty());
  CLI::Option* scale = sub->add_option("--scale", o->request.scale, "Scale rule (" + scale_rule_names() + ")")->capture_default_str();
  sub->add_option("--scheme", o->request.scheme,
                  "Format, scales and rule in one word (" + scheme_names() +
                  "): A takes the scheme's activation tiles, B its weight tiles; accum defaults to b200 for mxfp8, mxfp4, "
                  "nvfp4")
      ->check(non_empty())
      ->excludes(ga)
      ->excludes(gb)
      ->excludes(format)
      ->excludes(b_format)
      ->excludes(scale);
  sub->add_option("--accum", o->request.accum,
                  "Accumulation model: hopper (13 fraction bits, 32-deep, truncation) | fp32 (FMA per product) | "
                  "bits:F,depth:D,round:rz|rne | b200 (Blackwell's block-scaled MMA: UE8M0 or nvfp4 scales inside the "
                  "instruction, FP32 accumulator over all of K). Default: hopper, or b200 with --scheme mxfp8|mxfp4|nvfp4")
      ->check(non_empty());
  sub->add_flag("--rht", o->request.rht,
                "Transform A and B along K with Transformer Engine's 16x16 Random Hadamard Transform (fixed signs, "
                "H16/4, FP32) before quantizing them; K must be a multiple of 16. The exact product is unchanged, so the "
                "errors are still against the untransformed A * B^T (the FP32 rounding of the transform counts as "
                "quantization error)");
  for (const char operand : {'a', 'b'}) {
    const std::string name(1, operand), upper(1, static_cast<char>(operand - 'a' + 'A'));
    sub->add_option("--" + name + "-rounding", operand == 'a' ? o->request.a_rounding : o->request.b_rounding,
                    upper + "'s element rounding: nearest or stochastic (as a recipe's " + name + "_rounding)")
        ->capture_default_str();
    sub->add_option("--" + name + "-seed", operand == 'a' ? o->request.a_seed : o->request.b_seed,
                    "Seed of " + upper + "'s stochastic rounding (0 when not given)");
  }
  sub->add_option("--promotion", o->request.promotion,
                  "Promote the partial to FP32 every N elements of K (a multiple of the depth that divides the scale "
                  "tile along K) or never. Default: 128, never under b200")
      ->check(non_empty());
  sub->add_option("--output", o->request.output, "Output type: fp32 or bf16 (RNE)")->capture_default_str();
  sub->add_option("--out", o->out, "Write C (float32; the sampled rows x columns when sampling) to this .npy")
      ->check(non_empty());
  sub->add_option("--sample-rows", o->sample_rows, "Compute only this many random output rows (0: all)");
  sub->add_option("--sample-cols", o->sample_cols, "Compute only this many random output columns (0: all)");
  sub->add_option("--seed", o->seed, "Seed of the row/column sample")->capture_default_str();
  add_threads_option(sub, o->request.threads);
  sub->add_flag(kIgnoreMemoryLimitFlag, o->request.ignore_memory_limit,
                "Compute even when the memory estimate exceeds what the machine has available");
  sub->add_option("--backend", o->request.backend, "cpu, cuda or auto (cuda when a device is there and can run GEMMs)")
      ->capture_default_str();
  sub->add_flag("--json", o->json, "Print the report as JSON");
  return {sub, [o] { return run_gemm(*o); }};
}

}  // namespace fp8lab::cli
