#include "reference/llama_fp64_ref.hpp"

#include <cmath>
#include <limits>

#include "reference/fp64_dot_ref.hpp"

namespace fp8lab::ref {
namespace {

using Matrix = Eigen::MatrixXd;
using Vector = Eigen::VectorXd;
constexpr double kEps = 1e-5, kTheta = 10000.0;

// Every reduction runs in the fixed FP64 order of reference/fp64_dot_ref.hpp (Eigen's own
// products, sums and vectorized exp give ISA-dependent bits): x y^T, x y, x^T y.
Matrix mul_nt(const Matrix& x, const Matrix& y) { return gemm_fp64(x, y); }
Matrix mul_nn(const Matrix& x, const Matrix& y) { return gemm_fp64(x, y.transpose()); }
Matrix mul_tn(const Matrix& x, const Matrix& y) { return gemm_fp64(x.transpose(), y.transpose()); }
double squared_norm(const Vector& v) { return dot_fp64(v, v); }

// exp(v - top), element by element with std::exp.
Eigen::RowVectorXd exp_minus(const Eigen::RowVectorXd& v, double top) {
  Eigen::RowVectorXd e(v.size());
  for (Eigen::Index i = 0; i < v.size(); ++i) e(i) = std::exp(v(i) - top);
  return e;
}

// y = x * g / sqrt(mean(x^2) + eps), row by row.
Matrix rmsnorm(const Matrix& x, const Vector& g) {
  Matrix y(x.rows(), x.cols());
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    const double r = 1.0 / std::sqrt(squared_norm(x.row(t).transpose()) / static_cast<double>(x.cols()) + kEps);
    y.row(t) = x.row(t).cwiseProduct(g.transpose()) * r;
  }
  return y;
}

// dx from dy; adds dg. With r = (mean x^2 + eps)^-1/2: dx = r g.dy - r^3 / D x sum(dy g x).
Matrix rmsnorm_backward(const Matrix& x, const Vector& g, const Matrix& dy, Vector& dg) {
  Matrix dx(x.rows(), x.cols());
  const double d = static_cast<double>(x.cols());
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    const double r = 1.0 / std::sqrt(squared_norm(x.row(t).transpose()) / d + kEps);
    const Eigen::RowVectorXd gdy = dy.row(t).cwiseProduct(g.transpose());
    dg += (dy.row(t).cwiseProduct(x.row(t)) * r).transpose();
    dx.row(t) = gdy * r - x.row(t) * (r * r * r / d * dot_fp64(gdy.transpose(), x.row(t).transpose()));
  }
  return dx;
}

// Rotates consecutive pairs (i, i+1) of every row t by t * theta^-(i mod hs)/hs; sign -1 undoes it.
Matrix rope(const Matrix& x, int head_size, double sign) {
  Matrix y = x;
  for (Eigen::Index t = 0; t < x.rows(); ++t)
    for (Eigen::Index i = 0; i + 1 < x.cols(); i += 2) {
      const double freq = 1.0 / std::pow(kTheta, static_cast<double>(i % head_size) / head_size);
      const double angle = sign * static_cast<double>(t) * freq, c = std::cos(angle), s = std::sin(angle);
      y(t, i) = x(t, i) * c - x(t, i + 1) * s;
      y(t, i + 1) = x(t, i) * s + x(t, i + 1) * c;
    }
  return y;
}

double silu(double z) { return z / (1.0 + std::exp(-z)); }
double silu_derivative(double z) {
  const double s = 1.0 / (1.0 + std::exp(-z));
  return s * (1.0 + z * (1.0 - s));
}

struct LayerCache {
  Matrix x_in, a, q, k, v, o, x_mid, b, h1, h3, g;
  std::vector<Matrix> p;  // attention probabilities per head, T x T
};

struct Forward {
  std::vector<LayerCache> layers;
  Matrix x_last, final_norm, logits;
};

