#include "kernels/cpu/quantize.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/quantize_nvfp4_4over6.hpp"
#include "kernels/cpu/quantize_rows_avx2.hpp"
#include "kernels/cpu/transpose.hpp"

namespace fp8lab::cpu {
namespace {

// max |x| over rows [r0, r1) x cols [c0, c1). Comparing |x| as integer bit patterns orders
// finite values and inf as floats do, makes NaN the maximum (so it propagates into the
// scale) and lets the compiler vectorize without -ffast-math.
float tile_amax(const float* x, std::int64_t ld, std::int64_t r0, std::int64_t r1, std::int64_t c0,
                std::int64_t c1) {
  std::uint32_t amax_bits = 0;
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* row = x + r * ld;
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::uint32_t abs_bits = float_bits(row[c]) & 0x7FFFFFFFu;
      amax_bits = abs_bits > amax_bits ? abs_bits : amax_bits;
    }
  }
  return float_from_bits(amax_bits);
}

// q = RNE-satfinite(fl32(x * encode)) or (fl32(x / encode)): the choice is made once per tile,
// outside the loops, so that each loop stays one vectorizable operation per element.
template <class F, ApplyScale kApply>
void encode_tile_as(const float* x, std::uint8_t* codes, std::int64_t ld, std::int64_t r0, std::int64_t r1,
                    std::int64_t c0, std::int64_t c1, float encode_factor) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* in = x + r * ld;
    std::uint8_t* out = codes + r * ld;
    for (std::int64_t c = c0; c < c1; ++c)
      out[c] = static_cast<std::uint8_t>(fp8lab::encode<F>(scaled_element(in[c], encode_factor, kApply)));
  }
}

// Stochastic rounding (kernels/formats/stochastic_rounding.hpp): element (r, c)'s draw comes
// from (seed, r * cols + c) alone, so the codes do not depend on the order tiles are visited in.
template <class F, ApplyScale kApply>
void encode_tile_stochastic_as(const float* x, std::uint8_t* codes, std::int64_t ld, std::int64_t r0,
                               std::int64_t r1, std::int64_t c0, std::int64_t c1, float encode_factor,
                               std::uint64_t seed) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* in = x + r * ld;
    std::uint8_t* out = codes + r * ld;
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::uint32_t u = stochastic_draw(seed, static_cast<std::uint64_t>(r * ld + c));
      out[c] = static_cast<std::uint8_t>(encode_stochastic<F>(scaled_element(in[c], encode_factor, kApply), u));
    }
  }
}

template <class F>
void encode_tile(const float* x, std::uint8_t* codes, std::int64_t ld, std::int64_t r0, std::int64_t r1,
                 std::int64_t c0, std::int64_t c1, float encode_factor, ApplyScale apply, Rounding rounding) {
  if (rounding.mode == RoundingMode::stochastic) {
    if (apply == ApplyScale::divide)
      encode_tile_stochastic_as<F, ApplyScale::divide>(x, codes, ld, r0, r1, c0, c1, encode_factor, rounding.seed);
    else
      encode_tile_stochastic_as<F, ApplyScale::multiply>(x, codes, ld, r0, r1, c0, c1, encode_factor, rounding.seed);
    return;
  }
  if (apply == ApplyScale::divide)
    encode_tile_as<F, ApplyScale::divide>(x, codes, ld, r0, r1, c0, c1, encode_factor);
  else
    encode_tile_as<F, ApplyScale::multiply>(x, codes, ld, r0, r1, c0, c1, encode_factor);
}

// Tile rows [tr_begin, tr_end) of the scale grid (the two-level rules' tensor scale is set).
template <class F>
void quantize_tiles(const float* x, QuantizedTensor& q, std::int64_t tr_begin, std::int64_t tr_end) {
  constexpr ElementTraits traits = element_traits_of<F>();
  const ScaleRule rule = q.config.scale_rule;
  const ApplyScale apply = scale_rule_math(rule).apply;
  for (std::int64_t tr = tr_begin; tr < tr_end; ++tr) {
    const std::int64_t r0 = tr * q.tile_rows, r1 = std::min(q.rows, r0 + q.tile_rows);
    for (std::int64_t tc = 0; tc < q.scale_cols; ++tc) {
      const std::int64_t c0 = tc * q.tile_cols, c1 = std::min(q.cols, c0 + q.tile_cols);
      const float amax = tile_amax(x, q.cols, r0, r1, c0, c1);
      float& scale = q.scales[static_cast<std::size_t>(tr * q.scale_cols + tc)];
      if constexpr (std::is_same_v<F, E2M1>) {
        if (rule == ScaleRule::nvfp4_4over6) {  // the block's scale depends on its elements' errors
          scale = quantize_nvfp4_4over6_block(x, q.codes.data(), q.cols, r0, r1, c0, c1, amax, q.tensor_amax,
                                              q.tensor_scale);
          continue;
        }
      }
      const TileScale s = tile_scale(amax, rule, traits, q.tensor_scale);
      scale = s.decode;
      encode_tile<F>(x, q.codes.data(), q.cols, r0, r1, c0, c1, s.encode, apply, q.config.rounding);
    }
  }
}

