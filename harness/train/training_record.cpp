#include "harness/train/training_record.hpp"

#include <stdexcept>

namespace fp8lab::train {

std::vector<double> step_record_fields(const StepRecord& r) {
  return {r.train_loss,        r.val_loss,     r.grad_norm,         r.lr,
          r.loss_scale,        r.skipped ? 1.0 : 0.0, r.diverged ? 1.0 : 0.0, r.step_seconds,
          r.tokens_per_second, static_cast<double>(r.step_peak_bytes), static_cast<double>(r.resident_peak_bytes),
          r.fp8_flop_fraction, r.gemms_high_precision, r.compression_ratio, r.bytes_sent_per_worker,
          r.update_fraction,   r.optimizer_flops, r.zero_weight_fraction};
}

StepRecord step_record_from_fields(std::span<const double> f) {
  if (f.size() != kStepRecordFields) throw std::logic_error("step_record_from_fields: wrong field count");
  StepRecord r;
  r.train_loss = f[0];
  r.val_loss = f[1];
  r.grad_norm = f[2];
  r.lr = f[3];
  r.loss_scale = f[4];
  r.skipped = f[5] != 0;
  r.diverged = f[6] != 0;
  r.step_seconds = f[7];
  r.tokens_per_second = f[8];
  r.step_peak_bytes = static_cast<std::size_t>(f[9]);
  r.resident_peak_bytes = static_cast<std::size_t>(f[10]);
  r.fp8_flop_fraction = f[11];
  r.gemms_high_precision = f[12];
  r.compression_ratio = f[13];
  r.bytes_sent_per_worker = f[14];
  r.update_fraction = f[15];
  r.optimizer_flops = f[16];
  r.zero_weight_fraction = f[17];
  return r;
}

}  // namespace fp8lab::train
