#include "kernels/cpu/gemm_packing.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/gemm_packing_avx2.hpp"
#include "kernels/formats/float_formats.hpp"

namespace fp8lab::cpu::detail {

namespace {

// lsb(v) (gemm_packing.hpp) of a finite nonzero FP32 value whose lowest set bit is a normal-range
// bit, as every FP8 value is; 0 for zero (unused: zeros have their own count bytes).
std::int8_t lowest_bit_exponent(float v) {
  if (v == 0.0f) return 0;
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(v);
  const int biased = static_cast<int>((bits >> 23) & 0xFF);
  const std::uint32_t significand = (bits & 0x7FFFFFu) | 0x800000u;
  return static_cast<std::int8_t>(biased - 150 + std::countr_zero(significand));
}

struct CodeTable {
  std::array<float, 256> value;
  // Unnormalized: min_exponent for subnormals; for zero, min_exponent (zero:min) or
  // FP32's -126 (zero:none, below every FP8 exponent).
  std::array<std::int32_t, 256> exponent;
  std::array<std::int8_t, 256> lsb;  // lowest_bit_exponent of the value
  std::array<bool, 256> finite;
  // The floor micro-tile's bytes per code: exponent as int8, the count's signed-lsb bytes.
  std::array<std::int8_t, 256> exponent8;
  std::array<std::uint8_t, 256> count_byte_a, count_byte_b;
  FloorCodeFields fields;  // for the AVX2 unpacking; zero_lsb_byte is set per operand
};

template <class F>
CodeTable make_table(AccumulationModel::ZeroExponent zero) {
  CodeTable t{};
  for (std::uint32_t code = 0; code < 256; ++code) {
    t.value[code] = decode<F>(code);
    t.finite[code] = std::isfinite(t.value[code]);
    const std::int32_t field = static_cast<std::int32_t>((code & 0x7F) >> F::mantissa_bits);
    t.exponent[code] = field == 0 ? FormatLayout<F>::min_exponent : field - F::bias;
    if ((code & 0x7F) == 0 && zero == AccumulationModel::ZeroExponent::none) t.exponent[code] = -126;
    t.lsb[code] = t.finite[code] ? lowest_bit_exponent(t.value[code]) : 0;  // non-finite: the scalar path runs
    if (t.value[code] != 0.0f && t.finite[code] && (t.lsb[code] < kCountLsbMin || t.lsb[code] > kCountLsbMax))
      throw std::logic_error(std::string("gemm packing: format ") + F::name + " has a value whose lowest set bit lies outside "
                             "the floor count's range [-16, 15] (gemm_packing.hpp)");
    t.exponent8[code] = static_cast<std::int8_t>(t.exponent[code]);
    t.count_byte_a[code] = signed_lsb_byte(t.value[code], t.lsb[code], kZeroLsbByteA);
    t.count_byte_b[code] = signed_lsb_byte(t.value[code], t.lsb[code], kZeroLsbByteB);
  }
  // The AVX2 unpacking decides finiteness by magnitude (code & 0x7f): every code, of either
  // sign, below the first non-finite magnitude must be finite (checked here), and every one from
  // it up is taken as non-finite (E4M3: 0x7f, E5M2: 0x7c-0x7f; were one finite, a GEMM with it
  // would only run the slower scalar tiles).
  std::uint32_t first_nonfinite = 0x80;
  while (first_nonfinite > 0 && !t.finite[first_nonfinite - 1]) --first_nonfinite;
  for (std::uint32_t m = 0; m < first_nonfinite; ++m)
    if (!t.finite[m] || !t.finite[m | 0x80])
      throw std::logic_error(std::string("gemm packing: format ") + F::name + " has a non-finite code below a finite one");
  t.fields = {F::mantissa_bits, F::exponent_bits, F::bias, t.exponent8[0], 0, static_cast<std::uint8_t>(first_nonfinite)};
  return t;
}

const CodeTable& table_for(Fp8Format format, AccumulationModel::ZeroExponent zero) {
  using Z = AccumulationModel::ZeroExponent;
  static const CodeTable e4m3_none = make_table<E4M3>(Z::none), e5m2_none = make_table<E5M2>(Z::none);
  static const CodeTable e4m3_min = make_table<E4M3>(Z::min), e5m2_min = make_table<E5M2>(Z::min);
  if (format == Fp8Format::e4m3) return zero == Z::none ? e4m3_none : e4m3_min;
  return zero == Z::none ? e5m2_none : e5m2_min;
}

std::vector<std::int64_t> all_or(const std::vector<std::int64_t>& selection, std::int64_t count) {
  if (!selection.empty()) return selection;
  std::vector<std::int64_t> all(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) all[static_cast<std::size_t>(i)] = i;
  return all;
}

// Row `row` of q's scale per promotion interval, written `stride` apart from `to`.
void fill_interval_scales(const QuantizedTensor& q, const GemmPlan& plan, std::int64_t row, float* to, std::int64_t stride) {
  for (std::int64_t j = 0; j < plan.intervals; ++j) to[j * stride] = q.scale_of(row, std::min(j * plan.interval, q.cols - 1));
}

// The codes of kLines operand lines (rows of A, columns of B) over `count` k into the floor
// micro-tile's layouts: line j at k goes to value, exponent and lsb at [k * stride + j]; a null
// line, and every line at count <= k < padded_count, gets the padding (a zero code: value 0,
// `padding_exponent`, the zero lsb byte), so the lines' whole region is written. Returns whether
// every code was finite.
// Raw pointers and a local copy of `codes`: stores through int8 pointers may alias anything, so
// the compiler would otherwise reload vector data pointers and code pointers on every element.
// With `use_avx2` (AVX2 CPUs), FP32 values and whole blocks of 8 k go through the AVX2 unpacking
// (gemm_packing_avx2.hpp), the same bytes for finite codes.
template <int kLines, class Value>
bool unpack_floor_lines(const CodeTable& table, const std::uint8_t* const (&lines)[kLines], std::int64_t count,
                        std::int64_t padded_count, const std::array<std::uint8_t, 256>& count_byte, std::int64_t stride,
                        bool use_avx2, Value* value, std::int8_t* exponent, std::uint8_t* lsb) {
  const std::uint8_t* codes[kLines];
  std::copy_n(lines, kLines, codes);
  const std::int8_t padding_exponent = table.exponent8[0];
  const std::uint8_t padding_lsb = count_byte[0];
  const auto pad = [&](std::int64_t at) {
    value[at] = Value(0);
    exponent[at] = padding_exponent;
    lsb[at] = padding_lsb;
  };
  bool finite = true;
  std::int64_t k_scalar = 0;
  if constexpr (std::is_same_v<Value, float>)
    if (use_avx2) {
      FloorCodeFields fields = table.fields;
      fields.zero_lsb_byte = count_byte[0];
      k_scalar = count / 8 * 8;
      finite = unpack_floor_codes_avx2<kLines>(fields, codes, 0, k_scalar, stride, value, exponent, lsb);
    }
  for (std::int64_t k = k_scalar; k < count; ++k)
    for (int j = 0; j < kLines; ++j) {
      const std::int64_t at = k * stride + j;
      if (codes[j] == nullptr) {
        pad(at);
        continue;
      }
      const std::uint8_t c = codes[j][k];
      value[at] = static_cast<Value>(table.value[c]);  // exact (FP32 to FP64 too)
      exponent[at] = table.exponent8[c];
      lsb[at] = count_byte[c];
      finite = finite && table.finite[c];
    }
  for (std::int64_t k = count; k < padded_count; ++k)
    for (int j = 0; j < kLines; ++j) pad(k * stride + j);
  return finite;
}

// unpack_floor_lines into the layout's values: `value` (FP32) or, for PackLayout::floor_fp64,
// `value64` (FP64), both [.. at + k * stride + j].
template <int kLines>
bool unpack_floor_values(PackLayout layout, const CodeTable& table, const std::uint8_t* const (&lines)[kLines],
                         std::int64_t count, std::int64_t padded_count, const std::array<std::uint8_t, 256>& count_byte,
                         std::int64_t stride, std::size_t at, PackVector<float>& value, PackVector<double>& value64,
                         std::int8_t* exponent, std::uint8_t* lsb) {
  const bool use_avx2 = active_cpu_isa() != CpuIsa::scalar;
  if (layout == PackLayout::floor_fp64)
    return unpack_floor_lines<kLines>(table, lines, count, padded_count, count_byte, stride, false, &value64[at], exponent, lsb);
  return unpack_floor_lines<kLines>(table, lines, count, padded_count, count_byte, stride, use_avx2, &value[at], exponent, lsb);
}

// Room for `size` values of the layout, not yet written: FP32 in `value`, or FP64 in `value64`
// (PackLayout::floor_fp64).
void size_floor_values(PackLayout layout, std::size_t size, PackVector<float>& value, PackVector<double>& value64) {
  if (layout == PackLayout::floor_fp64)
    value64.resize(size);
  else
    value.resize(size);
}

// One operand row of codes into values and exponents written `stride` apart, raising the
// per-instruction exponent maxima; returns whether every code was finite.
bool unpack_row(const CodeTable& table, const std::uint8_t* codes, std::int64_t count, std::int64_t depth,
                std::int64_t stride, float* value, std::int32_t* exponent, std::int32_t* instruction_max) {
  bool finite = true;
  for (std::int64_t k = 0; k < count; ++k) {
    value[k * stride] = table.value[codes[k]];
    exponent[k * stride] = table.exponent[codes[k]];
    finite = finite && table.finite[codes[k]];
    instruction_max[k / depth] = std::max(instruction_max[k / depth], exponent[k * stride]);
  }
  return finite;
}

}  // namespace

PackedA pack_a(const QuantizedTensor& q, const GemmPlan& plan, std::int64_t depth, AccumulationModel::ZeroExponent zero,
               const std::vector<std::int64_t>& selection, std::int64_t row_multiple, PackLayout layout, bool& all_finite) {
  const CodeTable& table = table_for(q.config.format.fp8(), zero);
  const std::vector<std::int64_t> rows = all_or(selection, q.rows);
  const std::int64_t instructions = plan.padded_k / depth;
  PackedA p;
  p.rows = static_cast<std::int64_t>(rows.size());
  p.padded_rows = (p.rows + row_multiple - 1) / row_multiple * row_multiple;
  p.padded_k = plan.padded_k;
  const std::int32_t padding_exponent = table.exponent[0];
  const auto size = static_cast<std::size_t>(p.padded_rows * p.padded_k);
  p.scale.assign(static_cast<std::size_t>(p.padded_rows * plan.intervals), 1.0f);
  bool finite = true;
  if (layout != PackLayout::convert) {
    // Only what the floor micro-tile reads, straight from the codes in [tile][k][row] order
    // (padding rows and K: zero codes), every tile written whole by its thread.
    size_floor_values(layout, size, p.tile_value, p.tile_value64);
    p.tile_exponent.resize(size);
    p.tile_lsb.resize(size);
    // By tile, k outer: the writes run sequentially through [tile][k][row].
#pragma omp parallel for reduction(&& : finite)
    for (std::int64_t tile = 0; tile < p.padded_rows / kRowsPerTile; ++tile) {
      const std::uint8_t* codes[kRowsPerTile] = {};
      for (std::int64_t r = 0; r < kRowsPerTile; ++r) {
        const std::int64_t i = tile * kRowsPerTile + r;
        if (i >= p.rows) continue;
        codes[r] = q.codes.data() + rows[static_cast<std::size_t>(i)] * q.cols;
        fill_interval_scales(q, plan, rows[static_cast<std::size_t>(i)], &p.scale[static_cast<std::size_t>(i * plan.intervals)], 1);
      }
      const auto tile_at = static_cast<std::size_t>(tile * p.padded_k * kRowsPerTile);
      finite = unpack_floor_values<kRowsPerTile>(layout, table, codes, q.cols, p.padded_k, table.count_byte_a, kRowsPerTile,
                                                 tile_at, p.tile_value, p.tile_value64, &p.tile_exponent[tile_at],
                                                 &p.tile_lsb[tile_at]) &&
               finite;
    }
    all_finite = all_finite && finite;
    return p;
  }
  p.value.assign(size, 0.0f);
  p.exponent.assign(p.value.size(), padding_exponent);
  p.instruction_max.assign(static_cast<std::size_t>(p.padded_rows * instructions), padding_exponent);
#pragma omp parallel for reduction(&& : finite)
  for (std::int64_t i = 0; i < p.rows; ++i) {
    const std::int64_t row = rows[static_cast<std::size_t>(i)];
    const auto at = static_cast<std::size_t>(i * p.padded_k);
    finite = unpack_row(table, q.codes.data() + row * q.cols, q.cols, depth, 1, &p.value[at], &p.exponent[at],
                        &p.instruction_max[static_cast<std::size_t>(i * instructions)]) && finite;
    fill_interval_scales(q, plan, row, &p.scale[static_cast<std::size_t>(i * plan.intervals)], 1);
  }
  all_finite = all_finite && finite;
  p.tile_value.resize(p.value.size());
  p.tile_exponent.resize(p.value.size());
#pragma omp parallel for
  for (std::int64_t i = 0; i < p.padded_rows; ++i)
    for (std::int64_t k = 0; k < p.padded_k; ++k) {
      const auto from = static_cast<std::size_t>(i * p.padded_k + k);
      const auto to = static_cast<std::size_t>(((i / kRowsPerTile) * p.padded_k + k) * kRowsPerTile + i % kRowsPerTile);
      p.tile_value[to] = p.value[from];
      p.tile_exponent[to] = static_cast<std::int8_t>(p.exponent[from]);
    }
  return p;
}

PackedB pack_b(const QuantizedTensor& q, const GemmPlan& plan, std::int64_t depth, AccumulationModel::ZeroExponent zero,
               const std::vector<std::int64_t>& selection, PackLayout layout, bool& all_finite) {
  const CodeTable& table = table_for(q.config.format.fp8(), zero);
  const std::vector<std::int64_t> cols = all_or(selection, q.rows);
  const std::int64_t instructions = plan.padded_k / depth;
  PackedB p;
  p.cols = static_cast<std::int64_t>(cols.size());
  p.panels = (p.cols + kPanel - 1) / kPanel;
  p.padded_k = plan.padded_k;
  const std::int32_t padding_exponent = table.exponent[0];
  p.scale.assign(static_cast<std::size_t>(p.panels * plan.intervals * kPanel), 1.0f);
  bool finite = true;
  if (layout != PackLayout::convert) {
    // Values and bytes in the group layout, straight from the codes, every panel of every
    // group (those past the last real one: padding) written whole by its thread.
    p.groups = (p.panels + kGroupPanels - 1) / kGroupPanels;
    const auto size = static_cast<std::size_t>(p.groups * p.padded_k * kGroupCols);
    size_floor_values(layout, size, p.value, p.value64);
    p.group_exponent.resize(size);
    p.group_lsb.resize(size);
    // By panel, k outer: the writes run sequentially through [group][k][...].
#pragma omp parallel for reduction(&& : finite)
    for (std::int64_t panel = 0; panel < p.groups * kGroupPanels; ++panel) {
      const std::uint8_t* codes[kPanel] = {};
      for (std::int64_t lane = 0; lane < kPanel && panel * kPanel + lane < p.cols; ++lane) {
        const std::int64_t col = cols[static_cast<std::size_t>(panel * kPanel + lane)];
        codes[lane] = q.codes.data() + col * q.cols;
        fill_interval_scales(q, plan, col, &p.scale[static_cast<std::size_t>(panel * plan.intervals * kPanel + lane)], kPanel);
      }
      const std::int64_t group = panel / kGroupPanels, column0 = (panel % kGroupPanels) * kPanel;
      const auto group_at = static_cast<std::size_t>(group * p.padded_k * kGroupCols + column0);
      finite = unpack_floor_values<kPanel>(layout, table, codes, q.cols, p.padded_k, table.count_byte_b, kGroupCols, group_at,
                                           p.value, p.value64, &p.group_exponent[group_at], &p.group_lsb[group_at]) &&
               finite;
    }
    all_finite = all_finite && finite;
    return p;
  }
  p.value.assign(static_cast<std::size_t>(p.panels * p.padded_k * kPanel), 0.0f);
  p.exponent.assign(p.value.size(), padding_exponent);
  p.instruction_max.assign(static_cast<std::size_t>(p.panels * instructions), padding_exponent);
  // Parallel over panels: the lanes of one panel share its instruction_max entries.
#pragma omp parallel for reduction(&& : finite)
  for (std::int64_t panel = 0; panel < p.panels; ++panel)
    for (std::int64_t lane = 0; lane < kPanel && panel * kPanel + lane < p.cols; ++lane) {
      const std::int64_t col = cols[static_cast<std::size_t>(panel * kPanel + lane)];
      const auto at = static_cast<std::size_t>(panel * p.padded_k * kPanel + lane);
      finite = unpack_row(table, q.codes.data() + col * q.cols, q.cols, depth, kPanel, &p.value[at], &p.exponent[at],
                          &p.instruction_max[static_cast<std::size_t>(panel * instructions)]) && finite;
      fill_interval_scales(q, plan, col, &p.scale[static_cast<std::size_t>(panel * plan.intervals * kPanel + lane)], kPanel);
    }
  all_finite = all_finite && finite;
  p.lane_exponent.assign(p.exponent.begin(), p.exponent.end());  // same [panel][k][lane] order, as int8
  return p;
}

}  // namespace fp8lab::cpu::detail
