// The FP64 Llama reference on the real stories260K checkpoint: greedy decoding reproduces
// the known text of data/README (so the loader and forward pass read the checkpoint right),
// the hand-written backward pass matches central finite differences, and every captured
// linear layer's dY^T X is exactly the weight gradient.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "harness/train/llama2c_weights.hpp"
#include "data/tensor_io/tensor.hpp"
#include "harness/study/real_layers.hpp"
#include "tests/support/temp_dir.hpp"

using namespace fp8lab;

namespace {

const ref::LlamaModel& model() {
  static const ref::LlamaModel m =
      to_reference_model(load_llama2c_checkpoint(find_data_file("stories260K/stories260K.bin"), kStories260kSha256));
  return m;
}

}  // namespace

TEST_CASE("stories260K: greedy decoding from BOS reproduces the known text") {
  const LlamaWeights w = load_llama2c_checkpoint(find_data_file("stories260K/stories260K.bin"), kStories260kSha256);
  CHECK(w.config.dim == 64);
  CHECK(w.config.n_layers == 5);
  CHECK(w.config.n_kv_heads == 4);
  const Tokenizer tok = load_llama2c_tokenizer(find_data_file("stories260K/tok512.bin"), 512, kTok512Sha256);
  // The text data/README gives for this checkpoint (llama2.c forward, greedy, from BOS = 1).
  const std::string expected =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw "
      "a big, r";
  std::vector<int> tokens = {1};
  std::string text;
  while (text.size() < expected.size() && tokens.size() < 200) {
    tokens = ref::llama_greedy(model(), tokens, 1);
    text = tok.decode(tokens);
  }
  INFO("decoded: " << text);
  CHECK(text.substr(0, expected.size()) == expected);
}

TEST_CASE("llama backward: gradients match central finite differences on the real checkpoint") {
  // Central differences with step h have truncation error O(h^2 f''') (~1e-10 here) and
  // rounding error ~ eps |L| / h = 2.2e-16 * 6 / 1e-6 ~ 1.3e-9; the bound 1e-7 + 1e-5 |g|
  // leaves room for both while still catching any wrong term of the chain rule (those are
  // O(|g|)).
  const std::vector<int> tokens = ref::llama_greedy(model(), {1}, 11);  // 12 real tokens
  const ref::LlamaBackward b = ref::llama_backward(model(), tokens);
  CHECK(b.loss > 0.0);
  struct Probe {
    const char* name;
    std::function<double&(ref::LlamaModel&)> at;
    double analytic;
  };
  const std::vector<Probe> probes = {
      {"wq[0](3,5)", [](ref::LlamaModel& m) -> double& { return m.wq[0](3, 5); }, b.grad.wq[0](3, 5)},
      {"wk[1](7,2)", [](ref::LlamaModel& m) -> double& { return m.wk[1](7, 2); }, b.grad.wk[1](7, 2)},
      {"wv[2](30,60)", [](ref::LlamaModel& m) -> double& { return m.wv[2](30, 60); }, b.grad.wv[2](30, 60)},
      {"wo[3](10,11)", [](ref::LlamaModel& m) -> double& { return m.wo[3](10, 11); }, b.grad.wo[3](10, 11)},
      {"w1[4](100,7)", [](ref::LlamaModel& m) -> double& { return m.w1[4](100, 7); }, b.grad.w1[4](100, 7)},
      {"w2[0](5,171)", [](ref::LlamaModel& m) -> double& { return m.w2[0](5, 171); }, b.grad.w2[0](5, 171)},
      {"w3[2](50,63)", [](ref::LlamaModel& m) -> double& { return m.w3[2](50, 63); }, b.grad.w3[2](50, 63)},
      {"rms_att[1](9)", [](ref::LlamaModel& m) -> double& { return m.rms_att[1](9); }, b.grad.rms_att[1](9)},
      {"rms_ffn[3](0)", [](ref::LlamaModel& m) -> double& { return m.rms_ffn[3](0); }, b.grad.rms_ffn[3](0)},
      {"rms_final(12)", [](ref::LlamaModel& m) -> double& { return m.rms_final(12); }, b.grad.rms_final(12)},
      {"embedding(tok[3],4)", [&](ref::LlamaModel& m) -> double& { return m.embedding(tokens[3], 4); },
       b.grad.embedding(tokens[3], 4)},
  };
  for (const Probe& p : probes) {
    ref::LlamaModel m = model();
    const double h = 1e-6, w0 = p.at(m);
    p.at(m) = w0 + h;
    const double up = ref::llama_loss(m, tokens);
    p.at(m) = w0 - h;
    const double down = ref::llama_loss(m, tokens);
    const double numeric = (up - down) / (2 * h);
    INFO(p.name << ": analytic " << p.analytic << ", finite difference " << numeric);
    CHECK(std::fabs(numeric - p.analytic) <= 1e-7 + 1e-5 * std::fabs(p.analytic));
    CHECK(p.analytic != 0.0);
  }
}

TEST_CASE("llama backward: each captured layer's dY^T X is its weight gradient") {
  const std::vector<int> tokens = ref::llama_greedy(model(), {1}, 15);
  const ref::LlamaBackward b = ref::llama_backward(model(), tokens);
  REQUIRE(b.linears.size() == 5 * 7 + 1);
  const auto grad_of = [&](const std::string& name) -> const Eigen::MatrixXd& {
    if (name == "classifier") return b.grad.embedding;  // shared: also holds the embedding's gradient
    const int l = name[1] - '0';
    const std::string w = name.substr(3);
    const auto& g = b.grad;
    return w == "wq" ? g.wq[l] : w == "wk" ? g.wk[l] : w == "wv" ? g.wv[l] : w == "wo" ? g.wo[l]
         : w == "w1" ? g.w1[l] : w == "w2" ? g.w2[l] : g.w3[l];
  };
  for (const ref::LinearCapture& c : b.linears) {
    INFO(c.name);
    CHECK(c.input.rows() == static_cast<Eigen::Index>(tokens.size()));
    CHECK(c.output_grad.cols() == c.weight.rows());
    CHECK(c.input.cols() == c.weight.cols());
    if (c.name == "classifier") continue;
    const Eigen::MatrixXd wgrad = c.output_grad.transpose() * c.input;
    CHECK((wgrad - grad_of(c.name)).norm() <= 1e-12 * (1.0 + grad_of(c.name).norm()));
  }
}

TEST_CASE("stories260K loader: checksum mismatch, truncation and a missing file are clear errors") {
  test::TempDir dir;
  const std::filesystem::path original = find_data_file("stories260K/stories260K.bin");
  std::string bytes = test::read_bytes(original);
  bytes[1000] ^= 0x01;
  test::write_bytes(dir / "changed.bin", bytes);
  CHECK_THROWS_WITH(load_llama2c_checkpoint(dir / "changed.bin", kStories260kSha256),
                    Catch::Contains("changed.bin: checksum mismatch: sha256 ") && Catch::Contains(kStories260kSha256));
  test::write_bytes(dir / "short.bin", bytes.substr(0, 5000));
  CHECK_THROWS_WITH(load_llama2c_checkpoint(dir / "short.bin", ""), Catch::Contains("short.bin: truncated"));
  CHECK_THROWS_WITH(find_data_file("stories260K/nope.bin"), Catch::Contains("not found (looked in"));
}
