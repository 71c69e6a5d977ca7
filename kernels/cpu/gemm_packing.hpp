#pragma once
// Internal to the CPU GEMM: operands unpacked once into what the accumulation model needs
// per element (the unscaled code value and its unnormalized exponent) and the scales per
// promotion interval, in the layouts the inner loops read.
#include <cstdint>
#include <memory>
#include <utility>
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

// The floor-and-count micro-tiles (gemm_fp8_nt_floor.cpp, gemm_fp8_nt_floor_wide.cpp) work on
// groups of 4 panels (32 columns) and need, besides exponents, each code's lowest set bit and
// sign:
//   lsb(v) = the exponent of v's lowest set bit (v = odd * 2^lsb), so a nonzero product a b is
//   a multiple of 2^(lsb_a + lsb_b) and of no higher power of two.
// It counts products of opposite signs with lsb_a + lsb_b <= T in int8, with one wrapping
// byte add per product, from one signed-lsb byte per code:
//   lsb + 32, plus 128 where the value is negative; zeros: kZeroLsbByteA (A), kZeroLsbByteB (B).
// The sum of two such bytes is lsb_a + lsb_b + 64 + 128 [signs differ] (mod 256). Nonzero lsb
// lie in [kCountLsbMin, kCountLsbMax] = [-16, 15] (E5M2's 2^-16 to 2^15; E4M3's in [-9, 8];
// the code tables check it), so read as int8 the sum is
//   lsb_a + lsb_b - 64 in [-96, -34] for opposite signs, lsb_a + lsb_b + 64 in [32, 94] for alike.
// A product counts iff the sum is <= T - 64, with T clamped to [kCountThresholdMin,
// kCountThresholdMax] = [-33, 30]: below -32 nothing counts and above 30 every opposite-sign
// product does, as unclamped; so every sum that must not count has to be >= -33 (> 30 - 64).
// A zero's byte must keep its sums there with either sign of the other factor, i.e. with both
// bands of the other's bytes, 128 apart and 32 wide: with A's zero at 79 the sums are
// lsb_b + 111 in [95, 126] or lsb_b - 17 in [-33, -2]; with B's zero at 208 (-48), lsb_a - 16 in
// [-32, -1] or lsb_a + 112 in [96, 127]; two zeros give 31. The bands leave almost no freedom
// (A's zero byte 79 or 80, B's 207 or 208): tests/unit/floor_count_bytes_test.cpp checks every pair.
inline constexpr std::int64_t kGroupPanels = 4;
inline constexpr std::int64_t kGroupCols = kGroupPanels * kPanel;  // 32: one int8 vector
inline constexpr int kCountLsbMin = -16, kCountLsbMax = 15;
inline constexpr int kLsbByteOffset = 32, kLsbByteNegative = 128;
inline constexpr std::uint8_t kZeroLsbByteA = 79, kZeroLsbByteB = 208;
inline constexpr int kCountThresholdMin = -33, kCountThresholdMax = 30;
inline constexpr int kCountThresholdShift = 2 * kLsbByteOffset;  // subtracted from T: opposite signs sum to lsb_a + lsb_b - 64

// The signed-lsb byte of a finite value v with lsb(v) = lsb; zero_byte (kZeroLsbByteA or B) for zero.
inline std::uint8_t signed_lsb_byte(float v, int lsb, std::uint8_t zero_byte) {
  if (v == 0.0f) return zero_byte;
  return static_cast<std::uint8_t>(lsb + kLsbByteOffset + (v < 0.0f ? kLsbByteNegative : 0));
}

// The byte a sum of two signed-lsb bytes is compared with for threshold T (scalar form of the
// micro-tile's vector steps): a product counts iff int8(sum) <= count_threshold_byte(T).
inline std::int8_t count_threshold_byte(int t) {
  return static_cast<std::int8_t>((t < kCountThresholdMin ? kCountThresholdMin : t > kCountThresholdMax ? kCountThresholdMax : t) -
                                  kCountThresholdShift);
}

