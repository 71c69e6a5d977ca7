// What a PyTorch training run needs to start where `fp8lab train` starts (fp8lab.torch's Llama
// example, experiments/torch_llama_train.py): the same initial weights (a llama2.c checkpoint or
// the engine's seeded init, harness/train/model_init.hpp), the same token streams (a token file,
// or the corpus sampled from stories260K with its validation split, as the train kind samples
// them), the same batch order (harness/train/batch_order.hpp) and learning rates
// (harness/train/lr_schedule.hpp). Arrays come back as NumPy arrays that own their buffers.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdio>

#include "data/llama2c_checkpoint.hpp"
#include "harness/python/array_conversion.hpp"
#include "harness/python/bindings.hpp"
#include "harness/train/batch_order.hpp"
#include "harness/train/llama2c_weights.hpp"
#include "harness/train/lr_schedule.hpp"
#include "harness/train/model_init.hpp"
#include "harness/train/story_sampler.hpp"
#include "harness/train/token_file.hpp"

namespace fp8lab::python {
namespace py = pybind11;
namespace {

py::dict weights_dict(const LlamaWeights& w) {
  const LlamaConfig& c = w.config;
  const std::int64_t L = c.n_layers, d = c.dim, h = c.hidden_dim, kv = c.kv_dim();
  py::dict arrays;
  const auto put = [&](const char* name, const std::vector<float>& values, std::vector<std::int64_t> shape) {
    arrays[name] = adopt(std::vector<float>(values), shape);
  };
  put("token_embedding", w.token_embedding, {c.vocab_size, d});
  put("rms_att", w.rms_att, {L, d});
  put("rms_ffn", w.rms_ffn, {L, d});
  put("wq", w.wq, {L, d, d});
  put("wk", w.wk, {L, kv, d});
  put("wv", w.wv, {L, kv, d});
  put("wo", w.wo, {L, d, d});
  put("w1", w.w1, {L, h, d});
  put("w2", w.w2, {L, d, h});
  put("w3", w.w3, {L, h, d});
  put("rms_final", w.rms_final, {d});
  py::dict config;
  config["dim"] = c.dim;
  config["hidden_dim"] = c.hidden_dim;
  config["n_layers"] = c.n_layers;
  config["n_heads"] = c.n_heads;
  config["n_kv_heads"] = c.n_kv_heads;
  config["vocab_size"] = c.vocab_size;
  config["seq_len"] = c.seq_len;
  py::dict out;
  out["config"] = config;
  out["weights"] = arrays;
  return out;
}

py::array_t<std::int32_t> token_array(std::vector<std::int32_t> tokens) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  return adopt(std::move(tokens), {n});
}

py::dict stream_dict(train::TokenStream stream) {
  py::dict d;
  d["source"] = stream.source;
  d["sha256"] = stream.sha256;
  d["tokens"] = token_array(std::move(stream.tokens));
  return d;
}

}  // namespace

void add_train_data_bindings(py::module_& m) {
  m.def(
      "_llama_weights",
      [](const std::string& init, const std::string& checkpoint, const std::string& preset, std::uint64_t seed) {
        const train::ModelInit model{init, checkpoint, preset};
        const LlamaWeights w = model.load(seed);
        py::dict d = weights_dict(w);
        d["description"] = model.describe(w, seed);
        return d;
      },
      py::arg("init"), py::arg("checkpoint"), py::arg("preset"), py::arg("seed"),
      "A training run's initial weights as `fp8lab train` makes them: init 'checkpoint' (stories260K of the data "
      "folder or a llama2.c file) or 'seeded' (the engine's init of a preset); {config, weights, description}");
  m.def(
      "_sampled_corpus",
      [](std::int64_t count, double temperature, std::uint64_t seed) {
        const LlamaWeights source = load_llama2c_checkpoint(find_data_file("stories260K/stories260K.bin"), kStories260kSha256);
        train::SamplerSettings s;
        s.count = count;
        s.temperature = temperature;
        s.seed = seed;
        s.validate(source.config.seq_len);
        train::TokenStream stream;
        {
          py::gil_scoped_release unlocked;
          stream.tokens = train::sample_corpus(source, s);
        }
        stream.sha256 = train::token_sha256(stream.tokens);
        char t[32];
        std::snprintf(t, sizeof t, "%g", temperature);
        stream.source = std::to_string(count) + " tokens sampled from stories260K at temperature " + t + ", seed " +
                        std::to_string(seed) + " (corpus sha256 " + stream.sha256 + ")";
        return stream_dict(std::move(stream));
      },
      py::arg("count"), py::arg("temperature"), py::arg("seed"),
      "The corpus the train kind samples from stories260K ({tokens, sha256, source}); its validation split is the "
      "same call with seed + 1 and the validation count");
  m.def(
      "_token_file",
      [](const std::string& file, int vocab) { return stream_dict(train::read_token_file(file, vocab)); },
      py::arg("file"), py::arg("vocab"), "A token file as `fp8lab train --tokens` reads it ({tokens, sha256, source})");
  m.def(
      "_batch_starts",
      [](std::int64_t stream_tokens, std::int64_t batch, std::int64_t seq_len, const std::string& order, std::uint64_t seed,
         std::int64_t step) {
        const train::BatchSchedule schedule(stream_tokens, batch, seq_len, train::parse_batch_order(order), seed);
        std::vector<std::int64_t> starts;
        for (std::int64_t i = 0; i < batch; ++i) starts.push_back(schedule.start(step, i));
        return starts;
      },
      py::arg("stream_tokens"), py::arg("batch"), py::arg("seq_len"), py::arg("order"), py::arg("seed"), py::arg("step"),
      "First token of each sequence of a step (harness/train/batch_order.hpp)");
  m.def(
      "_learning_rate",
      [](const std::string& kind, double lr, double min_lr, std::int64_t warmup, std::int64_t steps, std::int64_t step) {
        train::LrSchedule s;
        s.kind = train::parse_lr_schedule(kind);
        s.lr = lr;
        s.min_lr = min_lr;
        s.warmup = warmup;
        s.steps = steps;
        s.validate();
        return s.at(step);
      },
      py::arg("schedule"), py::arg("lr"), py::arg("min_lr"), py::arg("warmup"), py::arg("steps"), py::arg("step"),
      "The learning rate of a step (harness/train/lr_schedule.hpp)");
}

}  // namespace fp8lab::python
