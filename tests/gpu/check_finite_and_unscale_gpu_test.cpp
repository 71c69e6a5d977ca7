// The CUDA check-finite-and-unscale against the FP64 reference: unscaled values bit for bit
// (random FP32 patterns, tensors of every size 0..67 plus chunk-crossing ones, aligned and
// misaligned starts, so both the float4 and the scalar path run), and an inf or NaN at the
// first, last and chunk-boundary positions of each tensor of the list found with one launch.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "kernels/cuda/check_finite_and_unscale_cuda.hpp"
#include "kernels/cuda/cuda_allocator.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/loss_scaling/found_inf_flag.hpp"
#include "reference/check_finite_and_unscale_ref.hpp"

using namespace fp8lab;

namespace {

std::uint32_t to_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Sizes and offsets (in floats) of the tensors, packed into one device allocation: an offset
// that is not a multiple of 4 makes that tensor's chunks take the scalar path.
struct Layout {
  std::vector<std::size_t> sizes, offsets;
  std::size_t total = 0;
};

Layout make_layout() {
  Layout l;
  std::vector<std::size_t> sizes;
  for (std::size_t n = 0; n <= 67; ++n) sizes.push_back(n);
  for (std::size_t n : {cuda::kChunkElements - 1, cuda::kChunkElements, cuda::kChunkElements + 1, 3 * cuda::kChunkElements + 5})
    sizes.push_back(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    l.total += i % 3 == 1 ? 1 : (4 - l.total % 4) % 4;  // misalign every third tensor
    l.offsets.push_back(l.total);
    l.sizes.push_back(sizes[i]);
    l.total += sizes[i];
  }
  return l;
}

struct Result {
  std::vector<float> values;
  bool found_inf;
};

Result run_on_gpu(const Layout& l, const std::vector<float>& host, float inverse_scale) {
  cuda::CudaAllocator allocator;
  MemoryLedger ledger(&allocator);
  DeviceBuffer data = ledger.allocate(l.total * sizeof(float), MemoryCategory::gradients);
  float* d = static_cast<float*>(data.data());
  FP8LAB_CUDA_CHECK(cudaMemcpy(d, host.data(), l.total * sizeof(float), cudaMemcpyHostToDevice));
  std::vector<std::span<float>> tensors;
  for (std::size_t i = 0; i < l.sizes.size(); ++i) tensors.emplace_back(d + l.offsets[i], l.sizes[i]);
  const cuda::DeviceTensorList list(ledger, tensors);
  FoundInfFlag flag(ledger);
  cuda::clear_found_inf(flag.data(), nullptr);
  cuda::check_finite_and_unscale(list, inverse_scale, flag.data(), nullptr);
  Result r{std::vector<float>(l.total), cuda::read_found_inf(flag.data(), nullptr)};
  FP8LAB_CUDA_CHECK(cudaMemcpy(r.values.data(), d, l.total * sizeof(float), cudaMemcpyDeviceToHost));
  return r;
}

}  // namespace

TEST_CASE("gpu: check_finite_and_unscale equals the FP64 reference bit for bit") {
  const Layout l = make_layout();
  std::mt19937 rng(5);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (double scale : {65536.0, 3.0, 0.1, 0x1p-20, 1.5e38}) {
    std::vector<float> host(l.total);
    for (float& x : host) {
      do x = std::bit_cast<float>(bits(rng));
      while (!std::isfinite(x));
    }
    std::vector<std::vector<double>> expected;
    for (std::size_t i = 0; i < l.sizes.size(); ++i)
      expected.emplace_back(host.begin() + static_cast<std::ptrdiff_t>(l.offsets[i]),
                            host.begin() + static_cast<std::ptrdiff_t>(l.offsets[i] + l.sizes[i]));
    CHECK_FALSE(ref::check_finite_and_unscale_ref(expected, scale));
    const Result r = run_on_gpu(l, host, static_cast<float>(1.0 / scale));
    CHECK_FALSE(r.found_inf);
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < l.sizes.size(); ++i)
      for (std::size_t j = 0; j < l.sizes[i]; ++j)
        mismatches += to_bits(r.values[l.offsets[i] + j]) != to_bits(static_cast<float>(expected[i][j]));
    INFO("scale " << scale << ": " << mismatches << " elements differ");
    CHECK(mismatches == 0);
  }
}

TEST_CASE("gpu: check_finite_and_unscale finds an inf or NaN in any tensor of the list") {
  const Layout l = make_layout();
  std::vector<float> clean(l.total, 1.5f);
  CHECK_FALSE(run_on_gpu(l, clean, 0.5f).found_inf);
  const float bad[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::quiet_NaN(), std::bit_cast<float>(0x7F800001u)};
  int k = 0;
  for (std::size_t i = 0; i < l.sizes.size(); ++i) {
    const std::size_t n = l.sizes[i];
    if (n == 0) continue;
    for (std::size_t position : {std::size_t{0}, n - 1, n / 2, std::min<std::size_t>(n - 1, cuda::kChunkElements)}) {
      std::vector<float> host = clean;
      host[l.offsets[i] + position] = bad[k++ % 4];
      INFO("tensor " << i << " (size " << n << "), position " << position);
      REQUIRE(run_on_gpu(l, host, 0.5f).found_inf);
    }
  }
}
