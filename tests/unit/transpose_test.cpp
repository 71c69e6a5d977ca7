// kernels/cpu/transpose.hpp against the plain loop out[c][r] = in[r][c]: bytes (whole 8 x 8 tiles
// take the SSE2 path, edges the element loop) and floats, ragged shapes, a row stride wider than
// the rows, on one thread and on the team.
#include <catch2/catch.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cpu/transpose.hpp"

namespace {

template <class T>
void check_transpose(std::int64_t rows, std::int64_t cols, std::int64_t ld, bool parallel) {
  std::vector<T> in(static_cast<std::size_t>(rows * ld));
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<T>((i * 2654435761u) >> 7);
  std::vector<T> out(static_cast<std::size_t>(rows * cols), T(0));
  fp8lab::cpu::transpose(in.data(), rows, cols, ld, out.data(), parallel);
  std::int64_t mismatches = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      mismatches += out[static_cast<std::size_t>(c * rows + r)] != in[static_cast<std::size_t>(r * ld + c)];
  INFO(rows << " x " << cols << ", ld " << ld << (parallel ? ", parallel" : ""));
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("transpose: bytes and floats, whole tiles and ragged edges, strided rows, any thread count") {
  for (const bool parallel : {false, true})
    for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{8, 8}, {16, 24}, {37, 300}, {1, 9}, {64, 7}, {1024, 256}}) {
      check_transpose<std::uint8_t>(rows, cols, cols, parallel);
      check_transpose<std::uint8_t>(rows, cols, cols + 5, parallel);
      check_transpose<float>(rows, cols, cols, parallel);
      check_transpose<float>(rows, cols, cols + 3, parallel);
    }
}
