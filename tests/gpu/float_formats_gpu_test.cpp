// The shared codecs on the device: decode of all codes and encode of the boundary points
// bit-identical to the host, and encode<E4M3|E5M2>(satfinite) against the hardware's own
// cvt.rn.satfinite over all 2^32 FP32 patterns (a direct check of the codec on silicon).
#include <catch2/catch.hpp>
#include <cstring>

#include "kernels/cuda/float_formats_device.hpp"
#include "tests/support/format_points.hpp"

using namespace fp8lab;

TEST_CASE("gpu: decode of all 256 codes matches the host bit for bit") {
  for (Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2}) {
    const std::vector<float> device = cuda::decode_all_codes_on_device(format);
    for (std::uint32_t code = 0; code < 256; ++code) {
      const float host = format == Fp8Format::e4m3 ? decode<E4M3>(code) : decode<E5M2>(code);
      INFO(format_name(format) << " code " << code);
      CHECK(float_bits(device[code]) == float_bits(host));
    }
  }
}

TEST_CASE("gpu: encode of every boundary point matches the host in both saturation modes") {
  for (Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2}) {
    const std::vector<float> points =
        test::boundary_points(format == Fp8Format::e4m3 ? test::kE4M3Table : test::kE5M2Table);
    for (Saturation s : {Saturation::satfinite, Saturation::nosat}) {
      const std::vector<std::uint8_t> device = cuda::encode_on_device(points, format, s);
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < points.size(); ++i) {
        const std::uint32_t host = format == Fp8Format::e4m3 ? encode<E4M3>(points[i], s) : encode<E5M2>(points[i], s);
        if (device[i] != host) ++mismatches;
      }
      INFO(format_name(format) << (s == Saturation::satfinite ? " satfinite" : " nosat"));
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("gpu: encode satfinite agrees with the hardware cvt.rn.satfinite on all 2^32 patterns") {
  for (Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2}) {
    const cuda::HardwareComparison c = cuda::compare_with_hardware_conversion(format);
    INFO(format_name(format) << ": " << c.mismatches << " mismatches, first at FP32 pattern 0x" << std::hex
                             << c.first_mismatch);
    CHECK(c.mismatches == 0);
  }
}

TEST_CASE("gpu: the quantizer's short encoders agree with the codec on all 2^32 patterns, as device code runs them") {
  // encode_e4m3_satfinite's device branch (a constant-evaluation test picks it: the form that
  // once compiled to wrong codes) and encode_e2m1_by_quantum_add, both compiled for the GPU.
  const cuda::FastEncoderComparison c = cuda::compare_fast_encoders();
  INFO("e4m3 " << c.e4m3_satfinite.mismatches << " mismatches (first 0x" << std::hex << c.e4m3_satfinite.first_mismatch
               << std::dec << "), e2m1 " << c.e2m1_quantum_add.mismatches << " (first 0x" << std::hex
               << c.e2m1_quantum_add.first_mismatch << ")");
  CHECK(c.e4m3_satfinite.mismatches == 0);
  CHECK(c.e2m1_quantum_add.mismatches == 0);
}
