// fp8lab's tiled WGMMA block-scaled FP8 GEMM (contract and the choices made: wgmma_gemm_tiled.hpp).
// Numerics, exactly the CPU `hopper` emulation's (DESIGN.md section 2): per N_C of K a partial
// from wgmma on the unscaled codes, started from zero (scale-d = 0 on its first instruction),
// no instruction past ceil(K / 32) (a zero instruction is not an identity in the model: it can
// truncate a tiny partial), then s = fl32(s_a * s_b) (a separate multiply: built with
// --fmad=false) and acc = fmaf(p, s, acc); BF16 output is RNE(acc).
//
// One CTA of 384 threads per SM, persistent (CTA b takes tiles b, b + grid, ...):
//   warpgroup 0, the producer (setmaxnreg 40): one thread issues, per 128-K stage, a TMA load
//     of the A tile (128 rows x 128 B) and the B tile (block_n rows x 128 B), 128-byte swizzle,
//     into a ring of kStages slots with a `full` and an `empty` mbarrier each;
//   warpgroups 1 and 2, the math (setmaxnreg 232): rows 0-63 and 64-127 of the tile, wgmma
//     m64n{block_n}k32, each thread holding block_n / 2 partial and block_n / 2 accumulator
//     registers (192 at block_n = 192: why the width stops there).
// Shared memory (227 KiB opt-in): kStages x (16 KiB + block_n x 128 B) + the BF16 staging of
// 128 x block_n x 2 B + 128 B of barriers; kStages = 8, 8, 6, 5, 4 for block_n = 32, 64, 128,
// 160, 192 (Layout below; the build's ptxas report has registers and spills per instance).
// Not done, and why: 2-CTA clusters with TMA multicast (fewer L2 reads of A; a cross-CTA empty
// barrier whose mistakes deadlock, to be added once a GPU window has shown this kernel exact);
// stmatrix and FFMA interleaving (second-order, after measurement); widths above 192 (register
// budget above); a grouped masked layout (only the contiguous one).
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/hopper_primitives.cuh"
#include "kernels/cuda/tensor_maps.hpp"
#include "kernels/cuda/wgmma_gemm_tiled.hpp"
#include "kernels/cuda/wgmma_instructions_n.cuh"

