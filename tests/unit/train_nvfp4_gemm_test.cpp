// The engine's GEMMs under experiments/recipes/nvfp4.toml (kernels/train/linear_gemm.hpp): Wgrad
// must be the block-scaled GEMM of the RHT-transformed dY^T (stochastically rounded, seeded by
// its bits) and X^T, Dgrad that of the stochastically rounded dY and W^T in 16x16 blocks, bit
// for bit against the same pipeline composed here from the public kernels; a token count that
// is no multiple of 16 is refused by the RHT.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>

#include "harness/recipes/recipe_toml.hpp"
#include "kernels/cpu/gemm_fp8_nt.hpp"
#include "kernels/cpu/quantize.hpp"
#include "kernels/hadamard_transform.hpp"
#include "kernels/memory_ledger.hpp"
#include "kernels/train/linear_gemm.hpp"
#include "tests/support/random_train_tensor.hpp"

using namespace fp8lab;
using namespace fp8lab::train;

namespace {

const PrecisionRecipe& nvfp4_recipe() {
  static const PrecisionRecipe r =
      load_recipe_toml(std::string(FP8LAB_TEST_SOURCE_DIR) + "/experiments/recipes/nvfp4.toml", model_preset("stories260K"));
  return r;
}

std::vector<float> transposed(const Tensor<float>& t) {  // rows x cols -> cols x rows
  std::vector<float> out(static_cast<std::size_t>(t.size()));
  for (std::int64_t r = 0; r < t.rows; ++r)
    for (std::int64_t c = 0; c < t.cols; ++c) out[static_cast<std::size_t>(c * t.rows + r)] = t(r, c);
  return out;
}

QuantizedTensor quantized(const std::vector<float>& x, std::int64_t rows, std::int64_t cols, const GemmPrecision& p,
                          const Granularity& g, bool stochastic_a) {
  QuantizeConfig config{p.a_format, g, p.scale_rule};
  if (stochastic_a) config.rounding = {RoundingMode::stochastic, operand_rounding_seed(x, 'a')};
  return cpu::quantize(x, rows, cols, config);
}

bool same_bits(const Tensor<float>& got, const std::vector<float>& want) {
  return static_cast<std::size_t>(got.size()) == want.size() &&
         std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("nvfp4 recipe: Wgrad = b200 GEMM of Q_sr(RHT(dY^T)) and Q(RHT(X^T)), 32 tokens, out 48, in 40") {
  HostAllocator host;
  MemoryLedger ledger(&host);
  std::mt19937_64 rng(2509);
  const std::int64_t tokens = 32, out = 48, in = 40;
  const Tensor<float> dy = test::random_train_tensor<float>(ledger, tokens, out, rng),
                      x = test::random_train_tensor<float>(ledger, tokens, in, rng);
  GemmPrecision p = nvfp4_recipe().resolve("L0.w1", GemmKind::wgrad);
  REQUIRE(p.rht);
  const std::vector<float> ta = random_hadamard_transform_16(transposed(dy), out, tokens),
                           tb = random_hadamard_transform_16(transposed(x), in, tokens);
  const std::vector<float> want =
      cpu::gemm_nt(quantized(ta, out, tokens, p, p.a_granularity, true), quantized(tb, in, tokens, p, p.b_granularity, false), p.gemm);
  Tensor<float> dw = make_tensor<float>(ledger, out, in, MemoryCategory::workspace);
  wgrad(GemmCall{ledger, p, nullptr, nullptr, 4, nullptr, nullptr, nullptr}, dy, x, dw, false, 0, tokens);
  CHECK(same_bits(dw, want));
  // Reproducible (the draws come from the operand's bits), and the transform is really applied.
  Tensor<float> again = make_tensor<float>(ledger, out, in, MemoryCategory::workspace);
  wgrad(GemmCall{ledger, p, nullptr, nullptr, 4, nullptr, nullptr, nullptr}, dy, x, again, false, 0, tokens);
  CHECK(same_bits(again, want));
  p.rht = false;
  wgrad(GemmCall{ledger, p, nullptr, nullptr, 4, nullptr, nullptr, nullptr}, dy, x, again, false, 0, tokens);
  CHECK_FALSE(same_bits(again, want));
}

TEST_CASE("nvfp4 recipe: Dgrad = b200 GEMM of Q_sr(dY) and W^T in 16x16 blocks, 24 tokens, out 48, in 40") {
  HostAllocator host;
  MemoryLedger ledger(&host);
  std::mt19937_64 rng(2510);
  const std::int64_t tokens = 24, out = 48, in = 40;
  const Tensor<float> dy = test::random_train_tensor<float>(ledger, tokens, out, rng),
                      w = test::random_train_tensor<float>(ledger, out, in, rng);
  const GemmPrecision& p = nvfp4_recipe().resolve("L0.w1", GemmKind::dgrad);
  REQUIRE(p.b_granularity == Granularity::block(16));
  const std::vector<float> dyv(dy.data(), dy.data() + dy.size());
  const std::vector<float> want = cpu::gemm_nt(quantized(dyv, tokens, out, p, p.a_granularity, true),
                                               quantized(transposed(w), in, out, p, p.b_granularity, false), p.gemm);
  Tensor<float> dx = make_tensor<float>(ledger, tokens, in, MemoryCategory::workspace);
  dgrad(GemmCall{ledger, p, nullptr, nullptr, 4, nullptr, nullptr, nullptr}, dy, w, dx);
  CHECK(same_bits(dx, want));
}

TEST_CASE("nvfp4 recipe: a Wgrad over 24 tokens (no multiple of 16) is refused by the RHT") {
  HostAllocator host;
  MemoryLedger ledger(&host);
  std::mt19937_64 rng(2511);
  const Tensor<float> dy = test::random_train_tensor<float>(ledger, 24, 16, rng), x = test::random_train_tensor<float>(ledger, 24, 16, rng);
  Tensor<float> dw = make_tensor<float>(ledger, 16, 16, MemoryCategory::workspace);
  const GemmPrecision& p = nvfp4_recipe().resolve("L0.w1", GemmKind::wgrad);
  CHECK_THROWS_WITH(wgrad(GemmCall{ledger, p, nullptr, nullptr, 4, nullptr, nullptr, nullptr}, dy, x, dw, false, 0, 24),
                    Catch::Contains("rht: the GEMM's K = 24 (tokens, for Wgrad) is not a multiple of 16"));
}

TEST_CASE("nvfp4 recipe: the step's tokens, and each slice's under slices:S, are checked before a run") {
  const PrecisionRecipe r = nvfp4_recipe();
  CHECK_NOTHROW(r.check_step_tokens(32));
  CHECK_NOTHROW(r.check_step_tokens(64, 4));  // 16 tokens a slice
  CHECK_THROWS_WITH(r.check_step_tokens(24), Catch::Contains("24 here (seq_len + 1): they must be a multiple of 16"));
  CHECK_THROWS_WITH(r.check_step_tokens(32, 4), Catch::Contains("tokens / slices must be a multiple of 16"));
  CHECK_THROWS_WITH(r.check_step_tokens(48, 5), Catch::Contains("tokens / slices must be a multiple of 16"));
}
