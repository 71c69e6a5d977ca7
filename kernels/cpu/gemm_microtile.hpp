#pragma once
// Internal to the CPU GEMM: the state a micro-tile works on, shared by the micro-tile
// implementations (gemm_fp8_nt.cpp: scalar; gemm_fp8_nt_avx2.cpp: AVX2; gemm_fp8_nt_wide.cpp:
// 16 lanes, AVX-512).
// A micro-tile is 4 rows of A x one 8-column panel of B over a range of instructions; it
// reads acc and the partial p of its 32 outputs from the state arrays and writes them back.
// The micro-tiles on the floor layout (FloorProblem below: gemm_fp8_nt_floor.cpp, AVX2, and
// gemm_fp8_nt_floor_wide.cpp, 16 lanes) are 4 rows x one group of 32 columns over all of K,
// and write finished outputs.
#include <cstdint>
#include <vector>

#include "kernels/cpu/gemm_packing.hpp"
#include "kernels/formats/float_formats.hpp"
#include "kernels/gemm_config.hpp"

namespace fp8lab::cpu::detail {

// Which micro-tile code runs: scalar (the definition), AVX2 (8 lanes, a conversion per term),
// wide (16 lanes: two rows per vector, compiled for AVX-512 where the CPU has it; tests also
// run it on AVX2). The truncating fused models within the floor micro-tile's range have a
// faster path of their own: gemm_floor below (AVX2 and AVX-512 builds).
enum class MicroTile { scalar, avx2, wide };

struct GemmProblem {
  const PackedA& a;
  const PackedB& b;
  const GemmPlan& plan;
  const AccumulationModel& model;
  std::int64_t depth;
  std::int64_t instructions;  // padded_k / depth
  std::int64_t state_cols;    // panels * kPanel
  float* acc;                 // padded rows x state_cols
  float* partial;
  MicroTile tile;
  bool wide_as_avx512;        // the wide micro-tile's AVX-512 build (else its AVX2 build)
};

// Does the partial get promoted after this instruction (of `depth` elements), and into which
// promotion interval does the instruction fall?
inline bool promotes_after(const GemmPlan& plan, std::int64_t depth, std::int64_t instruction) {
  const std::int64_t k_end = (instruction + 1) * depth;
  return k_end % plan.interval == 0 || k_end == plan.padded_k;
}

inline std::int64_t interval_of(const GemmPlan& plan, std::int64_t depth, std::int64_t instruction) {
  return ((instruction + 1) * depth - 1) / plan.interval;
}

// The last instruction of the promotion interval that starts at instruction `first`: the one
// after which the partial is promoted.
inline std::int64_t last_of_interval(const GemmPlan& plan, std::int64_t depth, std::int64_t first) {
  std::int64_t last = first;
  while (!promotes_after(plan, depth, last)) ++last;
  return last;
}

inline bool promotes_after(const GemmProblem& pr, std::int64_t instruction) {
  return promotes_after(pr.plan, pr.depth, instruction);
}

inline std::int64_t interval_of(const GemmProblem& pr, std::int64_t instruction) {
  return interval_of(pr.plan, pr.depth, instruction);
}

// An accumulated output as the config's output type stores it.
inline float stored_output(float v, bool bf16) { return bf16 ? decode<BF16>(encode<BF16>(v, Saturation::nosat)) : v; }

// The wide micro-tile holds the fused model with truncation (rz) only; others use AVX2.
inline bool wide_tile_holds(const AccumulationModel& m) {
  return m.kind == AccumulationModel::Kind::fused && m.rounding == AccumulationModel::Rounding::rz;
}

// Can the floor micro-tile run this model? Truncation (rz), (4 D + 2) 2^F <= 2^22, D <= 127, F <= 21.
bool floor_tile_holds(const AccumulationModel& m);

// Which micro-tile runs on the floor layout (4 rows x groups of 32 columns): the AVX2 floor
// micro-tile (8 lanes, gemm_fp8_nt_floor.cpp), or the 16-lane one (gemm_fp8_nt_floor_wide.cpp)
// as AVX-512 CPUs run it or its AVX2 build (tests); or the fp32 model's 16-lane micro-tile
// (same file), likewise; or, for the truncating fused models past the FP32 tiles' ranges, the
// floor micro-tile in FP64 lanes (gemm_fp8_nt_floor_fp64.cpp, AVX2, on the FP64 values of the
// layout: PackLayout::floor_fp64).
enum class FloorTile { avx2, wide_avx2, wide_avx512, fp32_wide_avx2, fp32_wide_avx512, fp64_avx2 };

// What a floor micro-tile (4 rows x one group of kGroupCols columns) reads and where it
// writes: the finished outputs, [out_rows][out_cols].
struct FloorProblem {
  const PackedA& a;
  const PackedB& b;
  const GemmPlan& plan;
  int fraction_bits;
  std::int64_t depth, instructions;
  float* out;
  std::int64_t out_rows, out_cols;
  bool bf16;
};

// Can the FP64 floor micro-tile run this model? Truncation (rz), F <= 36, D <= 127 (and so
// (4 D + 2) 2^F <= 2^51): gemm_fp8_nt_floor_fp64.cpp derives them.
bool fp64_floor_tile_holds(const AccumulationModel& m);

// Rows row0..row0+3 and the first `panels` (1-4) panels of group `group` over the whole of K, by
// the FP64 floor micro-tile.
void tile_floor_fp64_avx2(const FloorProblem& pr, std::int64_t row0, std::int64_t group, std::int64_t panels);

// Rows row0..row0+3 and group `group` over the whole of K, by the 16-lane floor micro-tile.
void tile_floor_wide_avx512(const FloorProblem& pr, std::int64_t row0, std::int64_t group);
void tile_floor_wide_avx2(const FloorProblem& pr, std::int64_t row0, std::int64_t group);
// The same by the fp32 model.
void tile_fp32_wide_avx512(const FloorProblem& pr, std::int64_t row0, std::int64_t group);
void tile_fp32_wide_avx2(const FloorProblem& pr, std::int64_t row0, std::int64_t group);

// The whole GEMM by a micro-tile on the floor layout, on operands packed with floor_count and
// all finite: C as [a.rows][b.cols] into `out`, bf16-rounded if the config says so.
void gemm_floor(const PackedA& a, const PackedB& b, const GemmPlan& plan, const GemmConfig& config, std::int64_t depth,
                int threads, FloorTile tile, float* out);

// Instructions [i_begin, i_end) of the fused model for rows row0..row0+3 and one panel, by the
// AVX2 micro-tile (a conversion per term; the models vector_path_holds in gemm_fp8_nt.cpp admits).
void tile_fused_avx2(const GemmProblem& pr, std::int64_t row0, std::int64_t panel, std::int64_t i_begin,
                     std::int64_t i_end);
// The same of the fp32 model for one panel, or for panels panel0 and panel0 + 1 (8 FMA chains).
void tile_fp32_avx2_one_panel(const GemmProblem& pr, std::int64_t row0, std::int64_t panel0, std::int64_t i_begin,
                              std::int64_t i_end);
void tile_fp32_avx2_two_panels(const GemmProblem& pr, std::int64_t row0, std::int64_t panel0, std::int64_t i_begin,
                               std::int64_t i_end);
// The same of the fused model by the 16-lane micro-tile (wide_tile_holds).
void tile_fused_wide_avx512(const GemmProblem& pr, std::int64_t row0, std::int64_t panel, std::int64_t i_begin,
                            std::int64_t i_end);
void tile_fused_wide_avx2(const GemmProblem& pr, std::int64_t row0, std::int64_t panel, std::int64_t i_begin,
                          std::int64_t i_end);

}  // namespace fp8lab::cpu::detail
