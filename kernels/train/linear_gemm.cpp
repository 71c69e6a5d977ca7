#include "kernels/train/linear_gemm.hpp"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "kernels/cpu/gemm_fp8_nt.hpp"
#include "kernels/cpu/quantize.hpp"
#include "kernels/cpu/requantize_transposed.hpp"
#include "kernels/cpu/transpose.hpp"
#include "kernels/formats/float_formats.hpp"
#include "kernels/hadamard_transform.hpp"
#include "kernels/train/ordered_gemm.hpp"

namespace fp8lab::train {
namespace {

using Kind = GemmPrecision::Kind;

// Below this many multiply-adds a GEMM runs on one thread.
constexpr std::int64_t kParallelGemmWork = std::int64_t{1} << 18;
// ... and a transpose or a result copy below this many elements (a quarter of a megabyte of floats).
constexpr std::int64_t kParallelTransposeElements = std::int64_t{1} << 16;

// C (m x n) (+)= A (m x k, row stride lda) * B (k x n): each of the m n sums in order of k
// (ordered_gemm.hpp), rows split between threads in whole register blocks (each thread one
// contiguous share, run by the packed-panel path). Same order, same bits, on any number of threads.
// With a_transposed, `a` holds A^T (k x m, row stride lda): the same sums.
template <class Real>
void nn_kernel(const Real* a, std::int64_t lda, bool a_transposed, const Real* b, Real* c, std::int64_t m, std::int64_t n,
               std::int64_t k, bool accumulate) {
  const std::int64_t bands = (m + kOrderedGemmRows - 1) / kOrderedGemmRows;
  // Threads only for GEMMs big enough to repay starting them.
  const bool parallel = m * n * k >= kParallelGemmWork;
#pragma omp parallel if (parallel)
  {
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const std::int64_t first = bands * t / threads, last = bands * (t + 1) / threads;
    std::vector<Real> panel(static_cast<std::size_t>(kOrderedGemmPanelValues<Real>));
    const auto rows = a_transposed ? ordered_gemm_at_rows_packed<Real> : ordered_gemm_rows_packed<Real>;
    rows(a, lda, b, n, c, n, first * kOrderedGemmRows, std::min(m, last * kOrderedGemmRows), n, k, accumulate, panel.data());
  }
}

// Operand transposes: tiled (kernels/cpu/transpose.hpp), on the thread team when as large as a
// GEMM that would be.
template <class Real>
void transpose(const Real* in, std::int64_t rows, std::int64_t cols, std::int64_t stride, Real* out) {
  cpu::transpose(in, rows, cols, stride, out, rows * cols >= kParallelTransposeElements);
}

std::size_t quantized_bytes(std::int64_t rows, std::int64_t cols, const Granularity& g) {
  const std::int64_t tr = g.tile_rows(rows), tc = g.tile_cols(cols);
  const std::int64_t scales = ((rows + tr - 1) / tr) * ((cols + tc - 1) / tc);
  return static_cast<std::size_t>(rows * cols + scales * 4);
}

QuantizeConfig quantize_config(const GemmPrecision& p, ElementFormat format, const Granularity& g) {
  return {format, g, p.scale_rule};
}

// A fresh operand's quantization: the precision's rule, and the operand's rounding, whose
// stochastic draws are seeded by the operand's bits (operand_rounding_seed).
QuantizedTensor quantize_operand(const GemmPrecision& p, char which, std::span<const float> x, std::int64_t rows,
                                 std::int64_t cols) {
  QuantizeConfig config = quantize_config(p, which == 'a' ? p.a_format : p.b_format,
                                          which == 'a' ? p.a_granularity : p.b_granularity);
  if ((which == 'a' ? p.a_rounding : p.b_rounding) == RoundingMode::stochastic)
    config.rounding = {RoundingMode::stochastic, operand_rounding_seed(x, which)};
  return cpu::quantize(x, rows, cols, config);
}

// The RHT of an operand (rows x k) along k, refused with the recipe's field named when k is no
// multiple of 16 (a step's token count, or a Wgrad slice of it).
std::vector<float> rht_operand(std::span<const float> x, std::int64_t rows, std::int64_t k) {
  if (k % kHadamardGroup != 0)
    throw std::invalid_argument("rht: the GEMM's K = " + std::to_string(k) +
                                " (tokens, for Wgrad) is not a multiple of 16, the Hadamard transform's group");
  return random_hadamard_transform_16(x, rows, k);
}

// One thread for GEMMs too small to repay a thread team (every stories260K GEMM): the
// GEMM's own loops and its packing's (which take the default team size) alike, so no idle
// OpenMP workers spin beside the step on a shared machine. Restores the team size after.
class SmallGemmThreads {
 public:
  explicit SmallGemmThreads(std::int64_t work) : saved_(omp_get_max_threads()), small_(work < kParallelGemmWork) {
    if (small_) omp_set_num_threads(1);
  }
  ~SmallGemmThreads() {
    if (small_) omp_set_num_threads(saved_);
  }
  SmallGemmThreads(const SmallGemmThreads&) = delete;
  SmallGemmThreads& operator=(const SmallGemmThreads&) = delete;

