// fp8lab's WGMMA block-scaled FP8 GEMM (contract: wgmma_gemm.hpp). Per CTA and 128 x 128
// output tile (M x N):
//   producer warpgroup (threads 0-127): one thread issues, per 128-K stage, a TMA load of the
//     A tile (128 rows x 128 bytes) and the B tile (128 rows x 128 bytes) into a ring of
//     kStages shared-memory slots, guarded by a `full` and an `empty` mbarrier per slot;
//   consumer warpgroups 1 and 2: rows 0-63 and 64-127 of the tile; per stage up to four
//     wgmma m64n128k32 (one per 32 K), promoted every N_C as in DESIGN.md section 2.
// The grid is persistent: CTA b takes tiles b, b + gridDim.x, ...; consecutive tiles run down
// M first, so the CTAs resident at one time share B tiles in L2.
//
// Bit-exactness with the CPU `hopper` emulation rests on three choices: each partial starts
// from zero (scale-d = 0 on its first wgmma), no wgmma is issued past ceil(K / 32) (a zero
// instruction is not an identity in the model: it can truncate a tiny partial), and the
// promotion is exactly s = a * b then fmaf(p, s, acc) in FP32 (built with --fmad=false).
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/hopper_primitives.cuh"
#include "kernels/cuda/tensor_maps.hpp"
#include "kernels/cuda/wgmma_gemm.hpp"
#include "kernels/cuda/wgmma_instructions.cuh"

namespace fp8lab::cuda {
namespace {

constexpr int kStages = 6;
constexpr int kThreads = 384;  // producer + two consumer warpgroups
constexpr int kTileBytes = static_cast<int>(kWgmmaBlockM * kWgmmaBlockK);  // one A or B slot (FP8)
constexpr int kInstructionsPerStage = static_cast<int>(kWgmmaBlockK / 32);
constexpr int kConsumerWarps = 8;  // each consumer warp releases a slot once
constexpr std::size_t kSharedBytes = 2 * kStages * kTileBytes + 2 * kStages * sizeof(std::uint64_t) + 1024;

struct KernelParams {
  int m, n;
  int m_blocks, n_blocks;
  int k_blocks, k_instructions, stages_per_promotion;
  DeviceScales a_scales, b_scales;
  bool bf16_output;
  void* c;
};

template <Fp8Format kFormat>
__device__ __forceinline__ void mma(float (&d)[64], std::uint64_t desc_a, std::uint64_t desc_b, int scale_d) {
  if constexpr (kFormat == Fp8Format::e4m3) wgmma::mma_e4m3(d, desc_a, desc_b, scale_d);
  else wgmma::mma_e5m2(d, desc_a, desc_b, scale_d);
}

// Tile t's first output row and column. Producer and consumers walk the same tile sequence;
// this is the one place that says how a tile index maps onto C (down M first).
struct TileOrigin {
  int m0, n0;
};
__device__ __forceinline__ TileOrigin tile_origin(int tile, const KernelParams& p) {
  return {(tile % p.m_blocks) * static_cast<int>(kWgmmaBlockM), (tile / p.m_blocks) * static_cast<int>(kWgmmaBlockN)};
}

__device__ __forceinline__ float scale_at(const DeviceScales& s, std::int64_t row, std::int64_t k) {
  return __ldg(&s.scales[(row / s.tile_rows) * s.scale_cols + k / s.tile_cols]);
}

// One promotion group: `count` wgmma instructions from instruction `first` of this stage,
// the first of them starting a new partial when `starts`; then waits for them. kFull: the
// count is the template's (no tail test on the path every full stage takes).
template <Fp8Format kFormat, int kCount, bool kFull>
__device__ __forceinline__ void issue_group(float (&partial)[64], std::uint64_t desc_a, std::uint64_t desc_b,
                                            int first, int available, bool starts) {
  hopper::wgmma_fence();
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    const int instruction = first + i;
    // 32 FP8 elements of K are 32 bytes: 2 in the descriptor's 16-byte address units.
    if (kFull || instruction < available)
      mma<kFormat>(partial, desc_a + 2 * instruction, desc_b + 2 * instruction, (i == 0 && starts) ? 0 : 1);
  }
  hopper::wgmma_commit();
  hopper::wgmma_wait_all();
  hopper::fence_registers(partial);
}

template <bool kBPerColumn>
__device__ __forceinline__ void promote(const float (&partial)[64], float (&acc)[64], float a_scale0, float a_scale1,
                                        float b_scale, const float (&b_column_scales)[32]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const float a_scale = (i % 4) < 2 ? a_scale0 : a_scale1;
    const float b = kBPerColumn ? b_column_scales[2 * (i / 4) + i % 2] : b_scale;
    const float s = a_scale * b;  // fl32(s_a * s_b): --fmad=false keeps it a separate multiply
    acc[i] = __fmaf_rn(partial[i], s, acc[i]);
  }
}