namespace fp8lab::cuda {
namespace {

constexpr int kThreads = 384;           // producer + two math warpgroups
constexpr int kSharedLimit = 232448;    // 227 KiB: the opt-in maximum per block on H100 and H200
constexpr int kATileBytes = 128 * 128;  // 128 rows x 128 K of FP8
constexpr int kSlabBytes = 64 * 64;     // BF16 staging: 64 rows x 32 columns, 64-byte swizzle
constexpr int kInstructionsPerStage = 4;
constexpr int kConsumerWarps = 8;  // each math warp hands a slot back once

template <int kBlockN>
struct Layout {
  static constexpr int kBTileBytes = kBlockN * 128;
  static constexpr int kStageBytes = kATileBytes + kBTileBytes;
  static constexpr int kSlabs = kBlockN / 32;
  static constexpr int kStagingBytes = 2 * kSlabs * kSlabBytes;
  static constexpr int kBarrierBytes = 2 * 8 * 8;
  static constexpr int kStages = std::min(8, (kSharedLimit - 1024 - kStagingBytes - kBarrierBytes) / kStageBytes);
  static constexpr std::size_t kSharedBytes = 1024 + kStages * kStageBytes + kStagingBytes + kBarrierBytes;
  static_assert(kBlockN % 32 == 0 && kBlockN <= 192 && kStages >= 4 && kSharedBytes <= kSharedLimit);
};

struct TiledParams {
  int m, n;  // n: one expert's N in the grouped form
  int m_blocks, n_blocks, group_m;
  int k_blocks, k_instructions, stages_per_promotion;
  const float* a_scales;
  const float* b_scales;
  ScaleAddressing a, b;
  const std::int32_t* block_expert;  // grouped: expert per 128-row block (-1: skip); else nullptr
  long long b_scales_per_expert;
  bool bf16_output;
  void* c;
};

// Tile t of the persistent walk: down M inside groups of group_m row blocks, the groups side by
// side. Producer and math warpgroups call this one function, so they visit the same tiles.
struct Tile {
  int m0, n0, expert;
};
template <int kBlockN>
__device__ __forceinline__ Tile tile_at(int t, const TiledParams& p) {
  const int per_group = p.group_m * p.n_blocks;
  const int group = t / per_group, first_m = group * p.group_m;
  const int rows = min(p.m_blocks - first_m, p.group_m);
  const int local = t - group * per_group;
  const int m_block = first_m + local % rows;
  const int expert = p.block_expert ? __ldg(&p.block_expert[m_block]) : 0;
  return {m_block * 128, (local / rows) * kBlockN, expert};
}

// `kCount` wgmma instructions from instruction `first` of the stage (a new partial when
// `starts`), then a wait for all of them. kFull: all are inside K (no tail test).
template <Fp8Format kFormat, int kBlockN, int kCount, bool kFull>
__device__ __forceinline__ void issue_group(float (&partial)[kBlockN / 2], std::uint64_t desc_a, std::uint64_t desc_b,
                                            int first, int available, bool starts) {
  hopper::fence_registers(partial);
  hopper::wgmma_fence();
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    const int instruction = first + i;  // 32 FP8 of K = 32 bytes = 2 descriptor units
    if (kFull || instruction < available)
      wgmma::Mma<kFormat, kBlockN>::run(partial, desc_a + 2 * instruction, desc_b + 2 * instruction,
                                        (i == 0 && starts) ? 0 : 1);
  }
  hopper::wgmma_commit();
  hopper::wgmma_wait_all();
  hopper::fence_registers(partial);
}

// acc = fma(p, fl32(s_a * s_b), acc). B per block: the columns of 8-group i take the tile's
// second B block when bit i of `second` is set (a boundary falls only between 32-column groups,
// so bit 4 j stands for slab j).
template <int kBlockN, bool kBPerColumn>
__device__ __forceinline__ void promote(const float (&partial)[kBlockN / 2], float (&acc)[kBlockN / 2], float a0,
                                        float a1, float b0, float b1, unsigned second,
                                        const float (&b_column)[kBPerColumn ? kBlockN / 4 : 1]) {
  if constexpr (kBPerColumn) {
#pragma unroll
    for (int i = 0; i < kBlockN / 2; ++i) {
      const float s = ((i % 4) < 2 ? a0 : a1) * b_column[2 * (i / 4) + i % 2];
      acc[i] = __fmaf_rn(partial[i], s, acc[i]);
    }
  } else {
    // A width dividing 128 never crosses a B block (n0 is a multiple of it): no selection.
    constexpr bool kMayCross = 128 % kBlockN != 0;
    float s00 = a0 * b0, s01 = a0 * b1, s10 = a1 * b0, s11 = a1 * b1;
    asm volatile("" : "+f"(s00), "+f"(s01), "+f"(s10), "+f"(s11));  // four products, not one per selection
#pragma unroll
    for (int slab = 0; slab < kBlockN / 32; ++slab) {  // one selection per 32 columns
      const bool other = kMayCross && ((second >> (4 * slab)) & 1u);
      const float s0 = other ? s01 : s00, s1 = other ? s11 : s10;
#pragma unroll
      for (int i = 4 * slab; i < 4 * slab + 4; ++i) {
        acc[4 * i] = __fmaf_rn(partial[4 * i], s0, acc[4 * i]);
        acc[4 * i + 1] = __fmaf_rn(partial[4 * i + 1], s0, acc[4 * i + 1]);
        acc[4 * i + 2] = __fmaf_rn(partial[4 * i + 2], s1, acc[4 * i + 2]);
        acc[4 * i + 3] = __fmaf_rn(partial[4 * i + 3], s1, acc[4 * i + 3]);
      }
    }
  }
}

// BF16: the warpgroup's 64 x block_n outputs into its staging slabs (64-byte swizzle: the 8
// rows of one store land in distinct banks), then one TMA store per slab inside the tensor.
// The stores of the previous tile must have read the staging first (bulk_wait_read_all).
template <int kBlockN>
__device__ __forceinline__ void store_bf16(const float (&acc)[kBlockN / 2], std::uint8_t* staging, const CUtensorMap* c_map,
                                           int m0, int n0, const TiledParams& p, int consumer, int thread) {
  const int warp = thread / 32, lane = thread % 32;
  if (thread == 0) hopper::bulk_wait_read_all();
  hopper::named_barrier_sync(1 + consumer, 128);
#pragma unroll
  for (int i = 0; i < kBlockN / 8; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = warp * 16 + lane / 4 + 8 * half;
      const int offset = (i / 4) * kSlabBytes + r * 64 + (((i % 4) ^ ((r >> 1) & 3)) << 4) + 4 * (lane % 4);
      *reinterpret_cast<__nv_bfloat162*>(staging + offset) =
          __floats2bfloat162_rn(acc[4 * i + 2 * half], acc[4 * i + 2 * half + 1]);
    }
  }
  hopper::fence_proxy_async_shared();
  hopper::named_barrier_sync(1 + consumer, 128);
  const int row = m0 + consumer * 64;
  if (thread == 0 && row < p.m) {
#pragma unroll
    for (int s = 0; s < kBlockN / 32; ++s)
      if (n0 + 32 * s < p.n) hopper::tma_store_2d(c_map, staging + s * kSlabBytes, n0 + 32 * s, row);
    hopper::bulk_commit_group();
  }
}

