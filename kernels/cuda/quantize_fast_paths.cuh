#pragma once
// The quantizer's one-pass kernels (included by quantize_cuda.cu, and by tensor_amax_variants.cu
// for the amax pass; the contract is quantize_cuda.cu's): x is read once, as float4, held in
// registers while its tile's amax is reduced, then encoded from the registers. They need
// cols % 4 == 0 and a 16-byte aligned x, so that no float4 straddles a row or a tile (every
// tile width here is a multiple of 4).
//   tile_quantize_kernel<F, V>      1 x 128V tiles: one warp per tile, lane l holds chunks
//                                   l, l + 32, ... (DeepSeek-V3's activations);
//   narrow_tile_quantize_kernel<F, T>  1 x T tiles, T in {16, 32, 64} (MXFP8, MXFP4, NVFP4): one
//                                   warp per 128 columns of a row, T / 4 lanes per tile;
//   block_quantize_kernel<F, B>     B x B blocks, B in {16, 32, 64, 128}: one CTA per block.
//   four_over_six_tile_kernel       nvfp4:4over6 on 1 x 16 tiles: a thread per tile (also for
//                                   ragged shapes: scalar loads then).
// Element i = row * cols + c is encoded exactly as the general path and the CPU do it
// (scaled_element, then encode or encode_stochastic with the draw of i), so the three agree
// bit for bit; four_over_six_tile_kernel runs the CPU's own four_over_six::quantize_block, and
// takes any cols (scalar loads where a tile's float4 would not be aligned). The two-level rules
// read the tensor's amax from *tensor_amax_bits (nullptr for the one-level rules), which
// tensor_amax_kernel filled before.
#include <cuda_fp8.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/amax_loads.hpp"
#include "kernels/formats/float_formats.hpp"
#include "kernels/formats/stochastic_rounding.hpp"
#include "kernels/nvfp4_4over6.hpp"
#include "kernels/scale_rules.hpp"

namespace fp8lab::cuda {
namespace {

// |x| as an unsigned bit pattern: compared as integers these order finite values and inf as
// floats do and make NaN the largest, so an amax over them propagates NaN. Every quantizer
// kernel takes its amax this way, as the CPU's tile_amax does.
__device__ __forceinline__ unsigned abs_bits(float x) { return float_bits(x) & 0x7FFFFFFFu; }

__device__ __forceinline__ unsigned max_abs_bits(unsigned m, float4 v) {
  return max(max(max(m, abs_bits(v.x)), abs_bits(v.y)), max(abs_bits(v.z), abs_bits(v.w)));
}

// The per-tensor level of the two-level rules ({1, 1} for the others), from the same host and
// device function as the CPU's.
__device__ __forceinline__ TensorScale tensor_scale_of(const unsigned* tensor_amax_bits, ScaleRule rule,
                                                       ElementTraits format) {
  return tensor_amax_bits == nullptr ? TensorScale{} : tensor_scale(float_from_bits(*tensor_amax_bits), rule, format);
}

// encode<F>(v) (RNE, satfinite). For E4M3 and E5M2 Hopper's cvt.rn.satfinite gives the same
// code for every FP32 pattern (tests/gpu/float_formats_gpu_test.cpp compares all 2^32 on each
// GPU run; 0 mismatches on H200 and H100) in one instruction instead of the integer RNE's
// dozens: the quantizer is issue-bound enough for that to matter. FP4 and FP6 have no such
// instruction before Blackwell; E2M1 takes the shorter encode_e2m1_by_quantum_add (equal to
// the FP64 reference on all 2^32 patterns: tests/slow).
template <class F>
__device__ __forceinline__ std::uint8_t encode_nearest(float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if constexpr (std::is_same_v<F, E4M3>) return static_cast<std::uint8_t>(encode_e4m3_satfinite(v));
  if constexpr (std::is_same_v<F, E5M2>) return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E5M2));
#endif
  if constexpr (std::is_same_v<F, E2M1>) return static_cast<std::uint8_t>(encode_e2m1_by_quantum_add(v));
  return static_cast<std::uint8_t>(encode<F>(v));
}

