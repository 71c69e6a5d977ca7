#pragma once
// Internal to the CPU GEMM: operands unpacked once into what the accumulation model needs
// per element (the unscaled code value and its unnormalized exponent) and the scales per
// promotion interval, in the layouts the inner loops read.
#include <cstdint>
#include <vector>

#include "kernels/gemm_config.hpp"

namespace fp8lab::cpu::detail {

inline constexpr std::int64_t kPanel = 8;        // B columns per panel: one AVX2 vector of FP32
inline constexpr std::int64_t kRowsPerTile = 4;  // A rows per micro-tile
// The vector path reads A per micro-tile, [tile][k][row], so a tile's 4 values of one k share
// 16 bytes, and exponents as int8 (4 bytes per k for A, 8 for B): the exponent max of a
// 4 x 8 micro-tile is then one 32-byte add + max per k.
// Each operand is unpacked with its own format's code table (A and B may differ, E4M3 x E5M2):
// int8 holds both formats' exponents (E4M3 [-6, 8], E5M2 [-14, 16] with inf/NaN, zero:none's -126).

// The floor-and-count micro-tile (gemm_fp8_nt_floor.cpp) works on groups of 4 panels (32
// columns) and needs, besides exponents, each code's lowest set bit and sign:
//   lsb(v) = the exponent of v's lowest set bit (v = odd * 2^lsb), kLsbOfZero for zero, so a
//   product a b is a multiple of 2^(lsb_a + lsb_b) and of no higher power of two.
// It counts products of opposite signs with lsb_a + lsb_b <= T, in int8 with wrapping adds, and
// A's byte steers which of B's two bytes it is added to (its top bit drives a byte blend):
//   A: lsb_a + 64, plus 128 where a < 0; a zero gives kLsbOfZero + 64 (top bit clear);
//   B, half 0 (read when a >= 0): lsb_b - 64 where b < 0, else kLsbOfZero - 64;
//   B, half 1 (read when a < 0):  lsb_b - 192 (= lsb_b + 64 mod 256) where b > 0, else kLsbOfZero + 64.
// Nonzero lsb lie in [-16, 15] (E5M2's 2^-16 to 2^15; E4M3's in [-9, 8]), so the A bytes of
// a >= 0 lie in [48, 79] and of a < 0 in [176, 207] (top bit set), and the wrapping sum is
// exactly lsb_a + lsb_b in [-32, 30] for opposite signs, and kLsbOfZero + lsb in [33, 64] or
// 2 kLsbOfZero = 98 where signs are alike or a factor is zero: never a wrap, and every such
// sum exceeds kCountThresholdCap, the most the micro-tile's threshold T needs to be (any T >= 31
// counts every opposite-sign product alike).
inline constexpr std::int64_t kGroupPanels = 4;
inline constexpr std::int64_t kGroupCols = kGroupPanels * kPanel;  // 32: one int8 vector
inline constexpr std::int8_t kLsbOfZero = 49;
inline constexpr std::int8_t kCountThresholdCap = 32;
inline constexpr std::uint8_t kLsbSteerOffset = 64;

struct PackedA {         // padded_rows x padded_k, row-major; rows past `rows` are zero
  std::int64_t rows = 0, padded_rows = 0, padded_k = 0;
  std::vector<float> value;
  std::vector<std::int32_t> exponent;
  std::vector<std::int32_t> instruction_max;  // rows x instructions: max exponent per instruction block
  std::vector<float> scale;                   // rows x intervals
  std::vector<float> tile_value;              // [row tile][k][row in tile]
  std::vector<std::int8_t> tile_exponent;     // [row tile][k][row in tile]
  // Floor-and-count layout (empty unless asked for), [row tile][k][row in tile]: the steering
  // lsb bytes (above).
  std::vector<std::uint8_t> tile_lsb;
};

struct PackedB {         // panels of kPanel columns: [panel][k][lane]
  std::int64_t cols = 0, panels = 0, padded_k = 0;
  std::vector<float> value;
  std::vector<std::int32_t> exponent;
  std::vector<std::int32_t> instruction_max;  // panels x instructions
  std::vector<float> scale;                   // [panel][interval][lane]
  std::vector<std::int8_t> lane_exponent;     // [panel][k][lane]
  // Floor-and-count layout (empty unless asked for), groups of kGroupPanels panels, column
  // c = panel_in_group * 8 + lane; columns past `cols` hold a zero code:
  std::int64_t groups = 0;
  std::vector<std::int8_t> group_exponent;    // [group][k][c]
  // [group][k][half][c]: the two halves of B's lsb bytes (above), so a row with a >= 0 meets
  // its negative products in half 0 and a row with a < 0 in half 1.
  std::vector<std::uint8_t> group_lsb;
};

// `selection` lists the rows of q to take (all when empty). A's rows are padded with zeros
// to a multiple of `row_multiple` (whole micro-tiles). `all_finite` is cleared when a taken
// code is NaN or inf.
// `zero` is the accumulation model's exponent convention for FP8 zeros (and the K padding).
// `floor_count` fills the floor-and-count layout and, of the rest, only values and scales
// (A: tile_value; B: value), all the floor micro-tile reads.
PackedA pack_a(const QuantizedTensor& q, const GemmPlan& plan, std::int64_t depth, AccumulationModel::ZeroExponent zero,
               const std::vector<std::int64_t>& selection, std::int64_t row_multiple, bool floor_count, bool& all_finite);
PackedB pack_b(const QuantizedTensor& q, const GemmPlan& plan, std::int64_t depth, AccumulationModel::ZeroExponent zero,
               const std::vector<std::int64_t>& selection, bool floor_count, bool& all_finite);

}  // namespace fp8lab::cpu::detail
