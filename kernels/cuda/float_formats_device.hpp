#pragma once
// Device-side use of the shared format codecs (kernels/formats), so tests can check that
// the very same constexpr code gives the same codes on the GPU as on the host, and agrees
// with the hardware's own conversion (cvt.rn.satfinite.{e4m3,e5m2}x2.f32 on sm_89+).
#include <cstdint>
#include <vector>

#include "kernels/formats/float_formats.hpp"

namespace fp8lab::cuda {

// The CUDA devices this process can use: 0 when the machine has none, that is when no NVIDIA
// driver is installed (libcuda.so.1 cannot be loaded) or the driver reports no device
// (cudaErrorNoDevice). Any other failure of cudaGetDeviceCount (a driver older than this
// runtime, a stub libcuda, a driver that cannot initialize) is a broken setup, not "no GPU":
// it throws std::runtime_error naming CUDA's error, so nothing skips silently on a GPU machine.
int device_count();

// decode<F>(code) for every code 0..255, computed on the device.
std::vector<float> decode_all_codes_on_device(Fp8Format format);

// encode<F>(x, saturation) of each x, computed on the device.
std::vector<std::uint8_t> encode_on_device(const std::vector<float>& x, Fp8Format format, Saturation saturation);

// Over all 2^32 FP32 bit patterns: how many codes from encode<F>(x, satfinite) differ from
// the hardware conversion, and the first differing pattern (or 2^32 when none).
struct HardwareComparison {
  std::uint64_t mismatches = 0;
  std::uint64_t first_mismatch = 1ull << 32;
};
HardwareComparison compare_with_hardware_conversion(Fp8Format format);

// Over all 2^32 patterns, on the device: encode_e4m3_satfinite against encode<E4M3> (satfinite)
// and encode_e2m1_by_quantum_add against encode<E2M1>, the two short encoders the quantizer
// kernels and the scale rules run there.
struct FastEncoderComparison {
  HardwareComparison e4m3_satfinite, e2m1_quantum_add;
};
FastEncoderComparison compare_fast_encoders();

}  // namespace fp8lab::cuda
