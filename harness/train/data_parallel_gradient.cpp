#include "harness/train/data_parallel_gradient.hpp"

#include <algorithm>
#include <stdexcept>

namespace fp8lab::train {

SequenceSums run_sequences(const SequenceRunner& runner, std::span<const std::int64_t> starts, bool forward_only,
                           double loss_sum_so_far) {
  SequenceSums s;
  s.loss_sum = loss_sum_so_far;
  for (const std::int64_t start : starts) {
    const auto first = runner.stream->begin() + static_cast<std::ptrdiff_t>(start);
    StepInput input{*runner.model, runner.weights,
                    std::vector<int>(first, first + static_cast<std::ptrdiff_t>(runner.seq_len + 1))};
    input.loss_scale = runner.loss_scale;
    input.operand_stats = runner.operand_stats;
    input.delayed_scales = runner.delayed;
    input.attention = runner.policy->attention;
    input.forward_only = forward_only;
    runner.ledger->clear_phases();  // the run reads no phases; kept, they grew with every sequence
    StepResult r = run_training_step(input, *runner.recipe, *runner.policy, *runner.ledger);
    s.loss_sum += r.report.loss;
    s.peak_bytes = std::max(s.peak_bytes, r.report.peak_bytes_total);
    if (forward_only) continue;
    if (s.gradient_sums.empty()) {
      s.gradient_sums = std::move(r.gradients);
      continue;
    }
    for (std::size_t t = 0; t < r.gradients.size(); ++t)
      for (std::size_t i = 0; i < r.gradients[t].values.size(); ++i) s.gradient_sums[t].values[i] += r.gradients[t].values[i];
  }
  return s;
}

namespace {

// fl32(S / count) per element: a worker's (or the whole batch's) mean gradient.
std::vector<std::vector<float>> mean_of(const std::vector<NamedGradient>& sums, std::int64_t count) {
  std::vector<std::vector<float>> means;
  for (const NamedGradient& g : sums) {
    std::vector<float>& mean = means.emplace_back(g.values.size());
    for (std::size_t i = 0; i < mean.size(); ++i) mean[i] = static_cast<float>(g.values[i] / static_cast<double>(count));
  }
  return means;
}

}  // namespace

StepGradient data_parallel_gradient(const SequenceRunner& runner, std::span<const std::int64_t> starts,
                                    std::int64_t workers, std::vector<WorkerCompressor>& compressors, std::int64_t step) {
  const auto batch = static_cast<std::int64_t>(starts.size());
  if (workers < 1 || batch % workers != 0)
    throw std::invalid_argument("workers: " + std::to_string(workers) + " does not divide the batch of " +
                                std::to_string(batch));
  if (!compressors.empty() && static_cast<std::int64_t>(compressors.size()) != workers)
    throw std::logic_error("data_parallel_gradient: one compressor per worker");
  const std::int64_t shard = batch / workers;
  StepGradient out;
  std::vector<std::vector<double>> reduced;  // sum over workers of what each sent, decompressed
  for (std::int64_t w = 0; w < workers; ++w) {
    SequenceSums s = run_sequences(runner, starts.subspan(static_cast<std::size_t>(w * shard), static_cast<std::size_t>(shard)),
                                   /*forward_only=*/false, out.loss_sum);
    out.loss_sum = s.loss_sum;
    out.peak_bytes = std::max(out.peak_bytes, s.peak_bytes);
    std::vector<std::vector<float>> mean = mean_of(s.gradient_sums, shard);
    if (w == 0)
      for (const NamedGradient& g : s.gradient_sums) out.names.push_back(g.name);
    std::size_t elements = 0;
    for (const std::vector<float>& g : mean) elements += g.size();
    out.fp32_bits_per_worker = 32.0 * static_cast<double>(elements);
    if (workers == 1 && compressors.empty()) {  // the single worker's mean is the step's gradient
      out.gradients = std::move(mean);
      out.bits_sent_per_worker = out.fp32_bits_per_worker;
      return out;
    }
    if (reduced.empty())
      for (const std::vector<float>& g : mean) reduced.emplace_back(g.size(), 0.0);
    double bits = 0;
    for (std::size_t t = 0; t < mean.size(); ++t) {
      std::vector<float> sent = mean[t];
      if (!compressors.empty()) {
        CompressedTensor c = compressors[static_cast<std::size_t>(w)].compress(t, mean[t], step);
        bits += c.bits_sent;
        sent = std::move(c.values);
      } else {
        bits += 32.0 * static_cast<double>(sent.size());
      }
      for (std::size_t i = 0; i < sent.size(); ++i) reduced[t][i] += sent[i];
    }
    out.bits_sent_per_worker += bits / static_cast<double>(workers);
  }
  for (const std::vector<double>& sum : reduced) {
    std::vector<float>& g = out.gradients.emplace_back(sum.size());
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(sum[i] / static_cast<double>(workers));
  }
  return out;
}

}  // namespace fp8lab::train
