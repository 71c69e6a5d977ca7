#pragma once
// The training study's columns for one run (harness/train/training_run.hpp): the per-step curves
// along `step` (train and validation loss, gradient norm, learning rate, loss scale, skipped and
// diverged flags, step time, tokens/s, the ledger's step peak), the run's scalars (final losses,
// counts, parameters, whole-run peak bytes, optimizer-state bytes, median tokens/s, the token
// stream's provenance), and the FP8 operand statistics (train_operand_columns.hpp).
#include <cstdint>
#include <string>
#include <vector>

#include "harness/results/results_file.hpp"
#include "harness/train/training_run.hpp"

namespace fp8lab {

std::vector<ColumnDef> train_run_columns(std::int64_t steps, int model_layers);
Row train_run_row(const train::TrainingRunResult& run, int model_layers, const std::string& train_tokens);

}  // namespace fp8lab
