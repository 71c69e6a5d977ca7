#pragma once
// CPU backend FP8 GEMM: C = A * B^T on quantized operands, computing bit for bit what the
// accumulation model + promotion of kernels/gemm_config.hpp define (the Hopper tensor-core
// model by default), multithreaded (OpenMP) and vectorized (AVX2 micro-tiles chosen at run time, see cpu_isa.hpp).
//
// Layout: A is M x K (tile:1xT, row or tensor scales), B is N x K (block:BxB, row or tensor
// scales), both K-major; C is M x N row-major, or |rows| x |cols| for a sampled subset.
// K is zero-padded to a multiple of the instruction depth.
// Results do not depend on the thread count: every output element is one fixed sequence.
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/gemm_config.hpp"
#include "kernels/quantization.hpp"

namespace fp8lab::cpu {

struct GemmOptions {
  int threads = 0;             // 0: all cores (OpenMP default)
  bool force_generic = false;  // tests: the scalar micro-tiles whatever active_cpu_isa() says
  // Sampling: compute only these output rows / columns (empty: all). Sorted or not, any order.
  std::vector<std::int64_t> rows, cols;
  // tests: the 16-lane micro-tile with a conversion per term that AVX-512 CPUs run for
  // truncating models outside the floor micro-tile's range, its AVX2 build (on any CPU with AVX2)
  bool force_wide_tiles = false;
  // tests: the 16-lane micro-tiles on the floor layout (gemm_fp8_nt_floor_wide.cpp) that
  // AVX-512 CPUs run for the truncating models within the floor range and for the fp32 model,
  // their AVX2 builds (on any CPU with AVX2: an AVX-512 CPU runs its own builds without the flag)
  bool force_wide_floor_tiles = false;
  // tests: the AVX2 micro-tiles with a conversion per term, for models the floor micro-tile
  // (gemm_fp8_nt_floor.cpp) would otherwise run
  bool force_convert_tiles = false;
  // tests: the floor micro-tile in FP64 lanes (gemm_fp8_nt_floor_fp64.cpp), which runs by itself
  // only for truncating models past the FP32 micro-tiles' ranges, for every model it holds
  bool force_fp64_floor_tiles = false;
};

std::vector<float> gemm_nt(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                           const GemmOptions& options = {});

// The same into caller-owned storage of (rows taken) x (columns taken) floats, row-major; every
// element is written (the training step's GEMMs write their output tensors in place: a returned
// vector cost a serial zero fill and a serial copy per GEMM).
void gemm_nt_into(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config, std::span<float> out,
                  const GemmOptions& options = {});

}  // namespace fp8lab::cpu