// FP32: pairs of adjacent columns straight from registers (N % 8 == 0: a pair is inside N or not).
template <int kBlockN>
__device__ __forceinline__ void store_fp32(const float (&acc)[kBlockN / 2], int m0, int n0, const TiledParams& p,
                                           int row_in_tile, int column_in_tile) {
#pragma unroll
  for (int i = 0; i < kBlockN / 8; ++i) {
    const int column = n0 + 8 * i + column_in_tile;
    if (column >= p.n) continue;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = m0 + row_in_tile + 8 * half;
      if (row >= p.m) continue;
      *reinterpret_cast<float2*>(static_cast<float*>(p.c) + static_cast<std::size_t>(row) * p.n + column) =
          make_float2(acc[4 * i + 2 * half], acc[4 * i + 2 * half + 1]);
    }
  }
}

template <Fp8Format kFormat, int kBlockN, int kNc, bool kBPerColumn>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_tiled_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                       const __grid_constant__ CUtensorMap c_map, const TiledParams p) {
  using L = Layout<kBlockN>;
  static_assert(kNc == 32 || kNc == 64 || kNc == 128);
  constexpr int kGroupSize = kNc / 32, kGroups = kInstructionsPerStage / kGroupSize;

  extern __shared__ std::uint8_t raw_shared[];
  // 128-byte swizzled TMA tiles and descriptors with base offset 0 need 1024-byte alignment.
  const std::uint32_t misalignment = hopper::shared_address(raw_shared) % 1024;
  std::uint8_t* a_tiles = raw_shared + (misalignment ? 1024 - misalignment : 0);
  std::uint8_t* b_tiles = a_tiles + L::kStages * kATileBytes;
  std::uint8_t* staging = b_tiles + L::kStages * L::kBTileBytes;
  auto* full = reinterpret_cast<std::uint64_t*>(staging + L::kStagingBytes);
  std::uint64_t* empty = full + L::kStages;

  if (threadIdx.x == 0) {
    for (int s = 0; s < L::kStages; ++s) {
      hopper::barrier_init(&full[s], 1);
      hopper::barrier_init(&empty[s], kConsumerWarps);
    }
    hopper::fence_barrier_init();
  }
  __syncthreads();

  const int tiles = p.m_blocks * p.n_blocks;
  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    hopper::release_registers<40>();
    if (threadIdx.x != 0) return;
    hopper::prefetch_tensor_map(&a_map);
    hopper::prefetch_tensor_map(&b_map);
    int iteration = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      const Tile tile = tile_at<kBlockN>(t, p);
      if (tile.expert < 0) continue;  // a padding block: no loads, no math
      const int b_row = tile.expert * p.n + tile.n0;
      for (int kb = 0; kb < p.k_blocks; ++kb, ++iteration) {
        const int stage = iteration % L::kStages, round = iteration / L::kStages;
        if (round > 0) hopper::barrier_wait(&empty[stage], (round - 1) & 1);
        hopper::barrier_arrive_expect_bytes(&full[stage], L::kStageBytes);
        hopper::tma_load_2d(a_tiles + stage * kATileBytes, &a_map, kb * 128, tile.m0, &full[stage]);
        hopper::tma_load_2d(b_tiles + stage * L::kBTileBytes, &b_map, kb * 128, b_row, &full[stage]);
      }
    }
    return;
  }

  hopper::claim_registers<232>();
  const int consumer = warpgroup - 1;
  const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
  const int row_in_tile = consumer * 64 + warp * 16 + lane / 4;  // and row_in_tile + 8
  const int column_in_tile = 2 * (lane % 4);                      // + 8 i, and + 1
  if (p.bf16_output && thread == 0) hopper::prefetch_tensor_map(&c_map);
  std::uint8_t* my_staging = staging + consumer * L::kSlabs * kSlabBytes;
  float partial[kBlockN / 2], acc[kBlockN / 2], b_column[kBPerColumn ? kBlockN / 4 : 1];
  int stage = 0;
  unsigned phase = 0;
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    const Tile tile = tile_at<kBlockN>(t, p);
    if (tile.expert < 0) continue;
    // Rows past M (zeros from TMA) read row M - 1's scales; their outputs are never stored.
    const int row0 = min(tile.m0 + row_in_tile, p.m - 1), row1 = min(tile.m0 + row_in_tile + 8, p.m - 1);
    const float* a_row0 = p.a_scales + static_cast<long long>(row0 >> p.a.row_shift) * p.a.scale_cols;
    const float* a_row1 = p.a_scales + static_cast<long long>(row1 >> p.a.row_shift) * p.a.scale_cols;
    const float* b_scales = p.b_scales + tile.expert * p.b_scales_per_expert;
    const float* b_row0 = b_scales;
    const float* b_row1 = b_scales;
    unsigned second = 0;  // 8-column groups in the tile's second B block
    if constexpr (!kBPerColumn) {
      const int block0 = tile.n0 >> p.b.row_shift, last = (p.n - 1) >> p.b.row_shift;
      b_row0 = b_scales + static_cast<long long>(block0) * p.b.scale_cols;
      b_row1 = b_scales + static_cast<long long>(min(block0 + 1, last)) * p.b.scale_cols;
      if (p.b.row_shift < 30) {
        const int boundary = ((block0 + 1) << p.b.row_shift) - tile.n0;  // a multiple of 32
        if (boundary < kBlockN) second = ~0u << (boundary / 8);
      }
    }
