#include "reference/gradient_compression_ref.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "reference/stochastic_rounding_ref.hpp"

namespace fp8lab::ref {
namespace {

// The m-th output (m >= 1) of SplitMix64 seeded with s (Steele, Lea, Flood 2014): the state is
// s + m * 0x9E3779B97F4A7C15 (mod 2^64), passed through xor-shift-multiply, xor-shift-multiply,
// xor-shift.
std::uint64_t splitmix64_output(std::uint64_t s, std::uint64_t m) {
  std::uint64_t z = s + m * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// |t| < L rounded to an integer, from its fraction.
double round_magnitude(double a, bool stochastic, std::uint32_t u) {
  const double lower = std::floor(a);
  const double fraction = a - lower;  // exact: a and floor(a) share a binade or floor(a) is 0
  if (stochastic) return static_cast<double>(u) < std::floor(std::ldexp(fraction, 32)) ? lower + 1.0 : lower;
  if (fraction > 0.5) return lower + 1.0;
  if (fraction < 0.5) return lower;
  return std::fmod(lower, 2.0) == 0.0 ? lower : lower + 1.0;  // a tie: the even neighbour
}

}  // namespace

std::uint64_t compression_stream_ref(const CompressionDrawRef& at) {
  const std::uint64_t after_step = splitmix64_output(at.seed, static_cast<std::uint64_t>(at.step) + 1);
  const std::uint64_t after_worker = splitmix64_output(after_step, at.worker + 1);
  return splitmix64_output(after_worker, at.tensor + 1);
}

std::uint32_t compression_draw_ref(const CompressionDrawRef& at, std::uint64_t index) {
  return stochastic_draw_ref(compression_stream_ref(at), index);
}

SymmetricQuantizedRef quantize_symmetric_ref(const std::vector<double>& x, int bits, std::int64_t block,
                                             bool stochastic, const CompressionDrawRef& at) {
  const double levels = std::ldexp(1.0, bits - 1) - 1.0;  // L
  const std::size_t n = x.size();
  const std::size_t group = block == 0 ? n : static_cast<std::size_t>(block);
  const std::uint64_t stream = compression_stream_ref(at);
  SymmetricQuantizedRef out;
  out.q.assign(n, 0);
  out.values.assign(n, 0.0);
  for (std::size_t begin = 0; begin < n; begin += group) {
    const std::size_t end = std::min(n, begin + group);
    double amax = 0.0;
    for (std::size_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
    const double scale = static_cast<float>(amax / levels);  // sent as FP32
    out.scales.push_back(scale);
    if (scale == 0.0) continue;
    for (std::size_t i = begin; i < end; ++i) {
      const double t = x[i] / scale;
      const double a = std::fabs(t);
      const double magnitude =
          a >= levels ? levels : round_magnitude(a, stochastic, stochastic ? stochastic_draw_ref(stream, i) : 0u);
      out.q[i] = static_cast<std::int64_t>(t < 0 ? -magnitude : magnitude);
      out.values[i] = static_cast<double>(out.q[i]) * scale;
    }
  }
  return out;
}

TopKRef topk_ref(const std::vector<double>& x, std::int64_t k) {
  std::vector<std::int64_t> order(x.size());
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return std::fabs(x[static_cast<std::size_t>(a)]) > std::fabs(x[static_cast<std::size_t>(b)]); });
  order.resize(static_cast<std::size_t>(k));
  std::sort(order.begin(), order.end());
  TopKRef out;
  out.values.assign(x.size(), 0.0);
  for (const std::int64_t i : order) out.values[static_cast<std::size_t>(i)] = x[static_cast<std::size_t>(i)];
  out.indices = std::move(order);
  return out;
}

}  // namespace fp8lab::ref
