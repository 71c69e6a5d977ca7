// tensor_amax_variants.hpp: the instantiations of tensor_amax_kernel the benchmark compares.
#include "kernels/cuda/tensor_amax_variants.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cuda/quantize_fast_paths.cuh"

namespace fp8lab::cuda {

void tensor_amax_variant_device(const float* d_x, std::int64_t n, unsigned* d_amax_bits, int unroll, AmaxLoads loads,
                                cudaStream_t stream) {
  const auto launch = [&](auto unroll_tag) {
    constexpr int kUnroll = decltype(unroll_tag)::value;
    switch (loads) {
      case AmaxLoads::plain: return launch_tensor_amax<kUnroll, AmaxLoads::plain>(d_x, n, d_amax_bits, stream);
      case AmaxLoads::read_only: return launch_tensor_amax<kUnroll, AmaxLoads::read_only>(d_x, n, d_amax_bits, stream);
      case AmaxLoads::streaming: return launch_tensor_amax<kUnroll, AmaxLoads::streaming>(d_x, n, d_amax_bits, stream);
    }
    throw std::invalid_argument("tensor_amax_variant_device: unknown AmaxLoads value");
  };
  if (unroll == 4) return launch(std::integral_constant<int, 4>{});
  if (unroll == 8) return launch(std::integral_constant<int, 8>{});
  throw std::invalid_argument("tensor_amax_variant_device: unroll " + std::to_string(unroll) + " (4 or 8)");
}

}  // namespace fp8lab::cuda