Forward run_forward(const LlamaModel& m, const std::vector<int>& tokens) {
  const auto T = static_cast<Eigen::Index>(tokens.size());
  const int hs = m.head_size(), group = m.heads / m.kv_heads;
  const double inv_sqrt_hs = 1.0 / std::sqrt(static_cast<double>(hs));
  Forward f;
  Matrix x(T, m.dim);
  for (Eigen::Index t = 0; t < T; ++t) x.row(t) = m.embedding.row(tokens[static_cast<std::size_t>(t)]);
  for (int l = 0; l < m.layers; ++l) {
    LayerCache c;
    c.x_in = x;
    c.a = rmsnorm(x, m.rms_att[l]);
    c.q = rope(mul_nt(c.a, m.wq[l]), hs, 1.0);
    c.k = rope(mul_nt(c.a, m.wk[l]), hs, 1.0);
    c.v = mul_nt(c.a, m.wv[l]);
    c.o = Matrix::Zero(T, m.dim);
    for (int h = 0; h < m.heads; ++h) {
      const int kv = h / group;
      Matrix s = mul_nt(c.q.middleCols(h * hs, hs), c.k.middleCols(kv * hs, hs)) * inv_sqrt_hs;
      for (Eigen::Index t = 0; t < T; ++t) {
        for (Eigen::Index u = t + 1; u < T; ++u) s(t, u) = -std::numeric_limits<double>::infinity();
        const double top = s.row(t).maxCoeff();
        s.row(t) = exp_minus(s.row(t), top);
        s.row(t) /= sum_fp64(s.row(t).transpose());
      }
      c.o.middleCols(h * hs, hs) = mul_nn(s, c.v.middleCols(kv * hs, hs));
      c.p.push_back(std::move(s));
    }
    c.x_mid = x + mul_nt(c.o, m.wo[l]);
    c.b = rmsnorm(c.x_mid, m.rms_ffn[l]);
    c.h1 = mul_nt(c.b, m.w1[l]);
    c.h3 = mul_nt(c.b, m.w3[l]);
    c.g = c.h1.unaryExpr(&silu).cwiseProduct(c.h3);
    x = c.x_mid + mul_nt(c.g, m.w2[l]);
    f.layers.push_back(std::move(c));
  }
  f.x_last = x;
  f.final_norm = rmsnorm(x, m.rms_final);
  f.logits = mul_nt(f.final_norm, m.embedding);
  return f;
}

LlamaModel zeros_like(const LlamaModel& m) {
  LlamaModel g = m;
  g.embedding.setZero();
  g.rms_final.setZero();
  for (auto* set : {&g.rms_att, &g.rms_ffn})
    for (Vector& v : *set) v.setZero();
  for (auto* set : {&g.wq, &g.wk, &g.wv, &g.wo, &g.w1, &g.w2, &g.w3})
    for (Matrix& w : *set) w.setZero();
  return g;
}

// Softmax minus one-hot of the next token, averaged over the T-1 predicted positions.
Matrix cross_entropy_grad(const Matrix& logits, const std::vector<int>& tokens, double& loss) {
  const Eigen::Index T = logits.rows();
  Matrix d = Matrix::Zero(T, logits.cols());
  loss = 0;
  for (Eigen::Index t = 0; t + 1 < T; ++t) {
    const double top = logits.row(t).maxCoeff();
    const Eigen::RowVectorXd e = exp_minus(logits.row(t), top);
    const double z = sum_fp64(e.transpose());
    const int next = tokens[static_cast<std::size_t>(t + 1)];
    loss += -(logits(t, next) - top - std::log(z));
    d.row(t) = e / z;
    d(t, next) -= 1.0;
  }
  const double n = static_cast<double>(T - 1);
  loss /= n;
  return d / n;
}

}  // namespace

Eigen::MatrixXd llama_logits(const LlamaModel& model, const std::vector<int>& tokens) {
  return run_forward(model, tokens).logits;
}

std::vector<int> llama_greedy(const LlamaModel& model, std::vector<int> prompt, int steps) {
  for (int s = 0; s < steps; ++s) {
    const Matrix logits = llama_logits(model, prompt);
    Eigen::Index next = 0;
    logits.row(logits.rows() - 1).maxCoeff(&next);
    prompt.push_back(static_cast<int>(next));
  }
  return prompt;
}

double llama_loss(const LlamaModel& model, const std::vector<int>& tokens) {
  double loss = 0;
  cross_entropy_grad(run_forward(model, tokens).logits, tokens, loss);
  return loss;
}

