// The CPU quantizer's AVX2 path for 1xT tiles (contract: quantize_rows_avx2.hpp, quantize.hpp).
//
// One-level rules: a row (q.cols FP32 values, tiles of T = q.tile_cols) is cut into chunks of
// whole tiles, a multiple of 8 tiles and about 8 KiB, so that a chunk stays in L1 between its
// two visits (rows_kernel):
//   1. the amaxes of its tiles, 8 tiles at a time (quantize_codec_avx2.hpp's amax8_tiles);
//   2. their scales: tile_scale() per tile;
//   3. the codes: scaled = fl32(x * encode) or fl32(x / encode) (vmulps / vdivps: IEEE RNE, the
//      scalar operation), encode_rn on 8 lanes, packed to bytes.
// Two-level rules (nvfp4, nvfp4:torchao): a first pass (tile_amaxes_avx2) leaves the tile
// amaxes in q.scales and gives the tensor amax; the second (stored_amax_rows_kernel) takes
// steps 2 and 3 (for nvfp4 the block scales on 8 lanes) and visits each row once.
// Tiles left over (fewer than 8 at a row's end, a ragged last tile, T not a multiple of 8, the
// `row` granularity) take the same steps one tile at a time, their last < 8 columns through the
// scalar codec itself. Every step gives the scalar path's values (its arithmetic, or another
// route checked against it on every input: quantize_codec_avx2.hpp), so the bits are quantize.cpp's.
#include "kernels/cpu/quantize_rows_avx2.hpp"

#include <type_traits>

#include "kernels/cpu/quantize_codec_avx2.hpp"

namespace fp8lab::cpu::detail {
namespace {

using namespace avx2;

constexpr std::int64_t kChunkFloats = 2048;  // 8 KiB of input per chunk
constexpr std::int64_t kMaxChunkTiles = kChunkFloats / 16;
// The two-level rules' second pass walks this many rows side by side and prefetches each
// this many floats (4 KiB) ahead: the fastest of the settings tried while writing it (1, 2 or 4
// rows; no prefetch, 512 to 3072 floats) on a 2-core EPYC (Zen 2), timed by hand, not by a
// committed benchmark; quantize_bench's BM_QuantizeNvfp4 less BM_Nvfp4TensorAmaxPass is this pass.
constexpr std::int64_t kSecondPassRows = 2;
constexpr std::int64_t kSecondPassPrefetchFloats = 1024;

// Tiles per chunk: a multiple of 8, about kChunkFloats values, at most kMaxChunkTiles (the
// chunk arrays' size; tiles narrower than 16, which Granularity::parse refuses, still fit).
constexpr std::int64_t chunk_tiles_for(std::int64_t t) {
  const std::int64_t tiles = kChunkFloats / t / 8 * 8;
  return tiles < 8 ? 8 : (tiles > kMaxChunkTiles ? kMaxChunkTiles : tiles);
}

// A row's tiles that the two-level passes take 8 at a time: whole tiles of a multiple of 8
// columns, in whole groups of 8; the rest are leftover tiles.
std::int64_t grouped_tiles_of(const QuantizedTensor& q) {
  return (q.tile_cols % 8 == 0 ? q.cols / q.tile_cols : 0) / 8 * 8;
}

// A tile's element factor, and whether its codes can skip the NaN select: no NaN in the tile
// and a finite, nonzero factor, so that x * f and x / f cannot be NaN (inf * 0, 0 / 0, inf / inf).
FP8LAB_AVX2_INLINE bool nan_free(std::uint32_t amax_bits, float factor) {
  const std::uint32_t f = float_bits(factor) & 0x7FFFFFFFu;
  return amax_bits <= 0x7F800000u && f != 0 && f < 0x7F800000u;
}

template <class F, ApplyScale kApply, bool kMayBeNan>
FP8LAB_AVX2_INLINE __m256i encode8_at(const float* p, __m256 factor) {
  const __m256 x = _mm256_loadu_ps(p);
  return encode8<F, kMayBeNan>(kApply == ApplyScale::divide ? _mm256_div_ps(x, factor) : _mm256_mul_ps(x, factor));
}

// Codes of n values scaled by `factor`.
template <class F, ApplyScale kApply, bool kMayBeNan>
FP8LAB_AVX2_INLINE void encode_span(const float* in, std::uint8_t* out, std::int64_t n, float factor) {
  const __m256 f = _mm256_set1_ps(factor);
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        pack32(encode8_at<F, kApply, kMayBeNan>(in + i, f), encode8_at<F, kApply, kMayBeNan>(in + i + 8, f),
                               encode8_at<F, kApply, kMayBeNan>(in + i + 16, f),
                               encode8_at<F, kApply, kMayBeNan>(in + i + 24, f)));
  if (i + 16 <= n) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     pack16(encode8_at<F, kApply, kMayBeNan>(in + i, f), encode8_at<F, kApply, kMayBeNan>(in + i + 8, f)));
    i += 16;
  }
  if (i + 8 <= n) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), pack8(encode8_at<F, kApply, kMayBeNan>(in + i, f)));
    i += 8;
  }
  for (; i < n; ++i) out[i] = static_cast<std::uint8_t>(fp8lab::encode<F>(scaled_element(in[i], factor, kApply)));
}

