#include "harness/train/seed_techniques.hpp"

#include <sstream>
#include <stdexcept>

namespace fp8lab::train {

void SeedTechniques::validate() const {
  if (workers < 1 || workers > 4096) throw std::invalid_argument("workers: must be in 1..4096");
  compression.validate();
  sparse.validate();
  if (adaptive) adaptive->validate();
}

std::string SeedTechniques::describe() const {
  std::ostringstream s;
  s.precision(17);
  s << "workers = " << workers << "\ncompression = " << compression_kind_name(compression.kind) << " bits "
    << compression.bits << " block " << compression.block << " rounding " << compression_rounding_name(compression.rounding)
    << " topk_ratio " << compression.topk_ratio << " error_feedback " << compression.error_feedback << " seed "
    << compression.seed << "\nsparse_update = " << sparse_mode_name(sparse.mode) << " ratio " << sparse.ratio
    << " frozen_momentum " << sparse.frozen_momentum << "\n";
  if (adaptive)
    s << "adaptive = every " << adaptive->every << " statistic " << adaptive_statistic_name(adaptive->statistic) << " low "
      << adaptive->band_low << " high " << adaptive->band_high << " patience " << adaptive->patience << "\n";
  return s.str();
}

}  // namespace fp8lab::train
