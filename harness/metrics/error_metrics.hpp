#pragma once
// Error metrics, one definition each (DESIGN.md section 2), shared by tests, the CLI and
// experiments. y is the value under test, r the reference. All sums run in FP64 in index
// order, so a metric is reproducible to the bit whatever the caller's threading.
#include <cstddef>
#include <cstdint>
#include <span>

namespace fp8lab {

struct ErrorMetrics {
  std::size_t count = 0;
  double rel_frobenius = 0;   // ||y - r|| / ||r||   (0 when y == r == 0, inf when only r == 0)
  double sqnr_db = 0;         // 20 log10(||r|| / ||y - r||)   (+inf when y == r)
  double deepgemm_diff = 0;   // 1 - 2 sum(y r) / sum(y^2 + r^2)   (0 when both are all zero)
  double max_abs = 0;         // max |y - r|
  double max_rel = 0;         // max |y - r| / |r| over |r| > rel_floor (0 when none qualifies)
  double rel_floor = 0;       // the floor used for max_rel, stated with it
  std::size_t rel_count = 0;  // how many elements had |r| > rel_floor
  double cosine = 0;          // sum(y r) / sqrt(sum(y^2) sum(r^2))   (1 when both are all zero)
};

// Throws std::invalid_argument when the spans differ in length.
ErrorMetrics error_metrics(std::span<const float> y, std::span<const float> r, double rel_floor);
ErrorMetrics error_metrics(std::span<const float> y, std::span<const double> r, double rel_floor);
ErrorMetrics error_metrics(std::span<const double> y, std::span<const double> r, double rel_floor);

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