template <class F>
__device__ __forceinline__ std::uint8_t encode_element(float x, float factor, ApplyScale apply, Rounding rounding,
                                                       std::int64_t i) {
  const float v = scaled_element(x, factor, apply);
  return rounding.mode == RoundingMode::stochastic
             ? static_cast<std::uint8_t>(encode_stochastic<F>(v, stochastic_draw(rounding.seed, static_cast<std::uint64_t>(i))))
             : encode_nearest<F>(v);
}

// Four consecutive elements starting at i, as one 4-byte store.
template <class F>
__device__ __forceinline__ void encode_chunk(float4 v, float factor, ApplyScale apply, Rounding rounding, std::int64_t i,
                                             std::uint8_t* codes) {
  *reinterpret_cast<uchar4*>(codes + i) =
      make_uchar4(encode_element<F>(v.x, factor, apply, rounding, i), encode_element<F>(v.y, factor, apply, rounding, i + 1),
                  encode_element<F>(v.z, factor, apply, rounding, i + 2), encode_element<F>(v.w, factor, apply, rounding, i + 3));
}

// The tensor's amax (abs_bits order) into *amax_bits, which must start at 0. Any order of the
// maxima gives the same result, so atomics keep the bits. float4 loads when x is 16-byte
// aligned (the scalar tail after the last whole chunk), scalar loads otherwise. A pure read
// needs many loads in flight to reach HBM bandwidth: each thread issues kUnroll independent
// float4 loads per step (with one a step, on 4096 CTAs, this pass took 62.4 us on the H100 for
// 117 MB, 1.88 TB/s; with four on a resident grid 55.3 us). The quantizer runs the defaults;
// tensor_amax_variants.cu instantiates others for a benchmark.
constexpr int kAmaxUnroll = 4;
template <AmaxLoads kLoads>
__device__ __forceinline__ float4 load_float4(const float4* p) {
  if constexpr (kLoads == AmaxLoads::read_only) return __ldg(p);
  else if constexpr (kLoads == AmaxLoads::streaming) return __ldcs(p);
  else return *p;
}
template <int kUnroll, AmaxLoads kLoads>
__global__ void tensor_amax_kernel(const float* x, std::int64_t n, unsigned* amax_bits) {
  const std::int64_t first = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  unsigned m = 0;
  std::int64_t scalar_from = 0;
  if (reinterpret_cast<std::uintptr_t>(x) % 16 == 0) {
    const float4* chunks = reinterpret_cast<const float4*>(x);
    const std::int64_t count = n / 4;
    std::int64_t i = first;
    for (; i + (kUnroll - 1) * stride < count; i += kUnroll * stride) {
      float4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = load_float4<kLoads>(chunks + i + u * stride);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) m = max_abs_bits(m, v[u]);
    }
    for (; i < count; i += stride) m = max_abs_bits(m, load_float4<kLoads>(chunks + i));
    scalar_from = 4 * count;
  }
  for (std::int64_t i = scalar_from + first; i < n; i += stride) m = max(m, abs_bits(x[i]));
  for (int offset = 16; offset > 0; offset /= 2) m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, offset));
  if (threadIdx.x % 32 == 0) atomicMax(amax_bits, m);
}

// As many 256-thread CTAs as the GPU holds at once (the occupancy calculator's count an SM,
// which the kernel's registers set), fewer for a small tensor: every thread then strides
// through the tensor with kUnroll loads in flight, and no second wave of CTAs waits on the
// first.
template <int kUnroll, AmaxLoads kLoads>
void launch_tensor_amax(const float* d_x, std::int64_t n, unsigned* d_amax_bits, cudaStream_t stream) {
  int device = 0, sms = 0, per_sm = 0;
  FP8LAB_CUDA_CHECK(cudaGetDevice(&device));
  FP8LAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  FP8LAB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, tensor_amax_kernel<kUnroll, kLoads>, 256, 0));
  const std::int64_t resident = std::max(1, per_sm) * static_cast<std::int64_t>(sms);
  const auto blocks = static_cast<unsigned>(std::max<std::int64_t>(1, std::min<std::int64_t>((n + 1023) / 1024, resident)));
  FP8LAB_CUDA_CHECK(cudaMemsetAsync(d_amax_bits, 0, sizeof(unsigned), stream));
  tensor_amax_kernel<kUnroll, kLoads><<<blocks, 256, 0, stream>>>(d_x, n, d_amax_bits);
  FP8LAB_CUDA_CHECK(cudaGetLastError());
}

