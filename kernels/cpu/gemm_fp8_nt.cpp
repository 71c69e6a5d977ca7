// The CPU emulation of an FP8 tensor-core GEMM with FP32 promotion.
//
// Per output element, in K order: instructions of D products; each instruction updates the
// partial p by the accumulation model; every N_C elements p is promoted into acc and reset.
// Fused model, one instruction with incoming p (steps of DESIGN.md section 2):
//   E = max(exponent(p), max_k(e_a + e_b))      unnormalized exponents; 0/subnormal p -> -126;
//                                               an FP8 zero: emin (zero:min) or -126 (zero:none)
//   S = round(p 2^(F-E)) + sum_k round(a_k b_k 2^(F-E))   round = trunc (rz) or RNE, S exact
//   p' = S 2^(E-F) normalized to F fraction bits (same rounding)
// a_k b_k is exact in FP32 (4-bit significands), and scaling by 2^(F-E) is exact, so each
// term is one conversion to integer: that is what makes the vector path both exact and fast.
//
// Operand formats may differ (E4M3 x E5M2, E5M2 x E4M3): each operand is unpacked with its
// own format's code table (gemm_packing.cpp), so only the exponent ranges below matter.
// Unnormalized exponents of finite nonzero codes (subnormals at emin; their values reach
// 2^-9 and 2^-16, but the significand carries the rest):
//   E4M3 [-6, 8]     E5M2 [-14, 15]
// so e_a + e_b of a nonzero product lies in
//   E4M3 x E4M3 [-12, 16]   E4M3 x E5M2 = E5M2 x E4M3 [-20, 23]   E5M2 x E5M2 [-28, 30]
// and every bound the vector paths take from [-28, 30] holds for every pairing. A product's
// FP32 value is exact for every pairing too: significands of at most 4 bits (product < 2^8),
// magnitudes from 2^-32 (E5M2 x E5M2 subnormals) to below 2^32 (57344^2), all normal in FP32.
//
// The micro-tiles: the scalar one below (the definition, element by element), the AVX2 ones
// (gemm_fp8_nt_avx2.cpp) and the 16-lane ones (gemm_fp8_nt_wide.cpp); gemm_fp8_nt_floor*.cpp hold
// the faster paths of the truncating models. This file picks one and walks the work.
//
// Blocking: K is walked in blocks of whole instructions (kKBlock elements) so a block of A
// rows stays in L2 and a B panel slice in L1; acc and p live in a state array between blocks.
// Work within a K block is split over threads by (row chunk, panel chunk); every output
// element is computed by exactly one thread in a fixed order, so threads never change results.
#include "kernels/cpu/gemm_fp8_nt.hpp"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/gemm_block_scaled.hpp"
#include "kernels/cpu/gemm_microtile.hpp"
#include "kernels/formats/float_formats.hpp"

