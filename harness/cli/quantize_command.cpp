// fp8lab quantize: quantize one 2-D tensor with one or more granularities and report what
// the round trip (quantize, dequantize) did to it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "data/tensor_io/npy.hpp"
#include "harness/cli/commands.hpp"
#include "harness/runtime/progress.hpp"
#include "harness/metrics/error_metrics_json.hpp"
#include "harness/requests/operand_checks.hpp"
#include "harness/runtime/output_files.hpp"
#include "harness/requests/quantize_request.hpp"
#include "kernels/cpu/quantize.hpp"

namespace fp8lab::cli {
namespace {

// The quantizer's options (and their defaults) are QuantizeRequest's, shared with the Python
// module; the rest are the CLI's own.
struct QuantizeOptions {
  QuantizeRequest request;
  std::string tensor, name;
  std::vector<std::string> granularities;
  std::string scheme;
  std::string operand;  // with --scheme: which of its granularities (activation, gradient, weight)
  std::optional<std::string> seed;  // parsed by parse_seed, so that a bad one is a one-line error naming --seed
  std::string codes_out, scales_out, dequant_out, global_scale_out;
  std::optional<double> rel_floor;  // not given: default_rel_floor (1% of the input's RMS)
  bool json = false;
};

struct GranularityResult {
  QuantizedTensor quantized;
  std::vector<float> dequantized;
  ErrorMetrics metrics;
  std::int64_t zeroed = 0;  // nonzero inputs dequantized to +-0 (underflow)
};

GranularityResult run_one(const QuantizeJob& job, const std::string& tensor, const std::vector<float>& x,
                          std::int64_t rows, std::int64_t cols, const Granularity& granularity, double rel_floor) {
  GranularityResult r;
  r.quantized = job.quantize(x, rows, cols, granularity);
  r.dequantized = cpu::dequantize(r.quantized);
  // A code times its scale can pass FP32's largest value (an E8M0 scale rounded up for a block
  // near FLT_MAX): every metric would be inf or NaN, so it is refused, as gemm refuses such a C.
  for (std::size_t i = 0; i < r.dequantized.size(); ++i)
    if (!std::isfinite(r.dequantized[i])) {
      const std::int64_t row = static_cast<std::int64_t>(i) / cols, col = static_cast<std::int64_t>(i) % cols;
      char value[32];
      std::snprintf(value, sizeof value, "%.9g", static_cast<double>(x[i]));
      throw std::invalid_argument(tensor + ": element (" + std::to_string(row) + ", " + std::to_string(col) + ") = " +
                                  value + " dequantizes past FP32's range under " + granularity.to_string() +
                                  " and scale rule " + scale_rule_name(job.scale_rule()) +
                                  " (its code times its scale exceeds 3.4e38); nothing written");
    }
  r.metrics = error_metrics(std::span<const float>(r.dequantized), std::span<const float>(x), rel_floor);
  // Underflow as the user sees it: a nonzero input that comes back as 0. (Its code is +-0, or
  // its block's scale is 0: nvfp4:torchao on a tensor whose amax / 2688 underflows.)
  for (std::size_t i = 0; i < x.size(); ++i)
    if (x[i] != 0.0f && r.dequantized[i] == 0.0f) ++r.zeroed;
  return r;
}

// All three files or none: each is written under a temporary name, renamed once all are.
void write_outputs(const QuantizeOptions& o, const GranularityResult& r, PendingOutputs& pending) {
  const std::vector<std::int64_t> shape = {r.quantized.rows, r.quantized.cols};
  if (!o.codes_out.empty()) write_npy(pending.add(o.codes_out), Tensor::from_u8(shape, r.quantized.codes));
  if (!o.scales_out.empty())
    write_npy(pending.add(o.scales_out),
              Tensor::from_f32({r.quantized.scale_rows, r.quantized.scale_cols}, r.quantized.scales));
  if (!o.dequant_out.empty()) write_npy(pending.add(o.dequant_out), Tensor::from_f32(shape, r.dequantized));
  if (!o.global_scale_out.empty())
    write_npy(pending.add(o.global_scale_out), Tensor::from_f32({1}, {r.quantized.tensor_scale.decode}));
  pending.commit();
}

// --scheme fills format, granularity and scale rule; it excludes the three options (CLI11 says
// so), so a scheme is exactly what it names.
QuantizeOptions with_scheme(QuantizeOptions o) {
  if (o.scheme.empty()) {
    if (!o.operand.empty()) throw std::invalid_argument("--operand: only --scheme picks a granularity by operand");
    if (o.granularities.empty()) throw std::invalid_argument("--granularity is required (or --scheme)");
    return o;
  }
  const QuantizeScheme* s = nullptr;
  try {
    s = &find_scheme(o.scheme);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("--scheme: ") + e.what());
  }
  o.request.format = s->format;
  o.request.scale = s->scale;
  o.granularities = {scheme_granularity(*s, o.operand.empty() ? "activation" : o.operand)};
  return o;
}

int run_quantize(const QuantizeOptions& options) {
  QuantizeOptions o = with_scheme(options);
  if (o.rel_floor && !(*o.rel_floor >= 0 && std::isfinite(*o.rel_floor)))
    throw std::invalid_argument("--rel-floor: " + std::to_string(*o.rel_floor) + " is not a finite number >= 0");
  if (o.seed) o.request.seed = parse_seed(*o.seed);
  std::vector<Granularity> granularities;
  for (const std::string& text : o.granularities) {
    const Granularity g = Granularity::parse(text);
    if (std::find(granularities.begin(), granularities.end(), g) != granularities.end())
      throw std::invalid_argument("--granularity: " + g.to_string() + " is given twice");
    granularities.push_back(g);
  }
  const bool writes_files =
      !o.codes_out.empty() || !o.scales_out.empty() || !o.dequant_out.empty() || !o.global_scale_out.empty();
  if (writes_files && granularities.size() != 1)
    throw std::invalid_argument("--codes/--scales/--dequant/--global-scale need exactly one --granularity");
  const QuantizeJob job(o.request);  // format, scale rule, backend
  if (!o.global_scale_out.empty() && !scale_rule_math(job.scale_rule()).two_level)
    throw std::invalid_argument(std::string("--global-scale: scale rule ") + scale_rule_name(job.scale_rule()) +
                                " has no per-tensor scale (only nvfp4, nvfp4:torchao and nvfp4:4over6 do)");
  const Backend& backend = job.backend();
  std::vector<std::filesystem::path> outputs;
  for (const std::string* out : {&o.codes_out, &o.scales_out, &o.dequant_out, &o.global_scale_out})
    if (!out->empty()) {  // refused before any work
      require_writable_location(*out);
      require_not_input(*out, o.tensor);
      outputs.emplace_back(*out);
    }
  require_distinct_outputs(outputs);

  const MatrixOperand operand = load_matrix_operand(o.tensor, o.name);
  const std::int64_t rows = operand.rows, cols = operand.cols;
  const std::vector<float>& x = operand.values;

  const double floor = o.rel_floor ? *o.rel_floor : default_rel_floor(std::span<const float>(x));

  nlohmann::json report = {{"tensor", o.tensor},   {"name", o.name},        {"dtype", dtype_name(operand.dtype)},
                           {"shape", {rows, cols}}, {"format", o.request.format}, {"scale_rule", o.request.scale},
                           {"backend", backend.name()},      {"rel_floor", floor},    {"results", nlohmann::json::array()}};
  if (!o.scheme.empty()) report["scheme"] = o.scheme;
  if (!o.operand.empty()) report["operand"] = o.operand;
  report["rounding"] = rounding_mode_name(job.rounding().mode);
  if (job.rounding().mode == RoundingMode::stochastic) report["seed"] = job.rounding().seed;
  if (!o.json) {
    const std::string rounding = job.rounding().mode == RoundingMode::stochastic
                                     ? ", stochastic rounding (seed " + std::to_string(job.rounding().seed) + ")"
                                     : "";
    std::printf("%s%s%s: %lldx%lld %s -> %s, scale rule %s%s, %s backend\n", o.tensor.c_str(),
                o.name.empty() ? "" : ":", o.name.c_str(), static_cast<long long>(rows), static_cast<long long>(cols),
                dtype_name(operand.dtype), o.request.format.c_str(), o.request.scale.c_str(), rounding.c_str(),
                backend.name().c_str());
    std::printf("dequantized vs input; max_rel over |x| > %.4g%s\n", floor,
                o.rel_floor ? "" : " (1% of the input's RMS)");
    std::printf("%-14s %-11s %10s %9s %11s %10s %10s %10s %9s\n", "granularity", "scales", "rel_frob", "sqnr_db",
                "1-cosine", "diff", "max_abs", "max_rel", "zeroed");
  }
  for (const Granularity& g : granularities) {
    const GranularityResult r = [&] {
      const Heartbeat heartbeat("quantize " + g.to_string(), false);  // a long one says it is alive
      return run_one(job, o.tensor, x, rows, cols, g, floor);
    }();
    if (writes_files) {
      PendingOutputs pending;
      write_outputs(o, r, pending);
    }
    const ErrorMetrics& m = r.metrics;
    if (o.json) {
      nlohmann::json entry = {{"granularity", g.to_string()},
                              {"scale_shape", {r.quantized.scale_rows, r.quantized.scale_cols}},
                              {"zeroed", r.zeroed},
                              {"metrics", to_json(m)}};
      if (scale_rule_math(job.scale_rule()).two_level)
        entry["tensor_scale"] = {{"amax", r.quantized.tensor_amax},
                                 {"encode", r.quantized.tensor_scale.encode},
                                 {"decode", r.quantized.tensor_scale.decode}};
      report["results"].push_back(entry);
    } else {
      const std::string grid = std::to_string(r.quantized.scale_rows) + "x" + std::to_string(r.quantized.scale_cols);
      std::printf("%-14s %-11s %10.3e %9.2f %11.3e %10.3e %10.3e %10.3e %9lld\n", g.to_string().c_str(), grid.c_str(),
                  m.rel_frobenius, m.sqnr_db, m.one_minus_cosine, m.deepgemm_diff, m.max_abs, m.max_rel,
                  static_cast<long long>(r.zeroed));
    }
  }
  if (o.json) std::printf("%s\n", report.dump(2).c_str());
  return 0;
}

}  // namespace

