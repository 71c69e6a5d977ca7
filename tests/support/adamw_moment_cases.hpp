#pragma once
// What the AdamW moment format tests (tests/unit/adamw_moment_formats*_test.cpp) share: the FP8
// moment formats as the FP64 reference sees them, bit equality of values and of whole stored
// states, the decoded moments; and a run-like optimizer state, which tests/unit/adamw_test.cpp
// steps too.
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "harness/train/adamw.hpp"
#include "reference/float_formats_ref.hpp"

namespace fp8lab::test {

// An FP8 moment format as the reference sees it: the element formats and elements per scale
// (0: one scale per tensor).
struct Fp8Storage {
  train::MomentFormat format;
  const ref::FormatDefinition* m;
  const ref::FormatDefinition* v;
  std::size_t group;
};

inline std::vector<Fp8Storage> fp8_storages() {
  return {{train::MomentFormat::e4m3, &ref::e4m3(), &ref::e4m3(), 0},
          {train::MomentFormat::e4m3_1x128, &ref::e4m3(), &ref::e4m3(), 128},
          {train::MomentFormat::e4m3_e5m2, &ref::e4m3(), &ref::e5m2(), 0}};
}

inline constexpr train::MomentFormat kAllFormats[] = {train::MomentFormat::fp32, train::MomentFormat::bf16,
                                                     train::MomentFormat::e4m3, train::MomentFormat::e4m3_1x128,
                                                     train::MomentFormat::e4m3_e5m2};

// Bit-identical, or both NaN.
inline bool same(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}
inline bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

inline std::vector<float> decoded_m(const train::AdamWMoments& s) {
  std::vector<float> r(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) r[i] = s.m(i);
  return r;
}
inline std::vector<float> decoded_v(const train::AdamWMoments& s) {
  std::vector<float> r(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) r[i] = s.v(i);
  return r;
}
inline std::vector<double> wide(const std::vector<float>& x) { return {x.begin(), x.end()}; }

// The whole stored state, bit for bit (codes, scales, decoded values).
inline bool same_state(const train::AdamWMoments& a, const train::AdamWMoments& b) {
  if (a.size() != b.size() || a.format() != b.format()) return false;
  const auto same_spans = [](auto x, auto y) {
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!same(static_cast<float>(x[i]), static_cast<float>(y[i]))) return false;
    return true;
  };
  return same_spans(a.m_codes(), b.m_codes()) && same_spans(a.v_codes(), b.v_codes()) &&
         same_spans(a.m_scales(), b.m_scales()) && same_spans(a.v_scales(), b.v_scales()) &&
         same_spans(std::span<const float>(decoded_m(a)), std::span<const float>(decoded_m(b))) &&
         same_spans(std::span<const float>(decoded_v(a)), std::span<const float>(decoded_v(b)));
}

struct Case {
  std::vector<float> p, m, v, g;
};

// Parameters ~ N(0, 0.02^2); gradients ~ N(0, 1e-3^2) with every 97th a 100x outlier and every
// 89th tiny (1e-9, where eps matters); moments as a run would have them: m ~ g-like, v ~ g^2-like.
inline Case make_case(std::uint64_t seed, std::size_t n) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;  // values only need to be FP32 and varied, not portable
  Case c;
  for (std::size_t i = 0; i < n; ++i) {
    double g = 1e-3 * normal(rng);
    if (i % 97 == 0) g *= 100;
    if (i % 89 == 0) g = 1e-9 * normal(rng);
    c.p.push_back(static_cast<float>(0.02 * normal(rng)));
    c.g.push_back(static_cast<float>(g));
    c.m.push_back(static_cast<float>(0.5 * g + 1e-4 * normal(rng)));
    c.v.push_back(static_cast<float>(g * g * (1 + std::fabs(normal(rng)))));
  }
  return c;
}

}  // namespace fp8lab::test
