#pragma once
// TMA tensor maps (cuTensorMapEncodeTiled, reached through the runtime's driver entry point) for
// the WGMMA kernels: 2-D row-major tensors, boxes read into or written from shared memory.
#include <cuda.h>

#include <cstdint>

namespace fp8lab::cuda {

// rows x cols elements of `element_bytes` (1: FP8 codes as UINT8; 2: BF16), row stride cols
// elements (a multiple of 16 bytes); boxes of box_rows x box_cols with the given swizzle.
// Reads outside the tensor deliver zeros, writes outside it are dropped. Throws
// std::runtime_error naming `what` when the driver refuses.
CUtensorMap encode_tensor_map_2d(const void* base, std::int64_t rows, std::int64_t cols, int element_bytes, int box_rows,
                                 int box_cols, CUtensorMapSwizzle swizzle, const char* what);

}  // namespace fp8lab::cuda
