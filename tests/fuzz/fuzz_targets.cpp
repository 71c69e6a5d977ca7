#include "tests/fuzz/fuzz_targets.hpp"

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/tensor_io/npy.hpp"
#include "data/tensor_io/safetensors.hpp"
#include "harness/requests/operand_checks.hpp"
#include "harness/results/h5_handles.hpp"
#include "harness/study/grid.hpp"
#include "harness/study/study_kind.hpp"

namespace fp8lab::fuzz {
namespace {

// The exceptions main() reports as the user's mistake (exit 2). Anything else escapes.
template <class F>
void refusals_are_fine(F&& f) {
  try {
    f();
  } catch (const TensorFileError&) {
  } catch (const std::invalid_argument&) {
  } catch (const SpecError&) {
  } catch (const h5::H5Error&) {
  } catch (const std::filesystem::filesystem_error&) {
  }
}

std::vector<std::byte> bytes_of(const std::uint8_t* data, std::size_t size) {
  const auto* first = reinterpret_cast<const std::byte*>(data);
  return {first, first + size};
}

// What the CLI does with an operand after reading it.
void use(const Tensor& t, const std::filesystem::path& file) {
  require_matrix(t, file);
  const std::vector<float> values = t.to_float32(file);
  require_finite(values, t.shape[1], file);
}

}  // namespace

int npy_target(const std::uint8_t* data, std::size_t size) {
  refusals_are_fine([&] {
    const std::filesystem::path file = "fuzz.npy";
    use(parse_npy(bytes_of(data, size), file), file);
  });
  return 0;
}

int safetensors_target(const std::uint8_t* data, std::size_t size) {
  refusals_are_fine([&] {
    const std::filesystem::path file = "fuzz.safetensors";
    const std::vector<std::string> names = safetensors_names(bytes_of(data, size), file);
    for (std::size_t i = 0; i < names.size() && i < 4; ++i)
      refusals_are_fine([&] { use(parse_safetensors(bytes_of(data, size), file, names[i]), file); });
    parse_safetensors(bytes_of(data, size), file, "");  // the one-tensor default, or a refusal
  });
  return 0;
}

int spec_target(const std::uint8_t* data, std::size_t size) {
  refusals_are_fine([&] {
    // [tensors] paths resolve against this folder, which holds none: those specs are refused.
    const StudySpec spec = parse_study_spec(std::string(reinterpret_cast<const char*>(data), size),
                                            std::filesystem::path("/nonexistent-fp8lab-fuzz") / "spec.toml");
    std::unique_ptr<StudyKind> kind = make_study_kind(spec.kind);
    if (!kind) return;
    kind->configure(spec);
    spec.check_unknown_keys();
    // Large grids are the runner's to refuse (kMaxGridPoints); the target stays fast.
    std::size_t points = 1;
    for (const Axis& a : spec.axes) points *= std::max<std::size_t>(1, std::min<std::size_t>(a.values.size(), 1000));
    if (points > 4096) return;
    const std::vector<Point> grid = expand_grid(spec, *kind);
    kind->check_grid(spec, grid);
    for (const Point& p : grid) kind->memory_estimate(p);
  });
  return 0;
}

}  // namespace fp8lab::fuzz
