#include "kernels/cuda/cublaslt_gemm.hpp"

#include <memory>
#include <stdexcept>
#include <type_traits>

#include "kernels/cuda/cublaslt_check.hpp"

namespace fp8lab::cuda {
namespace {

cudaDataType_t fp8_type(Fp8Format f) { return f == Fp8Format::e4m3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

template <class T>
void set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  FP8LAB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
}

void check_problem(const CublasLtProblem& p) {
  if (std::string why = cublaslt_precondition_failure(p.mode, p.m, p.n, p.k, p.output); !why.empty())
    throw std::invalid_argument(why);
  if (std::string why = cublaslt_format_failure(p.mode, p.a_format, p.b_format); !why.empty())
    throw std::invalid_argument(why);
  if (p.a == nullptr || p.b == nullptr || p.c == nullptr) throw std::invalid_argument("cuBLASLt GEMM: null operand");
  if (p.mode != CublasLtMode::bf16) {
    if (p.a_scales == nullptr || p.b_scales == nullptr) throw std::invalid_argument("cuBLASLt FP8 GEMM: null scales");
    for (const float* s : {p.a_scales, p.b_scales})
      if (reinterpret_cast<std::uintptr_t>(s) % 16 != 0)
        throw std::invalid_argument("cuBLASLt FP8 GEMM: scale pointers must be 16-byte aligned");
  }
}

}  // namespace

CublasLt::CublasLt(MemoryLedger& ledger, std::size_t workspace_bytes)
    : workspace_(ledger.allocate(workspace_bytes, MemoryCategory::workspace)) {
  FP8LAB_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

CublasLt::~CublasLt() { cublasLtDestroy(handle_); }

std::string cublaslt_version_text() {
  int major = 0, minor = 0, patch = 0;
  cublasLtGetProperty(MAJOR_VERSION, &major);
  cublasLtGetProperty(MINOR_VERSION, &minor);
  cublasLtGetProperty(PATCH_LEVEL, &patch);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch) + " (cublasLtGetVersion " +
         std::to_string(cublasLtGetVersion()) + ")";
}

CublasLtMatmul::CublasLtMatmul(const CublasLt& lt, const CublasLtProblem& problem) : lt_(lt), problem_(problem) {
  check_problem(problem_);
  try {
    prepare();
  } catch (...) {
    release();  // the destructor does not run for a constructor that throws
    throw;
  }
}

void CublasLtMatmul::prepare() {
  const CublasLtProblem& p = problem_;
  FP8LAB_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // C^T (N x M, column-major) = op(B_ours) * op(A_ours): TN.
  set_attribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set_attribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  cudaDataType_t lt_a_type = CUDA_R_16BF, lt_b_type = CUDA_R_16BF;
  if (p.mode != CublasLtMode::bf16) {
    lt_a_type = fp8_type(p.b_format);  // cuBLASLt's A is our B
    lt_b_type = fp8_type(p.a_format);
    if (p.mode == CublasLtMode::block_scaled) {
      const cublasLtMatmulMatrixScale_t weights =
          p.b_vec128 ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
      set_attribute(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, weights);
      set_attribute(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F);
    }
    set_attribute(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(p.b_scales));
    set_attribute(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(p.a_scales));
  }
  const cudaDataType_t c_type = p.output == OutputType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const auto m = static_cast<std::uint64_t>(p.m), n = static_cast<std::uint64_t>(p.n), k = static_cast<std::uint64_t>(p.k);
  FP8LAB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout_a_, lt_a_type, k, n, static_cast<std::int64_t>(k)));
  FP8LAB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout_b_, lt_b_type, k, m, static_cast<std::int64_t>(k)));
  FP8LAB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout_c_, c_type, n, m, static_cast<std::int64_t>(n)));

  cublasLtMatmulPreference_t raw_preference = nullptr;
  FP8LAB_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_preference));
  const std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, decltype(&cublasLtMatmulPreferenceDestroy)>
      preference(raw_preference, &cublasLtMatmulPreferenceDestroy);
  const std::size_t workspace = lt_.workspace_bytes();
  FP8LAB_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                           &workspace, sizeof(workspace)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt_.handle(), desc_, layout_a_, layout_b_, layout_c_,
                                                               layout_c_, preference.get(), 1, &result, &found);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0)
    throw std::runtime_error(std::string("cuBLASLt found no algorithm for the ") + cublaslt_mode_name(p.mode) +
                             " GEMM M=" + std::to_string(p.m) + " N=" + std::to_string(p.n) + " K=" +
                             std::to_string(p.k) + ": " + cublasLtGetStatusName(status));
  algo_ = result.algo;
}

CublasLtMatmul::~CublasLtMatmul() { release(); }

void CublasLtMatmul::release() noexcept {
  if (layout_c_) cublasLtMatrixLayoutDestroy(layout_c_);
  if (layout_b_) cublasLtMatrixLayoutDestroy(layout_b_);
  if (layout_a_) cublasLtMatrixLayoutDestroy(layout_a_);
  if (desc_) cublasLtMatmulDescDestroy(desc_);
  layout_a_ = layout_b_ = layout_c_ = nullptr;
  desc_ = nullptr;
}

void CublasLtMatmul::launch(cudaStream_t stream) const {
  const float alpha = 1.0f, beta = 0.0f;
  FP8LAB_CUBLAS_CHECK(cublasLtMatmul(lt_.handle(), desc_, &alpha, problem_.b, layout_a_, problem_.a, layout_b_, &beta,
                                     problem_.c, layout_c_, problem_.c, layout_c_, &algo_, lt_.workspace(),
                                     lt_.workspace_bytes(), stream));
}

}  // namespace fp8lab::cuda
