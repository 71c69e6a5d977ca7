// Catch2 main for GPU tests: with no CUDA device it reports the skip and returns 77, which
// ctest records as skipped (SKIP_RETURN_CODE), so a CPU-only machine passes cleanly. A CUDA
// setup that is present but broken (driver/runtime mismatch) prints CUDA's error and fails.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>
#include <exception>

#include "kernels/cuda/float_formats_device.hpp"

int main(int argc, char** argv) {
  int devices = 0;
  try {
    devices = fp8lab::cuda::device_count();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "GPU tests cannot run: %s\n", e.what());
    return 1;
  }
  if (devices == 0) {
    std::printf("no CUDA device: GPU tests skipped\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
