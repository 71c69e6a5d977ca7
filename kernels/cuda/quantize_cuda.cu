// Contract: kernels/cpu/quantize.hpp (amax over the tile, {decode, encode} = tile_scale (the
// host+device code of kernels/scale_rules.hpp), q = satfinite RNE of fl32(x * encode) or
// fl32(x / encode) as the rule says, x' = fl32(q * decode)); compiled with --fmad=false so
// x * encode is one IEEE multiply as on the CPU, and IEEE division (nvcc's default
// -prec-div=true). Rounding: nearest, or stochastic (config.rounding), on every path.
// Every element format (E4M3, E5M2, E2M1, E3M2, E2M3) and every rule. The two-level nvfp4
// rules (nvfp4, nvfp4:torchao, nvfp4:4over6) first reduce the tensor's amax into the
// workspace's last slot (tensor_amax_kernel); every tile then derives the tensor scale from it.
// nvfp4:4over6 chooses each block's scale from its elements' errors: one thread per block runs
// four_over_six::quantize_block, the function the CPU runs (1x16 tiles: four_over_six_tile_kernel,
// loading its tile once; 16x16 blocks: after the segment amaxes, four_over_six_kernel).
// Layout: x rows x cols row-major. One-pass paths (quantize_fast_paths.cuh) when cols % 4 == 0
// and x is 16-byte aligned: 1xT tiles for T in {16, 32, 64, 128, 256, 512} and BxB blocks for
// B in {16, 32, 64, 128}, x read once (nvfp4:4over6's 1x16 tile kernel: any shape). General
// path for everything else: one CUDA block per (row, tile column) segment, so a 1xT tile is one
// block and a BxB block is B of them (B atomics), per-row and per-tensor one block per row; x
// is read twice (amax, then encode).
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_array.hpp"
#include "kernels/cuda/quantize_fast_paths.cuh"
#include "kernels/cuda/quantize_cuda.hpp"
#include "kernels/formats/float_formats.hpp"
#include "kernels/nvfp4_4over6.hpp"

