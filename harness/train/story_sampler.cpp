#include "harness/train/story_sampler.hpp"

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

namespace fp8lab::train {
namespace {

constexpr double kEps = 1e-5, kTheta = 10000.0;
constexpr std::int32_t kBos = 1;

// y = W x for W rows x cols (row-major FP32), in FP64, each dot product in order of k.
void matvec(const float* w, const std::vector<double>& x, std::vector<double>& y, int rows) {
  const std::size_t cols = x.size();
  y.assign(static_cast<std::size_t>(rows), 0.0);
  for (int r = 0; r < rows; ++r) {
    double s = 0;
    const float* row = w + static_cast<std::size_t>(r) * cols;
    for (std::size_t k = 0; k < cols; ++k) s += static_cast<double>(row[k]) * x[k];
    y[static_cast<std::size_t>(r)] = s;
  }
}

std::vector<double> rmsnorm(const std::vector<double>& x, const float* g) {
  double squares = 0;
  for (double v : x) squares += v * v;
  const double r = 1.0 / std::sqrt(squares / static_cast<double>(x.size()) + kEps);
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * static_cast<double>(g[i]) * r;
  return y;
}

void rope(std::vector<double>& x, int head_size, int position) {
  for (std::size_t i = 0; i + 1 < x.size(); i += 2) {
    const double freq = 1.0 / std::pow(kTheta, static_cast<double>(static_cast<int>(i) % head_size) / head_size);
    const double angle = position * freq, c = std::cos(angle), s = std::sin(angle);
    const double a = x[i], b = x[i + 1];
    x[i] = a * c - b * s;
    x[i + 1] = a * s + b * c;
  }
}

// The model with a key/value cache for one story.
class CachedModel {
 public:
  explicit CachedModel(const LlamaWeights& w) : w_(w), c_(w.config), keys_(c_.n_layers), values_(c_.n_layers) {}

  void reset() {
    for (auto& k : keys_) k.clear();
    for (auto& v : values_) v.clear();
    position_ = 0;
  }

  // Logits after `token` at the next position.
  std::vector<double> step(std::int32_t token) {
    const int D = c_.dim, F = c_.hidden_dim, hs = c_.head_size(), kv_dim = c_.kv_dim();
    const int group = c_.n_heads / c_.n_kv_heads;
    std::vector<double> x(w_.token_embedding.begin() + static_cast<std::ptrdiff_t>(token) * D,
                          w_.token_embedding.begin() + static_cast<std::ptrdiff_t>(token + 1) * D);
    std::vector<double> q, k, v, o(static_cast<std::size_t>(D)), t, h1, h3;
    for (int l = 0; l < c_.n_layers; ++l) {
      const std::size_t dd = static_cast<std::size_t>(l) * D * D, kd = static_cast<std::size_t>(l) * kv_dim * D,
                        fd = static_cast<std::size_t>(l) * F * D;
      const std::vector<double> a = rmsnorm(x, w_.rms_att.data() + static_cast<std::size_t>(l) * D);
      matvec(w_.wq.data() + dd, a, q, D);
      matvec(w_.wk.data() + kd, a, k, kv_dim);
      matvec(w_.wv.data() + kd, a, v, kv_dim);
      rope(q, hs, position_);
      rope(k, hs, position_);
      keys_[l].insert(keys_[l].end(), k.begin(), k.end());
      values_[l].insert(values_[l].end(), v.begin(), v.end());
      const int length = position_ + 1;
      for (int h = 0; h < c_.n_heads; ++h) {
        const std::size_t kv_offset = static_cast<std::size_t>(h / group) * hs;
        std::vector<double> score(static_cast<std::size_t>(length));
        double top = -std::numeric_limits<double>::infinity();
        for (int p = 0; p < length; ++p) {
          double s = 0;
          for (int i = 0; i < hs; ++i)
            s += q[static_cast<std::size_t>(h * hs + i)] * keys_[l][static_cast<std::size_t>(p) * kv_dim + kv_offset + i];
          score[static_cast<std::size_t>(p)] = s / std::sqrt(static_cast<double>(hs));
          top = std::max(top, score[static_cast<std::size_t>(p)]);
        }
        double total = 0;
        for (double& s : score) total += (s = std::exp(s - top));
        for (int i = 0; i < hs; ++i) {
          double sum = 0;
          for (int p = 0; p < length; ++p)
            sum += score[static_cast<std::size_t>(p)] * values_[l][static_cast<std::size_t>(p) * kv_dim + kv_offset + i];
          o[static_cast<std::size_t>(h * hs + i)] = sum / total;
        }
      }
      matvec(w_.wo.data() + dd, o, t, D);
      for (int i = 0; i < D; ++i) x[static_cast<std::size_t>(i)] += t[static_cast<std::size_t>(i)];
      const std::vector<double> b = rmsnorm(x, w_.rms_ffn.data() + static_cast<std::size_t>(l) * D);
      matvec(w_.w1.data() + fd, b, h1, F);
      matvec(w_.w3.data() + fd, b, h3, F);
      for (int i = 0; i < F; ++i) {
        const double z = h1[static_cast<std::size_t>(i)];
        h1[static_cast<std::size_t>(i)] = z / (1.0 + std::exp(-z)) * h3[static_cast<std::size_t>(i)];
      }
      matvec(w_.w2.data() + fd, h1, t, D);
      for (int i = 0; i < D; ++i) x[static_cast<std::size_t>(i)] += t[static_cast<std::size_t>(i)];
    }
    std::vector<double> logits;
    matvec(w_.token_embedding.data(), rmsnorm(x, w_.rms_final.data()), logits, c_.vocab_size);
    ++position_;
    return logits;
  }

