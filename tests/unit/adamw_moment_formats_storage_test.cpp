// AdamW's FP8 moment formats (harness/train/adamw.hpp) as storage, against the FP64 reference
// written from their definitions (reference/adamw_ref.hpp): the names, bytes(), set() and assign(),
// the stored codes, scales and values bit for bit (adversarial groups where the scale rule turns
// included), and the storage's round trip. The step on stored moments:
// adamw_moment_formats_test.cpp.
#include <catch2/catch.hpp>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "harness/train/adamw.hpp"
#include "reference/adamw_ref.hpp"
#include "reference/float_formats_ref.hpp"
#include "tests/support/adamw_moment_cases.hpp"

using namespace fp8lab;
using namespace fp8lab::train;
using namespace fp8lab::test;  // tests/support/adamw_moment_cases.hpp

namespace {

// Tensors for the storage tests: normal values over a random decade, magnitudes log-uniform over
// 150 octaves (FP32 subnormals included, so the scale's 2^-126 floor and the flush to zero show),
// an all-zero stretch, and a whole tensor below 2^-126.
std::vector<std::vector<float>> storage_tensors(std::uint64_t seed, bool non_negative) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform(0, 1);
  std::vector<std::vector<float>> out;
  for (const std::size_t n : {1, 127, 128, 129, 300, 1000}) {
    std::vector<float> a(n), b(n), c(n), d(n);
    const double decade = std::pow(10.0, -12 + 14 * uniform(rng));
    for (std::size_t i = 0; i < n; ++i) {
      const double sign = non_negative || uniform(rng) < 0.5 ? 1.0 : -1.0;
      a[i] = static_cast<float>(non_negative ? std::fabs(decade * normal(rng)) : decade * normal(rng));
      const int octave = -140 + static_cast<int>(150 * uniform(rng));
      b[i] = static_cast<float>(sign * std::ldexp(1.0, octave) * (1 + uniform(rng)));
      c[i] = i >= 128 && i < 256 ? 0.0f : a[i];
      d[i] = static_cast<float>(sign * std::ldexp(uniform(rng), -128));
    }
    out.insert(out.end(), {a, b, c, d});
  }
  return out;
}

// Groups whose amax sits where the scale rule turns: exactly on fmt_max 2^k (s = 2^k, top code
// fmt_max), one FP32 step below it (the same s), one step above (s = 2^(k+1), amax / s just above
// fmt_max / 2), and on the tie just above fmt_max / 2 at s = 2^(k+1) (`tie`: E4M3 232, which ties
// down to 224; E5M2 30720, which ties up), for k from the scale's floor to near 2^127; the other
// elements of each group uniform in [-amax, amax] (or [0, amax]). Group j takes variant
// (variant + j) mod 36.
std::vector<float> adversarial(double fmt_max, double tie, std::size_t n, std::size_t group, int variant,
                               bool non_negative, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-1, 1);
  std::vector<float> x(n);
  const int ks[] = {-140, -130, -126, -40, -1, 0, 1, 30, 110};
  for (std::size_t begin = 0, j = 0; begin < n; begin += group, ++j) {
    const std::size_t v = (static_cast<std::size_t>(variant) + j) % 36;
    const int k = ks[v / 4];
    const auto top = static_cast<float>(std::ldexp(fmt_max, k));
    const float amax = v % 4 == 0   ? top
                       : v % 4 == 1 ? std::nextafter(top, 0.0f)
                       : v % 4 == 2 ? std::nextafter(top, 2 * top)
                                    : static_cast<float>(std::ldexp(tie, k + 1));
    const std::size_t end = std::min(n, begin + group);
    for (std::size_t i = begin; i < end; ++i) {
      const double r = uniform(rng);
      x[i] = static_cast<float>(amax * (non_negative ? std::fabs(r) : r));
    }
    x[begin + (end - begin) / 2] = non_negative || j % 2 ? amax : -amax;
  }
  return x;
}

