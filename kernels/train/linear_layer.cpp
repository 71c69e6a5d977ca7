#include "kernels/train/linear_layer.hpp"

#include <algorithm>
#include <stdexcept>
#include <optional>
#include <type_traits>
#include <vector>

#include "kernels/cpu/quantize.hpp"
#include "kernels/train/linear_gemm.hpp"

namespace fp8lab::train {

namespace {

// A view of caller memory as the engine's tensor type. The engine reads its inputs through
// const Tensor&, so the const_cast never leads to a write.
template <class Real>
Tensor<Real> view(const Real* data, std::int64_t rows, std::int64_t cols) {
  Tensor<Real> t;
  t.rows = rows;
  t.cols = cols;
  t.view = const_cast<Real*>(data);
  return t;
}

// Below this many outputs the bias is added on one thread.
constexpr std::int64_t kParallelBiasElements = std::int64_t{1} << 16;

template <class Real>
bool empty_gemm(std::int64_t m, std::int64_t n, std::int64_t k, Real* out, std::int64_t out_size) {
  if (m > 0 && n > 0 && k > 0) return false;
  std::fill(out, out + out_size, Real(0));
  return true;
}

}  // namespace

// One GEMM's call: an allocating ledger for its workspace, the Wgrad re-quantization's sources,
// and the delayed-scaling operands (taken under the mutex, held for the GEMM). A pass that does not
// record reads copies of the operands' states, whose recorded amax is dropped with the call.
struct LinearLayer::Call {
  HostAllocator allocator;
  MemoryLedger ledger{&allocator};
  std::unique_lock<std::mutex> delayed_lock;
  std::optional<DelayedOperand> unrecorded_a, unrecorded_b;
  GemmCall gemm;

  Call(LinearLayer& l, GemmKind kind, GemmRecord* record)
      : gemm{ledger, l.precision(kind), &l.dgrad_, &l.fprop_, static_cast<int>(l.fp64_ ? sizeof(double) : sizeof(float))} {
    const GemmPrecision& p = l.precision(kind);
    if (record && p.kind == GemmPrecision::Kind::fp8) {
      record->tally.layer = l.layer_;
      record->tally.kind = kind;
      gemm.tally = &record->tally;
      gemm.ranges = &record->ranges;
    }
    if (p.kind != GemmPrecision::Kind::fp8 || !p.delayed_scaling) return;
    delayed_lock = std::unique_lock<std::mutex>(l.delayed_mutex_);
    if (l.recording_ && kind == GemmKind::fprop && l.wgrad_since_roll_) {
      l.delayed_.roll();
      l.wgrad_since_roll_ = false;
    }
    gemm.delayed_a = &l.delayed_.operand(l.layer_, kind, 'a', p);
    gemm.delayed_b = &l.delayed_.operand(l.layer_, kind, 'b', p);
    if (!l.recording_) {
      unrecorded_a.emplace(*gemm.delayed_a);
      unrecorded_b.emplace(*gemm.delayed_b);
      gemm.delayed_a = &*unrecorded_a;
      gemm.delayed_b = &*unrecorded_b;
    } else if (kind == GemmKind::wgrad) {
      l.wgrad_since_roll_ = true;
    }
  }
};

LinearLayer::LinearLayer(const PrecisionRecipe& recipe, std::string layer)
    : layer_(std::move(layer)),
      recipe_(recipe.name),
      fprop_(recipe.resolve(layer_, GemmKind::fprop)),
      dgrad_(recipe.resolve(layer_, GemmKind::dgrad)),
      wgrad_(recipe.resolve(layer_, GemmKind::wgrad)),
      fp64_(recipe.fp64()) {}

const GemmPrecision& LinearLayer::precision(GemmKind kind) const {
  return kind == GemmKind::fprop ? fprop_ : kind == GemmKind::dgrad ? dgrad_ : wgrad_;
}

bool LinearLayer::keeps_x_fp8() const { return wgrad_.kind == GemmPrecision::Kind::fp8 && wgrad_.requantize_transposed; }

QuantizeConfig LinearLayer::x_fp8_config() const { return {fprop_.a_format, fprop_.a_granularity, fprop_.scale_rule}; }

template <class Real>
void LinearLayer::fprop(const Real* x, std::int64_t m, std::int64_t k, const Real* w, std::int64_t n, const Real* bias,
                        Real* y, QuantizedTensor* x_fp8, GemmRecord* record) {
  fprop_gemm(x, m, k, w, n, y, x_fp8, record);
  if (!bias) return;
#pragma omp parallel for schedule(static) if (m * n >= kParallelBiasElements)
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) y[i * n + j] += bias[j];
}

