#pragma once
// out (cols x rows) = in (rows x cols, row stride ld)^T, by 8 x 8 tiles so that both the reads
// and the writes of a tile stay within a few cache lines (the plain loop's writes stride by `rows`
// elements and miss on every one for the engine's 1024-row activations). Not 16 x 16: with
// `rows` a multiple of 1024 floats a tile's 16 output lines lie 4 KiB apart, all in one set of
// an 8-way L1, and evict each other (3.7 ns an element against 0.5 for 8 x 8, a 1024 x 768
// transpose on a 2-core Zen host). A copy: the same bits.
// Tiles are split between threads when `parallel` (each output element is written by one thread).
#include <algorithm>
#include <cstdint>

namespace fp8lab::cpu {

template <class T>
void transpose(const T* in, std::int64_t rows, std::int64_t cols, std::int64_t ld, T* out, bool parallel = false) {
  constexpr std::int64_t kTile = 8;
  const std::int64_t row_tiles = (rows + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t rt = 0; rt < row_tiles; ++rt) {
    const std::int64_t r0 = rt * kTile, r1 = std::min(rows, r0 + kTile);
    for (std::int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const std::int64_t c1 = std::min(cols, c0 + kTile);
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c) out[c * rows + r] = in[r * ld + c];
    }
  }
}

}  // namespace fp8lab::cpu