// std::allocator whose value-initialization leaves the element as it is: resize() then only
// allocates. The floor layouts are resized so and written whole, padding included, by the
// packing's thread team; a value-initializing resize would first zero them on one thread (memset
// was 4.6% of stories260K's 2-thread FP8 step, perf).
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <class U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
template <class T>
using PackVector = std::vector<T, UninitializedAllocator<T>>;

struct PackedA {         // padded_rows x padded_k, row-major; rows past `rows` are zero
  std::int64_t rows = 0, padded_rows = 0, padded_k = 0;
  std::vector<float> value;
  std::vector<std::int32_t> exponent;
  std::vector<std::int32_t> instruction_max;  // rows x instructions: max exponent per instruction block
  std::vector<float> scale;                   // rows x intervals
  PackVector<float> tile_value;               // [row tile][k][row in tile]
  PackVector<std::int8_t> tile_exponent;      // [row tile][k][row in tile]
  // Floor-and-count layout (empty unless asked for), [row tile][k][row in tile]: the signed-lsb
  // bytes (above).
  PackVector<std::uint8_t> tile_lsb;
  PackVector<double> tile_value64;            // PackLayout::floor_fp64: the values in tile_value's order, in FP64
};

struct PackedB {         // panels of kPanel columns: [panel][k][lane] (floor layout: see below)
  std::int64_t cols = 0, panels = 0, padded_k = 0;
  PackVector<float> value;
  std::vector<std::int32_t> exponent;
  std::vector<std::int32_t> instruction_max;  // panels x instructions
  std::vector<float> scale;                   // [panel][interval][lane]
  std::vector<std::int8_t> lane_exponent;     // [panel][k][lane]
  // Floor-and-count layout (empty unless asked for), groups of kGroupPanels panels, column
  // c = panel_in_group * 8 + lane; columns past `cols` hold a zero code. `value` then holds
  // [group][k][c] too (one 32-float row per k: the 16-lane floor micro-tile loads it as two
  // vectors, the AVX2 one as four).
  std::int64_t groups = 0;
  PackVector<std::int8_t> group_exponent;    // [group][k][c]
  PackVector<std::uint8_t> group_lsb;        // [group][k][c]: the signed-lsb bytes (above)
  PackVector<double> value64;                // PackLayout::floor_fp64: the values in FP64, [group][k][c]
};

// `selection` lists the rows of q to take (all when empty). A's rows are padded with zeros
// to a multiple of `row_multiple` (whole micro-tiles). `all_finite` is cleared when a taken
// code is NaN or inf.
// `zero` is the accumulation model's exponent convention for FP8 zeros (and the K padding).
// `layout` floor fills the floor-and-count layout and, of the rest, only values and scales
// (A: tile_value and tile_exponent; B: value), all the FP32 floor micro-tiles read. The fp32
// model's 16-lane micro-tile reads only the values and scales of this layout (it takes the bytes
// too: packing is a few percent of a GEMM, and one layout keeps one packing path). floor_fp64
// fills the same, with the values in FP64 instead (A: tile_value64, B: value64): the FP64 floor
// micro-tile's FMAs read them as they are (converting in its inner loop would cost a quarter of
// its FMA throughput).
enum class PackLayout { convert, floor, floor_fp64 };
PackedA pack_a(const QuantizedTensor& q, const GemmPlan& plan, std::int64_t depth, AccumulationModel::ZeroExponent zero,
               const std::vector<std::int64_t>& selection, std::int64_t row_multiple, PackLayout layout, bool& all_finite);
PackedB pack_b(const QuantizedTensor& q, const GemmPlan& plan, std::int64_t depth, AccumulationModel::ZeroExponent zero,
               const std::vector<std::int64_t>& selection, PackLayout layout, bool& all_finite);

}  // namespace fp8lab::cpu::detail
