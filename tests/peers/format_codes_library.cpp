// fp8lab's codec for the peers test formats_test.py, loaded in-process with ctypes: the test
// sweeps all 2^32 FP32 patterns through every format, and handing codes over a pipe (12 bytes
// per input, 51 GB in all) cost more than computing them, so Python passes its own buffers.
//   fp8lab_peers_encode(format, mode, start, count, out)
//       for x = the FP32 patterns start, start + 1, ..., start + count - 1 writes fp8lab's code
//       of x to out[i], one uint8 (e4m3, e5m2, e2m1, e3m2, e2m3, ue8m0) or uint16 (fp16, bf16)
//       per code. mode: "nosat" or "satfinite" (encode<FORMAT>(x, mode)) for the formats with
//       inf or NaN; "satfinite" (encode<FORMAT>(x), their only mode) for e2m1, e3m2, e2m3;
//       "ceil" (ue8m0_encode_ceil, its only encoder) for ue8m0. Returns 0, or 2 for an unknown
//       format or mode, or a range past 2^32.
//   fp8lab_peers_decode(format, out)
//       out[code] = decode<FORMAT>(code) (ue8m0_decode for ue8m0) as FP32 bits, for every code.
//       Returns 0 or 2.
#include <cstdint>
#include <string_view>

#include "kernels/formats/float_formats.hpp"
#include "kernels/formats/ue8m0.hpp"

namespace {

template <class Code, class Encoder>
void encode_range(std::uint32_t start, std::uint32_t count, void* out, Encoder encoder) {
  auto* codes = static_cast<Code*>(out);
  for (std::uint32_t i = 0; i < count; ++i) codes[i] = static_cast<Code>(encoder(fp8lab::float_from_bits(start + i)));
}

// 0, or 2 for a mode the format does not have.
template <class F, class Code>
int encode_format(std::string_view mode, std::uint32_t start, std::uint32_t count, void* out) {
  using fp8lab::Saturation;
  if constexpr (fp8lab::FormatLayout<F>::has_nosat) {
    if (mode == "nosat" || mode == "satfinite") {
      const Saturation s = mode == "nosat" ? Saturation::nosat : Saturation::satfinite;
      return encode_range<Code>(start, count, out, [s](float x) { return fp8lab::encode<F>(x, s); }), 0;
    }
  } else if (mode == "satfinite") {
    return encode_range<Code>(start, count, out, [](float x) { return fp8lab::encode<F>(x); }), 0;
  }
  return 2;
}

template <class F>
void decode_all(std::uint32_t* out) {
  for (std::uint32_t code = 0; code < (1u << fp8lab::FormatLayout<F>::total_bits); ++code)
    out[code] = fp8lab::float_bits(fp8lab::decode<F>(code));
}

}  // namespace

extern "C" int fp8lab_peers_encode(const char* format, const char* mode, std::uint32_t start, std::uint32_t count,
                                   void* out) {
  if (std::uint64_t{start} + count > (std::uint64_t{1} << 32)) return 2;
  const std::string_view f = format, m = mode;
  if (f == "e4m3") return encode_format<fp8lab::E4M3, std::uint8_t>(m, start, count, out);
  if (f == "e5m2") return encode_format<fp8lab::E5M2, std::uint8_t>(m, start, count, out);
  if (f == "fp16") return encode_format<fp8lab::FP16, std::uint16_t>(m, start, count, out);
  if (f == "bf16") return encode_format<fp8lab::BF16, std::uint16_t>(m, start, count, out);
  if (f == "e2m1") return encode_format<fp8lab::E2M1, std::uint8_t>(m, start, count, out);
  if (f == "e3m2") return encode_format<fp8lab::E3M2, std::uint8_t>(m, start, count, out);
  if (f == "e2m3") return encode_format<fp8lab::E2M3, std::uint8_t>(m, start, count, out);
  if (f == "ue8m0" && m == "ceil") return encode_range<std::uint8_t>(start, count, out, fp8lab::ue8m0_encode_ceil), 0;
  return 2;
}

extern "C" int fp8lab_peers_decode(const char* format, std::uint32_t* out) {
  const std::string_view f = format;
  if (f == "e4m3") return decode_all<fp8lab::E4M3>(out), 0;
  if (f == "e5m2") return decode_all<fp8lab::E5M2>(out), 0;
  if (f == "fp16") return decode_all<fp8lab::FP16>(out), 0;
  if (f == "bf16") return decode_all<fp8lab::BF16>(out), 0;
  if (f == "e2m1") return decode_all<fp8lab::E2M1>(out), 0;
  if (f == "e3m2") return decode_all<fp8lab::E3M2>(out), 0;
  if (f == "e2m3") return decode_all<fp8lab::E2M3>(out), 0;
  if (f == "ue8m0") {
    for (std::uint32_t code = 0; code < 256; ++code)
      out[code] = fp8lab::float_bits(fp8lab::ue8m0_decode(static_cast<std::uint8_t>(code)));
    return 0;
  }
  return 2;
}