#pragma unroll
    for (int i = 0; i < kBlockN / 2; ++i) acc[i] = 0.0f;

    for (int kb = 0; kb < p.k_blocks; ++kb) {
      // Scale loads first: their latency hides behind the wait and the stage's wgmmas.
      const float a0 = __ldg(a_row0 + (kb >> p.a.k_shift)), a1 = __ldg(a_row1 + (kb >> p.a.k_shift));
      const float b0 = kBPerColumn ? 1.0f : __ldg(b_row0 + (kb >> p.b.k_shift));
      const float b1 = kBPerColumn ? 1.0f : __ldg(b_row1 + (kb >> p.b.k_shift));
      if constexpr (kBPerColumn) {  // B per row (the same every stage: L1 hits) or per tile:1x128 (Wgrad's X^T)
#pragma unroll
        for (int j = 0; j < kBlockN / 4; ++j) {
          const int column = min(tile.n0 + 8 * (j / 2) + column_in_tile + j % 2, p.n - 1);
          b_column[j] = __ldg(b_scales + static_cast<long long>(column) * p.b.scale_cols + (kb >> p.b.k_shift));
        }
      }
      hopper::barrier_wait(&full[stage], phase);

      const std::uint64_t desc_a = hopper::swizzle128_descriptor(a_tiles + stage * kATileBytes + consumer * 64 * 128);
      const std::uint64_t desc_b = hopper::swizzle128_descriptor(b_tiles + stage * L::kBTileBytes);
      const int available = min(kInstructionsPerStage, p.k_instructions - kb * kInstructionsPerStage);
      const bool full_stage = available == kInstructionsPerStage;
      // With N_C = 128 * stages_per_promotion a partial spans stages: it starts at the first
      // stage of its interval and is promoted after the last one (or after the last stage of K).
      const bool interval_starts = kNc < 128 || kb % p.stages_per_promotion == 0;
      const bool interval_ends =
          kNc < 128 || kb % p.stages_per_promotion == p.stages_per_promotion - 1 || kb == p.k_blocks - 1;
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        const int first = g * kGroupSize;
        if (!full_stage && first >= available) break;  // past ceil(K / 32): no instruction, no promotion
        if (full_stage)
          issue_group<kFormat, kBlockN, kGroupSize, true>(partial, desc_a, desc_b, first, available, interval_starts);
        else
          issue_group<kFormat, kBlockN, kGroupSize, false>(partial, desc_a, desc_b, first, available, interval_starts);
        // The stage's last wgmma has completed: the slot goes back before the promotion's FMAs.
        const bool last = g == kGroups - 1 || (!full_stage && first + kGroupSize >= available);
        if (last && lane == 0) hopper::barrier_arrive(&empty[stage]);
        if (interval_ends) promote<kBlockN, kBPerColumn>(partial, acc, a0, a1, b0, b1, second, b_column);
      }
      if (++stage == L::kStages) {
        stage = 0;
        phase ^= 1u;
      }
    }
    if (p.bf16_output) store_bf16<kBlockN>(acc, my_staging, &c_map, tile.m0, tile.n0, p, consumer, thread);
    else store_fp32<kBlockN>(acc, tile.m0, tile.n0, p, row_in_tile, column_in_tile);
  }
  if (p.bf16_output && thread == 0) hopper::bulk_wait_all();  // the last tile's stores, before the CTA exits
}

}  // namespace