template <class F, ApplyScale kApply>
FP8LAB_AVX2_INLINE void encode_tile(const float* in, std::uint8_t* out, std::int64_t n, std::uint32_t amax_bits,
                                    float factor) {
  if (nan_free(amax_bits, factor))
    encode_span<F, kApply, false>(in, out, n, factor);
  else
    encode_span<F, kApply, true>(in, out, n, factor);
}

// Step 2 for 8 tiles: scale_of(amax bits as 8 lanes, decode out, encode out) returns whether
// all 8 tiles are clean (nan_free). Any rule: tile_scale() per lane, the definition itself.
struct ScalesPerTile {
  ScaleRule rule;
  ElementTraits traits;
  TensorScale tensor;
  FP8LAB_AVX2_INLINE bool operator()(__m256i amax, float* decode, float* encode) const {
    alignas(32) std::uint32_t bits[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(bits), amax);
    bool clean = true;
    for (int j = 0; j < 8; ++j) {
      const TileScale s = tile_scale(float_from_bits(bits[j]), rule, traits, tensor);
      decode[j] = s.decode;
      encode[j] = s.encode;
      clean = clean && nan_free(bits[j], s.encode);
    }
    return clean;
  }
};

// nvfp4 (scale_rules.hpp nvfp4_te_scale) on 8 lanes: s_b = e4m3_block_scale(amax * block_encode)
// (the same as E4M3 satfinite of min_flt_max(v): satfinite maps (448, FLT_MAX] to 448 as
// fminf(v, 448) does, and inf and NaN go to 448 both ways), encode = fminf(fl32(1 / fl32(s_b *
// tensor decode)), FLT_MAX) (vminps(v, FLT_MAX) returns FLT_MAX for a NaN v, as min_flt_max).
// So encode is never NaN or above FLT_MAX, and nan_free reduces to: no NaN amax, encode > 0.
struct ScalesNvfp4Te {
  float block_encode, tensor_decode;
  FP8LAB_AVX2_INLINE bool operator()(__m256i amax, float* decode, float* encode) const {
    const __m256 s_b = e4m3_block_scale8(_mm256_mul_ps(_mm256_castsi256_ps(amax), _mm256_set1_ps(block_encode)));
    const __m256 e = _mm256_min_ps(_mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_mul_ps(s_b, _mm256_set1_ps(tensor_decode))),
                                   _mm256_set1_ps(scale_detail::kFltMax));
    _mm256_storeu_ps(decode, s_b);
    _mm256_storeu_ps(encode, e);
    const __m256i unclean = _mm256_or_si256(_mm256_cmpgt_epi32(amax, splat(0x7F800000u)),
                                            _mm256_castps_si256(_mm256_cmp_ps(e, _mm256_setzero_ps(), _CMP_NGT_UQ)));
    return _mm256_testz_si256(unclean, unclean) != 0;
  }
};

// One tile the slow way round (see top): amax, tile_scale(), codes.
template <class F, ApplyScale kApply>
FP8LAB_AVX2_INLINE void single_tile(const float* in, std::uint8_t* out, std::int64_t n, float* scale,
                                    const ScalesPerTile& per_tile) {
  const std::uint32_t amax = amax_bits(in, n);
  const TileScale s = tile_scale(float_from_bits(amax), per_tile.rule, per_tile.traits, per_tile.tensor);
  *scale = s.decode;
  encode_tile<F, kApply>(in, out, n, amax, s.encode);
}

