#pragma once
// How the training step computes causal attention (a step field, StepInput::attention):
//   naive  the probabilities p = softmax(q k^T / sqrt(hs)) of every head are materialised,
//          (heads T) x T, kept for backward (or recomputed, per the activation policy), and
//          backward reads them (forward_ops.hpp, backward_ops.hpp);
//   flash  FlashAttention-2: forward runs an online softmax over key blocks and keeps only the
//          output o and the per-row log-sum-exp L (heads x T); backward recomputes the
//          probabilities block by block from q, k and L (flash_attention.hpp). No T x T buffer.
// naive is the default of the step, so every study, test and baseline made before flash
// existed keeps its bits and figures; the training paths (harness/train) default to flash.
#include <string>
#include <string_view>

namespace fp8lab::train {

enum class AttentionKind { naive, flash };

const char* attention_kind_name(AttentionKind kind);  // "naive", "flash"
// Throws std::invalid_argument: "attention 'x' is not one of naive, flash".
AttentionKind parse_attention_kind(std::string_view name);

}  // namespace fp8lab::train