struct WgmmaTiledLaunch::Prepared {
  CUtensorMap a_map, b_map, c_map;
  TiledParams params;
  int grid = 0;
  void (*launch)(const Prepared&, cudaStream_t) = nullptr;
};

namespace {

template <Fp8Format kFormat, int kBlockN, int kNc, bool kBPerColumn>
void launch_instance(const WgmmaTiledLaunch::Prepared& p, cudaStream_t stream) {
  wgmma_tiled_kernel<kFormat, kBlockN, kNc, kBPerColumn>
      <<<p.grid, kThreads, Layout<kBlockN>::kSharedBytes, stream>>>(p.a_map, p.b_map, p.c_map, p.params);
  FP8LAB_CUDA_CHECK(cudaGetLastError());
}

template <Fp8Format kFormat, int kBlockN, int kNc, bool kBPerColumn>
void set_instance(WgmmaTiledLaunch::Prepared& p) {
  FP8LAB_CUDA_CHECK(cudaFuncSetAttribute(wgmma_tiled_kernel<kFormat, kBlockN, kNc, kBPerColumn>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(Layout<kBlockN>::kSharedBytes)));
  p.launch = launch_instance<kFormat, kBlockN, kNc, kBPerColumn>;
}

// kLongOnly: the width has an N_C = 128 instance only (192: two partial registers sets of 96
// and the short intervals' extra live values spill; wgmma_tiled_plan.hpp).
template <Fp8Format kFormat, int kBlockN, bool kBPerColumn, bool kLongOnly = false>
void choose_instance(WgmmaTiledLaunch::Prepared& p, int nc) {
  if (nc == 128) return set_instance<kFormat, kBlockN, 128, kBPerColumn>(p);
  if constexpr (!kLongOnly) {
    if (nc == 32) return set_instance<kFormat, kBlockN, 32, kBPerColumn>(p);
    if (nc == 64) return set_instance<kFormat, kBlockN, 64, kBPerColumn>(p);
  }
  throw std::invalid_argument("tiled WGMMA kernel: no instance of width " + std::to_string(kBlockN) +
                              " with promotion template " + std::to_string(nc));
}

// The instances built (wgmma_tiled_plan.hpp): E4M3 with B per block or tensor at every width
// (192 with N_C = 128 only); E5M2, and B per row of B, at width 128.
void choose(WgmmaTiledLaunch::Prepared& p, const WgmmaTiledPlan& plan, Fp8Format format) {
  const int nc = plan.launch.promotion_template;
  const bool per_column = plan.launch.b_scale_per_column;
  if (format == Fp8Format::e5m2 || per_column) {
    if (plan.block_n != 128) throw std::invalid_argument("tiled WGMMA kernel: no E5M2 or per-column instance of width " + std::to_string(plan.block_n));
    if (format == Fp8Format::e4m3) return choose_instance<Fp8Format::e4m3, 128, true>(p, nc);
    if (per_column) return choose_instance<Fp8Format::e5m2, 128, true>(p, nc);
    return choose_instance<Fp8Format::e5m2, 128, false>(p, nc);
  }
  switch (plan.block_n) {
    case 32: return choose_instance<Fp8Format::e4m3, 32, false>(p, nc);
    case 64: return choose_instance<Fp8Format::e4m3, 64, false>(p, nc);
    case 128: return choose_instance<Fp8Format::e4m3, 128, false>(p, nc);
    case 160: return choose_instance<Fp8Format::e4m3, 160, false>(p, nc);
    case 192: return choose_instance<Fp8Format::e4m3, 192, false, true>(p, nc);
    default: throw std::invalid_argument("tiled WGMMA kernel: no instance of width " + std::to_string(plan.block_n));
  }
}

}  // namespace

