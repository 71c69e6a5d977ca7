// The data side of training runs: token files (harness/train/token_file.hpp), the order of
// sequences (harness/train/batch_order.hpp) and the learning-rate schedule
// (harness/train/lr_schedule.hpp). Expected values are worked out by hand from the definitions.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <set>
#include <unistd.h>

#include "data/tensor_io/npy.hpp"
#include "data/tensor_io/tensor.hpp"
#include "harness/train/batch_order.hpp"
#include "harness/train/lr_schedule.hpp"
#include "harness/train/token_file.hpp"

using namespace fp8lab;
using namespace fp8lab::train;

namespace {

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("fp8lab_batch_order_test_" + std::to_string(::getpid()) + "_" + name);
}

std::string refusal(const std::filesystem::path& file, int vocab) {
  try {
    read_token_file(file, vocab);
  } catch (const TensorFileError& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("batch order: sequential starts are ((s B + i) T) mod (N - T - 1)") {
  // N = 100, T = 8, B = 3: P = 91.
  const BatchSchedule s(100, 3, 8, BatchOrder::sequential, 0);
  CHECK(s.positions() == 91);
  CHECK(s.start(0, 0) == 0);
  CHECK(s.start(0, 1) == 8);
  CHECK(s.start(0, 2) == 16);
  CHECK(s.start(3, 2) == 88);  // w = 11
  CHECK(s.start(4, 0) == 5);   // w = 12: 96 mod 91
  CHECK(s.start(1000, 1) == (3001 * 8) % 91);
}

TEST_CASE("batch order: shuffled visits every window once per epoch, reproducibly") {
  // N = 100, T = 8: P = 91, M = ceil(91 / 8) = 12 windows starting at 0, 8, ..., 88.
  const BatchSchedule a(100, 4, 8, BatchOrder::shuffled, 7), b(100, 4, 8, BatchOrder::shuffled, 7),
      c(100, 4, 8, BatchOrder::shuffled, 8);
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<std::int64_t> seen;
    std::vector<std::int64_t> order_a, order_c;
    for (std::int64_t w = epoch * 12; w < (epoch + 1) * 12; ++w) {
      order_a.push_back(a.start(w / 4, w % 4));
      order_c.push_back(c.start(w / 4, w % 4));
      seen.insert(order_a.back());
      CHECK(b.start(w / 4, w % 4) == order_a.back());
    }
    CHECK(seen == std::set<std::int64_t>{0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88});
    CHECK(order_a != order_c);  // another seed, another order (12! orders: a collision is 2e-9)
  }
}

TEST_CASE("batch order: a stream shorter than one batch is refused naming the tokens") {
  CHECK_THROWS_WITH(BatchSchedule(25, 3, 8, BatchOrder::sequential, 0), Catch::Contains("tokens") && Catch::Contains("26"));
  CHECK_NOTHROW(BatchSchedule(26, 3, 8, BatchOrder::sequential, 0));
  CHECK_THROWS_WITH(BatchSchedule(100, 0, 8, BatchOrder::sequential, 0), Catch::Contains("batch"));
  CHECK_THROWS_WITH(BatchSchedule(100, 1, 0, BatchOrder::sequential, 0), Catch::Contains("seq_len"));
  CHECK_THROWS_WITH(parse_batch_order("random"), Catch::Contains("random"));
}

TEST_CASE("token files: .npy uint16 and int32 and raw .bin uint16 give the same ids") {
  const std::vector<std::uint16_t> ids = {1, 511, 0, 300, 2};
  const auto u16 = temp_file("u16.npy"), i32 = temp_file("i32.npy"), bin = temp_file("t.bin");
  Tensor t{DType::u16, {5}, std::vector<std::byte>(10)};
  std::memcpy(t.bytes.data(), ids.data(), 10);
  write_npy(u16, t);
  Tensor t32{DType::i32, {5}, std::vector<std::byte>(20)};
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int32_t v = ids[i];
    std::memcpy(t32.bytes.data() + 4 * i, &v, 4);
  }
  write_npy(i32, t32);
  std::ofstream(bin, std::ios::binary).write(reinterpret_cast<const char*>(ids.data()), 10);
  const std::vector<std::int32_t> want(ids.begin(), ids.end());
  for (const auto& f : {u16, i32, bin}) {
    const TokenStream s = read_token_file(f, 512);
    CHECK(s.tokens == want);
    CHECK(s.source.find("sha256 " + s.sha256) != std::string::npos);
    CHECK(s.sha256.size() == 64);
  }
  // Bad input: an id outside the vocabulary (named with its position), a truncated .bin, another dtype.
  CHECK_THAT(refusal(bin, 511), Catch::Contains("token 1 is 511") && Catch::Contains(bin.string()));
  std::ofstream(bin, std::ios::binary).write(reinterpret_cast<const char*>(ids.data()), 9);
  CHECK_THAT(refusal(bin, 512), Catch::Contains("odd number of bytes"));
  write_npy(u16, Tensor::from_f32({2}, {1.0f, 2.0f}));
  CHECK_THAT(refusal(u16, 512), Catch::Contains("uint16") && Catch::Contains("f32"));
  CHECK_THAT(refusal(temp_file("missing.npy"), 512), Catch::Contains("missing.npy"));
  CHECK_THAT(refusal(temp_file("x.txt"), 512), Catch::Contains(".txt"));
  for (const auto& f : {u16, i32, bin}) std::filesystem::remove(f);
}

TEST_CASE("lr schedule: constant, and linear warm-up then cosine to min_lr") {
  LrSchedule s;
  s.lr = 0.01;
  s.steps = 10;
  CHECK(s.at(0) == 0.01);
  CHECK(s.at(9) == 0.01);
  s.kind = LrSchedule::Kind::cosine;
  s.warmup = 2;
  s.min_lr = 0.001;
  CHECK(s.at(0) == Approx(0.005).epsilon(1e-15));
  CHECK(s.at(1) == Approx(0.01).epsilon(1e-15));
  CHECK(s.at(2) == Approx(0.01).epsilon(1e-15));                                                 // cos(0)
  CHECK(s.at(6) == Approx(0.001 + 0.009 * 0.5).epsilon(1e-15));                                  // half way: cos(pi/2)
  CHECK(s.at(9) == Approx(0.001 + 0.009 * (1 + std::cos(std::numbers::pi * 7 / 8)) / 2).epsilon(1e-15));
  s.warmup = 10;
  CHECK_THROWS_WITH(s.validate(), Catch::Contains("warmup"));
  s.warmup = 0;
  s.min_lr = 0.02;
  CHECK_THROWS_WITH(s.validate(), Catch::Contains("min_lr"));
  s.lr = std::nan("");
  CHECK_THROWS_WITH(s.validate(), Catch::Contains("lr"));
}
