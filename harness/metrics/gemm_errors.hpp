#pragma once
// The three errors of a quantized GEMM (DESIGN.md section 2), against FP64 GEMMs summed in the
// fixed order of reference/fp64_dot_ref.hpp (the same bits on every x86-64 machine):
//   quantization  FP64 GEMM of the dequantized operands  vs FP64 GEMM of the originals
//   accumulation  the backend's output                    vs FP64 GEMM of the dequantized operands
//   total         the backend's output                    vs FP64 GEMM of the originals
//
// Sampling (for layers too large to compute whole on a CPU): the output rows are a simple
// random sample without replacement of n of the M rows (columns may be sampled too).
// Sums of squares over a sampled row are one cluster; rel_frobenius^2, deepgemm_diff and
// SQNR are ratios of such sums, estimated by the ratio estimator R = sum u_i / sum v_i with a
// delta-method standard error  se(R) = sqrt((1 - n/M) / (n (n - 1)) sum (u_i - R v_i)^2) / mean(v)
// and a 95% interval R +- 1.96 se (transformed for rel_frobenius = sqrt(R) and SQNR = -10 log10 R).
// Sampled maxima (max_abs, max_rel) are lower bounds on the full maxima and get no interval.
#include <cstdint>
#include <optional>
#include <string>
#include <random>
#include <span>
#include <vector>

#include "harness/metrics/error_metrics.hpp"
#include "kernels/quantization.hpp"

namespace fp8lab {

struct Interval95 {
  double low = 0, high = 0;
};

struct ErrorWithInterval {
  ErrorMetrics metrics;  // over the computed outputs
  bool sampled = false;  // intervals are meaningful only when true
  Interval95 rel_frobenius, sqnr_db, deepgemm_diff;
};

struct GemmErrors {
  ErrorWithInterval quantization, accumulation, total;
  std::int64_t rows_computed = 0, rows_total = 0, cols_computed = 0, cols_total = 0;
  double reference_rms = 0;  // RMS of the FP64 reference of the originals over the computed outputs
};

// a: M x K and b: N x K originals (row-major FP32); qa, qb their quantizations; out the
// backend's |rows| x |cols| result for the given selections (empty = all).
// max_rel's floor is 1% of reference_rms.
GemmErrors gemm_errors(std::span<const float> a, std::span<const float> b, const QuantizedTensor& qa,
                       const QuantizedTensor& qb, std::span<const float> out, const std::vector<std::int64_t>& rows,
                       const std::vector<std::int64_t>& cols);

// Why the errors are not numbers, or nothing: finite operands give finite metrics unless the
// FP32 output overflowed (an inf in C); then every error is inf or NaN and means nothing.
std::optional<std::string> non_finite_reason(const GemmErrors& errors, std::span<const float> out);

// Peak bytes of quantizing A (m x k) and B (n x k), the GEMM and gemm_errors over
// rows x cols of the output: FP32 operands and FP8 codes, the FP32 output, and the FP64
// copies and reference GEMMs of gemm_errors. An estimate for refusing what cannot fit.
std::uint64_t gemm_peak_bytes(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t rows, std::int64_t cols);

// n of the indices 0..total-1, a simple random sample without replacement (partial
// Fisher-Yates), sorted; empty (meaning all) when n is 0 or at least total.
std::vector<std::int64_t> sample_without_replacement(std::int64_t n, std::int64_t total, std::mt19937_64& rng);

// The interval of a ratio estimate from per-cluster numerators u and denominators v, for a
// sample of u.size() clusters out of `population` (exposed for tests).
Interval95 ratio_interval(const std::vector<double>& u, const std::vector<double>& v, std::int64_t population);

}  // namespace fp8lab