namespace fp8lab::cuda {
namespace {

constexpr int kThreads = 128;

struct Geometry {
  std::int64_t rows, cols, tile_rows, tile_cols, scale_cols;
};

// amax of each (row, tile column) segment into its tile's slot (abs_bits order).
__global__ void segment_amax_kernel(const float* x, Geometry g, unsigned* amax_bits) {
  const std::int64_t row = blockIdx.y, tile_col = blockIdx.x;
  const std::int64_t c0 = tile_col * g.tile_cols, c1 = min(g.cols, c0 + g.tile_cols);
  unsigned m = 0;
  for (std::int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x) m = max(m, abs_bits(x[row * g.cols + c]));
  for (int offset = 16; offset > 0; offset /= 2) m = max(m, __shfl_down_sync(0xFFFFFFFFu, m, offset));
  __shared__ unsigned warp_max[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) m = max(m, warp_max[w]);
    atomicMax(&amax_bits[(row / g.tile_rows) * g.scale_cols + tile_col], m);
  }
}

__global__ void scale_kernel(const unsigned* amax_bits, std::int64_t tiles, ScaleRule rule, ElementTraits format,
                             const unsigned* tensor_amax_bits, float* scales) {
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (t < tiles)
    scales[t] = tile_scale(float_from_bits(amax_bits[t]), rule, format, tensor_scale_of(tensor_amax_bits, rule, format)).decode;
}

// The encode factor is not always fl32(1 / decode) (te, div), so each segment computes its
// tile's TileScale again from the amax, with the same function as scale_kernel.
// Stochastic rounding draws from (seed, row * cols + c), as on the CPU (stochastic_rounding.hpp).
template <class F>
__global__ void encode_kernel(const float* x, Geometry g, const unsigned* amax_bits, ScaleRule rule, Rounding rounding,
                              const unsigned* tensor_amax_bits, std::uint8_t* codes) {
  const std::int64_t row = blockIdx.y, tile_col = blockIdx.x;
  const std::int64_t c0 = tile_col * g.tile_cols, c1 = min(g.cols, c0 + g.tile_cols);
  const float amax = float_from_bits(amax_bits[(row / g.tile_rows) * g.scale_cols + tile_col]);
  const ElementTraits traits = element_traits_of<F>();
  const float factor = tile_scale(amax, rule, traits, tensor_scale_of(tensor_amax_bits, rule, traits)).encode;
  const ApplyScale apply = scale_rule_math(rule).apply;
  for (std::int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
    const std::int64_t i = row * g.cols + c;
    codes[i] = encode_element<F>(x[i], factor, apply, rounding, i);
  }
}

// nvfp4:4over6 on 16x16 blocks: one thread per block (both candidates, the smaller error kept).
__global__ void four_over_six_kernel(const float* x, Geometry g, const unsigned* amax_bits, const unsigned* tensor_amax_bits,
                                     float* scales, std::uint8_t* codes) {
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t scale_rows = (g.rows + g.tile_rows - 1) / g.tile_rows;
  if (t >= scale_rows * g.scale_cols) return;
  const std::int64_t r0 = t / g.scale_cols * g.tile_rows, c0 = t % g.scale_cols * g.tile_cols;
  scales[t] = four_over_six::quantize_block(x, codes, g.cols, r0, min(g.rows, r0 + g.tile_rows), c0, min(g.cols, c0 + g.tile_cols),
                                            float_from_bits(amax_bits[t]), float_from_bits(*tensor_amax_bits),
                                            tensor_scale_of(tensor_amax_bits, ScaleRule::nvfp4_4over6, element_traits_of<E2M1>()));
}

template <class F>
__global__ void dequantize_kernel(const std::uint8_t* codes, Geometry g, const float* scales, float* x) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= g.rows * g.cols) return;
  const std::int64_t r = i / g.cols, c = i % g.cols;
  x[i] = decode<F>(codes[i]) * scales[(r / g.tile_rows) * g.scale_cols + c / g.tile_cols];
}

__global__ void transpose_kernel(const float* in, std::int64_t rows, std::int64_t cols, float* out) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < rows * cols) out[(i % cols) * rows + i / cols] = in[i];
}

unsigned blocks_for(std::int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

// The one-pass kernels' launches; false when the shape has none (then the general path runs).
template <class F>
bool launch_fast_path(const float* x, std::int64_t rows, std::int64_t cols, const QuantizeConfig& config,
                      const unsigned* tensor_amax_bits, float* scales, std::uint8_t* codes, cudaStream_t stream) {
  const Granularity& g = config.granularity;
  const ScaleRule rule = config.scale_rule;
  const Rounding rounding = config.rounding;
  if (g.kind == Granularity::Kind::tile && g.size >= 128) {
    const std::int64_t tiles_per_row = (cols + g.size - 1) / g.size, threads = rows * tiles_per_row * 32;
    const auto launch = [&](auto kernel) {
      kernel<<<blocks_for(threads), 256, 0, stream>>>(x, rows, cols, tiles_per_row, rule, rounding, tensor_amax_bits, scales, codes);
    };
    switch (g.size) {
      case 128: launch(tile_quantize_kernel<F, 1>); return true;
      case 256: launch(tile_quantize_kernel<F, 2>); return true;
      case 512: launch(tile_quantize_kernel<F, 4>); return true;
      default: return false;
    }
  }
  if (g.kind == Granularity::Kind::tile) {
    const std::int64_t warps_per_row = (cols + 127) / 128, tiles_per_row = (cols + g.size - 1) / g.size;
    const std::int64_t column_blocks = (warps_per_row + kNarrowWarps - 1) / kNarrowWarps;
    if (rows > std::numeric_limits<int>::max() || column_blocks > 65535) return false;
    const dim3 blocks(static_cast<unsigned>(rows), static_cast<unsigned>(column_blocks));
    const auto launch = [&](auto kernel) {
      kernel<<<blocks, 32 * kNarrowWarps, 0, stream>>>(x, rows, cols, warps_per_row, tiles_per_row, rule, rounding,
                                                      tensor_amax_bits, scales, codes);
    };
    switch (g.size) {
      case 16: launch(narrow_tile_quantize_kernel<F, 16>); return true;
      case 32: launch(narrow_tile_quantize_kernel<F, 32>); return true;
      case 64: launch(narrow_tile_quantize_kernel<F, 64>); return true;
      default: return false;
    }
  }
  if (g.kind == Granularity::Kind::block) {
    const std::int64_t scale_rows = (rows + g.size - 1) / g.size, scale_cols = (cols + g.size - 1) / g.size;
    if (scale_rows > 65535) return false;
    const dim3 blocks(static_cast<unsigned>(scale_cols), static_cast<unsigned>(scale_rows));
    const auto launch = [&](auto kernel, int threads) {
      kernel<<<blocks, threads, 0, stream>>>(x, rows, cols, scale_cols, rule, rounding, tensor_amax_bits, scales, codes);
    };
    switch (g.size) {
      case 16: launch(block_quantize_kernel<F, 16>, kBlockThreads<16>); return true;
      case 32: launch(block_quantize_kernel<F, 32>, kBlockThreads<32>); return true;
      case 64: launch(block_quantize_kernel<F, 64>, kBlockThreads<64>); return true;
      case 128: launch(block_quantize_kernel<F, 128>, kBlockThreads<128>); return true;
      default: return false;
    }
  }
  return false;
}

}  // namespace

