#pragma once
// A rows x cols row-major matrix whose storage comes from the memory ledger, so that every
// buffer of a training step is counted. In shapes-only mode it has a shape and no data.
#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/memory_ledger.hpp"

namespace fp8lab::train {

template <class Real>
struct Tensor {
  std::int64_t rows = 0, cols = 0;
  DeviceBuffer buffer;
  Real* view = nullptr;  // set for a view of rows of another tensor (no buffer of its own)

  std::int64_t size() const { return rows * cols; }
  bool has_data() const { return data() != nullptr; }
  Real* data() const { return view ? view : static_cast<Real*>(buffer.data()); }
  std::span<Real> span() const { return {data(), static_cast<std::size_t>(size())}; }
  Real* row(std::int64_t r) const { return data() + r * cols; }
  Real& operator()(std::int64_t r, std::int64_t c) const { return data()[r * cols + c]; }
};

// Rows [begin, end) of t, sharing its storage (shape only when t has no data).
template <class Real>
Tensor<Real> row_view(const Tensor<Real>& t, std::int64_t begin, std::int64_t end) {
  Tensor<Real> v;
  v.rows = end - begin;
  v.cols = t.cols;
  if (t.has_data()) v.view = t.row(begin);
  return v;
}

// element_bytes is sizeof(Real) when the ledger allocates; a shapes-only ledger may count
// another width (e.g. 2 for 16-bit activations of a model too large to run here).
template <class Real>
Tensor<Real> make_tensor(MemoryLedger& ledger, std::int64_t rows, std::int64_t cols, MemoryCategory category,
                         int element_bytes = sizeof(Real)) {
  Tensor<Real> t;
  t.rows = rows;
  t.cols = cols;
  t.buffer = ledger.allocate(static_cast<std::size_t>(rows * cols) * static_cast<std::size_t>(element_bytes), category);
  return t;
}

}  // namespace fp8lab::train
