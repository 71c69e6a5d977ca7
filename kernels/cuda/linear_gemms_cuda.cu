// Contract: linear_gemms_cuda.hpp. The operand preparation step by step as the CPU engine's
// (kernels/train/linear_gemm.cpp): the same quantizer configurations, the same FP32 transposes
// (a transpose moves values, it rounds nothing), the same re-quantization, then the tiled WGMMA
// kernel with the precision's GemmConfig; Wgrad's accumulation is one FP32 add per element.
#include "kernels/cuda/linear_gemms_cuda.hpp"

#include <stdexcept>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/gemm_tiled_cuda.hpp"
#include "kernels/cuda/quantize_cuda.hpp"
#include "kernels/cuda/wgmma_gemm_tiled.hpp"
#include "kernels/wgmma_tiled_plan.hpp"

namespace fp8lab::cuda {
namespace {

using Kind = train::GemmPrecision::Kind;
using train::GemmKind;
using train::GemmPrecision;

__global__ void add_into_kernel(float* c, const float* g, std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) c[i] += g[i];
}

std::string device_text(int* major = nullptr) {
  int device = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&p, device) != cudaSuccess) return "no CUDA device";
  if (major) *major = p.major;
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ")";
}

// A tensor's geometry alone (the plan reads shapes, granularity and format, never codes).
QuantizedTensor shape_of(std::int64_t rows, std::int64_t cols, const QuantizeConfig& config) {
  QuantizedTensor q = make_quantized_tensor(0, cols, config);
  q.rows = rows;
  q.tile_rows = config.granularity.tile_rows(rows);
  q.scale_rows = (rows + q.tile_rows - 1) / q.tile_rows;
  return q;
}

QuantizeConfig operand_config(const GemmPrecision& p, char which) {
  return {which == 'a' ? p.a_format : p.b_format, which == 'a' ? p.a_granularity : p.b_granularity, p.scale_rule};
}

// The operands' quantizer configurations and (m, n, k) of a GEMM kind, as the engine forms them.
struct GemmForm {
  std::int64_t m, n, k;
  QuantizeConfig a, b;
};
GemmForm form_of(const LinearGemmCall& call, GemmKind kind, std::int64_t rows, std::int64_t out, std::int64_t in) {
  const GemmPrecision& p = call.precision;
  GemmForm f{0, 0, 0, operand_config(p, 'a'), operand_config(p, 'b')};
  switch (kind) {
    case GemmKind::fprop: f.m = rows, f.n = out, f.k = in; break;
    case GemmKind::dgrad: f.m = rows, f.n = in, f.k = out; break;
    case GemmKind::wgrad:
      f.m = out, f.n = in, f.k = rows;
      if (p.requantize_transposed && call.requantize_source_a && call.requantize_source_b) {
        f.a = operand_config(*call.requantize_source_a, 'a');  // dY's Dgrad quantization, re-quantized
        f.b = operand_config(*call.requantize_source_b, 'a');  // X's Fprop quantization, re-quantized
      }
      break;
  }
  return f;
}

