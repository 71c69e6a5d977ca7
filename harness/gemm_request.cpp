#include "harness/gemm_request.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "harness/backend_select.hpp"
#include "harness/memory_budget.hpp"
#include "harness/study/runner.hpp"  // kMaxThreads

namespace fp8lab {
namespace {

// B's format: A's when not given; a bad spelling is named as B's, not confused with --format.
Fp8Format b_format_of(const GemmRequest& request, Fp8Format a_format) {
  if (request.b_format.empty()) return a_format;
  if (request.b_format == "e4m3" || request.b_format == "e5m2") return parse_fp8_format(request.b_format);
  throw std::invalid_argument("B's format (--b-format) '" + request.b_format + "' is not one of e4m3, e5m2");
}

}  // namespace

GemmJob::GemmJob(const GemmRequest& request)
    : request_(request),
      format_(parse_fp8_format(request.format)),
      b_format_(b_format_of(request, format_)),
      scale_rule_(parse_gemm_scale_rule(request.scale)),
      config_{AccumulationModel::parse(request.accum), PromotionInterval::parse(request.promotion),
              parse_output_type(request.output)},
      a_granularity_(Granularity::parse(request.a_granularity)),
      b_granularity_(Granularity::parse(request.b_granularity)) {
  if (request.threads < 0 || request.threads > kMaxThreads)
    throw std::invalid_argument("--threads must be 0 (all cores) to " + std::to_string(kMaxThreads) + ", got " +
                                std::to_string(request.threads));
  backend_ = select_backend(request.backend, /*needs_gemm=*/true);
}

GemmResult GemmJob::run(const GemmOperand& a, const GemmOperand& b, const std::vector<std::int64_t>& rows,
                        const std::vector<std::int64_t>& cols, bool with_errors) const {
  if (a.cols != b.cols)
    throw std::invalid_argument(a.label + " is " + std::to_string(a.rows) + "x" + std::to_string(a.cols) + " and " +
                                b.label + " is " + std::to_string(b.rows) + "x" + std::to_string(b.cols) +
                                ": A (M x K) and B (N x K) must share K");
  {
    const auto rows_out = rows.empty() ? a.rows : static_cast<std::int64_t>(rows.size());
    const auto cols_out = cols.empty() ? b.rows : static_cast<std::int64_t>(cols.size());
    require_memory(gemm_peak_bytes(a.rows, b.rows, a.cols, rows_out, cols_out),
                   "gemm of " + a.label + " and " + b.label + " (" + std::to_string(rows_out) + " x " +
                       std::to_string(cols_out) + " outputs; --sample-rows/--sample-cols compute fewer)",
                   request_.ignore_memory_limit);
  }
  GemmResult r;
  r.qa = backend_->quantize(a.values, a.rows, a.cols, {format_, a_granularity_, scale_rule_});
  r.qb = backend_->quantize(b.values, b.rows, b.cols, {b_format_, b_granularity_, scale_rule_});
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
