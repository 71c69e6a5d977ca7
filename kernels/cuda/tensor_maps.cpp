#include "kernels/cuda/tensor_maps.hpp"

#include <cudaTypedefs.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.hpp"

namespace fp8lab::cuda {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    FP8LAB_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || function == nullptr)
      throw std::runtime_error("the CUDA driver has no cuTensorMapEncodeTiled (TMA needs driver >= 12.0)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
  }();
  return encode;
}

}  // namespace

CUtensorMap encode_tensor_map_2d(const void* base, std::int64_t rows, std::int64_t cols, int element_bytes, int box_rows,
                                 int box_cols, CUtensorMapSwizzle swizzle, const char* what) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols * element_bytes)};  // bytes between rows
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUtensorMapDataType type = element_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  const CUresult r = tensor_map_encoder()(&map, type, 2, const_cast<void*>(base), dims, strides, box, element_strides,
                                          CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error(std::string("cuTensorMapEncodeTiled failed for ") + what + " (" + std::to_string(rows) +
                             " x " + std::to_string(cols) + ", box " + std::to_string(box_rows) + " x " +
                             std::to_string(box_cols) + "): CUresult " + std::to_string(r));
  return map;
}

}  // namespace fp8lab::cuda
