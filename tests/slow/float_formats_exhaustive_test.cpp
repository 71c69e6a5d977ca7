// Every one of the 2^32 FP32 bit patterns through encode<E4M3> and encode<E5M2> (satfinite,
// the quantizer's mode), compared with the FP64 reference rounding. To stay within two
// minutes on two cores: the reference runs once per magnitude (round-to-nearest-even and
// saturation are symmetric in sign, so -x must give -round(x)), the kernel runs on both
// signs, and results are compared as decoded values (decode is checked code by code against
// the spec in tests/unit, and is one-to-one on non-NaN values, so equal values with equal
// signs mean equal codes). The boundary-point test compares codes directly.
#include <catch2/catch.hpp>
#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

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

}  // namespace

TEST_CASE("e4m3 satfinite: all 2^32 FP32 patterns agree with the FP64 reference") {
  check_all_patterns<E4M3>(ref::e4m3(), Saturation::satfinite);
}
TEST_CASE("e5m2 satfinite: all 2^32 FP32 patterns agree with the FP64 reference") {
  check_all_patterns<E5M2>(ref::e5m2(), Saturation::satfinite);
}