 private:
  int saved_;
  bool small_;
};

// C = A B^T written in place, or C += A B^T (a Wgrad slice accumulating; the sum elementwise
// on the thread team when large).
void gemm_into(const QuantizedTensor& qa, const QuantizedTensor& qb, const GemmConfig& gemm, float* c, bool accumulate) {
  if (!accumulate) return cpu::gemm_nt_into(qa, qb, gemm, {c, static_cast<std::size_t>(qa.rows * qb.rows)});
  const std::vector<float> out = cpu::gemm_nt(qa, qb, gemm);
  const auto n = static_cast<std::int64_t>(out.size());
#pragma omp parallel for schedule(static) if (n >= kParallelTransposeElements)
  for (std::int64_t i = 0; i < n; ++i) c[i] += out[static_cast<std::size_t>(i)];
}

// A rows x k operand of row stride ld as one contiguous span: in place when its rows are
// already packed (the usual case), else copied into `copy`.
std::span<const float> packed_rows(const float* x, std::int64_t rows, std::int64_t k, std::int64_t ld, std::vector<float>& copy) {
  const auto count = static_cast<std::size_t>(rows * k);
  if (ld == k) return {x, count};
  copy.resize(count);
  for (std::int64_t r = 0; r < rows; ++r)
    std::memcpy(&copy[static_cast<std::size_t>(r * k)], x + r * ld, sizeof(float) * static_cast<std::size_t>(k));
  return copy;
}

// C (m x n) (+)= A (m x k) B (n x k)^T for operands that are both already K-major.
// `a`, `b` have row strides lda, ldb (to read a row slice in place).
template <class Real>
void fp8_nt(const GemmCall& call, const Real* a, std::int64_t lda, const Real* b, std::int64_t ldb, Real* c, std::int64_t m,
            std::int64_t n, std::int64_t k, bool accumulate) {
  if constexpr (std::is_same_v<Real, float>) {
    const GemmPrecision& p = call.precision;
    DeviceBuffer wa = call.ledger.allocate(quantized_bytes(m, k, p.a_granularity), MemoryCategory::gemm_workspace);
    DeviceBuffer wb = call.ledger.allocate(quantized_bytes(n, k, p.b_granularity), MemoryCategory::gemm_workspace);
    if (!c) return;
    const SmallGemmThreads threads(m * n * k);
    std::vector<float> a_copy, b_copy;
    std::span<const float> ac = packed_rows(a, m, k, lda, a_copy), bc = packed_rows(b, n, k, ldb, b_copy);
    if (p.rht) {  // the quantizer and the tally see the transformed operands; their product is A B^T
      a_copy = rht_operand(ac, m, k);
      b_copy = rht_operand(bc, n, k);
      ac = a_copy;
      bc = b_copy;
    }
    QuantizedTensor qa = p.delayed_scaling ? quantize_delayed(ac, m, k, p.a_format.fp8(), *call.delayed_a)
                                           : quantize_operand(p, 'a', ac, m, k);
    const QuantizedTensor qb = p.delayed_scaling ? quantize_delayed(bc, n, k, p.b_format.fp8(), *call.delayed_b)
                                                 : quantize_operand(p, 'b', bc, n, k);
    if (call.tally) {  // delayed scaling multiplied by its scale (roll() moves it only after the step)
      tally_operand(qa, ac, call.tally->a, {}, p.delayed_scaling ? call.delayed_a->scaler.scale() : 0.0f);
      tally_operand(qb, bc, call.tally->b, {}, p.delayed_scaling ? call.delayed_b->scaler.scale() : 0.0f);
    }
    if (call.ranges) {
      call.ranges->a.add(operand_range(qa, ac));
      call.ranges->b.add(operand_range(qb, bc));
    }
    gemm_into(qa, qb, p.gemm, c, accumulate);
    if (call.quantized_a) *call.quantized_a = std::move(qa);
  } else {
    throw std::logic_error("fp8 GEMMs run in an FP32 step only");
  }
}

// C (m x n) (+)= A (m x k, stride lda; or A^T, k x m, when a_transposed) * Bkn (k x n) for the
// non-FP8 kinds.
template <class Real>
void plain_nn(const GemmCall& call, const Real* a, std::int64_t lda, bool a_transposed, const Real* bkn, Real* c,
              std::int64_t m, std::int64_t n, std::int64_t k, bool accumulate) {
  const Kind kind = call.precision.kind;
  if (kind == Kind::bf16 || kind == Kind::fp16) {
    DeviceBuffer wa = call.ledger.allocate(static_cast<std::size_t>(m * k * call.element_bytes), MemoryCategory::gemm_workspace);
    DeviceBuffer wb = call.ledger.allocate(static_cast<std::size_t>(k * n * call.element_bytes), MemoryCategory::gemm_workspace);
    if (!c) return;
    auto* ra = static_cast<Real*>(wa.data());
    auto* rb = static_cast<Real*>(wb.data());
    // A rounded in its own layout, packed (rows of `cols` values). One loop per format, so the
    // rounding inlines into it (a call per element cost 2% of an FP8 step); on the thread team
    // when large (elementwise: same bits).
    const std::int64_t rows = a_transposed ? k : m, cols = a_transposed ? m : k;
    const bool parallel = std::max(rows * cols, k * n) >= kParallelTransposeElements;
    const auto round_operands = [&](auto round) {
#pragma omp parallel for schedule(static) if (parallel)
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = 0; j < cols; ++j) ra[r * cols + j] = static_cast<Real>(round(static_cast<float>(a[r * lda + j])));
#pragma omp parallel for schedule(static) if (parallel)
      for (std::int64_t i = 0; i < k * n; ++i) rb[i] = static_cast<Real>(round(static_cast<float>(bkn[i])));
    };
    if (kind == Kind::bf16)
      round_operands([](float x) { return decode<BF16>(encode<BF16>(x, Saturation::nosat)); });
    else
      round_operands([](float x) { return decode<FP16>(encode<FP16>(x, Saturation::nosat)); });
    nn_kernel(ra, cols, a_transposed, rb, c, m, n, k, accumulate);
    return;
  }
  if (c) nn_kernel(a, lda, a_transposed, bkn, c, m, n, k, accumulate);
}

// A re-quantized Wgrad operand's tally: saturation judged on what the second quantizer read,
// the first quantization's values dequantized and transposed (only when statistics are asked for).
void tally_requantized(const QuantizedTensor& q, const QuantizedTensor& first, std::span<const float> source,
                       OperandTally& tally) {
  std::vector<float> seen(first.codes.size());
  cpu::dequantize_transposed_into(first, seen);
  tally_operand(q, source, tally, seen);
}

template <class Real>
Tensor<Real> workspace(const GemmCall& call, std::int64_t rows, std::int64_t cols) {
  return make_tensor<Real>(call.ledger, rows, cols, MemoryCategory::gemm_workspace, call.element_bytes);
}

// DeepSeek-V3's Wgrad: dY and X as their Dgrad / Fprop GEMMs quantized them (1xT along
// channels), re-quantized transposed (1xT along tokens); see requantize_transposed.hpp. Each
// keeps the format its source GEMM gave it as an A operand (validate() has checked they are
// Wgrad's A and B formats): dY^T stays E5M2 in the hybrid recipe, X^T E4M3. dY: rows x out;
// first_b: X (rows x in) quantized as Fprop's A. With a tally, dyt and xt are dY^T and X^T as
// computed, against which both roundings count.
void requantized(const GemmCall& call, const float* dy, std::int64_t rows, std::int64_t out, const QuantizedTensor& first_b,
                 Tensor<float>& dw, bool accumulate, std::span<const float> dyt, std::span<const float> xt) {
  const GemmPrecision& sa = *call.requantize_source_a;
  const GemmPrecision& sb = *call.requantize_source_b;
  const std::int64_t m = out, n = first_b.cols, k = rows;
  DeviceBuffer wa = call.ledger.allocate(quantized_bytes(k, m, sa.a_granularity) + quantized_bytes(m, k, sa.a_granularity),
                                         MemoryCategory::gemm_workspace);
  DeviceBuffer wb = call.ledger.allocate(quantized_bytes(k, n, sb.a_granularity) + quantized_bytes(n, k, sb.a_granularity),
                                         MemoryCategory::gemm_workspace);
  if (!dw.has_data()) return;
  const SmallGemmThreads threads(m * n * k);
  const std::span<const float> dys(dy, static_cast<std::size_t>(k * m));
  const QuantizedTensor first_a = cpu::quantize(dys, k, m, quantize_config(sa, sa.a_format, sa.a_granularity));
  const QuantizedTensor qa = cpu::requantize_transposed(first_a), qb = cpu::requantize_transposed(first_b);
  if (call.tally && !xt.empty()) {
    tally_requantized(qa, first_a, dyt, call.tally->a);
    tally_requantized(qb, first_b, xt, call.tally->b);
  }
  if (call.ranges && !xt.empty()) {
    call.ranges->a.add(operand_range(qa, dyt));
    call.ranges->b.add(operand_range(qb, xt));
  }
  gemm_into(qa, qb, call.precision.gemm, dw.data(), accumulate);
}

}  // namespace

