// ZeRO sharding of the model states (harness/train/zero_sharding.hpp): the paper's formulas
// (Rajbhandari et al. 2020, mixed-precision Adam, K = 12) and its 7.5B-on-64-ranks example to
// the byte, each named state-precision set worked out by hand on a small set of shapes,
// monotonicity in the stage and the rank count, and the errors bad input gets. Expected values
// are written from the paper and by hand, never computed by the code under test.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>

#include "harness/train/zero_sharding.hpp"
#include "kernels/train/model_config.hpp"

using namespace fp8lab::train;
using Catch::Matchers::StartsWith;

namespace {

// The paper's per-rank bytes, sec. 5 (Psi parameters, K = 12, N ranks dividing every term).
std::int64_t paper_formula(std::int64_t psi, int stage, std::int64_t n) {
  constexpr std::int64_t K = 12;
  switch (stage) {
    case 0: return (2 + 2 + K) * psi;
    case 1: return 2 * psi + 2 * psi + K * psi / n;
    case 2: return 2 * psi + (2 + K) * psi / n;
    default: return (2 + 2 + K) * psi / n;
  }
}

// GB of the paper's figure 1 and table: decimal, one digit after the point.
double rounded_gb(std::int64_t bytes) { return std::round(static_cast<double>(bytes) / 1e8) / 10; }

}  // namespace

