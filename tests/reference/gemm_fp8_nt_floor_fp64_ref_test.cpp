// Exact tier for the FP64 floor micro-tile (kernels/cpu/gemm_fp8_nt_floor_fp64.cpp): the
// truncating fused models past the FP32 micro-tiles' ranges (Blackwell's F = 25 among them) give,
// bit for bit, what the independent integer reference (reference/fp8_gemm_ref) and the scalar
// definition (tile_generic, GemmOptions::force_generic) give, on
//   F in {22, 23, 24, 25, 30} and the tile's bound 36 x D in {16, 32, 64} (and 127, the count's
//   bound), both zero conventions, every format pairing, N_C in {64, 128, never};
//   random codes (every finite code), outliers (rare largest codes that raise E and truncate the
//   rest), subnormals (E5M2's reach e_a + e_b = -28, the bound the exponent floor rests on) and
//   cancelling pairs (a b + a (-b): trunc(x) + trunc(-x) = 0 but floor(x) + floor(-x) = -1, so
//   every pair leans on the count);
//   ragged shapes (M not a multiple of 4, N of 8 or 32, K of 32 or 128), 1 and 2 threads, every
//   SIMD level this CPU has.
// The FP32 floor models (Hopper's among them) run through it too (force_fp64_floor_tiles), and
// codes that are not finite still go to the scalar tiles.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "harness/metrics/error_metrics.hpp"
#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/gemm_fp8_nt.hpp"
#include "kernels/cpu/gemm_microtile.hpp"
#include "tests/support/gemm_operands.hpp"

using namespace fp8lab;

namespace {

enum class Data { random, outliers, subnormals, cancelling };

const char* data_name(Data d) {
  switch (d) {
    case Data::random: return "random";
    case Data::outliers: return "outliers";
    case Data::subnormals: return "subnormals";
    case Data::cancelling: return "cancelling";
  }
  return "?";
}

// A finite code of `format` with the given exponent field, random sign and mantissa.
std::uint8_t code_with_field(Fp8Format format, int field, std::mt19937_64& rng) {
  const bool e4m3 = format == Fp8Format::e4m3;
  const int mantissa_bits = e4m3 ? 3 : 2;
  // E4M3's field 15 with mantissa 7 is NaN; no other field used here reaches a non-finite code.
  const auto mantissa = static_cast<std::uint32_t>(rng() % (e4m3 && field == 15 ? 7 : 1u << mantissa_bits));
  return static_cast<std::uint8_t>((rng() & 1) << 7 | static_cast<std::uint32_t>(field) << mantissa_bits | mantissa);
}

// An operand of `data`'s kind. `negate_odd`: the cancelling kind's B side (odd k negate the code
// before them); A repeats it, so a_k b_k + a_(k+1) b_(k+1) = 0 for even k (every 8th pair left
// random, so not every sum is zero).
QuantizedTensor operand(std::int64_t rows, std::int64_t k, Fp8Format format, const std::string& granularity, Data data,
                        bool negate_odd, std::mt19937_64& rng) {
  QuantizedTensor q = test::random_code_operand(rows, k, format, granularity, rng, false);
  const bool e4m3 = format == Fp8Format::e4m3;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < k; ++c) {
      std::uint8_t& code = q.codes[static_cast<std::size_t>(r * k + c)];
      if (data == Data::outliers)  // 1 in 16 the largest binade, else the lowest normal ones
        code = rng() % 16 == 0 ? code_with_field(format, e4m3 ? 15 : 30, rng)
                               : code_with_field(format, 1 + static_cast<int>(rng() % (e4m3 ? 4 : 8)), rng);
      if (data == Data::subnormals)  // subnormals and zeros, 1 in 8 a small normal
        code = code_with_field(format, rng() % 8 == 0 ? 1 + static_cast<int>(rng() % 3) : 0, rng);
      if (data == Data::cancelling && c % 2 == 1 && c % 16 != 15) {
        const std::uint8_t before = q.codes[static_cast<std::size_t>(r * k + c - 1)];
        code = negate_odd ? static_cast<std::uint8_t>(before ^ 0x80u) : before;
      }
    }
  return q;
}