std::string failure_reason(const LinearGemmCall& call, GemmKind kind, std::int64_t rows, std::int64_t out, std::int64_t in) {
  const GemmPrecision& p = call.precision;
  if (p.kind != Kind::fp8)
    return "only fp8 GEMMs run on the GPU (the " + std::string(train::gemm_precision_kind_name(p.kind)) +
           " kind sums in order of K on the CPU)";
  if (p.rht) return "the random Hadamard transform (rht) runs on the CPU only";
  if (p.a_rounding != RoundingMode::nearest || p.b_rounding != RoundingMode::nearest)
    return "stochastic rounding's seed hashes the operand's FP32 bits on the host; the GPU path rounds to nearest only";
  if (p.delayed_scaling) return "delayed scaling keeps its amax history on the host; the GPU path takes scale rules only";
  if (p.gemm.output != OutputType::fp32) return "the engine's GEMMs write FP32; this precision asks for " + std::string(output_type_name(p.gemm.output));
  if (kind == GemmKind::wgrad && p.requantize_transposed && (!call.requantize_source_a || !call.requantize_source_b))
    return "requantize_transposed needs the Dgrad and Fprop precisions (requantize_source_a / _b)";
  const GemmForm f = form_of(call, kind, rows, out, in);
  if (!f.a.format.is_fp8() || !f.b.format.is_fp8()) return "the WGMMA kernel takes FP8 (E4M3 / E5M2) operands only";
  try {  // what the kernel takes does not depend on the SM count (only the width it picks)
    plan_wgmma_tiled_gemm(shape_of(f.m, f.k, f.a), shape_of(f.n, f.k, f.b), p.gemm, 132);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  int major = 0;
  device_text(&major);
  if (major != 9) return "the WGMMA kernel needs an sm_90 (Hopper) GPU";
  return {};
}

void refuse_unless_runs(const LinearGemmCall& call, GemmKind kind, std::int64_t rows, std::int64_t out, std::int64_t in) {
  if (std::string why = linear_gemm_failure(call, kind, rows, out, in); !why.empty()) throw std::invalid_argument(why);
}

// One operand quantized on the device into the ledger's workspace.
struct DeviceOperand {
  QuantizedTensor shape;
  DeviceBuffer codes, scales, amax;
};
DeviceOperand quantize_operand(const LinearGemmCall& call, const float* x, std::int64_t rows, std::int64_t cols,
                               const QuantizeConfig& config) {
  DeviceOperand d{shape_of(rows, cols, config), {}, {}, {}};
  const auto scales = static_cast<std::size_t>(d.shape.scale_rows * d.shape.scale_cols);
  d.codes = call.ledger.allocate(static_cast<std::size_t>(rows * cols), MemoryCategory::gemm_workspace);
  d.scales = call.ledger.allocate(scales * sizeof(float), MemoryCategory::gemm_workspace);
  d.amax = call.ledger.allocate((scales + 1) * sizeof(unsigned), MemoryCategory::gemm_workspace);
  quantize_device(x, rows, cols, config, static_cast<std::uint8_t*>(d.codes.data()), static_cast<float*>(d.scales.data()),
                  static_cast<unsigned*>(d.amax.data()), call.stream);
  return d;
}

// x (rows x cols) quantized with `config`, then re-quantized transposed (cols x rows).
DeviceOperand requantized_operand(const LinearGemmCall& call, const float* x, std::int64_t rows, std::int64_t cols,
                                  const QuantizeConfig& config) {
  const DeviceOperand first = quantize_operand(call, x, rows, cols, config);
  DeviceOperand d{shape_of(cols, rows, config), {}, {}, {}};
  const auto scales = static_cast<std::size_t>(d.shape.scale_rows * d.shape.scale_cols);
  d.codes = call.ledger.allocate(static_cast<std::size_t>(rows * cols), MemoryCategory::gemm_workspace);
  d.scales = call.ledger.allocate(scales * sizeof(float), MemoryCategory::gemm_workspace);
  d.amax = call.ledger.allocate((scales + 1) * sizeof(unsigned), MemoryCategory::gemm_workspace);
  DeviceBuffer work = call.ledger.allocate(2 * static_cast<std::size_t>(rows * cols) * sizeof(float), MemoryCategory::gemm_workspace);
  requantize_transposed_device(static_cast<const std::uint8_t*>(first.codes.data()), static_cast<const float*>(first.scales.data()),
                               rows, cols, config, static_cast<float*>(work.data()), static_cast<std::uint8_t*>(d.codes.data()),
                               static_cast<float*>(d.scales.data()), static_cast<unsigned*>(d.amax.data()), call.stream);
  FP8LAB_CUDA_CHECK(cudaStreamSynchronize(call.stream));  // `first` and `work` are released on return
  return d;
}

// x (rows x cols) transposed (cols x rows), then quantized.
DeviceOperand transposed_operand(const LinearGemmCall& call, const float* x, std::int64_t rows, std::int64_t cols,
                                 const QuantizeConfig& config) {
  DeviceBuffer t = call.ledger.allocate(static_cast<std::size_t>(rows * cols) * sizeof(float), MemoryCategory::gemm_workspace);
  transpose_device(x, rows, cols, static_cast<float*>(t.data()), call.stream);
  DeviceOperand d = quantize_operand(call, static_cast<const float*>(t.data()), cols, rows, config);
  FP8LAB_CUDA_CHECK(cudaStreamSynchronize(call.stream));  // `t` is released on return
  return d;
}

// C (a.rows x b.rows) = A B^T, or C += A B^T, by the tiled kernel; synchronizes the stream.
void multiply(const LinearGemmCall& call, const DeviceOperand& a, const DeviceOperand& b, float* c, bool accumulate) {
  const WgmmaTiledPlan plan = plan_wgmma_tiled_gemm(a.shape, b.shape, call.precision.gemm, device_sm_count());
  const std::int64_t count = a.shape.rows * b.shape.rows;
  DeviceBuffer sum;
  if (accumulate) sum = call.ledger.allocate(static_cast<std::size_t>(count) * sizeof(float), MemoryCategory::gemm_workspace);
  WgmmaTiledProblem problem;
  problem.m = a.shape.rows;
  problem.n = b.shape.rows;
  problem.k = a.shape.cols;
  problem.format = a.shape.config.format.fp8();
  problem.a = static_cast<const std::uint8_t*>(a.codes.data());
  problem.b = static_cast<const std::uint8_t*>(b.codes.data());
  problem.a_scales = static_cast<const float*>(a.scales.data());
  problem.b_scales = static_cast<const float*>(b.scales.data());
  problem.output = OutputType::fp32;
  problem.c = accumulate ? sum.data() : c;
  WgmmaTiledLaunch(problem, plan).launch(call.stream);
  if (accumulate) {
    add_into_kernel<<<static_cast<unsigned>((count + 255) / 256), 256, 0, call.stream>>>(c, static_cast<const float*>(sum.data()), count);
    FP8LAB_CUDA_CHECK(cudaGetLastError());
  }
  FP8LAB_CUDA_CHECK(cudaStreamSynchronize(call.stream));
}

}  // namespace

