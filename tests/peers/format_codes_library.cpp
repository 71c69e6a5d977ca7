// fp8lab's codec for the peers test formats_test.py, loaded in-process with ctypes: the test
// sweeps all 2^32 FP32 patterns through four formats, and handing codes over a pipe (12 bytes
// per input, 51 GB in all) cost more than computing them, so Python passes its own buffers.
//   fp8lab_peers_encode(format, start, count, nosat, satfinite)
//       for x = the FP32 patterns start, start + 1, ..., start + count - 1 writes
//       encode<FORMAT>(x, nosat) to nosat[i] and encode<FORMAT>(x, satfinite) to satfinite[i],
//       one uint8 (e4m3, e5m2) or uint16 (fp16, bf16) per code. Returns 0, or 2 for an unknown
//       format or a range past 2^32.
//   fp8lab_peers_decode(format, out)
//       out[code] = decode<FORMAT>(code) as FP32 bits, for every code. Returns 0 or 2.
#include <cstdint>
#include <string_view>

#include "kernels/formats/float_formats.hpp"

namespace {

template <class F, class Code>
void encode_range(std::uint32_t start, std::uint32_t count, void* nosat, void* satfinite) {
  auto* ns = static_cast<Code*>(nosat);
  auto* sf = static_cast<Code*>(satfinite);
  for (std::uint32_t i = 0; i < count; ++i) {
    const float x = fp8lab::float_from_bits(start + i);
    ns[i] = static_cast<Code>(fp8lab::encode<F>(x, fp8lab::Saturation::nosat));
    sf[i] = static_cast<Code>(fp8lab::encode<F>(x, fp8lab::Saturation::satfinite));
  }
}

template <class F>
void decode_all(std::uint32_t* out) {
  for (std::uint32_t code = 0; code < (1u << fp8lab::FormatLayout<F>::total_bits); ++code)
    out[code] = fp8lab::float_bits(fp8lab::decode<F>(code));
}

}  // namespace

extern "C" int fp8lab_peers_encode(const char* format, std::uint32_t start, std::uint32_t count, void* nosat,
                                   void* satfinite) {
  if (std::uint64_t{start} + count > (std::uint64_t{1} << 32)) return 2;
  const std::string_view f = format;
  if (f == "e4m3") return encode_range<fp8lab::E4M3, std::uint8_t>(start, count, nosat, satfinite), 0;
  if (f == "e5m2") return encode_range<fp8lab::E5M2, std::uint8_t>(start, count, nosat, satfinite), 0;
  if (f == "fp16") return encode_range<fp8lab::FP16, std::uint16_t>(start, count, nosat, satfinite), 0;
  if (f == "bf16") return encode_range<fp8lab::BF16, std::uint16_t>(start, count, nosat, satfinite), 0;
  return 2;
}

extern "C" int fp8lab_peers_decode(const char* format, std::uint32_t* out) {
  const std::string_view f = format;
  if (f == "e4m3") return decode_all<fp8lab::E4M3>(out), 0;
  if (f == "e5m2") return decode_all<fp8lab::E5M2>(out), 0;
  if (f == "fp16") return decode_all<fp8lab::FP16>(out), 0;
  if (f == "bf16") return decode_all<fp8lab::BF16>(out), 0;
  return 2;
}