void quantize_device(const float* d_x, std::int64_t rows, std::int64_t cols, const QuantizeConfig& config,
                     std::uint8_t* d_codes, float* d_scales, unsigned* d_amax_bits, cudaStream_t stream) {
  check_rule_serves_format(config.scale_rule, config.format);
  if (rows == 0 || cols == 0) return;
  const QuantizedTensor shape = make_quantized_tensor(0, cols, config);  // tile geometry only
  const Geometry g{rows, cols, config.granularity.tile_rows(rows), shape.tile_cols, shape.scale_cols};
  // make_quantized_tensor checked the tiles of a 0-row tensor; the rows' tiles are these
  // (nvfp4:4over6's kernel holds at most 16 x 16 elements a block).
  check_rule_serves_tiles(config.scale_rule, g.tile_rows, g.tile_cols, config.rounding.mode == RoundingMode::stochastic);
  const std::int64_t tiles = ((rows + g.tile_rows - 1) / g.tile_rows) * g.scale_cols;
  unsigned* tensor_amax_bits = nullptr;
  if (scale_rule_math(config.scale_rule).two_level) {  // the workspace's last slot
    tensor_amax_bits = d_amax_bits + tiles;
    tensor_amax_device(d_x, rows * cols, tensor_amax_bits, stream);
  }
  const bool four_over_six = config.scale_rule == ScaleRule::nvfp4_4over6;
  if (four_over_six && g.tile_rows == 1) {  // 1 x 16 tiles: one pass after the tensor amax
    const bool aligned = cols % 4 == 0 && reinterpret_cast<std::uintptr_t>(d_x) % 16 == 0;
    (aligned ? four_over_six_tile_kernel<true> : four_over_six_tile_kernel<false>)<<<blocks_for(tiles), 256, 0, stream>>>(
        d_x, rows, cols, g.scale_cols, tensor_amax_bits, d_scales, d_codes);
    FP8LAB_CUDA_CHECK(cudaGetLastError());
    return;
  }
  // float4 loads of x and uchar4 stores of the codes need both aligned.
  if (!four_over_six && cols % 4 == 0 && reinterpret_cast<std::uintptr_t>(d_x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(d_codes) % 4 == 0) {
    const bool launched = with_element_codec(config.format, [&](auto codec) {
      return launch_fast_path<decltype(codec)>(d_x, rows, cols, config, tensor_amax_bits, d_scales, d_codes, stream);
    });
    if (launched) {
      FP8LAB_CUDA_CHECK(cudaGetLastError());
      return;
    }
  }
  if (rows > 65535) throw std::invalid_argument("cuda quantize: more than 65535 rows is not supported yet");
  FP8LAB_CUDA_CHECK(cudaMemsetAsync(d_amax_bits, 0, sizeof(unsigned) * static_cast<std::size_t>(tiles), stream));
  const dim3 segments(static_cast<unsigned>(g.scale_cols), static_cast<unsigned>(rows));
  segment_amax_kernel<<<segments, kThreads, 0, stream>>>(d_x, g, d_amax_bits);
  FP8LAB_CUDA_CHECK(cudaGetLastError());
  if (four_over_six) {
    four_over_six_kernel<<<blocks_for(tiles), 256, 0, stream>>>(d_x, g, d_amax_bits, tensor_amax_bits, d_scales, d_codes);
    FP8LAB_CUDA_CHECK(cudaGetLastError());
    return;
  }
  scale_kernel<<<blocks_for(tiles), 256, 0, stream>>>(d_amax_bits, tiles, config.scale_rule, config.format.traits(),
                                                       tensor_amax_bits, d_scales);
  FP8LAB_CUDA_CHECK(cudaGetLastError());
  with_element_codec(config.format, [&](auto codec) {
    encode_kernel<decltype(codec)><<<segments, kThreads, 0, stream>>>(d_x, g, d_amax_bits, config.scale_rule,
                                                                      config.rounding, tensor_amax_bits, d_codes);
  });
  FP8LAB_CUDA_CHECK(cudaGetLastError());
}

// The default form of the pass (launch_tensor_amax, quantize_fast_paths.cuh).
void tensor_amax_device(const float* d_x, std::int64_t n, unsigned* d_amax_bits, cudaStream_t stream) {
  launch_tensor_amax<kAmaxUnroll, AmaxLoads::plain>(d_x, n, d_amax_bits, stream);
}

std::size_t amax_workspace_slots(const QuantizedTensor& shape) {
  return shape.scales.size() + (scale_rule_math(shape.config.scale_rule).two_level ? 1 : 0);
}

namespace {

// The two-level rules' tensor level, from the workspace's last slot, into q (as the CPU sets it).
void read_tensor_scale(const DeviceArray<unsigned>& d_amax, QuantizedTensor& q) {
  if (!scale_rule_math(q.config.scale_rule).two_level || q.codes.empty()) return;  // empty: amax 0, scale {1, 1}
  unsigned bits = 0;
  FP8LAB_CUDA_CHECK(cudaMemcpy(&bits, d_amax.get() + q.scales.size(), sizeof bits, cudaMemcpyDeviceToHost));
  q.tensor_amax = float_from_bits(bits);
  q.tensor_scale = tensor_scale(q.tensor_amax, q.config.scale_rule, q.config.format.traits());
}

}  // namespace

QuantizedTensor quantize(std::span<const float> x, std::int64_t rows, std::int64_t cols, const QuantizeConfig& config) {
  if (static_cast<std::int64_t>(x.size()) != rows * cols) throw std::invalid_argument("cuda quantize: size does not match the shape");
  QuantizedTensor q = make_quantized_tensor(rows, cols, config);
  DeviceArray<float> d_x(x.size()), d_scales(q.scales.size());
  DeviceArray<std::uint8_t> d_codes(q.codes.size());
  DeviceArray<unsigned> d_amax(amax_workspace_slots(q));
  FP8LAB_CUDA_CHECK(cudaMemcpy(d_x.get(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  quantize_device(d_x.get(), rows, cols, config, d_codes.get(), d_scales.get(), d_amax.get(), nullptr);
  FP8LAB_CUDA_CHECK(cudaMemcpy(q.codes.data(), d_codes.get(), q.codes.size(), cudaMemcpyDeviceToHost));
  FP8LAB_CUDA_CHECK(cudaMemcpy(q.scales.data(), d_scales.get(), q.scales.size() * sizeof(float), cudaMemcpyDeviceToHost));
  read_tensor_scale(d_amax, q);
  return q;
}

void transpose_device(const float* d_in, std::int64_t rows, std::int64_t cols, float* d_out, cudaStream_t stream) {
  if (rows * cols == 0) return;
  transpose_kernel<<<blocks_for(rows * cols), 256, 0, stream>>>(d_in, rows, cols, d_out);
  FP8LAB_CUDA_CHECK(cudaGetLastError());
}

void requantize_transposed_device(const std::uint8_t* d_codes, const float* d_scales, std::int64_t rows, std::int64_t cols,
                                  const QuantizeConfig& config, float* d_work, std::uint8_t* d_out_codes,
                                  float* d_out_scales, unsigned* d_amax_bits, cudaStream_t stream) {
  // dequantize_kernel applies the tile scale alone, not a two-level rule's per-tensor factor.
  if (scale_rule_math(config.scale_rule).two_level)
    throw std::invalid_argument(std::string("cuda requantize_transposed: scale rule ") + scale_rule_name(config.scale_rule) +
                                " is two-level; it runs on the CPU backend only");
  if (config.granularity.kind != Granularity::Kind::tile)
    throw std::invalid_argument("requantize_transposed: input must be quantized with tile:1xT, not " +
                                config.granularity.to_string());
  const std::int64_t n = rows * cols;
  if (n == 0) return;
  const QuantizedTensor shape = make_quantized_tensor(0, cols, config);  // tile geometry only
  const Geometry g{rows, cols, 1, shape.tile_cols, shape.scale_cols};
  float* dequantized = d_work;
  float* transposed = d_work + n;
  with_element_codec(config.format, [&](auto codec) {
    dequantize_kernel<decltype(codec)><<<blocks_for(n), 256, 0, stream>>>(d_codes, g, d_scales, dequantized);
  });
  FP8LAB_CUDA_CHECK(cudaGetLastError());
  transpose_device(dequantized, rows, cols, transposed, stream);
  quantize_device(transposed, cols, rows, config, d_out_codes, d_out_scales, d_amax_bits, stream);
}

QuantizedTensor requantize_transposed(const QuantizedTensor& in) {
  DeviceArray<std::uint8_t> d_codes(in.codes.size());
  DeviceArray<float> d_scales(in.scales.size()), d_work(2 * in.codes.size());
  FP8LAB_CUDA_CHECK(cudaMemcpy(d_codes.get(), in.codes.data(), in.codes.size(), cudaMemcpyHostToDevice));
  FP8LAB_CUDA_CHECK(cudaMemcpy(d_scales.get(), in.scales.data(), in.scales.size() * sizeof(float), cudaMemcpyHostToDevice));
  QuantizedTensor out = make_quantized_tensor(in.cols, in.rows, in.config);
  DeviceArray<std::uint8_t> d_out_codes(out.codes.size());
  DeviceArray<float> d_out_scales(out.scales.size());
  DeviceArray<unsigned> d_amax(amax_workspace_slots(out));
  requantize_transposed_device(d_codes.get(), d_scales.get(), in.rows, in.cols, in.config, d_work.get(), d_out_codes.get(),
                               d_out_scales.get(), d_amax.get(), nullptr);
  FP8LAB_CUDA_CHECK(cudaMemcpy(out.codes.data(), d_out_codes.get(), out.codes.size(), cudaMemcpyDeviceToHost));
  FP8LAB_CUDA_CHECK(cudaMemcpy(out.scales.data(), d_out_scales.get(), out.scales.size() * sizeof(float), cudaMemcpyDeviceToHost));
  read_tensor_scale(d_amax, out);
  return out;
}

}  // namespace fp8lab::cuda