// The same code compiled for wider targets (see cpu_isa.hpp): flatten inlines tile_amax,
// tile_scale and the codec, and the compiler vectorizes them for the variant's ISA. Every
// operation is exact per element (max of bit patterns, one FP32 product, RNE encode), so
// the variants give the same bits.
template <class F>
FP8LAB_TARGET_AVX2 void quantize_tiles_avx2(const float* x, QuantizedTensor& q, std::int64_t tr_begin, std::int64_t tr_end) {
  quantize_tiles<F>(x, q, tr_begin, tr_end);
}
template <class F>
FP8LAB_TARGET_AVX512 void quantize_tiles_avx512(const float* x, QuantizedTensor& q, std::int64_t tr_begin,
                                                std::int64_t tr_end) {
  quantize_tiles<F>(x, q, tr_begin, tr_end);
}

// Every tile is independent once the two-level rules' tensor scale is known (its amax is a max:
// any order gives it), so tile rows (groups of kLockstepRows rows on the two-level rules' 1xT
// path) are split between threads with the same bits.
// 1xT tiles on an AVX2 (or wider) CPU take quantize_rows_avx2.cpp's one-visit path, the same bits;
// FP8LAB_CPU_ISA=scalar keeps the general loops, which the tests compare it with.
template <class F>
void quantize_tiles_for_cpu(const float* x, QuantizedTensor& q) {
  const CpuIsa isa = active_cpu_isa();
  const bool rows_avx2 = isa != CpuIsa::scalar && detail::rows_avx2_serves(q);
  const bool two_level = scale_rule_math(q.config.scale_rule).two_level;
  const bool parallel = q.rows * q.cols >= kParallelQuantizeElements;
  // The 1xT path takes the two-level rules' rows in groups of kLockstepRows (its passes walk a
  // group's rows side by side; the tile amaxes are kept in q.scales for the second pass), the
  // others' row by row (as many threads busy as there are rows).
  const std::int64_t group_rows = two_level ? detail::kLockstepRows : 1;
  const std::int64_t row_groups = (q.rows + group_rows - 1) / group_rows;
  const auto group_end = [&](std::int64_t g) { return std::min(q.rows, (g + 1) * group_rows); };
  if (two_level && rows_avx2) {
    std::uint32_t amax_bits = 0;
#pragma omp parallel for schedule(static) reduction(max : amax_bits) if (parallel)
    for (std::int64_t g = 0; g < row_groups; ++g)
      amax_bits = std::max(amax_bits, detail::tile_amaxes_avx2(x, q, g * group_rows, group_end(g)));
    q.tensor_amax = float_from_bits(amax_bits);
  } else if (two_level) {
    q.tensor_amax = tile_amax(x, q.cols, 0, q.rows, 0, q.cols);
  }
  if (two_level) q.tensor_scale = tensor_scale(q.tensor_amax, q.config.scale_rule, element_traits_of<F>());
  if (rows_avx2) {
#pragma omp parallel for schedule(static) if (parallel)
    for (std::int64_t g = 0; g < row_groups; ++g)
      detail::quantize_rows_avx2(x, q, g * group_rows, group_end(g));
    return;
  }
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t tr = 0; tr < q.scale_rows; ++tr) {
    switch (isa) {
      case CpuIsa::avx512: quantize_tiles_avx512<F>(x, q, tr, tr + 1); break;
      case CpuIsa::avx2: quantize_tiles_avx2<F>(x, q, tr, tr + 1); break;
      case CpuIsa::scalar: quantize_tiles<F>(x, q, tr, tr + 1); break;
    }
  }
}

template <class F>
std::array<float, 256> decode_table() {
  std::array<float, 256> table{};
  for (std::uint32_t code = 0; code < 256; ++code) table[code] = decode<F>(code);
  return table;
}

