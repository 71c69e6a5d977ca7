// --backend selection: cpu always, auto falls back to cpu, cuda and cuda-cublaslt refused with
// the reason when this build or this machine cannot (the message depends on which; each is
// checked), and the engine asked for when they are granted. The fallback decision of
// --backend auto (a GEMM the GPU engine cannot run goes to the CPU, recorded per point) is
// tested with a fake engine, so it is checked on every machine.
#include <catch2/catch.hpp>

#include <memory>
#include <stdexcept>

#include "harness/requests/backend_select.hpp"
#include "kernels/cpu/gemm_fp8_nt.hpp"
#include "kernels/cpu/quantize.hpp"

using namespace fp8lab;

TEST_CASE("backend selection: cpu, auto, and the refusals") {
  const auto cpu = select_backend("cpu", true);
  CHECK(cpu->name() == "cpu");
  CHECK(cpu->device().find("CPU emulation") != std::string::npos);
  CHECK(cpu->gemm_unavailable_reason().empty());
  // Through the interface, the CPU backend is the CPU kernels.
  const std::vector<float> x = {1.0f, -2.0f, 3.0f, 0.5f};
  const QuantizeConfig config{Fp8Format::e4m3, Granularity::row(), ScaleRule::fp32};
  CHECK(cpu->quantize(x, 2, 2, config).codes == cpu::quantize(x, 2, 2, config).codes);

  const auto automatic = select_backend("auto", true);
  CHECK((automatic->name() == "cpu" || automatic->name() == "cuda+cpu"));
  CHECK(automatic->gemm_unavailable_reason().empty());
  CHECK_THROWS_WITH(select_backend("tpu", false), Catch::Contains("--backend 'tpu' is not one of cpu, cuda, cuda-cublaslt, auto"));
  for (const char* name : {"cuda", "cuda-cublaslt"}) {
    try {
      // Where it is granted (a CUDA build on a Hopper machine), it must be the engine asked for.
      const auto cuda = select_backend(name, true);
      CHECK(cuda->name() == name);
      CHECK(cuda->gemm_unavailable_reason().empty());
    } catch (const std::invalid_argument& e) {
      const std::string why = e.what();
      INFO(why);
      CHECK((why.find("built without the CUDA backend") != std::string::npos ||
             why.find("no usable CUDA device") != std::string::npos ||
             why.find("CUDA is installed but unusable") != std::string::npos ||
             why.find("need an sm_90 (Hopper) GPU") != std::string::npos));
    }
  }
}

namespace {

// A stand-in for a GPU engine: runs only the hopper model (as the WGMMA kernel), and marks its
// outputs so a test sees which backend computed them.
class HopperOnlyBackend final : public Backend {
 public:
  explicit HopperOnlyBackend(std::string unavailable = "") : unavailable_(std::move(unavailable)) {}
  std::string name() const override { return "fake-gpu"; }
  std::string device() const override { return "a fake device"; }
  QuantizedTensor quantize(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                           const QuantizeConfig& config) override {
    ++quantized;
    return cpu::quantize(x, rows, cols, config);
  }
  QuantizedTensor requantize_transposed(const QuantizedTensor& in) override { return in; }
  std::string gemm_unavailable_reason() const override { return unavailable_; }
  std::string gemm_config_failure(const QuantizedTensor&, const QuantizedTensor&, const GemmConfig& c) const override {
    return c.accumulation == AccumulationModel::hopper() ? "" : "the fake engine runs the hopper model only";
  }
  std::vector<float> gemm_nt(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig&,
                             const cpu::GemmOptions&) override {
    return std::vector<float>(static_cast<std::size_t>(a.rows * b.rows), 42.0f);
  }
  int quantized = 0;

 private:
  std::string unavailable_;
};

// A fallback that refuses everything, to see both reasons in the refusal.
class RefusingBackend final : public Backend {
 public:
  std::string name() const override { return "refuser"; }
  std::string device() const override { return "nothing"; }
  QuantizedTensor quantize(std::span<const float>, std::int64_t, std::int64_t, const QuantizeConfig&) override {
    throw std::logic_error("not used");
  }
  QuantizedTensor requantize_transposed(const QuantizedTensor& in) override { return in; }
  std::string gemm_unavailable_reason() const override { return ""; }
  std::string gemm_config_failure(const QuantizedTensor&, const QuantizedTensor&, const GemmConfig&) const override {
    return "the refuser runs nothing";
  }
  std::vector<float> gemm_nt(const QuantizedTensor&, const QuantizedTensor&, const GemmConfig&,
                             const cpu::GemmOptions&) override {
    throw std::logic_error("not used");
  }
};

struct SmallGemm {
  std::vector<float> x = std::vector<float>(8 * 64), w = std::vector<float>(16 * 64);
  SmallGemm() {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * static_cast<float>(i % 5) - 0.5f;
  }
};

}  // namespace

