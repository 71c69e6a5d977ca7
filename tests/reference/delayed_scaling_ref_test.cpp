// FP8 delayed scaling (Transformer Engine's DelayedScaling) against hand-derived trajectories
// and against its FP64 reference on random amax sequences, scale bit for bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/loss_scaling/delayed_scaling.hpp"
#include "reference/delayed_scaling_ref.hpp"
#include "reference/float_formats_ref.hpp"

using namespace fp8lab;

namespace {

void follow(DelayedScaler& s, const std::vector<std::pair<float, float>>& steps) {
  for (std::size_t i = 0; i < steps.size(); ++i) {
    s.update(steps[i].first);
    INFO("step " << i << ": amax " << steps[i].first);
    CHECK(s.scale() == steps[i].second);
  }
}

}  // namespace

TEST_CASE("delayed scaling e4m3: max over a window of 3 rolls over") {
  DelayedScaler s({Fp8Format::e4m3, 3, AmaxReduction::max, 0});
  CHECK(s.scale() == 1.0f);  // before any amax: TE starts at 1
  // 448 / max(window): the 4 stays in the window for three updates, then drops out.
  // The 0.5s take over only once both 1s have left the window.
  follow(s, {{2, 224}, {4, 112}, {1, 112}, {1, 112}, {1, 448}, {0.5f, 448}, {0.5f, 448}, {0.5f, 896}});
  CHECK(s.history() == std::vector<float>{0.5f, 0.5f, 0.5f});
  CHECK(s.scale_inverse() == 1.0f / 896);
}

TEST_CASE("delayed scaling: margin, most_recent, and amax zero, inf or NaN keep the previous scale") {
  DelayedScaler margin2({Fp8Format::e5m2, 4, AmaxReduction::max, 2});
  follow(margin2, {{1, 57344.0f / 4}, {2, 57344.0f / 8}});
  DelayedScaler recent({Fp8Format::e4m3, 16, AmaxReduction::most_recent, 0});
  follow(recent, {{4, 112}, {0, 112}, {1, 448}, {std::numeric_limits<float>::infinity(), 448},
                  {std::numeric_limits<float>::quiet_NaN(), 448}, {8, 56}});
  // An all-zero window (the first steps of a tensor that is all zeros) keeps the start value 1.
  DelayedScaler zeros({Fp8Format::e4m3, 2, AmaxReduction::max, 0});
  follow(zeros, {{0, 1}, {0, 1}, {2, 224}, {0, 224}, {0, 224}});
  // max: an inf in the window freezes the scale until it rolls out; a NaN is passed over.
  DelayedScaler with_inf({Fp8Format::e4m3, 2, AmaxReduction::max, 0});
  follow(with_inf, {{2, 224}, {std::numeric_limits<float>::infinity(), 224}, {4, 224}, {4, 112},
                    {std::numeric_limits<float>::quiet_NaN(), 112}, {std::numeric_limits<float>::quiet_NaN(), 112},
                    {8, 56}});
  // An amax so small that 448 / amax overflows FP32: the scale is FP32's max.
  DelayedScaler tiny({Fp8Format::e4m3, 1, AmaxReduction::max, 0});
  follow(tiny, {{1e-44f, std::numeric_limits<float>::max()}});
}

TEST_CASE("delayed scaling: bad config values are rejected with the field named") {
  CHECK_THROWS_WITH(DelayedScaler({Fp8Format::e4m3, 0, AmaxReduction::max, 0}),
                    Catch::StartsWith("delayed scaling: field 'history_length'"));
  CHECK_THROWS_WITH(DelayedScaler({Fp8Format::e4m3, -5, AmaxReduction::max, 0}),
                    Catch::StartsWith("delayed scaling: field 'history_length'"));
  CHECK_THROWS_WITH(DelayedScaler({Fp8Format::e4m3, 4, AmaxReduction::max, -1}),
                    Catch::StartsWith("delayed scaling: field 'margin'"));
  CHECK_THROWS_WITH(parse_amax_reduction("mean"), Catch::Contains("not one of max, most_recent"));
}

TEST_CASE("delayed scaling: equals the FP64 reference on 10^4 random amax sequences") {
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<int> length(1, 9), margin(0, 5), steps(1, 60), exponent(-149, 127), kind(0, 19);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int sequence = 0; sequence < 10000; ++sequence) {
    const Fp8Format format = unit(rng) < 0.5 ? Fp8Format::e4m3 : Fp8Format::e5m2;
    const DelayedScalingConfig c{format, length(rng), unit(rng) < 0.5 ? AmaxReduction::max : AmaxReduction::most_recent,
                                 margin(rng)};
    DelayedScaler scaler(c);
    ref::DelayedScalingRef reference(format == Fp8Format::e4m3 ? ref::e4m3().max_finite : ref::e5m2().max_finite,
                                     c.history_length, c.reduction == AmaxReduction::max, c.margin);
    const int n = steps(rng);
    for (int i = 0; i < n; ++i) {
      // Mostly ordinary amaxes of any magnitude (subnormal to huge), sometimes 0, inf or NaN.
      const int k = kind(rng);
      const float amax = k == 0   ? 0.0f
                         : k == 1 ? std::numeric_limits<float>::infinity()
                         : k == 2 ? std::numeric_limits<float>::quiet_NaN()
                                  : static_cast<float>(std::ldexp(1.0 + unit(rng), exponent(rng)));
      scaler.update(amax);
      reference.update(static_cast<double>(amax));
      if (static_cast<double>(scaler.scale()) != reference.scale()) {
        FAIL_CHECK("sequence " << sequence << " step " << i << " amax " << amax << ": scaler " << scaler.scale()
                               << ", reference " << reference.scale() << " (length " << c.history_length << ", margin "
                               << c.margin << ", " << amax_reduction_name(c.reduction) << ")");
        return;
      }
    }
  }
}