const std::array<float, 256>& decode_table_for(ElementFormat format) {
  static const std::array<float, 256> e4m3 = decode_table<E4M3>(), e5m2 = decode_table<E5M2>(),
                                      e2m1 = decode_table<E2M1>(), e3m2 = decode_table<E3M2>(),
                                      e2m3 = decode_table<E2M3>();
  switch (format.kind()) {
    case ElementFormat::Kind::e5m2: return e5m2;
    case ElementFormat::Kind::e2m1: return e2m1;
    case ElementFormat::Kind::e3m2: return e3m2;
    case ElementFormat::Kind::e2m3: return e2m3;
    case ElementFormat::Kind::e4m3: break;
  }
  return e4m3;
}

}  // namespace

void quantize_into(std::span<const float> x, QuantizedTensor& out) {
  if (static_cast<std::int64_t>(x.size()) != out.rows * out.cols)
    throw std::invalid_argument("quantize: input has " + std::to_string(x.size()) + " values, shape " +
                                std::to_string(out.rows) + "x" + std::to_string(out.cols) + " needs " +
                                std::to_string(out.rows * out.cols));
  with_element_codec(out.config.format, [&](auto codec) { quantize_tiles_for_cpu<decltype(codec)>(x.data(), out); });
}

QuantizedTensor quantize(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                         const QuantizeConfig& config) {
  QuantizedTensor q = make_quantized_tensor(rows, cols, config);
  quantize_into(x, q);
  return q;
}

std::vector<float> dequantize(const QuantizedTensor& q) {
  std::vector<float> x(q.codes.size());
  dequantize_into(q, x);
  return x;
}

void dequantize_into(const QuantizedTensor& q, std::span<float> x) {
  if (x.size() != q.codes.size())
    throw std::invalid_argument("dequantize_into: the output holds " + std::to_string(x.size()) + " values, the tensor " +
                                std::to_string(q.codes.size()));
  const std::array<float, 256>& table = decode_table_for(q.config.format);
  const float tensor_decode = q.tensor_scale.decode;  // 1 but for the two-level rules
  // Row by row, a tile's scale looked up once per row segment: x = decode(q) * (scale * tensor decode).
#pragma omp parallel for schedule(static) if (q.rows * q.cols >= kParallelQuantizeElements)
  for (std::int64_t r = 0; r < q.rows; ++r)
    for (std::int64_t c0 = 0; c0 < q.cols; c0 += q.tile_cols) {
      const float scale = q.scale_of(r, c0) * tensor_decode;
      const std::int64_t c1 = std::min(q.cols, c0 + q.tile_cols);
      for (std::int64_t c = c0; c < c1; ++c) {
        const auto i = static_cast<std::size_t>(r * q.cols + c);
        x[i] = table[q.codes[i]] * scale;
      }
    }
}

void dequantize_transposed_into(const QuantizedTensor& q, std::span<float> xt) {
  if (xt.size() != q.codes.size())
    throw std::invalid_argument("dequantize_transposed_into: the output holds " + std::to_string(xt.size()) +
                                " values, the tensor " + std::to_string(q.codes.size()));
  const std::array<float, 256>& table = decode_table_for(q.config.format);
  const float tensor_decode = q.tensor_scale.decode;
  const bool parallel = q.rows * q.cols >= kParallelQuantizeElements;
  const auto size = static_cast<std::size_t>(q.rows * q.cols);
  const auto codes = std::make_unique_for_overwrite<std::uint8_t[]>(size);  // cols x rows, every byte written
  transpose(q.codes.data(), q.rows, q.cols, q.cols, codes.get(), parallel);
  // scale[j][r] = fl32(sf(r, tile column j) * tensor decode), dequantize's per-segment scale.
  std::vector<float> scale(static_cast<std::size_t>(q.scale_cols * q.rows));
  for (std::int64_t j = 0; j < q.scale_cols; ++j)
    for (std::int64_t r = 0; r < q.rows; ++r)
      scale[static_cast<std::size_t>(j * q.rows + r)] = q.scale_of(r, j * q.tile_cols) * tensor_decode;
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t c = 0; c < q.cols; ++c) {
    const float* column_scale = &scale[static_cast<std::size_t>((c / q.tile_cols) * q.rows)];
    for (std::int64_t r = 0; r < q.rows; ++r) {
      const auto i = static_cast<std::size_t>(c * q.rows + r);
      xt[i] = table[codes[i]] * column_scale[r];
    }
  }
}

}  // namespace fp8lab::cpu
