#include "kernels/cpu/quantize_nvfp4_4over6.hpp"

#include "kernels/nvfp4_4over6.hpp"

namespace fp8lab::cpu {
namespace {

struct CandidateCodes {
  std::uint8_t codes[four_over_six::kBlock][four_over_six::kBlock];
  float error;
};

// One candidate over the block: its codes, and its error summed in TE's order (each row from
// left to right, then a 2-D block's rows by the warp reduction; a 1-D block is its one row).
CandidateCodes encode_candidate(const float* x, std::int64_t ld, std::int64_t r0, std::int64_t r1, std::int64_t c0,
                                std::int64_t c1, TileScale s, float tensor_amax) {
  CandidateCodes out{};
  float row_errors[four_over_six::kBlock] = {};
  for (std::int64_t r = r0; r < r1; ++r) {
    float e = 0.0f;
    for (std::int64_t c = c0; c < c1; ++c) {
      const float v = x[r * ld + c];
      const std::uint32_t code = encode<E2M1>(v * s.encode);
      out.codes[r - r0][c - c0] = static_cast<std::uint8_t>(code);
      e += four_over_six::error_term(v, code, s.decode, tensor_amax);
    }
    row_errors[r - r0] = e;
  }
  out.error = four_over_six::sum_rows(row_errors);  // absent rows add +0: a 1x16 block's sum is its row's
  return out;
}

}  // namespace

float quantize_nvfp4_4over6_block(const float* x, std::uint8_t* codes, std::int64_t ld, std::int64_t r0,
                                  std::int64_t r1, std::int64_t c0, std::int64_t c1, float block_amax,
                                  float tensor_amax, TensorScale tensor_scale) {
  const scale_detail::FourOverSixCandidates s =
      scale_detail::nvfp4_4over6_candidates(block_amax, element_traits_of<E2M1>(), tensor_scale);
  const CandidateCodes map4 = encode_candidate(x, ld, r0, r1, c0, c1, s.map4, tensor_amax);
  const CandidateCodes map6 = encode_candidate(x, ld, r0, r1, c0, c1, s.map6, tensor_amax);
  const bool pick_map4 = map4.error < map6.error;  // a tie (or a NaN) keeps map6, as TE
  const CandidateCodes& kept = pick_map4 ? map4 : map6;
  for (std::int64_t r = r0; r < r1; ++r)
    for (std::int64_t c = c0; c < c1; ++c) codes[r * ld + c] = kept.codes[r - r0][c - c0];
  return pick_map4 ? s.map4.decode : s.map6.decode;
}

}  // namespace fp8lab::cpu
