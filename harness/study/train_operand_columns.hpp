#pragma once
// The training study's FP8 operand-statistics columns (harness/train/training_record.hpp
// operand_stats) and their values for one run:
//   along `step`:          sqnr_<kind>_<a|b>   the worst linear layer's SQNR (dB) of operand A / B
//                          saturated_<kind>    fraction of the kind's FP8 operand elements clipped
//                          flushed_<kind>      fraction quantized to zero from non-zero
//   along `linear_layer`:  final_sqnr_<kind>_<a|b>   each layer's SQNR at the last sampled step
// NaN on steps not sampled and where the recipe runs no FP8 GEMM of the kind (a BF16 layer).
// linear_layer labels: kernels/train/model_config.hpp linear_layer_names.
#include <vector>

#include "harness/results/results_file.hpp"
#include "harness/train/training_record.hpp"
#include "kernels/train/model_config.hpp"

namespace fp8lab {

std::vector<ColumnDef> operand_stats_columns(const ExtraDimension& step, int model_layers);
void add_operand_stats(const std::vector<train::StepRecord>& steps, int model_layers, Row& row);

}  // namespace fp8lab
