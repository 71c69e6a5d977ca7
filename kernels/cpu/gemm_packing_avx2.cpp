// The AVX2 unpacking of FP8 codes into the floor layouts: the contract is in
// gemm_packing_avx2.hpp, the layouts in gemm_packing.hpp.
#include "kernels/cpu/gemm_packing_avx2.hpp"

#include <immintrin.h>

#include <stdexcept>

#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/gemm_packing.hpp"
#include "kernels/cpu/transpose.hpp"

namespace fp8lab::cpu::detail {
namespace {

// 32 codes, unpacked: per code its exponent byte, its signed-lsb byte (gemm_packing.hpp) and
// whether it is finite (0xff), in the codes' order; the values as four vectors of 8.
struct Unpacked32 {
  __m256i exponent, lsb, finite;
  __m256 value[4];
};

// For a finite code with field = the exponent field, mant = the mantissa field (M bits):
//   e   = max(field, 1) - bias                  the unnormalized exponent (subnormals: min_exponent)
//   sig = mant + (field > 0) 2^M                 the integer significand, value = sig 2^(e - M)
//   lsb = e - M + ctz(sig)                       the exponent of the value's lowest set bit
// and the signed-lsb byte lsb + 32 + 128 [negative] (mod 256, as the scalar table's uint8 cast).
// Zero codes (either sign) take the zero convention's exponent byte and the operand's zero byte.
// The byte steps: field <= 31 and e in [-14, 16] fit int8, where max_epi8 and cmpgt_epi8 read
// them; e - M + 127 in [111, 141] is read as uint8 (cvtepu8); the signed-lsb byte wraps mod 256
// on purpose, as the scalar table's uint8 cast does.
FP8LAB_TARGET_AVX2 inline Unpacked32 unpack32(const FloorCodeFields& f, __m256i c) {
  const int M = f.mantissa_bits;
  const __m256i magnitude = _mm256_and_si256(c, _mm256_set1_epi8(0x7f));
  // A 16-bit shift moves the next byte's low bits into this byte's top: the mask drops them.
  const __m256i field =
      _mm256_and_si256(_mm256_srli_epi16(c, M), _mm256_set1_epi8(static_cast<char>((1 << f.exponent_bits) - 1)));
  const __m256i mantissa = _mm256_and_si256(c, _mm256_set1_epi8(static_cast<char>((1 << M) - 1)));
  const __m256i normal = _mm256_cmpgt_epi8(field, _mm256_setzero_si256());
  const __m256i e = _mm256_sub_epi8(_mm256_max_epi8(field, _mm256_set1_epi8(1)), _mm256_set1_epi8(static_cast<char>(f.bias)));
  const __m256i sig = _mm256_or_si256(mantissa, _mm256_and_si256(normal, _mm256_set1_epi8(static_cast<char>(1 << M))));
  // ctz(sig) for sig in [1, 15] (sig = 0 only for zeros, whose lsb byte is replaced below).
  const __m256i ctz_table = _mm256_setr_epi8(0, 0, 1, 0, 2, 0, 1, 0, 3, 0, 1, 0, 2, 0, 1, 0,  //
                                             0, 0, 1, 0, 2, 0, 1, 0, 3, 0, 1, 0, 2, 0, 1, 0);
  const __m256i e_minus_m = _mm256_sub_epi8(e, _mm256_set1_epi8(static_cast<char>(M)));
  const __m256i sign = _mm256_and_si256(c, _mm256_set1_epi8(static_cast<char>(0x80)));
  const __m256i lsb_byte = _mm256_add_epi8(_mm256_add_epi8(e_minus_m, _mm256_shuffle_epi8(ctz_table, sig)),
                                           _mm256_add_epi8(sign, _mm256_set1_epi8(kLsbByteOffset)));
  const __m256i zero = _mm256_cmpeq_epi8(magnitude, _mm256_setzero_si256());

  Unpacked32 u;
  u.exponent = _mm256_blendv_epi8(e, _mm256_set1_epi8(f.zero_exponent), zero);
  u.lsb = _mm256_blendv_epi8(lsb_byte, _mm256_set1_epi8(static_cast<char>(f.zero_lsb_byte)), zero);
  const __m256i last_finite = _mm256_set1_epi8(static_cast<char>(f.first_nonfinite_magnitude - 1));
  u.finite = _mm256_cmpeq_epi8(_mm256_min_epu8(magnitude, last_finite), magnitude);

  // value = sig * 2^(e - M), with the code's sign: an exact integer conversion and an exact
  // product by a normal power of two (no denormal operand, so MXCSR's DAZ/FTZ cannot matter).
  const __m256i biased = _mm256_add_epi8(e_minus_m, _mm256_set1_epi8(127));
  const __m128i sig_half[2] = {_mm256_castsi256_si128(sig), _mm256_extracti128_si256(sig, 1)};
  const __m128i biased_half[2] = {_mm256_castsi256_si128(biased), _mm256_extracti128_si256(biased, 1)};
  const __m128i sign_half[2] = {_mm256_castsi256_si128(sign), _mm256_extracti128_si256(sign, 1)};
  for (int j = 0; j < 4; ++j) {
    const int h = j / 2;
    const __m128i s8 = j % 2 ? _mm_srli_si128(sig_half[h], 8) : sig_half[h];
    const __m128i b8 = j % 2 ? _mm_srli_si128(biased_half[h], 8) : biased_half[h];
    const __m128i g8 = j % 2 ? _mm_srli_si128(sign_half[h], 8) : sign_half[h];
    const __m256 power = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu8_epi32(b8), 23));
    const __m256 magnitude_value = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(s8)), power);
    u.value[j] = _mm256_or_ps(magnitude_value, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu8_epi32(g8), 24)));
  }
  return u;
}