// nvfp4:4over6 on 1 x 16 tiles, one thread per tile: the tile's 16 values are loaded once
// (float4 when kAlignedLoads: cols % 4 == 0 and x 16-byte aligned, so no chunk straddles a
// row or a tile), its amax taken from them, and four_over_six::quantize_block (the CPU's function)
// run on the copy in the thread's own memory; the codes go out as bytes. A ragged last tile
// holds its c1 - c0 < 16 values, as on the CPU.
template <bool kAlignedLoads>
__global__ void four_over_six_tile_kernel(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t tiles_per_row,
                                          const unsigned* tensor_amax_bits, float* scales, std::uint8_t* codes) {
  constexpr int kTile = four_over_six::kBlock;
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (t >= rows * tiles_per_row) return;
  const std::int64_t row = t / tiles_per_row, c0 = (t % tiles_per_row) * kTile;
  const int width = static_cast<int>(min(static_cast<std::int64_t>(kTile), cols - c0));
  const float* in = x + row * cols + c0;
  float v[kTile];
  unsigned amax = 0;
  if (kAlignedLoads && width == kTile) {
#pragma unroll
    for (int k = 0; k < kTile / 4; ++k) {
      const float4 chunk = reinterpret_cast<const float4*>(in)[k];
      v[4 * k] = chunk.x, v[4 * k + 1] = chunk.y, v[4 * k + 2] = chunk.z, v[4 * k + 3] = chunk.w;
      amax = max_abs_bits(amax, chunk);
    }
  } else {
    for (int k = 0; k < width; ++k) {
      v[k] = in[k];
      amax = max(amax, abs_bits(v[k]));
    }
  }
  std::uint8_t q[kTile];
  const float tensor_amax = float_from_bits(*tensor_amax_bits);
  scales[t] = four_over_six::quantize_block(v, q, kTile, 0, 1, 0, width, float_from_bits(amax), tensor_amax,
                                            tensor_scale_of(tensor_amax_bits, ScaleRule::nvfp4_4over6, element_traits_of<E2M1>()));
  std::uint8_t* out = codes + row * cols + c0;
  for (int k = 0; k < width; ++k) out[k] = q[k];
}

// One warp per 1 x (128 V) tile: lane l holds float4 chunks l, l + 32, ... of the tile.
template <class F, int V>
__global__ void tile_quantize_kernel(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t tiles_per_row,
                                     ScaleRule rule, Rounding rounding, const unsigned* tensor_amax_bits, float* scales,
                                     std::uint8_t* codes) {
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
    amax_bits = max_abs_bits(amax_bits, chunk[i]);
  }
  for (int offset = 16; offset > 0; offset /= 2) amax_bits = max(amax_bits, __shfl_xor_sync(0xFFFFFFFFu, amax_bits, offset));
  const ElementTraits traits = element_traits_of<F>();
  const TileScale scale = tile_scale(float_from_bits(amax_bits), rule, traits, tensor_scale_of(tensor_amax_bits, rule, traits));
  const ApplyScale apply = scale_rule_math(rule).apply;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const std::int64_t c = first + 4 * (lane + 32 * i);
    if (c < cols) encode_chunk<F>(chunk[i], scale.encode, apply, rounding, row * cols + c, codes);
  }
  if (lane == 0) scales[tile_index] = scale.decode;
}

