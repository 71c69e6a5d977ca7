#pragma once
// What the training step holds of one saved tensor between forward and backward, as the
// activation policy says: the tensor itself (keep), its FP8 copy (fp8: E4M3, 1x128 tiles, FP32
// scales, what DeepSeek-V3 caches linear inputs as; dequantized when backward reads it), or
// nothing (recompute). The FP8 copy's bytes are counted in the ledger (kept_bytes), also in
// shapes-only mode where there is nothing to quantize.
#include <algorithm>
#include <vector>

#include "kernels/cpu/quantize.hpp"
#include "kernels/memory_ledger.hpp"
#include "kernels/train/activation_policy.hpp"
#include "kernels/train/tensor.hpp"

namespace fp8lab::train {

inline const QuantizeConfig kFp8Cache{Fp8Format::e4m3, Granularity::tile(128), ScaleRule::fp32};

template <class Real>
struct SavedSlot {
  Keep keep = Keep::keep;
  Tensor<Real> value;   // keep
  QuantizedTensor fp8;  // fp8 (codes and scales; the ledger counts their bytes in fp8_bytes)
  DeviceBuffer fp8_bytes;

  // Takes `produced` as `how` says (moved in, or quantized with fp8_count bytes in the ledger as
  // saved activations); `produced` is released either way.
  void store(Keep how, Tensor<Real>& produced, MemoryLedger& ledger, std::size_t fp8_count) {
    keep = how;
    if (keep == Keep::keep) value = std::move(produced);
    if (keep == Keep::fp8) {
      fp8_bytes = ledger.allocate(fp8_count, MemoryCategory::saved_activations);
      if (produced.has_data()) {
        const std::vector<float> values(produced.data(), produced.data() + produced.size());
        fp8 = cpu::quantize(values, produced.rows, produced.cols, kFp8Cache);
      }
    }
    produced = Tensor<Real>();
  }

  // The FP8 copy dequantized into `out` (its shape; nothing to write in shapes-only mode).
  void load_fp8(Tensor<Real>& out) const {
    if (!out.has_data()) return;
    const std::vector<float> values = cpu::dequantize(fp8);
    std::copy(values.begin(), values.end(), out.data());
  }
};

}  // namespace fp8lab::train
