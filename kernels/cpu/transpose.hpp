#pragma once
// out (cols x rows) = in (rows x cols, row stride ld)^T, by 8 x 8 tiles so that both the reads
// and the writes of a tile stay within a few cache lines (the plain loop's writes stride by `rows`
// elements and miss on every one for the engine's 1024-row activations). Not 16 x 16: with
// `rows` a multiple of 1024 floats a tile's 16 output lines lie 4 KiB apart, all in one set of
// an 8-way L1, and evict each other (3.7 ns an element against 0.5 for 8 x 8, a 1024 x 768
// transpose on a 2-core Zen host). A copy: the same bits.
// Tiles are split between threads when `parallel` (each output element is written by one thread).
#include <emmintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace fp8lab::cpu {

namespace transpose_detail {

// An 8 x 8 byte tile in SSE2 registers, rows (the low 8 bytes of row[i]) to columns in pairs:
// cols[j] holds column 2j in its low 8 bytes and column 2j + 1 in its high 8. Three rounds of
// interleaves: pairs of rows, pairs of pairs, then halves. Also the floor packing's transpose of
// a B panel's 8 lines (gemm_packing_avx2.cpp). SSE2 is in every x86-64 baseline.
inline void transpose_8x8_bytes_in_registers(const __m128i (&row)[8], __m128i (&cols)[4]) {
  const __m128i p01 = _mm_unpacklo_epi8(row[0], row[1]), p23 = _mm_unpacklo_epi8(row[2], row[3]);
  const __m128i p45 = _mm_unpacklo_epi8(row[4], row[5]), p67 = _mm_unpacklo_epi8(row[6], row[7]);
  const __m128i lo03 = _mm_unpacklo_epi16(p01, p23), hi03 = _mm_unpackhi_epi16(p01, p23);
  const __m128i lo47 = _mm_unpacklo_epi16(p45, p67), hi47 = _mm_unpackhi_epi16(p45, p67);
  cols[0] = _mm_unpacklo_epi32(lo03, lo47);
  cols[1] = _mm_unpackhi_epi32(lo03, lo47);
  cols[2] = _mm_unpacklo_epi32(hi03, hi47);
  cols[3] = _mm_unpackhi_epi32(hi03, hi47);
}

// A whole 8 x 8 tile of bytes (FP8 codes): eight 8-byte loads, the register transpose, eight
// 8-byte stores (the element loop's 64 byte loads and stores each were 1.6% of the dim256 FP8
// step, perf).
inline void transpose_8x8_bytes(const std::uint8_t* in, std::int64_t ld, std::uint8_t* out, std::int64_t ldo) {
  __m128i row[8], cols[4];
  for (int i = 0; i < 8; ++i) row[i] = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + i * ld));
  transpose_8x8_bytes_in_registers(row, cols);
  for (int j = 0; j < 4; ++j) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + (2 * j) * ldo), cols[j]);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + (2 * j + 1) * ldo), _mm_unpackhi_epi64(cols[j], cols[j]));
  }
}

}  // namespace transpose_detail

template <class T>
void transpose(const T* in, std::int64_t rows, std::int64_t cols, std::int64_t ld, T* out, bool parallel = false) {
  constexpr std::int64_t kTile = 8;
  const std::int64_t row_tiles = (rows + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t rt = 0; rt < row_tiles; ++rt) {
    const std::int64_t r0 = rt * kTile, r1 = std::min(rows, r0 + kTile);
    for (std::int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const std::int64_t c1 = std::min(cols, c0 + kTile);
      if constexpr (std::is_same_v<T, std::uint8_t>)
        if (r1 - r0 == kTile && c1 - c0 == kTile) {
          transpose_detail::transpose_8x8_bytes(in + r0 * ld + c0, ld, out + c0 * rows + r0, rows);
          continue;
        }
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c) out[c * rows + r] = in[r * ld + c];
    }
  }
}

}  // namespace fp8lab::cpu