LlamaBackward llama_backward(const LlamaModel& m, const std::vector<int>& tokens) {
  const Forward f = run_forward(m, tokens);
  const auto T = static_cast<Eigen::Index>(tokens.size());
  const int hs = m.head_size(), group = m.heads / m.kv_heads;
  const double inv_sqrt_hs = 1.0 / std::sqrt(static_cast<double>(hs));
  LlamaBackward out;
  out.grad = zeros_like(m);
  LlamaModel& g = out.grad;

  const Matrix dlogits = cross_entropy_grad(f.logits, tokens, out.loss);
  out.linears.push_back({"classifier", f.final_norm, m.embedding, dlogits});
  g.embedding += mul_tn(dlogits, f.final_norm);
  Matrix dx = rmsnorm_backward(f.x_last, m.rms_final, mul_nn(dlogits, m.embedding), g.rms_final);

  for (int l = m.layers - 1; l >= 0; --l) {
    const LayerCache& c = f.layers[static_cast<std::size_t>(l)];
    const std::string prefix = "L" + std::to_string(l) + ".";
    out.linears.push_back({prefix + "w2", c.g, m.w2[l], dx});  // dx is dLoss/d(layer output) here
    // Feed-forward: x = x_mid + (silu(h1) * h3) W2^T with h1 = b W1^T, h3 = b W3^T.
    const Matrix dg = mul_nn(dx, m.w2[l]);
    g.w2[l] += mul_tn(dx, c.g);
    const Matrix dh1 = dg.cwiseProduct(c.h3).cwiseProduct(c.h1.unaryExpr(&silu_derivative));
    const Matrix dh3 = dg.cwiseProduct(c.h1.unaryExpr(&silu));
    g.w1[l] += mul_tn(dh1, c.b);
    g.w3[l] += mul_tn(dh3, c.b);
    const Matrix db = mul_nn(dh1, m.w1[l]) + mul_nn(dh3, m.w3[l]);
    const Matrix dx_mid = dx + rmsnorm_backward(c.x_mid, m.rms_ffn[l], db, g.rms_ffn[l]);
    // Attention: x_mid = x_in + o Wo^T.
    const Matrix d_o = mul_nn(dx_mid, m.wo[l]);
    g.wo[l] += mul_tn(dx_mid, c.o);
    Matrix dq_rot = Matrix::Zero(T, m.dim), dk_rot = Matrix::Zero(T, c.k.cols()), dv = Matrix::Zero(T, c.v.cols());
    for (int h = 0; h < m.heads; ++h) {
      const int kv = h / group;
      const Matrix& p = c.p[static_cast<std::size_t>(h)];
      const Matrix doh = d_o.middleCols(h * hs, hs);
      const Matrix dp = mul_nt(doh, c.v.middleCols(kv * hs, hs));
      dv.middleCols(kv * hs, hs) += mul_tn(p, doh);
      Matrix ds = p.cwiseProduct(dp);  // softmax: ds = p (dp - rowsum(p dp))
      for (Eigen::Index t = 0; t < T; ++t) ds.row(t) -= p.row(t) * sum_fp64(ds.row(t).transpose());
      ds *= inv_sqrt_hs;
      dq_rot.middleCols(h * hs, hs) += mul_nn(ds, c.k.middleCols(kv * hs, hs));
      dk_rot.middleCols(kv * hs, hs) += mul_tn(ds, c.q.middleCols(h * hs, hs));
    }
    const Matrix dq = rope(dq_rot, hs, -1.0), dk = rope(dk_rot, hs, -1.0);  // rotations are orthogonal
    g.wq[l] += mul_tn(dq, c.a);
    g.wk[l] += mul_tn(dk, c.a);
    g.wv[l] += mul_tn(dv, c.a);
    const Matrix da = mul_nn(dq, m.wq[l]) + mul_nn(dk, m.wk[l]) + mul_nn(dv, m.wv[l]);
    dx = dx_mid + rmsnorm_backward(c.x_in, m.rms_att[l], da, g.rms_att[l]);
    out.linears.push_back({prefix + "wq", c.a, m.wq[l], dq});
    out.linears.push_back({prefix + "wk", c.a, m.wk[l], dk});
    out.linears.push_back({prefix + "wv", c.a, m.wv[l], dv});
    out.linears.push_back({prefix + "wo", c.o, m.wo[l], dx_mid});
    out.linears.push_back({prefix + "w1", c.b, m.w1[l], dh1});
    out.linears.push_back({prefix + "w3", c.b, m.w3[l], dh3});
  }
  for (Eigen::Index t = 0; t < T; ++t) g.embedding.row(tokens[static_cast<std::size_t>(t)]) += dx.row(t);
  return out;
}

}  // namespace fp8lab::ref
