#include "kernels/loss_scaling/loss_scaler_state.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <map>
#include <stdexcept>

namespace fp8lab {
namespace {

constexpr std::array<const char*, 5> kFields = {"variant", "scale", "clean_steps", "tolerated_overflows", "steps"};

[[noreturn]] void bad_field(std::string_view field, const std::string& message) {
  throw std::invalid_argument("loss scaler state: field '" + std::string(field) + "': " + message);
}

template <class T>
T parse_number(std::string_view field, std::string_view text) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty())
    bad_field(field, "'" + std::string(text) + "' is not a number");
  return value;
}

}  // namespace

std::string LossScalerState::to_string() const {
  std::array<char, 64> scale_text{};
  const auto written = std::to_chars(scale_text.data(), scale_text.data() + scale_text.size(), scale);
  return std::string("variant=") + loss_scaler_variant_name(variant) + ";scale=" +
         std::string(scale_text.data(), written.ptr) + ";clean_steps=" + std::to_string(clean_steps) +
         ";tolerated_overflows=" + std::to_string(tolerated_overflows) + ";steps=" + std::to_string(steps);
}

LossScalerState LossScalerState::from_string(std::string_view text) {
  std::map<std::string, std::string, std::less<>> fields;
  while (!text.empty()) {
    const std::size_t end = text.find(';');
    const std::string_view item = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    const std::size_t equals = item.find('=');
    if (equals == std::string_view::npos) bad_field(item, "expected key=value");
    const std::string_view key = item.substr(0, equals);
    bool known = false;
    for (const char* f : kFields) known = known || key == f;
    if (!known) bad_field(key, "unknown field");
    if (!fields.emplace(std::string(key), std::string(item.substr(equals + 1))).second) bad_field(key, "given twice");
  }
  for (const char* f : kFields)
    if (!fields.contains(f)) bad_field(f, "missing");

  LossScalerState s;
  try {
    s.variant = parse_loss_scaler_variant(fields["variant"]);
  } catch (const std::invalid_argument& e) {
    bad_field("variant", e.what());
  }
  s.scale = parse_number<float>("scale", fields["scale"]);
  s.clean_steps = parse_number<std::int64_t>("clean_steps", fields["clean_steps"]);
  s.tolerated_overflows = parse_number<std::int64_t>("tolerated_overflows", fields["tolerated_overflows"]);
  s.steps = parse_number<std::int64_t>("steps", fields["steps"]);
  // A PyTorch scale may have underflowed to 0 (GradScaler has no floor); anything else is damage.
  if (!(std::isfinite(s.scale) && s.scale >= 0.0f)) bad_field("scale", "must be a finite number >= 0");
  if (s.clean_steps < 0) bad_field("clean_steps", "must be >= 0");
  if (s.tolerated_overflows < 0) bad_field("tolerated_overflows", "must be >= 0");
  if (s.steps < 0) bad_field("steps", "must be >= 0");
  return s;
}

}  // namespace fp8lab
