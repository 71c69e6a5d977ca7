#pragma once
// Fuzz targets: each takes one input and runs it through what fp8lab does with such a file.
// A target returns normally when the input is accepted or refused the way the CLI refuses
// bad input (the exceptions main() turns into exit 2); any other exception, a crash or a
// sanitizer report is a finding. The signature is libFuzzer's, so the same functions can be
// driven by libFuzzer (clang) as well as by the deterministic driver fuzz_main.cpp (g++).
#include <cstddef>
#include <cstdint>

namespace fp8lab::fuzz {

int npy_target(const std::uint8_t* data, std::size_t size);          // data/tensor_io/npy
int safetensors_target(const std::uint8_t* data, std::size_t size);  // data/tensor_io/safetensors
int spec_target(const std::uint8_t* data, std::size_t size);         // harness/study spec, kind, grid

}  // namespace fp8lab::fuzz
