#pragma once
// Error metrics, one definition each (DESIGN.md section 2), shared by tests, the CLI and
// experiments. y is the value under test, r the reference. All sums run in FP64 in index
// order, so a metric is reproducible to the bit whatever the caller's threading or ISA.
//
// Every metric is computed without cancellation (each is accurate to a few units of FP64
// rounding times the length, relative to its own value, however close y is to r; see
// error_metrics.cpp) and without overflow or underflow of squares: each sum of squares runs
// on values scaled by a power of two (exact) that brings their largest magnitude into
// [0.5, 1), and the scales are applied to the finished ratios.
#include <cstddef>
#include <cstdint>
#include <span>

namespace fp8lab {

struct ErrorMetrics {
  std::size_t count = 0;
  double rel_frobenius = 0;     // ||y - r|| / ||r||   (0 when y == r == 0, inf when only r == 0)
  double sqnr_db = 0;           // 20 log10(||r|| / ||y - r||)   (+inf when y == r)
  double deepgemm_diff = 0;     // DeepGEMM's 1 - 2 sum(y r) / sum(y^2 + r^2), computed as the equal
                                // sum((y - r)^2) / sum(y^2 + r^2)   (0 when both are all zero)
  double max_abs = 0;           // max |y - r|
  double max_rel = 0;           // max |y - r| / |r| over |r| > rel_floor (0 when none qualifies)
  double rel_floor = 0;         // the floor used for max_rel, stated with it
  std::size_t rel_count = 0;    // how many elements had |r| > rel_floor
  double one_minus_cosine = 0;  // 1 - cos(y, r) = 0.5 || y/||y|| - r/||r|| ||^2   (0 when both are all
                                // zero, 1 when exactly one is)
};
// A NaN or infinity in y or r makes the four ratio metrics (rel_frobenius, sqnr_db,
// deepgemm_diff, one_minus_cosine) NaN; max_abs and max_rel keep the IEEE result (inf or NaN).

// Throws std::invalid_argument when the spans differ in length.
ErrorMetrics error_metrics(std::span<const float> y, std::span<const float> r, double rel_floor);
ErrorMetrics error_metrics(std::span<const float> y, std::span<const double> r, double rel_floor);
ErrorMetrics error_metrics(std::span<const double> y, std::span<const double> r, double rel_floor);

// p such that amax * 2^-p lies in [0.5, 1), clamped to [-1021, 1023] so that 2^-p is a finite
// double; 0 for amax 0 or not finite. Scaling by 2^-p is exact (above the subnormal range),
// so a sum of squares of x 2^-p times 2^2p is the unscaled sum, bit for bit, wherever the
// unscaled sum neither overflows nor underflows.
int magnitude_exponent(double amax);

// sqrt(mean(x^2)) in FP64, index order, scaled as above (0 for an empty span).
double root_mean_square(std::span<const float> x);
double root_mean_square(std::span<const double> x);

// For claims of bit-exactness between two FP32 results.
struct BitwiseComparison {
  std::size_t count = 0;
  std::size_t mismatches = 0;      // elements whose bit patterns differ (NaN vs NaN of another payload counts)
  std::uint64_t max_ulp = 0;       // max distance in units in the last place, over pairs with no NaN
  std::size_t nan_mismatches = 0;  // pairs where exactly one side is NaN
};

// ULP distance between two non-NaN FP32 values: how many representable floats apart they
// are (+0 and -0 are 0 apart; the largest finite and inf are 1 apart).
std::uint64_t ulp_distance(float a, float b);

BitwiseComparison compare_bitwise(std::span<const float> y, std::span<const float> r);

}  // namespace fp8lab
