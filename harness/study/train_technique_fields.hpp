#pragma once
// The seed techniques' fields (harness/train/seed_techniques.hpp) and the AdamW moment format,
// read from a train study's [training] table, or from the [training] table of a recipe file on
// the study's recipe axis, which overrides them for that recipe's points: so one study sweeps
// techniques as it sweeps precision recipes.
//
//   workers = 1                      simulated data-parallel workers (divide the batch)
//   compression = "none"             none | quantize | topk (harness/train/gradient_compression.hpp)
//   compression_bits = 8             quantize: 4..16
//   compression_block = 0            quantize: elements per scale (0: one per tensor)
//   compression_rounding = "nearest" quantize: nearest | stochastic
//   compression_seed = 0             stochastic rounding's seed
//   topk_ratio = 0.01                topk: fraction of each tensor sent
//   error_feedback = true            carry what compression dropped to the next step
//   sparse_update = "off"            off | gradient | weight_mask (harness/train/sparse_update.hpp)
//   sparse_ratio = 1.0               fraction of each tensor selected
//   sparse_frozen_momentum = false   gradient mode: frozen elements' moments still track their gradient
//   adaptive_every = 0               adaptive precision every N steps (0: off; harness/train/precision_controller.hpp)
//   adaptive_statistic = "sqnr"      sqnr | grad_noise
//   adaptive_low, adaptive_high      the hysteresis band (dB for sqnr; a ratio for grad_noise); required when on
//   adaptive_patience = 1            consecutive evaluations before a switch
//   moments = "fp32"                 fp32 | bf16 | e4m3 | e4m3_1x128 | e4m3_e5m2 (harness/train/adamw.hpp)
#include <filesystem>
#include <string>

#include "harness/study/study_spec.hpp"
#include "harness/train/training_run.hpp"

namespace fp8lab {

// Reads the fields under `table` ("training") into run, each defaulting to run's value. Errors
// are SpecErrors naming the file and the field.
void read_technique_fields(const StudySpec& spec, const std::string& table, train::TrainingRunConfig& run);

// A recipe file's [training] table applied to run (nothing when it has none): only the keys above
// are allowed there (the run's length, batch and schedule are the study's).
void apply_recipe_training_table(const std::filesystem::path& recipe_file, train::TrainingRunConfig& run);

}  // namespace fp8lab