TEST_CASE("zero: the paper's 7.5B model on 64 ranks, to the byte", "[zero]") {
  const std::int64_t psi = 7'500'000'000;
  const ModelStateBytes whole = model_state_bytes(psi, state_precision("paper"));
  CHECK(whole == ModelStateBytes{15'000'000'000, 15'000'000'000, 90'000'000'000});  // 2 Psi, 2 Psi, 12 Psi

  // 16 Psi; 4 Psi + 12 Psi / 64; 2 Psi + 14 Psi / 64; 16 Psi / 64.
  const std::int64_t expected[] = {120'000'000'000, 31'406'250'000, 16'640'625'000, 1'875'000'000};
  const double paper_gb[] = {120.0, 31.4, 16.6, 1.9};
  for (int stage = 0; stage <= 3; ++stage) {
    INFO("stage " << stage);
    const std::int64_t bytes = zero_bytes_per_rank(whole, stage, 64).total();
    CHECK(bytes == expected[stage]);
    CHECK(bytes == paper_formula(psi, stage, 64));
    CHECK(rounded_gb(bytes) == paper_gb[stage]);
  }
  // Stage 1 shards the optimizer states only; stage 2 the gradients too; stage 3 everything.
  CHECK(zero_bytes_per_rank(whole, 1, 64) == ModelStateBytes{15'000'000'000, 15'000'000'000, 1'406'250'000});
  CHECK(zero_bytes_per_rank(whole, 2, 64) == ModelStateBytes{15'000'000'000, 234'375'000, 1'406'250'000});
  CHECK(zero_bytes_per_rank(whole, 3, 64) == ModelStateBytes{234'375'000, 234'375'000, 1'406'250'000});
}

TEST_CASE("zero: the paper's formulas for other Psi and N that divide them", "[zero]") {
  const StatePrecision paper = state_precision("paper");
  for (const std::int64_t psi : {std::int64_t{1'024}, std::int64_t{8'030'261'248}, std::int64_t{1'000'000'000'000}})
    for (const std::int64_t n : {1, 2, 4, 8, 64, 512})
      for (int stage = 0; stage <= 3; ++stage) {
        INFO("Psi " << psi << ", N " << n << ", stage " << stage);
        CHECK(zero_bytes_per_rank(model_state_bytes(psi, paper), stage, n).total() == paper_formula(psi, stage, n));
      }
}

TEST_CASE("zero: a share that N does not divide is rounded up, per state", "[zero]") {
  const ModelStateBytes whole{10, 11, 12};
  CHECK(zero_bytes_per_rank(whole, 3, 3) == ModelStateBytes{4, 4, 4});
  CHECK(zero_bytes_per_rank(whole, 2, 4) == ModelStateBytes{10, 3, 3});
  CHECK(zero_bytes_per_rank(whole, 1, 5) == ModelStateBytes{10, 11, 3});
  CHECK(zero_bytes_per_rank(whole, 0, 7) == whole);
}

// Three tensors with partial 128-blocks and 128-groups: a linear weight 130 x 300
// (2 x 3 blocks of 128 x 128, 130 rows x 3 groups of 1 x 128), a norm gain 1 x 300 (3 groups),
// an embedding 3 x 300 (9 groups). Elements: 39000 + 300 + 900 = 40200 = P.
const std::vector<ParameterTensor> kSmall = {
    {"w", 130, 300, true}, {"gain", 1, 300, false}, {"embedding", 3, 300, false}};

TEST_CASE("zero: state set 'paper' on small shapes: 2 / 2 / 12 bytes a parameter", "[zero]") {
  REQUIRE(parameter_count(kSmall) == 40'200);
  CHECK(model_state_bytes(kSmall, state_precision("paper")) == ModelStateBytes{80'400, 80'400, 482'400});
}

TEST_CASE("zero: state set 'bf16_moments' on small shapes: 2 / 2 / 4 + 2 + 2 bytes a parameter", "[zero]") {
  CHECK(model_state_bytes(kSmall, state_precision("bf16_moments")) == ModelStateBytes{80'400, 80'400, 321'600});
}

TEST_CASE("zero: state set 'fp8_weights_fp8_moments' on small shapes, scales counted per tensor", "[zero]") {
  // Weights: the linear one in FP8, 39000 bytes, plus 2 x 3 block scales x 4 bytes = 24; the
  // gain and the embedding in BF16, 1200 x 2 = 2400. Total 41424.
  // Gradients: BF16, 2 P = 80400.
  // Optimizer: FP32 masters 4 P = 160800; each of two moments 1 byte a parameter, 40200, plus
  // (130 x 3 + 1 x 3 + 3 x 3) = 402 group scales x 4 bytes = 1608: 2 x 41808 = 83616. Total 244416.
  CHECK(model_state_bytes(kSmall, state_precision("fp8_weights_fp8_moments")) == ModelStateBytes{41'424, 80'400, 244'416});
}

TEST_CASE("zero: a bare parameter count counts scales per flat block and group, rounded up", "[zero]") {
  // P = 16385 = 128 x 128 + 1: 2 block scales, 129 group scales a moment.
  // Weights 16385 + 2 x 4 = 16393; gradients 2 P = 32770;
  // optimizer 4 P + 2 (P + 129 x 4) = 65540 + 2 x 16901 = 99342.
  CHECK(model_state_bytes(16'385, state_precision("fp8_weights_fp8_moments")) == ModelStateBytes{16'393, 32'770, 99'342});
  // Without scales a count and the shapes agree: 40200 parameters either way.
  for (const char* set : {"paper", "bf16_moments"})
    CHECK(model_state_bytes(40'200, state_precision(set)) == model_state_bytes(kSmall, state_precision(set)));
}

TEST_CASE("zero: Llama 3.1 parameter counts, classifier separate or tied", "[zero]") {
  // The published counts (Hugging Face model cards: 8.03B, 70.6B, 406B) exactly.
  CHECK(parameter_count(parameter_tensors(model_preset("llama3.1-8b"), true)) == 8'030'261'248);
  CHECK(parameter_count(parameter_tensors(model_preset("llama3.1-70b"), true)) == 70'553'706'496);
  CHECK(parameter_count(parameter_tensors(model_preset("llama3.1-405b"), true)) == 405'853'388'800);
  // Tied: the engine's own count (kernels/train/model_config.hpp), one vocab x dim fewer.
  for (const char* name : {"stories260K", "llama3.1-8b", "qwen2.5-72b"}) {
    const ModelConfig m = model_preset(name);
    CHECK(parameter_count(parameter_tensors(m, false)) == parameter_count(m));
    CHECK(parameter_count(parameter_tensors(m, true)) == parameter_count(m) + std::int64_t{m.vocab} * m.dim);
  }
}

TEST_CASE("zero: per-rank bytes never grow with the stage or the rank count", "[zero]") {
  const std::vector<ParameterTensor> tensors = parameter_tensors(model_preset("llama3.1-8b"), true);
  for (const std::string& set : state_precision_names()) {
    const ModelStateBytes whole = model_state_bytes(tensors, state_precision(set));
    for (const std::int64_t n : {1, 2, 3, 8, 64, 512, 1'000'000}) {
      INFO(set << ", N " << n);
      for (int stage = 1; stage <= 3; ++stage) {
        const ModelStateBytes a = zero_bytes_per_rank(whole, stage - 1, n), b = zero_bytes_per_rank(whole, stage, n);
        CHECK(b.weights <= a.weights);
        CHECK(b.gradients <= a.gradients);
        CHECK(b.optimizer <= a.optimizer);
        CHECK(b.total() <= a.total());
        if (n > 1) CHECK(b.total() < a.total());  // each stage shards one more state
        CHECK(zero_bytes_per_rank(whole, stage, 2 * n).total() <= zero_bytes_per_rank(whole, stage, n).total());
      }
      CHECK(zero_bytes_per_rank(whole, 0, n) == whole);
    }
    // One rank shards nothing.
    for (int stage = 0; stage <= 3; ++stage) CHECK(zero_bytes_per_rank(whole, stage, 1) == whole);
  }
}

TEST_CASE("zero: bad input is refused, the message starting with the field", "[zero]") {
  CHECK(parse_zero_stage("0") == 0);
  CHECK(parse_zero_stage("3") == 3);
  for (const char* bad : {"4", "-1", "1.5", "", "two", " 1", "+2"})
    CHECK_THROWS_WITH(parse_zero_stage(bad), StartsWith("zero_stage: must be 0, 1, 2 or 3"));
  CHECK(parse_ranks("1") == 1);
  CHECK(parse_ranks("512") == 512);
  for (const char* bad : {"0", "-3", "x", "1e3", "", "99999999999999999999"})
    CHECK_THROWS_WITH(parse_ranks(bad), StartsWith("ranks: must be an integer >= 1"));
  CHECK_THROWS_WITH(state_precision("fp4"), StartsWith("states: 'fp4' is not one of paper, bf16_moments"));
  CHECK_THROWS_WITH(zero_bytes_per_rank({1, 1, 1}, 4, 8), StartsWith("zero_stage:"));
  CHECK_THROWS_WITH(zero_bytes_per_rank({1, 1, 1}, -1, 8), StartsWith("zero_stage:"));
  CHECK_THROWS_WITH(zero_bytes_per_rank({1, 1, 1}, 1, 0), StartsWith("ranks:"));
  CHECK_THROWS_WITH(model_state_bytes(0, state_precision("paper")), StartsWith("parameters:"));
  CHECK_THROWS_WITH(model_state_bytes(kMaxParameters + 1, state_precision("paper")), StartsWith("parameters:"));
}
