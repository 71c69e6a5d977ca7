#pragma once
// The open corner of the Hopper accumulation model (DESIGN.md section 2): which exponent an
// FP8 zero gets in the alignment step of one instruction. Two conventions:
//   min   a zero is a subnormal with the format's minimum exponent (-6 E4M3, -14 E5M2), so a
//         product 0 x large can raise the alignment exponent E and truncate the other terms;
//   none  a zero gets exponent -126 (MMA-Sim), so a zero product never raises E.
// The CPU model names the convention in AccumulationModel::zero_exponent (kernels/gemm_config.hpp).
//
// The crafted cases below are the smallest inputs whose FP32 result differs between the two
// conventions; run on the tensor cores they decide which one the silicon follows.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/formats/float_formats.hpp"
#include "kernels/gemm_config.hpp"
#include "kernels/quantization.hpp"

namespace fp8lab::test {

struct ZeroConvention {
  std::string name;  // "min" or "none"
  AccumulationModel model;
};

inline std::vector<ZeroConvention> zero_exponent_conventions() {
  AccumulationModel min = AccumulationModel::hopper(), none = AccumulationModel::hopper();
  min.zero_exponent = AccumulationModel::ZeroExponent::min;
  none.zero_exponent = AccumulationModel::ZeroExponent::none;
  return {{"min", min}, {"none", none}};
}

// One crafted GEMM: A is 1 x K, B is 8 x K (N = 8, the WGMMA kernel's smallest N), per-tensor
// scales of 1, promotion never, FP32 output. Only C[0][0] is nonzero; its bits under each
// convention are given (derivations next to each case).
struct CraftedZeroCase {
  std::string name;
  QuantizedTensor a, b;
  std::uint32_t min_bits = 0, none_bits = 0;
};

namespace detail {

template <class F>
std::uint8_t exact_code(float value) {
  const auto code = static_cast<std::uint8_t>(encode<F>(value));
  if (decode<F>(code) != value) throw std::logic_error("crafted zero-exponent case: value not exact in the format");
  return code;
}

template <class F>
CraftedZeroCase crafted_case(std::string name, std::int64_t k, const std::vector<std::pair<float, float>>& products,
                             std::uint32_t min_bits, std::uint32_t none_bits) {
  const Fp8Format format = std::is_same_v<F, E4M3> ? Fp8Format::e4m3 : Fp8Format::e5m2;
  const QuantizeConfig config{format, Granularity::tensor(), ScaleRule::fp32};
  CraftedZeroCase c{std::move(name), make_quantized_tensor(1, k, config), make_quantized_tensor(8, k, config), min_bits,
                    none_bits};
  // Zero codes everywhere else (0x00 is +0 in both formats); B's rows 1..7 stay zero.
  for (std::size_t i = 0; i < products.size(); ++i) {
    c.a.codes[i] = exact_code<F>(products[i].first);
    c.b.codes[i] = exact_code<F>(products[i].second);
  }
  c.a.scales[0] = 1.0f;
  c.b.scales[0] = 1.0f;
  return c;
}

}  // namespace detail

inline std::vector<CraftedZeroCase> crafted_zero_exponent_cases() {
  std::vector<CraftedZeroCase> cases;
  // E4M3, one instruction: A = [0, 0.140625, 448], B = [448, 0.140625, 0] (K = 32, zero padded).
  // Products: 0 x 448, 0.140625^2 = 1.265625 x 2^-6 (unnormalized e = -6), 448 x 0.
  //   min:  0 x 448 has e = -6 + 8 = 2, so E = 2 and the middle term keeps
  //         trunc(1.265625 x 2^(13 - 6 - 2)) = 40 units of 2^-11: 0.01953125 = 0x3ca00000;
  //   none: E = -6 and the term is exact: 0.019775390625 = 0x3ca20000.
  cases.push_back(detail::crafted_case<E4M3>("e4m3 [0, 0.140625, 448] . [448, 0.140625, 0]", 32,
                                             {{0.0f, 448.0f}, {0.140625f, 0.140625f}, {448.0f, 0.0f}}, 0x3ca00000u,
                                             0x3ca20000u));
  // E5M2, two instructions, K = 34 of data (zero-padded to 48: the WGMMA kernel takes K % 16 == 0;
  // the model pads to 64 either way). The first instruction sums 1.25 x 1.25 = 1.5625 and
  // 2^-7 x 2^-6 = 2^-13 exactly (E = 0): C = 1.5625 + 2^-13. The second holds 0 x 57344 at k = 32.
  //   min:  0 x 57344 has e = -14 + 15 = 1 > exponent(C) = 0, so E = 1 and C is truncated to
  //         12 fraction bits: 1.5625 = 0x3fc80000;
  //   none: E stays 0 and C passes unchanged: 1.5625 + 2^-13 = 0x3fc80400.
  std::vector<std::pair<float, float>> e5m2(34, {0.0f, 0.0f});
  e5m2[0] = {1.25f, 1.25f};
  e5m2[1] = {0x1p-7f, 0x1p-6f};
  e5m2[32] = {0.0f, 57344.0f};
  cases.push_back(detail::crafted_case<E5M2>("e5m2 K=34: C = 1.5625 + 2^-13, then 0 x 57344", 48, e5m2, 0x3fc80000u,
                                             0x3fc80400u));
  return cases;
}

inline GemmConfig crafted_zero_case_config(const AccumulationModel& model) {
  GemmConfig config;
  config.accumulation = model;
  config.promotion = PromotionInterval::parse("never");
  config.output = OutputType::fp32;
  return config;
}

}  // namespace fp8lab::test