std::uint64_t operand_rounding_seed(std::span<const float> x, char which) {
  // FNV-1a over the FP32 bit patterns, then one SplitMix64 finalization to spread it.
  std::uint64_t h = 0xcbf29ce484222325ull ^ static_cast<std::uint64_t>(which);
  for (const float v : x) {
    h ^= std::bit_cast<std::uint32_t>(v);
    h *= 0x100000001b3ull;
  }
  return splitmix64_mix(h);
}

template <class Real>
void fprop(const GemmCall& call, const Tensor<Real>& x, const Tensor<Real>& w, Tensor<Real>& y) {
  const std::int64_t m = x.rows, n = w.rows, k = x.cols;
  if (call.precision.kind == Kind::fp8) return fp8_nt(call, x.data(), k, w.data(), k, y.data(), m, n, k, false);
  Tensor<Real> wt = workspace<Real>(call, k, n);  // W^T: in x out
  if (wt.has_data()) transpose(w.data(), n, k, k, wt.data());
  plain_nn(call, x.data(), k, false, wt.data(), y.data(), m, n, k, false);
}

template <class Real>
void dgrad(const GemmCall& call, const Tensor<Real>& dy, const Tensor<Real>& w, Tensor<Real>& dx) {
  const std::int64_t m = dy.rows, n = w.cols, k = w.rows;
  if (call.precision.kind != Kind::fp8) return plain_nn(call, dy.data(), k, false, w.data(), dx.data(), m, n, k, false);
  Tensor<Real> wt = workspace<Real>(call, n, k);  // W^T (in x out) as the K-major B
  if (wt.has_data()) transpose(w.data(), k, n, n, wt.data());
  fp8_nt(call, dy.data(), k, wt.data(), k, dx.data(), m, n, k, false);
}