struct Paths {
  std::size_t reference = 0, generic = 0, vector = 0;  // mismatching outputs against each
};

std::size_t mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  const BitwiseComparison c = compare_bitwise(got, want);
  return c.mismatches + c.nan_mismatches;
}

// The GEMM by the reference, by the scalar definition and by every vector path this CPU has (the
// default selection, which runs the FP64 floor micro-tile for these models, and the forced one),
// each compared bit for bit with the other two.
Paths compare_paths(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config) {
  const test::RefOperand ra(a), rb(b);
  const Eigen::MatrixXf r = ref::fp8_gemm_model_ref(ra.view, rb.view, test::reference_model(config.accumulation),
                                                    config.promotion.never ? 0 : config.promotion.elements,
                                                    config.output == OutputType::bf16);
  std::vector<float> reference(static_cast<std::size_t>(r.size()));
  for (Eigen::Index i = 0; i < r.rows(); ++i)
    for (Eigen::Index j = 0; j < r.cols(); ++j) reference[static_cast<std::size_t>(i * r.cols() + j)] = r(i, j);
  cpu::GemmOptions generic;
  generic.force_generic = true;
  const std::vector<float> scalar = cpu::gemm_nt(a, b, config, generic);
  Paths m{mismatches(scalar, reference), 0, 0};
  for (int isa = static_cast<int>(cpu::CpuIsa::avx2); isa <= static_cast<int>(cpu::detected_cpu_isa()); ++isa) {
    cpu::set_cpu_isa(static_cast<cpu::CpuIsa>(isa));
    for (int threads : {1, 2})
      for (bool forced : {false, true}) {
        cpu::GemmOptions options;
        options.threads = threads;
        options.force_fp64_floor_tiles = forced;
        const std::vector<float> got = cpu::gemm_nt(a, b, config, options);
        m.generic += mismatches(got, scalar);
        m.vector += mismatches(got, reference);
      }
  }
  cpu::set_cpu_isa(cpu::detected_cpu_isa());
  return m;
}

// A truncating fused model; F past the parser's 30 is set directly (the tile's own bound is 36).
AccumulationModel model(int fraction_bits, int depth, bool zero_min) {
  AccumulationModel m = AccumulationModel::parse(std::string("bits:1,depth:") + std::to_string(depth) + ",round:rz" +
                                                 (zero_min ? ",zero:min" : ""));
  m.fraction_bits = fraction_bits;
  return m;
}

void check_model(const AccumulationModel& acc, Data data, std::mt19937_64& rng) {
  struct Shape {
    std::int64_t m, n, k;
  };
  // 41 columns: a full group of 32 and a last group of 2 panels, one of them ragged; 72: groups of
  // 4, 4 and 1 panels; K = 300 and 130 end inside an instruction and inside an interval.
  const Shape shapes[] = {{5, 41, 300}, {7, 72, 130}};
  const Shape& s = shapes[static_cast<int>(data) % 2];
  for (const test::FormatPair& formats : test::kFormatPairs)
    for (const char* promotion : {"64", "128", "never"}) {
      const bool never = std::string(promotion) == "never";
      if (!never && std::stoi(promotion) % acc.depth != 0) continue;  // N_C holds whole instructions
      DYNAMIC_SECTION(format_name(formats.a) << " x " << format_name(formats.b) << " " << acc.to_string() << " "
                                             << data_name(data) << " " << s.m << "x" << s.n << "x" << s.k
                                             << " N_C=" << promotion) {
        const QuantizedTensor a = operand(s.m, s.k, formats.a, never ? "row" : "tile:1x128", data, false, rng);
        const QuantizedTensor b = operand(s.n, s.k, formats.b, never ? "row" : "block:128x128", data, true, rng);
        const Paths m = compare_paths(a, b, {acc, PromotionInterval::parse(promotion), OutputType::fp32});
        INFO("mismatching outputs: scalar vs reference " << m.reference << ", vector vs scalar " << m.generic
                                                         << ", vector vs reference " << m.vector);
        CHECK(m.reference == 0);
        CHECK(m.generic == 0);
        CHECK(m.vector == 0);
      }
    }
}

