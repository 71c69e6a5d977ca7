// The engine's FP32/FP64 GEMMs (kernels/train/linear_gemm.hpp) promise every output element sums
// its K products in order of K from where it starts (0, or dW when accumulating), one rounding
// per product and per addition: the register-blocked kernel and its edges must give the plain
// loop's bits, on any block remainder and any thread count. The plain loops are the oracle here;
// for the bf16 and fp16 kinds they multiply the operands rounded to the format (each product and
// sum still one FP32 rounding), which checks the rounded copies, Wgrad's dY read transposed among them.
#include <catch2/catch.hpp>
#include <cstring>
#include <omp.h>
#include <random>

#include "kernels/formats/float_formats.hpp"
#include "kernels/memory_ledger.hpp"
#include "tests/support/random_train_tensor.hpp"
#include "kernels/train/linear_gemm.hpp"

using namespace fp8lab;
using namespace fp8lab::train;

namespace {

template <class Real>
bool same_bits(const Tensor<Real>& a, const std::vector<Real>& b) {
  return static_cast<std::size_t>(a.size()) == b.size() && std::memcmp(a.data(), b.data(), b.size() * sizeof(Real)) == 0;
}

// An operand value as the GEMM kind multiplies it: itself, or rounded to BF16 / FP16.
template <class Real>
Real as_multiplied(Real v, GemmPrecision::Kind kind) {
  const auto f = static_cast<float>(v);
  if (kind == GemmPrecision::Kind::bf16) return static_cast<Real>(decode<BF16>(encode<BF16>(f, Saturation::nosat)));
  if (kind == GemmPrecision::Kind::fp16) return static_cast<Real>(decode<FP16>(encode<FP16>(f, Saturation::nosat)));
  return v;
}

// Y = X W^T, dX = dY W, dW (+)= dY^T X, each element's sum in order of the shared index; kind:
// the step's own (fp32 / fp64) unless bf16 or fp16 is given.
template <class Real>
void check_gemms(std::int64_t rows, std::int64_t in, std::int64_t out,
                 GemmPrecision::Kind kind = sizeof(Real) == 4 ? GemmPrecision::Kind::fp32 : GemmPrecision::Kind::fp64) {
  HostAllocator host;
  MemoryLedger ledger(&host);
  std::mt19937_64 rng(static_cast<std::uint64_t>(rows * 10007 + in * 101 + out));
  const GemmPrecision precision = GemmPrecision::plain(kind);
  const auto m = [kind](Real v) { return as_multiplied(v, kind); };
  const GemmCall call{ledger, precision, nullptr, nullptr, static_cast<int>(sizeof(Real)), nullptr, nullptr, nullptr};
  const Tensor<Real> x = test::random_train_tensor<Real>(ledger, rows, in, rng), w = test::random_train_tensor<Real>(ledger, out, in, rng),
                     dy = test::random_train_tensor<Real>(ledger, rows, out, rng);
  Tensor<Real> y = make_tensor<Real>(ledger, rows, out, MemoryCategory::workspace);
  Tensor<Real> dx = make_tensor<Real>(ledger, rows, in, MemoryCategory::workspace);
  Tensor<Real> dw = test::random_train_tensor<Real>(ledger, out, in, rng);  // accumulated into
  std::vector<Real> y_o(static_cast<std::size_t>(rows * out)), dx_o(static_cast<std::size_t>(rows * in)),
      dw_o(dw.data(), dw.data() + dw.size());
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < out; ++j) {
      Real s = 0;
      for (std::int64_t p = 0; p < in; ++p) s += m(x(i, p)) * m(w(j, p));
      y_o[static_cast<std::size_t>(i * out + j)] = s;
    }
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < in; ++j) {
      Real s = 0;
      for (std::int64_t p = 0; p < out; ++p) s += m(dy(i, p)) * m(w(p, j));
      dx_o[static_cast<std::size_t>(i * in + j)] = s;
    }
  for (std::int64_t i = 0; i < out; ++i)
    for (std::int64_t j = 0; j < in; ++j) {
      Real s = dw_o[static_cast<std::size_t>(i * in + j)];
      for (std::int64_t p = 0; p < rows; ++p) s += m(dy(p, i)) * m(x(p, j));
      dw_o[static_cast<std::size_t>(i * in + j)] = s;
    }
  fprop(call, x, w, y);
  dgrad(call, dy, w, dx);
  wgrad(call, dy, x, dw, /*accumulate=*/true, 0, rows);
  INFO("rows " << rows << ", in " << in << ", out " << out << ", " << sizeof(Real) * 8 << "-bit, kind "
                 << static_cast<int>(kind));
  CHECK(same_bits(y, y_o));
  CHECK(same_bits(dx, dx_o));
  CHECK(same_bits(dw, dw_o));
}

}  // namespace

TEST_CASE("linear GEMMs: every block remainder gives the plain loop's bits, float and double") {
  for (const std::int64_t rows : {1, 3, 4, 5, 9})
    for (const std::int64_t in : {1, 15, 16, 17, 33})
      for (const std::int64_t out : {1, 8, 16, 20}) {
        check_gemms<float>(rows, in, out);
        check_gemms<double>(rows, in, out);
      }
}

TEST_CASE("linear GEMMs: bf16 and fp16 multiply rounded operands in the plain loop's order, Wgrad's dY read transposed") {
  for (const GemmPrecision::Kind kind : {GemmPrecision::Kind::bf16, GemmPrecision::Kind::fp16})
    for (const std::int64_t rows : {1, 5, 9, 300})  // 300 rows: Wgrad's K past one 256-deep panel
      for (const std::int64_t in : {1, 17, 33})
        for (const std::int64_t out : {1, 16, 20}) check_gemms<float>(rows, in, out, kind);
}

TEST_CASE("linear GEMMs: a GEMM large enough for threads gives the plain loop's bits on 1 and 2 threads") {
  // 256 x 272 x 256 multiply-adds > 2^24: the kernel's row blocks run on an OpenMP team.
  const int saved = omp_get_max_threads();
  for (const int threads : {1, 2}) {
    omp_set_num_threads(threads);
    check_gemms<float>(256, 272, 256);
  }
  omp_set_num_threads(saved);
}