template <Fp8Format kFormat, int kNc, bool kBPerColumn>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_gemm_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                      const KernelParams p) {
  static_assert(kNc == 32 || kNc == 64 || kNc == 128);
  constexpr int kGroupSize = kNc / 32;  // instructions per partial within a stage
  constexpr int kGroups = kInstructionsPerStage / kGroupSize;

  extern __shared__ std::uint8_t raw_shared[];
  // 128-byte swizzled TMA tiles and the wgmma descriptor's base offset 0 need 1024-byte alignment.
  const std::uint32_t misalignment = hopper::shared_address(raw_shared) % 1024;
  std::uint8_t* shared = raw_shared + (misalignment ? 1024 - misalignment : 0);
  std::uint8_t* a_tiles = shared;
  std::uint8_t* b_tiles = shared + kStages * kTileBytes;
  auto* full = reinterpret_cast<std::uint64_t*>(shared + 2 * kStages * kTileBytes);
  std::uint64_t* empty = full + kStages;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
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
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      const auto [m0, n0] = tile_origin(tile, p);
      for (int kb = 0; kb < p.k_blocks; ++kb, ++iteration) {
        const int stage = iteration % kStages, round = iteration / kStages;
        if (round > 0) hopper::barrier_wait(&empty[stage], (round - 1) & 1);
        hopper::barrier_arrive_expect_bytes(&full[stage], 2 * kTileBytes);
        const int k0 = kb * static_cast<int>(kWgmmaBlockK);
        hopper::tma_load_2d(a_tiles + stage * kTileBytes, &a_map, k0, m0, &full[stage]);
        hopper::tma_load_2d(b_tiles + stage * kTileBytes, &b_map, k0, n0, &full[stage]);
      }
    }
    return;
  }

  hopper::claim_registers<232>();
  const int consumer = warpgroup - 1;
  const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
  const int row_in_tile = consumer * 64 + warp * 16 + lane / 4;  // and row_in_tile + 8
  const int column_in_tile = 2 * (lane % 4);                      // + 8 i, and + 1
  float partial[64], acc[64], b_column_scales[32];
  int iteration = 0;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const auto [m0, n0] = tile_origin(tile, p);
    // Rows past M (zeros from TMA) read row M - 1's scales; their outputs are never stored.
    const int row0 = min(m0 + row_in_tile, p.m - 1), row1 = min(m0 + row_in_tile + 8, p.m - 1);
    if constexpr (kBPerColumn) {  // per-row B: constant along K, read once per tile
#pragma unroll
      for (int j = 0; j < 32; ++j)
        b_column_scales[j] = scale_at(p.b_scales, min(n0 + 8 * (j / 2) + column_in_tile + j % 2, p.n - 1), 0);
    }
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;

    for (int kb = 0; kb < p.k_blocks; ++kb, ++iteration) {
      const int stage = iteration % kStages, round = iteration / kStages;
      const std::int64_t k0 = kb * kWgmmaBlockK;
      // Scale loads first: their latency hides behind the wait and the first wgmma group.
      const float a_scale0 = scale_at(p.a_scales, row0, k0), a_scale1 = scale_at(p.a_scales, row1, k0);
      const float b_scale = kBPerColumn ? 1.0f : scale_at(p.b_scales, n0, k0);
      hopper::barrier_wait(&full[stage], round & 1);

      const std::uint64_t desc_a = hopper::swizzle128_descriptor(a_tiles + stage * kTileBytes + consumer * 64 * 128);
      const std::uint64_t desc_b = hopper::swizzle128_descriptor(b_tiles + stage * kTileBytes);
      const int available = min(kInstructionsPerStage, p.k_instructions - kb * kInstructionsPerStage);
      // With N_C = 128 * stages_per_promotion a partial spans stages: it starts at the first
      // stage of its interval and is promoted after the last one (or after the last stage of K).
      const bool interval_starts = kNc < 128 || kb % p.stages_per_promotion == 0;
      const bool interval_ends =
          kNc < 128 || kb % p.stages_per_promotion == p.stages_per_promotion - 1 || kb == p.k_blocks - 1;
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        const int first = g * kGroupSize;
        if (available == kInstructionsPerStage) {
          issue_group<kFormat, kGroupSize, true>(partial, desc_a, desc_b, first, available, interval_starts);
        } else {
          if (first >= available) break;  // past ceil(K / 32): no instruction, no promotion
          issue_group<kFormat, kGroupSize, false>(partial, desc_a, desc_b, first, available, interval_starts);
        }
        if (interval_ends) promote<kBPerColumn>(partial, acc, a_scale0, a_scale1, b_scale, b_column_scales);
      }
      // Every wgmma reading this slot has completed (wait_group 0): hand it back.
      if (lane == 0) hopper::barrier_arrive(&empty[stage]);
    }

    // Epilogue: pairs of adjacent columns straight from registers (N % 8 == 0: a pair is
    // either inside N or outside it).
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int column = n0 + 8 * i + column_in_tile;
      if (column >= p.n) continue;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = m0 + row_in_tile + 8 * half;
        if (row >= p.m) continue;
        const float x = acc[4 * i + 2 * half], y = acc[4 * i + 2 * half + 1];
        const std::size_t offset = static_cast<std::size_t>(row) * p.n + column;
        if (p.bf16_output) *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(p.c) + offset) = __floats2bfloat162_rn(x, y);
        else *reinterpret_cast<float2*>(static_cast<float*>(p.c) + offset) = make_float2(x, y);
      }
    }
  }
}