// One warp per 128 columns of a row, which hold 128 / T whole tiles (T divides 128 and tiles
// start at multiples of T): lane l holds columns 4l..4l+3, and the T / 4 lanes of a tile reduce
// its amax among themselves (xor offsets below T / 4 stay inside the lane group). The grid is
// (rows, 128-column groups / kNarrowWarps), so no thread divides 64-bit indices (dozens of
// instructions a warp, in a kernel that NVFP4's E2M1 encode makes issue-bound), and it walks
// the rows from the last: after the two-level rules' tensor-amax pass, which reads x from
// first to last, the rows at the end may still be in L2 (not measured apart: with the 2-D grid
// the two changes together moved NVFP4 from 0.598x to 0.610x a copy on the H100).
constexpr int kNarrowWarps = 8;
template <class F, int T>
__global__ void __launch_bounds__(32 * kNarrowWarps)
    narrow_tile_quantize_kernel(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t warps_per_row,
                                std::int64_t tiles_per_row, ScaleRule rule, Rounding rounding,
                                const unsigned* tensor_amax_bits, float* scales, std::uint8_t* codes) {
  static_assert(T == 16 || T == 32 || T == 64);
  const std::int64_t row = rows - 1 - blockIdx.x;
  const std::int64_t warp_in_row = static_cast<std::int64_t>(blockIdx.y) * kNarrowWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (warp_in_row >= warps_per_row) return;
  const std::int64_t c = warp_in_row * 128 + 4 * lane;
  const bool inside = c < cols;
  const float4 chunk = inside ? *reinterpret_cast<const float4*>(x + row * cols + c) : make_float4(0, 0, 0, 0);
  unsigned amax_bits = max_abs_bits(0u, chunk);
  for (int offset = T / 8; offset > 0; offset /= 2) amax_bits = max(amax_bits, __shfl_xor_sync(0xFFFFFFFFu, amax_bits, offset));
  const ElementTraits traits = element_traits_of<F>();
  const TileScale scale = tile_scale(float_from_bits(amax_bits), rule, traits, tensor_scale_of(tensor_amax_bits, rule, traits));
  if (!inside) return;
  encode_chunk<F>(chunk, scale.encode, scale_rule_math(rule).apply, rounding, row * cols + c, codes);
  if (c % T == 0) scales[row * tiles_per_row + c / T] = scale.decode;
}

// One CTA per B x B block; thread t holds the block's float4 chunks t, t + threads, ... in
// row-major order (a warp reads 32 consecutive chunks: whole 128-byte lines for B >= 32).
// Four chunks a thread (one for B = 16): with 16 a thread (256 threads for B = 128) the kernel
// took 128-142 registers, one CTA of 8 warps fit an SM, and it ran at 0.645x a copy on H200.
template <int B>
constexpr int kBlockThreads = B == 16 ? 64 : B * B / 16;

template <class F, int B>
__global__ void __launch_bounds__(kBlockThreads<B>)
    block_quantize_kernel(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t scale_cols, ScaleRule rule,
                          Rounding rounding, const unsigned* tensor_amax_bits, float* scales, std::uint8_t* codes) {
  static_assert(B == 16 || B == 32 || B == 64 || B == 128);
  constexpr int kThreads = kBlockThreads<B>, kWarps = kThreads / 32, kChunksPerRow = B / 4;
  constexpr int kPerThread = B * B / 4 / kThreads;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * B, c0 = static_cast<std::int64_t>(blockIdx.x) * B;
  float4 chunk[kPerThread];
  unsigned amax_bits = 0;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int index = static_cast<int>(threadIdx.x) + i * kThreads;
    const std::int64_t r = r0 + index / kChunksPerRow, c = c0 + 4 * (index % kChunksPerRow);
    chunk[i] = r < rows && c < cols ? *reinterpret_cast<const float4*>(x + r * cols + c) : make_float4(0, 0, 0, 0);
    amax_bits = max_abs_bits(amax_bits, chunk[i]);
  }
  for (int offset = 16; offset > 0; offset /= 2) amax_bits = max(amax_bits, __shfl_xor_sync(0xFFFFFFFFu, amax_bits, offset));
  __shared__ unsigned warp_max[kWarps];
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax_bits;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < kWarps; ++w) amax_bits = max(amax_bits, warp_max[w]);
  const ElementTraits traits = element_traits_of<F>();
  const TileScale scale = tile_scale(float_from_bits(amax_bits), rule, traits, tensor_scale_of(tensor_amax_bits, rule, traits));
  const ApplyScale apply = scale_rule_math(rule).apply;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int index = static_cast<int>(threadIdx.x) + i * kThreads;
    const std::int64_t r = r0 + index / kChunksPerRow, c = c0 + 4 * (index % kChunksPerRow);
    if (r < rows && c < cols) encode_chunk<F>(chunk[i], scale.encode, apply, rounding, r * cols + c, codes);
  }
  if (threadIdx.x == 0) scales[blockIdx.y * scale_cols + blockIdx.x] = scale.decode;
}

}  // namespace
}  // namespace fp8lab::cuda
