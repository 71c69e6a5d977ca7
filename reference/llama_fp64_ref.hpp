#pragma once
// FP64 reference of a Llama forward and backward pass (llama2.c architecture: RMSNorm with
// eps 1e-5, rotary embeddings with theta 10000 on consecutive pairs, causal grouped-query
// attention, SwiGLU feed-forward, classifier shared with the token embedding), with the
// next-token cross-entropy loss. The backward pass is written out by hand from the chain
// rule and captures, for every linear layer, its real input, weight and output gradient, so
// each layer's Fprop (Y = X W^T), Dgrad (dX = dY W) and Wgrad (dW = dY^T X) can be studied
// on real values. Rows of every activation matrix are positions (T x features).
#include <Eigen/Dense>
#include <string>
#include <vector>

namespace fp8lab::ref {

struct LlamaModel {
  int dim = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0, vocab = 0;
  Eigen::MatrixXd embedding;  // vocab x dim (also the classifier)
  std::vector<Eigen::VectorXd> rms_att, rms_ffn;
  Eigen::VectorXd rms_final;
  std::vector<Eigen::MatrixXd> wq, wk, wv, wo, w1, w2, w3;  // out x in
  int head_size() const { return dim / heads; }
};

struct LinearCapture {
  std::string name;             // "L0.wq", ..., "classifier"
  Eigen::MatrixXd input;        // T x in
  Eigen::MatrixXd weight;       // out x in
  Eigen::MatrixXd output_grad;  // T x out: dLoss / dY
};

// Logits (T x vocab) of every position.
Eigen::MatrixXd llama_logits(const LlamaModel& model, const std::vector<int>& tokens);

// Greedy decoding from `prompt` for `steps` new tokens (the whole sequence recomputed per step).
std::vector<int> llama_greedy(const LlamaModel& model, std::vector<int> prompt, int steps);

// Mean next-token cross-entropy over positions 0..T-2.
double llama_loss(const LlamaModel& model, const std::vector<int>& tokens);

struct LlamaBackward {
  double loss = 0;
  LlamaModel grad;  // dLoss / d(every weight), same shapes as the model
  std::vector<LinearCapture> linears;
};
LlamaBackward llama_backward(const LlamaModel& model, const std::vector<int>& tokens);

}  // namespace fp8lab::ref