// Tiles first_tile.. of row r the slow way round (single_tile), the last one perhaps ragged.
template <class F, ApplyScale kApply>
FP8LAB_AVX2_INLINE void leftover_tiles(const float* x, QuantizedTensor& q, std::int64_t r, std::int64_t first_tile,
                                       const ScalesPerTile& per_tile) {
  for (std::int64_t tc = first_tile; tc < q.scale_cols; ++tc) {
    const std::int64_t c0 = tc * q.tile_cols, n = c0 + q.tile_cols < q.cols ? q.tile_cols : q.cols - c0;
    single_tile<F, kApply>(x + r * q.cols + c0, q.codes.data() + r * q.cols + c0, n,
                           q.scales.data() + r * q.scale_cols + tc, per_tile);  // tile_rows == 1: scale row r
  }
}

// kT: the tile width when known at compile time (16, 32), else 0 and q.tile_cols (a multiple of 8).
template <class F, ApplyScale kApply, std::int64_t kT, class Scales>
FP8LAB_TARGET_AVX2 void rows_kernel(const float* x, QuantizedTensor& q, std::int64_t r_begin, std::int64_t r_end,
                                    const Scales& scales_of, const ScalesPerTile& per_tile) {
  const std::int64_t t = kT != 0 ? kT : q.tile_cols;
  // Chunks take whole tiles of a multiple of 8 columns; a ragged last tile, or every tile of
  // another width, goes alone.
  const std::int64_t full_tiles = t % 8 == 0 ? q.cols / t : 0;
  const std::int64_t chunk_tiles = chunk_tiles_for(t);
  alignas(32) std::uint32_t amax[kMaxChunkTiles];
  alignas(32) float encode[kMaxChunkTiles];
  for (std::int64_t r = r_begin; r < r_end; ++r) {
    const float* row = x + r * q.cols;
    std::uint8_t* out = q.codes.data() + r * q.cols;
    float* scales = q.scales.data() + r * q.scale_cols;  // tile_rows == 1: scale row r
    std::int64_t tc = 0;
    for (; tc + 8 <= full_tiles; tc += chunk_tiles) {
      const std::int64_t n_tiles = (full_tiles - tc) / 8 * 8 < chunk_tiles ? (full_tiles - tc) / 8 * 8 : chunk_tiles;
      const float* in = row + tc * t;
      for (std::int64_t j = 0; j < n_tiles; j += 8) {
        const __m256i a = amax8_tiles<kT>(in + j * t, t);
        _mm256_store_si256(reinterpret_cast<__m256i*>(amax + j), a);
        scales_of(a, scales + tc + j, encode + j);
      }
      // While this chunk is encoded (from L1), the next one is fetched: the amax step would
      // otherwise wait on memory with nothing to overlap (a line per 16 values; a prefetch
      // past the tensor's end is dropped, never a fault).
      const float* next = in + n_tiles * t;
      for (std::int64_t j = 0; j < n_tiles; ++j) {
        for (std::int64_t k = 0; k < t; k += 16) _mm_prefetch(reinterpret_cast<const char*>(next + j * t + k), _MM_HINT_T0);
        encode_tile<F, kApply>(in + j * t, out + (tc + j) * t, t, amax[j], encode[j]);
      }
      if (n_tiles < chunk_tiles) {
        tc += n_tiles;
        break;
      }
    }
    leftover_tiles<F, kApply>(x, q, r, tc, per_tile);
  }
}

// Codes of clean tiles (see nan_free): `tiles` tiles of t values from `in`, factors[j] for tile
// j; 16-wide tiles two to a 32-byte store.
template <class F, ApplyScale kApply, std::int64_t kT>
FP8LAB_AVX2_INLINE void encode_clean_tiles(const float* in, std::uint8_t* out, std::int64_t t, std::int64_t tiles,
                                           const float* factors) {
  if constexpr (kT == 16) {
    for (std::int64_t j = 0; j < tiles; j += 2) {
      const __m256 f0 = _mm256_broadcast_ss(factors + j), f1 = _mm256_broadcast_ss(factors + j + 1);
      const float* p = in + j * 16;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j * 16),
                          pack32(encode8_at<F, kApply, false>(p, f0), encode8_at<F, kApply, false>(p + 8, f0),
                                 encode8_at<F, kApply, false>(p + 16, f1), encode8_at<F, kApply, false>(p + 24, f1)));
    }
  } else {
    for (std::int64_t j = 0; j < tiles; ++j) encode_span<F, kApply, false>(in + j * t, out + j * t, t, factors[j]);
  }
}

