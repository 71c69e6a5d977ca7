#pragma once
// An integer axis value of a study kind (e.g. "seed", "log2_scale"): the whole text must be
// a decimal integer. Kinds check their own ranges after it.
#include <cstdint>
#include <string>

namespace fp8lab {

// Throws std::invalid_argument "<axis> '<text>' is not an integer".
std::int64_t parse_integer_axis_value(const std::string& axis, const std::string& text);

}  // namespace fp8lab
