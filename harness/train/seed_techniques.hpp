#pragma once
// The seed techniques, those that articles about DeepSeek's training credit with large gains, as
// options of a training run, beside the AdamW moment format (harness/train/adamw.hpp, technique 4):
//   1. adaptive precision scheduling   harness/train/precision_controller.hpp (adaptive_every > 0)
//   2. gradient compression with error feedback under W simulated data-parallel workers
//                                      harness/train/gradient_compression.hpp, data_parallel_gradient.hpp
//   3. dynamic sparse updates          harness/train/sparse_update.hpp
// (5, ZeRO sharding, is the zero_memory study's: it changes bytes per rank, not the curve.)
// All default to off, which leaves a run's bits as they were before them.
#include <cstdint>
#include <optional>
#include <string>

#include "harness/train/gradient_compression.hpp"
#include "harness/train/precision_controller.hpp"
#include "harness/train/sparse_update.hpp"

namespace fp8lab::train {

struct SeedTechniques {
  std::int64_t workers = 1;  // simulated data-parallel workers; must divide the batch
  CompressionConfig compression;
  SparseUpdateConfig sparse;
  std::optional<PrecisionControllerConfig> adaptive;  // none: no adaptive precision scheduling

  bool adaptive_on() const { return adaptive.has_value(); }
  bool compressing() const { return compression.kind != CompressionKind::none; }
  // Throws std::invalid_argument naming the field ("workers: ...", "compression_bits: ...").
  void validate() const;
  // One "name = value" per line, for a checkpoint's identity.
  std::string describe() const;
};

// The spec / recipe-file keys of these options (and `moments`), for readers that check
// for unknown keys.
inline constexpr const char* kSeedTechniqueKeys[] = {
    "moments",           "workers",        "compression",  "compression_bits", "compression_block",
    "compression_rounding", "compression_seed", "topk_ratio", "error_feedback", "sparse_update",
    "sparse_ratio",      "sparse_frozen_momentum", "adaptive_every", "adaptive_statistic", "adaptive_low",
    "adaptive_high",     "adaptive_patience"};

}  // namespace fp8lab::train
