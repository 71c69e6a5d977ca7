// Every one of the 2^32 FP32 bit patterns through encode<E4M3> and encode<E5M2> (satfinite,
// the quantizer's mode), compared with the FP64 reference rounding. To stay within two
// minutes on two cores: the reference runs once per magnitude (round-to-nearest-even and
// saturation are symmetric in sign, so -x must give -round(x)), the kernel runs on both
// signs, and results are compared as decoded values (decode is checked code by code against
// the spec in tests/unit, and is one-to-one on non-NaN values, so equal values with equal
// signs mean equal codes). The boundary-point test compares codes directly.
//
// E2M1, E3M2, E2M3 (8 or 32 values each) run another way, comparing codes: rounding to
// nearest is monotone in |x|, and FP32 magnitude patterns increase with the value, so over
// a run of patterns whose two ends the reference rounds to the same value every pattern
// does. The run is split in halves until that holds (or it is 64 patterns short, then the
// reference runs on each), so the reference runs a few thousand times per format and the
// kernel on all 2^32 patterns: seconds, not minutes. The same for the GPU quantizer's E2M1
// encoder, encode_e2m1_by_quantum_add, the CPU quantizer's 8-lane one (AVX2), and its 8-lane
// nvfp4 block-scale rounding to E4M3.
#include <catch2/catch.hpp>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/quantize_codec_avx2.hpp"
#include "tests/support/codec_vs_reference.hpp"

using namespace fp8lab;

namespace {

template <class F>
void check_all_patterns(const ref::FormatDefinition& def, Saturation saturation) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<std::uint64_t> disagreements{0};
  std::atomic<std::uint64_t> first_bad{~0ull};
  std::vector<std::thread> pool;
  constexpr std::uint64_t kMagnitudes = 1ull << 31;  // each with both signs
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::uint64_t local = 0;
      for (std::uint64_t bits = t; bits < kMagnitudes; bits += threads) {
        const float x = float_from_bits(static_cast<std::uint32_t>(bits));
        const double expected = ref::round_to_format(x, def, saturation == Saturation::satfinite);
        const bool ok = test::same_value(decode<F>(encode<F>(x, saturation)), expected) &&
                        test::same_value(decode<F>(encode<F>(-x, saturation)), -expected);
        if (!ok && local++ == 0) {
          std::uint64_t seen = ~0ull;
          while (bits < seen && !first_bad.compare_exchange_weak(seen, bits)) {}
        }
      }
      disagreements += local;
    });
  for (std::thread& th : pool) th.join();
  INFO("first disagreeing magnitude pattern 0x" << std::hex << first_bad.load());
  CHECK(disagreements.load() == 0);
}

// Kernel codes (`encode_fn`, encode<F> unless a faster encoder of the same format is under test)
// for magnitude patterns [lo, hi] (and their negatives) against the reference; returns the
// number of disagreeing patterns and lowers `first_bad` to the first one.
template <class F, class Encode>
std::uint64_t check_run(std::uint32_t lo, std::uint32_t hi, const ref::FormatDefinition& def, Encode encode_fn,
                        std::uint64_t& first_bad) {
  constexpr std::uint32_t sign = FormatLayout<F>::sign_bit;
  const auto expected_code = [&](std::uint32_t bits) {
    return ref::code_of_value(ref::round_to_format(float_from_bits(bits), def, true), def);
  };
  const std::uint32_t code_lo = expected_code(lo);
  if (hi - lo >= 64 && code_lo != expected_code(hi)) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    return check_run<F>(lo, mid, def, encode_fn, first_bad) + check_run<F>(mid + 1, hi, def, encode_fn, first_bad);
  }
  const bool constant = code_lo == expected_code(hi);
  std::uint64_t bad = 0;
  for (std::uint64_t b = lo; b <= hi; ++b) {
    const auto bits = static_cast<std::uint32_t>(b);
    const std::uint32_t code = constant ? code_lo : expected_code(bits);
    const float x = float_from_bits(bits);
    // -x: the same magnitude code with the sign bit (a NaN's stand-in has the sign bit set already)
    if (encode_fn(x) != code || encode_fn(-x) != (code | sign)) {
      if (bad++ == 0) first_bad = std::min<std::uint64_t>(first_bad, b);
    }
  }
  return bad;
}

