#include "harness/requests/gemm_request.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "harness/requests/backend_select.hpp"
#include "harness/requests/memory_budget.hpp"
#include "harness/requests/quantize_request.hpp"
#include "harness/study/runner.hpp"  // kMaxThreads
#include "kernels/hadamard_transform.hpp"

namespace fp8lab {
namespace {

// The request with its scheme spelled out (A: the activation granularity, B: the weight one)
// and the empty accum / promotion given their defaults.
GemmRequest resolved(GemmRequest r) {
  if (!r.scheme.empty()) {
    const QuantizeScheme* s = nullptr;
    try {
      s = &find_scheme(r.scheme);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("--scheme: ") + e.what());
    }
    r.format = s->format;
    r.b_format.clear();
    r.a_granularity = scheme_granularity(*s, "activation");
    r.b_granularity = scheme_granularity(*s, "weight");
    r.scale = s->scale;
  }
  if (r.accum.empty()) r.accum = default_accum(r.scheme);
  if (r.promotion.empty()) r.promotion = AccumulationModel::parse(r.accum).default_promotion();
  return r;
}

// B's format: A's when not given; a bad spelling is named as B's, not confused with --format.
ElementFormat b_format_of(const GemmRequest& request, ElementFormat a_format) {
  if (request.b_format.empty()) return a_format;
  try {
    return parse_element_format(request.b_format);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("B's format (--b-format): ") + e.what());
  }
}

// The operand transformed by the RHT (K a multiple of 16, checked by run), refused with the
// option's name when the transform overflows FP32 (|x| near FLT_MAX / 4).
std::vector<float> rht_operand(const GemmOperand& x) {
  std::vector<float> y = random_hadamard_transform_16(x.values, x.rows, x.cols);
  if (!std::all_of(y.begin(), y.end(), [](float v) { return std::isfinite(v); }))
    throw std::invalid_argument("--rht: the Hadamard transform of " + x.label + " overflows FP32");
  return y;
}

// One operand's rounding from its option and seed, refused naming the options.
Rounding operand_rounding(const std::string& mode_text, const std::optional<std::uint64_t>& seed, char operand) {
  const std::string option = std::string("--") + operand + "-rounding";
  RoundingMode mode;
  try {
    mode = parse_rounding_mode(mode_text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(option + ": " + e.what());
  }
  if (seed && mode != RoundingMode::stochastic)
    throw std::invalid_argument(std::string("--") + operand + "-seed: only " + option + " stochastic takes a seed");
  return {mode, seed.value_or(0)};
}

}  // namespace

std::string default_accum(const std::string& scheme) {
  return scheme == "mxfp8" || scheme == "mxfp4" || scheme == "nvfp4" ? "b200" : "hopper";
}

GemmJob::GemmJob(const GemmRequest& request)
    : request_(resolved(request)),
      format_(parse_element_format(request_.format)),
      b_format_(b_format_of(request_, format_)),
      scale_rule_(parse_scale_rule(request_.scale)),
      config_{AccumulationModel::parse(request_.accum), PromotionInterval::parse(request_.promotion),
              parse_output_type(request_.output)},
      a_granularity_(Granularity::parse(request_.a_granularity)),
      b_granularity_(Granularity::parse(request_.b_granularity)),
      a_rounding_(operand_rounding(request_.a_rounding, request_.a_seed, 'a')),
      b_rounding_(operand_rounding(request_.b_rounding, request_.b_seed, 'b')) {
  if (request_.threads < 0 || request_.threads > kMaxThreads)
    throw std::invalid_argument("--threads must be 0 (all cores) to " + std::to_string(kMaxThreads) + ", got " +
                                std::to_string(request_.threads));
  backend_ = select_backend(request_.backend, /*needs_gemm=*/true);
}

GemmResult GemmJob::run(const GemmOperand& a, const GemmOperand& b, const std::vector<std::int64_t>& rows,
                        const std::vector<std::int64_t>& cols, bool with_errors) const {
  if (a.cols != b.cols)
    throw std::invalid_argument(a.label + " is " + std::to_string(a.rows) + "x" + std::to_string(a.cols) + " and " +
                                b.label + " is " + std::to_string(b.rows) + "x" + std::to_string(b.cols) +
                                ": A (M x K) and B (N x K) must share K");
  if (request_.rht && a.cols % kHadamardGroup != 0)
    throw std::invalid_argument("--rht: K = " + std::to_string(a.cols) +
                                " is not a multiple of 16 (the Hadamard transform's group along K)");
  {
    const auto rows_out = rows.empty() ? a.rows : static_cast<std::int64_t>(rows.size());
    const auto cols_out = cols.empty() ? b.rows : static_cast<std::int64_t>(cols.size());
    // --rht holds FP32 transformed copies of both operands beside the originals.
    const std::uint64_t rht_bytes =
        request_.rht ? 4ull * static_cast<std::uint64_t>(a.rows + b.rows) * static_cast<std::uint64_t>(a.cols) : 0;
    require_memory(gemm_peak_bytes(a.rows, b.rows, a.cols, rows_out, cols_out) + rht_bytes,
                   "gemm of " + a.label + " and " + b.label + " (" + std::to_string(rows_out) + " x " +
                       std::to_string(cols_out) + " outputs; --sample-rows/--sample-cols compute fewer)",
                   request_.ignore_memory_limit);
  }
  GemmResult r;
  // With --rht the quantizer sees the transformed operands; the errors below keep the originals.
  std::vector<float> transformed_a, transformed_b;
  std::span<const float> a_in = a.values, b_in = b.values;
  if (request_.rht) {
    transformed_a = rht_operand(a);
    transformed_b = rht_operand(b);
    a_in = transformed_a;
    b_in = transformed_b;
  }
  r.qa = backend_->quantize(a_in, a.rows, a.cols, {format_, a_granularity_, scale_rule_, a_rounding_});
  r.qb = backend_->quantize(b_in, b.rows, b.cols, {b_format_, b_granularity_, scale_rule_, b_rounding_});
  r.plan = plan_gemm(r.qa, r.qb, config_);  // refuses invalid combinations before any work
  if (std::string why = backend_->gemm_config_failure(r.qa, r.qb, config_); !why.empty())
    throw std::invalid_argument("--backend " + request_.backend + ": " + why);
  r.route = backend_->gemm_route(r.qa, r.qb, config_);
  const auto start = std::chrono::steady_clock::now();
  r.out = backend_->gemm_nt(r.qa, r.qb, config_, {request_.threads, false, rows, cols});
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (with_errors) r.errors = gemm_errors(a.values, b.values, r.qa, r.qb, r.out, rows, cols);
  return r;
}

}  // namespace fp8lab
