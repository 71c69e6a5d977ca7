#pragma once
// FP8LAB_CUDA_CHECK's twin for cuBLASLt status codes: expression, file:line and cuBLASLt's
// own status name and string, thrown (DESIGN.md section 6).
#include <cublasLt.h>

#include <stdexcept>
#include <string>

#define FP8LAB_CUBLAS_CHECK(expr)                                                                         \
  do {                                                                                                    \
    const cublasStatus_t fp8lab_status_ = (expr);                                                         \
    if (fp8lab_status_ != CUBLAS_STATUS_SUCCESS)                                                          \
      throw std::runtime_error(std::string(#expr) + " failed at " + __FILE__ + ":" +                     \
                               std::to_string(__LINE__) + ": " + cublasLtGetStatusName(fp8lab_status_) + \
                               " (" + cublasLtGetStatusString(fp8lab_status_) + ")");                     \
  } while (0)
