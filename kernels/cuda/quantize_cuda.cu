// Contract: kernels/cpu/quantize.hpp (amax over the tile, {decode, encode} = tile_scale (the
// host+device code of kernels/scale_rules.hpp), q = satfinite RNE of fl32(x * encode) or
// fl32(x / encode) as the rule says, x' = fl32(q * decode)); compiled with --fmad=false so
// x * encode is one IEEE multiply as on the CPU, and IEEE division (nvcc's default
// -prec-div=true). Rounding: nearest, or stochastic (config.rounding) on the general path.
// Every element format (E4M3, E5M2, E2M1, E3M2, E2M3) and every one-level rule;
// the two-level nvfp4 rules need the tensor's amax first and run on the CPU backend only.
// Layout: x rows x cols row-major. General path: one CUDA block per (row, tile column)
// segment, so a 1xT tile is one block and a BxB block is B of them (B atomics), per-row and
// per-tensor one block per row; x is read twice (amax, then encode). Fast path for 1xT tiles
// with T a multiple of 128 and cols % 4 == 0 (DeepSeek-V3's activations): one warp per tile,
// the tile held in registers, x read once.
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_array.hpp"
#include "kernels/cuda/quantize_cuda.hpp"
#include "kernels/formats/float_formats.hpp"

namespace fp8lab::cuda {
namespace {

constexpr int kThreads = 128;

struct Geometry {
  std::int64_t rows, cols, tile_rows, tile_cols, scale_cols;
};

// |x| as an unsigned bit pattern: compared as integers these order finite values and inf as
// floats do and make NaN the largest, so an amax over them propagates NaN. Both quantizer
// paths take their amax this way.
__device__ __forceinline__ unsigned abs_bits(float x) { return float_bits(x) & 0x7FFFFFFFu; }

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
                             float* scales) {
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (t < tiles) scales[t] = tile_scale(float_from_bits(amax_bits[t]), rule, format).decode;
}

// The encode factor is not always fl32(1 / decode) (te, div), so each segment computes its
// tile's TileScale again from the amax, with the same function as scale_kernel.
// Stochastic rounding draws from (seed, row * cols + c), as on the CPU (stochastic_rounding.hpp).
template <class F>
__global__ void encode_kernel(const float* x, Geometry g, const unsigned* amax_bits, ScaleRule rule, Rounding rounding,
                              std::uint8_t* codes) {
  const std::int64_t row = blockIdx.y, tile_col = blockIdx.x;
  const std::int64_t c0 = tile_col * g.tile_cols, c1 = min(g.cols, c0 + g.tile_cols);
  const float amax = float_from_bits(amax_bits[(row / g.tile_rows) * g.scale_cols + tile_col]);
  const float factor = tile_scale(amax, rule, element_traits_of<F>()).encode;
  const ApplyScale apply = scale_rule_math(rule).apply;
  for (std::int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
    const std::int64_t i = row * g.cols + c;
    const float v = scaled_element(x[i], factor, apply);
    codes[i] = static_cast<std::uint8_t>(
        rounding.mode == RoundingMode::stochastic
            ? encode_stochastic<F>(v, stochastic_draw(rounding.seed, static_cast<std::uint64_t>(i)))
            : encode<F>(v));
  }
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

// One warp per 1 x (128 V) tile: lane l holds float4 chunks l, l + 32, ... of the tile.
template <class F, int V>
__global__ void tile_quantize_kernel(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t tiles_per_row,
                                     ScaleRule rule, float* scales, std::uint8_t* codes) {
  const std::int64_t tile_index = (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (tile_index >= rows * tiles_per_row) return;
  const std::int64_t row = tile_index / tiles_per_row, first = (tile_index % tiles_per_row) * 128 * V;
  float4 chunk[V];
  unsigned amax_bits = 0;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const std::int64_t c = first + 4 * (lane + 32 * i);
    chunk[i] = c < cols ? *reinterpret_cast<const float4*>(x + row * cols + c) : make_float4(0, 0, 0, 0);
    amax_bits = max(max(amax_bits, abs_bits(chunk[i].x)), abs_bits(chunk[i].y));
    amax_bits = max(max(amax_bits, abs_bits(chunk[i].z)), abs_bits(chunk[i].w));
  }
  for (int offset = 16; offset > 0; offset /= 2) amax_bits = max(amax_bits, __shfl_xor_sync(0xFFFFFFFFu, amax_bits, offset));
  const TileScale scale = tile_scale(float_from_bits(amax_bits), rule, element_traits_of<F>());
  const ApplyScale apply = scale_rule_math(rule).apply;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const std::int64_t c = first + 4 * (lane + 32 * i);
    if (c >= cols) continue;
    const uchar4 q = make_uchar4(static_cast<unsigned char>(encode<F>(scaled_element(chunk[i].x, scale.encode, apply))),
                                 static_cast<unsigned char>(encode<F>(scaled_element(chunk[i].y, scale.encode, apply))),
                                 static_cast<unsigned char>(encode<F>(scaled_element(chunk[i].z, scale.encode, apply))),
                                 static_cast<unsigned char>(encode<F>(scaled_element(chunk[i].w, scale.encode, apply))));
    *reinterpret_cast<uchar4*>(codes + row * cols + c) = q;
  }
  if (lane == 0) scales[tile_index] = scale.decode;
}

template <class F>
void launch_tile_quantize(const float* x, std::int64_t rows, std::int64_t cols, int tile, ScaleRule rule,
                          float* scales, std::uint8_t* codes, cudaStream_t stream) {
  const std::int64_t tiles_per_row = (cols + tile - 1) / tile;
  const std::int64_t threads = rows * tiles_per_row * 32;
  const auto blocks = static_cast<unsigned>((threads + 255) / 256);
  switch (tile) {
    case 128: tile_quantize_kernel<F, 1><<<blocks, 256, 0, stream>>>(x, rows, cols, tiles_per_row, rule, scales, codes); break;
    case 256: tile_quantize_kernel<F, 2><<<blocks, 256, 0, stream>>>(x, rows, cols, tiles_per_row, rule, scales, codes); break;
    case 512: tile_quantize_kernel<F, 4><<<blocks, 256, 0, stream>>>(x, rows, cols, tiles_per_row, rule, scales, codes); break;
    default: throw std::invalid_argument("tile quantizer: T must be 128, 256 or 512");
  }
  FP8LAB_CUDA_CHECK(cudaGetLastError());
}

Geometry geometry_of(const QuantizedTensor& q) { return {q.rows, q.cols, q.tile_rows, q.tile_cols, q.scale_cols}; }

unsigned blocks_for(std::int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

}  // namespace

void quantize_device(const float* d_x, std::int64_t rows, std::int64_t cols, const QuantizeConfig& config,
                     std::uint8_t* d_codes, float* d_scales, unsigned* d_amax_bits, cudaStream_t stream) {
  check_rule_serves_format(config.scale_rule, config.format);
  if (scale_rule_math(config.scale_rule).two_level)
    throw std::invalid_argument(std::string("cuda quantize: scale rule ") + scale_rule_name(config.scale_rule) +
                                " needs the tensor's amax before any tile; it runs on the CPU backend only");
  if (rows == 0 || cols == 0) return;
  const Granularity& granularity = config.granularity;
  // The fast path rounds to nearest only; stochastic rounding takes the general path.
  if (granularity.kind == Granularity::Kind::tile && granularity.size % 128 == 0 && cols % 4 == 0 &&
      reinterpret_cast<std::uintptr_t>(d_x) % 16 == 0 && config.rounding.mode == RoundingMode::nearest) {
    with_element_codec(config.format, [&](auto codec) {
      launch_tile_quantize<decltype(codec)>(d_x, rows, cols, granularity.size, config.scale_rule, d_scales, d_codes, stream);
    });
    return;
  }
  const QuantizedTensor shape = make_quantized_tensor(0, cols, config);  // tile geometry only
  const Geometry g{rows, cols, granularity.tile_rows(rows), shape.tile_cols, shape.scale_cols};
  const std::int64_t tiles = ((rows + g.tile_rows - 1) / g.tile_rows) * g.scale_cols;
  if (rows > 65535) throw std::invalid_argument("cuda quantize: more than 65535 rows is not supported yet");
  FP8LAB_CUDA_CHECK(cudaMemsetAsync(d_amax_bits, 0, sizeof(unsigned) * static_cast<std::size_t>(tiles), stream));
  const dim3 segments(static_cast<unsigned>(g.scale_cols), static_cast<unsigned>(rows));
  segment_amax_kernel<<<segments, kThreads, 0, stream>>>(d_x, g, d_amax_bits);
  FP8LAB_CUDA_CHECK(cudaGetLastError());
  scale_kernel<<<blocks_for(tiles), 256, 0, stream>>>(d_amax_bits, tiles, config.scale_rule, config.format.traits(),
                                                       d_scales);
  FP8LAB_CUDA_CHECK(cudaGetLastError());
  with_element_codec(config.format, [&](auto codec) {
    encode_kernel<decltype(codec)><<<segments, kThreads, 0, stream>>>(d_x, g, d_amax_bits, config.scale_rule,
                                                                      config.rounding, d_codes);
  });
  FP8LAB_CUDA_CHECK(cudaGetLastError());
}

QuantizedTensor quantize(std::span<const float> x, std::int64_t rows, std::int64_t cols, const QuantizeConfig& config) {
  if (static_cast<std::int64_t>(x.size()) != rows * cols) throw std::invalid_argument("cuda quantize: size does not match the shape");
  QuantizedTensor q = make_quantized_tensor(rows, cols, config);
  DeviceArray<float> d_x(x.size()), d_scales(q.scales.size());
  DeviceArray<std::uint8_t> d_codes(q.codes.size());
  DeviceArray<unsigned> d_amax(q.scales.size());
  FP8LAB_CUDA_CHECK(cudaMemcpy(d_x.get(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  quantize_device(d_x.get(), rows, cols, config, d_codes.get(), d_scales.get(), d_amax.get(), nullptr);
  FP8LAB_CUDA_CHECK(cudaMemcpy(q.codes.data(), d_codes.get(), q.codes.size(), cudaMemcpyDeviceToHost));
  FP8LAB_CUDA_CHECK(cudaMemcpy(q.scales.data(), d_scales.get(), q.scales.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return q;
}

QuantizedTensor requantize_transposed(const QuantizedTensor& in) {
  if (in.config.granularity.kind != Granularity::Kind::tile)
    throw std::invalid_argument("requantize_transposed: input must be quantized with tile:1xT, not " +
                                in.config.granularity.to_string());
  const auto n = static_cast<std::int64_t>(in.codes.size());
  DeviceArray<std::uint8_t> d_codes(in.codes.size());
  DeviceArray<float> d_scales(in.scales.size()), d_x(in.codes.size()), d_t(in.codes.size());
  FP8LAB_CUDA_CHECK(cudaMemcpy(d_codes.get(), in.codes.data(), in.codes.size(), cudaMemcpyHostToDevice));
  FP8LAB_CUDA_CHECK(cudaMemcpy(d_scales.get(), in.scales.data(), in.scales.size() * sizeof(float), cudaMemcpyHostToDevice));
  const Geometry g = geometry_of(in);
  with_element_codec(in.config.format, [&](auto codec) {
    dequantize_kernel<decltype(codec)><<<blocks_for(n), 256>>>(d_codes.get(), g, d_scales.get(), d_x.get());
  });
  FP8LAB_CUDA_CHECK(cudaGetLastError());
  transpose_kernel<<<blocks_for(n), 256>>>(d_x.get(), in.rows, in.cols, d_t.get());
  FP8LAB_CUDA_CHECK(cudaGetLastError());
  QuantizedTensor out = make_quantized_tensor(in.cols, in.rows, in.config);
  DeviceArray<std::uint8_t> d_out_codes(out.codes.size());
  DeviceArray<float> d_out_scales(out.scales.size());
  DeviceArray<unsigned> d_amax(out.scales.size());
  quantize_device(d_t.get(), out.rows, out.cols, out.config, d_out_codes.get(), d_out_scales.get(), d_amax.get(), nullptr);
  FP8LAB_CUDA_CHECK(cudaMemcpy(out.codes.data(), d_out_codes.get(), out.codes.size(), cudaMemcpyDeviceToHost));
  FP8LAB_CUDA_CHECK(cudaMemcpy(out.scales.data(), d_out_scales.get(), out.scales.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return out;
}

}  // namespace fp8lab::cuda