namespace fp8lab::cpu {
namespace {

using detail::kPanel;
using detail::kRowsPerTile;  // micro-tile: 4 rows x one 8-column panel
using detail::GemmProblem;
using detail::MicroTile;
using detail::PackedA;
using detail::PackedB;
using detail::interval_of;
using detail::promotes_after;
using detail::tile_fp32_avx2_one_panel;
using detail::tile_fp32_avx2_two_panels;
using detail::tile_fused_avx2;

constexpr std::int64_t kKBlock = 512;      // elements of K per cache block (rounded to instructions)
constexpr std::int64_t kRowChunk = 64;     // rows per task
constexpr std::int64_t kPanelChunk = 16;   // panels per task

// ---- scalar model: the definition, element by element --------------------------------

int exponent_of(float c) {  // unnormalized exponent of an FP32 value; 0 and subnormals: -126
  const int biased = static_cast<int>((float_bits(c) >> 23) & 0xFF);
  return std::max(biased, 1) - 127;
}

double round_term(double x, AccumulationModel::Rounding r) {
  return r == AccumulationModel::Rounding::rz ? std::trunc(x) : std::nearbyint(x);
}

// S 2^(E-F) with the magnitude kept to min(F, 23) fraction bits: an FP32 value.
float normalize(std::int64_t sum, int exponent, const AccumulationModel& model) {
  if (sum == 0) return 0.0f;
  const int kept = std::min(model.fraction_bits, 23);
  auto magnitude = static_cast<std::uint64_t>(sum < 0 ? -sum : sum);
  const int leading = static_cast<int>(std::bit_width(magnitude)) - 1;
  if (leading > kept) {
    const int drop = leading - kept;
    const std::uint64_t remainder = magnitude & ((1ull << drop) - 1);
    magnitude >>= drop;
    if (model.rounding == AccumulationModel::Rounding::rne) {
      const std::uint64_t half = 1ull << (drop - 1);
      if (remainder > half || (remainder == half && (magnitude & 1))) ++magnitude;
    }
    magnitude <<= drop;
  }
  const double value = std::ldexp(static_cast<double>(magnitude), exponent - model.fraction_bits);
  return static_cast<float>(sum < 0 ? -value : value);
}

// One instruction: the partial c and `count` products. Non-finite inputs: the FP64 sum decides.
float fused_instruction(float c, const float* a, const std::int32_t* ea, const float* b, const std::int32_t* eb,
                        std::int64_t b_stride, std::int64_t count, const AccumulationModel& model) {
  bool finite = std::isfinite(c);
  int e = exponent_of(c);
  for (std::int64_t k = 0; k < count; ++k) {
    finite = finite && std::isfinite(a[k]) && std::isfinite(b[k * b_stride]);
    e = std::max(e, ea[k] + eb[k * b_stride]);
  }
  if (!finite) {
    double sum = c;
    for (std::int64_t k = 0; k < count; ++k) sum += static_cast<double>(a[k]) * b[k * b_stride];
    return std::isnan(sum) ? float_from_bits(0x7FFFFFFFu) : static_cast<float>(sum);
  }
  const double scale = std::ldexp(1.0, model.fraction_bits - e);
  auto sum = static_cast<std::int64_t>(round_term(c * scale, model.rounding));
  for (std::int64_t k = 0; k < count; ++k)
    sum += static_cast<std::int64_t>(round_term(static_cast<double>(a[k]) * b[k * b_stride] * scale, model.rounding));
  return normalize(sum, e, model);
}

void tile_generic(const GemmProblem& pr, std::int64_t row0, std::int64_t panel, std::int64_t i_begin, std::int64_t i_end) {
  const bool fp32_model = pr.model.kind == AccumulationModel::Kind::fp32;
  for (std::int64_t r = row0; r < row0 + kRowsPerTile; ++r)
    for (std::int64_t lane = 0; lane < kPanel; ++lane) {
      const auto state = static_cast<std::size_t>(r * pr.state_cols + panel * kPanel + lane);
      float acc = pr.acc[state], p = pr.partial[state];
      for (std::int64_t i = i_begin; i < i_end; ++i) {
        const std::int64_t k0 = i * pr.depth;
        const float* a = &pr.a.value[static_cast<std::size_t>(r * pr.a.padded_k + k0)];
        const std::int32_t* ea = &pr.a.exponent[static_cast<std::size_t>(r * pr.a.padded_k + k0)];
        const auto b_at = static_cast<std::size_t>((panel * pr.b.padded_k + k0) * kPanel + lane);
        if (fp32_model) {
          for (std::int64_t k = 0; k < pr.depth; ++k) p = std::fma(a[k], pr.b.value[b_at + k * kPanel], p);
        } else {
          p = fused_instruction(p, a, ea, &pr.b.value[b_at], &pr.b.exponent[b_at], kPanel, pr.depth, pr.model);
        }
        if (promotes_after(pr, i)) {
          const std::int64_t j = interval_of(pr, i);
          const float s = pr.a.scale[static_cast<std::size_t>(r * pr.plan.intervals + j)] *
                          pr.b.scale[static_cast<std::size_t>((panel * pr.plan.intervals + j) * kPanel + lane)];
          acc = std::fma(p, s, acc);
          p = 0.0f;
        }
      }
      pr.acc[state] = acc;
      pr.partial[state] = p;
    }
}

// Can the vector path hold S exactly? |S| <= (4 D + 2) 2^F must stay below 2^24 (exact FP32
// conversion) and every term below 2^31 (conversion to int32).
bool vector_path_holds(const AccumulationModel& m) {
  if (m.kind == AccumulationModel::Kind::fp32) return true;
  return m.fraction_bits <= 23 && (4.0 * m.depth + 2.0) * std::ldexp(1.0, m.fraction_bits) <= std::ldexp(1.0, 24);
}

void run_task(const GemmProblem& pr, std::int64_t row_begin, std::int64_t row_end, std::int64_t panel_begin,
              std::int64_t panel_end, std::int64_t i_begin, std::int64_t i_end) {
  if (pr.tile == MicroTile::wide) {
    for (std::int64_t panel = panel_begin; panel < panel_end; ++panel)
      for (std::int64_t r = row_begin; r < row_end; r += kRowsPerTile) {
        if (pr.wide_as_avx512)
          detail::tile_fused_wide_avx512(pr, r, panel, i_begin, i_end);
        else
          detail::tile_fused_wide_avx2(pr, r, panel, i_begin, i_end);
      }
    return;
  }
  if (pr.tile == MicroTile::avx2) {
    const bool fp32_model = pr.model.kind == AccumulationModel::Kind::fp32;
    // Panel-outer: one B panel slice stays in L1 while the task's A rows stream past it.
    if (fp32_model) {
      std::int64_t panel = panel_begin;
      for (; panel + 2 <= panel_end; panel += 2)
        for (std::int64_t r = row_begin; r < row_end; r += kRowsPerTile)
          tile_fp32_avx2_two_panels(pr, r, panel, i_begin, i_end);
      for (; panel < panel_end; ++panel)
        for (std::int64_t r = row_begin; r < row_end; r += kRowsPerTile)
          tile_fp32_avx2_one_panel(pr, r, panel, i_begin, i_end);
    } else {
      for (std::int64_t panel = panel_begin; panel < panel_end; ++panel)
        for (std::int64_t r = row_begin; r < row_end; r += kRowsPerTile) tile_fused_avx2(pr, r, panel, i_begin, i_end);
    }
    return;
  }
  for (std::int64_t r = row_begin; r < row_end; r += kRowsPerTile)
    for (std::int64_t panel = panel_begin; panel < panel_end; ++panel) tile_generic(pr, r, panel, i_begin, i_end);
}

void check_selection(const std::vector<std::int64_t>& selection, std::int64_t extent, const char* what) {
  for (std::int64_t i : selection)
    if (i < 0 || i >= extent)
      throw std::invalid_argument(std::string("sampled ") + what + " index " + std::to_string(i) + " is outside 0.." +
                                  std::to_string(extent - 1));
}

// How many rows (columns) of an operand a GEMM takes: the selection's, or all `extent`.
std::int64_t taken(const std::vector<std::int64_t>& selection, std::int64_t extent) {
  return selection.empty() ? extent : static_cast<std::int64_t>(selection.size());
}

}  // namespace

std::vector<float> gemm_nt(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                           const GemmOptions& options) {
  std::vector<float> out(static_cast<std::size_t>(taken(options.rows, a.rows) * taken(options.cols, b.rows)));
  gemm_nt_into(a, b, config, out, options);
  return out;
}

void gemm_nt_into(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config, std::span<float> out,
                  const GemmOptions& options) {
  check_selection(options.rows, a.rows, "row");
  check_selection(options.cols, b.rows, "column");
  const std::int64_t rows = taken(options.rows, a.rows), cols = taken(options.cols, b.rows);
  if (out.size() != static_cast<std::size_t>(rows * cols))
    throw std::invalid_argument("gemm_nt_into: the output holds " + std::to_string(out.size()) + " values, the GEMM gives " +
                                std::to_string(rows) + " x " + std::to_string(cols));
  if (config.accumulation.kind == AccumulationModel::Kind::block_scaled) {
    const std::vector<float> c = gemm_block_scaled(a, b, config, options);
    std::copy(c.begin(), c.end(), out.begin());
    return;
  }
  const GemmPlan plan = plan_gemm(a, b, config);
  const std::int64_t depth = config.accumulation.kind == AccumulationModel::Kind::fp32 ? 32 : config.accumulation.depth;

  // A's rows are padded to whole 4-row tiles with zero rows (their outputs are dropped).
  const CpuIsa isa = options.force_generic ? CpuIsa::scalar : active_cpu_isa();
  const int threads = options.threads > 0 ? options.threads : omp_get_max_threads();
  const auto zero = config.accumulation.zero_exponent;
  // Truncating fused models: the floor micro-tile (16 lanes on AVX-512 CPUs), when every code
  // is finite (a NaN or inf found while packing sends the problem to the scalar tiles below,
  // packed afresh).
  // The fp32 model on AVX-512 CPUs: its 16-lane micro-tile on the same layout, likewise.
  // Truncating fused models past every FP32 micro-tile's range (F > 23, or (4 D + 2) 2^F > 2^24),
  // which the scalar tiles ran before: the floor micro-tile in FP64 lanes where it holds (AVX2
  // and AVX-512 CPUs alike), likewise.
  const bool fp32_model = config.accumulation.kind == AccumulationModel::Kind::fp32;
  const bool wide_floor_layout = isa == CpuIsa::avx512 || options.force_wide_floor_tiles;
  const bool fp64_floor = detail::fp64_floor_tile_holds(config.accumulation) &&
                          (options.force_fp64_floor_tiles || !vector_path_holds(config.accumulation));
  if (isa != CpuIsa::scalar && !options.force_wide_tiles && !options.force_convert_tiles &&
      (fp64_floor || detail::floor_tile_holds(config.accumulation) || (fp32_model && wide_floor_layout))) {
    bool finite = true;
    const detail::PackLayout layout = fp64_floor ? detail::PackLayout::floor_fp64 : detail::PackLayout::floor;
    const PackedA fa = detail::pack_a(a, plan, depth, zero, options.rows, kRowsPerTile, layout, finite);
    const PackedB fb = detail::pack_b(b, plan, depth, zero, options.cols, layout, finite);
    using detail::FloorTile;
    const bool avx512 = isa == CpuIsa::avx512 && !options.force_wide_floor_tiles;  // the flag: the AVX2 builds
    const FloorTile tile = fp64_floor          ? FloorTile::fp64_avx2
                           : fp32_model        ? (avx512 ? FloorTile::fp32_wide_avx512 : FloorTile::fp32_wide_avx2)
                           : wide_floor_layout ? (avx512 ? FloorTile::wide_avx512 : FloorTile::wide_avx2)
                                               : FloorTile::avx2;
    if (finite) return detail::gemm_floor(fa, fb, plan, config, depth, threads, tile, out.data());
  }
  bool all_finite = true;
  const PackedA pa = detail::pack_a(a, plan, depth, zero, options.rows, kRowsPerTile, detail::PackLayout::convert, all_finite);
  const PackedB pb = detail::pack_b(b, plan, depth, zero, options.cols, detail::PackLayout::convert, all_finite);
  const std::int64_t out_rows = pa.rows, padded_rows = pa.padded_rows;
  const std::int64_t instructions = plan.padded_k / depth;

  const std::int64_t state_cols = pb.panels * kPanel;
  std::vector<float> acc(static_cast<std::size_t>(padded_rows * state_cols), 0.0f);
  std::vector<float> partial(acc.size(), 0.0f);
  // The vector micro-tiles need finite codes and a sum S that FP32 holds exactly; else scalar.
  const bool vector_path = isa != CpuIsa::scalar && all_finite && vector_path_holds(config.accumulation);
  const bool wide = (isa == CpuIsa::avx512 || options.force_wide_tiles) && detail::wide_tile_holds(config.accumulation);
  const MicroTile tile = !vector_path ? MicroTile::scalar : wide ? MicroTile::wide : MicroTile::avx2;
  const GemmProblem pr{pa,         pb,          plan,           config.accumulation, depth, instructions,
                       state_cols, acc.data(), partial.data(), tile,                isa == CpuIsa::avx512 && !options.force_wide_tiles};

  const std::int64_t block_instructions = std::max<std::int64_t>(1, kKBlock / depth);
  const std::int64_t row_chunks = (padded_rows + kRowChunk - 1) / kRowChunk;
  const std::int64_t panel_chunks = (pb.panels + kPanelChunk - 1) / kPanelChunk;
  // One parallel region: a task walks all of K, block by block, for its rows and panels.
#pragma omp parallel for schedule(dynamic) num_threads(threads)
  for (std::int64_t task = 0; task < row_chunks * panel_chunks; ++task) {
    const std::int64_t rc = task / panel_chunks, qc = task % panel_chunks;
    for (std::int64_t i_begin = 0; i_begin < instructions; i_begin += block_instructions)
      run_task(pr, rc * kRowChunk, std::min(padded_rows, (rc + 1) * kRowChunk), qc * kPanelChunk,
               std::min(pb.panels, (qc + 1) * kPanelChunk), i_begin, std::min(instructions, i_begin + block_instructions));
  }

  for (std::int64_t r = 0; r < out_rows; ++r)
    for (std::int64_t c = 0; c < pb.cols; ++c) {
      out[static_cast<std::size_t>(r * pb.cols + c)] =
          detail::stored_output(acc[static_cast<std::size_t>(r * state_cols + c)], config.output == OutputType::bf16);
    }
}

}  // namespace fp8lab::cpu