std::string linear_gemm_failure(const LinearGemmCall& call, GemmKind kind, std::int64_t rows, std::int64_t out,
                                std::int64_t in) {
  const std::string why = failure_reason(call, kind, rows, out, in);
  if (why.empty()) return why;
  return "cuda " + std::string(train::gemm_kind_name(kind)) + " of recipe '" + std::string(call.recipe) + "' (" +
         call.precision.describe() + ") cannot run on " + device_text() + ": " + why;
}

void fprop(const LinearGemmCall& call, const float* x, const float* w, float* y, std::int64_t rows, std::int64_t in,
           std::int64_t out) {
  refuse_unless_runs(call, GemmKind::fprop, rows, out, in);
  const GemmForm f = form_of(call, GemmKind::fprop, rows, out, in);
  multiply(call, quantize_operand(call, x, rows, in, f.a), quantize_operand(call, w, out, in, f.b), y, false);
}

void dgrad(const LinearGemmCall& call, const float* dy, const float* w, float* dx, std::int64_t rows, std::int64_t out,
           std::int64_t in) {
  refuse_unless_runs(call, GemmKind::dgrad, rows, out, in);
  const GemmForm f = form_of(call, GemmKind::dgrad, rows, out, in);
  multiply(call, quantize_operand(call, dy, rows, out, f.a), transposed_operand(call, w, out, in, f.b), dx, false);
}

void wgrad(const LinearGemmCall& call, const float* dy, const float* x, float* dw, std::int64_t rows, std::int64_t out,
           std::int64_t in, bool accumulate) {
  refuse_unless_runs(call, GemmKind::wgrad, rows, out, in);
  const GemmForm f = form_of(call, GemmKind::wgrad, rows, out, in);
  if (call.precision.requantize_transposed)
    return multiply(call, requantized_operand(call, dy, rows, out, f.a), requantized_operand(call, x, rows, in, f.b), dw,
                    accumulate);
  multiply(call, transposed_operand(call, dy, rows, out, f.a), transposed_operand(call, x, rows, in, f.b), dw, accumulate);
}

}  // namespace fp8lab::cuda
