// --backend selection: cpu always, auto falls back to cpu, cuda and cuda-cublaslt refused with
// the reason when this build or this machine cannot (the message depends on which; each is
// checked), and the engine asked for when they are granted.
#include <catch2/catch.hpp>

#include "harness/backend_select.hpp"
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
  CHECK((automatic->name() == "cpu" || automatic->gemm_unavailable_reason().empty()));
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
             why.find("need an sm_90 (Hopper) GPU") != std::string::npos));
    }
  }
}
