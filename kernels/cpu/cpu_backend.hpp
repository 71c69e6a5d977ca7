#pragma once
// The CPU backend: the bit-accurate emulation (AVX2 + OpenMP where available).
#include <memory>

#include "kernels/backend.hpp"

namespace fp8lab::cpu {

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace fp8lab::cpu