constexpr Data kData[] = {Data::random, Data::outliers, Data::subnormals, Data::cancelling};

}  // namespace

TEST_CASE("gemm fp64 floor tile: the models it holds, F <= 36 and D <= 127") {
  using cpu::detail::fp64_floor_tile_holds;
  CHECK(fp64_floor_tile_holds(AccumulationModel::parse("bits:25,depth:32,round:rz")));  // B200
  CHECK(fp64_floor_tile_holds(AccumulationModel::hopper()));
  CHECK(fp64_floor_tile_holds(model(36, 127, false)));
  CHECK_FALSE(fp64_floor_tile_holds(model(37, 32, false)));
  CHECK_FALSE(fp64_floor_tile_holds(AccumulationModel::parse("bits:25,depth:128,round:rz")));
  CHECK_FALSE(fp64_floor_tile_holds(AccumulationModel::parse("bits:25,depth:32,round:rne")));
  CHECK_FALSE(fp64_floor_tile_holds(AccumulationModel::fp32()));
}

TEST_CASE("gemm fp64 floor tile equals reference and scalar tile: F 22 to 36, D 16 to 64") {
  std::mt19937_64 rng(2025);
  for (int fraction_bits : {22, 23, 24, 25, 30, 36})
    for (int depth : {16, 32, 64})
      for (Data data : kData) check_model(model(fraction_bits, depth, false), data, rng);
}

TEST_CASE("gemm fp64 floor tile equals reference and scalar tile: zero:min, D = 127") {
  std::mt19937_64 rng(31);
  for (Data data : kData) {
    check_model(model(25, 32, true), data, rng);
    check_model(model(30, 16, true), data, rng);
    check_model(model(36, 127, false), data, rng);
  }
}

TEST_CASE("gemm fp64 floor tile equals reference and scalar tile: FP32 tiles' models") {
  std::mt19937_64 rng(77);
  for (const char* name : {"hopper", "hopper,zero:min", "bits:1,depth:16,round:rz", "bits:16,depth:32,round:rz",
                           "bits:21,depth:64,round:rz"})
    for (Data data : {Data::random, Data::cancelling}) check_model(AccumulationModel::parse(name), data, rng);
}

TEST_CASE("gemm fp64 floor tile: codes not finite go to the scalar tiles") {
  // E5M2 inf (0x7C) and NaN (0x7E) in one row of A each: those rows' outputs are inf / NaN (the
  // FP64 sum decides), the others finite, and every path agrees bit for bit with the scalar one.
  std::mt19937_64 rng(3);
  const AccumulationModel b200 = AccumulationModel::parse("bits:25,depth:32,round:rz");
  QuantizedTensor a = test::random_code_operand(6, 100, Fp8Format::e5m2, "tile:1x128", rng, false);
  const QuantizedTensor b = test::random_code_operand(9, 100, Fp8Format::e5m2, "block:128x128", rng, false);
  a.codes[1 * 100 + 40] = 0x7C;
  a.codes[4 * 100 + 7] = 0x7E;
  const GemmConfig config{b200, PromotionInterval::parse("128"), OutputType::fp32};
  cpu::GemmOptions generic;
  generic.force_generic = true;
  const std::vector<float> scalar = cpu::gemm_nt(a, b, config, generic);
  CHECK(std::isnan(scalar[4 * 9]));
  for (bool forced : {false, true}) {
    cpu::GemmOptions options;
    options.force_fp64_floor_tiles = forced;
    CHECK(mismatches(cpu::gemm_nt(a, b, config, options), scalar) == 0);
  }
}
