// The corpus sampler (harness/train/story_sampler.hpp): its KV-cached FP64 model agrees with the
// FP64 reference's full forward (greedy continuations equal), and sampling is reproducible.
#include <catch2/catch.hpp>
#include <set>

#include "harness/train/story_sampler.hpp"
#include "harness/train/token_file.hpp"
#include "tests/support/stories260k_fixture.hpp"

using namespace fp8lab;
using namespace fp8lab::train;

TEST_CASE("story sampler: temperature 0 gives the FP64 reference's greedy continuation of BOS") {
  // stories260k_tokens() is reference/llama_fp64_ref's llama_greedy from BOS: a full forward per
  // token, no cache. A cache bug (a wrong RoPE position, a stale key) changes the argmax soon.
  const std::vector<int>& greedy = test::stories260k_tokens();  // 64 tokens, BOS first
  SamplerSettings s;
  s.count = static_cast<std::int64_t>(greedy.size());
  s.temperature = 0;
  s.max_story = 512;
  const std::vector<std::int32_t> sampled = sample_corpus(test::stories260k_weights(), s);
  // The greedy story may end with BOS before 64 tokens; compare up to its first end.
  std::size_t n = 1;
  while (n < greedy.size() && greedy[n] != 1) ++n;
  REQUIRE(n > 20);
  CHECK(std::vector<int>(sampled.begin(), sampled.begin() + static_cast<std::ptrdiff_t>(n)) ==
        std::vector<int>(greedy.begin(), greedy.begin() + static_cast<std::ptrdiff_t>(n)));
}

TEST_CASE("story sampler: same seed same corpus, another seed another; stories start with BOS") {
  SamplerSettings s;
  s.count = 600;
  s.seed = 5;
  s.max_story = 128;
  const std::vector<std::int32_t> a = sample_corpus(test::stories260k_weights(), s), b = sample_corpus(test::stories260k_weights(), s);
  s.seed = 6;
  const std::vector<std::int32_t> c = sample_corpus(test::stories260k_weights(), s);
  CHECK(a.size() == 600);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(token_sha256(a) == token_sha256(b));
  CHECK(a.front() == 1);
  std::set<std::int32_t> distinct(a.begin(), a.end());
  CHECK(distinct.size() > 50);  // real text, not a loop of one token
  for (std::int32_t id : a) REQUIRE((id >= 0 && id < 512));
  // No story is longer than max_story: between two BOS at most 128 tokens.
  std::size_t since = 0;
  for (std::int32_t id : a) {
    since = id == 1 ? 0 : since + 1;
    REQUIRE(since < 128);
  }
}

TEST_CASE("story sampler: bad settings are refused naming the field") {
  SamplerSettings s;
  s.count = 1;
  CHECK_THROWS_WITH(s.validate(512), Catch::Contains("sample_tokens"));
  s.count = 10;
  s.temperature = -1;
  CHECK_THROWS_WITH(s.validate(512), Catch::Contains("temperature"));
  s.temperature = 1;
  s.max_story = 513;
  CHECK_THROWS_WITH(s.validate(512), Catch::Contains("max_story"));
}
