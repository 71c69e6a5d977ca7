#pragma once
// Internal to the CPU GEMM: the state a micro-tile works on, shared by the micro-tile
// implementations (gemm_fp8_nt.cpp: scalar and AVX2; gemm_fp8_nt_wide.cpp: 16 lanes, AVX-512).
// A micro-tile is 4 rows of A x one 8-column panel of B over a range of instructions; it
// reads acc and the partial p of its 32 outputs from the state arrays and writes them back.
#include <cstdint>
#include <vector>

#include "kernels/cpu/gemm_packing.hpp"
#include "kernels/formats/float_formats.hpp"
#include "kernels/gemm_config.hpp"

namespace fp8lab::cpu::detail {

// Which micro-tile code runs: scalar (the definition), AVX2 (8 lanes, a conversion per term),
// wide (16 lanes: two rows per vector, compiled for AVX-512 where the CPU has it; tests also
// run it on AVX2). The truncating fused models have a faster path of their own on every
// x86-64 CPU with AVX2, AVX-512 ones included: gemm_floor below.
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

// The whole GEMM by the floor micro-tile (gemm_fp8_nt_floor.cpp) on operands packed with
// floor_count and all finite: C as [a.rows][b.cols], bf16-rounded if the config says so.
std::vector<float> gemm_floor(const PackedA& a, const PackedB& b, const GemmPlan& plan, const GemmConfig& config,
                              std::int64_t depth, int threads);

// Instructions [i_begin, i_end) of the fused model for rows row0..row0+3 and one panel.
void tile_fused_wide_avx512(const GemmProblem& pr, std::int64_t row0, std::int64_t panel, std::int64_t i_begin,
                            std::int64_t i_end);
void tile_fused_wide_avx2(const GemmProblem& pr, std::int64_t row0, std::int64_t panel, std::int64_t i_begin,
                          std::int64_t i_end);

}  // namespace fp8lab::cpu::detail