template <class Real>
void wgrad(const GemmCall& call, const Tensor<Real>& dy, const Tensor<Real>& x, Tensor<Real>& dw, bool accumulate,
           std::int64_t row_begin, std::int64_t row_end) {
  const std::int64_t m = dy.cols, n = x.cols, k = row_end - row_begin;
  // The non-FP8 kinds read dY transposed in place, and the re-quantizing FP8 path reads dY and X
  // in place; the latter needs their transposes only to measure what quantization did. The ledger
  // counts them either way, as a device implementation that made them would.
  const bool requantizing = call.precision.kind == Kind::fp8 && call.precision.requantize_transposed;
  const bool measured = call.tally != nullptr || call.ranges != nullptr;
  const bool transposes_read = call.precision.kind == Kind::fp8 && (!requantizing || measured);
  Tensor<Real> dyt = workspace<Real>(call, m, k);  // dY^T: out x rows
  if (dyt.has_data() && transposes_read) transpose(dy.row(row_begin), k, m, m, dyt.data());
  if (call.precision.kind != Kind::fp8)
    return plain_nn(call, dy.has_data() ? dy.row(row_begin) : nullptr, m, true, x.row(row_begin), dw.data(), m, n, k, accumulate);
  Tensor<Real> xt = workspace<Real>(call, n, k);  // X^T: in x rows
  if (xt.has_data() && transposes_read) transpose(x.row(row_begin), k, n, n, xt.data());
  if (!call.precision.requantize_transposed) return fp8_nt(call, dyt.data(), k, xt.data(), k, dw.data(), m, n, k, accumulate);
  if constexpr (std::is_same_v<Real, float>) {
    const GemmPrecision& sb = *call.requantize_source_b;
    const std::span<const float> xs(x.row(row_begin), static_cast<std::size_t>(k * n));
    QuantizedTensor first_b;  // shapes-only: only the shape, for the ledger's counts
    first_b.rows = k;
    first_b.cols = n;
    if (x.has_data()) first_b = cpu::quantize(xs, k, n, quantize_config(sb, sb.a_format, sb.a_granularity));
    requantized(call, dy.has_data() ? dy.row(row_begin) : nullptr, k, m, first_b, dw, accumulate,
                measured ? std::span<const float>(dyt.data(), static_cast<std::size_t>(m * k)) : std::span<const float>(),
                measured ? std::span<const float>(xt.data(), static_cast<std::size_t>(n * k)) : std::span<const float>());
  } else {
    throw std::logic_error("fp8 GEMMs run in an FP32 step only");
  }
}

