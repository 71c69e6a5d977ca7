#include "kernels/train/attention_kind.hpp"

#include <stdexcept>

namespace fp8lab::train {

const char* attention_kind_name(AttentionKind kind) { return kind == AttentionKind::flash ? "flash" : "naive"; }

AttentionKind parse_attention_kind(std::string_view name) {
  if (name == "naive") return AttentionKind::naive;
  if (name == "flash") return AttentionKind::flash;
  throw std::invalid_argument("attention '" + std::string(name) + "' is not one of naive, flash");
}

}  // namespace fp8lab::train
