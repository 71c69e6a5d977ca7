#pragma once
// A ledger tensor of seeded values uniform in [-1, 1) (the engine op tests' operands): the same
// values on every machine (mt19937_64 bits, not a library distribution).
#include <random>

#include "kernels/memory_ledger.hpp"
#include "kernels/train/tensor.hpp"

namespace fp8lab::test {

template <class Real>
train::Tensor<Real> random_train_tensor(MemoryLedger& ledger, std::int64_t rows, std::int64_t cols, std::mt19937_64& rng) {
  train::Tensor<Real> t = train::make_tensor<Real>(ledger, rows, cols, MemoryCategory::workspace);
  for (std::int64_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<Real>(static_cast<double>(rng() >> 11) * 0x1p-52 - 1.0);
  return t;
}

}  // namespace fp8lab::test
