#pragma once
// Internal to the CPU GEMM's packing (gemm_packing.cpp): the floor layouts' unpacking of FP8
// codes with AVX2, 32 codes per step. The scalar unpacking reads three 256-entry tables per code
// and makes three stores; it was 13% of the dim256 FP8 training step (perf), almost all of it
// in those stores. Here the value, the exponent byte and the signed-lsb byte are computed from
// the code's fields with byte arithmetic, and each output is one vector store per 32 codes.
// tests/unit/gemm_packing_test.cpp compares both unpackings over every code, both formats and
// both zero conventions, byte for byte.
#include <cstdint>

namespace fp8lab::cpu::detail {

// What the vector unpacking needs of an FP8 format and the zero convention (gemm_packing.cpp
// derives it from the code table and checks its assumptions there).
struct FloorCodeFields {
  int mantissa_bits = 0, exponent_bits = 0, bias = 0;
  std::int8_t zero_exponent = 0;              // the exponent byte of a zero code
  std::uint8_t zero_lsb_byte = 0;             // the signed-lsb byte of a zero code (A's or B's)
  std::uint8_t first_nonfinite_magnitude = 0;  // magnitude codes (code & 0x7f) at or above it are inf or NaN
};

// Codes k in [k_begin, k_end) (a multiple of 8 long) of kLines lines (4: A's tile rows, written
// `stride` = 4 apart; 8: a B panel's lanes, written `stride` = 32 apart) into value, exponent and
// lsb at [k * stride + line], as gemm_packing.cpp's scalar unpacking writes them for finite codes.
// A null line reads as zero codes. Returns whether every code was finite (the bytes of a
// non-finite code are unspecified: a GEMM with one runs the scalar tiles, packed afresh).
// Needs AVX2 (active_cpu_isa()).
template <int kLines>
bool unpack_floor_codes_avx2(const FloorCodeFields& f, const std::uint8_t* const (&lines)[kLines], std::int64_t k_begin,
                             std::int64_t k_end, std::int64_t stride, float* value, std::int8_t* exponent, std::uint8_t* lsb);

}  // namespace fp8lab::cpu::detail