// The two-level rules' second pass: the tile amaxes are in q.scales (tile_amaxes_avx2), so a
// row needs one visit. kSecondPassRows rows are walked side by side (a core fetches several
// streams from memory faster than one), chunk by chunk (up to kMaxChunkTiles tiles of each):
//   1. every scale of the chunk, 8 tiles at a time (each group's scale arithmetic is one long
//      dependent chain, with a division; done ahead, the groups' chains overlap instead of
//      each stalling its own codes);
//   2. the codes: when every tile of the chunk is clean, `step` tiles of each row in turn (two
//      16-wide tiles, else one), otherwise 8 tiles of each row in turn.
// Every tile is still computed alone, so the bits do not change with the order.
template <class F, ApplyScale kApply, std::int64_t kT, class Scales>
FP8LAB_TARGET_AVX2 void stored_amax_rows_kernel(const float* x, QuantizedTensor& q, std::int64_t r_begin,
                                                std::int64_t r_end, const Scales& scales_of,
                                                const ScalesPerTile& per_tile) {
  constexpr std::int64_t kRows = kSecondPassRows;
  const std::int64_t t = kT != 0 ? kT : q.tile_cols;
  const std::int64_t grouped_tiles = grouped_tiles_of(q);
  const std::int64_t chunk_tiles = chunk_tiles_for(t);
  const std::int64_t step = kT == 16 ? 2 : 1;  // tiles of a row per turn on the clean path
  alignas(32) float encode[kRows][kMaxChunkTiles];
  alignas(32) std::uint32_t amax[kRows][kMaxChunkTiles];
  bool clean[kRows][kMaxChunkTiles / 8];
  for (std::int64_t r0 = r_begin; r0 < r_end; r0 += kRows) {
    const std::int64_t rows = r_end - r0 < kRows ? r_end - r0 : kRows;
    for (std::int64_t tc = 0; tc < grouped_tiles; tc += chunk_tiles) {
      const std::int64_t n_tiles = grouped_tiles - tc < chunk_tiles ? grouped_tiles - tc : chunk_tiles;
      bool chunk_clean = true;
      const float* in[kRows];
      std::uint8_t* out[kRows];
      for (std::int64_t g = 0; g < rows; ++g) {
        in[g] = x + (r0 + g) * q.cols + tc * t;
        out[g] = q.codes.data() + (r0 + g) * q.cols + tc * t;
        float* scales = q.scales.data() + (r0 + g) * q.scale_cols + tc;  // tile_rows == 1: scale row r
        for (std::int64_t j = 0; j < n_tiles; j += 8) {
          const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + j));
          _mm256_store_si256(reinterpret_cast<__m256i*>(amax[g] + j), a);
          clean[g][j / 8] = scales_of(a, scales + j, encode[g] + j);
          chunk_clean = chunk_clean && clean[g][j / 8];
        }
      }
      // A prefetch past the tensor's end is dropped, never a fault.
      const auto prefetch = [&](std::int64_t g, std::int64_t tile, std::int64_t tiles) {
        for (std::int64_t k = 0; k < tiles * t; k += 16)
          _mm_prefetch(reinterpret_cast<const char*>(in[g] + tile * t + kSecondPassPrefetchFloats + k), _MM_HINT_T0);
      };
      if (chunk_clean) {
        for (std::int64_t j = 0; j < n_tiles; j += step)
          for (std::int64_t g = 0; g < rows; ++g) {
            prefetch(g, j, step);
            encode_clean_tiles<F, kApply, kT>(in[g] + j * t, out[g] + j * t, t, step, encode[g] + j);
          }
        continue;
      }
      for (std::int64_t j = 0; j < n_tiles; j += 8)
        for (std::int64_t g = 0; g < rows; ++g) {
          prefetch(g, j, 8);
          if (clean[g][j / 8]) {
            encode_clean_tiles<F, kApply, kT>(in[g] + j * t, out[g] + j * t, t, 8, encode[g] + j);
            continue;
          }
          for (std::int64_t i = j; i < j + 8; ++i)
            encode_tile<F, kApply>(in[g] + i * t, out[g] + i * t, t, amax[g][i], encode[g][i]);
        }
    }
    for (std::int64_t r = r0; r < r0 + rows; ++r) leftover_tiles<F, kApply>(x, q, r, grouped_tiles, per_tile);
  }
}

