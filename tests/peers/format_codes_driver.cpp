// Streams fp8lab's codec over every FP32 bit pattern, for the peers test (formats_test.py).
//   format_codes_driver encode FORMAT       FORMAT e4m3|e5m2|fp16|bf16: for x = bits 0, 1, ...,
//       2^32 - 1, in chunks of 2^22 inputs, writes to stdout the chunk's encode<FORMAT>(x, nosat)
//       codes and then its encode<FORMAT>(x, satfinite) codes, one byte (FP8) or two
//       little-endian bytes (FP16/BF16) per code. Python reads it chunk by chunk while it
//       computes the peers' casts, so the 2^32 sweep never sits in memory or on disk.
//   format_codes_driver decode FORMAT       decode<FORMAT>(code) as FP32 bits, every code.
// Bad usage: one line on stderr, exit 2.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

#include "kernels/formats/float_formats.hpp"

namespace {

constexpr std::uint64_t kChunk = 1u << 22;  // inputs per write; the sweep is 1024 chunks

template <class F, class Code>
int stream_encode() {
  std::vector<Code> codes(2 * kChunk);  // [nosat | satfinite]
  for (std::uint64_t start = 0; start < (std::uint64_t{1} << 32); start += kChunk) {
    for (std::uint64_t i = 0; i < kChunk; ++i) {
      const float x = fp8lab::float_from_bits(static_cast<std::uint32_t>(start + i));
      codes[i] = static_cast<Code>(fp8lab::encode<F>(x, fp8lab::Saturation::nosat));
      codes[kChunk + i] = static_cast<Code>(fp8lab::encode<F>(x, fp8lab::Saturation::satfinite));
    }
    if (std::fwrite(codes.data(), sizeof(Code), codes.size(), stdout) != codes.size()) return 1;  // reader went away
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

template <class F>
int write_decode() {
  constexpr std::uint32_t count = 1u << fp8lab::FormatLayout<F>::total_bits;
  std::vector<std::uint32_t> bits(count);
  for (std::uint32_t code = 0; code < count; ++code) bits[code] = fp8lab::float_bits(fp8lab::decode<F>(code));
  return std::fwrite(bits.data(), sizeof(std::uint32_t), count, stdout) == count ? 0 : 1;
}

int usage() {
  std::fprintf(stderr, "usage: format_codes_driver encode|decode e4m3|e5m2|fp16|bf16\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return usage();
  const std::string_view mode = argv[1], format = argv[2];
  if (mode == "decode") {
    if (format == "e4m3") return write_decode<fp8lab::E4M3>();
    if (format == "e5m2") return write_decode<fp8lab::E5M2>();
    if (format == "fp16") return write_decode<fp8lab::FP16>();
    if (format == "bf16") return write_decode<fp8lab::BF16>();
  } else if (mode == "encode") {
    if (format == "e4m3") return stream_encode<fp8lab::E4M3, std::uint8_t>();
    if (format == "e5m2") return stream_encode<fp8lab::E5M2, std::uint8_t>();
    if (format == "fp16") return stream_encode<fp8lab::FP16, std::uint16_t>();
    if (format == "bf16") return stream_encode<fp8lab::BF16, std::uint16_t>();
  }
  return usage();
}