void wgrad_requantized(const GemmCall& call, const Tensor<float>& dy, const QuantizedTensor& x_fp8, Tensor<float>& dw,
                       bool accumulate, const Tensor<float>* x_source) {
  std::vector<float> dyt, xt;  // dY^T and X^T, what the tally and ranges measure against
  if ((call.tally || call.ranges) && x_source && x_source->has_data()) {
    dyt.resize(static_cast<std::size_t>(dy.size()));
    xt.resize(static_cast<std::size_t>(x_source->size()));
    transpose(dy.data(), dy.rows, dy.cols, dy.cols, dyt.data());
    transpose(x_source->data(), x_source->rows, x_source->cols, x_source->cols, xt.data());
  }
  requantized(call, dy.data(), dy.rows, dy.cols, x_fp8, dw, accumulate, dyt, xt);
}

template void fprop(const GemmCall&, const Tensor<float>&, const Tensor<float>&, Tensor<float>&);
template void fprop(const GemmCall&, const Tensor<double>&, const Tensor<double>&, Tensor<double>&);
template void dgrad(const GemmCall&, const Tensor<float>&, const Tensor<float>&, Tensor<float>&);
template void dgrad(const GemmCall&, const Tensor<double>&, const Tensor<double>&, Tensor<double>&);
template void wgrad(const GemmCall&, const Tensor<float>&, const Tensor<float>&, Tensor<float>&, bool, std::int64_t, std::int64_t);
template void wgrad(const GemmCall&, const Tensor<double>&, const Tensor<double>&, Tensor<double>&, bool, std::int64_t, std::int64_t);

}  // namespace fp8lab::train