template <class F, ApplyScale kApply, bool kAmaxStored, class Scales>
void rows_for_width(const float* x, QuantizedTensor& q, std::int64_t r_begin, std::int64_t r_end,
                    const Scales& scales_of, const ScalesPerTile& per_tile) {
  if constexpr (kAmaxStored) {
    switch (q.tile_cols) {
      case 16: return stored_amax_rows_kernel<F, kApply, 16>(x, q, r_begin, r_end, scales_of, per_tile);
      case 32: return stored_amax_rows_kernel<F, kApply, 32>(x, q, r_begin, r_end, scales_of, per_tile);
      default: return stored_amax_rows_kernel<F, kApply, 0>(x, q, r_begin, r_end, scales_of, per_tile);
    }
  }
  switch (q.tile_cols) {
    case 16: return rows_kernel<F, kApply, 16>(x, q, r_begin, r_end, scales_of, per_tile);
    case 32: return rows_kernel<F, kApply, 32>(x, q, r_begin, r_end, scales_of, per_tile);
    default: return rows_kernel<F, kApply, 0>(x, q, r_begin, r_end, scales_of, per_tile);
  }
}

}  // namespace

bool rows_avx2_serves(const QuantizedTensor& q) {
  return q.tile_rows == 1 && q.config.rounding.mode == RoundingMode::nearest &&
         q.config.scale_rule != ScaleRule::nvfp4_4over6;
}

void quantize_rows_avx2(const float* x, QuantizedTensor& q, std::int64_t r_begin, std::int64_t r_end) {
  with_element_codec(q.config.format, [&](auto codec) {
    using F = decltype(codec);
    const ScalesPerTile per_tile{q.config.scale_rule, element_traits_of<F>(), q.tensor_scale};
    const auto run = [&](auto apply_tag, const auto& scales_of) {
      constexpr ApplyScale kApply = decltype(apply_tag)::value;
      if (scale_rule_math(q.config.scale_rule).two_level)
        rows_for_width<F, kApply, true>(x, q, r_begin, r_end, scales_of, per_tile);
      else
        rows_for_width<F, kApply, false>(x, q, r_begin, r_end, scales_of, per_tile);
    };
    using Multiply = std::integral_constant<ApplyScale, ApplyScale::multiply>;
    using Divide = std::integral_constant<ApplyScale, ApplyScale::divide>;
    if (q.config.scale_rule == ScaleRule::nvfp4) {
      run(Multiply{}, ScalesNvfp4Te{scale_detail::nvfp4_te_block_encode(element_traits_of<F>(), q.tensor_scale),
                                    q.tensor_scale.decode});
    } else if (scale_rule_math(q.config.scale_rule).apply == ApplyScale::divide) {
      run(Divide{}, per_tile);
    } else {
      run(Multiply{}, per_tile);
    }
  });
}

FP8LAB_TARGET_AVX2 std::uint32_t tile_amaxes_avx2(const float* x, QuantizedTensor& q, std::int64_t r_begin,
                                                  std::int64_t r_end) {
  const std::int64_t t = q.tile_cols;
  const std::int64_t lockstep_tiles = grouped_tiles_of(q);
  __m256i running = _mm256_setzero_si256();
  std::uint32_t rest = 0;
  // kLockstepRows rows side by side, 8 tiles of each in turn (see stored_amax_rows_kernel).
  for (std::int64_t r0 = r_begin; r0 < r_end; r0 += kLockstepRows) {
    const std::int64_t r1 = r0 + kLockstepRows < r_end ? r0 + kLockstepRows : r_end;
    for (std::int64_t tc = 0; tc < lockstep_tiles; tc += 8)
      for (std::int64_t r = r0; r < r1; ++r) {
        const float* p = x + r * q.cols + tc * t;
        const __m256i a = t == 16 ? amax8_tiles<16>(p, t) : amax8_tiles<0>(p, t);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q.scales.data() + r * q.scale_cols + tc), a);
        running = _mm256_max_epi32(running, a);
      }
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t tc = lockstep_tiles; tc < q.scale_cols; ++tc) {
        const std::int64_t c0 = tc * t, n = c0 + t < q.cols ? t : q.cols - c0;
        const std::uint32_t a = amax_bits(x + r * q.cols + c0, n);
        q.scales[static_cast<std::size_t>(r * q.scale_cols + tc)] = float_from_bits(a);
        rest = a > rest ? a : rest;
      }
  }
  const std::uint32_t vector_max = hmax8(running);
  return vector_max > rest ? vector_max : rest;
}

}  // namespace fp8lab::cpu::detail