// rows x k FP8 codes, K-major; boxes of 128 rows x 128 bytes with 128-byte swizzle; reads
// outside the tensor (M, N and K tails) deliver zeros.
CUtensorMap operand_map(const std::uint8_t* codes, std::int64_t rows, std::int64_t k, const char* name) {
  return encode_tensor_map_2d(codes, rows, k, 1, 128, static_cast<int>(kWgmmaBlockK), CU_TENSOR_MAP_SWIZZLE_128B,
                              (std::string("operand ") + name).c_str());
}

}  // namespace

struct WgmmaGemmLaunch::Prepared {
  CUtensorMap a_map, b_map;
  KernelParams params;
  int grid = 0;
  void (*launch)(const Prepared&, cudaStream_t) = nullptr;  // the kernel instance for this plan
};

namespace {

template <Fp8Format kFormat, int kNc, bool kBPerColumn>
void launch_instance(const WgmmaGemmLaunch::Prepared& p, cudaStream_t stream) {
  wgmma_gemm_kernel<kFormat, kNc, kBPerColumn><<<p.grid, kThreads, kSharedBytes, stream>>>(p.a_map, p.b_map, p.params);
  FP8LAB_CUDA_CHECK(cudaGetLastError());
}

// Picks the kernel instance and raises its shared-memory limit (once per preparation, never
// per launch).
template <Fp8Format kFormat, int kNc, bool kBPerColumn>
void choose_instance(WgmmaGemmLaunch::Prepared& p) {
  FP8LAB_CUDA_CHECK(cudaFuncSetAttribute(wgmma_gemm_kernel<kFormat, kNc, kBPerColumn>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSharedBytes)));
  p.launch = launch_instance<kFormat, kNc, kBPerColumn>;
}

