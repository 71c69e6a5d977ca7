#include "harness/study/integer_axis_value.hpp"

#include <stdexcept>

namespace fp8lab {

std::int64_t parse_integer_axis_value(const std::string& axis, const std::string& text) {
  std::size_t used = 0;
  std::int64_t x = 0;
  try {
    x = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;  // no number, or one out of int64's range
  }
  if (used == 0 || used != text.size()) throw std::invalid_argument(axis + " '" + text + "' is not an integer");
  return x;
}

}  // namespace fp8lab