FP8LAB_TARGET_AVX2 inline __m128i load8(const std::uint8_t* line, std::int64_t k) {
  return line ? _mm_loadl_epi64(reinterpret_cast<const __m128i*>(line + k)) : _mm_setzero_si128();
}

}  // namespace

template <>
FP8LAB_TARGET_AVX2 bool unpack_floor_codes_avx2<4>(const FloorCodeFields& f, const std::uint8_t* const (&lines)[4],
                                                   std::int64_t k_begin, std::int64_t k_end, std::int64_t stride, float* value,
                                                   std::int8_t* exponent, std::uint8_t* lsb) {
  // A's [tile][k][row]: 8 k of the 4 rows are 32 consecutive codes, so the stride must be 4.
  if (stride != 4) throw std::logic_error("unpack_floor_codes_avx2<4>: the stride must be 4 (A's tile layout)");
  __m256i finite = _mm256_set1_epi8(-1);
  for (std::int64_t k = k_begin; k < k_end; k += 8) {
    // Bytes [line][k] to [k][line]: pairs of lines, then pairs of pairs.
    const __m128i l01 = _mm_unpacklo_epi8(load8(lines[0], k), load8(lines[1], k));
    const __m128i l23 = _mm_unpacklo_epi8(load8(lines[2], k), load8(lines[3], k));
    const __m256i codes = _mm256_set_m128i(_mm_unpackhi_epi16(l01, l23), _mm_unpacklo_epi16(l01, l23));
    const Unpacked32 u = unpack32(f, codes);
    finite = _mm256_and_si256(finite, u.finite);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(exponent + k * 4), u.exponent);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lsb + k * 4), u.lsb);
    for (int j = 0; j < 4; ++j) _mm256_storeu_ps(value + k * 4 + 8 * j, u.value[j]);
  }
  return _mm256_movemask_epi8(finite) == -1;
}

template <>
FP8LAB_TARGET_AVX2 bool unpack_floor_codes_avx2<8>(const FloorCodeFields& f, const std::uint8_t* const (&lines)[8],
                                                   std::int64_t k_begin, std::int64_t k_end, std::int64_t stride, float* value,
                                                   std::int8_t* exponent, std::uint8_t* lsb) {
  __m256i finite = _mm256_set1_epi8(-1);
  for (std::int64_t k = k_begin; k < k_end; k += 8) {
    // An 8 x 8 byte transpose: [line][k] to [k][line], two k per 16 bytes, four k per vector.
    __m128i line_bytes[8], k_pairs[4];
    for (int i = 0; i < 8; ++i) line_bytes[i] = load8(lines[i], k);
    transpose_detail::transpose_8x8_bytes_in_registers(line_bytes, k_pairs);
    const __m256i codes[2] = {_mm256_set_m128i(k_pairs[1], k_pairs[0]),   // k 0-3
                              _mm256_set_m128i(k_pairs[3], k_pairs[2])};  // k 4-7
    for (int half = 0; half < 2; ++half) {
      const Unpacked32 u = unpack32(f, codes[half]);
      finite = _mm256_and_si256(finite, u.finite);
      alignas(32) std::uint8_t e_bytes[32], l_bytes[32];
      _mm256_store_si256(reinterpret_cast<__m256i*>(e_bytes), u.exponent);
      _mm256_store_si256(reinterpret_cast<__m256i*>(l_bytes), u.lsb);
      for (int j = 0; j < 4; ++j) {  // k + 4 half + j: 8 lanes of bytes and values
        const std::int64_t at = (k + 4 * half + j) * stride;
        _mm_storel_epi64(reinterpret_cast<__m128i*>(exponent + at), _mm_loadl_epi64(reinterpret_cast<const __m128i*>(e_bytes + 8 * j)));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(lsb + at), _mm_loadl_epi64(reinterpret_cast<const __m128i*>(l_bytes + 8 * j)));
        _mm256_storeu_ps(value + at, u.value[j]);
      }
    }
  }
  return _mm256_movemask_epi8(finite) == -1;
}

}  // namespace fp8lab::cpu::detail
