#pragma once
// How the tensor-amax pass loads each float4 (quantize_fast_paths.cuh's tensor_amax_kernel):
// ld.global, ld.global.nc (the read-only path, __ldg) or ld.global.cs (evict-first streaming,
// __ldcs). The quantizer uses plain; the others exist for tensor_amax_variants' benchmark.
namespace fp8lab::cuda {

enum class AmaxLoads { plain, read_only, streaming };

}  // namespace fp8lab::cuda
