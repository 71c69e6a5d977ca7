#include "harness/metrics/gemm_errors.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "harness/requests/memory_budget.hpp"
#include "reference/fp8_gemm_ref.hpp"

namespace fp8lab {
namespace {

std::vector<std::int64_t> all_or(const std::vector<std::int64_t>& selection, std::int64_t count) {
  if (!selection.empty()) return selection;
  std::vector<std::int64_t> all(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) all[static_cast<std::size_t>(i)] = i;
  return all;
}

Eigen::MatrixXd select_rows(std::span<const float> x, std::int64_t cols, const std::vector<std::int64_t>& rows) {
  Eigen::MatrixXd m(static_cast<Eigen::Index>(rows.size()), cols);
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::int64_t k = 0; k < cols; ++k) m(static_cast<Eigen::Index>(i), k) = x[static_cast<std::size_t>(rows[i] * cols + k)];
  return m;
}

const ref::FormatDefinition& reference_format(ElementFormat f) {
  switch (f.kind()) {
    case ElementFormat::Kind::e4m3: return ref::e4m3();
    case ElementFormat::Kind::e5m2: return ref::e5m2();
    case ElementFormat::Kind::e2m1: return ref::e2m1();
    case ElementFormat::Kind::e3m2: return ref::e3m2();
    case ElementFormat::Kind::e2m3: return ref::e2m3();
  }
  return ref::e4m3();
}

// Exact FP64 dequantization of the selected rows through the reference (one scale row per
// selected row, so the reference's tile arithmetic sees tile_rows = 1).
Eigen::MatrixXd dequantize_rows(const QuantizedTensor& q, const std::vector<std::int64_t>& rows) {
  const auto n = static_cast<Eigen::Index>(rows.size());
  ref::CodeMatrix codes(n, q.cols);
  Eigen::MatrixXd scales(n, q.scale_cols);
  for (Eigen::Index i = 0; i < n; ++i) {
    const std::int64_t r = rows[static_cast<std::size_t>(i)];
    for (std::int64_t k = 0; k < q.cols; ++k) codes(i, k) = q.codes[static_cast<std::size_t>(r * q.cols + k)];
    for (std::int64_t t = 0; t < q.scale_cols; ++t)
      scales(i, t) = q.scales[static_cast<std::size_t>((r / q.tile_rows) * q.scale_cols + t)];
  }
  // Two-level (nvfp4) rules: the tile scale times the per-tensor decode factor, exact in FP64.
  scales *= static_cast<double>(q.tensor_scale.decode);
  const ref::Fp8OperandRef view{&codes, &scales, 1, q.tile_cols, &reference_format(q.config.format)};
  return ref::dequantize_fp64(view);
}

ErrorWithInterval compare(const Eigen::MatrixXd& y, const Eigen::MatrixXd& r, double floor, std::int64_t rows_total) {
  // Eigen's default storage is column-major; metrics take row-major spans of the same order for both.
  const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> yr = y, rr = r;
  ErrorWithInterval e;
  e.metrics = error_metrics(std::span<const double>(yr.data(), static_cast<std::size_t>(yr.size())),
                            std::span<const double>(rr.data(), static_cast<std::size_t>(rr.size())), floor);
  e.sampled = y.rows() < rows_total;
  if (!e.sampled) return e;
  // Per-row sums, each on values scaled by a power of two as error_metrics scales them (exact),
  // so that neither a square nor ratio_interval's squares of the row sums can overflow; the
  // ratio estimator is homogeneous, so its interval is scaled back exactly. Both ratios are
  // of non-negative sums: err2 / both2 is DeepGEMM's diff without its cancellation.
  double max_y = 0, max_r = 0;
  for (Eigen::Index i = 0; i < yr.size(); ++i) {
    max_y = std::max(max_y, std::fabs(yr.data()[i]));
    max_r = std::max(max_r, std::fabs(rr.data()[i]));
  }
  const int p_e = magnitude_exponent(e.metrics.max_abs), p_r = magnitude_exponent(max_r),
            p = magnitude_exponent(std::max(max_y, max_r));
  const double s_e = std::ldexp(1.0, -p_e), s_r = std::ldexp(1.0, -p_r), s = std::ldexp(1.0, -p);
  std::vector<double> err2, ref2, both2;
  for (Eigen::Index i = 0; i < y.rows(); ++i) {
    double a = 0, b = 0, c = 0;
    for (Eigen::Index j = 0; j < y.cols(); ++j) {
      const double d = (yr(i, j) - rr(i, j)) * s_e, rs = rr(i, j) * s_r, yb = yr(i, j) * s, rb = rr(i, j) * s;
      a += d * d;
      b += rs * rs;
      c += yb * yb + rb * rb;
    }
    err2.push_back(a);
    ref2.push_back(b);
    both2.push_back(c);
  }
  const Interval95 r2 = ratio_interval(err2, ref2, rows_total);  // in units of 2^(2 (p_e - p_r))
  e.rel_frobenius = {std::ldexp(std::sqrt(r2.low), p_e - p_r), std::ldexp(std::sqrt(r2.high), p_e - p_r)};
  const double inf = std::numeric_limits<double>::infinity();
  const auto db = [&](double x) { return -10.0 * std::log10(std::ldexp(x, 2 * (p_e - p_r))); };
  e.sqnr_db = {r2.high > 0 ? db(r2.high) : inf, r2.low > 0 ? db(r2.low) : inf};
  const Interval95 d = ratio_interval(err2, both2, rows_total);  // in units of 2^(2 (p_e - p))
  e.deepgemm_diff = {std::ldexp(d.low, 2 * (p_e - p)), std::ldexp(d.high, 2 * (p_e - p))};
  return e;
}

}  // namespace

