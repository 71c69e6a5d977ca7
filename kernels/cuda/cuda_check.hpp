#pragma once
// One macro for every CUDA runtime call: on failure it throws with the expression,
// file:line and CUDA's error string (host preconditions throw; nothing calls exit()).
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#define FP8LAB_CUDA_CHECK(expr)                                                                        \
  do {                                                                                                 \
    const cudaError_t fp8lab_status_ = (expr);                                                         \
    if (fp8lab_status_ != cudaSuccess)                                                                 \
      throw std::runtime_error(std::string(#expr) + " failed at " + __FILE__ + ":" +                  \
                               std::to_string(__LINE__) + ": " + cudaGetErrorString(fp8lab_status_)); \
  } while (0)
