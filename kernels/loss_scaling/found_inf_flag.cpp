#include "kernels/loss_scaling/found_inf_flag.hpp"

#include <stdexcept>

namespace fp8lab {

FoundInfFlag::FoundInfFlag(MemoryLedger& ledger) {
  if (ledger.shapes_only())
    throw std::invalid_argument("found-inf flag: the memory ledger is shapes-only; a flag needs real memory");
  buffer_ = ledger.allocate(sizeof(float), MemoryCategory::workspace);
}

}  // namespace fp8lab