template <class F, class Encode>
void check_all_patterns_by_runs(const ref::FormatDefinition& def, Encode encode_fn) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  constexpr std::uint64_t kMagnitudes = 1ull << 31;
  constexpr std::uint64_t kSlices = 256;  // handed out in turn, so every thread gets NaN and tiny patterns alike
  std::atomic<std::uint64_t> disagreements{0};
  std::atomic<std::uint64_t> next{0};
  std::vector<std::uint64_t> first_bad(threads, ~0ull);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (std::uint64_t s; (s = next++) < kSlices;) {
        const std::uint64_t lo = s * (kMagnitudes / kSlices), hi = lo + kMagnitudes / kSlices - 1;
        disagreements += check_run<F>(static_cast<std::uint32_t>(lo), static_cast<std::uint32_t>(hi), def, encode_fn, first_bad[t]);
      }
    });
  for (std::thread& th : pool) th.join();
  INFO("first disagreeing magnitude pattern 0x" << std::hex << *std::min_element(first_bad.begin(), first_bad.end()));
  CHECK(disagreements.load() == 0);
}

}  // namespace

template <class F>
void check_codec_by_runs(const ref::FormatDefinition& def) {
  check_all_patterns_by_runs<F>(def, [](float x) { return encode<F>(x); });
}

TEST_CASE("e2m1: all 2^32 FP32 patterns give the FP64 reference's code") { check_codec_by_runs<E2M1>(ref::e2m1()); }
TEST_CASE("e3m2: all 2^32 FP32 patterns give the FP64 reference's code") { check_codec_by_runs<E3M2>(ref::e3m2()); }
TEST_CASE("e2m3: all 2^32 FP32 patterns give the FP64 reference's code") { check_codec_by_runs<E2M3>(ref::e2m3()); }
// The GPU quantizer's E2M1 encoder (float_formats.hpp), against the reference on its own.
TEST_CASE("e2m1 by quantum addition: all 2^32 FP32 patterns give the FP64 reference's code") {
  check_all_patterns_by_runs<E2M1>(ref::e2m1(), [](float x) { return encode_e2m1_by_quantum_add(x); });
}

// The CPU quantizer's 8-lane E2M1 encoder for lanes known not to be NaN (its callers check), x
// in every lane, lane 0's code; NaN patterns take encode<E2M1>, outside the encoder's contract.
FP8LAB_TARGET_AVX2 std::uint32_t encode_e2m1_avx2_lane0(float x) {
  if (x != x) return encode<E2M1>(x);
  return static_cast<std::uint32_t>(_mm256_cvtsi256_si32(cpu::detail::avx2::encode8_e2m1_not_nan(_mm256_set1_ps(x))));
}
TEST_CASE("e2m1 on 8 lanes (AVX2 quantum addition): all 2^32 - 2^24 + 2 non-NaN FP32 patterns give the FP64 reference's code") {
  if (cpu::detected_cpu_isa() == cpu::CpuIsa::scalar) {
    SUCCEED("this CPU has no AVX2: the encoder cannot run here");
    return;
  }
  check_all_patterns_by_runs<E2M1>(ref::e2m1(), encode_e2m1_avx2_lane0);
}

// The CPU quantizer's 8-lane nvfp4 block scale (e4m3_block_scale8: min(v, 448) rounded to
// E4M3) as a code: |x| in every lane, lane 0's value, which must be an E4M3 value (else 0xFFFF,
// never a code), its code with x's sign. Negative x is outside its contract (the quantizer gives
// it amax * a positive factor): -x takes |x|'s code with the sign bit, as the runs expect. A NaN
// must give 448 (the scalar rule's fminf(NaN, 448)); the runs expect E4M3's NaN code with x's
// sign for it, so that is what 448 stands for here.
FP8LAB_TARGET_AVX2 std::uint32_t e4m3_block_scale_avx2_lane0(float x) {
  const float s = _mm256_cvtss_f32(cpu::detail::avx2::e4m3_block_scale8(_mm256_set1_ps(std::fabs(x))));
  if (x != x) return s == 448.0f ? (std::signbit(x) ? 0xFFu : 0x7Fu) : 0xFFFFu;
  const std::uint32_t code = encode<E4M3>(s);
  if (!(decode<E4M3>(code) == s)) return 0xFFFFu;
  return x < 0 || float_bits(x) == 0x80000000u ? code | 0x80u : code;
}
TEST_CASE("e4m3 block scale on 8 lanes (AVX2 quantum addition): all 2^31 FP32 patterns with the sign bit clear round as the FP64 reference, saturating (NaN to 448)") {
  if (cpu::detected_cpu_isa() == cpu::CpuIsa::scalar) {
    SUCCEED("this CPU has no AVX2: the rounding cannot run here");
    return;
  }
  check_all_patterns_by_runs<E4M3>(ref::e4m3(), e4m3_block_scale_avx2_lane0);
}

TEST_CASE("e4m3 satfinite: all 2^32 FP32 patterns agree with the FP64 reference") {
  check_all_patterns<E4M3>(ref::e4m3(), Saturation::satfinite);
}
TEST_CASE("e5m2 satfinite: all 2^32 FP32 patterns agree with the FP64 reference") {
  check_all_patterns<E5M2>(ref::e5m2(), Saturation::satfinite);
}