WgmmaTiledLaunch::WgmmaTiledLaunch(const WgmmaTiledProblem& problem, const WgmmaTiledPlan& plan) {
  if (problem.a == nullptr || problem.b == nullptr || problem.c == nullptr || problem.a_scales == nullptr ||
      problem.b_scales == nullptr)
    throw std::invalid_argument("tiled WGMMA GEMM: null device pointer");
  if (problem.k <= 0 || plan.launch.k_blocks <= 0)
    throw std::invalid_argument("tiled WGMMA GEMM: K must be positive (no tensor map describes an empty reduction)");
  if (problem.experts < 1 || problem.m > (1 << 30) || problem.experts * problem.n > (1 << 30))
    throw std::invalid_argument("tiled WGMMA GEMM: M and experts x N must stay below 2^30");
  if (problem.block_expert != nullptr && problem.m % kWgmmaBlockM != 0)
    throw std::invalid_argument("tiled WGMMA GEMM: the grouped form needs M a multiple of 128");
  if (reinterpret_cast<std::uintptr_t>(problem.a) % 16 != 0 || reinterpret_cast<std::uintptr_t>(problem.b) % 16 != 0 ||
      reinterpret_cast<std::uintptr_t>(problem.c) % 16 != 0)
    throw std::invalid_argument("tiled WGMMA GEMM: TMA needs 16-byte aligned operands and output");
  auto p = std::make_shared<Prepared>();
  p->a_map = encode_tensor_map_2d(problem.a, problem.m, problem.k, 1, 128, 128, CU_TENSOR_MAP_SWIZZLE_128B, "operand A");
  p->b_map = encode_tensor_map_2d(problem.b, problem.experts * problem.n, problem.k, 1, plan.block_n, 128,
                                  CU_TENSOR_MAP_SWIZZLE_128B, "operand B");
  p->c_map = CUtensorMap{};
  if (problem.output == OutputType::bf16)
    p->c_map = encode_tensor_map_2d(problem.c, problem.m, problem.n, 2, 64, 32, CU_TENSOR_MAP_SWIZZLE_64B, "output C");
  TiledParams& params = p->params;
  params = TiledParams{};
  params.m = static_cast<int>(problem.m);
  params.n = static_cast<int>(problem.n);
  params.m_blocks = static_cast<int>((problem.m + kWgmmaBlockM - 1) / kWgmmaBlockM);
  params.n_blocks = static_cast<int>((problem.n + plan.block_n - 1) / plan.block_n);
  params.group_m = plan.group_m;
  params.k_blocks = static_cast<int>(plan.launch.k_blocks);
  params.k_instructions = static_cast<int>(plan.launch.k_instructions);
  params.stages_per_promotion = static_cast<int>(plan.launch.stages_per_promotion);
  params.a_scales = problem.a_scales;
  params.b_scales = problem.b_scales;
  params.a = plan.a;
  params.b = plan.b;
  params.block_expert = problem.block_expert;
  params.b_scales_per_expert = problem.b_scales_per_expert;
  params.bf16_output = problem.output == OutputType::bf16;
  params.c = problem.c;
  int device = 0, sms = 0;
  FP8LAB_CUDA_CHECK(cudaGetDevice(&device));
  FP8LAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  p->grid = std::min(sms, params.m_blocks * params.n_blocks);
  choose(*p, plan, problem.format);
  prepared_ = std::move(p);
}

void WgmmaTiledLaunch::launch(cudaStream_t stream) const { prepared_->launch(*prepared_, stream); }

WgmmaTiledResources wgmma_tiled_resources(int block_n) {
  switch (block_n) {
    case 32: return {Layout<32>::kStages, Layout<32>::kSharedBytes};
    case 64: return {Layout<64>::kStages, Layout<64>::kSharedBytes};
    case 128: return {Layout<128>::kStages, Layout<128>::kSharedBytes};
    case 160: return {Layout<160>::kStages, Layout<160>::kSharedBytes};
    case 192: return {Layout<192>::kStages, Layout<192>::kSharedBytes};
    default: throw std::invalid_argument("tiled WGMMA kernel: no instance of width " + std::to_string(block_n));
  }
}

}  // namespace fp8lab::cuda
