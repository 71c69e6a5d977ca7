#include "kernels/wgmma_tiled_plan.hpp"

#include <bit>
#include <stdexcept>
#include <string>

namespace fp8lab {
namespace {

constexpr int kUnused = 30;  // a shift that sends every index below 2^30 to 0

ScaleAddressing addressing(const QuantizedTensor& q) {
  using Kind = Granularity::Kind;
  const Granularity& g = q.config.granularity;
  switch (g.kind) {
    case Kind::tile: return {0, 0, q.scale_cols};  // tile:1x128 (plan_wgmma_gemm takes no other T)
    case Kind::row: return {0, kUnused, 1};
    case Kind::tensor: return {kUnused, kUnused, 1};
    case Kind::block: {
      if (!std::has_single_bit(static_cast<unsigned>(g.size)) || g.size < kWgmmaBlockK)
        throw std::invalid_argument("the tiled WGMMA kernel takes B blocks of a power of two >= 128, not " + g.to_string());
      const int shift = std::countr_zero(static_cast<unsigned>(g.size));
      return {shift, shift - 7, q.scale_cols};
    }
  }
  throw std::invalid_argument("unknown granularity");
}

}  // namespace

int choose_tiled_block_n(std::int64_t m_blocks, std::int64_t n, int sms, std::span<const int> widths) {
  if (widths.empty() || sms <= 0 || m_blocks <= 0 || n <= 0) throw std::invalid_argument("choose_tiled_block_n: empty problem");
  int best = widths.front();
  std::int64_t best_cost = -1;
  for (const int width : widths) {
    const std::int64_t tiles = m_blocks * ((n + width - 1) / width);
    const std::int64_t cost = ((tiles + sms - 1) / sms) * (width + 32);
    if (best_cost < 0 || cost < best_cost || (cost == best_cost && width > best)) {
      best = width;
      best_cost = cost;
    }
  }
  return best;
}

WgmmaTiledPlan plan_wgmma_tiled_gemm(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                                     int sms) {
  WgmmaTiledPlan plan;
  plan.launch = plan_wgmma_gemm(a, b, config, true);
  plan.a = addressing(a);
  plan.b = addressing(b);  // per column (row, tile:1x128): scales[column * scale_cols + (kb >> k_shift)]
  plan.m_blocks = (a.rows + kWgmmaBlockM - 1) / kWgmmaBlockM;
  const bool all_widths = a.config.format == Fp8Format::e4m3 && !plan.launch.b_scale_per_column;
  std::span<const int> widths = kTiledNarrowWidths;
  if (all_widths) widths = plan.launch.promotion_template == 128 ? std::span<const int>(kTiledWidths) : kTiledShortIntervalWidths;
  plan.block_n = choose_tiled_block_n(plan.m_blocks, b.rows, sms, widths);
  plan.n_blocks = (b.rows + plan.block_n - 1) / plan.block_n;
  return plan;
}

}  // namespace fp8lab