Command add_quantize_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "quantize",
      "Quantize a 2-D tensor (rows = tokens or output channels, columns along K) to FP8 and report the error of the "
      "dequantized result against the input");
  auto o = std::make_shared<QuantizeOptions>();
  sub->add_option("TENSOR", o->tensor, "Input tensor file (.npy, or .safetensors with --name)")->required();
  sub->add_option("--name", o->name, "Tensor name inside a .safetensors file")->check(non_empty());
  sub->add_option("--format", o->request.format,
                  "Element format: e4m3, e5m2 (FP8), e2m1 (FP4), e3m2, e2m3 (FP6); FP4/FP6 codes are one per uint8, "
                  "in the low bits")
      ->capture_default_str();
  sub->add_option("--granularity", o->granularities,
                  "One scale per: tensor | row | tile:1xT (T along K) | block:BxB; T, B powers of two from 16 to 512. "
                  "Repeat to compare several on the same tensor")
      ->delimiter(',');
  sub->add_option("--scale", o->request.scale,
                  "Scale rule, each a library's own arithmetic (kernels/scale_rules.hpp): fp32 (sf = amax / fmt_max), "
                  "pow2 (rounded up to a power of two), deepgemm, te, te-pow2, div (x / sf), mx (OCP MX FLOOR), "
                  "mx:ceil, mx:even, mx:rceil (E8M0 scales), nvfp4, nvfp4:torchao (two-level, e2m1 only), nvfp4:4over6 "
                  "(TE's per-block choice of the map-to-4 or map-to-6 scale; tile:1x16 or block:16x16)")
      ->capture_default_str();
  sub->add_option("--scheme", o->scheme,
                  "Format, granularity and scale rule in one word: deepseek (e4m3, tile:1x128, weights block:128x128, "
                  "fp32), mxfp8 (e4m3, tile:1x32, mx:rceil), mxfp4 (e2m1, tile:1x32, mx), nvfp4 (e2m1, tile:1x16, "
                  "weights block:16x16, nvfp4); --operand picks the weights' granularity")
      ->check(non_empty())
      ->excludes("--granularity")
      ->excludes("--scale")
      ->excludes("--format");
  sub->add_option("--rounding", o->request.rounding,
                  "Rounding of the scaled elements: nearest (RNE) or stochastic (element (r, c) rounds up with "
                  "probability proportional to its distance from the value below, its draw from SplitMix64 of --seed "
                  "and r * cols + c; kernels/formats/stochastic_rounding.hpp)")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed of --rounding stochastic, 0 to 2^64 - 1 (default 0)");
  sub->add_option("--operand", o->operand,
                  "With --scheme: activation (default), gradient or weight; weights take the scheme's weight "
                  "granularity (block:128x128 for deepseek, block:16x16 for nvfp4: TE's 2-D weight scaling)")
      ->check(non_empty());
  sub->add_option("--codes", o->codes_out, "Write the FP8 codes (uint8, rows x cols) to this .npy")->check(non_empty());
  sub->add_option("--scales", o->scales_out, "Write the scales (float32, row-major over the tile grid) to this .npy")
      ->check(non_empty());
  sub->add_option("--dequant", o->dequant_out, "Write the dequantized tensor (float32) to this .npy")
      ->check(non_empty());
  sub->add_option("--global-scale", o->global_scale_out,
                  "nvfp4 rules: write the per-tensor decode scale (float32, shape [1]) to this .npy; "
                  "x' = code * (scale * global scale)")
      ->check(non_empty());
  sub->add_option("--rel-floor", o->rel_floor,
                  "max_rel counts only elements with |x| above this (default: 1% of the input's RMS)");
  sub->add_option("--backend", o->request.backend, "cpu, cuda or auto (cuda when a device is there)")->capture_default_str();
  sub->add_flag("--json", o->json, "Print the report as JSON");
  return {sub, [o] { return run_quantize(*o); }};
}

}  // namespace fp8lab::cli
