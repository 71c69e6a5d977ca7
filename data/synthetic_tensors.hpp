#pragma once
// Synthetic operands with documented distributions, reproducible across machines and
// standard libraries: std::mt19937_64 (fully specified by the standard) drives our own
// Box-Muller transform, since std::normal_distribution differs between implementations.
//
//   gaussian        x = z,                     z ~ N(0, 1)
//   student-t:NU    x = z / sqrt(chi2_NU / NU)  (heavy tails; NU a whole number >= 1)
//   uniform         x ~ U(0, 1)                (positive: sums with no cancellation)
// then every element of an outlier channel (column) is multiplied by outlier_scale: LLM
// activations carry a few channels far larger than the rest (LLM.int8, SmoothQuant).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fp8lab {

struct SyntheticSpec {
  std::int64_t rows = 0, cols = 0;
  std::string distribution = "gaussian";  // "gaussian", "student-t:NU" or "uniform"
  std::int64_t outlier_channels = 0;       // the first columns of a seeded shuffle
  double outlier_scale = 1.0;
  std::uint64_t seed = 0;
};

// Throws std::invalid_argument naming the bad field.
void validate(const SyntheticSpec& spec);

// rows x cols row-major FP32 (generated in FP64, rounded once). A large outlier_scale can
// round an element to inf: callers check the result finite (synth and the studies refuse it).
std::vector<float> synthesize(const SyntheticSpec& spec);

}  // namespace fp8lab