TEST_CASE("backend fallback: points the primary refuses go to the CPU, recorded per point") {
  auto primary = std::make_unique<HopperOnlyBackend>();
  HopperOnlyBackend* fake = primary.get();
  const auto backend = with_fallback(std::move(primary), select_backend("cpu", true));
  CHECK(backend->name() == "fake-gpu+cpu");
  CHECK(backend->gemm_unavailable_reason().empty());

  const SmallGemm data;
  const QuantizeConfig qc{Fp8Format::e4m3, Granularity::row(), ScaleRule::fp32};
  const QuantizedTensor a = backend->quantize(data.x, 8, 64, qc), b = backend->quantize(data.w, 16, 64, qc);
  CHECK(fake->quantized == 2);  // quantization stays on the primary

  GemmConfig hopper;
  CHECK(backend->gemm_config_failure(a, b, hopper).empty());
  const Backend::GemmRoute on_primary = backend->gemm_route(a, b, hopper);
  CHECK(on_primary.backend == "fake-gpu");
  CHECK(on_primary.fallback_reason.empty());
  CHECK(backend->gemm_nt(a, b, hopper, {}) == std::vector<float>(8 * 16, 42.0f));

  GemmConfig fp32;
  fp32.accumulation = AccumulationModel::fp32();
  CHECK(backend->gemm_config_failure(a, b, fp32).empty());  // not skipped: the CPU runs it
  const Backend::GemmRoute on_cpu = backend->gemm_route(a, b, fp32);
  CHECK(on_cpu.backend == "cpu");
  CHECK_THAT(on_cpu.fallback_reason, Catch::Contains("fake-gpu: the fake engine runs the hopper model only"));
  CHECK(backend->gemm_nt(a, b, fp32, {}) == cpu::gemm_nt(a, b, fp32));
}

TEST_CASE("backend fallback: every scale rule is quantized on the primary, nvfp4:4over6 included") {
  // The CUDA backend once refused nvfp4:4over6 and the fallback sent it to the CPU; since its
  // kernel passed the GPU tests, the primary quantizes every rule.
  auto primary = std::make_unique<HopperOnlyBackend>();
  HopperOnlyBackend* fake = primary.get();
  const auto backend = with_fallback(std::move(primary), select_backend("cpu", true));
  const SmallGemm data;
  const QuantizeConfig four_over_six{ElementFormat::Kind::e2m1, Granularity::tile(16), ScaleRule::nvfp4_4over6};
  const QuantizedTensor q = backend->quantize(data.x, 8, 64, four_over_six);
  CHECK(fake->quantized == 1);
  CHECK(q.codes == cpu::quantize(data.x, 8, 64, four_over_six).codes);
}

TEST_CASE("backend fallback: a primary with no GEMMs at all hands every GEMM on") {
  const auto backend = with_fallback(std::make_unique<HopperOnlyBackend>("no tensor cores here"), select_backend("cpu", true));
  CHECK(backend->gemm_unavailable_reason().empty());
  const SmallGemm data;
  const QuantizeConfig qc{Fp8Format::e4m3, Granularity::row(), ScaleRule::fp32};
  const QuantizedTensor a = backend->quantize(data.x, 8, 64, qc), b = backend->quantize(data.w, 16, 64, qc);
  const Backend::GemmRoute route = backend->gemm_route(a, b, GemmConfig{});
  CHECK(route.backend == "cpu");
  CHECK_THAT(route.fallback_reason, Catch::Contains("no tensor cores here"));
  CHECK(backend->gemm_nt(a, b, GemmConfig{}, {}) == cpu::gemm_nt(a, b, GemmConfig{}));
}

TEST_CASE("backend fallback: when neither can run a point, the refusal names both") {
  const auto backend = with_fallback(std::make_unique<HopperOnlyBackend>(), std::make_unique<RefusingBackend>());
  const SmallGemm data;
  const QuantizeConfig qc{Fp8Format::e4m3, Granularity::row(), ScaleRule::fp32};
  const QuantizedTensor a = backend->quantize(data.x, 8, 64, qc), b = backend->quantize(data.w, 16, 64, qc);
  GemmConfig fp32;
  fp32.accumulation = AccumulationModel::fp32();
  const std::string why = backend->gemm_config_failure(a, b, fp32);
  CHECK_THAT(why, Catch::Contains("fake-gpu: the fake engine runs the hopper model only"));
  CHECK_THAT(why, Catch::Contains("refuser: the refuser runs nothing"));
  CHECK(backend->gemm_config_failure(a, b, GemmConfig{}).empty());
}