// storage_tensors and then 36 adversarial tensors (one variant per group: 36 groups of 128 and a
// ragged 7 when grouped; 300 elements, all one variant, per tensor), as (m, v) pairs.
std::vector<std::pair<std::vector<float>, std::vector<float>>> storage_cases(const Fp8Storage& f, std::uint64_t seed) {
  std::vector<std::pair<std::vector<float>, std::vector<float>>> tensors;
  const auto ms = storage_tensors(seed, false), vs = storage_tensors(seed + 1, true);
  for (std::size_t t = 0; t < ms.size(); ++t) tensors.emplace_back(ms[t], vs[t]);
  const bool v_e5m2 = f.v == &ref::e5m2();
  const std::size_t n = f.group ? 128 * 36 + 7 : 300, group = f.group ? f.group : n;
  for (int variant = 0; variant < 36; ++variant)
    tensors.emplace_back(adversarial(448, 232, n, group, variant, false, seed + 2 * variant),
                         v_e5m2 ? adversarial(57344, 30720, n, group, variant, true, seed + 2 * variant + 1)
                                : adversarial(448, 232, n, group, variant, true, seed + 2 * variant + 1));
  return tensors;
}

}  // namespace

TEST_CASE("adamw moment formats: every name parses and prints back; fp8 and unknown names are refused listing all") {
  for (const char* name : {"fp32", "bf16", "e4m3", "e4m3_1x128", "e4m3_e5m2"})
    CHECK(std::string(moment_format_name(parse_moment_format(name))) == name);
  for (const std::string bad : {"fp8", "E4M3", "e5m2", "e4m3_1x64", "bf16 ", ""}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_AS(parse_moment_format(bad), std::invalid_argument);
    CHECK_THROWS_WITH(parse_moment_format(bad),
                      Catch::Contains("'" + bad + "' is not one of fp32, bf16, e4m3, e4m3_1x128, e4m3_e5m2"));
  }
}

TEST_CASE("adamw moment formats: bytes() counts codes and 4-byte scales exactly") {
  for (const std::size_t n : {0, 1, 127, 128, 129, 300, 4096}) {
    INFO("n = " << n);
    CHECK(AdamWMoments(n, MomentFormat::fp32).bytes() == 2 * n * 4);
    CHECK(AdamWMoments(n, MomentFormat::bf16).bytes() == 2 * n * 2);
    CHECK(AdamWMoments(n, MomentFormat::e4m3).bytes() == 2 * (n + 4));
    CHECK(AdamWMoments(n, MomentFormat::e4m3_e5m2).bytes() == 2 * (n + 4));
    const std::size_t groups = (n + 127) / 128;
    const AdamWMoments grouped(n, MomentFormat::e4m3_1x128);
    CHECK(grouped.bytes() == 2 * (n + 4 * groups));
    CHECK(grouped.m_scales().size() == groups);
    CHECK(grouped.v_codes().size() == n);
  }
}

TEST_CASE("adamw moment formats: set() refuses the FP8 formats; assign() equals set() for fp32 and bf16") {
  for (const Fp8Storage& f : fp8_storages()) {
    AdamWMoments s(4, f.format);
    CHECK_THROWS_AS(s.set(0, 1.0f, 1.0f), std::logic_error);
    CHECK_THROWS_WITH(s.set(0, 1.0f, 1.0f), Catch::Contains("assign"));
  }
  const Case c = make_case(5, 500);
  for (const MomentFormat f : kAllFormats) {
    INFO(moment_format_name(f));
    AdamWMoments s(500, f);
    CHECK_THROWS_AS(s.assign(std::vector<float>(499), std::vector<float>(500)), std::invalid_argument);
    CHECK_THROWS_AS(s.assign(std::vector<float>(500), std::vector<float>(501)), std::invalid_argument);
    if (f != MomentFormat::fp32 && f != MomentFormat::bf16) continue;
    AdamWMoments by_element(500, f);
    s.assign(c.m, c.v);
    for (std::size_t i = 0; i < 500; ++i) by_element.set(i, c.m[i], c.v[i]);
    for (std::size_t i = 0; i < 500; ++i) {
      REQUIRE(same(s.m(i), by_element.m(i)));
      REQUIRE(same(s.v(i), by_element.v(i)));
    }
  }
}