 private:
  const LlamaWeights& w_;
  const LlamaConfig c_;
  std::vector<std::vector<double>> keys_, values_;  // per layer: position-major, kv_dim each
  int position_ = 0;
};

std::int32_t sample(const std::vector<double>& logits, double temperature, std::mt19937_64& rng) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  if (temperature == 0) return static_cast<std::int32_t>(best);
  std::vector<double> p(logits.size());
  double total = 0;
  for (std::size_t i = 0; i < p.size(); ++i) total += (p[i] = std::exp((logits[i] - logits[best]) / temperature));
  const double u = static_cast<double>(rng() >> 11) * 0x1p-53 * total;
  double cumulative = 0;
  for (std::size_t i = 0; i < p.size(); ++i)
    if ((cumulative += p[i]) > u) return static_cast<std::int32_t>(i);
  return static_cast<std::int32_t>(p.size() - 1);
}

}  // namespace

void SamplerSettings::validate(int seq_len) const {
  if (count < 2 || count > (std::int64_t{1} << 30)) throw std::invalid_argument("sample_tokens: must be in 2..2^30");
  if (!std::isfinite(temperature) || temperature < 0) throw std::invalid_argument("temperature: must be finite and >= 0");
  const int limit = seq_len > 0 ? seq_len : 4096;
  if (max_story < 2 || max_story > limit)
    throw std::invalid_argument("max_story: must be in 2.." + std::to_string(limit) + " (the checkpoint's seq_len)");
}

std::vector<std::int32_t> sample_corpus(const LlamaWeights& model, const SamplerSettings& settings) {
  settings.validate(model.config.seq_len);
  CachedModel cached(model);
  std::mt19937_64 rng(settings.seed);
  std::vector<std::int32_t> corpus;
  corpus.reserve(static_cast<std::size_t>(settings.count));
  while (static_cast<std::int64_t>(corpus.size()) < settings.count) {
    cached.reset();
    std::int32_t token = kBos;
    for (int length = 0; length < settings.max_story && static_cast<std::int64_t>(corpus.size()) < settings.count; ++length) {
      corpus.push_back(token);
      token = sample(cached.step(token), settings.temperature, rng);
      if (token == kBos) break;
    }
  }
  return corpus;
}

}  // namespace fp8lab::train