template <Fp8Format kFormat, int kNc>
void choose_for_b_scales(WgmmaGemmLaunch::Prepared& p, bool per_column) {
  if (per_column) choose_instance<kFormat, kNc, true>(p);
  else choose_instance<kFormat, kNc, false>(p);
}

template <Fp8Format kFormat>
void choose(WgmmaGemmLaunch::Prepared& p, const WgmmaLaunchPlan& plan) {
  const bool per_column = plan.b_scale_per_column;
  switch (plan.promotion_template) {
    case 32: return choose_for_b_scales<kFormat, 32>(p, per_column);
    case 64: return choose_for_b_scales<kFormat, 64>(p, per_column);
    case 128: return choose_for_b_scales<kFormat, 128>(p, per_column);
    default: throw std::invalid_argument("WGMMA kernel: promotion template " + std::to_string(plan.promotion_template));
  }
}

}  // namespace

WgmmaGemmLaunch::WgmmaGemmLaunch(const WgmmaGemmProblem& problem, const WgmmaLaunchPlan& plan) {
  if (problem.a == nullptr || problem.b == nullptr || problem.c == nullptr || problem.a_scales.scales == nullptr ||
      problem.b_scales.scales == nullptr)
    throw std::invalid_argument("WGMMA GEMM: null device pointer");
  if (problem.m > (1 << 30) || problem.n > (1 << 30)) throw std::invalid_argument("WGMMA GEMM: M and N must stay below 2^30");
  if (problem.k <= 0 || plan.k_blocks <= 0)  // plan_wgmma_gemm refuses K = 0 first; this guards direct callers
    throw std::invalid_argument("WGMMA GEMM: K must be positive (no tensor map describes an empty reduction)");
  if (reinterpret_cast<std::uintptr_t>(problem.a) % 16 != 0 || reinterpret_cast<std::uintptr_t>(problem.b) % 16 != 0)
    throw std::invalid_argument("WGMMA GEMM: TMA needs 16-byte aligned operands");
  auto p = std::make_shared<Prepared>();
  p->a_map = operand_map(problem.a, problem.m, problem.k, "A");
  p->b_map = operand_map(problem.b, problem.n, problem.k, "B");
  KernelParams& params = p->params;
  params = KernelParams{};
  params.m = static_cast<int>(problem.m);
  params.n = static_cast<int>(problem.n);
  params.m_blocks = static_cast<int>((problem.m + kWgmmaBlockM - 1) / kWgmmaBlockM);
  params.n_blocks = static_cast<int>((problem.n + kWgmmaBlockN - 1) / kWgmmaBlockN);
  params.k_blocks = static_cast<int>(plan.k_blocks);
  params.k_instructions = static_cast<int>(plan.k_instructions);
  params.stages_per_promotion = static_cast<int>(plan.stages_per_promotion);
  params.a_scales = problem.a_scales;
  params.b_scales = problem.b_scales;
  params.bf16_output = problem.output == OutputType::bf16;
  params.c = problem.c;
  int device = 0, sms = 0;
  FP8LAB_CUDA_CHECK(cudaGetDevice(&device));
  FP8LAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  p->grid = std::min(sms, params.m_blocks * params.n_blocks);
  if (problem.format == Fp8Format::e4m3) choose<Fp8Format::e4m3>(*p, plan);
  else choose<Fp8Format::e5m2>(*p, plan);
  prepared_ = std::move(p);
}

void WgmmaGemmLaunch::launch(cudaStream_t stream) const { prepared_->launch(*prepared_, stream); }

void wgmma_gemm_nt(const WgmmaGemmProblem& problem, const WgmmaLaunchPlan& plan, cudaStream_t stream) {
  WgmmaGemmLaunch(problem, plan).launch(stream);
}

WgmmaKernelResources wgmma_kernel_resources() { return {kStages, kSharedBytes, kThreads}; }

}  // namespace fp8lab::cuda