template <class Real>
void LinearLayer::bias_grad(const Real* dy, std::int64_t m, std::int64_t n, Real* db) {
  std::vector<double> sums(static_cast<std::size_t>(n), 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) sums[static_cast<std::size_t>(j)] += static_cast<double>(dy[i * n + j]);
  for (std::int64_t j = 0; j < n; ++j) db[j] = static_cast<Real>(sums[static_cast<std::size_t>(j)]);
}

template <class Real>
void LinearLayer::fprop_gemm(const Real* x, std::int64_t m, std::int64_t k, const Real* w, std::int64_t n, Real* y,
                             QuantizedTensor* x_fp8, GemmRecord* record) {
  if (empty_gemm(m, n, k, y, m * n)) {
    if constexpr (std::is_same_v<Real, float>)  // no output, but backward still reads X's quantization
      if (x_fp8 && keeps_x_fp8() && m > 0 && k > 0)
        *x_fp8 = cpu::quantize(std::span<const float>(x, static_cast<std::size_t>(m * k)), m, k, x_fp8_config());
    return;
  }
  Call call(*this, GemmKind::fprop, record);
  if (keeps_x_fp8()) call.gemm.quantized_a = x_fp8;
  Tensor<Real> out = view<Real>(y, m, n);
  train::fprop(call.gemm, view(x, m, k), view(w, n, k), out);
}

template <class Real>
void LinearLayer::dgrad(const Real* dy, std::int64_t m, std::int64_t n, const Real* w, std::int64_t k, Real* dx,
                        GemmRecord* record) {
  if (empty_gemm(m, n, k, dx, m * k)) return;
  Call call(*this, GemmKind::dgrad, record);
  Tensor<Real> out = view<Real>(dx, m, k);
  train::dgrad(call.gemm, view(dy, m, n), view(w, n, k), out);
}

template <class Real>
void LinearLayer::wgrad(const Real* dy, std::int64_t m, std::int64_t n, const Real* x, std::int64_t k, Real* dw,
                        GemmRecord* record) {
  if (empty_gemm(m, n, k, dw, n * k)) return;
  Call call(*this, GemmKind::wgrad, record);
  Tensor<Real> out = view<Real>(dw, n, k);
  train::wgrad(call.gemm, view(dy, m, n), view(x, m, k), out, false, 0, m);
}

void LinearLayer::wgrad(const float* dy, std::int64_t m, std::int64_t n, const QuantizedTensor& x_fp8, float* dw,
                        GemmRecord* record, const float* x_source) {
  const std::int64_t k = x_fp8.cols;
  if (!keeps_x_fp8()) throw std::logic_error("LinearLayer::wgrad: " + layer_ + "'s recipe keeps X, not its FP8 copy");
  if (x_fp8.rows != m) throw std::invalid_argument("wgrad of " + layer_ + ": dY has " + std::to_string(m) +
                                                   " rows, the kept X " + std::to_string(x_fp8.rows));
  if (empty_gemm(m, n, k, dw, n * k)) return;
  Call call(*this, GemmKind::wgrad, x_source ? record : nullptr);
  Tensor<float> out = view<float>(dw, n, k);
  const Tensor<float> source = x_source ? view(x_source, m, k) : Tensor<float>();
  wgrad_requantized(call.gemm, view(dy, m, n), x_fp8, out, false, x_source ? &source : nullptr);
}

template void LinearLayer::fprop(const float*, std::int64_t, std::int64_t, const float*, std::int64_t, const float*, float*,
                                 QuantizedTensor*, GemmRecord*);
template void LinearLayer::fprop(const double*, std::int64_t, std::int64_t, const double*, std::int64_t, const double*,
                                 double*, QuantizedTensor*, GemmRecord*);
template void LinearLayer::bias_grad(const float*, std::int64_t, std::int64_t, float*);
template void LinearLayer::bias_grad(const double*, std::int64_t, std::int64_t, double*);
template void LinearLayer::dgrad(const float*, std::int64_t, std::int64_t, const float*, std::int64_t, float*, GemmRecord*);
template void LinearLayer::dgrad(const double*, std::int64_t, std::int64_t, const double*, std::int64_t, double*, GemmRecord*);
template void LinearLayer::wgrad(const float*, std::int64_t, std::int64_t, const float*, std::int64_t, float*, GemmRecord*);
template void LinearLayer::wgrad(const double*, std::int64_t, std::int64_t, const double*, std::int64_t, double*,
                                 GemmRecord*);

}  // namespace fp8lab::train