TEST_CASE("adamw moment formats: stored codes, scales and values equal the reference's, bit for bit") {
  std::size_t groups_checked = 0, floored = 0, flushed = 0;
  for (const Fp8Storage& f : fp8_storages()) {
    const auto cases = storage_cases(f, 17);
    for (std::size_t t = 0; t < cases.size(); ++t) {
      auto [m, v] = cases[t];
      if (t % 4 == 1 && t < 24 && m.size() > 200) {
        m[130] = std::numeric_limits<float>::quiet_NaN();  // a NaN group, and one too large to store
        v[5] = 0x1.000002p127f;
      }
      INFO(moment_format_name(f.format) << ", tensor " << t << " of " << m.size());
      AdamWMoments s(m.size(), f.format);
      s.assign(m, v);
      for (const bool is_m : {true, false}) {
        const ref::Pow2GroupsRef r =
            ref::quantize_pow2_groups_ref(wide(is_m ? m : v), f.group, is_m ? *f.m : *f.v);
        const auto codes = is_m ? s.m_codes() : s.v_codes();
        const auto scales = is_m ? s.m_scales() : s.v_scales();
        REQUIRE(scales.size() == r.scales.size());
        for (std::size_t j = 0; j < scales.size(); ++j) {
          INFO((is_m ? "m" : "v") << " group " << j);
          REQUIRE(same(static_cast<double>(scales[j]), r.scales[j]));
          floored += r.scales[j] == 0x1p-126;
        }
        groups_checked += scales.size();
        for (std::size_t i = 0; i < codes.size(); ++i) {
          INFO((is_m ? "m" : "v") << " element " << i << " x " << (is_m ? m[i] : v[i]));
          REQUIRE(codes[i] == r.codes[i]);
          REQUIRE(same(static_cast<double>(is_m ? s.m(i) : s.v(i)), r.values[i]));
          flushed += (is_m ? m[i] : v[i]) != 0 && r.values[i] == 0;
        }
      }
    }
  }
  // The inputs reached the corners they are there for.
  CHECK(groups_checked > 100);
  CHECK(floored > 0);
  CHECK(flushed > 0);
}

TEST_CASE("adamw moment formats: storing the decoded moments again gives the same values; codes and scales too "
          "but where the scale halves") {
  // adamw.cpp (quantize_groups) proves: re-quantizing decoded values leaves every value as it is;
  // codes and scale stay too, unless the group's amax / s rounds down onto fmt_max / 2, where the
  // scale halves and the codes double; a second round trip changes nothing at all. The
  // adversarial groups (one step above fmt_max 2^k, E4M3's tie at 232) reach the halving case.
  std::size_t halved = 0, same_codes = 0;
  for (const Fp8Storage& f : fp8_storages()) {
    const auto tensors = storage_cases(f, 41);
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      const auto& [m, v] = tensors[t];
      INFO(moment_format_name(f.format) << ", tensor " << t);
      AdamWMoments once(m.size(), f.format), twice(m.size(), f.format), thrice(m.size(), f.format);
      once.assign(m, v);
      twice.assign(decoded_m(once), decoded_v(once));
      thrice.assign(decoded_m(twice), decoded_v(twice));
      for (std::size_t i = 0; i < m.size(); ++i) {
        REQUIRE(same(twice.m(i), once.m(i)));
        REQUIRE(same(twice.v(i), once.v(i)));
      }
      REQUIRE(same_state(thrice, twice));
      for (const bool is_m : {true, false}) {
        const ref::FormatDefinition& element = is_m ? *f.m : *f.v;
        const auto s1 = is_m ? once.m_scales() : once.v_scales(), s2 = is_m ? twice.m_scales() : twice.v_scales();
        const auto c1 = is_m ? once.m_codes() : once.v_codes(), c2 = is_m ? twice.m_codes() : twice.v_codes();
        const std::size_t g = once.group_size();
        for (std::size_t j = 0; j < s1.size(); ++j) {
          INFO((is_m ? "m" : "v") << " group " << j << " scale " << s1[j] << " -> " << s2[j]);
          const std::size_t begin = j * g, end = std::min(m.size(), begin + g);
          if (same(s1[j], s2[j])) {
            for (std::size_t i = begin; i < end; ++i) REQUIRE(c1[i] == c2[i]);
            ++same_codes;
            continue;
          }
          // The one other case: s halves, codes double, and the old top code was fmt_max / 2.
          REQUIRE(s2[j] == s1[j] / 2);
          double top = 0;
          for (std::size_t i = begin; i < end; ++i) {
            const double q1 = static_cast<double>(is_m ? once.m(i) : once.v(i)) / s1[j];  // exact
            REQUIRE(c2[i] == ref::code_of_value(2 * q1, element));
            top = std::max(top, std::fabs(q1));
          }
          REQUIRE(top == element.max_finite / 2);
          ++halved;
        }
      }
    }
  }
  CHECK(halved > 0);  // the adversarial groups did reach the halving case
  CHECK(same_codes > halved);
}