std::vector<std::int64_t> sample_without_replacement(std::int64_t n, std::int64_t total, std::mt19937_64& rng) {
  if (n <= 0 || n >= total) return {};
  std::vector<std::int64_t> all(static_cast<std::size_t>(total));
  for (std::int64_t i = 0; i < total; ++i) all[static_cast<std::size_t>(i)] = i;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto j = i + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(total - i));
    std::swap(all[static_cast<std::size_t>(i)], all[static_cast<std::size_t>(j)]);
  }
  all.resize(static_cast<std::size_t>(n));
  std::sort(all.begin(), all.end());
  return all;
}

Interval95 ratio_interval(const std::vector<double>& u, const std::vector<double>& v, std::int64_t population) {
  const auto n = static_cast<double>(u.size());
  double su = 0, sv = 0;
  for (std::size_t i = 0; i < u.size(); ++i) {
    su += u[i];
    sv += v[i];
  }
  if (u.size() < 2 || sv <= 0) return {0, std::numeric_limits<double>::infinity()};
  const double ratio = su / sv, mean_v = sv / n;
  double s2 = 0;
  for (std::size_t i = 0; i < u.size(); ++i) s2 += (u[i] - ratio * v[i]) * (u[i] - ratio * v[i]);
  s2 /= (n - 1);
  const double finite_population = std::max(0.0, 1.0 - n / static_cast<double>(population));
  const double se = std::sqrt(finite_population * s2 / n) / mean_v;
  return {std::max(0.0, ratio - 1.96 * se), ratio + 1.96 * se};
}

GemmErrors gemm_errors(std::span<const float> a, std::span<const float> b, const QuantizedTensor& qa,
                       const QuantizedTensor& qb, std::span<const float> out, const std::vector<std::int64_t>& rows,
                       const std::vector<std::int64_t>& cols) {
  const std::vector<std::int64_t> r = all_or(rows, qa.rows), c = all_or(cols, qb.rows);
  const Eigen::MatrixXd original = ref::gemm_fp64(select_rows(a, qa.cols, r), select_rows(b, qb.cols, c));
  const Eigen::MatrixXd dequantized = ref::gemm_fp64(dequantize_rows(qa, r), dequantize_rows(qb, c));
  Eigen::MatrixXd backend(original.rows(), original.cols());
  for (Eigen::Index i = 0; i < backend.rows(); ++i)
    for (Eigen::Index j = 0; j < backend.cols(); ++j)
      backend(i, j) = out[static_cast<std::size_t>(i * backend.cols() + j)];
  GemmErrors g;
  g.reference_rms = root_mean_square(std::span<const double>(original.data(), static_cast<std::size_t>(original.size())));
  const double floor = 0.01 * g.reference_rms;
  g.rows_computed = static_cast<std::int64_t>(r.size());
  g.rows_total = qa.rows;
  g.cols_computed = static_cast<std::int64_t>(c.size());
  g.cols_total = qb.rows;
  g.quantization = compare(dequantized, original, floor, qa.rows);
  g.accumulation = compare(backend, dequantized, floor, qa.rows);
  g.total = compare(backend, original, floor, qa.rows);
  return g;
}

std::optional<std::string> non_finite_reason(const GemmErrors& errors, std::span<const float> out) {
  for (std::size_t i = 0; i < out.size(); ++i)
    if (!std::isfinite(out[i]))
      return "output element " + std::to_string(i) + " of the computed C is " + (std::isnan(out[i]) ? "NaN" : "infinite") +
             ": the FP32 result overflowed, so no error is defined (scale the operands down)";
  for (const auto& [name, e] : {std::pair<const char*, const ErrorWithInterval*>{"quantization", &errors.quantization},
                                {"accumulation", &errors.accumulation},
                                {"total", &errors.total}}) {
    const ErrorMetrics& m = e->metrics;
    for (const double v : {m.rel_frobenius, m.deepgemm_diff, m.max_abs, m.max_rel, m.one_minus_cosine})
      if (!std::isfinite(v))
        return std::string(name) + " error is not finite (the FP64 reference overflowed or is all zero)";
  }
  return std::nullopt;
}

std::uint64_t gemm_peak_bytes(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t rows, std::int64_t cols) {
  const auto u = [](std::int64_t x) { return static_cast<std::uint64_t>(std::max<std::int64_t>(0, x)); };
  const auto mul = saturating_mul;
  const auto add = saturating_add;
  const std::uint64_t operands = mul(add(u(m), u(n)), u(k));  // A and B elements
  const std::uint64_t selected = mul(add(u(rows), u(cols)), u(k));
  const std::uint64_t outputs = mul(u(rows), u(cols));
  // FP32 operands (4) + codes (1) + packed copies (1); FP64 selections, original and
  // dequantized (16); FP32 output (4) and three FP64 matrices of it (24).
  return add(add(mul(operands, 6), mul(selected, 16)), mul(outputs, 28));
}

}  // namespace fp8lab
